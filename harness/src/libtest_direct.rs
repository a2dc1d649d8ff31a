//! Libtest binaries run directly: a switched mutant's tests run from the test executables the reach run saw, as cargo ran them, without a `cargo test` per mutant.
//!
//! In switch mode the test executables are the same for every mutant: one build holds them
//! all, and only the switch variable in the environment differs. Yet each `cargo test`
//! first reads the manifests and checks the fingerprint of every unit of the build before
//! it starts the executables: a fixed cost of a tenth to a quarter of a second per
//! invocation, which on a crate with fast tests is most of a mutant's test run.
//!
//! So in the reach run (each listed test on its own, `battery/execute/reach.rs`) a libtest
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
//! A test that reaches no switched function records nothing and is never run for a mutant
//! anyway (reach-guided selection); one whose record is missing or unclear stays with
//! `cargo test`, and the reach report says why.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::doctest_keep::RECORD_ENV;
use crate::system::runner::{Finished, RunError, Runner};

/// A libtest executable as cargo ran it in the reach run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// The test executable (absolute, in the build's `deps` folder).
    pub program: PathBuf,
    /// The directory cargo ran it in (its package's root).
    pub cwd: PathBuf,
    /// Its whole environment as cargo gave it, less the harness's reach variables.
    pub env: Vec<(OsString, OsString)>,
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

    /// Runs `tests` (names as libtest lists them) in one process of this executable with
    /// `--exact`, `env` set over the recorded environment, in its own process group, killed
    /// after `timeout`, recorded in `state` while it runs, under `umask` when given. Its
    /// standard output is libtest's transcript. Errors: the executable could not be started,
    /// or the run was interrupted.
    pub fn run(
        &self,
        tests: &[String],
        env: &BTreeMap<String, String>,
        timeout: Option<Duration>,
        state: Option<&Path>,
        umask: Option<u32>,
    ) -> Result<Finished, RunError> {
        let mut r = Runner::new(&self.program)
            .args(std::iter::once("--exact").chain(tests.iter().map(String::as_str)))
            .dir(&self.cwd)
            .env_clear()
            .timeout(timeout)
            .state_dir(state)
            .umask(umask);
        for (k, v) in &self.env {
            r = r.env(k, v);
        }
        for (k, v) in env {
            r = r.env(k, v);
        }
        r.run()
    }
}

/// The executable that ran libtest test `test` in its reach run, from the records in `dir`
/// (see the module docs). `drop_env` are variables not to give it again (the reach
/// recorder's). Errors say why the test cannot be run directly.
pub fn collect(dir: &Path, test: &str, drop_env: &[&str]) -> Result<Binary, String> {
    let mut records = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries {
                let p = e.map_err(|e| format!("{}: {e}", dir.display()))?.path();
                if p.extension().is_some_and(|x| x == "run") {
                    records.push(p);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    records.sort();
    let want = [OsString::from("--exact"), OsString::from(test)];
    let mut found = Vec::new();
    for p in &records {
        let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let rec = crate::doctest_keep::parse_record(&bytes)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        if rec.args == want {
            found.push(rec);
        }
    }
    let rec = match found.len() {
        1 => found.remove(0),
        0 => {
            return Err(format!(
                "no process of its reach run recorded itself with the arguments `--exact {test}` ({} other records)",
                records.len()
            ));
        }
        n => {
            return Err(format!(
                "{n} processes of its reach run had the arguments `--exact {test}`, so which executable holds it is not known"
            ));
        }
    };
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_record(dir: &Path, pid: u32, fields: &[&[u8]]) {
        let mut rec = Vec::new();
        for f in fields {
            rec.extend_from_slice(f);
            rec.push(0);
        }
        std::fs::write(dir.join(format!("{pid}.run")), rec).unwrap();
    }

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
                .contains("no process of its reach run recorded itself")
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
}
