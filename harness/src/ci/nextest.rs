//! cargo-nextest's status lines, read field by field: status (with `TRY n`), duration, running counter, binary id, test name.
//!
//! The line nextest prints per test event (cargo-nextest 0.9; see
//! `fixtures/ci/corpus-nextest-*` for real captures) is
//!
//! ```text
//! {STATUS:>12} [DURATION] [(COUNTER)] BINARY-ID TEST-NAME
//! ```
//!
//! - STATUS: a final status (`PASS`, `FAIL`, `FAIL + LEAK`, `XFAIL`, `LEAK`, `LEAK-FAIL`,
//!   `TIMEOUT`, `SIG<NAME>`, `ABORT`, `ABORT SIG n`, `SKIP`), an attempt's
//!   (`TRY n <STATUS>`, short forms `LKFAIL`, `TMT` included), the closing recap's
//!   `FLAKY a/b` (passed on attempt a of b) and `FLKY-FL a/b` (the same under
//!   `--flaky-result fail`, counted failed), or an event that is no outcome (`SLOW`, `TRY n SLOW`, `TERMINATING`,
//!   `TRY n TRMNTG`, `RETRY a/b`, `DELAY a/b`, `START`).
//! - DURATION: `[   0.005s]`, `[>  0.500s]` (slow), `[         ]` (retry), or the progress
//!   bar's elapsed time `[ 00:00:01]` (the bar's list of running tests, not an event).
//! - COUNTER: `( 1/12)` when no progress bar is drawn (CI=true, or not a terminal; since
//!   0.9.9x), `(─────)`/`(-----)` on lines that finish no test; absent in older releases and
//!   with `NEXTEST_HIDE_PROGRESS_BAR`.
//! - BINARY-ID: `package`, `package::name`, `package::bin/name` (also `test/`, `bench/`,
//!   `example/`).
//! - TEST-NAME: the libtest name (no spaces).
//!
//! A line that starts like a status line but does not fit is reported as
//! [`Parsed::Unplaceable`], never read as a new binary.

/// What a status line says about its test (the CI log reader maps it onto its own outcomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Passed (`PASS`, `LEAK`).
    Passed,
    /// Passed on a retry after failing (the recap's `FLAKY a/b`).
    Flaky,
    /// Failed (`FAIL`, `XFAIL`, `LEAK-FAIL`, `TIMEOUT`, `SIG<NAME>`, `ABORT`, `FLKY-FL a/b`, ...).
    Failed,
    /// Skipped (`SKIP`).
    Ignored,
}

/// One status line's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusLine<'a> {
    /// The status as printed (`PASS`, `TRY 2 FAIL`, `SLOW`, ...).
    pub status: String,
    /// The attempt number of `TRY n` / `FLAKY n/m`.
    pub attempt: Option<u32>,
    /// The test's outcome, `None` for events that finish nothing (SLOW, RETRY, ...).
    pub outcome: Option<Outcome>,
    /// The running counter `(k/n)`, when printed with numbers.
    pub counter: Option<(u64, u64)>,
    /// The binary id.
    pub binary_id: &'a str,
    /// The test name.
    pub test: &'a str,
}

/// What [`parse_status_line`] made of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// Not a status line (a heading, captured output, a summary, ...).
    NotStatus,
    /// A status line.
    Status(StatusLine<'a>),
    /// It starts like a status line, but a field does not fit: why.
    Unplaceable(String),
}

/// What a final status word says about the test.
fn final_outcome(word: &str) -> Option<Outcome> {
    match word {
        "PASS" | "LEAK" => Some(Outcome::Passed),
        "FAIL" | "XFAIL" | "LEAK-FAIL" | "LKFAIL" | "TIMEOUT" | "TMT" | "ABORT" => {
            Some(Outcome::Failed)
        }
        "SKIP" => Some(Outcome::Ignored),
        w if w.len() > 3
            && w.starts_with("SIG")
            && w[3..].bytes().all(|b| b.is_ascii_uppercase()) =>
        {
            Some(Outcome::Failed)
        }
        _ => None,
    }
}

fn is_status_word(w: &str) -> bool {
    w.len() >= 3
        && w.bytes()
            .all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'+')
}

fn is_count_pair(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.trim().split_once('/')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// Read the status part (the words before the duration): outcome and attempt, or `Err`
/// when the words are no status nextest prints. `Ok(None)` outcome: an event.
fn read_status(words: &[&str]) -> Result<(Option<Outcome>, Option<u32>), String> {
    let bad = || format!("unknown status {:?}", words.join(" "));
    match words {
        [w] => match *w {
            "SLOW" | "TERMINATING" | "START" => Ok((None, None)),
            w => final_outcome(w).map(|o| (Some(o), None)).ok_or_else(bad),
        },
        ["FAIL", "+", "LEAK"] => Ok((Some(Outcome::Failed), None)),
        ["ABORT", "SIG", n] if n.parse::<u32>().is_ok() => Ok((Some(Outcome::Failed), None)),
        ["SETUP", ..] => Ok((None, None)),
        ["RETRY" | "DELAY", pair] if is_count_pair(pair).is_some() => Ok((None, None)),
        ["FLAKY", pair] => {
            let (a, _) = is_count_pair(pair).ok_or_else(bad)?;
            Ok((Some(Outcome::Flaky), Some(a as u32)))
        }
        // `--flaky-result fail` (or the profile's `flaky-result = "fail"`): it passed on
        // attempt a, and the run counts it failed.
        ["FLKY-FL", pair] => {
            let (a, _) = is_count_pair(pair).ok_or_else(bad)?;
            Ok((Some(Outcome::Failed), Some(a as u32)))
        }
        ["TRY", n, rest @ ..] => {
            let n: u32 = n.parse().map_err(|_| bad())?;
            match rest {
                ["SLOW" | "TRMNTG"] => Ok((None, Some(n))),
                _ => {
                    let (o, _) = read_status(rest)?;
                    match o {
                        Some(o) => Ok((Some(o), Some(n))),
                        None => Err(bad()),
                    }
                }
            }
        }
        _ => Err(bad()),
    }
}

/// Split one (cleaned, trimmed) line into a status line's fields.
pub fn parse_status_line(t: &str) -> Parsed<'_> {
    let Some(first) = t.split_whitespace().next() else {
        return Parsed::NotStatus;
    };
    if !is_status_word(first) {
        return Parsed::NotStatus;
    }
    // The status runs up to the duration's `[` (START has none: up to the counter's `(`).
    let Some(open) = t.find(['[', '(']) else {
        return Parsed::NotStatus;
    };
    let words: Vec<&str> = t[..open].split_whitespace().collect();
    if words.is_empty()
        || !words
            .iter()
            .all(|w| is_status_word(w) || w.contains('/') || w.bytes().all(|b| b.is_ascii_digit()))
    {
        return Parsed::NotStatus;
    }
    let (outcome, attempt) = match read_status(&words) {
        Ok(x) => x,
        Err(why) => return Parsed::Unplaceable(why),
    };
    let mut rest = &t[open..];
    if let Some(r) = rest.strip_prefix('[') {
        let Some((duration, after)) = r.split_once(']') else {
            return Parsed::Unplaceable("unclosed duration `[`".to_string());
        };
        let d = duration.trim();
        let hms = d.len() == 8
            && d.bytes().enumerate().all(|(i, b)| {
                if i == 2 || i == 5 {
                    b == b':'
                } else {
                    b.is_ascii_digit()
                }
            });
        if hms {
            // The progress bar's list of running tests: `SLOW [ 00:00:01] binary test`.
            return Parsed::NotStatus;
        }
        let secs = d.trim_start_matches('>').trim_start_matches("by").trim();
        let ok = d.is_empty()
            || secs
                .strip_suffix('s')
                .is_some_and(|n| n.parse::<f64>().is_ok());
        if !ok {
            return Parsed::Unplaceable(format!("duration [{duration}] is not seconds"));
        }
        rest = after.trim_start();
    }
    let mut counter = None;
    if let Some(r) = rest.strip_prefix('(') {
        let Some((inner, after)) = r.split_once(')') else {
            return Parsed::Unplaceable("unclosed counter `(`".to_string());
        };
        if let Some(pair) = is_count_pair(inner) {
            counter = Some(pair);
        } else if !inner.chars().all(|c| c == '─' || c == '-' || c == ' ') {
            return Parsed::Unplaceable(format!("counter ({inner}) is not `k/n`"));
        }
        rest = after.trim_start();
    }
    let mut fields = rest.split_whitespace();
    let (Some(binary_id), Some(test)) = (fields.next(), fields.next()) else {
        return Parsed::Unplaceable("no binary id and test name after the status".to_string());
    };
    if let Some(extra) = fields.next() {
        return Parsed::Unplaceable(format!("unexpected {extra:?} after the test name"));
    }
    if !valid_binary_id(binary_id) {
        return Parsed::Unplaceable(format!("{binary_id:?} is not a binary id"));
    }
    Parsed::Status(StatusLine {
        status: words.join(" "),
        attempt,
        outcome,
        counter,
        binary_id,
        test,
    })
}

/// `package`, `package::name` or `package::KIND/name` (KIND `bin`, `test`, `bench`, `example`).
pub fn valid_binary_id(id: &str) -> bool {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.')
    };
    match id.split_once("::") {
        None => name_ok(id),
        Some((pkg, target)) => {
            let target = match target.split_once('/') {
                Some(("bin" | "test" | "bench" | "example", n)) => n,
                Some(_) => return false,
                None => target,
            };
            name_ok(pkg) && name_ok(target)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(t: &str) -> StatusLine<'_> {
        match parse_status_line(t) {
            Parsed::Status(s) => s,
            other => panic!("{t}: {other:?}"),
        }
    }

    #[test]
    fn counter_is_never_the_binary_id() {
        let s = status("PASS [   0.009s] ( 1/12) acme-codec tests::deep::er::nested");
        assert_eq!(
            (s.binary_id, s.test, s.counter, s.outcome),
            (
                "acme-codec",
                "tests::deep::er::nested",
                Some((1, 12)),
                Some(Outcome::Passed)
            )
        );
        let s = status("TRY 1 FAIL [   0.004s] (─────) acme-codec::round_trip flaky_once");
        assert_eq!(
            (s.attempt, s.outcome, s.counter),
            (Some(1), Some(Outcome::Failed), None)
        );
        let s = status("PASS [   0.010s] lanes-sample::alpha adds_small");
        assert_eq!((s.binary_id, s.counter), ("lanes-sample::alpha", None));
    }

    #[test]
    fn events_finish_nothing() {
        for t in [
            "SLOW [>  0.500s] (─────) acme-codec::round_trip slow",
            "TRY 2 SLOW [>  1.000s] (─────) a::b c",
            "RETRY 2/3 [         ] (─────) a::b c",
        ] {
            assert_eq!(status(t).outcome, None, "{t}");
        }
        assert_eq!(
            parse_status_line("SLOW [ 00:00:01] acme-codec::round_trip slow"),
            Parsed::NotStatus
        );
    }

    #[test]
    fn lines_that_do_not_fit_are_unplaceable() {
        for t in [
            "PASS [   0.009s] (1/x) pkg test",
            "PASS [   0.009s] pkg",
            "PASS [   0.009s] (1/2) pkg::weird/kind test",
            "BOGUS [   0.009s] pkg test",
            "PASS [soon] pkg test",
        ] {
            assert!(
                matches!(parse_status_line(t), Parsed::Unplaceable(_)),
                "{t}: {:?}",
                parse_status_line(t)
            );
        }
        assert_eq!(
            parse_status_line("Summary [ 1.2s] 3 tests run"),
            Parsed::NotStatus
        );
        assert_eq!(parse_status_line("running 1 test"), Parsed::NotStatus);
    }
}
