//! Interruption: SIGINT, SIGTERM and SIGHUP set a flag that long waits poll, so the harness
//! stops its child processes and restores the tree before it exits.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs the handlers (idempotent). After this, the signals no longer terminate the
/// process: code that waits must poll [`requested`].
pub fn install() -> std::io::Result<()> {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    Ok(())
}

/// Whether an interrupting signal has arrived.
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// The error a long operation returns when it stopped because of [`requested`].
#[derive(Debug, thiserror::Error)]
#[error("interrupted by a signal")]
pub struct Interrupted;
