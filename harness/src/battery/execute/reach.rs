//! Reach-guided test selection in switch mode: which listed tests execute each switched
//! function, found once per battery by running every listed test on its own with the reach
//! recorder on; a mutant's test run then runs only the tests that reach its function.
//!
//! The recorder: every switched function's body starts with a check of a function-local
//! flag; the first time the function runs in a process with [`REACH_ENV`] set, it appends
//! the ids of its mutations, one per line, to the file that variable names (append mode,
//! so a process the test starts, which inherits the variable, records into the same file).
//! One relaxed atomic load per call otherwise.
//!
//! The reach run: after the forced-fail control proved the switch reached, each listed test
//! runs on its own (`cargo test … -- --exact NAME`, its own process, no mutant selected, its
//! own temporary directory), up to `-j N` at once, each with its own reach file. A doc test
//! runs as `cargo test --doc -- FILTER` with the whitespace-free filter of
//! [`crate::libtest::doc_test_filter`], which may select a few more doc tests: their reach
//! is then counted as its own, which can only add tests to a mutant's run, never drop one.
//! A mutation is reached by a test when its id is in that test's file.
//!
//! Why selection gives the full run's verdict: a test that never executes the mutated
//! function runs exactly the code it runs without the mutation, so it passes under the
//! mutant as it passed in the controls. That holds when:
//! - tests do not share state within a process (a test run alone behaves as in the full
//!   run): checked, since every test must pass alone, as it did in the control runs;
//! - the recorder is itself reached: checked, since every test that the forced-fail control
//!   failed must have recorded at least one switched function;
//! - the tests are deterministic in which functions they call (as the control runs assume).
//!
//! When a check fails, no reach is used (every mutant runs every listed test) and the
//! switch report says why. A doc test's run on its own costs rustdoc's build of it, once
//! per battery; a mutant whose reaching tests hold no doc test then skips `cargo test --doc`
//! (a build of every doc test) altogether. A switched mutation no listed test reaches is
//! NO_COVERAGE, and nothing runs for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cargo::{CargoCmd, Outcome};

use crate::battery::execute::parallel;
use crate::battery::execute::stop::{Stop, io_fault};

/// The environment variable that names a switched build's reach file.
pub const REACH_ENV: &str = "HARNESS_REACH";

/// The reach recorder of one switched function whose mutations are `ids`: Rust statements
/// for the start of its switched body (see the module docs).
pub fn recorder(ids: &[&str]) -> String {
    let mut lines = String::new();
    for id in ids {
        lines.push_str(id);
        lines.push('\n');
    }
    format!(
        "#[allow(unused, clippy::all)]\n\
         static __HARNESS_REACHED: ::std::sync::atomic::AtomicBool = ::std::sync::atomic::AtomicBool::new(false);\n\
         #[allow(unused, clippy::all)]\n\
         fn __harness_reached(flag: &::std::sync::atomic::AtomicBool) {{\n\
         if flag.load(::std::sync::atomic::Ordering::Relaxed) || flag.swap(true, ::std::sync::atomic::Ordering::Relaxed) {{ return; }}\n\
         if let ::std::option::Option::Some(path) = ::std::env::var_os({REACH_ENV:?}) {{\n\
         if let ::std::result::Result::Ok(mut f) = ::std::fs::OpenOptions::new().create(true).append(true).open(path) {{\n\
         let _ = ::std::io::Write::write_all(&mut f, {lines:?}.as_bytes());\n\
         }}\n}}\n}}\n\
         __harness_reached(&__HARNESS_REACHED);\n"
    )
}

/// What the reach run found, as `switch.json` holds it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReachInfo {
    /// Whether mutants' test runs were cut down to the tests that reach them (`false` with
    /// `--all-tests`, or when the reach could not be trusted).
    pub selection: bool,
    /// Why no reach is used, when so (every mutant then runs every listed test).
    pub untrusted_because: Option<String>,
    /// Wall seconds of the reach run (every listed test on its own).
    pub seconds: f64,
    /// How many tests ran on their own.
    pub tests_run: usize,
    /// Per switched mutation id, the listed tests that reach it (catalog order).
    pub reached_by: BTreeMap<String, Vec<String>>,
}

/// One test's run on its own: its outcome and its reach file.
type Alone = Result<(Outcome, PathBuf), Stop>;

/// One reach run's inputs.
pub(crate) struct Request<'a> {
    /// Host state directory (private temporary directories of the test runs).
    pub state: &'a Path,
    /// The switched build's `cargo test`, no mutant selected.
    pub cmd: &'a CargoCmd,
    /// The listed tests, catalog order.
    pub tests: &'a [String],
    /// The switched mutations' ids.
    pub switched: &'a [String],
    /// The tests the forced-fail control failed: each must have reached a switched function.
    pub forced_fail_failed: &'a [String],
    /// How many tests may run at once.
    pub jobs: usize,
    /// Each test run's timeout.
    pub timeout: Duration,
    /// Where the reach files go (created, then removed).
    pub dir: &'a Path,
}

/// Runs every listed test on its own with the reach recorder on, up to `jobs` at
/// once, and maps each switched mutation to the listed tests that reach it.
///
/// Errors: an I/O fault on the reach directory or a test run's failure to start
/// ([`Stop`]). A test that does not pass on its own, or a forced-fail kill the recorder did
/// not see, is no error: the result then says why the reach is not to be trusted.
pub(crate) fn run(req: &Request<'_>) -> Result<ReachInfo, Stop> {
    let Request {
        state,
        cmd,
        tests,
        switched,
        forced_fail_failed,
        jobs,
        timeout,
        dir,
    } = *req;
    let t0 = Instant::now();
    // A reach file is appended to: one left by an earlier run must not count.
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_fault(dir, "remove", e));
        }
        _ => {}
    }
    std::fs::create_dir_all(dir).map_err(|e| io_fault(dir, "create", e))?;
    let alone: Vec<(usize, &String)> = tests.iter().enumerate().collect();
    let files: Vec<PathBuf> = alone
        .iter()
        .map(|(i, _)| dir.join(format!("test-{i}")))
        .collect();
    let runs: Vec<(CargoCmd, Vec<String>)> = alone
        .iter()
        .zip(&files)
        .map(|((_, t), file)| {
            (
                cmd.clone().with_env(REACH_ENV, &file.to_string_lossy()),
                vec![(*t).clone()],
            )
        })
        .collect();
    let ran = parallel::run_each(state, jobs, timeout, &runs);
    if crate::system::interrupt::requested() {
        return Err(Stop::Interrupted);
    }
    let results: BTreeMap<usize, Alone> = alone
        .iter()
        .zip(files)
        .zip(ran)
        .map(|(((i, t), file), r)| {
            (
                *i,
                r.map(|r| {
                    let o = r.outcomes.get(*t).copied().unwrap_or(Outcome::Missing);
                    (o, file)
                }),
            )
        })
        .collect();
    let mut info = ReachInfo {
        selection: true,
        tests_run: alone.len(),
        ..ReachInfo::default()
    };
    let mut reached: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    let mut reached_nothing = Vec::new();
    for (i, res) in results {
        let (outcome, file) = res?;
        let t = &tests[i];
        if outcome != Outcome::Passed && info.untrusted_because.is_none() {
            info.untrusted_because = Some(format!(
                "{t} did not pass when run on its own ({}), though it passed in the control runs: the tests may depend on each other",
                crate::battery::outcome_word(Some(&outcome))
            ));
        }
        let text = match std::fs::read_to_string(&file) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io_fault(&file, "read", e)),
        };
        let before = reached.values().filter(|s| s.contains(&i)).count();
        for id in text.lines() {
            if let Some(id) = switched.iter().find(|s| s.as_str() == id) {
                reached.entry(id).or_default().insert(i);
            }
        }
        if reached.values().filter(|s| s.contains(&i)).count() == before {
            reached_nothing.push(t.clone());
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    if info.untrusted_because.is_none()
        && let Some(t) = forced_fail_failed
            .iter()
            .find(|t| reached_nothing.contains(t))
    {
        info.untrusted_because = Some(format!(
            "{t} failed under the forced-fail control but recorded no switched function when run on its own: the reach recorder is not seen"
        ));
    }
    info.seconds = t0.elapsed().as_secs_f64();
    if info.untrusted_because.is_some() {
        info.selection = false;
        return Ok(info);
    }
    for id in switched {
        let by = reached.get(id.as_str());
        let names = tests
            .iter()
            .enumerate()
            .filter(|(i, _)| by.is_some_and(|s| s.contains(i)))
            .map(|(_, t)| t.clone())
            .collect();
        info.reached_by.insert(id.clone(), names);
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_parses_as_statements_and_names_every_id() {
        let r = recorder(&["a-b", "c\"d"]);
        let block: syn::Block = syn::parse_str(&format!("{{ {r} }}")).expect("parses");
        assert_eq!(block.stmts.len(), 3);
        assert!(r.contains(r#""a-b\nc\"d\n""#), "{r}");
        assert!(r.contains(&format!("{REACH_ENV:?}")), "{r}");
    }
}
