//! Kernel benchmarks (filled in by the kernels work).
fn main() {}
