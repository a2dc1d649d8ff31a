//! libtest's human output, read one way for the whole harness: result lines, names as `--list` and `--exact` spell them, summaries, `--list` and the terse (`-q`) progress.
//!
//! Formats read (as printed by libtest of Rust 1.95 and rustdoc; see `fixtures/ci/corpus-*`
//! for captures from real runs):
//! - result lines `test NAME[ - MODE] ... OUTCOME`, where MODE is libtest's test mode
//!   (`should panic`, `compile fail`, `compile`) and OUTCOME is `ok`, `FAILED`, `ignored`,
//!   `ignored, REASON` or `bench: ...`. The name is what `--list` prints and `--exact`
//!   matches; doc test names carry their `(line N)` and keep it. A name may be padded on
//!   the right (benchmarks); the padding is not part of it.
//! - `running N tests`, `test result: ok|FAILED. P passed; F failed; I ignored; M measured;
//!   X filtered out; finished in T`.
//! - `---- NAME stdout ----` failure sections and the `failures:` list.
//! - `--list`: `NAME: test` / `NAME: benchmark` and `N tests, M benchmarks`.
//! - terse (`-q`) progress: one character per test (`.` passed, `F` failed, `i` ignored,
//!   `b` bench), with ` K/N` after each block of 100: no names.
//!
//! `--format json` is not read: libtest accepts it only with `-Z unstable-options`, which
//! a stable toolchain refuses.

use std::collections::BTreeMap;

/// libtest's test modes, printed after the name (`test NAME - should panic ... ok`).
pub const TEST_MODES: [&str; 3] = ["should panic", "compile fail", "compile"];

/// The outcome a result line states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `ok` (or a benchmark's `bench: ...`).
    Passed,
    /// `FAILED` (any suffix, e.g. `FAILED (time limit exceeded)`).
    Failed,
    /// `ignored` or `ignored, REASON`.
    Ignored,
}

/// One `test NAME ... OUTCOME` line, split into its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultLine<'a> {
    /// The test's name as `--list` prints it.
    pub name: &'a str,
    /// The test mode printed after the name, if any (`should panic`, `compile fail`, `compile`).
    pub mode: Option<&'static str>,
    /// The outcome; `None` when the line ends at `... ` (the outcome follows the test's
    /// own output on a later line, as with `--nocapture`).
    pub status: Option<Status>,
    /// The reason of `ignored, REASON`.
    pub reason: Option<&'a str>,
}

/// The name `--list` and `--exact` use for a printed test name: the test mode suffix
/// (` - should panic`, ` - compile fail`, ` - compile`) and padding removed.
pub fn test_name(printed: &str) -> (&str, Option<&'static str>) {
    let name = printed.trim_end();
    for mode in TEST_MODES {
        if let Some(base) = name.strip_suffix(mode).and_then(|b| b.strip_suffix(" - ")) {
            return (base.trim_end(), Some(mode));
        }
    }
    (name, None)
}

/// The outcome word(s) after ` ... `.
pub fn status_of(outcome: &str) -> Option<(Status, Option<&str>)> {
    let s = outcome.trim();
    if s == "ok" || s.starts_with("ok (") || s.starts_with("bench:") {
        Some((Status::Passed, None))
    } else if s == "FAILED" || s.starts_with("FAILED ") {
        Some((Status::Failed, None))
    } else if s == "ignored" {
        Some((Status::Ignored, None))
    } else {
        s.strip_prefix("ignored, ")
            .map(|reason| (Status::Ignored, Some(reason)))
    }
}

/// Parse `rest`, the text after `test ` on a result line. `None`: not a result line (for
/// example libtest's `test NAME has been running for over 60 seconds`).
pub fn parse_result(rest: &str) -> Option<ResultLine<'_>> {
    // `NAME ... OUTCOME`; a doc test's name holds spaces but never ` ... `.
    let (printed, outcome) = match rest.rsplit_once(" ... ") {
        Some((p, o)) => (p, Some(o)),
        None => (rest.strip_suffix(" ...")?, None),
    };
    let (name, mode) = test_name(printed);
    if name.is_empty() {
        return None;
    }
    match outcome.map(str::trim) {
        None | Some("") => Some(ResultLine {
            name,
            mode,
            status: None,
            reason: None,
        }),
        Some(o) => {
            let (status, reason) = status_of(o)?;
            Some(ResultLine {
                name,
                mode,
                status: Some(status),
                reason,
            })
        }
    }
}

/// A `test result:` summary line's counts (the harness's one reading of that line; the CI
/// log reader keeps its place beside it, `ci::testlog::Summary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct SummaryCounts {
    /// `ok` (true) or `FAILED` (false).
    pub ok: bool,
    /// Tests passed.
    pub passed: u64,
    /// Tests failed.
    pub failed: u64,
    /// Tests ignored.
    pub ignored: u64,
    /// Benchmarks measured.
    pub measured: u64,
    /// Tests the name filter excluded.
    pub filtered_out: u64,
}

/// `ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s`
/// (the text after `test result: `).
pub fn parse_summary(rest: &str) -> Option<SummaryCounts> {
    let (verdict, counts) = rest.split_once(". ")?;
    let ok = match verdict {
        "ok" => true,
        "FAILED" => false,
        _ => return None,
    };
    let mut s = SummaryCounts {
        ok,
        ..SummaryCounts::default()
    };
    for part in counts.split(';') {
        let Some((n, word)) = part.trim().split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match word {
            "passed" => s.passed = n,
            "failed" => s.failed = n,
            "ignored" => s.ignored = n,
            "measured" => s.measured = n,
            "filtered out" => s.filtered_out = n,
            _ => {}
        }
    }
    Some(s)
}

/// `running N tests` / `running 1 test` → N.
pub fn parse_running(t: &str) -> Option<u64> {
    let rest = t.strip_prefix("running ")?;
    rest.strip_suffix(" tests")
        .or_else(|| rest.strip_suffix(" test"))?
        .parse()
        .ok()
}

/// `---- NAME stdout ----` (a failure section's heading) → NAME.
pub fn failure_heading(line: &str) -> Option<&str> {
    line.strip_prefix("---- ")?.strip_suffix(" stdout ----")
}

/// A `--list` entry `NAME: test` → NAME (benchmarks are `NAME: benchmark` and give `None`).
pub fn list_entry(line: &str) -> Option<&str> {
    line.strip_suffix(": test")
}

/// `N tests, M benchmarks` (the `--list` closing line) → N.
pub fn parse_list_count(t: &str) -> Option<u64> {
    let (tests, rest) = t.split_once(", ")?;
    if !(rest.ends_with(" benchmarks") || rest.ends_with(" benchmark")) {
        return None;
    }
    tests
        .strip_suffix(" tests")
        .or_else(|| tests.strip_suffix(" test"))?
        .parse()
        .ok()
}

/// Whether `t` is a line of terse (`-q`) progress: only `.`, `F`, `i` and `b` characters,
/// optionally ending in ` K/N` (printed after each block of 100 tests).
pub fn is_terse_progress(t: &str) -> bool {
    let marks = match t.rsplit_once(' ') {
        Some((marks, count)) => {
            let Some((k, n)) = count.split_once('/') else {
                return false;
            };
            if !(k.bytes().all(|b| b.is_ascii_digit()) && n.bytes().all(|b| b.is_ascii_digit())) {
                return false;
            }
            marks.trim_end()
        }
        None => t,
    };
    !marks.is_empty()
        && marks
            .bytes()
            .all(|b| matches!(b, b'.' | b'F' | b'i' | b'b'))
}

/// Whether `name` is a doc test's, as rustdoc names them: `FILE - ITEM (line N)`
/// (`src/lib.rs - Either<L,R>::left (line 34)`; ITEM is empty for a crate's own docs:
/// `src/lib.rs - (line 1)`). The test of a `--lib`, `--bin` or `--test` target is a path of
/// identifiers joined by `::` and never holds a space.
pub fn is_doc_test(name: &str) -> bool {
    name.contains(" - ") && name.ends_with(')') && name.contains(" (line ")
}

/// A doc test's name `FILE - ITEM (line N)` in parts: (`FILE`, the name up to ` (line`,
/// `N`); `None` for any other name.
pub fn doc_test_parts(name: &str) -> Option<(&str, &str, usize)> {
    if !is_doc_test(name) {
        return None;
    }
    let (file, _) = name.split_once(" - ")?;
    let (head, n) = name.rsplit_once(" (line ")?;
    Some((file, head, n.strip_suffix(')')?.parse().ok()?))
}

/// The filter that selects doc test `name` when given to `cargo test --doc -- FILTER`:
/// rustdoc splits its test arguments at whitespace (each piece is a substring filter of
/// its own), so a doc test's whole name would select every doc test (its ` - ` piece
/// matches them all). The filter is the name's ITEM part when it holds no whitespace, else
/// its FILE part, else its longest whitespace-free piece: always a substring of `name`, so
/// the tests it selects are a superset holding `name`.
pub fn doc_test_filter(name: &str) -> &str {
    if let Some((file, rest)) = name.split_once(" - ") {
        let item = rest.rsplit_once(" (line ").map_or(rest, |(i, _)| i);
        if !item.is_empty() && !item.contains(char::is_whitespace) {
            return item;
        }
        if !file.is_empty() && !file.contains(char::is_whitespace) {
            return file;
        }
    }
    name.split_whitespace()
        .max_by_key(|p| p.len())
        .unwrap_or(name)
}

/// Test names from `--list` output (`NAME: test` lines, in order; benchmarks skipped).
pub fn parse_list(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(list_entry)
        .map(str::to_string)
        .collect()
}

/// What [`parse_transcript`] found in one run's standard output.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The outcome per test name (`--list` spelling).
    pub results: BTreeMap<String, Status>,
    /// Captured output per failed test (its `---- NAME stdout ----` section).
    pub messages: BTreeMap<String, String>,
    /// One entry per `running N tests` line (one per test binary that started its tests),
    /// in order: whether that binary's `test result:` summary line followed it.
    pub blocks: Vec<bool>,
}

/// Parse libtest's human output of one run: result lines (names normalised by
/// [`test_name`]; an outcome printed on a later line after the test's own output is
/// joined to its name) and the `---- NAME stdout ----` sections of the failure summary,
/// each running to the next section or to the `failures:` list that follows them.
pub fn parse_transcript(stdout: &str) -> Transcript {
    let mut out = Transcript::default();
    let mut section: Option<(String, Vec<&str>)> = None;
    let mut pending: Option<String> = None;
    let close = |section: &mut Option<(String, Vec<&str>)>, out: &mut Transcript| {
        if let Some((name, lines)) = section.take() {
            out.messages
                .insert(name, lines.join("\n").trim().to_string());
        }
    };
    for line in stdout.lines() {
        if let Some(name) = failure_heading(line) {
            close(&mut section, &mut out);
            section = Some((name.to_string(), Vec::new()));
            continue;
        }
        if parse_running(line).is_some() {
            out.blocks.push(false);
        }
        if line.starts_with("test result: ")
            && let Some(done) = out.blocks.last_mut()
        {
            *done = true;
        }
        if line == "failures:" || line.starts_with("test result: ") {
            close(&mut section, &mut out);
            continue;
        }
        if let Some((_, lines)) = section.as_mut() {
            lines.push(line);
            continue;
        }
        if let Some(r) = line.strip_prefix("test ").and_then(parse_result) {
            match r.status {
                Some(s) => {
                    out.results.insert(r.name.to_string(), s);
                    pending = None;
                }
                None => pending = Some(r.name.to_string()),
            }
            continue;
        }
        if let Some(name) = pending.as_ref()
            && let Some((s, _)) = status_of(line)
        {
            out.results.insert(name.clone(), s);
            pending = None;
        }
    }
    close(&mut section, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_test_names_and_their_filters() {
        // Names as `cargo test --doc -- --list` prints them (rustdoc of Rust 1.95).
        let item = "src/lib.rs - Either<L,R>::left (line 34)";
        assert!(is_doc_test(item));
        assert_eq!(doc_test_filter(item), "Either<L,R>::left");
        let krate = "src/lib.rs - (line 1)";
        assert!(is_doc_test(krate));
        assert_eq!(doc_test_filter(krate), "src/lib.rs");
        let spaced = "src/my lib.rs - Pair<A, B>::new (line 9)";
        assert_eq!(doc_test_filter(spaced), "B>::new");
        for n in [item, krate, spaced] {
            assert!(n.contains(doc_test_filter(n)), "{n}");
        }
        assert!(!is_doc_test("tests::is_right_sees_the_right_side"));
        assert!(!is_doc_test("left_and_right_are_told_apart"));
    }
    use proptest::prelude::*;

    const SAMPLE: &str = "\nrunning 3 tests\ntest a::one ... ok\ntest a::two ... FAILED\ntest a::three - should panic ... ok\ntest a::four ... ignored, too slow\n\nfailures:\n\n---- a::two stdout ----\n\nthread 'a::two' panicked at tests/x.rs:3:5:\nassertion `left == right` failed\n  left: 1\n right: 2\nnote: run with `RUST_BACKTRACE=1`\n\n\nfailures:\n    a::two\n\ntest result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";

    #[test]
    fn transcript_results_and_failure_sections() {
        let p = parse_transcript(SAMPLE);
        assert_eq!(p.results["a::one"], Status::Passed);
        assert_eq!(p.results["a::two"], Status::Failed);
        assert_eq!(p.results["a::three"], Status::Passed);
        assert_eq!(p.results["a::four"], Status::Ignored);
        assert_eq!(p.results.len(), 4);
        let m = &p.messages["a::two"];
        assert!(m.starts_with("thread 'a::two' panicked"), "{m}");
        assert!(m.contains(" right: 2"), "{m}");
        assert!(!m.contains("failures:"), "{m}");
    }

    #[test]
    fn list_output_names_tests_only() {
        let l = parse_list("a::x: test\nb: test\nbench_y: benchmark\n\n2 tests, 1 benchmark\n");
        assert_eq!(l, vec!["a::x".to_string(), "b".to_string()]);
    }

    #[test]
    fn every_test_mode_is_removed_from_the_name() {
        for (printed, name, mode) in [
            (
                "tests::panics - should panic",
                "tests::panics",
                Some("should panic"),
            ),
            (
                "src/lib.rs - add (line 8) - compile fail",
                "src/lib.rs - add (line 8)",
                Some("compile fail"),
            ),
            (
                "src/lib.rs - add (line 12) - compile",
                "src/lib.rs - add (line 12)",
                Some("compile"),
            ),
            (
                "src/lib.rs - add (line 4)",
                "src/lib.rs - add (line 4)",
                None,
            ),
            ("bench_sum   ", "bench_sum", None),
        ] {
            assert_eq!(test_name(printed), (name, mode), "{printed}");
        }
    }

    #[test]
    fn result_lines_keep_the_ignore_reason_apart() {
        let r = parse_result("tests::slow ... ignored, needs the network").unwrap();
        assert_eq!(
            (r.name, r.status, r.reason),
            (
                "tests::slow",
                Some(Status::Ignored),
                Some("needs the network")
            )
        );
        assert_eq!(parse_result("x has been running for over 60 seconds"), None);
        let pending = parse_result("tests::noisy ... ").unwrap();
        assert_eq!((pending.name, pending.status), ("tests::noisy", None));
    }

    #[test]
    fn terse_progress_is_told_from_other_lines() {
        assert!(is_terse_progress("......ii"));
        assert!(is_terse_progress("..F.i 100/250"));
        assert!(!is_terse_progress("running 3 tests"));
        assert!(!is_terse_progress(". 1/x"));
        assert!(!is_terse_progress(""));
    }

    proptest! {
        /// Whatever the names, modes and outcomes, a rendered transcript parses back to them.
        #[test]
        fn rendered_transcripts_round_trip(
            tests in proptest::collection::btree_map("[a-z_]{1,8}(::[a-z_]{1,8}){0,2}", (0u8..3, 0usize..4), 0..12),
            msg in "[a-zA-Z0-9 :`=]{0,30}",
        ) {
            let mut s = format!("\nrunning {} tests\n", tests.len());
            for (name, (kind, mode)) in &tests {
                let word = ["ok", "FAILED", "ignored, why not"][*kind as usize];
                let mode = ["", " - should panic", " - compile fail", " - compile"][*mode];
                s.push_str(&format!("test {name}{mode} ... {word}\n"));
            }
            let failed: Vec<&String> = tests.iter().filter(|(_, k)| k.0 == 1).map(|(n, _)| n).collect();
            if !failed.is_empty() {
                s.push_str("\nfailures:\n\n");
                for n in &failed {
                    s.push_str(&format!("---- {n} stdout ----\npanicked: {msg} in {n}\n\n"));
                }
                s.push_str("\nfailures:\n");
                for n in &failed {
                    s.push_str(&format!("    {n}\n"));
                }
            }
            s.push_str("\ntest result: ok. 0 passed; 0 failed\n\n");
            let p = parse_transcript(&s);
            prop_assert_eq!(p.results.len(), tests.len());
            for (name, (kind, _)) in &tests {
                let want = [Status::Passed, Status::Failed, Status::Ignored][*kind as usize];
                prop_assert_eq!(p.results[name], want);
            }
            prop_assert_eq!(p.messages.len(), failed.len());
            for n in failed {
                let want = format!("panicked: {msg} in {n}");
                prop_assert_eq!(p.messages[n].as_str(), want.trim());
            }
        }

        /// Summary lines round-trip for any counts.
        #[test]
        fn summary_counts_parse(p in 0u64..1_000_000, f in 0u64..1000, i in 0u64..1000, x in 0u64..1_000_000, ok in any::<bool>()) {
            let text = format!("{}. {p} passed; {f} failed; {i} ignored; 0 measured; {x} filtered out; finished in 0.01s",
                if ok { "ok" } else { "FAILED" });
            let s = parse_summary(&text).unwrap();
            prop_assert_eq!((s.ok, s.passed, s.failed, s.ignored, s.filtered_out), (ok, p, f, i, x));
        }
    }
}
