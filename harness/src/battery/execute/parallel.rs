//! Switch mode's test runs of several mutants at once (`-j N`), each in its own private
//! temporary directory, their results taken in catalog order.
//!
//! A switched mutant needs no build of its own: its test run differs from another's only by
//! the switch variable in its environment. Up to N such runs go at once (one thread each,
//! [`std::thread::scope`], results on a channel). Each run gets its own environment (the
//! switch variable, and `TMPDIR`, `TMP`, `TEMP` and `TEMPDIR` naming a directory of its own
//! under `<state>/tmp/`, removed when the run ends) and its own timeout, measured from its own
//! start by the one child runner ([`crate::system::runner`]), which kills its process group.
//!
//! What the runs share is the scratch copy they run in. A run that leaves a file there (a
//! failing proptest writes `proptest-regressions/`) could be read by another run going on at
//! the same time, and could not be told apart from the other's files. So after each run the
//! scratch copy is listed: no new file means no run left anything another could have read;
//! a new file while no other run is going on is this run's own (removed and reported, as
//! with `-j 1`); a new file while others run makes this run and every run still going on
//! suspect. Then no new run starts; once the last one has ended the new files are removed
//! and the suspect mutants run again one at a time, exactly as `-j 1` runs them. Their first
//! results are dropped. So the verdicts and reports equal those of `-j 1`, timings aside.
//! A file a run creates and removes again while another run goes on is not seen.
//!
//! A harness killed meanwhile leaves the temporary directories behind; the next harness
//! command removes those of dead runs ([`recover_temp_dirs`]), as it kills their process
//! groups and restores their files.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::battery::execute::scratch::list_tree;
use crate::battery::execute::workspace;
use crate::battery::tree::TreeScan;
use crate::cargo::{CargoCmd, TestRun};
use crate::system::process::ProcessId;

use crate::battery::execute::stop::{Stop, refuse};

use crate::battery::report::refusal::RefusalKind;

/// The environment variables that name the temporary directory: `TMPDIR` (POSIX, Rust's
/// [`std::env::temp_dir`]) and the names other runtimes and tools read.
pub const TEMP_VARS: [&str; 4] = ["TMPDIR", "TMP", "TEMP", "TEMPDIR"];

/// One test run to do: the command (the mutant selected by its environment) and its timeout.
#[derive(Debug, Clone)]
pub struct Job {
    /// The `cargo test` invocation of the mutant.
    pub cmd: CargoCmd,
    /// The mutant's timeout.
    pub timeout: Duration,
    /// The listed tests it runs when fewer than all (reach-guided selection); `None`: all.
    pub tests: Option<Vec<String>>,
}

/// One finished run, as the run's judge takes it.
#[derive(Debug)]
pub struct Done {
    /// The test run.
    pub run: TestRun,
    /// The files it left in the tree (relative paths), removed.
    pub created: Vec<PathBuf>,
    /// Seconds the harness spent around the run (its temporary directory, listing the tree,
    /// removing what it created).
    pub overhead: f64,
}

/// The directory under `state` holding this process's private temporary directories:
/// `<state>/tmp/<pid>-<start ticks>` (the start time tells a reused pid apart).
fn owner_dir(state: &Path) -> PathBuf {
    let me = ProcessId::current();
    let ticks = me
        .start_ticks
        .map_or_else(|| "unknown".to_string(), |t| t.to_string());
    state.join("tmp").join(format!("{}-{ticks}", me.pid))
}

/// Removes the temporary directories under `<state>/tmp/` of harness processes that are no
/// longer alive (killed while their test runs went on). Returns each removed directory, or
/// the error that kept it.
pub fn recover_temp_dirs(state: &Path) -> Vec<(PathBuf, std::io::Result<()>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(state.join("tmp")) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some((pid, ticks)) = name.split_once('-') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let owner = ProcessId {
            pid,
            start_ticks: ticks.parse().ok(),
        };
        if owner.is_alive() {
            continue;
        }
        let res = remove_dir(&dir);
        out.push((dir, res));
    }
    out
}

/// Removes `dir` and everything in it, first giving its owner back the permissions a test
/// may have taken away from a folder inside it.
fn remove_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(m) = std::fs::symlink_metadata(&d)
            && m.is_dir()
        {
            let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    std::fs::remove_dir_all(dir)
}

/// The number of the next private temporary directory of this process: each run's has a
/// name no other run of the process had.
static NEXT_TEMP: AtomicUsize = AtomicUsize::new(1);

/// The private temporary directories of one block of runs (see [`run_block`]), or of one
/// run ([`run_alone`]). Several may live at once in one process (the two baseline runs of
/// `-j 2` go together): each removes only the directories it made.
struct Temps {
    root: PathBuf,
    made: Vec<PathBuf>,
}

impl Temps {
    fn new(state: &Path) -> Temps {
        Temps {
            root: owner_dir(state),
            made: Vec::new(),
        }
    }

    /// A new, empty directory for one run.
    fn make(&mut self) -> Result<PathBuf, Stop> {
        let k = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.join(k.to_string());
        // Another block's drop may remove the (then empty) parents while they are made
        // (`dir`'s parent gone: not found; a parent found existing, then gone: exists):
        // make them again, a few times.
        let mut made = std::fs::create_dir_all(&dir);
        for _ in 0..16 {
            match &made {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::AlreadyExists
                    ) && !dir.is_dir() =>
                {
                    made = std::fs::create_dir_all(&dir);
                }
                _ => break,
            }
        }
        made.map_err(|e| {
            refuse(
                RefusalKind::HarnessFault,
                format!(
                    "{}: cannot create a test run's temporary directory: {e}",
                    dir.display()
                ),
            )
        })?;
        self.made.push(dir.clone());
        Ok(dir)
    }

    fn remove(&self, dir: &Path) -> Result<(), Stop> {
        remove_dir(dir).map_err(|e| {
            refuse(
                RefusalKind::HarnessFault,
                format!(
                    "{}: cannot remove a test run's temporary directory: {e}",
                    dir.display()
                ),
            )
        })
    }
}

impl Drop for Temps {
    fn drop(&mut self) {
        for d in &self.made {
            let _ = remove_dir(d);
        }
        // Each only when empty: another block of this process, or another harness process,
        // may keep its directories there.
        let _ = std::fs::remove_dir(&self.root);
        if let Some(parent) = self.root.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// Runs `cmd`'s listed `tests` once with a private temporary directory of its own
/// ([`TEMP_VARS`], under `<state>/tmp/`, removed afterwards): switch mode's control runs and
/// rebuild fallbacks, so that every test run of a switch battery starts from an empty
/// temporary directory, as the concurrent ones do.
pub(crate) fn run_alone(
    state: &Path,
    cmd: CargoCmd,
    tests: &[String],
    timeout: Duration,
) -> Result<TestRun, Stop> {
    let mut temps = Temps::new(state);
    let tmp = temps.make()?;
    let mut cmd = cmd;
    for v in TEMP_VARS {
        cmd = cmd.with_env(v, &tmp.to_string_lossy());
    }
    let res = cmd.run(tests, Some(timeout)).map_err(Stop::from);
    let removed = temps.remove(&tmp);
    res.and_then(|r| removed.map(|()| r))
}

/// Runs each of `runs` (a command and the listed tests it runs) once, up to `jobs` at once,
/// each with a private temporary directory of its own (as [`run_alone`] gives one run), and
/// returns their results in the order of `runs`. Stops starting runs once a signal asked
/// the harness to stop (those runs give [`Stop::Interrupted`]).
pub(crate) fn run_each(
    state: &Path,
    jobs: usize,
    timeout: Duration,
    runs: &[(CargoCmd, Vec<String>)],
) -> Vec<Result<TestRun, Stop>> {
    // One set of temporary directories for all threads: its drop removes them all, so it
    // must outlive every run.
    let temps = std::sync::Mutex::new(Temps::new(state));
    let next = AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<TestRun, Stop>>>> =
        std::sync::Mutex::new((0..runs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1).min(runs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some((cmd, tests)) = runs.get(k) else {
                        break;
                    };
                    let res = if crate::system::interrupt::requested() {
                        Err(Stop::Interrupted)
                    } else {
                        let made = temps.lock().expect("no panic holds it").make();
                        made.and_then(|tmp| {
                            let mut cmd = cmd.clone();
                            for v in TEMP_VARS {
                                cmd = cmd.with_env(v, &tmp.to_string_lossy());
                            }
                            let res = cmd.run(tests, Some(timeout)).map_err(Stop::from);
                            let removed = temps.lock().expect("no panic holds it").remove(&tmp);
                            res.and_then(|r| removed.map(|()| r))
                        })
                    };
                    results.lock().expect("no panic holds it")[k] = Some(res);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no panic holds it")
        .into_iter()
        .map(|r| r.unwrap_or(Err(Stop::Interrupted)))
        .collect()
}

/// Where one item of a block stands.
enum Slot {
    /// Not started (or to run again).
    Waiting,
    /// Its run goes on.
    Running,
    /// Finished, not yet given to the judge.
    Finished(Option<Done>),
    /// Given to the judge.
    Taken,
}

/// What `run_block` did besides the results.
#[derive(Debug, Default)]
pub struct BlockStats {
    /// Items (indices into the block) whose first run was dropped because a file appeared
    /// in the tree while other runs went on: they ran again one at a time.
    pub ran_again_alone: Vec<usize>,
}

/// The judge of a block's items: called with an item's index and its result, in item order.
type Take<'t> = dyn FnMut(usize, Option<Done>) -> Result<(), Stop> + 't;

/// A run that ended: its item and its result.
type Ended = (usize, Result<TestRun, Stop>);

/// Runs the test runs of `items` (in order; `None`: nothing to run, the judge is given
/// `None`), up to `jobs` at once, in the tree at `root` that only this battery writes, each
/// with its own temporary directory under `<state>/tmp/` ([`TEMP_VARS`]). `take` is called
/// once per item, in item order, with the item's index and its result, as soon as it and
/// every item before it have finished. The first error (a run's, the judge's, a listing's,
/// an interruption) stops new runs from starting; the runs going on end (an interruption
/// stops them at once, anything else lets them run to their end or timeout), the files they
/// created are removed, and the error is returned after the items before the failing one
/// have been taken.
pub(crate) fn run_block(
    root: &Path,
    state: &Path,
    jobs: usize,
    tests: &[String],
    items: Vec<Option<Job>>,
    take: &mut Take<'_>,
) -> Result<BlockStats, Stop> {
    let mut block = Block::new(root, state, jobs, tests, items)?;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Ended>();
        loop {
            block.hand_over(take);
            if crate::system::interrupt::requested() {
                block.note(block.next_take, Stop::Interrupted);
            }
            block.start_runs(scope, &tx);
            if block.running.is_empty() {
                break;
            }
            let ended = rx.recv().expect("a running item's thread sends its result");
            block.ended(ended);
            block.settle_when_quiet();
        }
    });
    block.finish(take)
}

/// One block of runs while it goes on (see [`run_block`]): where each item stands, which
/// runs go on, which are suspect, and the first error.
struct Block<'b> {
    root: &'b Path,
    /// How many runs may go on at once.
    jobs: usize,
    /// The listed tests (a job's own selection aside).
    tests: &'b [String],
    items: Vec<Option<Job>>,
    temps: Temps,
    slots: Vec<Slot>,
    /// Items not started yet, in order.
    queue: VecDeque<usize>,
    /// Suspect items to run again, one at a time.
    alone: VecDeque<usize>,
    stats: BlockStats,
    /// The tree's listing with nothing any run left in it.
    base: TreeScan,
    /// Each running item's temporary directory and the seconds spent starting it.
    running: BTreeMap<usize, (PathBuf, f64)>,
    /// Set when a file appeared while other runs went on: no run starts until the last one
    /// has ended; every run that ends meanwhile is suspect.
    draining: bool,
    suspect: BTreeSet<usize>,
    /// The first error in item order, and the item it belongs to.
    stop: Option<(usize, Stop)>,
    /// The next item to give the judge.
    next_take: usize,
}

impl<'b> Block<'b> {
    /// A block of `items` in the tree at `root`, nothing started. Errors: the tree cannot
    /// be listed.
    fn new(
        root: &'b Path,
        state: &Path,
        jobs: usize,
        tests: &'b [String],
        items: Vec<Option<Job>>,
    ) -> Result<Block<'b>, Stop> {
        let slots = items
            .iter()
            .map(|j| match j {
                Some(_) => Slot::Waiting,
                None => Slot::Finished(None),
            })
            .collect();
        let queue = (0..items.len()).filter(|&i| items[i].is_some()).collect();
        Ok(Block {
            root,
            jobs: jobs.max(1),
            tests,
            items,
            temps: Temps::new(state),
            slots,
            queue,
            alone: VecDeque::new(),
            stats: BlockStats::default(),
            base: list_tree(root)?,
            running: BTreeMap::new(),
            draining: false,
            suspect: BTreeSet::new(),
            stop: None,
            next_take: 0,
        })
    }

    /// Keeps the first error in item order: the one `-j 1` would have met first.
    fn note(&mut self, at: usize, e: Stop) {
        if self.stop.as_ref().is_none_or(|(first, _)| at < *first) {
            self.stop = Some((at, e));
        }
    }

    /// Gives the judge every finished item in order, up to the first that has not finished
    /// (none after an error).
    fn hand_over(&mut self, take: &mut Take<'_>) {
        while self.stop.is_none() && self.next_take < self.items.len() {
            let k = self.next_take;
            if !matches!(self.slots[k], Slot::Finished(_)) {
                break;
            }
            let Slot::Finished(done) = std::mem::replace(&mut self.slots[k], Slot::Taken) else {
                unreachable!("checked above");
            };
            match take(k, done) {
                Ok(()) => self.next_take += 1,
                Err(e) => self.note(k, e),
            }
        }
    }

    /// Starts runs up to the limit (`jobs`, or one while suspects run again), unless an
    /// error or a file that appeared meanwhile holds them back.
    fn start_runs<'s>(&mut self, scope: &'s std::thread::Scope<'s, '_>, tx: &mpsc::Sender<Ended>)
    where
        'b: 's,
    {
        if self.stop.is_some() || self.draining {
            return;
        }
        loop {
            let limit = if self.alone.is_empty() { self.jobs } else { 1 };
            if self.running.len() >= limit {
                break;
            }
            let Some(i) = self.alone.pop_front().or_else(|| self.queue.pop_front()) else {
                break;
            };
            let t0 = Instant::now();
            let tmp = match self.temps.make() {
                Ok(d) => d,
                Err(e) => {
                    self.note(i, e);
                    break;
                }
            };
            let job = self.items[i].as_ref().expect("queued items have a job");
            let mut cmd = job.cmd.clone();
            for v in TEMP_VARS {
                cmd = cmd.with_env(v, &tmp.to_string_lossy());
            }
            let (tests, timeout) = (job.tests.clone(), job.timeout);
            let prep = t0.elapsed().as_secs_f64();
            spawn_run(scope, tx.clone(), i, cmd, tests, self.tests, timeout);
            self.slots[i] = Slot::Running;
            self.running.insert(i, (tmp, prep));
        }
    }

    /// Takes in one run that ended: its temporary directory removed and the tree listed, it
    /// finished (what it left removed when it ran alone), or it is suspect (a file appeared
    /// while others ran) and waits to run again, or its error is noted.
    fn ended(&mut self, (i, res): Ended) {
        let (tmp, prep) = self.running.remove(&i).expect("it was running");
        let t1 = Instant::now();
        let removed = self.temps.remove(&tmp);
        let res = res.and_then(|run| removed.map(|()| run));
        let (run, after) = match res.and_then(|run| Ok((run, list_tree(self.root)?))) {
            Ok(x) => x,
            Err(e) => return self.fail(i, e),
        };
        if self.draining || (!new_files(&self.base, &after).is_empty() && !self.running.is_empty())
        {
            // Suspect: another run may have read what this one left, or this one what
            // another left.
            self.draining = true;
            self.suspect.insert(i);
            self.slots[i] = Slot::Waiting;
            return;
        }
        let mut created = Vec::new();
        if self.running.is_empty() {
            // Alone: whatever is new is this run's own.
            match self.remove_own(&after) {
                Ok(files) => created = files,
                Err(e) => return self.fail(i, e),
            }
        }
        self.slots[i] = Slot::Finished(Some(Done {
            run,
            created,
            overhead: prep + t1.elapsed().as_secs_f64(),
        }));
    }

    /// Item `i` ends with error `e`: noted, and nothing of it goes to the judge.
    fn fail(&mut self, i: usize, e: Stop) {
        self.note(i, e);
        self.slots[i] = Slot::Taken;
    }

    /// Removes the files new since [`Block::base`] (a run that ran alone left them); the
    /// tree's listing after that is the new base. Returns the removed files.
    fn remove_own(&mut self, after: &TreeScan) -> Result<Vec<PathBuf>, Stop> {
        let files = workspace::remove_created(self.root, &self.base, after)?;
        if !files.is_empty() {
            self.base = list_tree(self.root)?;
        }
        Ok(files)
    }

    /// Once nothing runs after a file appeared (or an error): removes what the runs left
    /// and queues the suspects to run again, one at a time.
    fn settle_when_quiet(&mut self) {
        if !self.running.is_empty() || !(self.draining || self.stop.is_some()) {
            return;
        }
        let settled = list_tree(self.root)
            .map_err(Stop::from)
            .and_then(|after| Ok(workspace::remove_created(self.root, &self.base, &after)?))
            .and_then(|_| Ok(list_tree(self.root)?));
        match settled {
            Ok(b) => self.base = b,
            Err(e) => self.note(self.items.len(), e),
        }
        self.draining = false;
        for s in std::mem::take(&mut self.suspect) {
            self.stats.ran_again_alone.push(s);
            self.alone.push_back(s);
        }
    }

    /// After the last run: the error, once the items before the failing one that finished
    /// have been given to the judge; else what the block did.
    fn finish(mut self, take: &mut Take<'_>) -> Result<BlockStats, Stop> {
        if let Some((at, e)) = self.stop.take() {
            while self.next_take < at.min(self.items.len()) {
                let k = self.next_take;
                match std::mem::replace(&mut self.slots[k], Slot::Taken) {
                    Slot::Finished(done) => take(k, done)?,
                    _ => break,
                }
                self.next_take += 1;
            }
            return Err(e);
        }
        let mut stats = std::mem::take(&mut self.stats);
        stats.ran_again_alone.sort_unstable();
        stats.ran_again_alone.dedup();
        Ok(stats)
    }
}

/// Runs item `i`'s `cmd` (its `tests`, else the block's `listed` tests) with `timeout` in a
/// thread of `scope`, which sends the result on `tx`. The runner waits for its child in that
/// thread, which ends only after the child (its parent-death signal is tied to the thread)
/// has exited.
fn spawn_run<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    tx: mpsc::Sender<Ended>,
    i: usize,
    cmd: CargoCmd,
    tests: Option<Vec<String>>,
    listed: &'s [String],
    timeout: Duration,
) {
    scope.spawn(move || {
        // A panic in the thread must still send a result: the loop waits for one per
        // running item.
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cmd.run(tests.as_deref().unwrap_or(listed), Some(timeout))
                .map_err(Stop::from)
        }))
        .unwrap_or_else(|_| {
            Err(refuse(
                RefusalKind::HarnessFault,
                "a test run's thread panicked".to_string(),
            ))
        });
        let _ = tx.send((i, res));
    });
}

/// The files of `after` that `before` does not hold.
fn new_files(before: &TreeScan, after: &TreeScan) -> Vec<PathBuf> {
    after
        .files
        .keys()
        .filter(|p| !before.files.contains_key(*p))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocks_end_leaves_the_temporary_directories_of_another_going_on() {
        let state = tempfile::tempdir().unwrap();
        let (mut a, mut b) = (Temps::new(state.path()), Temps::new(state.path()));
        let da = a.make().ok().unwrap();
        let db = b.make().ok().unwrap();
        std::fs::write(db.join("rust_out"), "a doc test's executable").unwrap();
        drop(a);
        assert!(!da.exists());
        assert!(
            db.join("rust_out").is_file(),
            "the other run's directory is gone"
        );
        drop(b);
        assert!(!db.exists());
        assert!(!owner_dir(state.path()).exists());
    }

    /// Two blocks that start and end at once (the two baseline runs of `-j 2`): one's end
    /// removes the empty parents while the other makes its directory in them. Each must
    /// still get its directory.
    #[test]
    fn blocks_starting_while_another_ends_each_get_their_directory() {
        let state = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..1500 {
                        let mut t = Temps::new(state.path());
                        if let Err(e) = t.make() {
                            panic!("{e:?}");
                        }
                    }
                });
            }
        });
        assert!(!owner_dir(state.path()).exists());
    }
}
