//! Per-mutant timeouts in switch mode: each test that reaches a switched mutation is timed once on its own, unmutated and run as the mutants run it, and a reach-selected mutant's test run times out at the least of the battery's timeout and `timeout_factor` x its tests' seconds + `timeout_margin_secs`.
//!
//! Why: the battery's timeout (`timeout_factor` x the slowest baseline run, never under
//! `timeout_floor_secs`) fits a run of every listed test. A reach-selected mutant runs a
//! few of them, often in milliseconds, so a mutant that hangs would hold its job for the
//! whole battery timeout: on a crate with fast tests, a handful of hangs then cost more
//! than every other mutant together. PIT (1.25 x the covering tests' time + 4 s) and
//! Stryker (1.5 x + 5 s) time each mutant out from the time of the tests that cover it
//! for the same reason; cargo-mutants 27.1.0 has one timeout for every mutant (at least
//! 20 s).
//!
//! How the seconds are taken: after the reach run, each test that reaches a switched
//! mutation runs once more, alone, with no mutant selected, as a mutant's run starts it
//! (from its executable when it runs directly, from its kept executable when it is a kept
//! doc test, else through `cargo test`), up to `-j N` at once as the mutants run. A test
//! whose reach run took a second or more is not run again: its reach run's seconds, which
//! hold `cargo test`'s start-up (and a doc test's build) besides its own time, bound it
//! closely enough, and a second run would cost as much again. A test
//! that does not pass there makes the per-mutant timeouts unused for the whole battery (every
//! mutant keeps the battery's timeout), and `switch.json` says why. A mutant's selected
//! tests run in one go and partly side by side, so the sum of their own seconds is at least
//! what they take together unmutated.
//!
//! What it changes: a mutant that makes its tests slower than `timeout_factor` times their
//! own time plus the margin is TIMEOUT where, under the battery's timeout alone, it might
//! have finished (and been KILLED or SURVIVED). The margin takes the start of processes and
//! the load of other jobs; raise it (or run `--all-tests`, which selects no tests and so
//! sets no per-mutant timeout) when a machine is slow to start processes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::battery::execute::parallel;
use crate::battery::execute::stop::Stop;
use crate::cargo::{CargoCmd, Outcome};

/// The selected tests' own seconds and the catalog's factor and margin.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timing {
    /// Per test, its wall seconds on its own, unmutated.
    pub seconds: BTreeMap<String, f64>,
    /// `timeout_factor`.
    pub factor: f64,
    /// `timeout_margin_secs`.
    pub margin: f64,
}

impl Timing {
    /// The timeout of a mutant's run of `tests` under the battery's timeout `battery`:
    /// `min(battery, factor x sum of the tests' seconds + margin)`, or `battery` when a test
    /// of `tests` was not timed.
    pub fn timeout(&self, tests: &[String], battery: Duration) -> Duration {
        let mut sum = 0.0;
        for t in tests {
            match self.seconds.get(t) {
                Some(s) => sum += s,
                None => return battery,
            }
        }
        let own = self.factor * sum + self.margin;
        if own.is_finite() && own < battery.as_secs_f64() {
            Duration::from_secs_f64(own)
        } else {
            battery
        }
    }
}

/// Runs each of `tests` once on its own with `cmd` (no mutant selected; `cmd` runs the
/// direct and kept tests as the mutants' runs do), up to `jobs` at once, each under
/// `timeout`, and returns each test's wall seconds; `Ok(Err(why))` when a test did not pass,
/// with the first such test and its outcome.
///
/// Errors: a run could not start, or a signal asked the harness to stop ([`Stop`]).
pub(crate) fn time_tests(
    state: &Path,
    cmd: &CargoCmd,
    tests: &[String],
    jobs: usize,
    timeout: Duration,
) -> Result<Result<BTreeMap<String, f64>, String>, Stop> {
    let runs: Vec<(CargoCmd, Vec<String>)> = tests
        .iter()
        .map(|t| (cmd.clone(), vec![t.clone()]))
        .collect();
    let ran = parallel::run_each(state, jobs, timeout, &runs);
    if crate::system::interrupt::requested() {
        return Err(Stop::Interrupted);
    }
    let mut seconds = BTreeMap::new();
    let mut failed = None;
    for (t, r) in tests.iter().zip(ran) {
        let r = r?;
        let o = r.outcomes.get(t).copied().unwrap_or(Outcome::Missing);
        if o != Outcome::Passed && failed.is_none() {
            failed = Some(format!(
                "{t} did not pass when timed on its own with no mutant selected ({}), though it passed in the reach run",
                crate::battery::outcome_word(Some(&o))
            ));
        }
        seconds.insert(t.clone(), r.seconds);
    }
    Ok(match failed {
        Some(why) => Err(why),
        None => Ok(seconds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn timing(seconds: &[(&str, f64)], factor: f64, margin: f64) -> Timing {
        Timing {
            seconds: seconds.iter().map(|(t, s)| (t.to_string(), *s)).collect(),
            factor,
            margin,
        }
    }

    fn names(ts: &[&str]) -> Vec<String> {
        ts.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn a_mutant_times_out_at_factor_times_its_tests_seconds_plus_the_margin() {
        let t = timing(&[("a", 0.25), ("b", 0.5), ("c", 9.0)], 4.0, 2.0);
        let battery = Duration::from_secs(20);
        assert_eq!(
            t.timeout(&names(&["a", "b"]), battery),
            Duration::from_secs(5)
        );
        assert_eq!(t.timeout(&names(&["a"]), battery), Duration::from_secs(3));
        // Never longer than the battery's timeout.
        assert_eq!(t.timeout(&names(&["a", "c"]), battery), battery);
        // A test without a time keeps the battery's timeout.
        assert_eq!(t.timeout(&names(&["a", "z"]), battery), battery);
    }

    proptest! {
        #[test]
        fn the_timeout_covers_factor_times_the_sum_and_never_passes_the_batterys(
            secs in proptest::collection::vec(0.0f64..30.0, 0..12),
            factor in 1.0f64..10.0,
            margin in 0.0f64..10.0,
            battery in 0.1f64..600.0,
            take in proptest::collection::vec(any::<bool>(), 12),
        ) {
            let all: Vec<(String, f64)> =
                secs.iter().enumerate().map(|(i, s)| (format!("t{i}"), *s)).collect();
            let t = Timing {
                seconds: all.iter().cloned().collect(),
                factor,
                margin,
            };
            let chosen: Vec<String> = all
                .iter()
                .zip(&take)
                .filter(|(_, k)| **k)
                .map(|((n, _), _)| n.clone())
                .collect();
            let sum: f64 = all.iter().zip(&take).filter(|(_, k)| **k).map(|((_, s), _)| s).sum();
            let battery = Duration::from_secs_f64(battery);
            let got = t.timeout(&chosen, battery);
            prop_assert!(got <= battery);
            let want = factor * sum + margin;
            if want < battery.as_secs_f64() {
                prop_assert!((got.as_secs_f64() - want).abs() < 1e-6, "{got:?} vs {want}");
            } else {
                prop_assert_eq!(got, battery);
            }
        }
    }
}
