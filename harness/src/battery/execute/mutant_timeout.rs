//! Per-mutant timeouts in switch mode: a reach-selected mutant's test run times out at the least of the battery's timeout and `timeout_factor` x the seconds its tests took in the reach run + `timeout_margin_secs`.
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
//! Where the seconds come from: the reach run ([`crate::battery::execute::reach`]) runs
//! every listed test on its own, unmutated, and each of those runs is timed; that is the
//! time of each test alone, taken at no extra cost. It is started as a mutant's run starts
//! it or more slowly (through `cargo test` where a mutant may run it from its executable;
//! a doc test built by rustdoc where a mutant may run its kept executable; recording the
//! functions it reaches), so it bounds the mutant's unmutated time from above. A mutant's
//! selected tests run in one go and partly side by side, so the sum of their own seconds is
//! at least what they take together unmutated. (An earlier version ran each reaching test
//! once more, alone, for its seconds: on a crate whose tests spawn processes that second
//! run cost as much as the reach run, for a bound no tighter than the margin.) A kept doc
//! test is the exception: its reach-run seconds are mostly rustdoc building it, which no
//! mutant pays, so it is timed by one unmutated run of its kept executable
//! (`ReachInfo::kept_doc_seconds`) where that is shorter.
//!
//! What it changes: a mutant that makes its tests slower than `timeout_factor` times their
//! own time plus the margin is TIMEOUT where, under the battery's timeout alone, it might
//! have finished (and been KILLED or SURVIVED). The margin takes the start of processes and
//! the load of other jobs; raise it (or run `--all-tests`, which selects no tests and so
//! sets no per-mutant timeout) when a machine is slow to start processes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::battery::report::schema::TimeoutRule;

/// The selected tests' own seconds and the catalog's factor and margin.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timing {
    /// Per test, its wall seconds on its own, unmutated (in the reach run).
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
        match self.rule(tests, battery) {
            Some(r) => Duration::from_secs_f64(r.factor * r.tests_seconds + r.margin_seconds),
            None => battery,
        }
    }

    /// The rule of [`Timing::timeout`] when it gives `tests` a timeout of their own (shorter
    /// than `battery`): the sum of their seconds, the factor and the margin; `None` when a
    /// test of `tests` was not timed or the battery's timeout is the shorter.
    pub fn rule(&self, tests: &[String], battery: Duration) -> Option<TimeoutRule> {
        let mut sum = 0.0;
        for t in tests {
            sum += self.seconds.get(t)?;
        }
        let own = self.factor * sum + self.margin;
        (own.is_finite() && own < battery.as_secs_f64()).then_some(TimeoutRule {
            tests_seconds: sum,
            factor: self.factor,
            margin_seconds: self.margin,
        })
    }
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
