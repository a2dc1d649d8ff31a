//! The host lock: one per host (a directory, configurable), so that batteries and other
//! heavy jobs do not run over each other.
//!
//! The lock is an advisory `flock(2)` on `<dir>/host.lock`, so a dead holder never blocks:
//! the kernel drops the lock with the last file descriptor of its open file. That
//! descriptor is inherited by every process the holder starts (it is not close-on-exec), so
//! the lock stays held while any process that runs under it is alive: a `lock run` killed
//! while its command still runs does not free the lock for a second battery. The file also
//! holds a JSON record of the holder (pid and start time, owner, command, acquisition time,
//! TTL) for the messages. Nobody ever waits on an ancestor: when the holder is one of our
//! ancestors, `lock run` refuses at once naming it (waiting would hang forever), while any
//! other harness command runs under the ancestor's hold and says so.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::system::interrupt;
use crate::system::process::{ProcessId, ancestors};

/// Who holds (or last held) the host lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// Holding process.
    pub holder: ProcessId,
    /// Free-form owner name (`--owner`, default the user name).
    pub owner: String,
    /// The command the holder runs.
    pub command: Vec<String>,
    /// Acquisition time, seconds since the Unix epoch.
    pub acquired_unix: u64,
    /// Expected maximum hold, in seconds; a holder past it is reported (never evicted).
    pub ttl_secs: Option<u64>,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl LockRecord {
    /// A record for this process.
    pub fn for_current(owner: &str, command: Vec<String>, ttl_secs: Option<u64>) -> LockRecord {
        LockRecord {
            holder: ProcessId::current(),
            owner: owner.to_string(),
            command,
            acquired_unix: now_unix(),
            ttl_secs,
        }
    }

    /// Seconds the lock has been held.
    pub fn held_secs(&self) -> u64 {
        now_unix().saturating_sub(self.acquired_unix)
    }

    /// Seconds past the TTL, when over it.
    pub fn over_ttl_secs(&self) -> Option<u64> {
        let ttl = self.ttl_secs?;
        let held = self.held_secs();
        (held > ttl).then(|| held - ttl)
    }

    /// One-line description: pid, owner, command, age, TTL status, and whether the holder
    /// has exited (then processes it started hold the lock).
    pub fn describe(&self) -> String {
        let gone = if self.holder.pid != 0 && !self.holder.is_alive() {
            " (exited; processes it started still hold the lock)"
        } else {
            ""
        };
        let mut s = format!(
            "pid {}{gone} (owner {}, command `{}`, held for {}s",
            self.holder.pid,
            self.owner,
            self.command.join(" "),
            self.held_secs()
        );
        match (self.ttl_secs, self.over_ttl_secs()) {
            (Some(ttl), Some(over)) => s.push_str(&format!(", OVER its TTL of {ttl}s by {over}s")),
            (Some(ttl), None) => s.push_str(&format!(", TTL {ttl}s")),
            _ => {}
        }
        s.push(')');
        s
    }
}

/// Lock errors.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Held by another process and `--wait` was not given (LOCKED).
    #[error("LOCKED: the host lock {path} is held by {}{}", record.describe(), survivors(holders))]
    Held {
        /// Lock file.
        path: PathBuf,
        /// The holder.
        record: Box<LockRecord>,
        /// The processes holding the lock's descriptor now (empty when unknown).
        holders: Vec<u32>,
    },
    /// `lock run` under an ancestor that holds the lock: waiting would never end.
    #[error(
        "LOCKED: nested `lock run`: the host lock {path} is already held by this process's ancestor {}; run the command directly, it runs under that hold",
        record.describe()
    )]
    Nested {
        /// Lock file.
        path: PathBuf,
        /// The ancestor holder.
        record: LockRecord,
    },
    /// Filesystem failure.
    #[error("{path}: {op}: {source}")]
    Io {
        /// Path.
        path: PathBuf,
        /// Operation.
        op: &'static str,
        /// Cause.
        source: std::io::Error,
    },
    /// Interrupted while waiting.
    #[error(transparent)]
    Interrupted(#[from] interrupt::Interrupted),
}

/// What the LOCKED message adds when the recorded holder is gone: the processes it started
/// that hold the lock now.
fn survivors(holders: &[u32]) -> String {
    if holders.is_empty() {
        return String::new();
    }
    let pids: Vec<String> = holders.iter().map(u32::to_string).collect();
    format!("; held now by pid {}", pids.join(", "))
}

/// The processes of this user that hold an open descriptor of the lock file `path` (read
/// from `/proc/PID/fd`; empty where `/proc` is unavailable).
pub fn fd_holders(path: &Path) -> Vec<u32> {
    let Ok(want) = path.canonicalize() else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == want))
        {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// How a command relates to an ancestor's hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// `lock run`: an ancestor's hold is a mistake; refuse at once.
    Refuse,
    /// Any other command: run under the ancestor's hold.
    RunUnder,
}

/// A hold on the host lock. Dropping an own hold closes this process's descriptor: the lock
/// is free once no process started under it still holds the inherited one.
#[derive(Debug)]
pub enum Hold {
    /// This process holds the lock.
    Own {
        /// The locked file (its descriptor is inherited by the children).
        file: File,
        /// The record written.
        record: LockRecord,
    },
    /// An ancestor holds it; this process runs under that hold.
    Ancestor(LockRecord),
}

/// Lets the children started from now on inherit `file`'s descriptor (clears close-on-exec).
fn inheritable(file: &File) -> std::io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The default lock directory: `$TMPDIR/harness-<uid>` (one per host and user).
pub fn default_dir() -> PathBuf {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("harness-{uid}"))
}

fn lock_path(dir: &Path) -> PathBuf {
    dir.join("host.lock")
}

fn open(dir: &Path) -> Result<(File, PathBuf), LockError> {
    std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
        path: dir.to_path_buf(),
        op: "create lock directory",
        source,
    })?;
    let path = lock_path(dir);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| LockError::Io {
            path: path.clone(),
            op: "open lock file",
            source,
        })?;
    Ok((file, path))
}

fn try_flock(file: &File) -> bool {
    // SAFETY: flock on a descriptor we own.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// How long a caller that finds the lock taken keeps trying before it asks who holds it:
/// [`status`] probes by taking the lock for an instant, and without this grace a `lock
/// run` (or another `status`) starting during a probe took the prober for a holder and
/// refused, naming whatever record the file held.
const PROBE_GRACE: Duration = Duration::from_millis(100);

/// [`try_flock`], retried every few milliseconds for up to [`PROBE_GRACE`].
fn try_flock_past_probes(file: &File) -> bool {
    let start = Instant::now();
    loop {
        if try_flock(file) {
            return true;
        }
        if start.elapsed() >= PROBE_GRACE {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn read_record(path: &Path) -> Option<LockRecord> {
    let mut s = String::new();
    File::open(path).ok()?.read_to_string(&mut s).ok()?;
    serde_json::from_str(&s).ok()
}

/// Reads the holder's record, retrying briefly while a new holder is still writing it.
fn holder_record(path: &Path) -> LockRecord {
    for _ in 0..40 {
        if let Some(r) = read_record(path) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    LockRecord {
        holder: ProcessId {
            pid: 0,
            start_ticks: None,
        },
        owner: "unknown (no record in the lock file)".into(),
        command: Vec::new(),
        acquired_unix: now_unix(),
        ttl_secs: None,
    }
}

/// Takes the host lock in `dir` for `record`'s process. When held by an ancestor, behaves
/// as `nesting` says. When held by anyone else: fails with [`LockError::Held`] unless
/// `wait`, in which case `on_wait` is told who it waits on (once per holder) and it polls.
pub fn acquire(
    dir: &Path,
    record: LockRecord,
    nesting: Nesting,
    wait: bool,
    on_wait: &mut dyn FnMut(&LockRecord),
) -> Result<Hold, LockError> {
    let (mut file, path) = open(dir)?;
    let mut told: Option<ProcessId> = None;
    loop {
        if try_flock_past_probes(&file) {
            let json = serde_json::to_vec(&record).expect("record serializes");
            let io = |op| {
                let path = path.clone();
                move |source| LockError::Io { path, op, source }
            };
            file.set_len(0).map_err(io("truncate lock file"))?;
            file.seek(SeekFrom::Start(0))
                .map_err(io("seek lock file"))?;
            file.write_all(&json).map_err(io("write lock record"))?;
            file.sync_all().map_err(io("sync lock file"))?;
            inheritable(&file).map_err(io("let children inherit the lock"))?;
            return Ok(Hold::Own { file, record });
        }
        let holder = holder_record(&path);
        if ancestors().contains(&holder.holder) {
            return match nesting {
                Nesting::Refuse => Err(LockError::Nested {
                    path,
                    record: holder,
                }),
                Nesting::RunUnder => Ok(Hold::Ancestor(holder)),
            };
        }
        if !wait {
            let holders = if holder.holder.is_alive() {
                Vec::new()
            } else {
                fd_holders(&path)
            };
            return Err(LockError::Held {
                path,
                record: Box::new(holder),
                holders,
            });
        }
        if told != Some(holder.holder) {
            on_wait(&holder);
            told = Some(holder.holder);
        }
        if interrupt::requested() {
            return Err(interrupt::Interrupted.into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The lock's state: `Some(holder)` when held, `None` when free.
pub fn status(dir: &Path) -> Result<Option<LockRecord>, LockError> {
    let (file, path) = open(dir)?;
    if try_flock_past_probes(&file) {
        // SAFETY: releasing the probe lock on our own descriptor.
        unsafe {
            libc::flock(file.as_raw_fd(), libc::LOCK_UN);
        }
        return Ok(None);
    }
    Ok(Some(holder_record(&path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_reporting() {
        let mut r = LockRecord::for_current("me", vec!["x".into()], Some(10));
        r.acquired_unix = now_unix() - 25;
        assert_eq!(r.over_ttl_secs(), Some(15));
        assert!(
            r.describe().contains("OVER its TTL of 10s by 15s"),
            "{}",
            r.describe()
        );
        r.acquired_unix = now_unix();
        assert_eq!(r.over_ttl_secs(), None);
    }

    #[test]
    fn acquire_release_and_status() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(status(d.path()).unwrap(), None);
        let rec = LockRecord::for_current("me", vec!["t".into()], None);
        let hold = acquire(d.path(), rec.clone(), Nesting::Refuse, false, &mut |_| {}).unwrap();
        assert!(matches!(hold, Hold::Own { .. }));
        // A second open file description in the same process conflicts under flock.
        let second = acquire(d.path(), rec.clone(), Nesting::Refuse, false, &mut |_| {});
        match second {
            Err(LockError::Held { record, .. }) => assert_eq!(*record, rec),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(hold);
        // A child another test of this process started meanwhile inherits the descriptor
        // and holds the lock until it exits: wait for that.
        let start = std::time::Instant::now();
        while status(d.path()).unwrap().is_some() {
            assert!(start.elapsed() < Duration::from_secs(30), "never released");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn a_child_inherits_the_hold_and_keeps_the_lock_until_it_exits() {
        let d = tempfile::tempdir().unwrap();
        let rec = LockRecord::for_current("me", vec!["t".into()], None);
        let hold = acquire(d.path(), rec, Nesting::Refuse, false, &mut |_| {}).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        drop(hold);
        assert!(
            status(d.path()).unwrap().is_some(),
            "released under a live child"
        );
        assert!(fd_holders(&d.path().join("host.lock")).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        let start = std::time::Instant::now();
        while status(d.path()).unwrap().is_some() {
            assert!(start.elapsed() < Duration::from_secs(30), "never released");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
