//! Process identity on this host: pid plus start time (so a reused pid is not mistaken for its
//! predecessor), liveness, and the chain of ancestors. Linux `/proc` layout (proc(5)).

use serde::{Deserialize, Serialize};

/// A process identified by pid and its start time in clock ticks since boot
/// (`/proc/PID/stat` field 22); `start_ticks` is `None` where `/proc` is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot.
    pub start_ticks: Option<u64>,
}

/// Fields 4 (ppid) and 22 (starttime) of `/proc/PID/stat`, parsed after the last `)` so that
/// a command name holding spaces or parentheses cannot shift them.
fn stat_fields(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, start))
}

impl ProcessId {
    /// This process.
    pub fn current() -> ProcessId {
        let pid = std::process::id();
        ProcessId {
            pid,
            start_ticks: stat_fields(pid).map(|(_, s)| s),
        }
    }

    /// Whether this process still exists (same pid and, when known, same start time).
    pub fn is_alive(&self) -> bool {
        match (stat_fields(self.pid), self.start_ticks) {
            (Some((_, now)), Some(then)) => now == then,
            (Some(_), None) => true,
            (None, _) => {
                if std::path::Path::new("/proc/self/stat").exists() {
                    return false;
                }
                // SAFETY: kill with signal 0 only checks for existence and permission.
                unsafe { libc::kill(self.pid as libc::pid_t, 0) == 0 }
            }
        }
    }
}

/// The ancestors of this process, parent first, up to (excluding) pid 0.
pub fn ancestors() -> Vec<ProcessId> {
    let mut out = Vec::new();
    let mut pid = std::process::id();
    while let Some((ppid, _)) = stat_fields(pid) {
        if ppid == 0 || out.len() > 4096 {
            break;
        }
        out.push(ProcessId {
            pid: ppid,
            start_ticks: stat_fields(ppid).map(|(_, s)| s),
        });
        pid = ppid;
    }
    out
}

/// Whether any process is in process group `pgid`.
pub fn group_exists(pgid: u32) -> bool {
    // SAFETY: signal 0 only checks existence and permission.
    unsafe { libc::kill(-(pgid as libc::pid_t), 0) == 0 }
}

/// A child process group the harness started: written when the child starts, removed when
/// it has been waited for. One left behind means the harness died (SIGKILL) while the
/// group ran; [`reap_orphans`] kills such groups.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildRecord {
    /// The harness process that started the group.
    pub owner: ProcessId,
    /// The group leader (its pid is the process group id).
    pub leader: ProcessId,
}

fn children_dir(state: &std::path::Path) -> std::path::PathBuf {
    state.join("children")
}

/// Records that this process started process group `leader_pid`; returns the record's path
/// (remove it once the group is waited for).
pub fn record_child(
    state: &std::path::Path,
    leader_pid: u32,
) -> std::io::Result<std::path::PathBuf> {
    let dir = children_dir(state);
    std::fs::create_dir_all(&dir)?;
    let rec = ChildRecord {
        owner: ProcessId::current(),
        leader: ProcessId {
            pid: leader_pid,
            start_ticks: stat_fields(leader_pid).map(|(_, s)| s),
        },
    };
    let path = dir.join(format!("{}-{leader_pid}.json", rec.owner.pid));
    std::fs::write(&path, serde_json::to_vec(&rec).expect("record serializes"))?;
    Ok(path)
}

/// Kills the process groups recorded by harness processes that are no longer alive, and
/// removes their records. A group is killed only when it is provably the recorded one: its
/// leader is alive with the recorded start time, or the leader is gone while the group
/// still exists (the kernel does not reuse the id of a live process group).
/// Returns the killed group ids.
pub fn reap_orphans(state: &std::path::Path) -> Vec<u32> {
    let mut killed = Vec::new();
    let Ok(entries) = std::fs::read_dir(children_dir(state)) else {
        return killed;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(rec) = serde_json::from_slice::<ChildRecord>(&bytes) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        if rec.owner.is_alive() {
            continue;
        }
        let pgid = rec.leader.pid;
        let leader_now = stat_fields(pgid).map(|(_, s)| s);
        let ours = match (leader_now, rec.leader.start_ticks) {
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => false,
            (None, _) => group_exists(pgid),
        };
        if ours && group_exists(pgid) {
            kill_group(pgid);
            killed.push(pgid);
        }
        let _ = std::fs::remove_file(&path);
    }
    // A killed process keeps the host lock's inherited descriptor (and the files it writes)
    // until it is gone: wait for that, briefly.
    let start = std::time::Instant::now();
    while killed.iter().any(|&g| group_alive(g))
        && start.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    killed
}

/// Whether process group `pgid` has a member that is not a zombie (`/proc/PID/stat`
/// fields 3 and 5); where `/proc` is unavailable, whether the group exists.
pub fn group_alive(pgid: u32) -> bool {
    // A group with no member at all (the common case once the leader is reaped) needs no
    // scan of `/proc`, which costs milliseconds on a busy host.
    if !group_exists(pgid) && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return group_exists(pgid);
    };
    procs.flatten().any(|p| {
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            return false;
        };
        let Some(close) = stat.rfind(')') else {
            return false;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        f.first() != Some(&"Z") && f.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
    })
}

/// Sends SIGKILL to every process in process group `pgid`.
pub fn kill_group(pgid: u32) {
    // SAFETY: plain syscall; a negative pid addresses the process group.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = ProcessId::current();
        assert!(me.is_alive());
        if let Some(t) = me.start_ticks {
            let other = ProcessId {
                pid: me.pid,
                start_ticks: Some(t + 1),
            };
            assert!(!other.is_alive());
        }
    }

    #[test]
    fn a_reaped_child_is_dead_and_the_parent_is_an_ancestor() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = ProcessId {
            pid: child.id(),
            start_ticks: stat_fields(child.id()).map(|(_, s)| s),
        };
        child.wait().unwrap();
        assert!(!id.is_alive());
        let parent = unsafe { libc::getppid() } as u32;
        assert_eq!(ancestors().first().map(|p| p.pid), Some(parent));
    }
}
