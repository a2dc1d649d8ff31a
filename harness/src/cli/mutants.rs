//! `harness mutants`: run or import cargo-mutants, or run its mutants through the batteries (`--via-harness`).

use std::path::{Path, PathBuf};

use super::ReportsArgs;
use super::battery::parse_jobs;
use super::lock::LockArgs;
use crate::battery::select::catalog::Catalog;
use crate::battery::{self, Mode, report};
use crate::cargo::PackageMeta;
use crate::door::{Door, Request, Role};
use crate::system::exit::ExitCode;
use crate::system::progress::Progress;

/// Arguments of `harness mutants`.
#[derive(Debug, clap::Args)]
pub struct MutantsArgs {
    /// The workspace cargo-mutants runs on.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub workspace: PathBuf,
    /// Mutate only this package (repeatable).
    #[arg(long, value_name = "P")]
    pub package: Vec<String>,
    /// Mutate only files matching this glob (repeatable).
    #[arg(long = "file", value_name = "GLOB")]
    pub files: Vec<String>,
    /// Mutate only code changed by this diff.
    #[arg(long, value_name = "FILE")]
    pub in_diff: Option<PathBuf>,
    /// Build and run only this test target (cargo-mutants `--cargo-arg=--test=T`; repeatable).
    #[arg(long, value_name = "T")]
    pub test_target: Vec<String>,
    /// Named batteries to join with (repeatable): their mutations guard functions.
    #[arg(long, value_name = "CATALOG")]
    pub catalog: Vec<PathBuf>,
    /// Import this existing `mutants.out` directory instead of running cargo-mutants.
    #[arg(long, value_name = "DIR")]
    pub import: Option<PathBuf>,
    /// The reports (`<reports>/mutants/`).
    #[command(flatten)]
    pub reports: ReportsArgs,
    /// The host lock.
    #[command(flatten)]
    pub lock: LockArgs,
    /// Run the generated mutants (`cargo mutants --list --json`) through the harness's own
    /// battery runner instead, with the first `--catalog`'s package, targets and test list:
    /// listed tests, per-test kill attribution, verified rebuilds, byte-identical restore
    /// and the kill matrix. The mutants are reported in their own terms (caught with the
    /// failing tests, missed, unviable, timeout, crashed, tests missing) in
    /// `<reports>/mutants/`, the battery's reports beside them. Exit 0: no mutant missed;
    /// 1: some mutant missed; 2: the battery refused or could not run; 130: interrupted.
    #[arg(long, requires = "catalog")]
    pub via_harness: bool,
    /// Battery mode for `--via-harness`.
    #[arg(long, value_enum, default_value_t = Mode::Rebuild)]
    pub mode: Mode,
    /// How many mutants are tested at once: cargo-mutants' own `--jobs` (each job in its
    /// own copy of the tree), or with `--via-harness --mode switch` the switch runner's
    /// `-j N` (as `battery -j N`; with several packages and N of 2 or more, their batteries
    /// run at once, each with `-j N` in a scratch copy of its own, with at most 2N of their
    /// builds, cargo commands and test processes running at any time; rebuild mode takes
    /// only 1).
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1, value_parser = parse_jobs)]
    pub jobs: usize,
}

/// `<workspace>/target/harness/cargo-mutants`: cargo-mutants' output (its `--list` and its
/// runs) and `--via-harness`'s generated catalogs.
fn tool_output(workspace: &Path) -> PathBuf {
    workspace
        .join("target")
        .join("harness")
        .join("cargo-mutants")
}

/// `<reports>/mutants/`, where the mutants' reports go (`<reports>` defaults to
/// `<root>/reports`).
fn mutants_dir(args: &MutantsArgs, root: &Path) -> PathBuf {
    let reports = args.reports.reports.clone();
    let reports = reports.unwrap_or_else(|| root.join("reports"));
    reports.join("mutants")
}

/// Runs `harness mutants` (with `--via-harness`, through the battery runner); returns the
/// exit code.
pub fn run(state: &Path, args: &MutantsArgs) -> ExitCode {
    use crate::mutants;
    if args.via_harness {
        return run_mutants_via_harness(state, args);
    }
    let named = match mutants::named_sites_of(&args.catalog) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    let out_dir = match &args.import {
        Some(d) => d.clone(),
        None => {
            let hold = match crate::door::take_lock(state, &args.lock.request()) {
                Ok((hold, _)) => hold,
                Err(f) => return f.code,
            };
            let opts = mutants::ToolOptions {
                workspace: args.workspace.clone(),
                output: tool_output(&args.workspace),
                packages: args.package.clone(),
                files: args.files.clone(),
                in_diff: args.in_diff.clone(),
                test_targets: args.test_target.clone(),
                timeout: None,
                jobs: args.jobs,
                state_dir: Some(state.to_path_buf()),
            };
            let res = mutants::run_tool(&opts);
            drop(hold);
            match res {
                Ok(d) => d,
                Err(mutants::MutantsError::Interrupted(_)) => return ExitCode::Interrupted,
                Err(e) => {
                    eprintln!("harness: {e}");
                    return ExitCode::Refused;
                }
            }
        }
    };
    let report = match mutants::import(&out_dir, &named) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    print!("{}", mutants::markdown(&report));
    super::annotate::print_mutants(&report, &args.workspace);
    let dir = mutants_dir(args, &args.workspace);
    match mutants::write_reports(&dir, &report, &args.workspace) {
        Ok(paths) => {
            for p in paths {
                println!("report: {}", p.display());
            }
        }
        Err(e) => {
            eprintln!("harness: {}: cannot write reports: {e}", dir.display());
            return ExitCode::Refused;
        }
    }
    if report.unguarded.is_empty() {
        ExitCode::AllMet
    } else {
        ExitCode::Weak
    }
}

/// `--via-harness` through the front door ([`crate::door`]): the `--catalog`s planned (read
/// once: the first is the base, all of them give the named sites), preflighted and locked
/// as for `battery`; then, under the lock, cargo-mutants' listing and the generated
/// batteries.
fn run_mutants_via_harness(state: &Path, args: &MutantsArgs) -> ExitCode {
    let request = Request {
        catalogs: args.catalog.clone(),
        role: Role::Base,
        options: battery::Options {
            state_dir: state.to_path_buf(),
            reports_root: args.reports.reports.clone(),
            only: None,
            shard: None,
            lock: String::new(),
            since: None,
            incremental: false,
            recheck: 0,
            jobs: args.jobs,
            diff_scope: battery::DiffScope::default(),
            all_tests: false,
            generated: true,
            scratch_name: None,
            scratch_incremental: false,
        },
        timings: None,
        mode: args.mode,
        lock: args.lock.request(),
    };
    let door = match Door::open(&request) {
        Ok(d) => d,
        Err(code) => return code,
    };
    // Only its workspace, package, targets and tests are used: it needs no mutation.
    let base = door.planned()[0].catalog();
    // cargo-mutants' listing (`cargo metadata`), the listing of another package's tests
    // and the batteries' builds create the workspace's Cargo.lock when it has none: that
    // lock is this command's, removed at the end, so the tree is left as it was found.
    let lock_path = base.root.join("Cargo.lock");
    let lock_absent = std::fs::symlink_metadata(&lock_path).is_err();
    let code = via_harness(state, args, &door, base);
    if lock_absent && lock_path.is_file() {
        match std::fs::remove_file(&lock_path) {
            Ok(()) => eprintln!(
                "harness: removed the Cargo.lock this command's cargo created (the tree had none)"
            ),
            Err(e) => {
                eprintln!("harness: {}: cannot remove: {e}", lock_path.display());
                return code.worst(ExitCode::Refused);
            }
        }
    }
    code
}

fn via_harness(state: &Path, args: &MutantsArgs, door: &Door, base: &Catalog) -> ExitCode {
    use crate::mutants;
    let out = tool_output(&base.root);
    let opts = mutants::ToolOptions {
        workspace: base.root.clone(),
        output: out.clone(),
        packages: args.package.clone(),
        files: args.files.clone(),
        in_diff: args.in_diff.clone(),
        test_targets: Vec::new(),
        timeout: None,
        jobs: 1,
        state_dir: Some(state.to_path_buf()),
    };
    // Batteries that may run at once need the workspace's `Cargo.lock` before any starts
    // ([`via_harness_batteries`]): in a tree without one it is written (`cargo metadata`,
    // resolving) while cargo-mutants lists, not after. The listing (`cargo metadata
    // --no-deps`) reads no lock. Should one battery run after all, the lock is still this
    // command's, removed at the end ([`run_mutants_via_harness`]); a failure here is left
    // to the same step after the listing to report. Only where the root manifest has a
    // `[workspace]` with members (more than one package may have mutants); a lone package
    // runs one battery, which needs no lock in the tree.
    let early_lock = args.mode == Mode::Switch
        && args.jobs > 1
        && std::fs::symlink_metadata(base.root.join("Cargo.lock")).is_err()
        && several_members(&base.root);
    let listed = std::thread::scope(|scope| {
        let lock = early_lock.then(|| {
            scope.spawn(|| {
                let _ = base.cargo().with_state_dir(state).write_lockfile();
            })
        });
        let listed = mutants::list_tool(&opts);
        if let Some(l) = lock {
            let _ = l.join();
        }
        listed
    });
    let listed = match listed {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    let catalogs: Vec<&Catalog> = door.planned().iter().map(|c| c.catalog()).collect();
    let named = match mutants::named_sites(&catalogs) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    via_harness_batteries(state, args, door, base, &listed, &named)
}

/// Whether `root/Cargo.toml` declares a `[workspace]` with `members` (so that mutants of
/// several packages, and batteries at once, are possible). An unreadable manifest: `false`
/// (the lock is then made after the listing, where it is needed).
fn several_members(root: &Path) -> bool {
    std::fs::read_to_string(root.join("Cargo.toml"))
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| {
            t.get("workspace")?
                .get("members")?
                .as_array()
                .map(|m| !m.is_empty())
        })
        .unwrap_or(false)
}

/// The run settings (package, targets, tests) each package's generated mutants are
/// tested with, as cargo-mutants tests a mutant with the tests of the package it lies in:
/// the base catalog's own for its package; for another package every test of its
/// library, binaries, test targets and doc tests (`cargo test -p P`'s tests): with
/// `from_listing` none here, the battery taking them from its own baseline build's listing
/// (the catalog's `tests_from_listing`); otherwise listed here with `--list` (which
/// builds them). `Err` is the exit code, the error printed on `progress`.
fn package_spec(
    state: &Path,
    base: &Catalog,
    packages: &[PackageMeta],
    package: &str,
    from_listing: bool,
    progress: &Progress,
) -> Result<Option<crate::battery::select::catalog::CatalogSpec>, ExitCode> {
    if package == base.spec.package {
        return Ok(Some(base.spec.clone()));
    }
    let Some(p) = packages.iter().find(|p| p.name == package) else {
        progress.line(&format!(
            "cargo-mutants listed mutants of package {package}, which cargo metadata does not list"
        ));
        return Err(ExitCode::Refused);
    };
    let mut spec = base.spec.clone();
    spec.package = package.to_string();
    spec.lib_tests = p.has_lib;
    spec.bin_targets = p.bins.clone();
    spec.test_targets = p.test_targets.clone();
    spec.doc_tests = p.has_lib && p.lib_doctest;
    // The base catalog's features are its package's; another package is tested with its
    // default features, as cargo-mutants does.
    spec.features = Vec::new();
    spec.no_default_features = false;
    spec.configs = Vec::new();
    spec.select = String::new();
    spec.tests = Vec::new();
    spec.skipped = Vec::new();
    spec.mutations = Vec::new();
    if from_listing {
        spec.tests_from_listing = true;
        return Ok(Some(spec));
    }
    let probe = Catalog {
        path: base.path.clone(),
        name: base.name.clone(),
        root: base.root.clone(),
        target_dir: base.target_dir.clone(),
        spec: spec.clone(),
        sha256: String::new(),
    };
    progress.line(&format!("listing the tests of package {package}"));
    match probe.cargo().with_state_dir(state).list() {
        Ok(tests) if tests.is_empty() => Ok(None),
        Ok(tests) => {
            spec.tests = tests;
            Ok(Some(spec))
        }
        Err(crate::cargo::CargoError::Interrupted(_)) => Err(ExitCode::Interrupted),
        Err(e) => {
            progress.line(&format!("cannot list the tests of package {package}: {e}"));
            Err(ExitCode::Refused)
        }
    }
}

/// The mutants of `listed` by package, in the order their packages first appear, each
/// with its index in `listed`.
type ByPackage<'l> = Vec<(String, Vec<(usize, &'l crate::mutants::MutantInfo)>)>;

fn by_package(listed: &[crate::mutants::MutantInfo]) -> ByPackage<'_> {
    let mut by: ByPackage<'_> = Vec::new();
    for (n, m) in listed.iter().enumerate() {
        match by.iter_mut().find(|(p, _)| *p == m.package) {
            Some((_, v)) => v.push((n, m)),
            None => by.push((m.package.clone(), vec![(n, m)])),
        }
    }
    by
}

/// What the generated batteries of one `mutants --via-harness` run share.
struct Generation<'a> {
    state: &'a Path,
    base: &'a Catalog,
    /// `cargo metadata`'s packages (empty when only the base catalog's package has
    /// mutants: it is not needed then).
    packages: Vec<PackageMeta>,
    /// Several packages, or one that is not the base catalog's: the catalogs are named
    /// after their package.
    several: bool,
    /// Another package's battery takes its tests from its own baseline build's listing
    /// (the catalog's `tests_from_listing`; switch mode was asked: with `--mode auto`
    /// the choice of mode needs the count of tests before the run).
    from_listing: bool,
}

impl Generation<'_> {
    /// The generated catalog of `package`'s mutants `mutants_of` (with the tests of its
    /// package), written beside cargo-mutants' output (and not read back); `None` when the
    /// package has no test or no mutant is left. `Err` is the exit code, the error printed
    /// on `progress`.
    fn catalog(
        &self,
        package: &str,
        mutants_of: &[(usize, &crate::mutants::MutantInfo)],
        progress: &Progress,
    ) -> Result<Option<Catalog>, ExitCode> {
        use crate::mutants;
        let base = self.base;
        let from_listing = self.from_listing && package != base.spec.package;
        let Some(mut spec) = package_spec(
            self.state,
            base,
            &self.packages,
            package,
            from_listing,
            progress,
        )?
        else {
            progress.line(&format!(
                "package {package} has no tests: its {} generated mutants are left out (no test can catch them)",
                mutants_of.len()
            ));
            return Ok(None);
        };
        spec.name = Some(if self.several {
            format!("{}-generated-{package}", base.name)
        } else {
            format!("{}-generated", base.name)
        });
        let (spec, skipped) = mutants::generated_mutations(base, spec, mutants_of);
        for s in &skipped {
            progress.line(&format!("generated mutant left out: {s}"));
        }
        if spec.mutations.is_empty() {
            return Ok(None);
        }
        let out = tool_output(&base.root);
        let name = spec.name.clone().unwrap_or_default();
        let path = out.join(format!("{name}.toml"));
        let text = match toml::to_string(&spec) {
            Ok(t) => t,
            Err(e) => {
                progress.line(&format!("cannot write the generated catalog: {e}"));
                return Err(ExitCode::Refused);
            }
        };
        if let Err(e) = std::fs::create_dir_all(&out).and_then(|_| std::fs::write(&path, &text)) {
            progress.line(&format!("{}: {e}", path.display()));
            return Err(ExitCode::Refused);
        }
        let catalog = match Catalog::from_text(&path, &text) {
            Ok(c) => c,
            Err(e) => {
                progress.line(&format!("the generated catalog: {e}"));
                return Err(ExitCode::Refused);
            }
        };
        progress.line(&format!(
            "{} generated mutants of package {package} as catalog {}",
            spec.mutations.len(),
            path.display()
        ));
        Ok(Some(catalog))
    }
}

/// Makes each package's generated catalog ([`Generation::catalog`]) and runs it as a
/// battery. In switch mode with `-j N` (N of 2 or more) and several packages, every
/// package goes at once (the listing of its tests, then its battery), each battery with
/// `-j N` and a scratch copy of its own (`switch-<package>` under the target directory),
/// and the harness runs at most 2N children (builds, cargo commands, test processes) at
/// once among them ([`crate::system::slots`]): while one battery does its own work
/// (syncing, instrumenting, judging) or waits on a cargo start, the others' builds and
/// tests use the cores. Otherwise one after another. Returns the runs in
/// package order (a package without tests or mutants has none). `Err` is the exit code of
/// the first, in package order, that could not run, refused or was interrupted (the cause
/// printed); once one has, no other starts.
fn run_generated(
    generation: &Generation<'_>,
    args: &MutantsArgs,
    door: &Door,
    by_package: &ByPackage<'_>,
) -> Result<Vec<battery::RunResult>, ExitCode> {
    let at_once = batteries_at_once(args.jobs, args.mode, by_package.len());
    // Twice the jobs: most of a battery's children are short cargo and test starts that
    // leave the cores idle part of the time (docs/design.md, concurrent batteries).
    let _limit = (at_once > 1).then(|| {
        eprintln!(
            "harness: {at_once} packages' batteries at once, each with -j {}, at most {} of their processes at a time",
            args.jobs,
            2 * args.jobs
        );
        crate::system::slots::limit_children(2 * args.jobs)
    });
    let opts = door.options();
    let several = by_package.len() > 1;
    let multi = indicatif::MultiProgress::new();
    let results = crate::system::pool::run_in_order(by_package.len(), at_once, |i| {
        let (package, mutants_of) = &by_package[i];
        let progress = if at_once > 1 {
            Progress::of_one_among(&multi, package)
        } else {
            Progress::auto()
        };
        let res = match generation.catalog(package, mutants_of, &progress) {
            Ok(Some(catalog)) => {
                let opts = battery::Options {
                    scratch_name: several.then(|| format!("switch-{package}")),
                    ..opts.clone()
                };
                run_one_generated(door, catalog, &opts, &progress).map(Some)
            }
            Ok(None) => Ok(None),
            Err(code) => Err(code),
        };
        progress.finish();
        res
    });
    let mut runs = Vec::new();
    for res in results.into_iter().flatten() {
        runs.extend(res?);
    }
    Ok(runs)
}

/// How many of `n` generated batteries run at once with `-j jobs` in `mode`: all of them in
/// switch mode with 2 or more jobs (each in a scratch copy of its own, the children bounded
/// by twice `jobs`), one with `-j 1` or in rebuild mode (every battery mutates the
/// workspace itself).
fn batteries_at_once(jobs: usize, mode: battery::Mode, n: usize) -> usize {
    match mode {
        battery::Mode::Switch if jobs > 1 => n.max(1),
        battery::Mode::Switch | battery::Mode::Rebuild | battery::Mode::Auto => 1,
    }
}

/// One generated battery, `catalog`, run through the door ([`Door::run_made`]), its
/// progress on `progress`. `Err` is its exit code when it could not run, refused or was
/// interrupted (the cause printed).
fn run_one_generated(
    door: &Door,
    catalog: Catalog,
    opts: &battery::Options,
    progress: &Progress,
) -> Result<battery::RunResult, ExitCode> {
    progress.line(&format!("battery {}", catalog.path.display()));
    let run = match door.run_made(catalog, opts, door.mode(), progress) {
        Ok(r) => r,
        Err(e) => {
            progress.line(&crate::door::error_message(&e));
            return Err(ExitCode::Refused);
        }
    };
    let battery_code = run.report.exit_code;
    if battery_code.stops() {
        return Err(battery_code);
    }
    Ok(run)
}

/// The generated catalogs of `listed` (one per package, each with the tests of its
/// package) made and run as batteries ([`run_generated`]) and joined into one report of
/// the mutants in their own terms. Returns the exit code.
fn via_harness_batteries(
    state: &Path,
    args: &MutantsArgs,
    door: &Door,
    base: &Catalog,
    listed: &[crate::mutants::MutantInfo],
    named: &[crate::mutants::NamedSite],
) -> ExitCode {
    use crate::mutants;
    let by_package = by_package(listed);
    let several = by_package.len() > 1 || by_package.iter().any(|(p, _)| *p != base.spec.package);
    let packages = if several {
        match base.cargo().with_state_dir(state).metadata() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("harness: {e}");
                return ExitCode::Refused;
            }
        }
    } else {
        Vec::new()
    };
    // Batteries run at once, and the listing of a package's tests builds it in the
    // workspace: a `Cargo.lock` one of them created meanwhile would look like its own to
    // another battery, which would remove it. Made before any of them starts, it is this
    // command's (removed at the end when the tree had none).
    let lock = base.root.join("Cargo.lock");
    if batteries_at_once(args.jobs, args.mode, by_package.len()) > 1
        && std::fs::symlink_metadata(&lock).is_err()
        && let Err(e) = base.cargo().with_state_dir(state).write_lockfile()
    {
        eprintln!("harness: {e}");
        return ExitCode::Refused;
    }
    // The generated catalogs are written there while other packages' batteries run, after
    // they have fingerprinted the tree: a cache directory, it is not part of the tree.
    let out = tool_output(&base.root);
    if let Err(e) = crate::battery::tree::mark_cache_dir(&out) {
        eprintln!("harness: {e}");
        return ExitCode::Refused;
    }
    let generation = Generation {
        state,
        base,
        packages,
        several,
        from_listing: args.mode == Mode::Switch,
    };
    let runs = match run_generated(&generation, args, door, &by_package) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let reports: Vec<&report::schema::BatteryReport> = runs.iter().map(|r| &r.report).collect();
    let report = mutants::from_battery(&reports, listed, mutants::CARGO_MUTANTS_VERSION, named);
    print!("{}", mutants::markdown(&report));
    super::annotate::print_mutants(&report, &base.root);
    let dir = mutants_dir(args, &base.root);
    let written = mutants::write_reports(&dir, &report, &base.root);
    for p in runs
        .iter()
        .flat_map(|r| r.written.iter())
        .chain(written.iter().flatten())
    {
        println!("report: {}", p.display());
    }
    if let Err(e) = written {
        eprintln!("harness: {}: cannot write reports: {e}", dir.display());
        return ExitCode::Refused;
    }
    if report.missed > 0 {
        ExitCode::Weak
    } else {
        ExitCode::AllMet
    }
}
