//! `harness lock`: run a command holding the host lock or say who holds it, and how the other commands take it.

use std::path::Path;

use clap::Subcommand;

use crate::system::exit::{ExitCode, ProcessExit};
use crate::system::lock::{self, LockRecord, Nesting};
use crate::system::runner::{OnInterrupt, Output, Runner};

/// How a command takes the host lock (shared by `battery`, `gate`, `mutants` and `lock run`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LockArgs {
    /// Wait for the host lock instead of refusing with LOCKED.
    #[arg(long)]
    pub wait: bool,
    /// Expected maximum hold of the lock, in seconds (reported when exceeded).
    #[arg(long, value_name = "SECS")]
    pub ttl: Option<u64>,
    /// Owner name recorded in the lock (default: $USER).
    #[arg(long)]
    pub owner: Option<String>,
}

/// `harness lock` subcommands.
#[derive(Debug, Subcommand)]
pub enum LockCommand {
    /// Run a command holding the host lock.
    Run {
        /// The host lock.
        #[command(flatten)]
        lock: LockArgs,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Print who holds the host lock.
    Status,
}

impl LockArgs {
    /// The lock request of these arguments (how the front door takes the lock).
    pub fn request(&self) -> crate::door::LockRequest {
        crate::door::LockRequest {
            wait: self.wait,
            ttl: self.ttl,
            owner: self.owner.clone(),
        }
    }
}

/// The lock's owner when `--owner` is not given: `$USER`.
fn default_owner() -> String {
    std::env::var("USER").unwrap_or_else(|_| "unknown".into())
}

/// `harness lock run`: the command's exit status, passed through, or the harness's own
/// verdict when the lock was not taken or the command could not be started.
fn lock_run(state: &Path, args: &LockArgs, command: Vec<String>) -> ProcessExit {
    let owner = args.owner.clone().unwrap_or_else(default_owner);
    let record = LockRecord::for_current(&owner, command.clone(), args.ttl);
    let hold = match lock::acquire(state, record, Nesting::Refuse, args.wait, &mut |h| {
        eprintln!(
            "harness: waiting for the host lock held by {}",
            h.describe()
        )
    }) {
        Ok(h) => h,
        Err(lock::LockError::Interrupted(_)) => return ExitCode::Interrupted.into(),
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::Refused.into();
        }
    };
    // The command inherits the lock's descriptor and keeps the lock held for as long as it
    // (or anything it started) lives, also if this process is killed; it is therefore not
    // recorded as an orphan for a later command to kill.
    let res = Runner::new(&command[0])
        .args(&command[1..])
        .output(Output::Inherit)
        .on_interrupt(OnInterrupt::Forward)
        .run();
    drop(hold);
    match res {
        Ok(done) => ProcessExit::PassThrough(done.status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + done.status.signal().unwrap_or(0)
        })),
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::Refused.into()
        }
    }
}

/// `harness lock status`: who holds the host lock, if anyone.
fn lock_status(state: &Path) -> ExitCode {
    match lock::status(state) {
        Ok(None) => {
            println!("host lock {}: free", state.display());
            ExitCode::AllMet
        }
        Ok(Some(r)) => {
            let now = if r.holder.is_alive() {
                String::new()
            } else {
                let pids: Vec<String> = lock::fd_holders(&state.join("host.lock"))
                    .iter()
                    .map(u32::to_string)
                    .collect();
                format!("; held now by pid {}", pids.join(", "))
            };
            println!(
                "host lock {}: held by {}{now}",
                state.display(),
                r.describe()
            );
            ExitCode::AllMet
        }
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::Refused
        }
    }
}

/// Runs a `harness lock` subcommand; returns how the process ends (`lock run`: with its
/// command's exit status).
pub fn run(state: &Path, command: LockCommand) -> ProcessExit {
    match command {
        LockCommand::Run { lock, command } => lock_run(state, &lock, command),
        LockCommand::Status => lock_status(state).into(),
    }
}
