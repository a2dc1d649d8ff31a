//! `genai serve --kv-dtype`: the server's KV cache element type, and so its default byte budget, follow the flag.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/packages/tiny-decoder/model.gguf"
);

/// Start `genai serve` on a free port with `extra` arguments, read its start-up lines up to
/// the "ready" one, stop it, and return that line.
fn ready_line(extra: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genai"))
        .args([
            "serve",
            "--port",
            "0",
            "--max-running",
            "2",
            "--model",
            MODEL,
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("genai serve starts");
    let stderr = child.stderr.take().expect("piped stderr");
    let t0 = Instant::now();
    let mut seen = Vec::new();
    let mut ready = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("stderr is text");
        if line.contains("ready;") {
            ready = Some(line);
            break;
        }
        seen.push(line);
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no ready line: {seen:?}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    ready.unwrap_or_else(|| panic!("genai serve ended before it was ready: {seen:?}"))
}

/// The number before `what` in `line`.
fn number_before(line: &str, what: &str) -> u64 {
    let head = &line[..line
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?} in {line:?}"))];
    head.split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {what:?} in {line:?}"))
}

#[test]
fn kv_dtype_sets_the_cache_type_and_the_default_budget() {
    // The tiny decoder: 2 (K and V) x 2 layers x 2 KV heads x 8 dims per position.
    let elems = 2 * 2 * 2 * 8;
    for (args, elem_bytes) in [
        (&[][..], 2),
        (&["--kv-dtype", "f16"][..], 2),
        (&["--kv-dtype", "f32"][..], 4),
    ] {
        let line = ready_line(args);
        let bpt = number_before(&line, "bytes per token");
        assert_eq!(bpt, elems * elem_bytes, "{args:?}: {line}");
        // The default budget: --max-running 2 sequences of 2048 tokens.
        assert_eq!(
            number_before(&line, "tokens at"),
            2 * 2048,
            "{args:?}: {line}"
        );
        assert_eq!(
            number_before(&line, "bytes ="),
            2 * 2048 * bpt,
            "{args:?}: {line}"
        );
    }
}
