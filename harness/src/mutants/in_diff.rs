//! `--since REV --mutants`: cargo-mutants' generated mutants inside the `--since` diff, run
//! through the harness's switch runner and reported in their own terms.
//!
//! The diff cargo-mutants sees (`--in-diff`) is the `--since` diff itself, written from git2
//! as a unified patch (`<reports>/<catalog>/since.diff`), so the catalog's mutations and the
//! generated mutants are chosen by the same changed lines. The generated mutants become the
//! catalog `<catalog>-generated` (the battery's package, targets and listed tests; see
//! [`super::generated_catalog`]), which runs in switch mode after the battery; its reports
//! go to `<reports>/<catalog>-generated/`, with `mutants.json` and `mutants.md` beside them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::battery::catalog::Catalog;
use crate::battery::diffscope::DiffLines;
use crate::battery::report::{RefusalInfo, Status};
use crate::battery::{self, BatteryError, Mode, Options};
use crate::system::exit::ExitCode;
use crate::system::progress::Progress;

use super::{CARGO_MUTANTS_VERSION, GeneratedMutant, ToolOptions};

/// The generated mutants inside the diff (`battery.json`'s `generated_in_diff`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratedInDiff {
    /// The cargo-mutants version that listed them.
    pub cargo_mutants_version: String,
    /// The patch given to cargo-mutants' `--in-diff`: the `--since` diff, written from git2.
    pub patch: PathBuf,
    /// How many mutants cargo-mutants listed inside the diff (`--list --in-diff`).
    pub listed: usize,
    /// Listed mutants that could not be expressed as catalog mutations, with why.
    pub skipped: Vec<String>,
    /// The generated battery's name (its reports are in `<reports>/<name>/`); null when
    /// nothing was listed and nothing ran.
    pub battery: Option<String>,
    /// The generated battery's status (`complete`, `refused`, `interrupted`); null when
    /// nothing ran.
    pub status: Option<Status>,
    /// Why the generated battery refused.
    pub refusal: Option<RefusalInfo>,
    /// Caught: some listed test failed (the failing tests are each mutant's `killed_by`).
    pub caught: usize,
    /// Missed: every listed test passed. Any makes the battery weak (exit 1).
    pub missed: usize,
    /// The tests ran over the timeout.
    pub timeout: usize,
    /// The mutant did not compile.
    pub unviable: usize,
    /// A test binary died and no test failed.
    pub crashed: usize,
    /// Some listed test does not exist under the mutant.
    pub tests_missing: usize,
    /// Every mutant that ran, in cargo-mutants' order.
    pub mutants: Vec<GeneratedMutant>,
    /// 0 (none missed), 1 (some missed), 2 (the generated battery refused), 130
    /// (interrupted).
    pub exit_code: ExitCode,
}

/// Lists cargo-mutants' mutants of `base`'s package inside `diff` (written to
/// `dir/since.diff`) and runs them through the switch runner with `base`'s tests.
/// Returns the result and the files written.
///
/// Errors: [`BatteryError::Generated`] when cargo-mutants cannot list them or the generated
/// catalog cannot be written; the generated battery's own errors.
pub fn run(
    base: &Catalog,
    diff: &DiffLines,
    opts: &Options,
    reports_root: &Path,
    dir: &Path,
    progress: &Progress,
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
        .and_then(|_| std::fs::write(&path, text))
        .map_err(|e| BatteryError::Generated(format!("{}: {e}", path.display())))?;
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
    let run = battery::run_mode(&path, &sub, progress, Mode::Switch)?;
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
        super::write_reports(&mdir, &r).map_err(|source| BatteryError::Reports {
            path: mdir.clone(),
            source,
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
