//! What the commands measure and report: rates, medians, resident memory and the memory bound (1.3 × file + KV cache).

use anyhow::{Context, Result};

/// `n` per second over `secs` (0 when no time passed).
pub(crate) fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

/// The median of `v` (sorted in place; the mean of the middle two for an even count).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The process's resident set size in bytes (`VmRSS` of /proc/self/status).
pub(crate) fn resident_bytes() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("/proc/self/status has no VmRSS line")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("malformed VmRSS line")?
        .parse()
        .context("malformed VmRSS value")?;
    Ok(kb * 1024)
}

/// The memory bound: 1.3 × the GGUF file plus the KV cache, in bytes.
pub(crate) fn memory_bound(file_bytes: u64, kv_bytes: u64) -> u64 {
    file_bytes * 13 / 10 + kv_bytes
}

/// Prints the memory-bound line: the bound, and whether `rss` is within it.
pub(crate) fn memory_bound_line(rss: u64, file_bytes: u64, kv_bytes: u64) {
    let bound = memory_bound(file_bytes, kv_bytes);
    println!(
        "memory bound    {bound} (1.3 x file + KV cache {kv_bytes}): resident {rss} is {}",
        if rss <= bound { "within" } else { "OVER" }
    );
}
