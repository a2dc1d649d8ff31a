//! Cancelling a request whose client went away: the flag the batch checks at each step, and the guard that sets it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::metrics::Metrics;
use super::state::{App, lock};
use crate::scheduler::ReservationId;

/// Marks a request cancelled: the batch ends it at its next step (and the worker then
/// releases its reservation).
pub(super) fn cancel_request(cancel: &AtomicBool) {
    cancel.store(true, Ordering::SeqCst);
}

/// Cancels its request when dropped before the request finished (the client went away).
pub(super) struct CancelGuard {
    pub(super) app: Arc<App>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) reservation: ReservationId,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) finished: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        cancel_request(&self.cancel);
        // Still queued: leave the queue here (the worker never saw it).
        let queued = lock(&self.app.waiting).remove(&self.reservation);
        if queued.is_some() {
            let _ = self.app.engine.scheduler().cancel(self.reservation);
            self.metrics.cancellations.inc();
        }
    }
}
