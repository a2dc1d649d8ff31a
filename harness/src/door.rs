//! The one front door of a battery run: `battery`, `gate` and `mutants --via-harness` plan, preflight, lock and run through it.
//!
//! A command turns its arguments into a [`Request`] and calls [`Door::open`], which takes
//! the same four steps for every command, in this order:
//!
//! 1. **plan**: each catalog file is read and parsed once ([`Catalog::load`]); the shard's
//!    `--timings` are read; the loaded catalogs are the guards of `--since` (so no step
//!    after reads a catalog file again);
//! 2. **preflight**: each catalog passes [`battery::preflight`] (`-j N` and the mode, the
//!    state directory outside the workspace, `--only`, the target directory);
//! 3. **lock**: the host lock is taken ([`take_lock`]; under an ancestor's hold, the command
//!    runs under it); held by someone else, the batteries the plan names get their LOCKED
//!    reports;
//! 4. **run**: the command runs each planned battery with [`Door::run`] (the battery, then
//!    `--since --mutants`' generated mutants, then the reports), and each battery it makes
//!    under the lock (`mutants --via-harness`' generated catalogs) with
//!    [`Door::run_made`], which gives it the same preflight first.
//!
//! A refusal of steps 1 to 3 is printed here, one way for every command, and the command
//! returns its exit code: what a command adds is only what it does around the batteries
//! (the gate's test command and audit, cargo-mutants' listing and the join of its
//! mutants). nextest's `dispatch` (one base app every command builds on) is the model.

use std::path::{Path, PathBuf};

use crate::battery::select::catalog::{Catalog, CatalogError};
use crate::battery::select::shard::Shard;
use crate::battery::{self, BatteryError, Checked, Mode, Options, RunResult};
use crate::system::exit::ExitCode;
use crate::system::lock::{self, Hold, LockRecord, Nesting};
use crate::system::progress::Progress;

/// How a command takes the host lock (`--wait`, `--ttl`, `--owner`).
#[derive(Debug, Clone, Default)]
pub struct LockRequest {
    /// Wait for the lock instead of refusing with LOCKED.
    pub wait: bool,
    /// Expected maximum hold, in seconds (reported when exceeded).
    pub ttl: Option<u64>,
    /// Owner name recorded in the lock (`None`: `$USER`).
    pub owner: Option<String>,
}

/// What the catalogs of a [`Request`] are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The batteries that run (`battery`, `gate`): each gets a LOCKED report when the lock
    /// is held by someone else.
    Batteries,
    /// The base of batteries made under the lock (`mutants --via-harness`: the first
    /// catalog's package, targets and tests; the others' named mutations): none of them
    /// runs, so none gets a LOCKED report.
    Base,
}

/// What a command asks of the door.
#[derive(Debug, Clone)]
pub struct Request {
    /// The catalog files, in command-line order (at least one).
    pub catalogs: Vec<PathBuf>,
    /// What the catalogs are.
    pub role: Role,
    /// The batteries' options; `lock` and `diff_scope.guards` are filled in by the door,
    /// and a `shard` is dealt in catalog order unless `timings` balances it.
    pub options: Options,
    /// `--timings`: the earlier `battery.json` whose per-mutation seconds balance the shard.
    pub timings: Option<PathBuf>,
    /// The batteries' mode.
    pub mode: Mode,
    /// How the host lock is taken.
    pub lock: LockRequest,
}

/// An open door: the plan, preflighted, with the host lock held until it is dropped.
#[derive(Debug)]
pub struct Door {
    checked: Vec<Checked>,
    options: Options,
    mode: Mode,
    _hold: Hold,
}

/// Why the host lock was not taken: the exit code and, for LOCKED, the message (already
/// printed).
#[derive(Debug)]
pub struct LockFailure {
    /// 2, or 130 when interrupted while waiting.
    pub code: ExitCode,
    /// The LOCKED message, when someone else holds the lock.
    pub locked: Option<String>,
}

/// The line a catalog that cannot be used prints after `harness: `: `CATALOG-DRIFT: ...`
/// when it no longer matches the tree, else `bad catalog: ...`.
pub fn catalog_message(e: &CatalogError) -> String {
    if e.is_drift() {
        format!("CATALOG-DRIFT: {e}")
    } else {
        format!("bad catalog: {e}")
    }
}

/// The line a battery error prints after `harness: ` (a catalog's as
/// [`catalog_message`]).
pub fn error_message(e: &BatteryError) -> String {
    match e {
        BatteryError::Catalog(c) => catalog_message(c),
        e => e.to_string(),
    }
}

/// Takes the host lock in `state` for this process, as every command but `lock run` does:
/// under an ancestor's hold it runs under it (and says so on standard error). Returns the
/// hold and how it is held for the reports (`own`, `ancestor pid N`).
///
/// Errors: LOCKED (someone else holds it and `wait` is off), an unusable lock file, or an
/// interruption while waiting; the message is printed on standard error.
pub fn take_lock(state: &Path, req: &LockRequest) -> Result<(Hold, String), LockFailure> {
    let owner = req
        .owner
        .clone()
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "unknown".into()));
    let record = LockRecord::for_current(&owner, std::env::args().collect(), req.ttl);
    let hold = match lock::acquire(state, record, Nesting::RunUnder, req.wait, &mut |h| {
        eprintln!(
            "harness: waiting for the host lock held by {}",
            h.describe()
        )
    }) {
        Ok(h) => h,
        Err(lock::LockError::Interrupted(_)) => {
            return Err(LockFailure {
                code: ExitCode::Interrupted,
                locked: None,
            });
        }
        Err(e) => {
            eprintln!("harness: {e}");
            let locked = matches!(e, lock::LockError::Held { .. }).then(|| e.to_string());
            return Err(LockFailure {
                code: ExitCode::Refused,
                locked,
            });
        }
    };
    let note = match &hold {
        Hold::Own { .. } => "own".to_string(),
        Hold::Ancestor(r) => {
            eprintln!(
                "harness: running under the host lock held by ancestor {}",
                r.describe()
            );
            format!("ancestor pid {}", r.holder.pid)
        }
    };
    Ok((hold, note))
}

/// Step 1: the catalogs loaded once, the shard balanced, the guards set.
fn plan(req: &Request) -> Result<(Vec<Catalog>, Options), BatteryError> {
    let mut catalogs = Vec::with_capacity(req.catalogs.len());
    for path in &req.catalogs {
        catalogs.push(Catalog::load(path)?);
    }
    let mut options = req.options.clone();
    if let (Some(shard), Some(path)) = (&options.shard, &req.timings) {
        options.shard = Some(Shard::with_timings(shard.spec, path)?);
    }
    options.diff_scope.guards = catalogs.clone();
    Ok((catalogs, options))
}

impl Door {
    /// Plans, preflights and locks `req` (see the module's steps 1 to 3). A refusal is
    /// printed (LOCKED with the reports it wrote) and its exit code returned: 2, or 130
    /// when interrupted while waiting for the lock.
    pub fn open(req: &Request) -> Result<Door, ExitCode> {
        let refuse = |e: BatteryError| {
            eprintln!("harness: {}", error_message(&e));
            ExitCode::Refused
        };
        let (catalogs, options) = plan(req).map_err(refuse)?;
        let mut checked = Vec::with_capacity(catalogs.len());
        for c in catalogs {
            checked.push(battery::preflight(c, &options, req.mode).map_err(refuse)?);
        }
        let (hold, note) = match take_lock(&options.state_dir, &req.lock) {
            Ok(x) => x,
            Err(LockFailure {
                code,
                locked: Some(detail),
            }) if req.role == Role::Batteries => {
                write_locked(&checked, &options, &detail);
                return Err(code);
            }
            Err(f) => return Err(f.code),
        };
        Ok(Door {
            checked,
            options: Options {
                lock: note,
                ..options
            },
            mode: req.mode,
            _hold: hold,
        })
    }

    /// The planned catalogs, preflighted, in request order.
    pub fn planned(&self) -> &[Checked] {
        &self.checked
    }

    /// The batteries' options: the request's, with the lock held and the guards set.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The batteries' mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Step 4 for a planned battery: runs it ([`battery::run_unwritten`]); with `--since
    /// REV --mutants` and a complete battery, runs cargo-mutants' generated mutants inside
    /// the diff after it ([`crate::mutants::in_diff::run`], its battery through
    /// [`Door::run_made`]): the battery's report then holds them (`generated_in_diff`),
    /// its exit code is the worse of the two, and their files follow the battery's among
    /// the written ones. Then writes the reports and says a refusal on `progress`
    /// (`harness: KIND: detail`).
    ///
    /// Errors: the battery's and those of the generated mutants' step.
    pub fn run(&self, checked: &Checked, progress: &Progress) -> Result<RunResult, BatteryError> {
        let opts = &self.options;
        let mut ran = battery::run_unwritten(checked, opts, progress)?;
        let mut extra = Vec::new();
        if let Some(d) = &ran.diff
            && opts.diff_scope.mutants
            && ran.report.status == battery::report::schema::Status::Complete
        {
            let run_made =
                |c: Catalog, o: &Options, p: &Progress| self.run_made(c, o, Mode::Switch, p);
            let (generated, files) = crate::mutants::in_diff::run(
                &ran.catalog,
                d,
                opts,
                &ran.reports_root,
                &ran.dir,
                progress,
                &run_made,
            )?;
            ran.report.exit_code = ran.report.exit_code.worst(generated.exit_code);
            ran.report.generated_in_diff = Some(generated);
            extra = files;
        }
        let mut result = ran.write()?;
        result.written.extend(extra);
        say_refusal(&result, progress);
        Ok(result)
    }

    /// Step 4 for a battery the command made under the lock (a generated catalog, with
    /// options `opts` derived from [`Door::options`]): the preflight of step 2, then the
    /// run, its reports and its refusal said, as [`Door::run`].
    ///
    /// Errors: the preflight's and the battery's.
    pub fn run_made(
        &self,
        catalog: Catalog,
        opts: &Options,
        mode: Mode,
        progress: &Progress,
    ) -> Result<RunResult, BatteryError> {
        let checked = battery::preflight(catalog, opts, mode)?;
        let result = battery::run_unwritten(&checked, opts, progress)?.write()?;
        say_refusal(&result, progress);
        Ok(result)
    }
}

/// A battery's refusal, one line on `progress` (`harness: KIND: detail`), as every command
/// says it.
fn say_refusal(result: &RunResult, progress: &Progress) {
    if let Some(f) = &result.report.refusal {
        progress.line(&format!("{}: {}", f.kind, f.detail));
    }
}

/// The LOCKED report of each planned battery (nothing ran), its files listed on standard
/// output; a report that cannot be written is said on standard error.
fn write_locked(checked: &[Checked], options: &Options, detail: &str) {
    let opts = Options {
        lock: "not taken (held by someone else)".into(),
        ..options.clone()
    };
    for c in checked {
        match battery::write_locked(c, &opts, detail) {
            Ok(r) => {
                for w in &r.written {
                    println!("report: {}", w.display());
                }
            }
            Err(e) => eprintln!("harness: {}", error_message(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::DiffScope;
    use crate::battery::report::refusal::RefusalKind;
    use crate::battery::select::catalog::reads;

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_name() == "target" || e.file_name() == "reports" {
                continue;
            }
            let dst = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dst);
            } else {
                std::fs::copy(e.path(), &dst).unwrap();
            }
        }
    }

    /// Both sample catalogs planned, preflighted, locked and run with `--since HEAD
    /// --require-guarded` (each battery's guards are both catalogs): every step after the
    /// plan uses the catalogs it loaded, so each file is read once in the whole command.
    /// The batteries refuse CATALOG-DRIFT at their opening (a `find` text edited away),
    /// after the diff and the guards, before anything is built.
    #[test]
    fn a_battery_command_reads_each_catalog_once() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/workspaces/sample"),
            &ws,
        );
        let repo = git2::Repository::init(&ws).unwrap();
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("fixture", "fixture@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "fixture", &tree, &[])
            .unwrap();
        let lib = ws.join("src/lib.rs");
        let text = std::fs::read_to_string(&lib).unwrap();
        std::fs::write(&lib, text.replace("a + b", "b + a")).unwrap();
        let catalogs = vec![
            ws.join("mutations/sample.toml"),
            ws.join("mutations/parallel.toml"),
        ];
        let req = Request {
            catalogs: catalogs.clone(),
            role: Role::Batteries,
            options: Options {
                state_dir: dir.path().join("state"),
                reports_root: None,
                only: None,
                shard: None,
                lock: String::new(),
                since: Some("HEAD".into()),
                incremental: false,
                recheck: 0,
                jobs: 1,
                diff_scope: DiffScope {
                    guards: Vec::new(),
                    require_guarded: true,
                    mutants: false,
                },
                all_tests: false,
                generated: false,
                scratch_name: None,
                scratch_incremental: true,
            },
            timings: None,
            mode: Mode::Rebuild,
            lock: LockRequest::default(),
        };
        let door = Door::open(&req).unwrap();
        assert_eq!(door.options().lock, "own");
        assert_eq!(door.options().diff_scope.guards.len(), 2);
        for c in door.planned() {
            let r = door.run(c, &Progress::plain()).unwrap();
            let refusal = r.report.refusal.expect("refused");
            assert_eq!(
                refusal.kind,
                RefusalKind::CatalogDrift,
                "{}",
                refusal.detail
            );
            assert!(r.report.unguarded_in_diff.is_some());
        }
        drop(door);
        for p in &catalogs {
            assert_eq!(reads::of(p), 1, "{} read more than once", p.display());
        }
    }
}
