//! `--since REV --mutants`: cargo-mutants' generated mutants inside the `--since` diff, run
//! through the harness's switch runner and reported in their own terms.
//!
//! The diff cargo-mutants sees (`--in-diff`) is the `--since` diff itself, written from git2
//! as a unified patch (`<reports>/<catalog>/since.diff`), so the catalog's mutations and the
//! generated mutants are chosen by the same changed lines. The generated mutants become the
//! catalog `<catalog>-generated` (the battery's package, targets and listed tests; see
//! [`super::generated_catalog`]), which runs in switch mode after the battery, through the
//! same run step as every battery (`crate::door`); its reports
//! go to `<reports>/<catalog>-generated/`, with `mutants.json` and `mutants.md` beside them.

use std::path::{Path, PathBuf};

use crate::battery::report::schema::GeneratedInDiff;
use crate::battery::select::catalog::Catalog;
use crate::battery::select::diffscope::DiffLines;
use crate::battery::{self, BatteryError, Options};
use crate::system::exit::ExitCode;
use crate::system::progress::Progress;

use super::{CARGO_MUTANTS_VERSION, ToolOptions};

/// How the generated battery runs: the catalog made (not read back), its options, the
/// progress. The caller's run step (`crate::door::Door::run_made`), so that it is
/// preflighted and run as every other battery.
pub type RunMade<'a> =
    dyn Fn(Catalog, &Options, &Progress) -> Result<battery::RunResult, BatteryError> + 'a;

/// Lists cargo-mutants' mutants of `base`'s package inside `diff` (written to
/// `dir/since.diff`) and runs them, as the catalog `<base>-generated`, through
/// `run_made` in switch mode with `base`'s tests. Returns the result and the files
/// written.
///
/// Errors: [`BatteryError::Generated`] when cargo-mutants cannot list them or the generated
/// catalog cannot be written or used; the generated battery's own errors.
pub fn run(
    base: &Catalog,
    diff: &DiffLines,
    opts: &Options,
    reports_root: &Path,
    dir: &Path,
    progress: &Progress,
    run_made: &RunMade<'_>,
) -> Result<(GeneratedInDiff, Vec<PathBuf>), BatteryError> {
    let patch = dir.join("since.diff");
    std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&patch, &diff.patch))
        .map_err(|source| BatteryError::Reports {
            path: patch.clone(),
            source,
        })?;
    let mut written = vec![patch.clone()];
    let mut out = GeneratedInDiff {
        cargo_mutants_version: CARGO_MUTANTS_VERSION.to_string(),
        patch: patch.clone(),
        listed: 0,
        skipped: Vec::new(),
        battery: None,
        status: None,
        refusal: None,
        caught: 0,
        missed: 0,
        timeout: 0,
        unviable: 0,
        crashed: 0,
        tests_missing: 0,
        mutants: Vec::new(),
        exit_code: ExitCode::AllMet,
    };
    let tool_dir = base
        .root
        .join("target")
        .join("harness")
        .join("cargo-mutants-in-diff");
    let listed = if diff.patch.is_empty() {
        Vec::new()
    } else {
        super::list_tool(&ToolOptions {
            workspace: base.root.clone(),
            output: tool_dir.clone(),
            packages: vec![base.spec.package.clone()],
            files: Vec::new(),
            in_diff: Some(patch.clone()),
            test_targets: Vec::new(),
            timeout: None,
            jobs: 1,
            state_dir: Some(opts.state_dir.clone()),
        })
        .map_err(|e| BatteryError::Generated(e.to_string()))?
    };
    out.listed = listed.len();
    progress.line(&format!(
        "--mutants: cargo-mutants lists {} mutant(s) inside the diff",
        listed.len()
    ));
    if listed.is_empty() {
        return Ok((out, written));
    }
    let (spec, skipped) = super::generated_catalog(base, &listed);
    out.skipped = skipped;
    if spec.mutations.is_empty() {
        return Ok((out, written));
    }
    let name = spec.name.clone().unwrap_or_default();
    let path = tool_dir.join(format!("{name}.toml"));
    let text = toml::to_string(&spec)
        .map_err(|e| BatteryError::Generated(format!("cannot write the generated catalog: {e}")))?;
    std::fs::create_dir_all(&tool_dir)
        .and_then(|_| std::fs::write(&path, &text))
        .map_err(|e| BatteryError::Generated(format!("{}: {e}", path.display())))?;
    let catalog = Catalog::from_text(&path, &text)
        .map_err(|e| BatteryError::Generated(format!("the generated catalog: {e}")))?;
    let sub = Options {
        reports_root: Some(reports_root.to_path_buf()),
        only: None,
        shard: None,
        since: None,
        incremental: false,
        recheck: 0,
        diff_scope: battery::DiffScope::default(),
        generated: true,
        ..opts.clone()
    };
    progress.line(&format!("battery {} (switch mode)", path.display()));
    let run = run_made(catalog, &sub, progress)?;
    written.extend(run.written.iter().cloned());
    out.battery = Some(name.clone());
    out.status = Some(run.report.status);
    out.refusal = run.report.refusal.clone();
    let code = run.report.exit_code;
    if code.stops() {
        out.exit_code = code;
        return Ok((out, written));
    }
    let r = super::from_battery(&[&run.report], &listed, CARGO_MUTANTS_VERSION, &[]);
    let mdir = reports_root.join(&name);
    written.extend(
        super::write_reports(&mdir, &r, &run.report.catalog.workspace).map_err(|source| {
            BatteryError::Reports {
                path: mdir.clone(),
                source,
            }
        })?,
    );
    out.caught = r.caught;
    out.missed = r.missed;
    out.timeout = r.timeout;
    out.unviable = r.unviable;
    out.crashed = r.crashed;
    out.tests_missing = r.tests_missing;
    out.mutants = r.mutants;
    out.exit_code = if out.missed > 0 {
        ExitCode::Weak
    } else {
        ExitCode::AllMet
    };
    Ok((out, written))
}
