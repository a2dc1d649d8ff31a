//! Reach-guided test selection in switch mode: which listed tests execute each switched
//! function, found once per battery by running every listed test on its own with the reach
//! recorder on; a mutant's test run then runs only the tests that reach its function.
//!
//! The recorder: every switched function's switch starts with a check of a function-local
//! flag (in the file's switch function, [`crate::battery::execute::instrument::support_items`]);
//! the first time the function runs in a process with [`REACH_ENV`] set, it appends the
//! ids of its mutations, one per line, to the file that variable names (append mode, so a
//! process the test starts, which inherits the variable, records into the same file). Two
//! relaxed atomic loads per call otherwise (the flag and the cached switch).
//!
//! The reach run: after the forced-fail control proved the switch reached, each listed test
//! runs on its own (`cargo test … -- --exact NAME`, its own process, no mutant selected, its
//! own temporary directory), up to `-j N` at once, each with its own reach file. A libtest
//! test whose executable the forced-fail control's run recorded starts from it instead,
//! without `cargo test` ([`start_directly`]): still alone, in its own process; a doc test
//! the forced-fail control shows to reach no switched function does not run
//! ([`unreached_doc_tests`]). A doc test
//! runs as `cargo test --doc -- FILTER` with the whitespace-free filter of
//! [`crate::libtest::doc_test_filter`], which may select a few more doc tests: their reach
//! is then counted as its own, which can only add tests to a mutant's run, never drop one.
//! A mutation is reached by a test when its id is in that test's file. The same run tells
//! how each test is started: a doc test's process keeps its executable
//! ([`crate::doctest_keep`]), a libtest test's process records its program, arguments,
//! directory and environment ([`crate::libtest_direct`]), so that a switched mutant's run
//! needs neither rustdoc nor `cargo test` for them.
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

/// The name of the reach recorder [`recorder`] defines for `tag`
/// ([`crate::battery::execute::instrument::support_tag`]).
pub fn recorder_name(tag: &str) -> String {
    format!("__harness_reached_{tag}")
}

/// The reach recorder of one switched file, for `tag`: a function, appended to the file
/// once ([`crate::battery::execute::instrument::support_items`]), that the switch of each
/// of its functions calls the first time that function runs in a process, with the ids of
/// its mutations, one per line (see the module docs). With the reach file, a doc test's
/// process keeps its executable ([`crate::doctest_keep::keeper`]).
pub fn recorder(tag: &str) -> String {
    format!(
        "#[allow(unused, clippy::all)]\n\
         fn {name}(ids: &str) {{\n\
         if let ::std::option::Option::Some(path) = ::std::env::var_os({REACH_ENV:?}) {{\n\
         if let ::std::result::Result::Ok(mut f) = ::std::fs::OpenOptions::new().create(true).append(true).open(path) {{\n\
         let _ = ::std::io::Write::write_all(&mut f, ids.as_bytes());\n\
         }}\n{keep}}}\n}}\n",
        name = recorder_name(tag),
        keep = crate::doctest_keep::keeper()
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
    /// How many of them started from their executables, without `cargo test`
    /// ([`start_directly`]).
    #[serde(default)]
    pub started_directly: usize,
    /// How many doc tests did not run, the forced-fail control having shown that they
    /// reach no switched function ([`unreached_doc_tests`]).
    #[serde(default)]
    pub doc_tests_unreached: usize,
    /// Per switched mutation id, the listed tests that reach it (catalog order).
    pub reached_by: BTreeMap<String, Vec<String>>,
    /// The doc tests that reach a switched mutation and run from their kept executables
    /// ([`crate::doctest_keep`]), catalog order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_doc_tests: Vec<String>,
    /// The doc tests that reach a switched mutation but run through rustdoc per mutant, each
    /// with why its executable was not kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub doc_tests_not_kept: BTreeMap<String, String>,
    /// How many libtest tests that reach a switched mutation run from their executables
    /// without `cargo test` ([`crate::libtest_direct`]).
    #[serde(default)]
    pub direct_tests: usize,
    /// The libtest tests that reach a switched mutation but run through `cargo test`, each
    /// with why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tests_not_direct: BTreeMap<String, String>,
    /// Wall seconds of a timing run: always 0 now (kept for the schema), the per-mutant
    /// timeouts take the reach run's own seconds ([`crate::battery::execute::mutant_timeout`]).
    #[serde(default)]
    pub timing_seconds: f64,
    /// Per test that reaches a switched mutation, its wall seconds on its own in the reach
    /// run: what the per-mutant timeouts are derived from (empty when none reaches one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub test_seconds: BTreeMap<String, f64>,
    /// How many tests a timing run ran again: always 0 now (kept for the schema).
    #[serde(default)]
    pub tests_timed: usize,
    /// Whether each reach-selected mutant's test run had its own timeout
    /// ([`crate::battery::execute::mutant_timeout`]).
    #[serde(default)]
    pub mutant_timeouts: bool,
    /// Why the mutants kept the battery's timeout, when the timing run was not to be trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_mutant_timeouts_because: Option<String>,
    /// Per kept doc test that reaches a switched mutation, the wall seconds of one run of
    /// its kept executable, unmutated (as a mutant runs it: no rustdoc), when shorter than
    /// its [`ReachInfo::test_seconds`] (which include rustdoc building it): the per-mutant
    /// timeouts take these instead.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kept_doc_seconds: BTreeMap<String, f64>,
}

/// What the reach run found and the doc test executables it kept.
pub(crate) struct Reach {
    /// As `switch.json` holds it.
    pub info: ReachInfo,
    /// Per doc test (catalog spelling), its kept executable.
    pub kept: BTreeMap<String, crate::doctest_keep::KeptDoc>,
    /// Per libtest test, the executable that runs it without `cargo test`.
    pub direct: BTreeMap<String, crate::libtest_direct::Binary>,
    /// Per listed test, its wall seconds in the reach run (`cargo test`'s start-up, and for
    /// a doc test rustdoc's build of it, included).
    pub seconds: BTreeMap<String, f64>,
}

/// One test's run on its own: its outcome, its reach file and its wall seconds.
type Alone = Result<(Outcome, PathBuf, f64), Stop>;

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
    /// Where doc tests keep their executables (emptied first; left for the battery's runs).
    pub keep_dir: &'a Path,
    /// The libtest tests whose executable is known before the reach run
    /// ([`start_directly`]): each runs on its own from it, without `cargo test`.
    pub direct: &'a BTreeMap<String, crate::libtest_direct::Binary>,
    /// The doc tests known to reach no switched function ([`unreached_doc_tests`]): they
    /// do not run.
    pub unreached: &'a BTreeSet<String>,
}

/// Runs every listed test on its own with the reach recorder on, up to `jobs` at
/// once, and maps each switched mutation to the listed tests that reach it.
///
/// Errors: an I/O fault on the reach directory or a test run's failure to start
/// ([`Stop`]). A test that does not pass on its own, or a forced-fail kill the recorder did
/// not see, is no error: the result then says why the reach is not to be trusted.
pub(crate) fn run(req: &Request<'_>) -> Result<Reach, Stop> {
    let Request {
        state,
        cmd,
        tests,
        switched,
        forced_fail_failed,
        jobs,
        timeout,
        dir,
        keep_dir,
        direct: known,
        unreached,
    } = *req;
    let t0 = Instant::now();
    // A reach file is appended to: one left by an earlier run must not count.
    for d in [dir, keep_dir] {
        fresh_dir(d)?;
    }
    let alone: Vec<(usize, &String)> = tests
        .iter()
        .enumerate()
        .filter(|(_, t)| !unreached.contains(*t))
        .collect();
    let files: Vec<PathBuf> = alone
        .iter()
        .map(|(i, _)| dir.join(format!("test-{i}")))
        .collect();
    // Every test's process records how it was run: a doc test's keeps its executable too.
    let keeps: BTreeMap<usize, PathBuf> = alone
        .iter()
        .map(|(i, _)| (*i, keep_dir.join(format!("test-{i}"))))
        .collect();
    for k in keeps.values() {
        std::fs::create_dir_all(k).map_err(|e| io_fault(k, "create", e))?;
    }
    let runs: Vec<(CargoCmd, Vec<String>)> = alone
        .iter()
        .zip(&files)
        .map(|((i, t), file)| {
            let mut c = cmd.clone().with_env(REACH_ENV, &file.to_string_lossy());
            let var = if crate::libtest::is_doc_test(t) {
                crate::doctest_keep::KEEP_ENV
            } else {
                crate::libtest_direct::RECORD_ENV
            };
            if let Some(b) = known.get(*t) {
                c = c.with_direct_tests(std::sync::Arc::new(
                    [((*t).clone(), b.clone())].into_iter().collect(),
                ));
            }
            (
                c.with_env(var, &keeps[i].to_string_lossy()),
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
                    (o, file, r.seconds)
                }),
            )
        })
        .collect();
    let mut info = ReachInfo {
        selection: true,
        tests_run: alone.len(),
        doc_tests_unreached: unreached.len(),
        started_directly: tests.iter().filter(|t| known.contains_key(*t)).count(),
        ..ReachInfo::default()
    };
    let mut reached: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    let mut reached_nothing = Vec::new();
    let mut seconds: BTreeMap<usize, f64> = BTreeMap::new();
    for (i, res) in results {
        let (outcome, file, secs) = res?;
        seconds.insert(i, secs);
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
    if info.untrusted_because.is_some() {
        info.selection = false;
        info.seconds = t0.elapsed().as_secs_f64();
        return Ok(Reach {
            info,
            kept: BTreeMap::new(),
            direct: BTreeMap::new(),
            seconds: BTreeMap::new(),
        });
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
    let mut kept = BTreeMap::new();
    let mut direct = BTreeMap::new();
    let drop = [
        REACH_ENV,
        crate::doctest_keep::KEEP_ENV,
        crate::libtest_direct::RECORD_ENV,
    ];
    for (i, k) in &keeps {
        let t = &tests[*i];
        if !reached.values().any(|s| s.contains(i)) {
            continue;
        }
        if !crate::libtest::is_doc_test(t) {
            match crate::libtest_direct::collect(k, t, &drop) {
                Ok(mut b) => {
                    b.reach_seconds = seconds.get(i).copied().unwrap_or(0.0);
                    direct.insert(t.clone(), b);
                }
                Err(why) => {
                    info.tests_not_direct.insert(t.clone(), why);
                }
            }
            continue;
        }
        match keep(cmd, t, k, state, timeout)? {
            Ok(doc) => {
                info.kept_doc_tests.push(t.clone());
                kept.insert(t.clone(), doc);
            }
            Err(why) => {
                info.doc_tests_not_kept.insert(t.clone(), why);
            }
        }
    }
    info.direct_tests = direct.len();
    info.seconds = t0.elapsed().as_secs_f64();
    let seconds = seconds
        .into_iter()
        .map(|(i, s)| (tests[i].clone(), s))
        .collect();
    Ok(Reach {
        info,
        kept,
        direct,
        seconds,
    })
}

/// Empties folder `d` (removing what an earlier run left there), creating it if need be.
/// Errors: an I/O fault ([`Stop`]).
pub(crate) fn fresh_dir(d: &Path) -> Result<(), Stop> {
    match std::fs::remove_dir_all(d) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_fault(d, "remove", e));
        }
        _ => {}
    }
    std::fs::create_dir_all(d).map_err(|e| io_fault(d, "create", e))
}

/// The libtest tests of `tests` that the reach run can start from their executables
/// instead of through `cargo test`: those whose executable recorded itself in a run of every
/// listed test at once (`records`, from the forced-fail control run with
/// [`crate::libtest_direct::RECORD_ENV`] set), less `drop_env`, found in exactly one
/// recorded executable's `--list`.
/// Such a test then still runs on its own, in its own process, with the environment and
/// directory cargo gave its executable: only `cargo test`'s start-up (a tenth to a quarter
/// of a second per test) is saved. A test in no recorded executable, or in two, stays with
/// `cargo test`. `is_test_executable` says which programs are the build's test executables
/// (a test may start other programs that record themselves too).
pub(crate) fn start_directly(
    records: &[crate::doctest_keep::Record],
    tests: &[String],
    drop_env: &[&str],
    is_test_executable: impl Fn(&Path) -> bool,
    timeout: Duration,
    state: &Path,
) -> BTreeMap<String, crate::libtest_direct::Binary> {
    let programs = crate::libtest_direct::collect_programs(records, drop_env, is_test_executable);
    let mut holders: BTreeMap<&str, Vec<&crate::libtest_direct::Binary>> = BTreeMap::new();
    let lists: Vec<(&crate::libtest_direct::Binary, Vec<String>)> = programs
        .values()
        .filter_map(|b| b.list(timeout, Some(state)).ok().map(|l| (b, l)))
        .collect();
    for (b, names) in &lists {
        for n in names {
            holders.entry(n.as_str()).or_default().push(b);
        }
    }
    tests
        .iter()
        .filter(|t| !crate::libtest::is_doc_test(t))
        .filter_map(|t| match holders.get(t.as_str()).map(Vec::as_slice) {
            Some([b]) => Some((t.clone(), (*b).clone())),
            _ => None,
        })
        .collect()
}

/// The doc tests that the forced-fail control (every listed test under one `cargo test`,
/// each process recording itself on its first switched function: `records`, `None` when
/// they could not be read) shows to
/// reach no switched function, so that the reach run need not build and run them again
/// (rustdoc builds each doc test anew per run). The forced-fail control panics in every
/// switched function, so a doc test that reaches one fails, unless it expects or catches
/// the panic. So: every doc test that passed it, and whose fence (read by `fence`) is not
/// `should_panic`, provided the processes that recorded themselves and are not the build's
/// test executables (`is_test_executable`) are no more than the doc tests that failed.
/// Each failed doc test accounts for at least one such process of its own (it failed at a
/// switch, which records first), so none is left over for a passing doc test that caught
/// the panic. Otherwise, and without records, the set is empty and every doc test runs on
/// its own.
pub(crate) fn unreached_doc_tests(
    records: Option<&[crate::doctest_keep::Record]>,
    tests: &[String],
    failed: &[String],
    is_test_executable: impl Fn(&Path) -> bool,
    fence: impl Fn(&str) -> Option<Vec<String>>,
) -> BTreeSet<String> {
    let Some(records) = records else {
        return BTreeSet::new();
    };
    let others = records
        .iter()
        .filter(|r| !is_test_executable(Path::new(&r.program)))
        .count();
    let failed_docs = failed
        .iter()
        .filter(|t| crate::libtest::is_doc_test(t))
        .count();
    if others > failed_docs {
        return BTreeSet::new();
    }
    tests
        .iter()
        .filter(|t| crate::libtest::is_doc_test(t) && !failed.contains(t))
        .filter(|t| fence(t).is_some_and(|a| !a.iter().any(|w| w == "should_panic")))
        .cloned()
        .collect()
}

/// The words of doc test `t`'s fence as the tree `cmd` runs holds it (see
/// [`crate::doctest_keep::fence_attributes`]); `None` when it cannot be read.
pub(crate) fn doc_fence(cmd: &CargoCmd, t: &str) -> Option<Vec<String>> {
    let built = cmd.built_name(t);
    let (file, _, line) = crate::libtest::doc_test_parts(&built)?;
    let source = std::fs::read_to_string(cmd.root().join(file)).ok()?;
    crate::doctest_keep::fence_attributes(&source, line)
}

/// Doc test `t`'s kept executable from its reach run's folder `dir`, run once more with no
/// mutant selected: `Ok(Err(why))` when it cannot stand in for rustdoc's run (see
/// [`crate::doctest_keep`]). Errors: the run was interrupted ([`Stop`]).
fn keep(
    cmd: &CargoCmd,
    t: &str,
    dir: &Path,
    state: &Path,
    timeout: Duration,
) -> Result<Result<crate::doctest_keep::KeptDoc, String>, Stop> {
    let (filter, alone) = cmd.doc_filter(t);
    if !alone {
        return Ok(Err(format!(
            "its filter `{filter}` selects other doc tests too, so its run was not its alone"
        )));
    }
    let built = cmd.built_name(t);
    let Some((file, _, line)) = crate::libtest::doc_test_parts(&built) else {
        return Ok(Err(format!("{built:?} names no file and line")));
    };
    let path = cmd.root().join(file);
    let source = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => return Ok(Err(format!("{}: {e}", path.display()))),
    };
    let doc = match crate::doctest_keep::collect(
        dir,
        (&source, line),
        &[REACH_ENV, crate::doctest_keep::KEEP_ENV],
    ) {
        Ok(d) => d,
        Err(why) => return Ok(Err(why)),
    };
    let again = doc
        .replay(
            &BTreeMap::new(),
            Some(timeout),
            Some(state),
            Some(crate::cargo::RUN_UMASK),
        )
        .map_err(|e| match e {
            crate::system::runner::RunError::Interrupted(_) => Stop::Interrupted,
            e => io_fault(&doc.exe, "run", std::io::Error::other(e.to_string())),
        })?;
    if !again.passed {
        return Ok(Err(format!(
            "its kept executable did not pass when run again with no mutant selected: {}",
            again.message.lines().next().unwrap_or_default()
        )));
    }
    Ok(Ok(doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_is_one_function_named_after_its_tag_that_reads_the_reach_variable() {
        let r = recorder("00ff");
        let item: syn::ItemFn = syn::parse_str(&r).expect("parses");
        assert_eq!(item.sig.ident, "__harness_reached_00ff");
        assert_eq!(recorder_name("00ff"), "__harness_reached_00ff");
        assert!(r.contains(&format!("{REACH_ENV:?}")), "{r}");
    }

    #[test]
    fn doc_tests_that_passed_the_forced_fail_control_are_unreached_when_every_record_is_accounted_for()
     {
        let d = tempfile::tempdir().unwrap();
        let tests: Vec<String> = [
            "t::unit",
            "src/lib.rs - a (line 1)",
            "src/lib.rs - b (line 9)",
            "src/lib.rs - c (line 20)",
            "src/lib.rs - d (line 30)",
        ]
        .map(String::from)
        .to_vec();
        let failed = vec![tests[0].clone(), tests[1].clone()];
        // `c` expects a panic; `d`'s fence cannot be read.
        let fence = |t: &str| match t {
            "src/lib.rs - c (line 20)" => Some(vec!["should_panic".to_string()]),
            "src/lib.rs - d (line 30)" => None,
            _ => Some(vec!["rust".to_string()]),
        };
        let unit = Path::new("/t/deps/unit-1f");
        let is_test = |p: &Path| p == unit;
        let rec = |pid, program: &str| {
            crate::libtest_direct::write_record(d.path(), pid, &[b"1", program.as_bytes(), b"/w"])
        };
        let got = || {
            let recs = crate::libtest_direct::records(d.path()).ok();
            unreached_doc_tests(recs.as_deref(), &tests, &failed, is_test, fence)
        };
        // The unit test's executable and the failed doc test `a` recorded: `b` passed.
        rec(1, "/t/deps/unit-1f");
        rec(2, "/tmp/rustdoctest1/rust_out");
        assert_eq!(got(), BTreeSet::from([tests[2].clone()]));
        // One more process that is no test executable: a passing doc test may have caught
        // the panic, so every doc test runs.
        rec(3, "/tmp/rustdoctest2/rust_out");
        assert_eq!(got(), BTreeSet::new());
        // A record that cannot be read: nothing is known, so every doc test runs.
        std::fs::remove_file(d.path().join("3.run")).unwrap();
        std::fs::write(d.path().join("4.run"), b"not a record").unwrap();
        assert_eq!(got(), BTreeSet::new());
    }
}
