//! What the handlers, the loader and the batch worker share: the loaded app, the router's state, a job on its way to the batch and the worker's events for its handler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use axum::response::Response;
use tokio::sync::mpsc;

use super::http::unavailable;
use super::metrics::Metrics;
use crate::batch::{Finish, SeqSpec};
use crate::chat::ChatTemplate;
use crate::kernels::logprob::TokenLogprobs;
use crate::runtime::Engine;
use crate::scheduler::{Admission, ReservationId};

/// Events from the worker to one request's handler.
#[derive(Debug)]
pub(super) enum Out {
    /// A token: the text it releases, and its log probabilities when asked for.
    Token(String, Option<TokenLogprobs>),
    /// The end: generated tokens, the remaining text, why.
    Done {
        completion_tokens: usize,
        tail: String,
        finish: Result<Finish, String>,
    },
    /// Refused after waiting (shutdown): status and message.
    Refused(StatusCode, String),
}

/// An admitted or queued request on its way to the batch.
pub(super) struct Job {
    pub(super) spec: SeqSpec,
    pub(super) reservation: ReservationId,
    pub(super) tx: mpsc::UnboundedSender<Out>,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) arrived: Instant,
}

/// What the worker publishes after each step for `Retry-After`.
#[derive(Debug, Default, Clone)]
pub(super) struct WorkerStats {
    /// Each running request's reservation and the steps it takes at most before it ends
    /// ([`Batch::steps_left`](crate::batch::Batch::steps_left)).
    pub(super) steps_left: Vec<(ReservationId, u64)>,
    /// Wall seconds per worker step (the step, its deliveries and the step interval),
    /// an exponentially weighted mean; `None` before the first step.
    pub(super) secs_per_step: Option<f64>,
}

/// The loaded model and everything the handlers share.
pub(super) struct App {
    pub(super) engine: Arc<Engine>,
    pub(super) template: Option<ChatTemplate>,
    pub(super) model_name: String,
    pub(super) created: u64,
    pub(super) context_len: usize,
    pub(super) max_queue: usize,
    pub(super) jobs: Mutex<Option<std_mpsc::Sender<Job>>>,
    /// Queued requests by reservation; the scheduler's queue holds their order.
    pub(super) waiting: Mutex<HashMap<ReservationId, Job>>,
    pub(super) stats: Mutex<WorkerStats>,
    pub(super) draining: AtomicBool,
    pub(super) next_id: AtomicU64,
}

/// Shared state of the router: the app once loaded, and the metrics.
#[derive(Clone)]
pub(super) struct Shared {
    pub(super) app: Arc<OnceLock<Arc<App>>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) load_error: Arc<OnceLock<String>>,
}

/// Locks `m`, taking the data of a poisoned lock as it is.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// The loaded app, or the response to give instead: 503 while the model loads, after it
    /// failed to load, and while the server shuts down.
    pub(super) fn ready(&self) -> Result<Arc<App>, Response> {
        match self.app.get() {
            Some(a) if a.draining.load(Ordering::SeqCst) => {
                self.metrics.refused("shutting_down");
                Err(unavailable("the server is shutting down"))
            }
            Some(a) => Ok(a.clone()),
            None => Err(match self.load_error.get() {
                Some(e) => unavailable(&format!("the model failed to load: {e}")),
                None => unavailable("Loading model"),
            }),
        }
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it): `created` of responses.
pub(super) fn seconds_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The job of a request the scheduler admitted (at once or from the queue): the admission's
/// token count and budget cap written into its sequence, and the admission counted.
pub(super) fn admitted_job(
    mut spec: SeqSpec,
    a: &Admission,
    tx: mpsc::UnboundedSender<Out>,
    cancel: Arc<AtomicBool>,
    arrived: Instant,
    metrics: &Metrics,
) -> Job {
    metrics.admissions.inc();
    if a.budget_cap.is_some() {
        metrics.clamps.inc();
        spec.capped = true;
    }
    spec.max_new_tokens = a.max_new_tokens;
    Job {
        spec,
        reservation: a.id,
        tx,
        cancel,
        arrived,
    }
}
