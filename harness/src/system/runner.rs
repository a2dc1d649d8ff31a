//! The one way the harness starts a child process: in its own process group (so a timeout or
//! an interruption stops the child and everything it started, and the terminal's Ctrl-C
//! reaches only the harness), recorded in the host state directory while it runs (so a later
//! harness command can kill it if this process dies), with a timeout, and with its output
//! captured, teed to a file and the terminal, or left on the terminal.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::system::interrupt;
use crate::system::process::{group_alive, kill_group, record_child};
use crate::system::slots;

/// The longest pause between two polls of a running child ([`Runner::run`]).
const POLL_MAX: Duration = Duration::from_millis(25);

/// Where a child's standard output and error go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Captured into [`Finished::stdout`] and [`Finished::stderr`].
    Capture,
    /// Both streams through one pipe (so their lines keep the order the child wrote them
    /// in), appended to this file as they come and copied to the harness's standard error;
    /// nothing is kept in memory.
    Tee(PathBuf),
    /// Left on the harness's own standard output and error.
    Inherit,
}

/// What an interruption (SIGINT, SIGTERM, SIGHUP to the harness) does to the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInterrupt {
    /// Kill its process group and return [`RunError::Interrupted`].
    Kill,
    /// Send SIGTERM to its process group once and wait for it to exit on its own.
    Forward,
}

/// A child process to run (a builder; [`Runner::run`] starts and waits for it).
#[derive(Debug, Clone)]
pub struct Runner {
    program: OsString,
    args: Vec<OsString>,
    dir: Option<PathBuf>,
    env: Vec<(OsString, Option<OsString>)>,
    env_clear: bool,
    timeout: Option<Duration>,
    state_dir: Option<PathBuf>,
    output: Output,
    on_interrupt: OnInterrupt,
    umask: Option<u32>,
    slots: &'static slots::Slots,
}

/// A child that has exited.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output ([`Output::Capture`] only; empty otherwise).
    pub stdout: Vec<u8>,
    /// Its standard error ([`Output::Capture`] only; empty otherwise).
    pub stderr: Vec<u8>,
    /// Whether it was killed at the timeout.
    pub timed_out: bool,
    /// Wall seconds from start to exit.
    pub seconds: f64,
}

/// Why a child could not be run to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The process could not be started or waited for, or its output not written.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// A signal asked the harness to stop; the child's group was killed.
    #[error(transparent)]
    Interrupted(#[from] interrupt::Interrupted),
}

impl Runner {
    /// `program` with no arguments, output captured, no timeout, killed on interruption.
    pub fn new(program: impl AsRef<OsStr>) -> Runner {
        Runner {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            dir: None,
            env: Vec::new(),
            env_clear: false,
            timeout: None,
            state_dir: None,
            output: Output::Capture,
            on_interrupt: OnInterrupt::Kill,
            umask: None,
            slots: &slots::CHILDREN,
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Runner
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Runs it in `dir`.
    pub fn dir(mut self, dir: &Path) -> Runner {
        self.dir = Some(dir.to_path_buf());
        self
    }

    /// Sets an environment variable (later calls override earlier ones).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Runner {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Starts the child with no inherited environment: only what [`Runner::env`] sets.
    pub fn env_clear(mut self) -> Runner {
        self.env_clear = true;
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Runner {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Kills the process group after `timeout` ([`Finished::timed_out`]).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Runner {
        self.timeout = timeout;
        self
    }

    /// Records the process group under `state` while it runs (see
    /// [`crate::system::process::reap_orphans`]).
    pub fn state_dir(mut self, state: Option<&Path>) -> Runner {
        self.state_dir = state.map(Path::to_path_buf);
        self
    }

    /// Where the output goes.
    pub fn output(mut self, output: Output) -> Runner {
        self.output = output;
        self
    }

    /// What an interruption does.
    pub fn on_interrupt(mut self, on: OnInterrupt) -> Runner {
        self.on_interrupt = on;
        self
    }

    /// Runs the child (and everything it starts) under this file-mode creation mask, so that
    /// what it creates carries a mark (see [`crate::cargo::RUN_UMASK`]).
    pub fn umask(mut self, mask: Option<u32>) -> Runner {
        self.umask = mask;
        self
    }

    /// The slots the child takes one of while it runs (default [`slots::CHILDREN`]).
    pub fn slots(mut self, slots: &'static slots::Slots) -> Runner {
        self.slots = slots;
        self
    }

    /// The command line, for messages.
    pub fn command_line(&self) -> String {
        let mut s = self.program.to_string_lossy().into_owned();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    fn command(&self) -> Result<(Command, Option<std::io::PipeReader>), RunError> {
        let mut c = Command::new(&self.program);
        c.args(&self.args).stdin(Stdio::null()).process_group(0);
        if let Some(d) = &self.dir {
            c.current_dir(d);
        }
        if self.state_dir.is_some() {
            die_with_parent(&mut c);
        }
        if let Some(mask) = self.umask {
            // SAFETY: umask(2) is async-signal-safe and cannot fail.
            unsafe {
                c.pre_exec(move || {
                    libc::umask(mask as libc::mode_t);
                    Ok(())
                });
            }
        }
        if self.env_clear {
            c.env_clear();
        }
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let mut shared = None;
        match &self.output {
            Output::Inherit => {}
            Output::Capture => {
                c.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
            Output::Tee(_) => {
                let (reader, writer) = std::io::pipe().map_err(self.spawn_err())?;
                let writer2 = writer.try_clone().map_err(self.spawn_err())?;
                c.stdout(writer).stderr(writer2);
                shared = Some(reader);
            }
        }
        Ok((c, shared))
    }

    fn spawn_err(&self) -> impl Fn(std::io::Error) -> RunError + '_ {
        move |source| RunError::Spawn {
            command: self.command_line(),
            source,
        }
    }

    /// Starts the child and waits for it to exit, to be killed at the timeout, or to be
    /// stopped by an interruption. The child holds one of its slots ([`Runner::slots`]) while
    /// it runs (waited for before it starts; its timeout counts from its start).
    ///
    /// Errors: [`RunError::Spawn`] (naming the command and, for a tee, the file),
    /// [`RunError::Interrupted`] under [`OnInterrupt::Kill`].
    pub fn run(&self) -> Result<Finished, RunError> {
        let err = self.spawn_err();
        let tee = match &self.output {
            Output::Tee(path) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| {
                        err(std::io::Error::new(
                            e.kind(),
                            format!("{}: {e}", path.display()),
                        ))
                    })?,
            ),
            _ => None,
        };
        let (mut command, shared) = self.command()?;
        // Held until the child has exited: `-j N` over batteries run side by side.
        let _slot = self.slots.take()?;
        let start = Instant::now();
        let spawned = command.spawn();
        // The shared pipe's write ends now live only in the child: drop ours, so that the
        // reader sees the end of the output when the child exits.
        drop(command);
        let mut child = spawned.map_err(&err)?;
        let record = self
            .state_dir
            .as_ref()
            .and_then(|s| record_child(s, child.id()).ok());
        let readers = Readers::start(&mut child, shared, tee);
        let waited = self.wait(&mut child, start);
        if self.state_dir.is_some() && self.output != Output::Inherit && group_alive(child.id()) {
            // The child is gone but something it started lives on in its group (a server a
            // failing test never stopped): it would hold the output pipes open, and the
            // readers below would wait for it for ever. A recorded child's group is the
            // run's own: nothing in it may outlive the command.
            kill_group(child.id());
        }
        if let Some(r) = record {
            let _ = std::fs::remove_file(r);
        }
        let (stdout, stderr) = readers.finish();
        let (status, timed_out) = waited?;
        Ok(Finished {
            status,
            stdout,
            stderr,
            timed_out,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Polls the child until it exits, the timeout passes (kills the group) or a signal
    /// asks the harness to stop. Under [`OnInterrupt::Kill`], a child that exits after a
    /// signal arrived (the same signal may have reached it: a CI cancel, a container stop)
    /// is an interruption, never a result.
    fn wait(&self, child: &mut Child, start: Instant) -> Result<(ExitStatus, bool), RunError> {
        let err = self.spawn_err();
        let pgid = child.id();
        let mut timed_out = false;
        let mut forwarded = false;
        // Most test processes of a switched battery live a few milliseconds: a fixed
        // 25 ms poll would add more than their own time to each. Where the kernel gives the
        // child a pidfd, the wait wakes the moment it exits (up to 25 ms between looks at
        // a signal or the timeout); elsewhere the pause starts at a millisecond and doubles
        // up to 25 ms, so a long run costs no more wake-ups.
        let exit = ExitFd::open(pgid);
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(status) = child.try_wait().map_err(&err)? {
                if self.on_interrupt == OnInterrupt::Kill && interrupt::requested() {
                    kill_group(pgid);
                    return Err(interrupt::Interrupted.into());
                }
                return Ok((status, timed_out));
            }
            if interrupt::requested() {
                match self.on_interrupt {
                    OnInterrupt::Kill => {
                        kill_group(pgid);
                        let _ = child.wait();
                        return Err(interrupt::Interrupted.into());
                    }
                    OnInterrupt::Forward if !forwarded => {
                        // SAFETY: signalling our own child's process group.
                        unsafe {
                            libc::kill(-(pgid as libc::pid_t), libc::SIGTERM);
                        }
                        forwarded = true;
                    }
                    OnInterrupt::Forward => {}
                }
            }
            if !timed_out && self.timeout.is_some_and(|t| start.elapsed() > t) {
                kill_group(pgid);
                timed_out = true;
            }
            match &exit {
                Some(fd) => {
                    let left = self
                        .timeout
                        .filter(|_| !timed_out)
                        .map(|t| t.saturating_sub(start.elapsed()));
                    fd.wait(left.map_or(POLL_MAX, |l| l.min(POLL_MAX)));
                }
                None => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(POLL_MAX);
                }
            }
        }
    }
}

/// A pidfd of a running child (Linux 5.3 and later): readable the moment the child exits,
/// so that [`Runner::run`] waits for that instead of polling on a timer.
struct ExitFd(std::os::fd::OwnedFd);

impl ExitFd {
    /// The pidfd of `pid` (the caller's child, not yet reaped), or `None` where the kernel
    /// has no `pidfd_open`.
    fn open(pid: u32) -> Option<ExitFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: the descriptor was just returned by the kernel and is owned by no one else.
        Some(ExitFd(unsafe {
            std::os::fd::OwnedFd::from_raw_fd(fd as std::os::fd::RawFd)
        }))
    }

    /// Waits until the child has exited or `at_most` has passed (or a signal arrived).
    fn wait(&self, at_most: Duration) {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = at_most.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe {
            libc::poll(&mut p, 1, ms);
        }
    }
}

/// The threads draining a child's pipes (so that a child writing much never blocks).
struct Readers {
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
}

impl Readers {
    fn start(
        child: &mut Child,
        shared: Option<std::io::PipeReader>,
        tee: Option<std::fs::File>,
    ) -> Readers {
        let tee = tee.map(|f| std::sync::Arc::new(std::sync::Mutex::new(f)));
        let spawn = |pipe: Option<Box<dyn Read + Send>>| {
            let tee = tee.clone();
            pipe.map(|mut p| {
                std::thread::spawn(move || {
                    let mut kept = Vec::new();
                    let mut buf = [0u8; 8192];
                    while let Ok(n) = p.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        match &tee {
                            Some(file) => {
                                if let Ok(mut f) = file.lock() {
                                    let _ = f.write_all(&buf[..n]);
                                }
                                let _ = std::io::stderr().write_all(&buf[..n]);
                            }
                            None => kept.extend_from_slice(&buf[..n]),
                        }
                    }
                    kept
                })
            })
        };
        let out = match shared {
            Some(r) => Some(Box::new(r) as Box<dyn Read + Send>),
            None => child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        };
        let err = child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>);
        Readers {
            out: spawn(out),
            err: spawn(err),
        }
    }

    fn finish(self) -> (Vec<u8>, Vec<u8>) {
        let join = |h: Option<JoinHandle<Vec<u8>>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        (join(self.out), join(self.err))
    }
}

/// Makes a recorded child die with the harness (Linux `PR_SET_PDEATHSIG`, SIGKILL): if the
/// harness is killed between starting the child and writing its record (the record is what
/// lets the next command kill a killed run's processes, see
/// [`crate::system::process::reap_orphans`]), the child would otherwise run on unrecorded, holding
/// the inherited host lock. A child whose parent is already gone when the setting takes
/// effect exits at once. Grandchildren are left to the record; commands meant to outlive
/// the harness (`lock run`) are not recorded and do not get this.
fn die_with_parent(c: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl(2), getppid(2) and _exit(2) are async-signal-safe.
        unsafe {
            c.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = c;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_both_streams_and_the_status() {
        let f = Runner::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .run()
            .unwrap();
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(f.stdout, b"out\n");
        assert_eq!(f.stderr, b"err\n");
        assert!(!f.timed_out);
    }

    /// A child's exit is seen when it happens, not at the next tick of a poll timer: a
    /// 140 ms child was seen at 156 ms or later when the wait slept 1, 2, 4, 8, 16, then
    /// 25 ms between looks. The least of five runs, so that one slow start does not count.
    #[test]
    fn a_childs_exit_is_seen_at_once() {
        let over = (0..5)
            .map(|_| {
                let f = Runner::new("sleep").args(["0.14"]).run().unwrap();
                assert!(f.status.success());
                f.seconds - 0.14
            })
            .fold(f64::INFINITY, f64::min);
        assert!(
            over < 0.012,
            "seen {:.1} ms after the child's 140 ms",
            over * 1000.0
        );
    }

    #[test]
    fn a_recorded_childs_leftover_processes_do_not_hold_its_output_open() {
        let d = tempfile::tempdir().unwrap();
        // The shell exits at once; the background sleep it started keeps stdout open.
        let start = Instant::now();
        let f = Runner::new("sh")
            .args(["-c", "sleep 600 & echo started"])
            .state_dir(Some(d.path()))
            .run()
            .unwrap();
        assert_eq!(f.stdout, b"started\n");
        assert!(!f.timed_out);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "waited {:?} for a leftover process",
            start.elapsed()
        );
    }

    #[test]
    fn the_timeout_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("grandchild-lived");
        // The grandchild would write the marker after the timeout if it survived.
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let f = Runner::new("sh")
            .args(["-c", &script])
            .timeout(Some(Duration::from_millis(300)))
            .run()
            .unwrap();
        assert!(f.timed_out);
        assert!(f.seconds < 10.0, "{}", f.seconds);
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the grandchild outlived the timeout");
    }

    #[test]
    fn tee_appends_to_the_file() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        let f = Runner::new("sh")
            .args([
                "-c",
                "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done",
            ])
            .output(Output::Tee(log.clone()))
            .run()
            .unwrap();
        assert!(f.status.success());
        assert!(f.stdout.is_empty());
        // One pipe for both streams: the lines keep the order they were written in.
        let text = std::fs::read_to_string(&log).unwrap();
        let want: String = (1..=5).map(|i| format!("out{i}\nerr{i}\n")).collect();
        assert_eq!(text, want);
    }

    #[test]
    fn the_umask_reaches_the_child_and_its_children() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("made");
        let script = format!("sh -c 'echo x > {}'", f.display());
        Runner::new("sh")
            .args(["-c", &script])
            .umask(Some(0o062))
            .run()
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o604);
    }

    #[test]
    fn a_child_takes_a_slot_of_the_process_by_default() {
        assert!(std::ptr::eq(Runner::new("true").slots, &slots::CHILDREN));
    }

    #[test]
    fn children_wait_for_a_slot() {
        static ONE: slots::Slots = slots::Slots::new();
        ONE.set_limit(Some(1));
        let d = tempfile::tempdir().unwrap();
        // A child that finds another's directory in place fails: they ran at the same time.
        let busy = d.path().join("busy");
        let script = format!("mkdir {0} || exit 7; sleep 0.2; rmdir {0}", busy.display());
        let runner = Runner::new("sh").args(["-c", &script]).slots(&ONE);
        let codes: Vec<Option<i32>> = std::thread::scope(|s| {
            let all: Vec<_> = (0..3)
                .map(|_| s.spawn(|| runner.run().unwrap().status.code()))
                .collect();
            all.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(codes, vec![Some(0); 3], "one child at a time");
        assert_eq!(ONE.taken(), 0);
    }

    #[test]
    fn a_missing_program_names_the_command() {
        let e = Runner::new("/nonexistent/prog")
            .args(["x"])
            .run()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot run `/nonexistent/prog x`"),
            "{e}"
        );
    }
}
