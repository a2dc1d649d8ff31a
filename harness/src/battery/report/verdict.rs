//! Verdicts (what happened to a mutation), expectations (whether that is what the catalog
//! says must happen), UNFALSIFIED tests and the kill matrix.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::battery::select::catalog::{Mutation, Role};
use crate::cargo::Outcome;

/// What happened to one mutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// At least one listed test failed.
    Killed,
    /// Every listed test passed.
    Survived,
    /// The mutated code did not compile.
    Unviable,
    /// The test run exceeded the timeout and was killed.
    Timeout,
    /// No listed test failed, but a test binary died (signal, abort, exit) before reporting
    /// some listed tests: which test brought it down is unknown, so nothing is killed.
    Crashed,
    /// No listed test failed or died, but some listed tests do not exist under the
    /// mutation: every test binary ran to its summary without them (a test renamed away,
    /// a target compiled out). Nothing is killed.
    TestsMissing,
    /// The mutated file is in no target the catalog's build compiles (rustc's dep-info)
    /// and a `cfg(feature = ...)` the catalog's features do not enable keeps it out: no
    /// test could see the mutation, so nothing ran.
    NotCompiled,
    /// Switch mode's reach run showed that no listed test executes the mutated function
    /// (NoCoverage in Stryker's and PIT's terms): nothing could observe the mutation, so
    /// nothing ran. Never a kill; UNMET for a defect or a vacuity, MET for a gap.
    NoCoverage,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Killed => "KILLED",
            Verdict::Survived => "SURVIVED",
            Verdict::Unviable => "UNVIABLE",
            Verdict::Timeout => "TIMEOUT",
            Verdict::Crashed => "CRASHED",
            Verdict::TestsMissing => "TESTS_MISSING",
            Verdict::NotCompiled => "NOT_COMPILED",
            Verdict::NoCoverage => "NO_COVERAGE",
        })
    }
}

/// Whether the verdict is what the catalog expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Expectation {
    /// As expected.
    Met,
    /// Not as expected; `reasons` say why.
    Unmet,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expectation::Met => "MET",
            Expectation::Unmet => "UNMET",
        })
    }
}

/// Whether an outcome is this test failing under the mutation (a kill by that test).
/// A test without a result line is never a kill: [`Outcome::NoResult`] (its binary died
/// before reporting it; which test brought the binary down is unknown) nor
/// [`Outcome::Missing`] (it does not exist under the mutation).
pub fn is_kill(o: Outcome) -> bool {
    matches!(o, Outcome::Failed)
}

/// What the run observed for one mutation.
#[derive(Debug, Clone)]
pub enum Observation<'a> {
    /// The build failed.
    Unviable,
    /// The mutated file is not compiled under the catalog's features (the text says which
    /// gate keeps it out); nothing was built or run.
    NotCompiled(&'a str),
    /// No listed test reaches the mutated function (switch mode's reach run); nothing ran.
    NoCoverage,
    /// The tests ran (possibly until the timeout).
    Ran {
        /// Outcome per listed test.
        outcomes: &'a BTreeMap<String, Outcome>,
        /// Failure message per failed test.
        messages: &'a BTreeMap<String, String>,
        /// Whether the run was killed at the timeout.
        timed_out: bool,
        /// The test binaries that died before their summary, with their exit status or
        /// signal (see [`crate::cargo::TestRun::died`]).
        died: &'a [String],
    },
}

/// The judgement of one mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// Verdict.
    pub verdict: Verdict,
    /// Expectation.
    pub expectation: Expectation,
    /// Why the expectation is unmet (empty when met).
    pub reasons: Vec<String>,
    /// Listed tests that failed but are not expected killers (listed, not hidden).
    pub other_killers: Vec<String>,
}

/// Judges a mutation: UNVIABLE, TIMEOUT, KILLED (a listed test failed), CRASHED (none
/// failed, a test binary died before reporting some), TESTS_MISSING (none failed or died,
/// some listed tests do not exist under the mutation) or SURVIVED; then MET when every
/// expected killer failed (and its failure contains `expect_message` when given). A `gap`
/// is MET only when it survives; killed, it is UNMET ("gap closed: update the catalog").
/// UNVIABLE, TIMEOUT, CRASHED and TESTS_MISSING never meet an expectation.
pub fn judge(m: &Mutation, obs: &Observation<'_>) -> Judgement {
    let unmet = |verdict, reason: String| Judgement {
        verdict,
        expectation: Expectation::Unmet,
        reasons: vec![reason],
        other_killers: Vec::new(),
    };
    match *obs {
        Observation::NotCompiled(why) => unmet(
            Verdict::NotCompiled,
            format!(
                "not compiled under the catalog's configuration: {why}; no test ran (enable what its gate needs in `features` or a `[[config]]`, or run it on a platform that builds it)"
            ),
        ),
        // Nothing ran: only a gap, which must survive, meets its expectation.
        Observation::NoCoverage if m.role == Role::Gap => Judgement {
            verdict: Verdict::NoCoverage,
            expectation: Expectation::Met,
            reasons: Vec::new(),
            other_killers: Vec::new(),
        },
        Observation::NoCoverage => unmet(
            Verdict::NoCoverage,
            "no listed test reaches the mutated function (reach run): no test ran, nothing could kill it"
                .into(),
        ),
        Observation::Unviable => unmet(
            Verdict::Unviable,
            "the mutated code does not compile: no test ran".into(),
        ),
        Observation::Ran {
            outcomes,
            messages,
            timed_out,
            died,
        } => judge_run(m, outcomes, messages, timed_out, died),
    }
}

/// [`judge`] of a mutation whose tests ran (see [`Observation::Ran`] for the arguments).
fn judge_run(
    m: &Mutation,
    outcomes: &BTreeMap<String, Outcome>,
    messages: &BTreeMap<String, String>,
    timed_out: bool,
    died: &[String],
) -> Judgement {
    let killers: Vec<&String> = outcomes
        .iter()
        .filter(|(_, o)| is_kill(**o))
        .map(|(n, _)| n)
        .collect();
    // A test without a result is no one's kill: a binary that died names no killer, and a
    // test that does not exist under the mutation tested nothing.
    let crashed = outcomes.values().any(|o| *o == Outcome::NoResult);
    let missing = outcomes.values().any(|o| *o == Outcome::Missing);
    let verdict = if timed_out {
        Verdict::Timeout
    } else if !killers.is_empty() {
        Verdict::Killed
    } else if crashed {
        Verdict::Crashed
    } else if missing {
        Verdict::TestsMissing
    } else {
        Verdict::Survived
    };
    let other_killers: Vec<String> = killers
        .iter()
        .filter(|k| !m.killed_by.contains(k))
        .map(|k| k.to_string())
        .collect();
    let reasons =
        match m.role {
            Role::Gap => gap_reasons(verdict, &killers),
            Role::Defect | Role::Vacuity => {
                let mut reasons = Vec::new();
                if timed_out {
                    reasons.push("the test run timed out: a hang is not a named kill".to_string());
                }
                let died_how = if died.is_empty() {
                    "its test binary died before reporting it".to_string()
                } else {
                    format!(
                        "its test binary died before reporting it: {}",
                        died.join(", ")
                    )
                };
                reasons.extend(m.killed_by.iter().filter_map(|k| {
                    unmet_killer(m, k, outcomes.get(k).copied(), messages, &died_how)
                }));
                reasons
            }
        };
    Judgement {
        verdict,
        expectation: if reasons.is_empty() {
            Expectation::Met
        } else {
            Expectation::Unmet
        },
        reasons,
        other_killers,
    }
}

/// Why a gap that ended `verdict` (with `killers` failing) is unmet: none when it survived.
fn gap_reasons(verdict: Verdict, killers: &[&String]) -> Vec<String> {
    match verdict {
        Verdict::Survived => Vec::new(),
        Verdict::Killed => vec![format!(
            "gap closed: update the catalog (killed by {})",
            killers
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )],
        _ => vec![format!("a gap must survive, it ended {verdict}")],
    }
}

/// Why the expected killer `k` of `m`, which ended `outcome` (`None`: not run), did not kill
/// it as expected, or `None` when it did (failed, with `expect_message` in its failure
/// `messages` when given). `died_how` says how a test without a result was lost.
fn unmet_killer(
    m: &Mutation,
    k: &str,
    outcome: Option<Outcome>,
    messages: &BTreeMap<String, String>,
    died_how: &str,
) -> Option<String> {
    match outcome {
        Some(o) if is_kill(o) => {
            let want = m.expect_message.as_ref()?;
            let got = messages.get(k).map(String::as_str).unwrap_or("");
            (!got.contains(want.as_str()))
                .then(|| format!("{k} failed without the expected message {want:?}"))
        }
        Some(Outcome::Unfinished) => Some(format!("{k} had not finished at the timeout")),
        Some(Outcome::NoResult) => Some(format!("{k} has no result: {died_how}")),
        Some(Outcome::Missing) => Some(format!(
            "{k} does not exist under the mutation: no test binary reported it"
        )),
        Some(Outcome::NotReached) => Some(format!(
            "{k} does not reach the mutated function (reach run): it cannot fail"
        )),
        Some(o) => Some(format!(
            "{k} did not fail ({})",
            serde_json::to_value(o)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        )),
        None => Some(format!("{k} was not run")),
    }
}

/// One cell of the kill matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    /// The test failed under the mutation.
    Killed,
    /// The test passed under the mutation.
    Passed,
    /// The test was ignored.
    Ignored,
    /// The run timed out before the test finished.
    Unfinished,
    /// The mutation did not compile: the test did not run.
    NotRun,
    /// The test binary died before reporting this test.
    NoResult,
    /// The test does not exist under the mutation.
    Missing,
    /// Not run: the reach run showed the test does not execute the mutated function.
    NotReached,
}

impl Cell {
    /// From a test outcome.
    pub fn from_outcome(o: Outcome) -> Cell {
        match o {
            Outcome::Failed => Cell::Killed,
            Outcome::NoResult => Cell::NoResult,
            Outcome::Missing => Cell::Missing,
            Outcome::Passed => Cell::Passed,
            Outcome::Ignored => Cell::Ignored,
            Outcome::Unfinished => Cell::Unfinished,
            Outcome::NotReached => Cell::NotReached,
        }
    }

    /// One-character symbol used in the Markdown and terminal matrices.
    pub fn symbol(self) -> &'static str {
        match self {
            Cell::Killed => "K",
            Cell::Passed => ".",
            Cell::Ignored => "i",
            Cell::Unfinished => "T",
            Cell::NotRun => "-",
            Cell::NoResult => "?",
            Cell::Missing => "x",
            Cell::NotReached => "~",
        }
    }
}

/// Tests x mutations: `cells[t][m]` is test `tests[t]` under mutation `mutations[m]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillMatrix {
    /// Row labels: the listed tests, catalog order.
    pub tests: Vec<String>,
    /// Column labels: the mutation ids that ran, run order.
    pub mutations: Vec<String>,
    /// Cells, one row per test.
    pub cells: Vec<Vec<Cell>>,
}

impl KillMatrix {
    /// Builds the matrix from each mutation's outcomes (`None` for an unviable mutation).
    pub fn build(
        tests: &[String],
        columns: &[(String, Option<&BTreeMap<String, Outcome>>)],
    ) -> KillMatrix {
        let cells = tests
            .iter()
            .map(|t| {
                columns
                    .iter()
                    .map(|(_, o)| match o {
                        None => Cell::NotRun,
                        Some(o) => o.get(t).copied().map_or(Cell::NotRun, Cell::from_outcome),
                    })
                    .collect()
            })
            .collect();
        KillMatrix {
            tests: tests.to_vec(),
            mutations: columns.iter().map(|(id, _)| id.clone()).collect(),
            cells,
        }
    }

    /// Listed tests that no mutation killed (UNFALSIFIED).
    pub fn unfalsified(&self) -> Vec<String> {
        self.tests
            .iter()
            .zip(&self.cells)
            .filter(|(_, row)| !row.contains(&Cell::Killed))
            .map(|(t, _)| t.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn m(role: Role, killers: &[&str], msg: Option<&str>) -> Mutation {
        Mutation {
            id: "m".into(),
            title: "t".into(),
            role,
            file: PathBuf::from("f"),
            find: "a".into(),
            occurrences: 1,
            replace: "b".into(),
            killed_by: killers.iter().map(|s| s.to_string()).collect(),
            expect_message: msg.map(str::to_string),
            rationale: "r".into(),
        }
    }

    fn outcomes(v: &[(&str, Outcome)]) -> BTreeMap<String, Outcome> {
        v.iter().map(|(n, o)| (n.to_string(), *o)).collect()
    }

    fn ran<'a>(
        o: &'a BTreeMap<String, Outcome>,
        msg: &'a BTreeMap<String, String>,
        timed_out: bool,
    ) -> Observation<'a> {
        Observation::Ran {
            outcomes: o,
            messages: msg,
            timed_out,
            died: &[],
        }
    }

    #[test]
    fn defect_killed_by_its_test_is_met_and_other_killers_are_listed() {
        let o = outcomes(&[
            ("a", Outcome::Failed),
            ("b", Outcome::Failed),
            ("c", Outcome::Passed),
        ]);
        let msgs = BTreeMap::from([("a".to_string(), "left: 1 right: 2".to_string())]);
        let j = judge(
            &m(Role::Defect, &["a"], Some("right: 2")),
            &ran(&o, &msgs, false),
        );
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Killed, Expectation::Met)
        );
        assert_eq!(j.other_killers, vec!["b".to_string()]);
    }

    #[test]
    fn wrong_message_or_wrong_killer_is_unmet() {
        let o = outcomes(&[("a", Outcome::Failed), ("b", Outcome::Passed)]);
        let msgs = BTreeMap::from([("a".to_string(), "something else".to_string())]);
        let j = judge(
            &m(Role::Defect, &["a"], Some("right: 2")),
            &ran(&o, &msgs, false),
        );
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Killed, Expectation::Unmet)
        );
        let j = judge(&m(Role::Vacuity, &["b"], None), &ran(&o, &msgs, false));
        assert_eq!(j.expectation, Expectation::Unmet);
        assert_eq!(j.reasons, vec!["b did not fail (passed)".to_string()]);
    }

    #[test]
    fn gap_survived_is_met_and_killed_is_gap_closed() {
        let none = BTreeMap::new();
        let pass = outcomes(&[("a", Outcome::Passed)]);
        let j = judge(&m(Role::Gap, &[], None), &ran(&pass, &none, false));
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Survived, Expectation::Met)
        );
        let fail = outcomes(&[("a", Outcome::Failed)]);
        let j = judge(&m(Role::Gap, &[], None), &ran(&fail, &none, false));
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Killed, Expectation::Unmet)
        );
        assert!(j.reasons[0].starts_with("gap closed: update the catalog"));
    }

    #[test]
    fn a_dead_test_binary_is_crashed_never_killed() {
        let none = BTreeMap::new();
        let o = outcomes(&[("a", Outcome::Passed), ("b", Outcome::NoResult)]);
        let died = ["`deps/one-1` (signal: 6, SIGABRT: process abort signal)".to_string()];
        let obs = Observation::Ran {
            outcomes: &o,
            messages: &none,
            timed_out: false,
            died: &died,
        };
        let j = judge(&m(Role::Defect, &["b"], None), &obs);
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Crashed, Expectation::Unmet)
        );
        assert_eq!(
            j.reasons,
            vec![
                "b has no result: its test binary died before reporting it: `deps/one-1` (signal: 6, SIGABRT: process abort signal)"
                    .to_string()
            ]
        );
        // A gap whose tests' binary died did not survive either.
        let j = judge(&m(Role::Gap, &[], None), &obs);
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Crashed, Expectation::Unmet)
        );
        // A real failure elsewhere is still a kill, by that test.
        let o = outcomes(&[("a", Outcome::Failed), ("b", Outcome::NoResult)]);
        let j = judge(&m(Role::Defect, &["a"], None), &ran(&o, &none, false));
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Killed, Expectation::Met)
        );
    }

    #[test]
    fn a_test_missing_under_the_mutation_is_never_killed_nor_survived() {
        let none = BTreeMap::new();
        let o = outcomes(&[("a", Outcome::Passed), ("b", Outcome::Missing)]);
        let j = judge(&m(Role::Defect, &["b"], None), &ran(&o, &none, false));
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::TestsMissing, Expectation::Unmet)
        );
        assert_eq!(
            j.reasons,
            vec!["b does not exist under the mutation: no test binary reported it".to_string()]
        );
        let j = judge(&m(Role::Gap, &[], None), &ran(&o, &none, false));
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::TestsMissing, Expectation::Unmet)
        );
        assert_eq!(
            j.reasons,
            vec!["a gap must survive, it ended TESTS_MISSING".to_string()]
        );
    }

    #[test]
    fn timeout_and_unviable_are_unmet() {
        let none = BTreeMap::new();
        let o = outcomes(&[("a", Outcome::Unfinished), ("b", Outcome::Passed)]);
        let j = judge(&m(Role::Defect, &["a"], None), &ran(&o, &none, true));
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Timeout, Expectation::Unmet)
        );
        let j = judge(&m(Role::Defect, &["a"], None), &Observation::Unviable);
        assert_eq!(
            (j.verdict, j.expectation),
            (Verdict::Unviable, Expectation::Unmet)
        );
    }

    #[test]
    fn kill_matrix_and_unfalsified() {
        let tests = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let m1 = outcomes(&[
            ("a", Outcome::Failed),
            ("b", Outcome::Passed),
            ("c", Outcome::Passed),
        ]);
        let m2 = outcomes(&[
            ("a", Outcome::Passed),
            ("b", Outcome::NoResult),
            ("c", Outcome::Missing),
        ]);
        let km = KillMatrix::build(
            &tests,
            &[
                ("m1".into(), Some(&m1)),
                ("m2".into(), Some(&m2)),
                ("m3".into(), None),
            ],
        );
        assert_eq!(km.cells[0], vec![Cell::Killed, Cell::Passed, Cell::NotRun]);
        assert_eq!(
            km.cells[1],
            vec![Cell::Passed, Cell::NoResult, Cell::NotRun]
        );
        assert_eq!(km.cells[2], vec![Cell::Passed, Cell::Missing, Cell::NotRun]);
        // A test whose binary died, or that is missing, names no kill: b and c stay
        // unfalsified.
        assert_eq!(km.unfalsified(), vec!["b".to_string(), "c".to_string()]);
    }
}
