//! Shared helpers of the integration tests: a private copy of the sample workspace and the
//! real `harness` binary run against it.

#![allow(dead_code)]

pub mod checkout;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The sample workspace fixture.
pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workspaces/sample")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "target" || name == "reports" {
            continue;
        }
        let dst = to.join(&name);
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// `args` with `--mode rebuild` added to a `battery` or `gate` that names no mode (see
/// [`Sandbox::run`]).
fn rebuild_unless_told<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    if matches!(args.first(), Some(&("battery" | "gate")))
        && !args.iter().any(|a| a.starts_with("--mode"))
    {
        all.extend(["--mode", "rebuild"]);
    }
    all
}

/// A temporary directory holding `ws/` (a git-initialised copy of the sample workspace)
/// and `state/` (this test's host lock and journals).
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub state: PathBuf,
    pub catalog: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox::of("sample", "mutations/sample.toml")
    }

    /// A sandbox holding a copy of `fixtures/workspaces/<name>`, with `catalog` (relative to
    /// it) as the catalog.
    pub fn of(name: &str, catalog: &str) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        copy_tree(&fixture().join("..").join(name), &ws);
        git2::Repository::init(&ws).unwrap();
        let state = dir.path().join("state");
        let catalog = ws.join(catalog);
        Sandbox {
            dir,
            ws,
            state,
            catalog,
        }
    }

    /// The `harness` command with this sandbox's state directory.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
        c.arg("--state-dir")
            .arg(&self.state)
            .current_dir(self.dir.path())
            .env_remove("HARNESS_STATE_DIR");
        c
    }

    /// `harness ARGS...`. A `battery` or `gate` without `--mode` runs in rebuild mode, as
    /// every command did before the mode was chosen by size (`auto`): the tests written for
    /// it keep testing it. A test of `auto` says `--mode auto` or uses [`Sandbox::cmd`].
    pub fn run(&self, args: &[&str]) -> Run {
        let out = self.cmd().args(rebuild_unless_told(args)).output().unwrap();
        Run::from(out)
    }

    /// `harness battery CATALOG ARGS...`.
    pub fn battery(&self, args: &[&str]) -> Run {
        let mut all = vec!["battery", self.catalog.to_str().unwrap()];
        all.extend_from_slice(args);
        self.run(&all)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.join(rel)).unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.ws.join(rel), text).unwrap();
    }

    /// Replaces exactly one occurrence of `from` in `rel`.
    pub fn edit(&self, rel: &str, from: &str, to: &str) {
        let s = self.read(rel);
        assert_eq!(s.matches(from).count(), 1, "{from:?} in {rel}");
        self.write(rel, &s.replacen(from, to, 1));
    }

    /// Every file's bytes, except `.git`, `target` and `reports`.
    pub fn tree(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let n = e.file_name();
                if n == ".git" || n == "target" || n == "reports" {
                    continue;
                }
                if e.file_type().unwrap().is_dir() {
                    walk(root, &e.path(), out);
                } else {
                    let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
                    out.insert(rel, std::fs::read(e.path()).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.ws, &self.ws, &mut out);
        out
    }

    pub fn report_json(&self) -> serde_json::Value {
        self.report_of("sample")
    }

    /// `reports/<name>/battery.json`.
    pub fn report_of(&self, name: &str) -> serde_json::Value {
        let p = self.ws.join(format!("reports/{name}/battery.json"));
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    /// Starts `harness ARGS` with stderr piped; returns the child and a channel of its
    /// stderr lines.
    pub fn spawn(&self, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
        let mut child = self
            .cmd()
            .args(rebuild_unless_told(args))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }
}

/// A copy of fixtures/workspaces/mutants-sample at `ws`: its manifest, library, test
/// target and named catalog.
pub fn mutants_sample(ws: &Path) {
    let src = fixture().join("../mutants-sample");
    for rel in [
        "Cargo.toml",
        "src/lib.rs",
        "tests/contract.rs",
        "mutations/named.toml",
    ] {
        std::fs::create_dir_all(ws.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(src.join(rel), ws.join(rel)).unwrap();
    }
}

/// Waits for a stderr line containing `needle`; panics with everything seen after `limit`.
pub fn wait_for_line(rx: &mpsc::Receiver<String>, needle: &str, limit: Duration) -> String {
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < limit {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) if l.contains(needle) => return l,
            Ok(l) => seen.push(l),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("no line containing {needle:?}; saw:\n{}", seen.join("\n"));
}

/// Waits for `child` at most `limit`; kills it and panics when it does not exit.
pub fn wait_with_limit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Asserts the exit code, printing both streams on mismatch.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn stderr_has(&self, needle: &str) -> &Run {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{}",
            self.stderr
        );
        self
    }

    pub fn stdout_has(&self, needle: &str) -> &Run {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}:\n{}",
            self.stdout
        );
        self
    }
}

/// Replaces volatile values (times, absolute paths) in a JSON report with placeholders.
pub fn redact(v: &mut serde_json::Value, ws: &Path) {
    use serde_json::Value;
    let ws_str = ws.to_string_lossy().into_owned();
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                let volatile = matches!(
                    k.as_str(),
                    "started_unix"
                        | "wall_seconds"
                        | "build_seconds"
                        | "test_seconds"
                        | "run_seconds"
                        | "timeout_seconds"
                        | "tests_seconds"
                        | "duration"
                );
                if volatile {
                    *val = Value::String("[redacted]".into());
                } else {
                    redact(val, ws);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact(x, ws)),
        Value::String(s) => {
            if s.contains(&ws_str) {
                *s = s.replace(&ws_str, "[ws]");
            }
            *s = strip_thread_ids(s);
        }
        _ => {}
    }
}

/// Removes the thread id newer Rust prints in panic headers: `thread 'x' (123) panicked`.
pub fn strip_thread_ids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("' (") {
        let (head, tail) = rest.split_at(i + 1);
        out.push_str(head);
        let after = &tail[2..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(") panicked") {
            rest = &after[digits + 1..];
        } else {
            rest = tail;
            out.push_str(&rest[..1]);
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A battery report's mutation's failing tests (`failed_tests[].name`), sorted.
pub fn killers(m: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = m["failed_tests"]
        .as_array()
        .unwrap_or_else(|| panic!("no failed_tests in {m}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    k.sort();
    k
}

/// A battery report as a run of every listed test would have it: switch mode's
/// reach-guided selection leaves the tests that do not reach a mutant's function unrun
/// (`not_reached`), and the claim is that they would have passed; so `not_reached` reads as
/// `passed` (outcomes, kill matrix) and the reach itself (`reached_by`) is dropped, as is a
/// mutant's own timeout (`timeout_seconds` and `timeout_rule` of a mutation), set from its
/// selected tests' seconds, and the report's `mode` (which mode ran, and why).
#[allow(dead_code)]
pub fn as_full_run(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("reached_by");
                if map.contains_key("verdict") {
                    map.remove("timeout_seconds");
                    map.remove("timeout_rule");
                }
                if map.contains_key("schema") {
                    map.remove("mode");
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            Value::String(s) if s == "not_reached" => *s = "passed".into(),
            _ => {}
        }
    }
    let mut v = v.clone();
    walk(&mut v);
    v
}

/// Whether the pinned cargo-mutants is installed. When it is not, the tests that run it
/// say so and stop, unless `HARNESS_REQUIRE_CARGO_MUTANTS` is set (scripts/test sets it
/// after `scripts/install-cargo-mutants`), in which case they fail.
pub fn cargo_mutants_present(test: &str) -> bool {
    let pin = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("scripts/install-cargo-mutants"),
    )
    .unwrap()
    .lines()
    .find_map(|l| {
        l.strip_prefix("pin=\"")?
            .strip_suffix('"')
            .map(str::to_string)
    })
    .expect("scripts/install-cargo-mutants pins a version");
    let have = Command::new("cargo")
        .args(["mutants", "--version"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if have == format!("cargo-mutants {pin}") {
        return true;
    }
    let why = format!(
        "{test}: cargo-mutants {pin} is not installed (found {have:?}); scripts/test installs it with scripts/install-cargo-mutants"
    );
    assert!(
        std::env::var_os("HARNESS_REQUIRE_CARGO_MUTANTS").is_none(),
        "{why}"
    );
    eprintln!("skipped: {why}");
    false
}

/// The SARIF 2.1.0 schema vendored in fixtures/schemas/ (OASIS), compiled.
pub fn sarif_validator() -> jsonschema::Validator {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/schemas/sarif-schema-2.1.0.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("the SARIF schema compiles")
}

/// Where `doc` breaks the SARIF 2.1.0 schema (empty: it is valid).
pub fn sarif_errors(v: &jsonschema::Validator, doc: &serde_json::Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}
