//! Standard output and error that never stop a run: a closed stream (`harness battery ... |
//! head -2`, a terminal gone away) drops what is written to it instead of panicking, so the
//! run goes on, writes its report and exits with its documented code.
//!
//! The crate's `println!`, `print!` and `eprintln!` are the macros of `lib.rs`,
//! which shadow std's and write through these functions.

use std::fmt;
use std::io::Write;

/// Writes `args` (and a newline when `newline`) to standard output; a failed write is
/// dropped.
pub fn out(args: fmt::Arguments<'_>, newline: bool) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_fmt(args);
    if newline {
        let _ = o.write_all(b"\n");
    }
    let _ = o.flush();
}

/// Writes `args` (and a newline when `newline`) to standard error; a failed write is
/// dropped.
pub fn err(args: fmt::Arguments<'_>, newline: bool) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(args);
    if newline {
        let _ = e.write_all(b"\n");
    }
}
