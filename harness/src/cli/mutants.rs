//! `harness mutants`: run or import cargo-mutants, or run its mutants through the batteries (`--via-harness`).

use std::path::{Path, PathBuf};

use super::battery::parse_jobs;
use super::lock::{LockArgs, take_lock};
use super::{ReportsArgs, report_catalog_error};
use crate::battery::select::catalog::Catalog;
use crate::battery::{self, BatteryError, Mode, report};
use crate::cargo::PackageMeta;
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
    /// `-j N` (as `battery -j N`; with several packages, up to N of their batteries run at
    /// once, each in a scratch copy of its own, sharing the N; rebuild mode takes only 1).
    #[arg(short = 'j', long, value_name = "N", default_value_t = 1, value_parser = parse_jobs)]
    pub jobs: usize,
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
    let named = match mutants::named_sites(&args.catalog) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    let out_dir = match &args.import {
        Some(d) => d.clone(),
        None => {
            let hold = match take_lock(state, &args.lock) {
                Ok((hold, _)) => hold,
                Err(f) => return f.code,
            };
            let opts = mutants::ToolOptions {
                workspace: args.workspace.clone(),
                output: args
                    .workspace
                    .join("target")
                    .join("harness")
                    .join("cargo-mutants"),
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
    let dir = mutants_dir(args, &args.workspace);
    match mutants::write_reports(&dir, &report) {
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

fn run_mutants_via_harness(state: &Path, args: &MutantsArgs) -> ExitCode {
    if let Err(e) = battery::check_jobs(args.jobs, args.mode) {
        eprintln!("harness: {e}");
        return ExitCode::Refused;
    }
    // Only its workspace, package, targets and tests are used: it needs no mutation.
    let base = match Catalog::load_base(&args.catalog[0]) {
        Ok(c) => c,
        Err(e) => {
            report_catalog_error(&e);
            return ExitCode::Refused;
        }
    };
    // cargo-mutants' listing (`cargo metadata`), the listing of another package's tests
    // and the batteries' builds create the workspace's Cargo.lock when it has none: that
    // lock is this command's, removed at the end, so the tree is left as it was found.
    if let Err(e) = battery::check_state_dir(&base.root, state) {
        eprintln!("harness: {e}");
        return ExitCode::Refused;
    }
    let lock_path = base.root.join("Cargo.lock");
    let lock_absent = std::fs::symlink_metadata(&lock_path).is_err();
    let code = via_harness(state, args, &base);
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

fn via_harness(state: &Path, args: &MutantsArgs, base: &Catalog) -> ExitCode {
    use crate::mutants;
    let out = base
        .root
        .join("target")
        .join("harness")
        .join("cargo-mutants");
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
    let listed = match mutants::list_tool(&opts) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    let named = match mutants::named_sites(&args.catalog) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused;
        }
    };
    let (hold, lock_note) = match take_lock(state, &args.lock) {
        Ok(x) => x,
        Err(f) => return f.code,
    };
    let code = via_harness_batteries(state, args, base, &listed, &named, lock_note);
    drop(hold);
    code
}

/// The run settings (package, targets, tests) each package's generated mutants are
/// tested with, as cargo-mutants tests a mutant with the tests of the package it lies in:
/// the base catalog's own for its package; for another package every test of its
/// library, binaries, test targets and doc tests (`cargo test -p P`'s tests), listed with
/// `--list` (which builds them). `Err` is the exit code, the error printed.
fn package_spec(
    state: &Path,
    base: &Catalog,
    packages: &[PackageMeta],
    package: &str,
) -> Result<Option<crate::battery::select::catalog::CatalogSpec>, ExitCode> {
    if package == base.spec.package {
        return Ok(Some(base.spec.clone()));
    }
    let Some(p) = packages.iter().find(|p| p.name == package) else {
        eprintln!(
            "harness: cargo-mutants listed mutants of package {package}, which cargo metadata does not list"
        );
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
    spec.select = String::new();
    spec.tests = Vec::new();
    spec.skipped = Vec::new();
    spec.mutations = Vec::new();
    let probe = Catalog {
        path: base.path.clone(),
        name: base.name.clone(),
        root: base.root.clone(),
        target_dir: base.target_dir.clone(),
        spec: spec.clone(),
    };
    eprintln!("harness: listing the tests of package {package}");
    match probe.cargo().with_state_dir(state).list() {
        Ok(tests) if tests.is_empty() => Ok(None),
        Ok(tests) => {
            spec.tests = tests;
            Ok(Some(spec))
        }
        Err(crate::cargo::CargoError::Interrupted(_)) => Err(ExitCode::Interrupted),
        Err(e) => {
            eprintln!("harness: cannot list the tests of package {package}: {e}");
            Err(ExitCode::Refused)
        }
    }
}

/// The generated catalogs of `listed`, one per package with tests (each with the tests of
/// its package), written beside cargo-mutants' output; returns each one's package and path.
/// `Err` is the exit code, the error printed.
fn generated_catalogs(
    state: &Path,
    base: &Catalog,
    listed: &[crate::mutants::MutantInfo],
) -> Result<Vec<(String, PathBuf)>, ExitCode> {
    use crate::mutants;
    let out = base
        .root
        .join("target")
        .join("harness")
        .join("cargo-mutants");
    let mut by_package: Vec<(String, Vec<(usize, &mutants::MutantInfo)>)> = Vec::new();
    for (n, m) in listed.iter().enumerate() {
        match by_package.iter_mut().find(|(p, _)| *p == m.package) {
            Some((_, v)) => v.push((n, m)),
            None => by_package.push((m.package.clone(), vec![(n, m)])),
        }
    }
    let several = by_package.len() > 1 || by_package.iter().any(|(p, _)| *p != base.spec.package);
    let packages = if several {
        match base.cargo().with_state_dir(state).metadata() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("harness: {e}");
                return Err(ExitCode::Refused);
            }
        }
    } else {
        Vec::new()
    };
    let mut paths = Vec::new();
    for (package, mutants_of) in &by_package {
        let spec = match package_spec(state, base, &packages, package) {
            Ok(Some(s)) => s,
            Ok(None) => {
                eprintln!(
                    "harness: package {package} has no tests: its {} generated mutants are left out (no test can catch them)",
                    mutants_of.len()
                );
                continue;
            }
            Err(code) => return Err(code),
        };
        let mut spec = spec;
        spec.name = Some(if several {
            format!("{}-generated-{package}", base.name)
        } else {
            format!("{}-generated", base.name)
        });
        let (spec, skipped) = mutants::generated_mutations(base, spec, mutants_of);
        for s in &skipped {
            eprintln!("harness: generated mutant left out: {s}");
        }
        if spec.mutations.is_empty() {
            continue;
        }
        let name = spec.name.clone().unwrap_or_default();
        let path = out.join(format!("{name}.toml"));
        let text = match toml::to_string(&spec) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("harness: cannot write the generated catalog: {e}");
                return Err(ExitCode::Refused);
            }
        };
        if let Err(e) = std::fs::create_dir_all(&out).and_then(|_| std::fs::write(&path, text)) {
            eprintln!("harness: {}: {e}", path.display());
            return Err(ExitCode::Refused);
        }
        eprintln!(
            "harness: {} generated mutants of package {package} as catalog {}",
            spec.mutations.len(),
            path.display()
        );
        paths.push((package.clone(), path));
    }
    Ok(paths)
}

/// Runs the generated catalogs `generated` (package, catalog path) as batteries. In switch
/// mode with `-j N` and several packages, up to N batteries run at once, each with `-j N/k`
/// (k of them at once, at least 1) and a scratch copy of its own (`switch-<package>` under
/// the target directory), so that N bounds the test processes as in one battery; otherwise
/// one after another. `Err` is the exit code of the first, in catalog order, that could not
/// run, refused or was interrupted (the cause printed); once one has, no other starts.
fn run_generated(
    state: &Path,
    args: &MutantsArgs,
    generated: &[(String, PathBuf)],
    lock_note: String,
) -> Result<Vec<battery::RunResult>, ExitCode> {
    let at_once = batteries_at_once(args.jobs, args.mode, generated.len());
    let opts = battery::Options {
        state_dir: state.to_path_buf(),
        reports_root: args.reports.reports.clone(),
        only: None,
        shard: None,
        lock: lock_note,
        since: None,
        incremental: false,
        recheck: 0,
        jobs: (args.jobs / at_once).max(1),
        diff_scope: battery::DiffScope::default(),
        all_tests: false,
        generated: true,
        scratch_name: None,
    };
    let several = generated.len() > 1;
    let multi = indicatif::MultiProgress::new();
    let results = crate::system::pool::run_in_order(generated.len(), at_once, |i| {
        let (package, path) = &generated[i];
        let progress = if at_once > 1 {
            Progress::of_one_among(&multi, package)
        } else {
            Progress::auto()
        };
        let opts = battery::Options {
            scratch_name: several.then(|| format!("switch-{package}")),
            ..opts.clone()
        };
        let res = run_one_generated(path, &opts, &progress, args.mode);
        progress.finish();
        res
    });
    let mut runs = Vec::new();
    for res in results.into_iter().flatten() {
        runs.push(res?);
    }
    Ok(runs)
}

/// How many of `n` generated batteries run at once with `-j jobs` in `mode`: up to `jobs`
/// in switch mode (each in a scratch copy of its own), one in rebuild mode (every battery
/// mutates the workspace itself).
fn batteries_at_once(jobs: usize, mode: battery::Mode, n: usize) -> usize {
    match mode {
        battery::Mode::Switch => jobs.min(n).max(1),
        battery::Mode::Rebuild => 1,
    }
}

/// One generated battery run at `path`, its progress on `progress`. `Err` is its exit
/// code when it could not run, refused or was interrupted (the cause printed).
fn run_one_generated(
    path: &Path,
    opts: &battery::Options,
    progress: &Progress,
    mode: battery::Mode,
) -> Result<battery::RunResult, ExitCode> {
    progress.line(&format!("battery {}", path.display()));
    let run = match crate::mutants::in_diff::run_battery(path, opts, progress, mode) {
        Ok(r) => r,
        Err(BatteryError::Catalog(e)) => {
            report_catalog_error(&e);
            return Err(ExitCode::Refused);
        }
        Err(e) => {
            progress.line(&e.to_string());
            return Err(ExitCode::Refused);
        }
    };
    let battery_code = run.report.exit_code;
    if battery_code.stops() {
        if let Some(f) = &run.report.refusal {
            progress.line(&format!("{}: {}", f.kind, f.detail));
        }
        return Err(battery_code);
    }
    Ok(run)
}

/// The generated catalogs of `listed` (one per package, each with the tests of its
/// package) run as batteries ([`run_generated`]) and joined into one report of the
/// mutants in their own terms. Returns the exit code.
fn via_harness_batteries(
    state: &Path,
    args: &MutantsArgs,
    base: &Catalog,
    listed: &[crate::mutants::MutantInfo],
    named: &[crate::mutants::NamedSite],
    lock_note: String,
) -> ExitCode {
    use crate::mutants;
    let paths = match generated_catalogs(state, base, listed) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let runs = match run_generated(state, args, &paths, lock_note) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let reports: Vec<&report::schema::BatteryReport> = runs.iter().map(|r| &r.report).collect();
    let report = mutants::from_battery(&reports, listed, mutants::CARGO_MUTANTS_VERSION, named);
    print!("{}", mutants::markdown(&report));
    let dir = mutants_dir(args, &base.root);
    let written = mutants::write_reports(&dir, &report);
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
