//! Libtest binaries run directly: a switched mutant's tests run from the test executables the reach run saw, as cargo ran them, without a `cargo test` per mutant.
//!
//! In switch mode the test executables are the same for every mutant: one build holds them
//! all, and only the switch variable in the environment differs. Yet each `cargo test`
//! first reads the manifests and checks the fingerprint of every unit of the build before
//! it starts the executables: a fixed cost of a tenth to a quarter of a second per
//! invocation, which on a crate with fast tests is most of a mutant's test run.
//!
//! So in the forced-fail control (every listed test under one `cargo test`), which tells
//! the reach run which executable to start each test from ([`collect_programs`]), and in
//! the reach run (each listed test on its own, `battery/execute/reach.rs`) a libtest
//! test runs with [`RECORD_ENV`] naming a folder, and the switched library's reach recorder,
//! on the first switched function the process executes, writes there how the process was
//! started: its program, arguments, working directory and whole environment
//! ([`crate::doctest_keep::keeper`], the same record a kept doc test writes, with no copy
//! of the executable). A test is then run directly when its reach run shows that it was
//! cargo's own run of it: exactly one recorded process had the arguments the harness gave
//! cargo (`--exact NAME`), and its program is an executable file ([`collect`]). A mutant's
//! directly run tests are given, per executable, to one process with `--exact` and their
//! names, with the recorded environment (less the reach variables) and the mutant's own
//! variables over it, in the recorded directory; its output is libtest's, read as cargo's
//! run of it is read.
//!
//! A test that starts the crate's own binary (`env!("CARGO_BIN_EXE_<name>")`,
//! `assert_cmd`'s `cargo_bin`, a helper that finds `target/debug/<name>`) often runs no
//! switched function in its own process: only the binary does. The binary inherits the
//! test's environment, so it records into the test's folder, and it records the test too:
//! each ancestor whose environment names the same folder, from its parent up, as its child
//! sees it in `/proc` (command line, directory, the environment it was started with:
//! `PID.spawner`, [`records_and_spawners`]). So the test's process is known as if it had
//! recorded itself, and runs directly like any other; the binary it starts inherits the
//! mutant's switch variable from it, so the mutant is live in the child, and the child's
//! reach, appended to the test's reach file, counts for the test.
//!
//! A test that reaches no switched function records nothing and is never run for a mutant
//! anyway (reach-guided selection); one whose record is missing or unclear stays with
//! `cargo test`, and the reach report says why.
//!
//! How the tests are spread: libtest runs one executable's tests on as many threads as it
//! is given (`RUST_TEST_THREADS`, else the machine's parallelism), in name order, and cargo
//! runs the executables one after the other; so a slow test that sorts late starts late.
//! A direct run keeps the same number of tests going at once, but knows each test's time
//! from its reach run: it deals the tests out to that many lanes, slowest first, each to the
//! lane with the least time so far (the longest-processing-time rule, [`lanes`]); each lane
//! runs its tests one at a time (`--test-threads=1`, one process per executable in the
//! lane), and the lanes go at once. Tests still run each in a thread of its own named after
//! it, as libtest does with any number of threads, and tests that shared a process under
//! cargo may now run in different processes, which the reach run has already shown they
//! allow (each passed alone).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::doctest_keep::RECORD_ENV;
use crate::doctest_keep::Record;
use crate::system::runner::{Finished, RunError};

/// A libtest executable as cargo ran it in the reach run.
#[derive(Debug, Clone, PartialEq)]
pub struct Binary {
    /// The test executable (absolute, in the build's `deps` folder).
    pub program: PathBuf,
    /// The directory cargo ran it in (its package's root).
    pub cwd: PathBuf,
    /// Its whole environment as cargo gave it, less the harness's reach variables.
    pub env: Vec<(OsString, OsString)>,
    /// The test's wall seconds in its reach run (cargo's start-up included): its weight
    /// when the tests are dealt out to lanes ([`lanes`]).
    pub reach_seconds: f64,
    /// How cargo names the executable when it dies (`tests/one.rs`, `unittests src/lib.rs`:
    /// [`crate::cargo::Artifact::test_description`]), taken from the build that made it.
    pub described: String,
}

impl Binary {
    /// The executable's target name: its file name less cargo's `-HASH` suffix
    /// (`serve_http-e34b44700c99eedb` → `serve_http`).
    pub fn target_name(&self) -> String {
        let name = self
            .program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.rsplit_once('-') {
            Some((stem, hash))
                if !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                stem.to_string()
            }
            _ => name,
        }
    }

    /// The names of the tests this executable holds (`--list`, run as [`Binary::run`] runs
    /// it, within `timeout`). Errors say why no list was read.
    pub fn list(&self, timeout: Duration, state: Option<&Path>) -> Result<Vec<String>, String> {
        let done = crate::doctest_keep::Relaunch {
            program: &self.program,
            cwd: &self.cwd,
            env: &self.env,
        }
        .runner(["--list"], &BTreeMap::new(), Some(timeout), state, None)
        .run()
        .map_err(|e| format!("{} --list: {e}", self.program.display()))?;
        if !done.status.success() {
            return Err(format!(
                "{} --list exited with {}",
                self.program.display(),
                done.status
            ));
        }
        Ok(crate::libtest::parse_list(&String::from_utf8_lossy(
            &done.stdout,
        )))
    }

    /// Runs `tests` (names as libtest lists them) in one process of this executable with
    /// `--exact` (and `--test-threads=1` when `one_at_a_time`), `env` set over the recorded
    /// environment, in its own process group, killed after `timeout`, recorded in `state`
    /// while it runs, under `umask` when given. Its standard output is libtest's transcript.
    /// Errors: the executable could not be started, or the run was interrupted.
    pub fn run(
        &self,
        tests: &[String],
        env: &BTreeMap<String, String>,
        timeout: Option<Duration>,
        state: Option<&Path>,
        umask: Option<u32>,
        one_at_a_time: bool,
    ) -> Result<Finished, RunError> {
        let threads = one_at_a_time.then_some("--test-threads=1");
        let args = threads
            .into_iter()
            .chain(std::iter::once("--exact"))
            .chain(tests.iter().map(String::as_str));
        crate::doctest_keep::Relaunch {
            program: &self.program,
            cwd: &self.cwd,
            env: &self.env,
        }
        .runner(args, env, timeout, state, umask)
        .run()
    }
}

/// The executable that ran libtest test `test` in its reach run, from the records in `dir`
/// (see the module docs). `drop_env` are variables not to give it again (the reach
/// recorder's). Errors say why the test cannot be run directly.
pub fn collect(dir: &Path, test: &str, drop_env: &[&str]) -> Result<Binary, String> {
    let records = records_and_spawners(dir)?;
    let want = [OsString::from("--exact"), OsString::from(test)];
    let mut found: Vec<Record> = records.iter().filter(|r| r.args == want).cloned().collect();
    let rec = match found.len() {
        1 => found.remove(0),
        0 => {
            return Err(format!(
                "no process of its reach run, nor any process its children recorded, had the arguments `--exact {test}` ({} other records)",
                records.len()
            ));
        }
        n => {
            return Err(format!(
                "{n} processes of its reach run had the arguments `--exact {test}`, so which executable holds it is not known"
            ));
        }
    };
    binary(rec, drop_env)
}

/// Every record in `dir` that a process wrote of itself (`PID.run`,
/// [`crate::doctest_keep::parse_record`]), in file name order; none when `dir` does not
/// exist. Errors name the folder or record at fault.
pub fn records(dir: &Path) -> Result<Vec<Record>, String> {
    let paths = record_paths(dir, "run")?;
    paths.iter().map(|p| read_record(p)).collect()
}

/// The records of `dir` ([`records`]) and, after them, each process that a recorded
/// process's child recorded for it (`PID.spawner`, [`crate::doctest_keep::keeper`]) and
/// that wrote no record of its own: a test that runs no switched function itself but starts
/// the crate's binary, which does. Its record is then its child's view of it (its command
/// line, directory and the environment it was started with). Errors name the folder or
/// record at fault.
pub fn records_and_spawners(dir: &Path) -> Result<Vec<Record>, String> {
    let own = record_paths(dir, "run")?;
    let mut out: Vec<Record> = own
        .iter()
        .map(|p| read_record(p))
        .collect::<Result<_, _>>()?;
    for p in record_paths(dir, "spawner")? {
        if !own.contains(&p.with_extension("run")) {
            out.push(read_record(&p)?);
        }
    }
    Ok(out)
}

/// The files `*.EXT` of `dir`, sorted; none when `dir` does not exist.
fn record_paths(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries {
                let p = e.map_err(|e| format!("{}: {e}", dir.display()))?.path();
                if p.extension().is_some_and(|x| x == ext) {
                    paths.push(p);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    paths.sort();
    Ok(paths)
}

/// The record in file `p`. Errors name the file and what is malformed.
fn read_record(p: &Path) -> Result<Record, String> {
    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    crate::doctest_keep::parse_record(&bytes).map_err(|e| format!("{}: {e}", p.display()))
}

/// The executable of record `rec`, its environment less `drop_env`. Errors: its program
/// is not an absolute path to a file.
fn binary(rec: Record, drop_env: &[&str]) -> Result<Binary, String> {
    let program = PathBuf::from(&rec.program);
    if !program.is_absolute() || !program.is_file() {
        return Err(format!(
            "its executable {} is not an absolute path to a file",
            program.display()
        ));
    }
    let env = rec
        .env
        .into_iter()
        .filter(|(k, _)| !drop_env.iter().any(|d| k.as_bytes() == d.as_bytes()))
        .collect();
    Ok(Binary {
        program,
        cwd: rec.cwd,
        env,
        reach_seconds: 0.0,
        described: String::new(),
    })
}

/// The executables among `records` (those of a run of many tests at once: the forced-fail
/// control, every listed test under one `cargo test`), whatever their arguments, keyed by
/// program: each one that `is_test_executable` accepts and that every process of it
/// recorded with the same directory and environment (less `drop_env`). A program recorded
/// two ways (a test that starts its own executable again, with other variables) is left
/// out, and so is one whose program is not an absolute path to a file.
pub fn collect_programs(
    records: &[Record],
    drop_env: &[&str],
    is_test_executable: impl Fn(&Path) -> bool,
) -> BTreeMap<PathBuf, Binary> {
    let mut out: BTreeMap<PathBuf, Option<Binary>> = BTreeMap::new();
    for rec in records {
        let Ok(b) = binary(rec.clone(), drop_env) else {
            continue;
        };
        if !is_test_executable(&b.program) {
            continue;
        }
        match out.get(&b.program) {
            None => {
                out.insert(b.program.clone(), Some(b));
            }
            Some(Some(seen)) if seen.cwd == b.cwd && seen.env == b.env => {}
            Some(_) => {
                out.insert(b.program.clone(), None);
            }
        }
    }
    out.into_iter()
        .filter_map(|(p, b)| b.map(|b| (p, b)))
        .collect()
}

/// How many tests libtest would run at once with the environment `var` reads:
/// `RUST_TEST_THREADS` when it holds a positive number, else the machine's parallelism
/// (libtest's own rule), at least 1.
pub fn test_threads(var: impl Fn(&str) -> Option<String>) -> usize {
    var("RUST_TEST_THREADS")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Deals `tests` (name, seconds) out to at most `n` lanes by the longest-processing-time
/// rule: slowest first (ties by name), each to the lane with the least seconds so far (the
/// first such lane). Returns the non-empty lanes, each in the order its tests were dealt.
pub fn lanes(tests: &[(String, f64)], n: usize) -> Vec<Vec<String>> {
    let mut order: Vec<&(String, f64)> = tests.iter().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out: Vec<(f64, Vec<String>)> = vec![(0.0, Vec::new()); n.max(1)];
    for (name, secs) in order {
        let lane = out
            .iter_mut()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("at least one lane");
        lane.0 += secs.max(0.0);
        lane.1.push(name.clone());
    }
    out.into_iter()
        .map(|(_, l)| l)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Writes record `PID.run` into `dir` with `fields` as the keeper writes them (for tests).
#[cfg(test)]
pub(crate) fn write_record(dir: &Path, pid: u32, fields: &[&[u8]]) {
    write_record_as(dir, &format!("{pid}.run"), fields)
}

/// Writes record file `name` into `dir` with `fields` as the keeper writes them (for tests).
#[cfg(test)]
fn write_record_as(dir: &Path, name: &str, fields: &[&[u8]]) {
    let mut rec = Vec::new();
    for f in fields {
        rec.extend_from_slice(f);
        rec.push(0);
    }
    std::fs::write(dir.join(name), rec).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_with_the_tests_own_arguments_is_its_executable() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("serve_http-e34b44700c99eedb");
        std::fs::write(&exe, "").unwrap();
        let exe_b = exe.as_os_str().as_bytes();
        // A child the test started (another program) recorded itself too.
        write_record(d.path(), 7, &[b"1", b"/usr/bin/child", b"/w", b"A", b"1"]);
        assert!(
            collect(d.path(), "m::t", &[])
                .unwrap_err()
                .contains("no process of its reach run, nor any process its children recorded")
        );
        write_record(
            d.path(),
            8,
            &[
                b"3",
                exe_b,
                b"--exact",
                b"m::t",
                b"/w/pkg",
                b"HARNESS_REACH_RECORD",
                b"/k",
                b"CARGO_PKG_NAME",
                b"pkg",
            ],
        );
        let b = collect(d.path(), "m::t", &[RECORD_ENV]).unwrap();
        assert_eq!(b.program, exe);
        assert_eq!(b.cwd, PathBuf::from("/w/pkg"));
        assert_eq!(b.env, vec![("CARGO_PKG_NAME".into(), "pkg".into())]);
        assert_eq!(b.target_name(), "serve_http");
        // Another test's name, or a filter that is not exact, is not this test's run.
        assert!(collect(d.path(), "m::t2", &[]).is_err());
        // Two processes with its arguments: which holds it is not known.
        write_record(d.path(), 9, &[b"3", exe_b, b"--exact", b"m::t", b"/w/pkg"]);
        assert!(
            collect(d.path(), "m::t", &[])
                .unwrap_err()
                .contains("2 processes")
        );
    }

    #[test]
    fn a_test_that_only_its_child_recorded_is_found_by_its_spawner_record() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("cli-0a1b");
        std::fs::write(&exe, "").unwrap();
        let exe_b = exe.as_os_str().as_bytes();
        // The crate's binary, started by the test, recorded itself and its parent, the
        // test's process (pid 40), which ran no switched function.
        let bin = d.path().join("tool");
        std::fs::write(&bin, "").unwrap();
        write_record(
            d.path(),
            41,
            &[
                b"2",
                bin.as_os_str().as_bytes(),
                b"shout",
                b"/w/pkg",
                b"K",
                b"1",
            ],
        );
        let test = [
            &b"3"[..],
            exe_b,
            b"--exact",
            b"by_env::shouts",
            b"/w/pkg",
            b"CARGO_MANIFEST_DIR",
            b"/w/pkg",
            b"HARNESS_REACH_RECORD",
            b"/k",
        ];
        write_record_as(d.path(), "40.spawner", &test);
        let b = collect(d.path(), "by_env::shouts", &[RECORD_ENV]).unwrap();
        assert_eq!(b.program, exe);
        assert_eq!(b.cwd, PathBuf::from("/w/pkg"));
        assert_eq!(b.env, vec![("CARGO_MANIFEST_DIR".into(), "/w/pkg".into())]);
        // Spawner records are not the processes' own: `records` leaves them out (the doc
        // test count of `reach::unreached_doc_tests` reads only those).
        assert_eq!(records(d.path()).unwrap().len(), 1);
        assert_eq!(records_and_spawners(d.path()).unwrap().len(), 2);
        // A process that recorded itself too is counted once, by its own record.
        write_record(d.path(), 40, &test);
        assert_eq!(records_and_spawners(d.path()).unwrap().len(), 2);
        assert!(collect(d.path(), "by_env::shouts", &[]).is_ok());
    }

    #[test]
    fn the_slowest_test_gets_a_lane_of_its_own() {
        let t = |n: &str, s: f64| (n.to_string(), s);
        // libtest's name order would start `z_slow` last.
        let tests = [t("a", 1.0), t("b", 1.0), t("c", 0.5), t("z_slow", 8.0)];
        assert_eq!(
            lanes(&tests, 2),
            vec![
                vec!["z_slow".to_string()],
                vec!["a".into(), "b".into(), "c".into()]
            ]
        );
        assert_eq!(lanes(&tests, 1).len(), 1);
        assert_eq!(lanes(&tests[..1], 4), vec![vec!["a".to_string()]]);
        assert_eq!(lanes(&[], 2), Vec::<Vec<String>>::new());
        assert_eq!(test_threads(|_| Some("3".into())), 3);
        assert!(test_threads(|_| Some("0".into())) >= 1);
        assert!(test_threads(|_| None) >= 1);
    }

    proptest::proptest! {
        /// Every test is dealt exactly once, no lane is empty, and the busiest lane holds
        /// no more than the longest-processing-time bound: the mean load plus the slowest
        /// test.
        #[test]
        fn lanes_deal_every_test_once(
            secs in proptest::collection::vec(0.0f64..10.0, 0..20),
            n in 1usize..5,
        ) {
            let tests: Vec<(String, f64)> = secs
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("t{i}"), *s))
                .collect();
            let out = lanes(&tests, n);
            proptest::prop_assert!(out.len() <= n);
            proptest::prop_assert!(out.iter().all(|l| !l.is_empty()));
            let mut dealt: Vec<String> = out.iter().flatten().cloned().collect();
            dealt.sort();
            let mut want: Vec<String> = tests.iter().map(|t| t.0.clone()).collect();
            want.sort();
            proptest::prop_assert_eq!(dealt, want);
            let of = |n: &String| tests.iter().find(|t| &t.0 == n).unwrap().1;
            let total: f64 = secs.iter().sum();
            let slowest = secs.iter().copied().fold(0.0, f64::max);
            for l in &out {
                let load: f64 = l.iter().map(of).sum();
                proptest::prop_assert!(load <= total / n as f64 + slowest + 1e-9);
            }
        }
    }

    #[test]
    fn a_program_that_is_no_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        write_record(
            d.path(),
            8,
            &[b"3", b"deps/t-00", b"--exact", b"m::t", b"/w"],
        );
        assert!(
            collect(d.path(), "m::t", &[])
                .unwrap_err()
                .contains("not an absolute path")
        );
    }

    #[test]
    fn the_programs_of_a_shared_run_are_those_recorded_one_way() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a-1f"), d.path().join("b-2e"));
        for p in [&a, &b] {
            std::fs::write(p, "").unwrap();
        }
        let (ab, bb) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
        // `a` ran once with every test's name; `b` twice, the second time with another
        // variable (a test that starts its own executable again); a child and a relative
        // program recorded too.
        write_record(
            d.path(),
            1,
            &[
                b"3",
                ab,
                b"--exact",
                b"x",
                b"/w",
                b"K",
                b"1",
                b"HARNESS_MUTANT",
                b"ff",
            ],
        );
        write_record(d.path(), 2, &[b"1", bb, b"/w", b"K", b"1"]);
        write_record(d.path(), 3, &[b"1", bb, b"/w", b"K", b"2"]);
        write_record(d.path(), 4, &[b"1", b"/usr/bin/child", b"/w"]);
        write_record(d.path(), 5, &[b"1", b"rel", b"/w"]);
        let got = collect_programs(&records(d.path()).unwrap(), &["HARNESS_MUTANT"], |p| {
            p != Path::new("/usr/bin/child")
        });
        assert_eq!(got.keys().collect::<Vec<_>>(), [&a]);
        assert_eq!(got[&a].env, vec![("K".into(), "1".into())]);
        assert_eq!(got[&a].cwd, PathBuf::from("/w"));
        // `b` is left out only for its two ways: recorded once, it is there.
        std::fs::remove_file(d.path().join("3.run")).unwrap();
        let got = collect_programs(&records(d.path()).unwrap(), &[], |p| {
            p != Path::new("/usr/bin/child")
        });
        assert_eq!(got.keys().collect::<Vec<_>>(), [&a, &b]);
        assert!(records(&d.path().join("none")).unwrap().is_empty());
    }
}
