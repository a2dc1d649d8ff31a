//! `genai`: command-line front end of the engine.

fn main() {
    println!("genai {}", env!("CARGO_PKG_VERSION"));
}
