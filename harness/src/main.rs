//! `harness` command-line entry point.

fn main() {
    println!("harness {}", env!("CARGO_PKG_VERSION"));
}
