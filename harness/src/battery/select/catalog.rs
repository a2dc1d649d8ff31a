//! Battery catalogs: the TOML format, loading, static validation and the drift check against the tree.
//!
//! A catalog names a Cargo workspace, the package and test targets to build, the exact list
//! of tests the battery runs (plus the libtest selection pattern they come from) and the
//! hand-written mutations. Unknown fields are rejected everywhere. Example:
//!
//! ```toml
//! name = "sample"                 # optional; defaults to the file stem
//! workspace = ".."                # relative to the catalog file's directory
//! package = "sample"
//! test_targets = ["contract"]     # `cargo test --test NAME`; `lib_tests = true` adds `--lib`
//! bin_targets = []                # `cargo test --bin NAME`: a binary's unit tests
//! doc_tests = false               # `cargo test --doc`: the library's doc tests
//! select = "contract::"           # libtest filter (substring) the listed tests come from
//! tests = ["contract::adds_two_numbers"]
//! timeout_factor = 5.0            # test timeout = max(floor, factor x slowest baseline run)
//! timeout_floor_secs = 4.0
//! timeout_margin_secs = 2.0       # switch mode, reach-selected tests: a mutant's run times out
//!                                 # at min(test timeout, factor x its tests' own seconds + margin)
//!
//! [[skip]]                        # a test of the targets under `select` the battery leaves out
//! test = "contract::reads_the_model"
//! reason = "reads a git-ignored model file the scratch copy does not hold"
//!
//! [[mutation]]
//! id = "add-subtracts"
//! title = "add subtracts instead"
//! role = "defect"                 # defect | vacuity | gap
//! file = "src/lib.rs"             # relative to the workspace root
//! find = "a + b"
//! occurrences = 1                 # default 1; every occurrence is replaced
//! replace = "a - b"
//! killed_by = ["contract::adds_two_numbers"]
//! expect_message = "right: 5"     # optional: the killing failure must contain it
//! rationale = "The sum is the whole contract of `add`."
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cargo::{CargoCmd, PackageMeta};

/// Default `timeout_factor`: the per-mutation test timeout is this many times the slowest
/// baseline test run.
pub const DEFAULT_TIMEOUT_FACTOR: f64 = 5.0;
/// Default `timeout_floor_secs`: the per-mutation test timeout is never shorter than this.
pub const DEFAULT_TIMEOUT_FLOOR_SECS: f64 = 30.0;

/// Default `timeout_margin_secs`: a switched mutant whose tests were selected by reach times
/// out at most this many seconds after `timeout_factor` times its tests' own seconds.
pub const DEFAULT_TIMEOUT_MARGIN_SECS: f64 = 2.0;

/// A catalog file as written (TOML, unknown fields rejected).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogSpec {
    /// Battery name; reports go to `reports/<name>/`. Defaults to the file stem.
    pub name: Option<String>,
    /// Workspace root, relative to the catalog file's directory (or absolute).
    pub workspace: PathBuf,
    /// The package (`cargo test -p`) whose tests run.
    pub package: String,
    /// Integration test targets (`cargo test --test NAME`).
    #[serde(default)]
    pub test_targets: Vec<String>,
    /// Whether the library's unit tests (`cargo test --lib`) are part of the run.
    #[serde(default)]
    pub lib_tests: bool,
    /// Binary targets whose unit tests are part of the run (`cargo test --bin NAME`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bin_targets: Vec<String>,
    /// Whether the library's doc tests are part of the run (`cargo test --doc`, which cargo
    /// runs as an invocation of its own). Their names are rustdoc's, as `--list` prints
    /// them: `src/lib.rs - Either::is_left (line 120)`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub doc_tests: bool,
    /// Cargo features enabled for the build (`--features`).
    #[serde(default)]
    pub features: Vec<String>,
    /// Build with `--no-default-features`.
    #[serde(default)]
    pub no_default_features: bool,
    /// Environment variables set for every build and test run.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Private Cargo target directory, relative to the workspace root (or absolute).
    /// Defaults to `target/harness/<name>` so the user's own builds are not invalidated.
    pub target_dir: Option<PathBuf>,
    /// libtest selection pattern: a test whose name contains it belongs to the battery.
    pub select: String,
    /// The exact list of tests the battery runs (full libtest names).
    pub tests: Vec<String>,
    /// The battery runs every test its targets list, taken from the listing of its own
    /// baseline build (`tests` then empty, no `select` pattern, no skips): the generated
    /// catalog of a package other than the base catalog's (`mutants --via-harness`, as
    /// cargo-mutants runs the whole `cargo test -p P`), whose tests would otherwise be
    /// listed by a build of the original tree before the battery's own.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tests_from_listing: bool,
    /// Test timeout as a multiple of the slowest baseline test run.
    #[serde(default = "default_timeout_factor")]
    pub timeout_factor: f64,
    /// Lower bound of the test timeout, in seconds.
    #[serde(default = "default_timeout_floor")]
    pub timeout_floor_secs: f64,
    /// Switch mode with reach-guided selection: a mutant's test run times out at the least
    /// of the test timeout and `timeout_factor` times the seconds its selected tests took
    /// unmutated, each on its own and run as the mutants run it, plus this margin
    /// (seconds). Cargo-mutants has no such timeout; PIT and Stryker set theirs alike.
    #[serde(default = "default_timeout_margin")]
    pub timeout_margin_secs: f64,
    /// Tests of the targets under `select` the battery deliberately does not run, each with
    /// its reason (`[[skip]]`); the filter-drift check counts them as accounted for, and
    /// refuses a skipped test the targets no longer hold.
    #[serde(rename = "skip", default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skip>,
    /// The mutations, in run order.
    #[serde(rename = "mutation", default)]
    pub mutations: Vec<Mutation>,
    /// Further configurations (`[[config]]`): a mutation the catalog's own configuration
    /// (`features`, `no_default_features`) compiles into no unit runs under the first of
    /// these that compiles it, and gets its verdict there.
    #[serde(rename = "config", default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<Config>,
}

/// A further build configuration of a catalog (`[[config]]`): a feature set the mutations
/// its own configuration leaves uncompiled are run under.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Its name (letters, digits, `-`, `_`, `.`), unique in the catalog.
    pub name: String,
    /// Cargo features enabled (`--features`).
    #[serde(default)]
    pub features: Vec<String>,
    /// Build with `--no-default-features`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_default_features: bool,
    /// Enable every feature the package declares (as `--all-features`, the package's own).
    #[serde(default, skip_serializing_if = "is_false")]
    pub all_features: bool,
    /// Tests the targets hold only under this configuration: run with the catalog's
    /// `tests` there (a catalog's `tests` are those its own configuration lists).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<String>,
}

impl Config {
    /// The features this configuration enables given the package's declared ones
    /// (`declared`, for `all_features`).
    pub fn enabled(&self, declared: &[String]) -> Vec<String> {
        if self.all_features {
            let mut all: Vec<String> = declared
                .iter()
                .filter(|f| f.as_str() != "default")
                .cloned()
                .collect();
            for f in &self.features {
                if !all.contains(f) {
                    all.push(f.clone());
                }
            }
            all
        } else {
            self.features.clone()
        }
    }
}

/// A test of the targets the battery leaves out, and why (`[[skip]]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Skip {
    /// The full libtest name, as `tests` spells it.
    pub test: String,
    /// Why the battery does not run it (shown in the reports).
    pub reason: String,
}

impl CatalogSpec {
    /// The names of the skipped tests, catalog order.
    pub fn skipped_names(&self) -> Vec<String> {
        self.skipped.iter().map(|s| s.test.clone()).collect()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn default_timeout_factor() -> f64 {
    DEFAULT_TIMEOUT_FACTOR
}

fn default_timeout_floor() -> f64 {
    DEFAULT_TIMEOUT_FLOOR_SECS
}

fn default_timeout_margin() -> f64 {
    DEFAULT_TIMEOUT_MARGIN_SECS
}

fn default_occurrences() -> usize {
    1
}

/// What a mutation is for, which decides its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A real wrong implementation: the named tests must kill it.
    Defect,
    /// An admit-everything / refuse-everything implementation: proves a test is not blind in
    /// one direction; the named tests must kill it.
    Vacuity,
    /// A known hole, expected to survive; if it is killed, the catalog must be updated.
    Gap,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Defect => "defect",
            Role::Vacuity => "vacuity",
            Role::Gap => "gap",
        })
    }
}

/// One hand-written mutation.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// Unique id (letters, digits, `-`, `_`, `.`).
    pub id: String,
    /// One-line title.
    pub title: String,
    /// defect, vacuity or gap.
    pub role: Role,
    /// File to mutate, relative to the workspace root.
    pub file: PathBuf,
    /// Exact text to find; it must occur exactly `occurrences` times.
    pub find: String,
    /// How many times `find` occurs in `file` (every occurrence is replaced).
    #[serde(default = "default_occurrences")]
    pub occurrences: usize,
    /// Replacement text.
    pub replace: String,
    /// Tests that must fail under this mutation (empty for a gap).
    #[serde(default)]
    pub killed_by: Vec<String>,
    /// Text the expected killers' failure messages must contain.
    pub expect_message: Option<String>,
    /// Why this mutation matters.
    pub rationale: String,
}

/// A catalog that could not be used. Drift variants are refusals (CATALOG-DRIFT); the
/// others mean the catalog itself is malformed. Both exit with code 2.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The catalog file could not be read.
    #[error("{path}: cannot read catalog: {source}")]
    Read {
        /// Catalog path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown / missing fields.
    #[error("{path}: invalid catalog: {message}")]
    Parse {
        /// Catalog path.
        path: PathBuf,
        /// The TOML parser's message (names the field and position).
        message: String,
    },
    /// A field holds a value the harness cannot use.
    #[error("{path}: field `{field}`: {reason}")]
    Invalid {
        /// Catalog path.
        path: PathBuf,
        /// Field at fault (e.g. `mutation[2].killed_by`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The catalog no longer matches the tree (CATALOG-DRIFT).
    #[error("{path}: {detail}")]
    Drift {
        /// Catalog path.
        path: PathBuf,
        /// What drifted: file, mutation id, expected and actual counts.
        detail: String,
    },
}

impl CatalogError {
    /// Whether this error is a CATALOG-DRIFT refusal rather than a malformed catalog.
    pub fn is_drift(&self) -> bool {
        matches!(self, CatalogError::Drift { .. })
    }
}

impl CatalogSpec {
    /// Checks that the catalog's package exists among `packages` with the test targets,
    /// binary targets (and library, for `lib_tests` and `doc_tests`) and the features the
    /// catalog names; the error says what is missing and what exists. A feature of a
    /// dependency (`dep/feature`) is cargo's to check.
    pub fn check_targets(&self, packages: &[PackageMeta]) -> Result<(), String> {
        let spec = self;
        let package = spec.package.as_str();
        let (test_targets, lib, features) = (&spec.test_targets, spec.lib_tests, &spec.features);
        let Some(p) = packages.iter().find(|p| p.name == package) else {
            let names: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "package {package:?} is not in the workspace (it has: {})",
                names.join(", ")
            ));
        };
        for t in test_targets {
            if !p.test_targets.contains(t) {
                return Err(format!(
                    "package {package} has no test target {t:?} (it has: {})",
                    p.test_targets.join(", ")
                ));
            }
        }
        for b in &spec.bin_targets {
            if !p.bins.contains(b) {
                let have = if p.bins.is_empty() {
                    "it has none".to_string()
                } else {
                    format!("it has: {}", p.bins.join(", "))
                };
                return Err(format!(
                    "package {package} has no binary target {b:?} ({have})"
                ));
            }
        }
        if lib && !p.has_lib {
            return Err(format!(
                "package {package} has no library target, but lib_tests = true"
            ));
        }
        if spec.doc_tests && !p.has_lib {
            return Err(format!(
                "package {package} has no library target, but doc_tests = true"
            ));
        }
        if spec.doc_tests && !p.lib_doctest {
            return Err(format!(
                "package {package} turns its library's doc tests off (`doctest = false`), but doc_tests = true"
            ));
        }
        let config_features = spec.configs.iter().flat_map(|c| c.features.iter());
        for f in features
            .iter()
            .chain(config_features)
            .flat_map(|f| f.split([',', ' ']))
        {
            if f.is_empty()
                || f.contains('/')
                || f == "default"
                || p.features.iter().any(|x| x == f)
            {
                continue;
            }
            let have = if p.features.is_empty() {
                "it declares none".to_string()
            } else {
                format!("it has: {}", p.features.join(", "))
            };
            return Err(format!("package {package} has no feature {f:?} ({have})"));
        }
        Ok(())
    }
}

/// A loaded and statically validated catalog with resolved paths.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Path of the catalog file as given.
    pub path: PathBuf,
    /// Battery name (the `name` field or the file stem).
    pub name: String,
    /// Canonical workspace root.
    pub root: PathBuf,
    /// Absolute private target directory.
    pub target_dir: PathBuf,
    /// The parsed content.
    pub spec: CatalogSpec,
    /// SHA-256 (hex) of the catalog file's bytes as they were read, once, by
    /// [`Catalog::load`] (of the text written, for [`Catalog::from_text`]; empty for a
    /// catalog derived in memory): a shard's manifest names the catalog by it without
    /// reading the file again.
    pub sha256: String,
}

/// A mutation checked against the tree: the file's current bytes and the mutated bytes.
#[derive(Debug, Clone)]
pub struct PreparedMutation {
    /// Index in the catalog.
    pub index: usize,
    /// Absolute path of the mutated file.
    pub abs_path: PathBuf,
    /// Path relative to the workspace root (as written in the catalog).
    pub rel_path: PathBuf,
    /// File content before the mutation.
    pub original: Vec<u8>,
    /// File content with every occurrence of `find` replaced.
    pub mutated: Vec<u8>,
    /// 1-based (line, column) of the first occurrence, columns counted in characters.
    pub first_at: (usize, usize),
    /// 1-based (line, column) just past the end of the first occurrence.
    pub first_end: (usize, usize),
}

impl Catalog {
    /// This catalog under its configuration `cfg` enabling `features`, holding only the
    /// mutations `ids`: the catalog's tests and the configuration's, no further
    /// configurations, a target directory of its own (`<target_dir>/config/<name>`) and
    /// the name `<name>.<config>` (its progress lines and scratch copy).
    pub fn for_config(&self, cfg: &Config, features: &[String], ids: &[String]) -> Catalog {
        let mut spec = self.spec.clone();
        spec.features = features.to_vec();
        spec.no_default_features = cfg.no_default_features;
        spec.tests.extend(cfg.tests.iter().cloned());
        spec.mutations.retain(|m| ids.contains(&m.id));
        spec.configs = Vec::new();
        Catalog {
            path: self.path.clone(),
            name: format!("{}.{}", self.name, cfg.name),
            root: self.root.clone(),
            target_dir: self.target_dir.join("config").join(&cfg.name),
            spec,
            sha256: self.sha256.clone(),
        }
    }

    /// The cargo invocation of this catalog's tests: its workspace, package, targets,
    /// features and environment, built in its private target directory.
    pub fn cargo(&self) -> CargoCmd {
        CargoCmd::new(&self.root, &self.spec.package, &self.target_dir)
            .with_targets(
                self.spec.lib_tests,
                &self.spec.bin_targets,
                &self.spec.test_targets,
            )
            .with_doc_tests(self.spec.doc_tests)
            .with_features(&self.spec.features, self.spec.no_default_features)
            .with_envs(&self.spec.env)
    }

    /// Every mutation id, in catalog order.
    pub fn mutation_ids(&self) -> Vec<String> {
        self.spec.mutations.iter().map(|m| m.id.clone()).collect()
    }

    /// Reads, parses and statically validates the catalog at `path` (no files of the
    /// workspace are read except to resolve the workspace root). A catalog may hold no
    /// `[[mutation]]` (a starter catalog of `harness init`): its battery then shows every
    /// listed test UNFALSIFIED. A battery command reads each catalog once, here, through its
    /// plan (`crate::door`); everything after uses the loaded catalog.
    ///
    /// Errors: [`CatalogError::Read`], [`CatalogError::Parse`], [`CatalogError::Invalid`].
    pub fn load(path: &Path) -> Result<Catalog, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        #[cfg(test)]
        reads::count(path);
        Catalog::from_text(path, &text)
    }

    /// The catalog whose file is `path` (relative paths in it resolve against the file's
    /// folder) and whose text is `text`, parsed and validated as [`Catalog::load`] does a
    /// file's: a catalog the harness generated and wrote itself (`mutants --via-harness`,
    /// `--since --mutants`), without reading it back.
    ///
    /// Errors: [`CatalogError::Parse`], [`CatalogError::Invalid`].
    pub fn from_text(path: &Path, text: &str) -> Result<Catalog, CatalogError> {
        let spec: CatalogSpec = toml::from_str(text).map_err(|e| CatalogError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |field: &str, reason: String| CatalogError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            reason,
        };
        let name = match &spec.name {
            Some(n) => n.clone(),
            None => path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("battery")
                .to_string(),
        };
        if name.is_empty() || !name.chars().all(id_char) {
            return Err(invalid(
                "name",
                format!("{name:?} must be non-empty letters, digits, '-', '_' or '.'"),
            ));
        }
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let ws = base.join(&spec.workspace);
        let root = ws.canonicalize().map_err(|e| {
            invalid(
                "workspace",
                format!("{} cannot be resolved: {e}", ws.display()),
            )
        })?;
        if !root.join("Cargo.toml").is_file() {
            return Err(invalid(
                "workspace",
                format!("{} holds no Cargo.toml", root.display()),
            ));
        }
        let target_dir = match &spec.target_dir {
            Some(t) => root.join(t),
            None => root.join("target").join("harness").join(&name),
        };
        validate_static(&spec, path)?;
        Ok(Catalog {
            path: path.to_path_buf(),
            name,
            root,
            target_dir,
            spec,
            sha256: crate::battery::tree::sha256_hex(text.as_bytes()),
        })
    }

    /// Checks every mutation against the tree: the file exists inside the workspace, is
    /// UTF-8, `find` occurs exactly `occurrences` times, and (in a Rust file) replacing it
    /// changes something the compiler reads, not only comments, doc comments, whitespace or
    /// string literals whose value is discarded ([`crate::battery::select::inert`]).
    /// Returns the prepared mutations in order.
    ///
    /// Errors: [`CatalogError::Drift`] naming the mutation, file and counts.
    pub fn prepare(&self) -> Result<Vec<PreparedMutation>, CatalogError> {
        let drift = |detail: String| CatalogError::Drift {
            path: self.path.clone(),
            detail,
        };
        let mut out = Vec::with_capacity(self.spec.mutations.len());
        // Each Rust file is cut into tokens once for all its mutations.
        let mut inert: std::collections::HashMap<PathBuf, crate::battery::select::inert::Inert> =
            std::collections::HashMap::new();
        for (index, m) in self.spec.mutations.iter().enumerate() {
            // `src/../src/lib.rs` is `src/lib.rs`: only a path whose `..` climbs above the
            // root (or an absolute one) is outside, before any symbolic link is followed.
            let Some(normal) = within_root(&m.file) else {
                return Err(drift(format!(
                    "mutation {}: file {} is outside the workspace {}",
                    m.id,
                    m.file.display(),
                    self.root.display()
                )));
            };
            let rel = &normal;
            let joined = self.root.join(rel);
            let abs = joined.canonicalize().map_err(|e| {
                drift(format!(
                    "mutation {}: file {} is missing: {e}",
                    m.id,
                    joined.display()
                ))
            })?;
            if !abs.starts_with(&self.root) {
                return Err(drift(format!(
                    "mutation {}: file {} resolves to {}, outside the workspace {}",
                    m.id,
                    rel.display(),
                    abs.display(),
                    self.root.display()
                )));
            }
            let inside = abs.strip_prefix(&self.root).unwrap_or(&abs);
            if inside.components().any(|c| c.as_os_str() == ".git") {
                return Err(drift(format!(
                    "mutation {}: file {} is inside .git: the harness mutates only the tree's files, never git's own",
                    m.id,
                    rel.display()
                )));
            }
            let bytes = std::fs::read(&abs).map_err(|e| {
                drift(format!(
                    "mutation {}: cannot read {}: {e}",
                    m.id,
                    abs.display()
                ))
            })?;
            let text = std::str::from_utf8(&bytes).map_err(|e| {
                drift(format!(
                    "mutation {}: {} is not UTF-8 (byte {})",
                    m.id,
                    abs.display(),
                    e.valid_up_to()
                ))
            })?;
            let found = text.matches(m.find.as_str()).count();
            if found != m.occurrences {
                return Err(drift(format!(
                    "mutation {}: `find` text {:?} occurs {found} time(s) in {}, the catalog says {}",
                    m.id,
                    m.find,
                    rel.display(),
                    m.occurrences
                )));
            }
            let start = text.find(m.find.as_str()).unwrap_or(0);
            let mutated = text.replace(m.find.as_str(), &m.replace);
            if rel.extension().is_some_and(|e| e == "rs")
                && let Some(why) = inert
                    .entry(abs.clone())
                    .or_insert_with(|| crate::battery::select::inert::Inert::new(text))
                    .why(&mutated)
            {
                return Err(drift(format!(
                    "mutation {}: `find` text {:?} in {}: {why}; no test can tell this mutant from the original",
                    m.id,
                    m.find,
                    rel.display()
                )));
            }
            let mutated = mutated.into_bytes();
            out.push(PreparedMutation {
                index,
                abs_path: abs,
                rel_path: rel.clone(),
                first_at: line_col(text, start),
                first_end: line_col(text, start + m.find.len()),
                original: bytes,
                mutated,
            });
        }
        Ok(out)
    }
}

/// Where a catalog's private target directory lies (see [`Catalog::check_target_dir`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetPlace {
    /// Outside the workspace.
    Outside(PathBuf),
    /// Inside the workspace, holding none of its files.
    Inside(PathBuf),
}

impl fmt::Display for TargetPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetPlace::Outside(p) => write!(f, "{} (outside the workspace)", p.display()),
            TargetPlace::Inside(p) => write!(f, "{} (inside the workspace)", p.display()),
        }
    }
}

/// `p` with `.` and `..` taken out, without touching the filesystem.
pub(crate) fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

impl Catalog {
    /// Checks that the builds cannot write among the tree's files: the private target
    /// directory must not be the workspace root or hold it, and inside the workspace it must
    /// hold no tracked file and, unless it is a Cargo target directory already (it holds a
    /// `CACHEDIR.TAG`), no file of the tree's file set at all (the fingerprint never looks
    /// inside it, so an edit there would go unnoticed). Reads the tree; builds nothing.
    ///
    /// Errors: [`CatalogError::Invalid`] on field `target_dir`, naming up to five of the
    /// files it holds.
    pub fn check_target_dir(&self) -> Result<TargetPlace, CatalogError> {
        let t = self
            .target_dir
            .canonicalize()
            .unwrap_or_else(|_| lexical(&self.target_dir));
        let invalid = |reason: String| CatalogError::Invalid {
            path: self.path.clone(),
            field: "target_dir".into(),
            reason,
        };
        if self.root.starts_with(&t) {
            let what = if t == self.root {
                "is the workspace root"
            } else {
                "holds the workspace root"
            };
            return Err(invalid(format!(
                "{} {what} {}: the builds would write among the tree's files",
                t.display(),
                self.root.display()
            )));
        }
        let Ok(rel) = t.strip_prefix(&self.root) else {
            return Ok(TargetPlace::Outside(t));
        };
        let mut held: Vec<PathBuf> = Vec::new();
        if let Ok(repo) = git2::Repository::discover(&self.root)
            && let Some(wd) = repo.workdir().and_then(|w| w.canonicalize().ok())
            && let Ok(in_repo) = t.strip_prefix(&wd)
        {
            let dir = format!("{}/", in_repo.to_string_lossy());
            if let Ok(index) = repo.index() {
                held.extend(
                    index
                        .iter()
                        .map(|e| PathBuf::from(String::from_utf8_lossy(&e.path).into_owned()))
                        .filter(|p| p.to_string_lossy().starts_with(&dir)),
                );
            }
        }
        if held.is_empty() && t.is_dir() && !t.join("CACHEDIR.TAG").exists() {
            let set = crate::battery::tree::scan(&t, &[]).map_err(|e| invalid(e.to_string()))?;
            held.extend(set.files.into_keys().map(|f| rel.join(f)));
        }
        if held.is_empty() {
            return Ok(TargetPlace::Inside(t));
        }
        let shown: Vec<String> = held
            .iter()
            .take(5)
            .map(|p| p.display().to_string())
            .collect();
        let more = if held.len() > 5 {
            format!(" and {} more", held.len() - 5)
        } else {
            String::new()
        };
        Err(invalid(format!(
            "{} holds files of the tree ({}{more}): the builds would write among them and the fingerprint would not see them; use a directory git ignores (the default target/harness/<name>) or one outside the workspace",
            t.display(),
            shown.join(", ")
        )))
    }
}

/// `rel` with `.` and `..` taken out lexically, or `None` when it is absolute, empty or a
/// `..` climbs above the directory it is relative to.
fn within_root(rel: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// 1-based line and character column of byte offset `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[line_start..].chars().count() + 1)
}

fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The checks of a catalog that read nothing but the catalog, in the order their errors
/// are reported: its settings, its listed tests, then each mutation.
fn validate_static(spec: &CatalogSpec, path: &Path) -> Result<(), CatalogError> {
    validate_settings(spec, path)?;
    let mut listed = validate_tests(spec, path)?;
    validate_configs(spec, path)?;
    // A mutation may be killed by a test only a further configuration holds.
    listed.extend(
        spec.configs
            .iter()
            .flat_map(|c| c.tests.iter().map(String::as_str)),
    );
    let mut ids = BTreeMap::new();
    for (i, m) in spec.mutations.iter().enumerate() {
        validate_mutation(path, i, m, &listed, &mut ids)?;
    }
    Ok(())
}

/// The `[[config]]` tables: names unique and well formed, tests not already listed and
/// not twice.
fn validate_configs(spec: &CatalogSpec, path: &Path) -> Result<(), CatalogError> {
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in spec.configs.iter().enumerate() {
        let field = format!("config[{i}]");
        if c.name.is_empty() || !c.name.chars().all(id_char) {
            return Err(invalid(
                path,
                &format!("{field}.name"),
                format!(
                    "{:?} must be non-empty letters, digits, '-', '_' or '.'",
                    c.name
                ),
            ));
        }
        if !names.insert(c.name.as_str()) {
            return Err(invalid(
                path,
                &format!("{field}.name"),
                format!("{:?} names two configurations", c.name),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (j, t) in c.tests.iter().enumerate() {
            if spec.tests.contains(t) {
                return Err(invalid(
                    path,
                    &format!("{field}.tests[{j}]"),
                    format!(
                        "{t:?} is in `tests` already (list here only the tests this configuration adds)"
                    ),
                ));
            }
            if !seen.insert(t) {
                return Err(invalid(
                    path,
                    &format!("{field}.tests[{j}]"),
                    format!("{t:?} is listed twice"),
                ));
            }
        }
    }
    Ok(())
}

/// [`CatalogError::Invalid`] of the catalog at `path`, on `field`.
fn invalid(path: &Path, field: &str, reason: String) -> CatalogError {
    CatalogError::Invalid {
        path: path.to_path_buf(),
        field: field.to_string(),
        reason,
    }
}

/// The package, the targets, the timeouts and the environment.
fn validate_settings(spec: &CatalogSpec, path: &Path) -> Result<(), CatalogError> {
    if spec.package.is_empty() {
        return Err(invalid(path, "package", "must not be empty".into()));
    }
    if spec.test_targets.is_empty()
        && !spec.lib_tests
        && spec.bin_targets.is_empty()
        && !spec.doc_tests
    {
        return Err(invalid(
            path,
            "test_targets",
            "name at least one test target or binary target (bin_targets), or set lib_tests = true or doc_tests = true".into(),
        ));
    }
    if !(spec.timeout_factor.is_finite() && spec.timeout_factor >= 1.0) {
        return Err(invalid(
            path,
            "timeout_factor",
            format!("{} must be a finite number >= 1", spec.timeout_factor),
        ));
    }
    if !(spec.timeout_floor_secs.is_finite() && spec.timeout_floor_secs > 0.0) {
        return Err(invalid(
            path,
            "timeout_floor_secs",
            format!("{} must be a positive number", spec.timeout_floor_secs),
        ));
    }
    if !(spec.timeout_margin_secs.is_finite() && spec.timeout_margin_secs >= 0.0) {
        return Err(invalid(
            path,
            "timeout_margin_secs",
            format!(
                "{} must be a finite number of seconds >= 0",
                spec.timeout_margin_secs
            ),
        ));
    }
    for (k, v) in &spec.env {
        // A key cargo's environment cannot hold: `std::process::Command` would take
        // `A=B` as key `A` or refuse it only when the first child is spawned.
        let bad = if k.is_empty() {
            Some("an environment variable needs a name".to_string())
        } else if k.contains('=') {
            Some(format!("{k:?} holds '=', which ends a variable's name"))
        } else if k.contains('\0') || v.contains('\0') {
            Some(format!("{k:?} holds a NUL byte"))
        } else {
            None
        };
        if let Some(reason) = bad {
            return Err(invalid(path, &format!("env.{k:?}"), reason));
        }
    }
    Ok(())
}

/// The listed tests: some, each once, each under the selection pattern. Returns them.
fn validate_tests<'s>(
    spec: &'s CatalogSpec,
    path: &Path,
) -> Result<BTreeSet<&'s str>, CatalogError> {
    if spec.tests_from_listing {
        let bad = if !spec.tests.is_empty() {
            Some(("tests", "lists tests"))
        } else if !spec.select.is_empty() {
            Some(("select", "has a selection pattern"))
        } else if !spec.skipped.is_empty() {
            Some(("skip", "skips tests"))
        } else {
            None
        };
        if let Some((field, what)) = bad {
            return Err(invalid(
                path,
                field,
                format!(
                    "the battery {what}, but tests_from_listing takes every test its targets list"
                ),
            ));
        }
        return Ok(BTreeSet::new());
    }
    if spec.tests.is_empty() {
        return Err(invalid(path, "tests", "the battery lists no tests".into()));
    }
    let mut seen = BTreeSet::new();
    for (i, t) in spec.tests.iter().enumerate() {
        if !seen.insert(t.as_str()) {
            return Err(invalid(
                path,
                &format!("tests[{i}]"),
                format!("{t:?} is listed twice"),
            ));
        }
        if !t.contains(&spec.select) {
            return Err(invalid(
                path,
                &format!("tests[{i}]"),
                format!(
                    "{t:?} does not match the selection pattern {:?}",
                    spec.select
                ),
            ));
        }
    }
    validate_skips(spec, path, &seen)?;
    Ok(seen)
}

/// Each skipped test: named once, not also listed, under the selection pattern, with a
/// reason.
fn validate_skips(
    spec: &CatalogSpec,
    path: &Path,
    listed: &BTreeSet<&str>,
) -> Result<(), CatalogError> {
    let mut seen = BTreeSet::new();
    for (i, s) in spec.skipped.iter().enumerate() {
        let field = format!("skip[{i}]");
        let t = s.test.as_str();
        let reason = if t.is_empty() {
            Some("`test` is empty".to_string())
        } else if s.reason.trim().is_empty() {
            Some(format!("{t:?} gives no reason"))
        } else if !seen.insert(t) {
            Some(format!("{t:?} is skipped twice"))
        } else if listed.contains(t) {
            Some(format!("{t:?} is both listed in `tests` and skipped"))
        } else if !t.contains(&spec.select) {
            Some(format!(
                "{t:?} does not match the selection pattern {:?}, so it is never run anyway",
                spec.select
            ))
        } else {
            None
        };
        if let Some(r) = reason {
            return Err(invalid(path, &field, r));
        }
    }
    Ok(())
}

/// Mutation `i`, `m`: its id (well-formed, and not taken: `ids` holds the ids seen so far,
/// `m`'s added), a change, its occurrences, and killers that fit its role and are among the
/// `listed` tests.
fn validate_mutation<'s>(
    path: &Path,
    i: usize,
    m: &'s Mutation,
    listed: &BTreeSet<&str>,
    ids: &mut BTreeMap<&'s str, usize>,
) -> Result<(), CatalogError> {
    let field = |f: &str| format!("mutation[{i}].{f}");
    if m.id.is_empty() || !m.id.chars().all(id_char) {
        return Err(invalid(
            path,
            &field("id"),
            format!(
                "{:?} must be non-empty letters, digits, '-', '_' or '.'",
                m.id
            ),
        ));
    }
    if let Some(first) = ids.insert(m.id.as_str(), i) {
        // A duplicate id is catalog drift (two entries claim one name).
        return Err(CatalogError::Drift {
            path: path.to_path_buf(),
            detail: format!(
                "duplicate mutation id {:?} (mutation[{first}] and mutation[{i}])",
                m.id
            ),
        });
    }
    if m.find.is_empty() {
        return Err(invalid(path, &field("find"), "must not be empty".into()));
    }
    if m.find == m.replace {
        return Err(invalid(
            path,
            &field("replace"),
            "equals `find`: the mutation changes nothing".into(),
        ));
    }
    if m.occurrences == 0 {
        return Err(invalid(
            path,
            &field("occurrences"),
            "must be at least 1".into(),
        ));
    }
    match m.role {
        Role::Gap if !m.killed_by.is_empty() => {
            return Err(invalid(
                path,
                &field("killed_by"),
                "a gap is expected to survive: it names no killers".into(),
            ));
        }
        Role::Defect | Role::Vacuity if m.killed_by.is_empty() => {
            return Err(invalid(
                path,
                &field("killed_by"),
                format!("a {} mutation must name the tests that kill it", m.role),
            ));
        }
        _ => {}
    }
    if m.role == Role::Gap && m.expect_message.is_some() {
        return Err(invalid(
            path,
            &field("expect_message"),
            "a gap names no killers, so no expected message".into(),
        ));
    }
    if let Some(k) = m.killed_by.iter().find(|k| !listed.contains(k.as_str())) {
        return Err(invalid(
            path,
            &field("killed_by"),
            format!("{k:?} is not in the battery's `tests` list"),
        ));
    }
    Ok(())
}

/// How many times [`Catalog::load`] read each catalog file, in this test process: the
/// evidence that a battery command reads its catalogs once.
#[cfg(test)]
pub(crate) mod reads {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static READS: Mutex<Option<HashMap<PathBuf, usize>>> = Mutex::new(None);

    /// Counts one read of `path`.
    pub(crate) fn count(path: &Path) {
        let mut m = READS.lock().unwrap_or_else(|e| e.into_inner());
        *m.get_or_insert_with(HashMap::new)
            .entry(path.to_path_buf())
            .or_default() += 1;
    }

    /// The reads of `path` so far.
    pub(crate) fn of(path: &Path) -> usize {
        let m = READS.lock().unwrap_or_else(|e| e.into_inner());
        m.as_ref().and_then(|m| m.get(path)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write_ws(dir: &Path, catalog: &str) -> PathBuf {
        std::fs::write(dir.join("Cargo.toml"), "[workspace]\n").unwrap();
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/a.rs"), "let x = 1 + 1;\nlet y = 2;\r\nz\n").unwrap();
        let p = dir.join("c.toml");
        std::fs::write(&p, catalog).unwrap();
        p
    }

    const HEAD: &str = "workspace = \".\"\npackage = \"p\"\ntest_targets = [\"t\"]\nselect = \"s::\"\ntests = [\"s::a\", \"s::b\"]\n";

    fn mutation(id: &str, find: &str, extra: &str) -> String {
        format!(
            "[[mutation]]\nid = \"{id}\"\ntitle = \"t\"\nrole = \"defect\"\nfile = \"src/a.rs\"\nfind = \"{find}\"\nreplace = \"Q\"\nkilled_by = [\"s::a\"]\nrationale = \"r\"\n{extra}\n"
        )
    }

    #[test]
    fn loads_and_prepares_a_good_catalog() {
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(d.path(), &format!("{HEAD}{}", mutation("m1", "1 + 1", "")));
        let c = Catalog::load(&p).unwrap();
        assert_eq!(c.name, "c");
        assert_eq!(
            c.target_dir,
            d.path().canonicalize().unwrap().join("target/harness/c")
        );
        let prep = c.prepare().unwrap();
        assert_eq!(prep[0].mutated, b"let x = Q;\nlet y = 2;\r\nz\n");
        assert_eq!(prep[0].first_at, (1, 9));
        assert_eq!(prep[0].first_end, (1, 14));
    }

    #[test]
    fn a_catalog_that_takes_its_tests_from_the_listing_lists_none_itself() {
        let d = tempfile::tempdir().unwrap();
        let gen_mutation = "[[mutation]]\nid = \"g\"\ntitle = \"t\"\nrole = \"gap\"\nfile = \"src/a.rs\"\nfind = \"1 + 1\"\nreplace = \"Q\"\nkilled_by = []\nrationale = \"r\"\n";
        let head = "workspace = \".\"\npackage = \"p\"\nlib_tests = true\nselect = \"\"\n";
        let p = write_ws(
            d.path(),
            &format!("{head}tests = []\ntests_from_listing = true\n{gen_mutation}"),
        );
        let c = Catalog::load(&p).unwrap();
        assert!(c.spec.tests_from_listing && c.spec.tests.is_empty());
        // Without it, no tests is an error; with it, tests, a pattern or skips are.
        let p = write_ws(d.path(), &format!("{head}tests = []\n{gen_mutation}"));
        let e = Catalog::load(&p).unwrap_err().to_string();
        assert!(e.contains("the battery lists no tests"), "{e}");
        for (extra, word) in [
            (
                "tests = [\"a\"]\ntests_from_listing = true\n",
                "lists tests",
            ),
            (
                "tests = []\ntests_from_listing = true\n[[skip]]\ntest = \"a\"\nreason = \"r\"\n",
                "skips tests",
            ),
        ] {
            let p = write_ws(d.path(), &format!("{head}{extra}{gen_mutation}"));
            let e = Catalog::load(&p).unwrap_err().to_string();
            assert!(
                e.contains(word) && e.contains("tests_from_listing"),
                "{extra}: {e}"
            );
        }
        let p = write_ws(
            d.path(),
            &format!(
                "workspace = \".\"\npackage = \"p\"\nlib_tests = true\nselect = \"s::\"\ntests = []\ntests_from_listing = true\n{gen_mutation}"
            ),
        );
        let e = Catalog::load(&p).unwrap_err().to_string();
        assert!(e.contains("has a selection pattern"), "{e}");
    }

    #[test]
    fn unknown_field_is_rejected_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(
            d.path(),
            &format!("{HEAD}bogus = 1\n{}", mutation("m", "2", "")),
        );
        let e = Catalog::load(&p).unwrap_err();
        assert!(matches!(e, CatalogError::Parse { .. }));
        assert!(e.to_string().contains("bogus"), "{e}");
    }

    #[test]
    fn unknown_mutation_field_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(
            d.path(),
            &format!("{HEAD}{}", mutation("m", "2", "colour = 1")),
        );
        let e = Catalog::load(&p).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn duplicate_id_is_drift() {
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(
            d.path(),
            &format!("{HEAD}{}{}", mutation("m", "2", ""), mutation("m", "z", "")),
        );
        let e = Catalog::load(&p).unwrap_err();
        assert!(e.is_drift(), "{e}");
        assert!(e.to_string().contains("duplicate mutation id \"m\""), "{e}");
    }

    #[test]
    fn find_count_mismatch_is_drift() {
        let d = tempfile::tempdir().unwrap();
        // "y" occurs once ("let y"), but the catalog claims twice.
        let p = write_ws(
            d.path(),
            &format!("{HEAD}{}", mutation("m", "y", "occurrences = 2")),
        );
        let e = Catalog::load(&p).unwrap().prepare().unwrap_err();
        assert!(e.is_drift());
        assert!(e.to_string().contains("occurs 1 time(s)"), "{e}");
    }

    #[test]
    fn file_outside_workspace_is_drift() {
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(d.path(), &format!("{HEAD}{}", mutation("m", "2", "")));
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("src/a.rs", "../a.rs");
        std::fs::write(&p, text).unwrap();
        let e = Catalog::load(&p).unwrap().prepare().unwrap_err();
        assert!(e.is_drift());
        assert!(e.to_string().contains("outside the workspace"), "{e}");
    }

    #[test]
    fn a_dot_dot_that_stays_inside_is_inside() {
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(d.path(), &format!("{HEAD}{}", mutation("m", "2", "")));
        let text = std::fs::read_to_string(&p)
            .unwrap()
            .replace("\"src/a.rs\"", "\"src/../src/./a.rs\"");
        std::fs::write(&p, text).unwrap();
        let prep = Catalog::load(&p).unwrap().prepare().unwrap();
        assert_eq!(prep[0].rel_path, PathBuf::from("src/a.rs"));
        assert_eq!(prep[0].mutated, b"let x = 1 + 1;\nlet y = Q;\r\nz\n");
    }

    #[test]
    fn a_dot_dot_that_climbs_out_is_outside() {
        for file in ["src/../../a.rs", "/etc/passwd", "..", "."] {
            let d = tempfile::tempdir().unwrap();
            let p = write_ws(d.path(), &format!("{HEAD}{}", mutation("m", "2", "")));
            let text = std::fs::read_to_string(&p)
                .unwrap()
                .replace("\"src/a.rs\"", &format!("{file:?}"));
            std::fs::write(&p, text).unwrap();
            let e = Catalog::load(&p).unwrap().prepare().unwrap_err();
            assert!(
                e.to_string().contains("outside the workspace"),
                "{file}: {e}"
            );
        }
    }

    #[test]
    fn env_keys_cargo_cannot_hold_are_a_catalog_error() {
        for (key, why) in [
            ("", "needs a name"),
            ("A=B", "holds '='"),
            ("=", "holds '='"),
        ] {
            let d = tempfile::tempdir().unwrap();
            let env = format!("[env]\n{key:?} = \"1\"\n");
            let p = write_ws(d.path(), &format!("{HEAD}{env}{}", mutation("m", "2", "")));
            let e = Catalog::load(&p).unwrap_err();
            assert!(matches!(e, CatalogError::Invalid { .. }), "{key:?}: {e}");
            let text = e.to_string();
            assert!(text.contains(&format!("field `env.{key:?}`")), "{text}");
            assert!(text.contains(why), "{text}");
        }
        let d = tempfile::tempdir().unwrap();
        let env = "[env]\nRUST_LOG = \"a=b\"\n";
        let p = write_ws(d.path(), &format!("{HEAD}{env}{}", mutation("m", "2", "")));
        assert_eq!(Catalog::load(&p).unwrap().spec.env["RUST_LOG"], "a=b");
    }

    #[test]
    fn timeouts_that_cannot_be_are_a_catalog_error_naming_the_field() {
        for (line, field) in [
            ("timeout_factor = 0.5", "timeout_factor"),
            ("timeout_floor_secs = 0.0", "timeout_floor_secs"),
            ("timeout_margin_secs = -1.0", "timeout_margin_secs"),
            ("timeout_margin_secs = inf", "timeout_margin_secs"),
            ("timeout_margin_secs = nan", "timeout_margin_secs"),
        ] {
            let d = tempfile::tempdir().unwrap();
            let p = write_ws(
                d.path(),
                &format!("{HEAD}{line}\n{}", mutation("m", "2", "")),
            );
            let e = Catalog::load(&p).unwrap_err();
            assert!(matches!(e, CatalogError::Invalid { .. }), "{line}: {e}");
            assert!(e.to_string().contains(&format!("`{field}`")), "{line}: {e}");
        }
        let d = tempfile::tempdir().unwrap();
        let p = write_ws(d.path(), &format!("{HEAD}{}", mutation("m", "2", "")));
        let c = Catalog::load(&p).unwrap();
        assert_eq!(c.spec.timeout_margin_secs, DEFAULT_TIMEOUT_MARGIN_SECS);
        let p = write_ws(
            d.path(),
            &format!(
                "{HEAD}timeout_margin_secs = 0.0\n{}",
                mutation("m", "2", "")
            ),
        );
        assert_eq!(Catalog::load(&p).unwrap().spec.timeout_margin_secs, 0.0);
    }

    #[test]
    fn killer_must_be_listed() {
        let d = tempfile::tempdir().unwrap();
        let m = mutation("m", "2", "").replace("[\"s::a\"]", "[\"s::zzz\"]");
        let p = write_ws(d.path(), &format!("{HEAD}{m}"));
        let e = Catalog::load(&p).unwrap_err();
        assert!(e.to_string().contains("mutation[0].killed_by"), "{e}");
    }

    #[test]
    fn listed_test_must_match_selection() {
        let d = tempfile::tempdir().unwrap();
        let head = HEAD.replace("\"s::b\"", "\"other\"");
        let p = write_ws(d.path(), &format!("{head}{}", mutation("m", "2", "")));
        let e = Catalog::load(&p).unwrap_err();
        assert!(e.to_string().contains("tests[1]"), "{e}");
    }

    proptest! {
        /// line_col agrees with an independent count over the characters before the offset.
        #[test]
        fn line_col_matches_a_char_walk(s in "[a-c\n\r é]{0,40}", pick in 0usize..41) {
            let offsets: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
            let at = offsets[pick % offsets.len()];
            let (mut line, mut col) = (1, 1);
            for ch in s[..at].chars() {
                if ch == '\n' { line += 1; col = 1; } else { col += 1; }
            }
            prop_assert_eq!(line_col(&s, at), (line, col));
        }
    }
}
