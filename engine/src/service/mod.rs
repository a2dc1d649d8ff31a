//! The engine service: one queue, one admission and one continuous batch for every request from every front end; clients submit and hold a ticket.
//!
//! Every request enters through [`Service::submit`] (reached as
//! [`Engine::submit`](crate::runtime::Engine::submit)), whoever sends it: `genai generate`,
//! `chat`, `bench`, `serve`'s HTTP handlers, a library caller, a test. The path is written
//! once (docs/design.md §2.1):
//!
//! 1. **plan** (the caller's thread): validate, encode, count
//!    (`Core::plan`, `engine::funnel`); an invalid request is refused at once;
//! 2. **admit** (the caller's thread, under the service's queue lock): the scheduler
//!    reserves the KV bytes (clamping `max_new_tokens` when only part fits), queues a
//!    request that fits the budget only later (FIFO, bounded by
//!    [`ServiceOptions::max_queue`]: one more is refused with
//!    [`EngineError::QueueFull`] and its `Retry-After`), or refuses one that can never fit;
//! 3. **run** (the worker thread): the admitted request's rows join the one continuous
//!    batch (decode core), or run on a thread of their own (interpreter); queued requests
//!    are admitted in FIFO order as reservations are released;
//! 4. **complete**: the reservation is released when the request ends (success, failure,
//!    cancellation), before its ticket sees the result.
//!
//! The [`Ticket`] resolves once: [`Event::Admitted`] (with its route), [`Event::Queued`]
//! (then `Admitted` or `Refused` later), or [`Event::Refused`] with the typed reason; an
//! admitted ticket then streams [`Event::Token`]s and ends with one [`Event::Finished`].
//! Dropping or cancelling a ticket releases its reservation at once when it is queued, and
//! at the batch's next step when it runs. A *lockstep* ticket
//! ([`SubmitOptions::lockstep`]) makes the worker wait for the client's answer to its
//! admission and to each token, so a callback runs before the next token exists and may
//! stop its row ([`Engine::generate_stream`](crate::runtime::Engine::generate_stream)).

// EngineError carries the typed errors of the model, package and interpreter by value, as
// `runtime` does.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

mod ticket;
mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::funnel::{Core, Planned};
use crate::kernels::logprob::TokenLogprobs;
use crate::prefix::PrefixCache;
use crate::request::{EngineError, GenerateRequest, GenerateResult, Route};
use crate::scheduler::{Admission, Demand, ReservationId, Submitted};

pub use crate::scheduler::{AdmissionError, BudgetCap, Usage};
pub use ticket::{Resolution, Ticket, TicketError};

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// Requests that may wait for KV budget at once; one more is refused with
    /// [`EngineError::QueueFull`].
    pub max_queue: usize,
    /// Prefill chunk of the batch, in tokens (at least 1).
    pub chunk: usize,
    /// Pace of the batch: a step starts no sooner than this after the previous one started
    /// (zero: as fast as the model runs). Lets a demonstration or a test hold requests
    /// running on a tiny model.
    pub step_interval: Duration,
    /// An async runtime whose tickets are read by tasks (the HTTP server's): each batch
    /// step's events for non-lockstep tickets go to a task on it as one message, which
    /// hands them to the tickets there. Without it the worker sends each event itself: a
    /// send that wakes one of the runtime's threads lets it run on the worker's core, and
    /// on a machine whose cores all run kernel threads each such switch stalls the step
    /// (figures: docs/design.md §2.5).
    pub relay: Option<tokio::runtime::Handle>,
    /// Keep the full KV pages of finished decode-core requests and reuse them for later
    /// requests that start with the same tokens ([`crate::prefix`]); admission prices only
    /// the positions a request adds, and evicts unused cached pages before anyone waits
    /// for bytes.
    pub prefix_cache: bool,
}

impl Default for ServiceOptions {
    /// 64 queued, [`crate::batch::DEFAULT_CHUNK`]-token prefill chunks, no pacing, no relay,
    /// no prefix cache.
    fn default() -> Self {
        ServiceOptions {
            max_queue: 64,
            chunk: crate::batch::DEFAULT_CHUNK,
            step_interval: Duration::ZERO,
            relay: None,
            prefix_cache: false,
        }
    }
}

/// One batch step's events for their tickets, in the order the batch produced them.
pub(crate) type Deliveries = Vec<(Arc<Recipient>, Event)>;

/// How one request is followed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubmitOptions {
    /// The worker waits for the client's answer ([`Ticket::reply`]) to the admission and
    /// to each token before it goes on with this request, so the client's callback runs
    /// after admission and before any component, and before the row's next token. Costs
    /// the batch a hand-over per token: for in-process callers that need callbacks, not
    /// for serving.
    pub lockstep: bool,
}

/// What a ticket receives.
#[derive(Debug)]
pub enum Event {
    /// The request waits in the FIFO queue behind `ahead` others; `Admitted` or `Refused`
    /// follows.
    Queued {
        /// Requests ahead of it when it queued.
        ahead: usize,
        /// Prompt tokens per row (the new turn).
        prompt_tokens: usize,
    },
    /// The scheduler admitted the request; tokens and one `Finished` follow.
    Admitted(Admitted),
    /// The request was not admitted (invalid, never fits, queue full, shutting down);
    /// nothing ran and nothing follows.
    Refused(EngineError),
    /// A generated token.
    Token(Token),
    /// The admitted request ended (its reservation is already released): its result, or
    /// the error it failed with after admission.
    Finished(Result<GenerateResult, EngineError>),
}

/// An admission, as its ticket sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// The executor that runs the request.
    pub route: Route,
    /// Bytes reserved (0 without KV geometry).
    pub reserved_bytes: u64,
    /// New tokens per row the request may generate (clamped if `budget_cap` is set).
    pub max_new_tokens: usize,
    /// Set when `max_new_tokens` was clamped to fit the budget.
    pub budget_cap: Option<BudgetCap>,
    /// The scheduler's state right after admission (this request's bytes included).
    pub usage: Usage,
    /// Prompt tokens per row (the new turn).
    pub prompt_tokens: usize,
}

/// One streamed token.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The token row.
    pub row: usize,
    /// The token id.
    pub id: u32,
    /// Text it releases (possibly empty: see [`crate::batch::Piece`]).
    pub text: String,
    /// Its log probabilities, when the request asked for them.
    pub logprobs: Option<TokenLogprobs>,
}

/// The service's figures, published after each batch step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceStats {
    /// Each running decode-core request's reservation and the steps it takes at most
    /// before it ends ([`crate::batch::Batch::steps_left`], the most over its rows).
    pub steps_left: Vec<(ReservationId, u64)>,
    /// Wall seconds per worker step (the step, its deliveries and the step interval), an
    /// exponentially weighted mean; `None` before the first step.
    pub secs_per_step: Option<f64>,
    /// Tokens the batch's decode passes produced so far.
    pub decode_tokens: u64,
    /// Seconds the batch's decode passes took so far.
    pub decode_secs: f64,
}

/// Where a request's events go: its ticket's channel, its cancel flag, and (lockstep) the
/// client's answers.
pub(crate) struct Recipient {
    tx: mpsc::UnboundedSender<Event>,
    cancel: Arc<AtomicBool>,
    answers: Option<Mutex<std_mpsc::Receiver<crate::flow::Flow>>>,
}

impl Recipient {
    /// Whether the worker waits for this client's answers.
    fn lockstep(&self) -> bool {
        self.answers.is_some()
    }

    /// Whether the client cancelled (or dropped its ticket, which cancels).
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// Send `event` now. A client that went away dropped its ticket, which cancelled the
    /// request: nothing more to do here.
    fn send(&self, event: Event) {
        let _ = self.tx.send(event);
    }

    /// A lockstep client's answer to the last event (`Stop` when it went away, which also
    /// cancels the request); `Continue` for other clients.
    fn answer(&self) -> crate::flow::Flow {
        let Some(answers) = &self.answers else {
            return crate::flow::Flow::Continue;
        };
        let rx = answers.lock().unwrap_or_else(|p| p.into_inner());
        match rx.recv() {
            Ok(flow) => flow,
            Err(_) => {
                self.cancel.store(true, Ordering::SeqCst);
                crate::flow::Flow::Stop
            }
        }
    }
}

/// An admitted request on its way to the worker.
pub(crate) struct Job {
    req: GenerateRequest,
    planned: Planned,
    admission: Admission,
    usage: Usage,
    to: Arc<Recipient>,
}

/// A queued request: everything but its admission.
struct Pending {
    req: GenerateRequest,
    planned: Planned,
    to: Arc<Recipient>,
}

/// What the service's clients and its worker share.
pub(crate) struct Shared {
    core: Arc<Core>,
    options: ServiceOptions,
    /// Admitted jobs to the worker (`None`: a request queued, look at the queue); `None`
    /// once the service stops.
    jobs: Mutex<Option<std_mpsc::Sender<Option<Job>>>>,
    /// Queued requests by reservation; the scheduler's queue holds their order.
    waiting: Mutex<HashMap<ReservationId, Pending>>,
    stats: Mutex<ServiceStats>,
    draining: AtomicBool,
    /// The relay task's inbox ([`ServiceOptions::relay`]).
    relay: Option<mpsc::UnboundedSender<Deliveries>>,
    /// The prefix cache ([`ServiceOptions::prefix_cache`]).
    prefix: Option<PrefixCache>,
}

/// Locks `m`, taking the data of a poisoned lock as it is.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Lease the cached pages a single-row decode-core request's tokens (a session's
    /// carried history, then its row) start with; its demand leaves them out.
    fn lease_prefix(&self, prefix: &PrefixCache, planned: &mut Planned) {
        if planned.plan.route != Route::DecodeCore || planned.rows.len() != 1 {
            return;
        }
        let mut tokens = planned
            .plan
            .session
            .as_ref()
            .map(|(_, s)| s.history.clone())
            .unwrap_or_default();
        tokens.extend_from_slice(&planned.rows[0]);
        let lease = prefix.lease(&tokens);
        if lease.positions() > 0 {
            planned.demand = planned.demand.with_cached_prefix(lease.positions());
            planned.lease = Some(lease);
        }
    }

    /// Leave the queue: a queued request whose client cancelled or went away. Whether it
    /// was still queued.
    fn leave_queue(&self, id: ReservationId) -> bool {
        let left = lock(&self.waiting).remove(&id).is_some();
        if left {
            let _ = self.core.scheduler().cancel(id);
        }
        left
    }
}

/// The engine service: the one queue, admission and batch (see the module docs).
pub struct Service {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("options", &self.shared.options)
            .field("usage", &self.shared.core.scheduler().usage())
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Start the service of `core`: its worker thread owns the continuous batch.
    pub(crate) fn start(core: Arc<Core>, options: ServiceOptions) -> Service {
        let (jobs, rx) = std_mpsc::channel();
        let relay = options.relay.as_ref().map(|runtime| {
            let (tx, mut steps) = mpsc::unbounded_channel::<Deliveries>();
            runtime.spawn(async move {
                while let Some(step) = steps.recv().await {
                    for (to, event) in step {
                        to.send(event);
                    }
                }
            });
            tx
        });
        let prefix = match (options.prefix_cache, core.decode_model()) {
            (true, Some((model, _))) => core.scheduler().bytes_per_token().map(|bpt| {
                let page_tokens = model.kv_config(1, core.kv_dtype()).page_tokens;
                PrefixCache::new(page_tokens, page_tokens as u64 * bpt)
            }),
            _ => None,
        };
        let shared = Arc::new(Shared {
            core,
            options,
            jobs: Mutex::new(Some(jobs)),
            waiting: Mutex::new(HashMap::new()),
            stats: Mutex::new(ServiceStats::default()),
            draining: AtomicBool::new(false),
            relay,
            prefix,
        });
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("genai-service".into())
            .spawn(move || worker::run(worker, rx));
        if spawned.is_err() {
            // No worker: every request is refused as the engine shutting down.
            lock(&shared.jobs).take();
            shared.draining.store(true, Ordering::SeqCst);
        }
        Service { shared }
    }

    /// Submit `req` (see the module docs). Never blocks on the batch: the ticket says what
    /// became of it.
    pub(crate) fn submit(&self, req: GenerateRequest, options: SubmitOptions) -> Ticket {
        let (tx, rx) = mpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let (answer_tx, answers) = match options.lockstep {
            true => {
                let (a, b) = std_mpsc::channel();
                (Some(a), Some(Mutex::new(b)))
            }
            false => (None, None),
        };
        let to = Arc::new(Recipient {
            tx,
            cancel: cancel.clone(),
            answers,
        });
        let mut ticket = Ticket::new(rx, answer_tx, cancel, self.shared.clone());
        let sh = &self.shared;
        if sh.draining.load(Ordering::SeqCst) {
            to.send(Event::Refused(EngineError::ShuttingDown));
            return ticket;
        }
        let mut planned = match sh.core.plan(&req) {
            Ok(p) => p,
            Err(e) => {
                to.send(Event::Refused(e));
                return ticket;
            }
        };
        let scheduler = sh.core.scheduler();
        if let Some(prefix) = &sh.prefix {
            sh.lease_prefix(prefix, &mut planned);
            // Cached pages nobody uses give way before anyone waits for bytes.
            while scheduler.short_of_bytes(&planned.demand) && prefix.evict_one() {
                scheduler.release_cached(prefix.page_bytes());
            }
        }
        let mut waiting = lock(&sh.waiting);
        match scheduler.submit(&planned.demand) {
            Ok(Submitted::Admitted(admission)) => {
                let usage = scheduler.usage();
                let job = Job {
                    req,
                    planned,
                    admission,
                    usage,
                    to: to.clone(),
                };
                let sent = lock(&sh.jobs).as_ref().map(|j| j.send(Some(job)).is_ok());
                if sent != Some(true) {
                    let _ = scheduler.cancel(admission.id);
                    to.send(Event::Refused(EngineError::ShuttingDown));
                }
            }
            Ok(Submitted::Queued(id)) => {
                let queued = scheduler.usage().queued;
                if queued > sh.options.max_queue {
                    let _ = scheduler.cancel(id);
                    drop(waiting);
                    let retry_after_secs = self.retry_after(&planned.demand);
                    to.send(Event::Refused(EngineError::QueueFull {
                        limit: sh.options.max_queue,
                        retry_after_secs,
                    }));
                    return ticket;
                }
                to.send(Event::Queued {
                    ahead: queued - 1,
                    prompt_tokens: planned.rows[0].len(),
                });
                waiting.insert(id, Pending { req, planned, to });
                ticket.queued = Some(id);
                // An idle worker sleeps until a message comes: it must see the queue.
                if let Some(j) = lock(&sh.jobs).as_ref() {
                    let _ = j.send(None);
                }
            }
            Err(e) => to.send(Event::Refused(EngineError::Refused(e))),
        }
        ticket
    }

    /// Stop admitting (see [`crate::runtime::Engine::drain`]).
    pub(crate) fn drain(&self) {
        self.shared.draining.store(true, Ordering::SeqCst);
    }

    /// The figures the worker published last.
    pub(crate) fn stats(&self) -> ServiceStats {
        lock(&self.shared.stats).clone()
    }

    /// `Retry-After` for a request of `demand` that found the queue full: when the queue's
    /// head is admitted if the batch keeps its pace. The running requests' steps left, the
    /// fewest releases in that order after which the scheduler admits the head
    /// ([`crate::scheduler::Scheduler::releases_before_admission`]), times the measured
    /// seconds per step; whole seconds, at least 1 (1 before the first step).
    pub(crate) fn retry_after(&self, demand: &Demand) -> u64 {
        let st = self.stats();
        let Some(secs_per_step) = st.secs_per_step else {
            return 1;
        };
        let mut order = st.steps_left;
        order.sort_by_key(|&(_, steps)| steps);
        let ids: Vec<ReservationId> = order.iter().map(|&(id, _)| id).collect();
        let steps = match self
            .shared
            .core
            .scheduler()
            .releases_before_admission(demand, &ids)
        {
            Some(0) => 0,
            Some(k) => order[k - 1].1,
            // Admitted requests not yet in the batch hold budget too: wait for every release.
            None => order.last().map_or(0, |&(_, steps)| steps),
        };
        ((steps as f64 * secs_per_step).ceil() as u64).max(1)
    }
}

impl Drop for Service {
    /// The worker stops once its batch is empty; queued requests are refused.
    fn drop(&mut self) {
        lock(&self.shared.jobs).take();
    }
}
