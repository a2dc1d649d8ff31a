//! A newcomer's start on a workspace: every test of a package as cargo lists it (`harness tests`) and a starter catalog naming them (`harness init`).
//!
//! Test names are never guessed: they come from running the package's targets with
//! `-- --list` (which builds them), libtest's targets first (library, binaries, test
//! targets), then the library's doc tests under rustdoc's names (`src/lib.rs - parse (line
//! 7)`), exactly as a catalog's `tests`, `killed_by` and a must-run list take them.

use std::path::{Path, PathBuf};

use crate::battery::select::catalog::{
    Catalog, CatalogSpec, DEFAULT_TIMEOUT_FACTOR, DEFAULT_TIMEOUT_FLOOR_SECS,
    DEFAULT_TIMEOUT_MARGIN_SECS,
};
use crate::cargo::{CargoError, PackageMeta};

/// Why a workspace's tests could not be listed or its starter catalog not written.
#[derive(Debug, thiserror::Error)]
pub enum StarterError {
    /// The workspace directory holds no `Cargo.toml` or cannot be resolved.
    #[error("{path}: not a Cargo workspace: {reason}")]
    Workspace {
        /// The directory given.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `--package` is needed (several packages) or names none of the workspace's.
    #[error("{0}")]
    Package(String),
    /// cargo could not list the package or its tests.
    #[error(transparent)]
    Cargo(#[from] CargoError),
    /// The package's targets hold no test at all.
    #[error("package {package} has no tests (its targets list none with `-- --list`)")]
    NoTests {
        /// The package.
        package: String,
    },
    /// The catalog file exists already (never overwritten).
    #[error("{0}: exists already; remove it or give another --output")]
    Exists(PathBuf),
    /// The catalog file could not be written.
    #[error("{path}: cannot write: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// A package's targets and the tests they hold, as listed.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The probe catalog the listing ran with (workspace, package, targets; no tests, no
    /// mutations); its private target directory is the default of a catalog named after the
    /// package, so a battery of the starter catalog finds the build fresh.
    pub probe: Catalog,
    /// Every test, libtest targets first, then the doc tests, less the ignored ones.
    pub tests: Vec<String>,
    /// The tests the tests themselves mark ignored (`#[ignore]`, an `ignore` doc test): a
    /// run reports them ignored, which the baseline refuses, so the starter catalog skips
    /// them (`[[skip]]`, with why).
    pub ignored: Vec<String>,
    /// The package's library root (else its first binary's), relative to the workspace
    /// root: the file the example mutation names, as a catalog's `file` is written.
    pub example_file: Option<PathBuf>,
    /// The `cfg` gates in the package's `src/` that its default features leave shut (file
    /// relative to the workspace root), file and line order: code a battery under the
    /// default features cannot measure.
    pub left_out: Vec<(PathBuf, crate::battery::select::gates::LeftOut)>,
    /// The features the package enables by default (`default`, transitively).
    pub default_on: std::collections::BTreeSet<String>,
}

impl Listing {
    /// The features the gates of [`Listing::left_out`] name, in order of first appearance.
    pub fn gated_features(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for f in self.left_out.iter().flat_map(|(_, l)| &l.features) {
            if !out.contains(f) {
                out.push(f.clone());
            }
        }
        out
    }
}

/// The `.rs` files under `dir`, sorted; unreadable folders are skipped.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "rs") => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// The gates of `p`'s `src/` its default features shut (see [`Listing::left_out`]).
fn left_out_of(
    root: &Path,
    p: &PackageMeta,
) -> Vec<(PathBuf, crate::battery::select::gates::LeftOut)> {
    let on = crate::battery::select::gates::enabled_features(&p.feature_table, &[], false);
    let mut out = Vec::new();
    for f in rust_files(&p.dir.join("src")) {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let rel = f.strip_prefix(root).unwrap_or(&f).to_path_buf();
        for l in crate::battery::select::gates::left_out_by_default(&text, &on) {
            out.push((rel.clone(), l));
        }
    }
    out
}

/// The package of `packages` to list: `wanted`, or the only one.
///
/// Errors: [`StarterError::Package`] naming the packages there are.
pub fn pick_package<'a>(
    packages: &'a [PackageMeta],
    wanted: Option<&str>,
) -> Result<&'a PackageMeta, StarterError> {
    let names = || {
        packages
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        Some(w) => packages.iter().find(|p| p.name == w).ok_or_else(|| {
            StarterError::Package(format!(
                "package {w:?} is not in the workspace (it has: {})",
                names()
            ))
        }),
        None if packages.len() == 1 => Ok(&packages[0]),
        None => Err(StarterError::Package(format!(
            "the workspace has {} packages ({}): name one with --package",
            packages.len(),
            names()
        ))),
    }
}

/// The catalog spec that runs every test target of `p`: its library's unit tests, its
/// binaries', its test targets' and (unless the manifest turns them off) its doc tests; no
/// selection pattern, no tests, no mutations yet.
pub fn spec_of(p: &PackageMeta, workspace: PathBuf) -> CatalogSpec {
    CatalogSpec {
        name: None,
        workspace,
        package: p.name.clone(),
        test_targets: p.test_targets.clone(),
        lib_tests: p.has_lib,
        bin_targets: p.bins.clone(),
        doc_tests: p.has_lib && p.lib_doctest,
        features: Vec::new(),
        no_default_features: false,
        env: Default::default(),
        target_dir: None,
        select: String::new(),
        tests: Vec::new(),
        tests_from_listing: false,
        timeout_factor: DEFAULT_TIMEOUT_FACTOR,
        timeout_floor_secs: DEFAULT_TIMEOUT_FLOOR_SECS,
        timeout_margin_secs: DEFAULT_TIMEOUT_MARGIN_SECS,
        skipped: Vec::new(),
        mutations: Vec::new(),
        configs: Vec::new(),
    }
}

/// Lists every test of `package` (or of the workspace's only package) in the workspace at
/// `dir`: `cargo metadata`, then `cargo test -p P <targets> -- --list` and `cargo test -p P
/// --doc -- --list` (building the targets into `target/harness/<package>`). A `Cargo.lock`
/// that cargo creates meanwhile (the tree had none) is removed again.
///
/// Errors: [`StarterError::Workspace`], [`StarterError::Package`], [`StarterError::Cargo`]
/// (a target that does not build, with cargo's error), [`StarterError::NoTests`].
pub fn list(dir: &Path, package: Option<&str>, state: &Path) -> Result<Listing, StarterError> {
    let root = dir.canonicalize().map_err(|e| StarterError::Workspace {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !root.join("Cargo.toml").is_file() {
        return Err(StarterError::Workspace {
            path: dir.to_path_buf(),
            reason: "it holds no Cargo.toml".into(),
        });
    }
    leaving_no_lock(&root, || list_in(&root, package, state))
}

/// Runs `f`, then removes the `Cargo.lock` of `root` when it had none before and has one
/// now (cargo created it: a library's tree stays as it was found). A lock the user made is
/// never touched.
pub fn leaving_no_lock<T>(root: &Path, f: impl FnOnce() -> T) -> T {
    let lock = root.join("Cargo.lock");
    let lock_absent = std::fs::symlink_metadata(&lock).is_err();
    let res = f();
    if lock_absent && lock.is_file() {
        let _ = std::fs::remove_file(&lock);
    }
    res
}

fn list_in(root: &Path, package: Option<&str>, state: &Path) -> Result<Listing, StarterError> {
    let mut probe = Catalog {
        path: root.join("Cargo.toml"),
        name: "probe".into(),
        root: root.to_path_buf(),
        target_dir: root.join("target").join("harness").join("probe"),
        spec: spec_of(
            &PackageMeta {
                id: String::new(),
                name: package.unwrap_or_default().to_string(),
                dir: root.to_path_buf(),
                test_targets: Vec::new(),
                bins: Vec::new(),
                has_lib: false,
                lib_doctest: false,
                crate_roots: Vec::new(),
                features: Vec::new(),
                feature_table: Default::default(),
                path_deps: Vec::new(),
            },
            root.to_path_buf(),
        ),
        sha256: String::new(),
    };
    let packages = probe.cargo().with_state_dir(state).metadata()?;
    let p = pick_package(&packages, package)?;
    probe.name = p.name.clone();
    probe.target_dir = root.join("target").join("harness").join(&p.name);
    probe.spec = spec_of(p, root.to_path_buf());
    let cargo = probe.cargo().with_state_dir(state);
    let all = cargo.list()?;
    let ignored = cargo.list_ignored()?;
    let tests: Vec<String> = all.into_iter().filter(|t| !ignored.contains(t)).collect();
    if tests.is_empty() {
        return Err(StarterError::NoTests {
            package: p.name.clone(),
        });
    }
    let example_file = p
        .crate_roots
        .iter()
        .find_map(|f| f.strip_prefix(root).ok().map(Path::to_path_buf));
    let left_out = left_out_of(root, p);
    let default_on = crate::battery::select::gates::enabled_features(&p.feature_table, &[], false);
    Ok(Listing {
        probe,
        tests,
        ignored,
        example_file,
        left_out,
        default_on,
    })
}

/// A TOML string literal of `s`.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// `workspace` as the catalog at `catalog` writes it: relative to the catalog's directory
/// when the catalog lies inside the workspace (`".."` for `mutations/P.toml`), else absolute.
fn workspace_field(root: &Path, catalog: &Path) -> PathBuf {
    let dir = match catalog.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = dir
        .canonicalize()
        .unwrap_or_else(|_| crate::battery::select::catalog::lexical(dir));
    match dir.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => PathBuf::from("."),
        Ok(rel) => rel.components().map(|_| "..").collect(),
        Err(_) => root.to_path_buf(),
    }
}

/// The text of the starter catalog at `catalog` for `listing`: the package, every target,
/// the exact test list, the default timeouts, and one commented example mutation naming
/// the first test as its killer. It loads (a catalog with no mutation: every test is
/// UNFALSIFIED until mutations are added).
pub fn catalog_text(listing: &Listing, catalog: &Path) -> String {
    let s = &listing.probe.spec;
    let ws = workspace_field(&listing.probe.root, catalog);
    let list = |v: &[String]| v.iter().map(|x| quoted(x)).collect::<Vec<_>>().join(", ");
    let mut t = String::new();
    t.push_str(&format!(
        "# Starter catalog of package {} (written by `harness init`). The tests are every test\n\
         # its targets list with `cargo test -- --list`, as the battery runs them. Next: add\n\
         # mutations (the example below), then `harness check --list` and `harness battery`.\n\
         # Until a mutation names a test in `killed_by`, that test is UNFALSIFIED (exit 1).\n",
        s.package
    ));
    t.push_str(&format!("workspace = {}\n", quoted(&ws.to_string_lossy())));
    t.push_str(&format!("package = {}\n", quoted(&s.package)));
    t.push_str(&format!("lib_tests = {}\n", s.lib_tests));
    t.push_str(&format!("bin_targets = [{}]\n", list(&s.bin_targets)));
    t.push_str(&format!("test_targets = [{}]\n", list(&s.test_targets)));
    t.push_str(&format!("doc_tests = {}\n", s.doc_tests));
    t.push_str("# A test whose name contains `select` must be listed below (\"\": every test).\n");
    t.push_str("select = \"\"\n");
    t.push_str("tests = [\n");
    for test in &listing.tests {
        t.push_str(&format!("    {},\n", quoted(test)));
    }
    t.push_str("]\n");
    t.push_str(&format!(
        "timeout_factor = {:?}\ntimeout_floor_secs = {:?}\n",
        s.timeout_factor, s.timeout_floor_secs
    ));
    for test in &listing.ignored {
        t.push_str(&format!(
            "\n[[skip]]\ntest = {}\nreason = \"the test marks itself ignored (#[ignore], or an `ignore` doc test): a run reports it ignored, never passed\"\n",
            quoted(test)
        ));
    }
    if !listing.left_out.is_empty() {
        t.push_str(&format!(
            "\n# The default features leave {} gated place(s) of this package's code out of the\n\
             # build (read from its `cfg` attributes); a mutation there is NOT_COMPILED unless\n\
             # `features` or a further configuration below enables its gate:\n",
            listing.left_out.len()
        ));
        const SHOWN: usize = 20;
        for (file, l) in listing.left_out.iter().take(SHOWN) {
            t.push_str(&format!(
                "#   {}:{}  {}\n",
                file.display(),
                l.line,
                l.written
            ));
        }
        if listing.left_out.len() > SHOWN {
            t.push_str(&format!(
                "#   ... and {} more\n",
                listing.left_out.len() - SHOWN
            ));
        }
        t.push_str(
            "# Further configurations: a mutation the catalog's own features leave out runs under\n\
             # the first of these that compiles it (`tests`: tests only that configuration's\n\
             # targets hold).\n",
        );
        let (on, off): (Vec<String>, Vec<String>) = listing
            .gated_features()
            .into_iter()
            .partition(|f| listing.default_on.contains(f));
        for f in off {
            t.push_str(&format!(
                "#\n# [[config]]\n# name = {}\n# features = [{}]\n",
                quoted(&f),
                quoted(&f)
            ));
        }
        if !on.is_empty() {
            // A gate shut by a default feature (`not(feature = "std")`) opens without it.
            t.push_str(
                "#\n# [[config]]\n# name = \"no-default-features\"\n# no_default_features = true\n",
            );
        }
        t.push_str("#\n# [[config]]\n# name = \"all-features\"\n# all_features = true\n");
    }
    let killer = listing.tests.first().map(|k| quoted(k)).unwrap_or_default();
    let file = listing
        .example_file
        .as_deref()
        .map_or_else(|| quoted("src/lib.rs"), |f| quoted(&f.to_string_lossy()));
    t.push_str(&format!(
        "\n# An example mutation: `find` must occur exactly `occurrences` times (default 1) in\n\
         # `file` (relative to the workspace root, not to the package); the tests of\n\
         # `killed_by` must fail when it is replaced by `replace`.\n\
         # role: defect (a wrong implementation) | vacuity (accept or refuse everything) |\n\
         # gap (a known hole, expected to survive; no killed_by).\n\
         #\n\
         # [[mutation]]\n\
         # id = \"example\"\n\
         # title = \"what the mutated code gets wrong\"\n\
         # role = \"defect\"\n\
         # file = {file}\n\
         # find = \"a + b\"\n\
         # replace = \"a - b\"\n\
         # killed_by = [{killer}]\n\
         # rationale = \"why a test must tell this apart\"\n"
    ));
    t
}

/// Writes the starter catalog of `listing` to `catalog` (creating its directory), never over
/// an existing file.
///
/// Errors: [`StarterError::Exists`], [`StarterError::Write`].
pub fn write_catalog(listing: &Listing, catalog: &Path) -> Result<(), StarterError> {
    if std::fs::symlink_metadata(catalog).is_ok() {
        return Err(StarterError::Exists(catalog.to_path_buf()));
    }
    let write = |p: &Path| -> std::io::Result<()> {
        if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        // The directory exists now: the workspace is written relative to it.
        std::fs::write(p, catalog_text(listing, p))
    };
    write(catalog).map_err(|source| StarterError::Write {
        path: catalog.to_path_buf(),
        source,
    })
}
