//! Cargo as a subprocess: package metadata, the test build (JSON messages), test listing,
//! one test run with a timeout (its output read by [`crate::libtest`]).
//!
//! Every child runs through [`crate::system::runner`]: in its own process group, so that a
//! timeout or an interruption kills cargo and the test binaries it started, and the
//! terminal's Ctrl-C reaches only the harness (which then stops the children itself and
//! restores the tree).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::system::interrupt;
use crate::system::runner::{RunError, Runner};

/// Errors running cargo (harness faults, not verdicts).
#[derive(Debug, thiserror::Error)]
pub enum CargoError {
    /// The process could not be started or waited for.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// cargo failed where it must succeed (metadata, listing).
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Exit status.
        status: String,
        /// Last lines of its standard error.
        stderr: String,
    },
    /// cargo's output could not be understood.
    #[error("`{command}`: unexpected output: {message}")]
    Output {
        /// The command line.
        command: String,
        /// What was wrong.
        message: String,
    },
    /// A signal asked the harness to stop.
    #[error(transparent)]
    Interrupted(#[from] interrupt::Interrupted),
}

/// A workspace package from `cargo metadata`.
#[derive(Debug, Clone)]
pub struct PackageMeta {
    /// Cargo's package id (as in `compiler-artifact` messages).
    pub id: String,
    /// Package name.
    pub name: String,
    /// Directory holding its `Cargo.toml`.
    pub dir: PathBuf,
    /// Names of its integration test targets (`kind` `test`).
    pub test_targets: Vec<String>,
    /// Names of its binary targets (`kind` `bin`).
    pub bins: Vec<String>,
    /// Whether it has a library target.
    pub has_lib: bool,
    /// Whether its library's doc tests run (`doctest`, true unless the manifest turns it off).
    pub lib_doctest: bool,
    /// The root source file (`src_path`) of its library and of each binary target.
    pub crate_roots: Vec<PathBuf>,
    /// The features it declares (`[features]`, and the implicit feature of each optional
    /// dependency), as `cargo metadata` lists them.
    pub features: Vec<String>,
    /// What each feature enables (`cargo metadata`'s `features` table: `name -> [feature,
    /// dep:name, dep/feature...]`).
    pub feature_table: BTreeMap<String, Vec<String>>,
    /// The directories of its path dependencies (any kind: normal, dev, build), as
    /// `cargo metadata` gives them.
    pub path_deps: Vec<PathBuf>,
}

/// The package of `packages` whose directory (canonical) is the longest prefix of `file`
/// (an absolute path); `None` when no package holds it.
pub fn owning_package<'p>(packages: &'p [PackageMeta], file: &Path) -> Option<&'p PackageMeta> {
    packages
        .iter()
        .filter(|p| {
            let dir = p.dir.canonicalize().unwrap_or_else(|_| p.dir.clone());
            file.starts_with(dir)
        })
        .max_by_key(|p| p.dir.components().count())
}

/// One `compiler-artifact` message.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// Package id.
    pub package_id: String,
    /// Target name.
    pub target: String,
    /// The target's kinds (`lib`, `bin`, `test`, `custom-build`, ...).
    pub kind: Vec<String>,
    /// Whether cargo reused the artifact without compiling.
    pub fresh: bool,
    /// The files cargo produced for it (`filenames`: the rlib and rmeta of a library, the
    /// executable of a test or binary).
    pub filenames: Vec<PathBuf>,
    /// The target's root source file (`target.src_path`, absolute).
    pub src_path: PathBuf,
    /// The executable cargo runs for it (`executable`; a test harness or binary).
    pub executable: Option<PathBuf>,
    /// Whether rustc built it as a libtest harness (`profile.test`: a library's, binary's
    /// or test target's unit tests; `false` for a `harness = false` target, a binary built
    /// for the integration tests, a library linked by them).
    pub profile_test: bool,
}

impl Artifact {
    /// How `cargo test` names this artifact's test executable in its `Running` line and its
    /// failure messages: the root source relative to `package_root`, after `unittests ` for
    /// the unit tests of a library or binary (`unittests src/lib.rs`), alone for a test
    /// target (`tests/one.rs`).
    pub fn test_description(&self, package_root: &Path) -> String {
        let rel = self
            .src_path
            .strip_prefix(package_root)
            .unwrap_or(&self.src_path);
        if self.kind.iter().any(|k| k == "test") {
            rel.display().to_string()
        } else {
            format!("unittests {}", rel.display())
        }
    }
}

/// An exit status as cargo words it when a test executable fails (`exit status: 101`;
/// `signal: 6, SIGABRT: process abort signal`, with POSIX's description of the signals
/// cargo names), so that a directly run executable that dies is reported as cargo reports
/// it.
pub fn cargo_status_words(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    let Some(signal) = status.signal() else {
        return status.to_string();
    };
    let name = match signal {
        6 => ", SIGABRT: process abort signal",
        14 => ", SIGALRM: alarm clock",
        8 => ", SIGFPE: erroneous arithmetic operation",
        1 => ", SIGHUP: hangup",
        4 => ", SIGILL: illegal instruction",
        2 => ", SIGINT: terminal interrupt signal",
        9 => ", SIGKILL: kill",
        13 => ", SIGPIPE: write on a pipe with no one to read",
        3 => ", SIGQUIT: terminal quit signal",
        11 => ", SIGSEGV: invalid memory reference",
        15 => ", SIGTERM: termination signal",
        7 => ", SIGBUS: access to undefined memory",
        31 => ", SIGSYS: bad system call",
        5 => ", SIGTRAP: trace/breakpoint trap",
        _ => "",
    };
    format!("signal: {signal}{name}")
}

impl Artifact {
    /// The source files rustc compiled into this artifact, from the dep-info file beside
    /// one of its `filenames` (`deps/NAME-HASH.d` for `deps/libNAME-HASH.rlib` or
    /// `deps/NAME-HASH`; `NAME.d` for an uplifted `NAME`), or, for an uplifted `NAME` with
    /// no `NAME.d` (a binary cargo builds for integration tests to start), beside the
    /// `deps/NAME-HASH` it is a hard link of; relative paths are resolved against `root`
    /// (the workspace root: rustc runs there for workspace members). `None` when no
    /// dep-info file is found.
    pub fn sources(&self, root: &Path) -> Option<Vec<PathBuf>> {
        let read = |text: String| -> Vec<PathBuf> {
            parse_dep_info(&text)
                .into_iter()
                .map(|p| root.join(p))
                .collect()
        };
        let beside = self.filenames.iter().find_map(|f| {
            let dir = f.parent()?;
            let stem = f.file_stem()?.to_string_lossy().into_owned();
            let mut names = vec![stem.clone()];
            if let Some(s) = stem.strip_prefix("lib") {
                names.push(s.to_string());
            }
            names.iter().find_map(|n| {
                let text = std::fs::read_to_string(dir.join(format!("{n}.d"))).ok()?;
                Some(read(text))
            })
        });
        beside.or_else(|| {
            self.filenames.iter().find_map(|f| {
                let linked = uplifted_from(f)?;
                std::fs::read_to_string(linked.with_extension("d"))
                    .ok()
                    .map(read)
            })
        })
    }
}

/// The `deps/NAME-HASH` that the uplifted file `f` (`DIR/NAME`) is a hard link of (same
/// device and inode: cargo uplifts by hard-linking), `None` when there is none.
fn uplifted_from(f: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(f).ok()?;
    let name = f.file_name()?.to_str()?;
    let prefix = format!("{name}-");
    std::fs::read_dir(f.parent()?.join("deps"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|hash| !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
        })
}

/// The prerequisites of a Makefile-style dep-info file as rustc and cargo write it
/// (`TARGET: DEP DEP...` lines, a space inside a path escaped as `\ `, `# env-dep:` comment
/// lines, and one `DEP:` line per prerequisite), in order of first appearance.
pub fn parse_dep_info(text: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        // The separator is the first `: ` (or a trailing `:`) not escaped.
        let Some(at) = line
            .find(": ")
            .or_else(|| line.strip_suffix(':').map(str::len))
        else {
            continue;
        };
        let rhs = line[at + 1..].trim_start();
        let mut cur = String::new();
        let mut chars = rhs.chars().peekable();
        let flush = |cur: &mut String, out: &mut Vec<PathBuf>| {
            if !cur.is_empty() {
                let p = PathBuf::from(std::mem::take(cur));
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    cur.push(' ');
                    chars.next();
                }
                ' ' => flush(&mut cur, &mut out),
                c => cur.push(c),
            }
        }
        flush(&mut cur, &mut out);
    }
    out
}

/// Result of `cargo test --no-run --message-format=json`.
#[derive(Debug, Clone)]
pub struct Build {
    /// Whether the build succeeded.
    pub success: bool,
    /// Every artifact cargo reported.
    pub artifacts: Vec<Artifact>,
    /// The first compiler error, rendered (or cargo's stderr when no compiler message).
    pub first_error: Option<String>,
    /// Wall seconds.
    pub seconds: f64,
}

/// A test's outcome in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// `test NAME ... ok`.
    Passed,
    /// `test NAME ... FAILED`.
    Failed,
    /// `test NAME ... ignored`.
    Ignored,
    /// No result line: the run timed out before the test finished.
    Unfinished,
    /// No result line although the run ended, and a test binary of the run stopped before
    /// its `test result:` summary (crash, abort, exit): the test may have been in it.
    NoResult,
    /// No result line although every test binary of the run reported its summary: the
    /// test does not exist (for example renamed away or compiled out by a mutation).
    Missing,
    /// Not run: switch mode's reach run showed that the test executes none of the mutated
    /// function's code, so it cannot observe the mutation (reach-guided test selection,
    /// `battery/reach.rs`). Never a kill; judged as the test passing.
    NotReached,
}

impl From<crate::libtest::Status> for Outcome {
    fn from(s: crate::libtest::Status) -> Self {
        match s {
            crate::libtest::Status::Passed => Outcome::Passed,
            crate::libtest::Status::Failed => Outcome::Failed,
            crate::libtest::Status::Ignored => Outcome::Ignored,
        }
    }
}

impl From<RunError> for CargoError {
    /// A child the runner could not start ([`CargoError::Spawn`]) or that an interruption
    /// stopped ([`CargoError::Interrupted`]).
    fn from(e: RunError) -> Self {
        match e {
            RunError::Interrupted(i) => CargoError::Interrupted(i),
            RunError::Spawn { command, source } => CargoError::Spawn { command, source },
        }
    }
}

/// Result of one test run.
#[derive(Debug, Clone)]
pub struct TestRun {
    /// Outcome of each requested test.
    pub outcomes: BTreeMap<String, Outcome>,
    /// Failure messages (`---- NAME stdout ----` sections) of failed tests.
    pub messages: BTreeMap<String, String>,
    /// Whether the run was killed at the timeout.
    pub timed_out: bool,
    /// Whether cargo exited with status 0.
    pub success: bool,
    /// Last lines of cargo's standard error (for crashed binaries).
    pub stderr_tail: String,
    /// The test binaries that stopped before their `test result:` summary, each named by
    /// its source with its exit status or signal as cargo reports it (`tests/one.rs (signal:
    /// 6, SIGABRT: process abort signal)`, see [`dead_binaries`]); empty when every binary of
    /// the run reported its summary.
    pub died: Vec<String>,
    /// Wall seconds.
    pub seconds: f64,
}

impl TestRun {
    /// Adds the outcomes, messages, failures and time of `r`, a later run of other tests.
    fn absorb(&mut self, r: TestRun) {
        self.outcomes.extend(r.outcomes);
        self.messages.extend(r.messages);
        self.timed_out |= r.timed_out;
        self.success &= r.success;
        if !self.stderr_tail.is_empty() && !r.stderr_tail.is_empty() {
            self.stderr_tail.push('\n');
        }
        self.stderr_tail.push_str(&r.stderr_tail);
        self.died.extend(r.died);
        self.seconds += r.seconds;
    }

    /// A run of no test: no outcome, nothing failed, no time.
    pub fn empty() -> TestRun {
        TestRun {
            outcomes: BTreeMap::new(),
            messages: BTreeMap::new(),
            timed_out: false,
            success: true,
            stderr_tail: String::new(),
            died: Vec::new(),
            seconds: 0.0,
        }
    }
}

/// The umask the run's test processes run under: it takes group read and write and other
/// write away, so what they create is readable by others but not by the group (files
/// `0o604`, folders and executables `0o715`), which no usual umask (`022`, `002`, `027`,
/// `077`) gives.
pub const RUN_UMASK: u32 = 0o062;

/// How to invoke `cargo test` for one catalog.
///
/// A catalog's tests come from up to two cargo invocations, since cargo refuses to mix
/// `--doc` with any other target selection: the libtest targets (`--lib`, `--bin NAME`,
/// `--test NAME`) and, with `doc_tests`, the library's doc tests (`--doc`). Building,
/// listing and running go through both; a test run's results are joined by test name (a
/// doc test's name holds spaces, no other test's does: [`crate::libtest::is_doc_test`]).
#[derive(Debug, Clone)]
pub struct CargoCmd {
    cargo: OsString,
    root: PathBuf,
    package: String,
    targets: Vec<String>,
    bins: Vec<String>,
    lib: bool,
    doc: bool,
    features: Vec<String>,
    no_default_features: bool,
    env: BTreeMap<String, String>,
    target_dir: PathBuf,
    state_dir: Option<PathBuf>,
    doc_lines: std::sync::Arc<DocLines>,
    doc_names: std::sync::Arc<Vec<String>>,
    kept_docs: std::sync::Arc<BTreeMap<String, crate::doctest_keep::KeptDoc>>,
    direct: std::sync::Arc<BTreeMap<String, crate::libtest_direct::Binary>>,
    incremental_off: Vec<String>,
}

/// Per source file as a doc test's name spells it (`src/lib.rs`), the line of each doc
/// test in the tree that was built (switch mode's scratch copy, whose switched files hold
/// more lines) to its line in the user's file, for the names (`FILE - ITEM (line N)`) the
/// catalog lists.
pub type DocLines = BTreeMap<String, BTreeMap<usize, usize>>;

/// The lines of `text` that open or close a code block in a `///` or `//!` doc comment
/// (a fence, `` ``` `` or `~~~`), 1-based, in order: where rustdoc's doc test names point
/// (`(line N)` is the line of the block's opening fence).
pub fn doc_fence_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start();
            let rest = t.strip_prefix("///").or_else(|| t.strip_prefix("//!"));
            rest.is_some_and(|r| {
                let r = r.trim_start();
                r.starts_with("```") || r.starts_with("~~~")
            })
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// One of the (at most two) cargo invocations that make up a catalog's test run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// `--lib`, `--bin NAME`, `--test NAME`: libtest harnesses cargo builds with `--no-run`.
    Harness,
    /// `--doc`: rustdoc compiles and runs the examples against the library at test time.
    Doc,
}

pub(crate) fn tail(s: &str, lines: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

impl CargoCmd {
    /// The invocation of `package`'s tests in the workspace at `root`, built in
    /// `target_dir`, with no test target yet (the `with_*` methods add them). Runs `$CARGO`
    /// when set, else `cargo`.
    pub fn new(root: &Path, package: &str, target_dir: &Path) -> CargoCmd {
        CargoCmd {
            cargo: std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            root: root.to_path_buf(),
            package: package.to_string(),
            targets: Vec::new(),
            bins: Vec::new(),
            lib: false,
            doc: false,
            features: Vec::new(),
            no_default_features: false,
            env: BTreeMap::new(),
            target_dir: target_dir.to_path_buf(),
            state_dir: None,
            doc_lines: std::sync::Arc::new(DocLines::new()),
            doc_names: std::sync::Arc::new(Vec::new()),
            kept_docs: std::sync::Arc::new(BTreeMap::new()),
            direct: std::sync::Arc::new(BTreeMap::new()),
            incremental_off: Vec::new(),
        }
    }

    /// The workspace root the commands run in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Tests the libtest targets: the library's unit tests when `lib` (`--lib`), the unit
    /// tests of the binaries `bins` (`--bin NAME` each) and the test targets `tests`
    /// (`--test NAME` each).
    pub fn with_targets(mut self, lib: bool, bins: &[String], tests: &[String]) -> CargoCmd {
        self.lib = lib;
        self.bins = bins.to_vec();
        self.targets = tests.to_vec();
        self
    }

    /// Tests the library's doc tests too when `doc` (`--doc`, a cargo invocation of its
    /// own).
    pub fn with_doc_tests(mut self, doc: bool) -> CargoCmd {
        self.doc = doc;
        self
    }

    /// Builds in `dir` instead of the target directory given to [`CargoCmd::new`].
    pub fn with_target_dir(mut self, dir: &Path) -> CargoCmd {
        self.target_dir = dir.to_path_buf();
        self
    }

    /// Builds with `features` enabled (`--features`), and without the default ones when
    /// `no_default` (`--no-default-features`).
    pub fn with_features(mut self, features: &[String], no_default: bool) -> CargoCmd {
        self.features = features.to_vec();
        self.no_default_features = no_default;
        self
    }

    /// Reads the doc tests' names of the built tree back in the user's lines (see
    /// [`DocLines`]).
    pub fn with_doc_lines(mut self, lines: std::sync::Arc<DocLines>) -> CargoCmd {
        self.doc_lines = lines;
        self
    }

    /// Knows every doc test of the library, `names` as the catalog spells them (with the
    /// other tests, which are ignored): a doc test run is then given, per doc test, the
    /// part of its name that selects the fewest others ([`CargoCmd::doc_filter`]).
    pub fn with_doc_names(mut self, names: std::sync::Arc<Vec<String>>) -> CargoCmd {
        self.doc_names = names;
        self
    }

    /// Runs these doc tests from their kept executables instead of through rustdoc
    /// ([`crate::doctest_keep`]), keyed by the name the catalog spells.
    pub fn with_kept_doc_tests(
        mut self,
        kept: std::sync::Arc<BTreeMap<String, crate::doctest_keep::KeptDoc>>,
    ) -> CargoCmd {
        self.kept_docs = kept;
        self
    }

    /// Runs these libtest tests from their executables instead of through `cargo test`
    /// ([`crate::libtest_direct`]), keyed by test name.
    pub fn with_direct_tests(
        mut self,
        direct: std::sync::Arc<BTreeMap<String, crate::libtest_direct::Binary>>,
    ) -> CargoCmd {
        self.direct = direct;
        self
    }

    /// `name` as the built tree spells it: a doc test's `(line N)` mapped forward through
    /// [`DocLines`] (the inverse of [`CargoCmd::original_name`]); any other name unchanged.
    pub fn built_name(&self, name: &str) -> String {
        self.remap_doc_line(name, |lines, n| {
            lines.iter().find(|(_, orig)| **orig == n).map(|(b, _)| *b)
        })
    }

    /// `name` with its doc test line `N` replaced by `map(lines of its file, N)`; unchanged
    /// when it is no doc test, no [`DocLines`] are known for its file, or `map` gives none.
    fn remap_doc_line(
        &self,
        name: &str,
        map: impl Fn(&BTreeMap<usize, usize>, usize) -> Option<usize>,
    ) -> String {
        if self.doc_lines.is_empty() {
            return name.to_string();
        }
        let Some((file, head, n)) = crate::libtest::doc_test_parts(name) else {
            return name.to_string();
        };
        match self.doc_lines.get(file).and_then(|m| map(m, n)) {
            Some(line) => format!("{head} (line {line})"),
            None => name.to_string(),
        }
    }

    /// The filter that selects doc test `name` (catalog spelling) in `cargo test --doc --
    /// FILTER`, and whether it selects that test alone. rustdoc splits its test arguments at
    /// whitespace, so the filter is one whitespace-free word of the name as the built tree
    /// spells it: of the doc tests [`CargoCmd::with_doc_names`] gave, the word that the
    /// fewest contain (the longer on a tie: an item's name before its line). Without those
    /// names it is [`crate::libtest::doc_test_filter`]'s word, never known to be alone.
    pub fn doc_filter(&self, name: &str) -> (String, bool) {
        self.doc_filter_among(name, &self.built_doc_names())
    }

    /// The doc tests of [`CargoCmd::with_doc_names`], as the built tree spells them.
    fn built_doc_names(&self) -> Vec<String> {
        self.doc_names
            .iter()
            .filter(|n| crate::libtest::is_doc_test(n))
            .map(|n| self.built_name(n))
            .collect()
    }

    /// [`CargoCmd::doc_filter`] among `docs`, the target's doc tests in built spelling.
    fn doc_filter_among(&self, name: &str, docs: &[String]) -> (String, bool) {
        let built = self.built_name(name);
        if docs.is_empty() || !docs.contains(&built) {
            return (crate::libtest::doc_test_filter(name).to_string(), false);
        }
        let best = built
            .split_whitespace()
            .map(|w| (docs.iter().filter(|d| d.contains(w)).count(), w))
            .min_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())));
        match best {
            Some((count, w)) => (w.to_string(), count == 1),
            None => (crate::libtest::doc_test_filter(name).to_string(), false),
        }
    }

    /// `name` as the catalog spells it: a doc test's `(line N)` mapped back through
    /// [`DocLines`]; any other name unchanged.
    fn original_name(&self, name: &str) -> String {
        self.remap_doc_line(name, |lines, n| lines.get(&n).copied())
    }

    /// Records every child process group under `state` while it runs, so that a later
    /// harness command can kill it if this process dies (see [`crate::system::process::reap_orphans`]).
    pub fn with_state_dir(mut self, state: &Path) -> CargoCmd {
        self.state_dir = Some(state.to_path_buf());
        self
    }

    /// Every command this invocation runs builds the packages `members` (the workspace's)
    /// without incremental compilation (`cargo --config
    /// 'profile.{dev,test}.package."NAME".incremental=false'`): for a target directory whose
    /// builds are cold or of a changed source (switch mode's scratch copy), where rustc's
    /// incremental session is written and never read again. Only the members: a path
    /// dependency outside the workspace keeps cargo's default (its profile is part of its
    /// fingerprint, so it stays fresh where it was seeded from), and cargo never builds
    /// other dependencies incrementally. A `CARGO_INCREMENTAL` in the environment still
    /// wins (cargo's precedence). Tests see no difference: these are flags of cargo's, not
    /// environment variables.
    pub fn without_incremental(mut self, members: &[String]) -> CargoCmd {
        self.incremental_off = members.to_vec();
        self
    }

    /// The arguments before the subcommand ([`CargoCmd::without_incremental`]).
    fn global_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        for m in &self.incremental_off {
            for profile in ["dev", "test"] {
                a.push("--config".into());
                a.push(format!("profile.{profile}.package.{m:?}.incremental=false").into());
            }
        }
        a
    }

    /// Sets (or overrides) one environment variable of every command this invocation runs.
    pub fn with_env(mut self, key: &str, value: &str) -> CargoCmd {
        self.env.insert(key.to_string(), value.to_string());
        self
    }

    /// [`CargoCmd::with_env`] for each of `vars`.
    pub fn with_envs(mut self, vars: &BTreeMap<String, String>) -> CargoCmd {
        self.env
            .extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        self
    }

    fn manifest(&self) -> PathBuf {
        self.root.join("Cargo.toml")
    }

    /// The invocations the catalog's tests need, libtest targets first.
    fn groups(&self) -> Vec<Group> {
        let mut g = Vec::new();
        if self.lib || !self.bins.is_empty() || !self.targets.is_empty() {
            g.push(Group::Harness);
        }
        if self.doc {
            g.push(Group::Doc);
        }
        g
    }

    /// `SUB --manifest-path M -p P --target-dir T [features]`.
    fn common_args(&self, sub: &str) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            sub.into(),
            "--manifest-path".into(),
            self.manifest().into(),
            "-p".into(),
            self.package.clone().into(),
            "--target-dir".into(),
            self.target_dir.clone().into(),
        ];
        if !self.features.is_empty() {
            a.push("--features".into());
            a.push(self.features.join(",").into());
        }
        if self.no_default_features {
            a.push("--no-default-features".into());
        }
        a
    }

    /// `--lib`, `--bin X`..., `--test X`...: the libtest targets.
    fn harness_selection(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        if self.lib {
            a.push("--lib".into());
        }
        for b in &self.bins {
            a.push("--bin".into());
            a.push(b.into());
        }
        for t in &self.targets {
            a.push("--test".into());
            a.push(t.into());
        }
        a
    }

    /// `cargo test` of one group, before any `--no-run`, `--` or test arguments.
    fn test_args(&self, g: Group) -> Vec<OsString> {
        let mut a = self.common_args("test");
        match g {
            Group::Harness => a.extend(self.harness_selection()),
            Group::Doc => a.push("--doc".into()),
        }
        a
    }

    /// The build of one group: `cargo test --no-run` of the libtest targets; for the doc
    /// tests (which cargo cannot build without running them, `--doc --no-run` is refused)
    /// the library they link against, as `cargo test --doc` builds it (`cargo build
    /// --profile test --lib`: the same artifact, which the test run then finds fresh).
    fn build_args(&self, g: Group) -> Vec<OsString> {
        let mut a = match g {
            Group::Harness => {
                let mut a = self.test_args(g);
                a.push("--no-run".into());
                a
            }
            Group::Doc => {
                let mut a = self.common_args("build");
                a.extend(["--profile".into(), "test".into(), "--lib".into()]);
                a
            }
        };
        a.push("--message-format=json".into());
        a
    }

    fn render(&self, args: &[OsString]) -> String {
        let mut s = self.cargo.to_string_lossy().into_owned();
        for a in self.global_args().iter().chain(args) {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    /// Runs `cargo ARGS` (no timeout) with this invocation's directory, environment and
    /// state directory, in its own process group killed on interruption. Returns its
    /// output and wall seconds; a failing exit status is the caller's to read.
    pub fn run_args(&self, args: &[String]) -> Result<(Output, f64), CargoError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let (out, _, seconds) = self.exec(&args, None, false)?;
        Ok((out, seconds))
    }

    /// Runs cargo with `args` through the one child runner ([`Runner`]: its own process
    /// group, recorded in the state directory, killed at `timeout` or on interruption).
    /// With `mark`, the child runs under [`RUN_UMASK`] (the test runs: what
    /// they create in the tree is recognised as theirs). Returns (output, timed_out, seconds).
    fn exec(
        &self,
        args: &[OsString],
        timeout: Option<Duration>,
        mark: bool,
    ) -> Result<(Output, bool, f64), CargoError> {
        let mut runner = Runner::new(&self.cargo)
            .args(self.global_args())
            .args(args)
            .dir(&self.root)
            .env("INSTA_UPDATE", "no")
            .env("CARGO_TERM_COLOR", "never")
            // Failure messages without backtraces; a catalog's `env` may override this.
            .env("RUST_BACKTRACE", "0")
            .env_remove("CARGO_TARGET_DIR")
            .timeout(timeout)
            .umask(mark.then_some(RUN_UMASK))
            .state_dir(self.state_dir.as_deref());
        for (k, v) in &self.env {
            runner = runner.env(k, v);
        }
        let done = runner.run().map_err(CargoError::from)?;
        let out = Output {
            status: done.status,
            stdout: done.stdout,
            stderr: done.stderr,
        };
        Ok((out, done.timed_out, done.seconds))
    }

    /// `cargo metadata --format-version 1` on the workspace, with `--no-deps` unless
    /// `resolve`; its output and command line when cargo succeeded. Errors: cargo could not
    /// run or failed ([`CargoError::Failed`] with its standard error).
    fn metadata_output(&self, resolve: bool) -> Result<(Output, String), CargoError> {
        let mut args: Vec<OsString> = vec!["metadata".into()];
        if !resolve {
            args.push("--no-deps".into());
        }
        args.extend([
            "--format-version".into(),
            "1".into(),
            "--manifest-path".into(),
            self.manifest().into(),
        ]);
        let (out, _, _) = self.exec(&args, None, false)?;
        let command = self.render(&args);
        if out.status.success() {
            return Ok((out, command));
        }
        Err(CargoError::Failed {
            command,
            status: out.status.to_string(),
            stderr: tail(&String::from_utf8_lossy(&out.stderr), 20),
        })
    }

    /// Writes the workspace's `Cargo.lock` as its first build would: `cargo metadata` with
    /// the dependencies resolved (no `--no-deps`; unlike `cargo generate-lockfile` it does
    /// not update the registry index first), its output dropped. Errors: cargo could not
    /// run or failed ([`CargoError::Failed`] with its standard error).
    pub fn write_lockfile(&self) -> Result<(), CargoError> {
        self.metadata_output(true).map(drop)
    }

    /// Workspace packages (`cargo metadata --no-deps`).
    pub fn metadata(&self) -> Result<Vec<PackageMeta>, CargoError> {
        let (out, command) = self.metadata_output(false)?;
        #[derive(Deserialize)]
        struct Meta {
            packages: Vec<Pkg>,
        }
        #[derive(Deserialize)]
        struct Pkg {
            id: String,
            name: String,
            manifest_path: PathBuf,
            targets: Vec<Target>,
            #[serde(default)]
            features: BTreeMap<String, serde_json::Value>,
            #[serde(default)]
            dependencies: Vec<Dep>,
        }
        #[derive(Deserialize)]
        struct Dep {
            #[serde(default)]
            path: Option<PathBuf>,
        }
        #[derive(Deserialize)]
        struct Target {
            name: String,
            kind: Vec<String>,
            #[serde(default)]
            doctest: bool,
            #[serde(default)]
            src_path: Option<PathBuf>,
        }
        let meta: Meta = serde_json::from_slice(&out.stdout).map_err(|e| CargoError::Output {
            command,
            message: e.to_string(),
        })?;
        Ok(meta
            .packages
            .into_iter()
            .map(|p| PackageMeta {
                test_targets: p
                    .targets
                    .iter()
                    .filter(|t| t.kind.iter().any(|k| k == "test"))
                    .map(|t| t.name.clone())
                    .collect(),
                bins: p
                    .targets
                    .iter()
                    .filter(|t| t.kind.iter().any(|k| k == "bin"))
                    .map(|t| t.name.clone())
                    .collect(),
                lib_doctest: p
                    .targets
                    .iter()
                    .any(|t| t.kind.iter().any(|k| k.contains("lib")) && t.doctest),
                has_lib: p
                    .targets
                    .iter()
                    .any(|t| t.kind.iter().any(|k| k.contains("lib"))),
                crate_roots: p
                    .targets
                    .iter()
                    .filter(|t| t.kind.iter().any(|k| k.contains("lib") || k == "bin"))
                    .filter_map(|t| t.src_path.clone())
                    .collect(),
                features: p.features.keys().cloned().collect(),
                feature_table: p
                    .features
                    .iter()
                    .map(|(k, v)| {
                        let on = v
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|x| x.as_str().map(str::to_string))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (k.clone(), on)
                    })
                    .collect(),
                path_deps: p.dependencies.into_iter().filter_map(|d| d.path).collect(),
                id: p.id,
                name: p.name,
                dir: p
                    .manifest_path
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
            })
            .collect())
    }

    /// Builds every group's targets without running tests (see [`CargoCmd::build_output`]).
    pub fn build(&self) -> Result<Build, CargoError> {
        Ok(self.build_output()?.0)
    }

    /// Builds the test targets without running them (`cargo test --no-run
    /// --message-format=json`; for the doc tests, the library they link against), and
    /// returns the build with cargo's JSON messages of every invocation.
    pub fn build_output(&self) -> Result<(Build, String), CargoError> {
        let mut build = Build {
            success: true,
            artifacts: Vec::new(),
            first_error: None,
            seconds: 0.0,
        };
        let mut messages = String::new();
        for g in self.groups() {
            let (out, _, seconds) = self.exec(&self.build_args(g), None, false)?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let (artifacts, first_error) = parse_build_messages(&stdout);
            messages.push_str(&stdout);
            build.artifacts.extend(artifacts);
            build.seconds += seconds;
            if !out.status.success() {
                build.success = false;
                build.first_error =
                    first_error.or_else(|| Some(tail(&String::from_utf8_lossy(&out.stderr), 20)));
                break;
            }
        }
        Ok((build, messages))
    }

    /// `cargo check --profile test --message-format=json` of the libtest targets (the
    /// library for the doc tests). Returns (success, cargo's JSON messages, its stderr).
    pub fn check(&self) -> Result<(bool, String, String), CargoError> {
        let mut args = self.common_args("check");
        args.extend(["--profile".into(), "test".into()]);
        let mut sel = self.harness_selection();
        if self.doc && !self.lib {
            sel.push("--lib".into());
        }
        args.extend(sel);
        args.push("--message-format=json".into());
        let (out, _, _) = self.exec(&args, None, false)?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// `cargo check --message-format=json` of the package's library (`has_lib`) and
    /// binaries (`has_bins`) as a test run builds them for the test targets and doc tests to
    /// link and spawn: not in test mode. Returns (success, cargo's JSON messages, its
    /// stderr); with neither, nothing runs and it succeeds.
    pub fn check_built(
        &self,
        has_lib: bool,
        has_bins: bool,
    ) -> Result<(bool, String, String), CargoError> {
        if !has_lib && !has_bins {
            return Ok((true, String::new(), String::new()));
        }
        let mut args = self.common_args("check");
        if has_lib {
            args.push("--lib".into());
        }
        if has_bins {
            args.push("--bins".into());
        }
        args.push("--message-format=json".into());
        let (out, _, _) = self.exec(&args, None, false)?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// Every test the targets hold (`-- --list`), in listing order: the libtest targets'
    /// first, then the doc tests.
    pub fn list(&self) -> Result<Vec<String>, CargoError> {
        self.list_with(false)
    }

    /// The tests of [`CargoCmd::list`] that the tests themselves mark ignored (`#[ignore]`,
    /// an `ignore` doc test: `-- --list --ignored`), in listing order. A run of one reports
    /// it ignored, never passed.
    pub fn list_ignored(&self) -> Result<Vec<String>, CargoError> {
        self.list_with(true)
    }

    /// [`CargoCmd::list`], the libtest targets' tests listed by running their executables
    /// from `artifacts` (this invocation's `cargo test --no-run` build) with `--list`, in the
    /// order `cargo test` runs them (the library, the binaries, the test targets, each by
    /// name), without a cargo start: libtest lists its tests from the executable alone. When
    /// a selected target has no libtest executable among them (a `harness = false` target,
    /// whose listing is its own code's, run as cargo runs it), or one cannot be run, its
    /// group is listed through cargo as [`CargoCmd::list`] does. The doc tests always are.
    pub fn list_built(&self, artifacts: &[Artifact]) -> Result<Vec<String>, CargoError> {
        let Some(exes) = self.harness_executables(artifacts) else {
            return self.list();
        };
        let mut all = Vec::new();
        for exe in &exes {
            let done = Runner::new(exe)
                .args(["--list"])
                .dir(&self.root)
                .state_dir(self.state_dir.as_deref())
                .run()
                .map_err(CargoError::from)?;
            if !done.status.success() {
                return self.list();
            }
            all.extend(
                crate::libtest::parse_list(&String::from_utf8_lossy(&done.stdout))
                    .iter()
                    .map(|n| self.original_name(n)),
            );
        }
        if self.groups().contains(&Group::Doc) {
            all.extend(self.list_group(Group::Doc, false)?);
        }
        Ok(all)
    }

    /// The libtest executables `cargo test` of this invocation's libtest targets runs, in
    /// its order, from `artifacts`: one per selected target (`--lib`, each `--bin`, each
    /// `--test`) built with `profile.test`. `None` when a selected target has none.
    fn harness_executables(&self, artifacts: &[Artifact]) -> Option<Vec<PathBuf>> {
        if !self.groups().contains(&Group::Harness) {
            return Some(Vec::new());
        }
        let find = |kinds: &[&str], name: Option<&str>| -> Option<PathBuf> {
            let mut hits = artifacts.iter().filter(|a| {
                a.profile_test
                    && a.kind.iter().any(|k| kinds.contains(&k.as_str()))
                    && name.is_none_or(|n| a.target == n)
            });
            let hit = hits.next()?.executable.clone();
            // Two candidates (another package's target of the same kind and name): not sure.
            if hits.next().is_some() {
                return None;
            }
            hit
        };
        let mut exes = Vec::new();
        if self.lib {
            exes.push(find(
                &["lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"],
                None,
            )?);
        }
        let mut bins = self.bins.clone();
        bins.sort();
        for b in &bins {
            exes.push(find(&["bin"], Some(b))?);
        }
        let mut targets = self.targets.clone();
        targets.sort();
        for t in &targets {
            exes.push(find(&["test"], Some(t))?);
        }
        Some(exes)
    }

    fn list_with(&self, ignored: bool) -> Result<Vec<String>, CargoError> {
        let mut all = Vec::new();
        for g in self.groups() {
            all.extend(self.list_group(g, ignored)?);
        }
        Ok(all)
    }

    /// `cargo test` of group `g` with `-- --list` (and `--ignored`): its tests.
    fn list_group(&self, g: Group, ignored: bool) -> Result<Vec<String>, CargoError> {
        let mut args = self.test_args(g);
        args.push("--".into());
        args.push("--list".into());
        if ignored {
            args.push("--ignored".into());
        }
        let (out, _, _) = self.exec(&args, None, false)?;
        if !out.status.success() {
            return Err(CargoError::Failed {
                command: self.render(&args),
                status: out.status.to_string(),
                stderr: tail(&String::from_utf8_lossy(&out.stderr), 20),
            });
        }
        Ok(
            crate::libtest::parse_list(&String::from_utf8_lossy(&out.stdout))
                .iter()
                .map(|n| self.original_name(n))
                .collect(),
        )
    }

    /// Runs exactly `tests` (`--no-fail-fast`), killed after `timeout`, under
    /// [`RUN_UMASK`]: the libtest targets' tests in one invocation
    /// (`-- --exact NAMES...`), then the doc tests in another within what is left of
    /// `timeout`, then the kept doc tests ([`CargoCmd::with_kept_doc_tests`]) one by one
    /// from their executables. rustdoc splits its test arguments at whitespace, so a doc
    /// test's name cannot be given whole: that invocation is given one word of each name
    /// ([`CargoCmd::doc_filter`]), which may select a superset, and only the requested
    /// tests' results are read. A test no run reports is [`Outcome::Missing`] (or
    /// unfinished when the time ran out first).
    pub fn run(&self, tests: &[String], timeout: Option<Duration>) -> Result<TestRun, CargoError> {
        let (doc, lib): (Vec<String>, Vec<String>) = tests
            .iter()
            .cloned()
            .partition(|t| crate::libtest::is_doc_test(t));
        let (kept, doc): (Vec<String>, Vec<String>) = if self.doc {
            doc.into_iter()
                .partition(|t| self.kept_docs.contains_key(t))
        } else {
            (Vec::new(), doc)
        };
        let (direct, lib): (Vec<String>, Vec<String>) =
            lib.into_iter().partition(|t| self.direct.contains_key(t));
        let groups = self.groups();
        let mut total = TestRun::empty();
        for (g, names) in [(Group::Harness, &lib), (Group::Doc, &doc)] {
            if names.is_empty() || !groups.contains(&g) {
                continue;
            }
            let left = timeout.map(|t| t.saturating_sub(Duration::from_secs_f64(total.seconds)));
            if total.timed_out || left.is_some_and(|l| l.is_zero()) {
                total.timed_out = true;
                continue;
            }
            let mut args = self.test_args(g);
            args.push("--no-fail-fast".into());
            args.push("--".into());
            match g {
                Group::Harness => {
                    args.push("--exact".into());
                    args.extend(names.iter().map(OsString::from));
                }
                Group::Doc => {
                    let docs = self.built_doc_names();
                    let mut filters: Vec<String> = names
                        .iter()
                        .map(|n| self.doc_filter_among(n, &docs).0)
                        .collect();
                    filters.sort_unstable();
                    filters.dedup();
                    args.extend(filters.into_iter().map(OsString::from));
                }
            }
            let r = self.run_group(&args, names, left)?;
            total.absorb(r);
        }
        self.run_direct(&direct, timeout, &mut total)?;
        self.replay_kept(&kept, timeout, &mut total)?;
        for t in tests {
            if !total.outcomes.contains_key(t) {
                let o = if total.timed_out {
                    Outcome::Unfinished
                } else {
                    Outcome::Missing
                };
                total.outcomes.insert(t.clone(), o);
            }
        }
        Ok(total)
    }

    /// Runs the kept doc tests `names` one after another from their executables
    /// ([`crate::doctest_keep::KeptDoc::replay`]) with this invocation's environment, within
    /// what is left of `timeout` after `total`'s runs, and adds their outcomes to `total`.
    fn replay_kept(
        &self,
        names: &[String],
        timeout: Option<Duration>,
        total: &mut TestRun,
    ) -> Result<(), CargoError> {
        for t in names {
            let left = timeout.map(|l| l.saturating_sub(Duration::from_secs_f64(total.seconds)));
            if total.timed_out || left.is_some_and(|l| l.is_zero()) {
                total.timed_out = true;
                return Ok(());
            }
            let Some(k) = self.kept_docs.get(t) else {
                continue;
            };
            let r = k
                .replay(&self.env, left, self.state_dir.as_deref(), Some(RUN_UMASK))
                .map_err(CargoError::from)?;
            total.seconds += r.seconds;
            let o = if r.passed {
                Outcome::Passed
            } else if r.timed_out {
                total.timed_out = true;
                Outcome::Unfinished
            } else {
                total.success = false;
                total.messages.insert(t.clone(), r.message);
                Outcome::Failed
            };
            total.outcomes.insert(t.clone(), o);
        }
        Ok(())
    }

    /// Runs the libtest tests `names` from their executables ([`CargoCmd::with_direct_tests`])
    /// with this invocation's environment, within what is left of `timeout` after `total`'s
    /// runs, and adds their outcomes to `total`, read as [`CargoCmd::run_group`] reads
    /// cargo's run. The tests are dealt out to as many lanes as libtest would run tests at
    /// once ([`crate::libtest_direct::lanes`], by their reach run's seconds); the lanes go
    /// at once, each one process per executable, one test at a time. With one lane (one
    /// thread, or one test) each executable runs its tests in one process as cargo runs it.
    fn run_direct(
        &self,
        names: &[String],
        timeout: Option<Duration>,
        total: &mut TestRun,
    ) -> Result<(), CargoError> {
        let Some(first) = names.first().map(|t| &self.direct[t]) else {
            return Ok(());
        };
        let left = timeout.map(|l| l.saturating_sub(Duration::from_secs_f64(total.seconds)));
        if total.timed_out || left.is_some_and(|l| l.is_zero()) {
            total.timed_out = true;
            return Ok(());
        }
        let threads = crate::libtest_direct::test_threads(|k| {
            self.env.get(k).cloned().or_else(|| {
                first
                    .env
                    .iter()
                    .find(|(n, _)| n.as_os_str() == k)
                    .map(|(_, v)| v.to_string_lossy().into_owned())
            })
        });
        let weighted: Vec<(String, f64)> = names
            .iter()
            .map(|t| (t.clone(), self.direct[t].reach_seconds))
            .collect();
        let lanes = crate::libtest_direct::lanes(&weighted, threads);
        let one_at_a_time = lanes.len() > 1;
        let start = std::time::Instant::now();
        let ran: Vec<Result<Vec<DirectRun<'_>>, RunError>> = std::thread::scope(|s| {
            let handles: Vec<_> = lanes
                .iter()
                .map(|lane| s.spawn(move || self.run_lane(lane, left, start, one_at_a_time)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut block = TestRun::empty();
        for lane in ran {
            let lane = lane.map_err(CargoError::from)?;
            for (tests, b, done) in lane {
                block.absorb(direct_result(&tests, b, done));
            }
        }
        block.seconds = start.elapsed().as_secs_f64();
        total.absorb(block);
        Ok(())
    }

    /// One lane of [`CargoCmd::run_direct`]: its tests, one process per executable (in the
    /// order of their first test), each given what is left of `left` since `start`; a
    /// process the time ran out before is not started (`None`).
    fn run_lane<'a>(
        &'a self,
        lane: &[String],
        left: Option<Duration>,
        start: std::time::Instant,
        one_at_a_time: bool,
    ) -> Result<Vec<DirectRun<'a>>, RunError> {
        let mut order: Vec<(&crate::libtest_direct::Binary, Vec<String>)> = Vec::new();
        for t in lane {
            let b = &self.direct[t];
            match order.iter_mut().find(|(o, _)| o.program == b.program) {
                Some((_, tests)) => tests.push(t.clone()),
                None => order.push((b, vec![t.clone()])),
            }
        }
        let mut out = Vec::new();
        for (b, tests) in order {
            let remaining = left.map(|l| l.saturating_sub(start.elapsed()));
            if remaining.is_some_and(|r| r.is_zero()) {
                out.push((tests, b, None));
                continue;
            }
            let done = b.run(
                &tests,
                &self.env,
                remaining,
                self.state_dir.as_deref(),
                Some(RUN_UMASK),
                one_at_a_time,
            )?;
            out.push((tests, b, Some(done)));
        }
        Ok(out)
    }

    /// One `cargo test` invocation (`args` complete), read for `tests`.
    fn run_group(
        &self,
        args: &[OsString],
        tests: &[String],
        timeout: Option<Duration>,
    ) -> Result<TestRun, CargoError> {
        let (out, timed_out, seconds) = self.exec(args, timeout, true)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut parsed = crate::libtest::parse_transcript(&stdout);
        if !self.doc_lines.is_empty() {
            parsed.results = std::mem::take(&mut parsed.results)
                .into_iter()
                .map(|(k, v)| (self.original_name(&k), v))
                .collect();
            parsed.messages = std::mem::take(&mut parsed.messages)
                .into_iter()
                .map(|(k, v)| (self.original_name(&k), v))
                .collect();
        }
        let died = if timed_out {
            Vec::new()
        } else {
            dead_binaries(&stderr, &parsed.blocks)
        };
        Ok(read_run(
            tests,
            &parsed,
            timed_out,
            &died,
            TestRun {
                outcomes: BTreeMap::new(),
                messages: BTreeMap::new(),
                timed_out,
                success: out.status.success(),
                stderr_tail: tail(&stderr, 20),
                died: died.clone(),
                seconds,
            },
        ))
    }
}

/// One process of a direct run: its tests, its executable, and how it ended (`None`: not
/// started, the time had run out).
type DirectRun<'a> = (
    Vec<String>,
    &'a crate::libtest_direct::Binary,
    Option<crate::system::runner::Finished>,
);

/// A direct run's process read as a test run: libtest's transcript on its standard output;
/// it died when it ended, not at the timeout, without its one `test result:` summary.
fn direct_result(
    tests: &[String],
    b: &crate::libtest_direct::Binary,
    done: Option<crate::system::runner::Finished>,
) -> TestRun {
    let Some(done) = done else {
        let mut run = TestRun::empty();
        run.timed_out = true;
        run.outcomes = tests
            .iter()
            .map(|t| (t.clone(), Outcome::Unfinished))
            .collect();
        return run;
    };
    let parsed = crate::libtest::parse_transcript(&String::from_utf8_lossy(&done.stdout));
    let whole = parsed.blocks.len() == 1 && parsed.blocks[0];
    let died = if done.timed_out || whole {
        Vec::new()
    } else {
        vec![format!(
            "{} ({})",
            b.described,
            cargo_status_words(done.status)
        )]
    };
    read_run(
        tests,
        &parsed,
        done.timed_out,
        &died,
        TestRun {
            outcomes: BTreeMap::new(),
            messages: BTreeMap::new(),
            timed_out: done.timed_out,
            success: done.status.success(),
            stderr_tail: tail(&String::from_utf8_lossy(&done.stderr), 20),
            died: died.clone(),
            seconds: done.seconds,
        },
    )
}

/// `run` (its status, output and time) with the outcome and failure message of each of
/// `tests` read from `parsed`: a test with no result line is unfinished when the run timed
/// out, missing when every binary reported its summary (`died` empty), else without result.
fn read_run(
    tests: &[String],
    parsed: &crate::libtest::Transcript,
    timed_out: bool,
    died: &[String],
    mut run: TestRun,
) -> TestRun {
    for t in tests {
        let o = match parsed.results.get(t) {
            Some(o) => Outcome::from(*o),
            None if timed_out => Outcome::Unfinished,
            None if died.is_empty() => Outcome::Missing,
            None => Outcome::NoResult,
        };
        if o == Outcome::Failed {
            run.messages.insert(
                t.clone(),
                parsed.messages.get(t).cloned().unwrap_or_default(),
            );
        }
        run.outcomes.insert(t.clone(), o);
    }
    run
}

/// The test binaries of a finished `cargo test` run that stopped before their summary line.
/// `stderr` is cargo's standard error: one `Running SRC (PATH)` line per test binary started
/// (`Doc-tests NAME` for rustdoc's run of a library's doc tests),
/// in the order they ran, and `process didn't exit successfully: `PATH ARGS...` (STATUS)` for
/// each binary that exited non-zero. `blocks` is, per `running N tests` block of libtest's
/// standard output (same order), whether its `test result:` summary followed
/// ([`crate::libtest::Transcript::blocks`]). Each entry names the binary by its source
/// (`tests/one.rs`) and gives its exit status or signal as cargo reports it (`signal: 6,
/// SIGABRT: process abort signal`), or "exited before its summary line" when cargo reports
/// none (a test calling `std::process::exit(0)`). Empty when every binary printed its summary.
pub fn dead_binaries(stderr: &str, blocks: &[bool]) -> Vec<String> {
    let mut started: Vec<(String, String)> = Vec::new();
    let mut status_of: BTreeMap<String, String> = BTreeMap::new();
    let file_name = |p: &str| {
        Path::new(p)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.to_string())
    };
    for line in stderr.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Running ") {
            // `Running tests/one.rs (target/debug/deps/one-HASH)`
            let (src, path) = rest
                .rsplit_once(" (")
                .map(|(s, p)| (s, p.strip_suffix(')').unwrap_or(p)))
                .unwrap_or((rest, rest));
            started.push((src.to_string(), file_name(path)));
        } else if let Some(krate) = t.strip_prefix("Doc-tests ") {
            // `Doc-tests NAME`: rustdoc runs the library's doc tests.
            started.push((format!("the doc tests of {krate}"), String::new()));
        } else if let Some((_, rest)) = t.split_once("process didn't exit successfully: `")
            && let Some((cmd, status)) = rest.rsplit_once("` (")
        {
            let status = status.strip_suffix(')').unwrap_or(status);
            let bin = cmd.split(' ').next().unwrap_or(cmd);
            status_of.insert(file_name(bin), status.to_string());
        }
    }
    let n = started.len().max(blocks.len());
    (0..n)
        .filter(|&k| !blocks.get(k).copied().unwrap_or(false))
        .map(|k| match started.get(k) {
            Some((src, bin)) => format!(
                "{src} ({})",
                status_of
                    .get(bin)
                    .map_or("exited before its summary line", String::as_str)
            ),
            None => "a test binary (exited before its summary line)".to_string(),
        })
        .collect()
}

/// Artifacts and the first rendered compiler error from cargo's JSON message stream
/// (cargo's `--message-format=json`: one JSON object per line, `reason` tells the kind).
pub fn parse_build_messages(stdout: &str) -> (Vec<Artifact>, Option<String>) {
    let mut artifacts = Vec::new();
    let mut first_error = None;
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match v["reason"].as_str() {
            Some("compiler-artifact") => {
                let strings = |x: &serde_json::Value| -> Vec<String> {
                    x.as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                artifacts.push(Artifact {
                    package_id: v["package_id"].as_str().unwrap_or_default().to_string(),
                    target: v["target"]["name"].as_str().unwrap_or_default().to_string(),
                    kind: strings(&v["target"]["kind"]),
                    fresh: v["fresh"].as_bool().unwrap_or(false),
                    filenames: strings(&v["filenames"])
                        .into_iter()
                        .map(PathBuf::from)
                        .collect(),
                    src_path: PathBuf::from(v["target"]["src_path"].as_str().unwrap_or_default()),
                    executable: v["executable"].as_str().map(PathBuf::from),
                    profile_test: v["profile"]["test"].as_bool().unwrap_or(false),
                })
            }
            Some("compiler-message")
                if first_error.is_none() && v["message"]["level"].as_str() == Some("error") =>
            {
                first_error = v["message"]["rendered"]
                    .as_str()
                    .or(v["message"]["message"].as_str())
                    .map(|s| s.trim_end().to_string());
            }
            _ => {}
        }
    }
    (artifacts, first_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_libtest_executables_listed_directly_are_the_selected_targets_in_cargos_order() {
        let art = |kind: &str, target: &str, test: bool| Artifact {
            package_id: "p".into(),
            target: target.into(),
            kind: vec![kind.into()],
            fresh: false,
            filenames: Vec::new(),
            src_path: PathBuf::new(),
            executable: Some(PathBuf::from(format!("/t/{kind}-{target}-{test}"))),
            profile_test: test,
        };
        let cmd = CargoCmd::new(Path::new("/w"), "p", Path::new("/t")).with_targets(
            true,
            &["tool".to_string()],
            &["zeta".to_string(), "alpha".to_string()],
        );
        let built = vec![
            art("test", "zeta", true),
            // The binary built for the integration tests (CARGO_BIN_EXE_tool): not run.
            art("bin", "tool", false),
            art("bin", "tool", true),
            art("test", "alpha", true),
            art("lib", "p", true),
        ];
        let exes = cmd.harness_executables(&built).unwrap();
        assert_eq!(
            exes,
            [
                "/t/lib-p-true",
                "/t/bin-tool-true",
                "/t/test-alpha-true",
                "/t/test-zeta-true"
            ]
            .map(PathBuf::from)
            .to_vec(),
            "cargo test's order: the library, the binaries, the test targets by name"
        );
        // A `harness = false` target lists its tests with its own code: through cargo.
        let mut custom = built.clone();
        custom[0] = art("test", "zeta", false);
        assert_eq!(cmd.harness_executables(&custom), None);
        // A selected target the build did not give: through cargo.
        assert_eq!(cmd.harness_executables(&built[1..]), None);
    }

    #[test]
    fn a_doc_filter_is_the_word_of_its_name_the_fewest_doc_tests_share() {
        let names = [
            "src/lib.rs - jaro (line 180)",
            "src/lib.rs - jaro_winkler (line 215)",
            "src/lib.rs - hamming (line 77)",
            "src/lib.rs - hamming2 (line 90)",
            "tests::not_a_doc_test",
        ];
        let cmd = CargoCmd::new(Path::new("/w"), "p", Path::new("/w/t"))
            .with_doc_names(std::sync::Arc::new(names.map(String::from).to_vec()));
        // `jaro` is in two names: the line selects it alone.
        assert_eq!(cmd.doc_filter(names[0]), ("180)".to_string(), true));
        // A tie goes to the longer word: the item.
        assert_eq!(cmd.doc_filter(names[1]), ("jaro_winkler".to_string(), true));
        assert_eq!(cmd.doc_filter(names[3]), ("hamming2".to_string(), true));
        // Lines shifted by the switched build: the filter is the built tree's line, the
        // answer is still keyed by the catalog's.
        let mut lines = DocLines::new();
        lines.insert(
            "src/lib.rs".into(),
            [(185, 180), (222, 215), (77, 77), (90, 90)].into(),
        );
        let built = cmd.clone().with_doc_lines(std::sync::Arc::new(lines));
        assert_eq!(built.built_name(names[0]), "src/lib.rs - jaro (line 185)");
        assert_eq!(built.doc_filter(names[0]), ("185)".to_string(), true));
        // Without the target's doc tests, the item, never known to be alone.
        let blind = CargoCmd::new(Path::new("/w"), "p", Path::new("/w/t"));
        assert_eq!(blind.doc_filter(names[0]), ("jaro".to_string(), false));
    }

    #[test]
    fn build_messages_give_freshness_and_first_error() {
        let s = concat!(
            r#"{"reason":"compiler-artifact","package_id":"p 0.1.0","target":{"name":"p"},"fresh":true}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"p","message":{"level":"warning","rendered":"warning: w"}}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"p","message":{"level":"error","rendered":"error[E0308]: mismatched types\n"}}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"p","message":{"level":"error","rendered":"error: second"}}"#,
            "\nnot json\n",
            r#"{"reason":"build-finished","success":false}"#
        );
        let (a, e) = parse_build_messages(s);
        assert_eq!(a.len(), 1);
        assert!(a[0].fresh);
        assert_eq!(e.as_deref(), Some("error[E0308]: mismatched types"));
    }

    #[test]
    fn dep_info_lists_the_sources_of_an_artifact() {
        // As rustc writes `deps/NAME-HASH.d` (the first line names every output).
        let dir = tempfile::tempdir().unwrap();
        let deps = dir.path().join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        std::fs::write(
            deps.join("faults-bd10.d"),
            format!(
                "{0}/faults-bd10.d: src/lib.rs src/my\\ mod.rs\n\n{0}/libfaults-bd10.rlib: src/lib.rs src/my\\ mod.rs\n\nsrc/lib.rs:\nsrc/my\\ mod.rs:\n\n# env-dep:CARGO_PKG_NAME=faults\n",
                deps.display()
            ),
        )
        .unwrap();
        let a = Artifact {
            package_id: "p".into(),
            target: "faults".into(),
            kind: vec!["lib".into()],
            fresh: false,
            filenames: vec![
                deps.join("libfaults-bd10.rlib"),
                deps.join("libfaults-bd10.rmeta"),
            ],
            src_path: PathBuf::from("/ws/src/lib.rs"),
            executable: None,
            profile_test: false,
        };
        let root = Path::new("/ws");
        assert_eq!(
            a.sources(root).unwrap(),
            vec![root.join("src/lib.rs"), root.join("src/my mod.rs")]
        );
        let none = Artifact {
            filenames: vec![deps.join("other-1")],
            ..a
        };
        assert_eq!(none.sources(root), None);
        // A binary built for integration tests is uplifted (`NAME`, a hard link of
        // `deps/NAME-HASH`) with no `NAME.d`: its dep-info is the hashed file's; a
        // `deps/NAME-HASH` of another build (another inode) is not it.
        std::fs::write(deps.join("tool-0a1b"), "test build").unwrap();
        std::fs::write(deps.join("tool-0a1b.d"), "x: src/other.rs\n").unwrap();
        std::fs::write(deps.join("tool-2c3d"), "bin").unwrap();
        std::fs::write(deps.join("tool-2c3d.d"), "x: src/main.rs\n").unwrap();
        std::fs::hard_link(deps.join("tool-2c3d"), dir.path().join("tool")).unwrap();
        let bin = Artifact {
            kind: vec!["bin".into()],
            filenames: vec![dir.path().join("tool")],
            ..none.clone()
        };
        assert_eq!(bin.sources(root), Some(vec![root.join("src/main.rs")]));
        // As cargo names a test executable in its `Running` line.
        assert_eq!(
            none.test_description(root),
            "unittests src/lib.rs".to_string()
        );
        let test = Artifact {
            kind: vec!["test".into()],
            src_path: PathBuf::from("/ws/tests/one.rs"),
            ..none
        };
        assert_eq!(test.test_description(root), "tests/one.rs");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            cargo_status_words(std::process::ExitStatus::from_raw(6)),
            "signal: 6, SIGABRT: process abort signal"
        );
        assert_eq!(
            cargo_status_words(std::process::ExitStatus::from_raw(101 << 8)),
            "exit status: 101"
        );
    }
}
