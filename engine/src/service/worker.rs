//! The service's worker thread: it owns the continuous batch, takes admitted jobs, admits queued ones as budget frees, and ends each request (its reservation released, its result sent).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use super::{Admitted, Deliveries, Event, Job, Recipient, ServiceStats, Shared, Token, lock};
use crate::batch::{Batch, Done, Key, Piece, SeqSpec, Sink};
use crate::flow::Flow;
use crate::funnel::{Core, Plan};
use crate::model::ModelError;
use crate::request::{Completion, EngineError, GenerateResult, Route};
use crate::scheduler::{Admission, ReservationId, Usage};
use crate::workflow::{Event as LogEvent, EventLog};

/// Weight of the newest step in [`ServiceStats::secs_per_step`].
const STEP_TIME_WEIGHT: f64 = 0.2;

/// How long an idle worker waits for jobs before it looks at the queue again (queued
/// requests may be admitted when another holder of a shared budget releases).
const QUEUE_POLL: Duration = Duration::from_millis(5);

/// One row's end: its completion and (prefill, decode) seconds, or the model's error.
type RowOutcome = Result<(Completion, (f64, f64)), ModelError>;

/// A decode-core request in the batch.
struct InFlight {
    plan: Plan,
    /// Each row's full prompt (the session's carried tokens, then the row).
    prompts: Vec<Vec<u32>>,
    prompt_tokens: usize,
    admission: Admission,
    usage: Usage,
    to: Arc<Recipient>,
    outcomes: Vec<Option<RowOutcome>>,
    events: EventLog,
    /// The batch keys of its rows.
    keys: Vec<Key>,
    /// The cached prefix it started with (unpinned when it ends).
    lease: Option<crate::prefix::PrefixLease>,
}

/// What the worker's sinks share: the requests in flight, and the step's output.
struct State {
    flights: HashMap<u64, InFlight>,
    /// Events of this step for non-lockstep clients, sent after the step in one go.
    outbox: Deliveries,
    /// The relay's inbox, when the service has one.
    relay: Option<tokio::sync::mpsc::UnboundedSender<Deliveries>>,
    /// Component names of the decode core's three blocks.
    names: [String; 3],
    has_tokenizer: bool,
}

impl State {
    /// Send `event` to `to`: at once to a lockstep client, else after the step.
    fn deliver(&mut self, to: &Arc<Recipient>, event: Event) {
        if to.lockstep() {
            to.send(event);
        } else {
            self.outbox.push((to.clone(), event));
        }
    }

    /// Send the step's events: to the relay as one message, or each to its ticket.
    fn flush(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        let step = std::mem::take(&mut self.outbox);
        let step = match &self.relay {
            Some(relay) => match relay.send(step) {
                Ok(()) => return,
                // The runtime is gone: send them here.
                Err(e) => e.0,
            },
            None => step,
        };
        for (to, event) in step {
            to.send(event);
        }
    }
}

/// The sink of one row of a decode-core request.
struct RowSink {
    request: u64,
    row: usize,
    step: usize,
    state: Rc<RefCell<State>>,
}

impl Sink for RowSink {
    fn token(&mut self, piece: Piece<'_>) -> Flow {
        let to = {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            let Some(flight) = st.flights.get_mut(&self.request) else {
                return Flow::Stop;
            };
            for (which, component) in st.names.iter().enumerate() {
                flight.events.events.push(LogEvent::Invoke {
                    step: format!("decode_core.row[{}]", self.row),
                    iteration: vec![self.step],
                    component: component.clone(),
                    implementation: [
                        "native:token_embedding",
                        "native:llama_decoder",
                        "native:lm_head",
                    ][which]
                        .to_string(),
                });
            }
            let to = flight.to.clone();
            st.deliver(
                &to,
                Event::Token(Token {
                    row: self.row,
                    id: piece.id,
                    text: piece.text.to_string(),
                    logprobs: piece.logprobs.cloned(),
                }),
            );
            to
        };
        self.step += 1;
        if to.cancelled() {
            return Flow::Continue;
        }
        to.answer()
    }

    fn finish(&mut self, done: Done<'_>) {
        let mut st = self.state.borrow_mut();
        let has_tokenizer = st.has_tokenizer;
        let Some(flight) = st.flights.get_mut(&self.request) else {
            return;
        };
        let outcome = match done.finish {
            Ok(finish) => Ok((
                Completion {
                    tokens: done.tokens.to_vec(),
                    text: has_tokenizer.then(|| done.text.to_string()),
                    finish,
                },
                (done.ttft.unwrap_or(0.0), done.decode_secs),
            )),
            Err(message) => Err(ModelError::Step { message }),
        };
        flight.outcomes[self.row] = Some(outcome);
    }
}

/// The worker: its batch, the requests in it, and the keys of their rows.
struct Worker {
    shared: Arc<Shared>,
    core: Arc<Core>,
    batch: Result<Batch<'static>, String>,
    state: Rc<RefCell<State>>,
    /// Batch key → (request, row).
    rows: HashMap<Key, (u64, usize)>,
    next_key: Key,
    next_request: u64,
    secs_per_step: Option<f64>,
}

/// Run the worker until the service stops and its batch is empty.
pub(super) fn run(shared: Arc<Shared>, jobs: std_mpsc::Receiver<Option<Job>>) {
    let core = shared.core.clone();
    let batch = match core.decode_model() {
        Some((model, _)) => {
            let usage = core.scheduler().usage();
            let context = model.config().context_len;
            let running = usage.max_running.clamp(1, 1 << 16);
            // The KV cache holds what the budget admits (pages are allocated as they fill).
            let cap = context.saturating_mul(running).saturating_mul(4);
            let tokens = usage
                .bytes_per_token
                .map_or(cap, |bpt| {
                    (usage.limit_bytes / bpt).min(cap as u64) as usize
                })
                .max(1);
            Batch::with_kv_dtype(
                model.clone(),
                core.tokenizer_arc().cloned(),
                tokens,
                running.saturating_mul(16).saturating_add(256),
                core.kv_dtype(),
            )
            .map(|b| {
                let b = b.with_chunk(shared.options.chunk);
                match &shared.prefix {
                    Some(p) => b.with_prefix_cache(p.clone()),
                    None => b,
                }
            })
            .map_err(|e| format!("the KV cache: {e}"))
        }
        None => Err("the engine has no decode core".to_string()),
    };
    let names = core
        .decode_model()
        .map(|(_, n)| n.clone())
        .unwrap_or_default();
    let state = Rc::new(RefCell::new(State {
        flights: HashMap::new(),
        outbox: Vec::new(),
        relay: shared.relay.clone(),
        names,
        has_tokenizer: core.tokenizer_arc().is_some(),
    }));
    let mut w = Worker {
        shared,
        core,
        batch,
        state,
        rows: HashMap::new(),
        next_key: 0,
        next_request: 0,
        secs_per_step: None,
    };
    w.main_loop(&jobs);
}

impl Worker {
    fn batch_is_empty(&self) -> bool {
        self.batch.as_ref().map_or(true, Batch::is_empty)
    }

    fn main_loop(&mut self, jobs: &std_mpsc::Receiver<Option<Job>>) {
        let mut open = true;
        loop {
            // New admitted jobs: wait only when the batch is idle.
            if self.batch_is_empty() && open {
                let queued = !lock(&self.shared.waiting).is_empty();
                let got = if queued {
                    jobs.recv_timeout(QUEUE_POLL).map_err(|e| match e {
                        std_mpsc::RecvTimeoutError::Timeout => false,
                        std_mpsc::RecvTimeoutError::Disconnected => true,
                    })
                } else {
                    jobs.recv().map_err(|_| true)
                };
                match got {
                    Ok(Some(job)) => self.dispatch(job),
                    Ok(None) => {}
                    Err(gone) => open &= !gone,
                }
            }
            loop {
                match jobs.try_recv() {
                    Ok(Some(job)) => self.dispatch(job),
                    Ok(None) => {}
                    Err(std_mpsc::TryRecvError::Empty) => break,
                    Err(std_mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            self.admit_queued(open);
            if self.batch_is_empty() {
                if !open {
                    return;
                }
                continue;
            }
            self.step();
        }
    }

    /// Queued requests whose turn has come (FIFO), or all of them refused when draining.
    fn admit_queued(&mut self, open: bool) {
        let scheduler = self.core.scheduler().clone();
        let ready: Vec<Job> = {
            let mut waiting = lock(&self.shared.waiting);
            if !open || self.shared.draining.load(Ordering::SeqCst) {
                for (id, pending) in waiting.drain() {
                    let _ = scheduler.cancel(id);
                    pending.to.send(Event::Refused(EngineError::ShuttingDown));
                }
                return;
            }
            if let Some(prefix) = &self.shared.prefix
                && let Some(head) = waiting.values().next().map(|p| p.planned.demand)
            {
                // Cached pages nobody uses give way before the queue's head waits on.
                while scheduler.short_of_bytes(&head) && prefix.evict_one() {
                    scheduler.release_cached(prefix.page_bytes());
                }
            }
            let mut ready = Vec::new();
            for admission in scheduler.admit_ready() {
                match waiting.remove(&admission.id) {
                    Some(p) => ready.push(Job {
                        req: p.req,
                        planned: p.planned,
                        admission,
                        usage: scheduler.usage(),
                        to: p.to,
                    }),
                    // Cancelled between the queue and here.
                    None => {
                        let _ = scheduler.complete(admission.id);
                    }
                }
            }
            ready
        };
        for job in ready {
            self.dispatch(job);
        }
    }

    /// Start an admitted job: tell its client, then run it on its route.
    fn dispatch(&mut self, job: Job) {
        let Job {
            req,
            planned,
            admission,
            usage,
            to,
        } = job;
        let scheduler = self.core.scheduler().clone();
        to.send(Event::Admitted(Admitted {
            route: planned.plan.route,
            reserved_bytes: admission.reserved_bytes,
            max_new_tokens: admission.max_new_tokens,
            budget_cap: admission.budget_cap,
            usage,
            prompt_tokens: planned.rows[0].len(),
        }));
        to.answer();
        if to.cancelled() {
            let _ = scheduler.complete(admission.id);
            return;
        }
        match planned.plan.route {
            Route::Interpreter => self.interpret(req, planned, admission, usage, to),
            Route::DecodeCore => self.join(req, planned, admission, usage, to),
        }
    }

    /// An interpreter request runs on a thread of its own; it releases its reservation and
    /// sends its result when it ends.
    fn interpret(
        &mut self,
        _req: crate::request::GenerateRequest,
        planned: crate::funnel::Planned,
        admission: Admission,
        usage: Usage,
        to: Arc<Recipient>,
    ) {
        let core = self.core.clone();
        let run = move || {
            let mut plan = planned.plan;
            let rows = planned.rows;
            let outcome = core.run_interpreter(
                &mut plan,
                &rows,
                admission.max_new_tokens,
                admission.budget_cap.is_some(),
                &mut |row, piece| {
                    to.send(Event::Token(Token {
                        row,
                        id: piece.id,
                        text: piece.text.to_string(),
                        logprobs: piece.logprobs.cloned(),
                    }));
                    match to.lockstep() {
                        true => to.answer(),
                        false if to.cancelled() => Flow::Stop,
                        false => Flow::Continue,
                    }
                },
            );
            let released = core.scheduler().complete(admission.id);
            let result = outcome.and_then(|(completions, events, (prefill_secs, decode_secs))| {
                released.map_err(EngineError::Release)?;
                Ok(GenerateResult {
                    route: plan.route,
                    prompt_tokens: rows[0].len(),
                    carried_tokens: plan.carried,
                    extra_positions: plan.extra_positions(),
                    rows: completions,
                    prefill_secs,
                    decode_secs,
                    reserved_bytes: admission.reserved_bytes,
                    budget_cap: admission.budget_cap,
                    usage,
                    events,
                    cached_tokens: 0,
                })
            });
            to.send(Event::Finished(result));
        };
        if let Err(e) = std::thread::Builder::new()
            .name("genai-interpreter".into())
            .spawn(run)
        {
            // The closure (and its client) is gone with the failed spawn: release here.
            let _ = self.core.scheduler().complete(admission.id);
            let _ = e;
        }
    }

    /// A decode-core request: each row joins the batch as one sequence.
    fn join(
        &mut self,
        req: crate::request::GenerateRequest,
        planned: crate::funnel::Planned,
        admission: Admission,
        usage: Usage,
        to: Arc<Recipient>,
    ) {
        let crate::funnel::Planned {
            plan, rows, lease, ..
        } = planned;
        let cached: Vec<usize> = lease
            .as_ref()
            .map(|l| l.pages().to_vec())
            .unwrap_or_default();
        let carried = plan
            .session
            .as_ref()
            .map(|(_, s)| s.history.clone())
            .unwrap_or_default();
        let prompts: Vec<Vec<u32>> = rows
            .iter()
            .map(|row| {
                let mut p = carried.clone();
                p.extend_from_slice(row);
                p
            })
            .collect();
        let request = self.next_request;
        self.next_request += 1;
        let n = prompts.len();
        self.state.borrow_mut().flights.insert(
            request,
            InFlight {
                plan,
                prompts: prompts.clone(),
                prompt_tokens: rows[0].len(),
                admission,
                usage,
                to: to.clone(),
                outcomes: (0..n).map(|_| None).collect(),
                events: EventLog::default(),
                keys: Vec::new(),
                lease,
            },
        );
        let batch = match &mut self.batch {
            Ok(b) => b,
            Err(message) => {
                let message = message.clone();
                if let Some(f) = self.state.borrow_mut().flights.get_mut(&request) {
                    for o in &mut f.outcomes {
                        *o = Some(Err(ModelError::Step {
                            message: message.clone(),
                        }));
                    }
                }
                self.end(request);
                return;
            }
        };
        for (row, prompt) in prompts.into_iter().enumerate() {
            let spec = SeqSpec {
                prompt,
                max_new_tokens: admission.max_new_tokens,
                capped: admission.budget_cap.is_some(),
                sampling: req.sampling.clone(),
                stop: req.stop.clone(),
                stop_at_eog: req.stop_at_eog,
                logprobs: req.logprobs,
                constraint: req.constraint.clone(),
            };
            let key = self.next_key;
            self.next_key += 1;
            let sink = RowSink {
                request,
                row,
                step: 0,
                state: self.state.clone(),
            };
            let shared_pages: &[usize] = if row == 0 { &cached } else { &[] };
            match batch.join_cached(
                key,
                spec,
                shared_pages,
                Box::new(sink),
                Some(to.cancel.clone()),
            ) {
                Ok(()) => {
                    self.rows.insert(key, (request, row));
                    if let Some(f) = self.state.borrow_mut().flights.get_mut(&request) {
                        f.keys.push(key);
                    }
                }
                Err(e) => {
                    if let Some(f) = self.state.borrow_mut().flights.get_mut(&request) {
                        f.outcomes[row] = Some(Err(e));
                    }
                }
            }
        }
        // Rows that could not join end the request once the others do (or now).
        self.end_if_done(request);
    }

    /// One batch step, its output sent, ended requests completed, the figures published.
    fn step(&mut self) {
        let started = Instant::now();
        let Ok(batch) = &mut self.batch else {
            return;
        };
        let (_, ended) = batch.step();
        let mut requests = Vec::new();
        for key in ended {
            if let Some((request, _)) = self.rows.remove(&key) {
                requests.push(request);
            }
        }
        for request in requests {
            self.end_if_done(request);
        }
        self.state.borrow_mut().flush();
        if let Some(rest) = self
            .shared
            .options
            .step_interval
            .checked_sub(started.elapsed())
        {
            std::thread::sleep(rest);
        }
        let took = started.elapsed().as_secs_f64();
        self.secs_per_step = Some(
            self.secs_per_step
                .map_or(took, |mean| mean + STEP_TIME_WEIGHT * (took - mean)),
        );
        self.publish();
    }

    /// The figures `Retry-After` and `genai bench` read.
    fn publish(&self) {
        let Ok(batch) = &self.batch else {
            return;
        };
        let st = self.state.borrow();
        let mut by_reservation: HashMap<ReservationId, u64> = HashMap::new();
        for (key, steps) in batch.steps_left() {
            let Some((request, _)) = self.rows.get(&key) else {
                continue;
            };
            let Some(f) = st.flights.get(request) else {
                continue;
            };
            let e = by_reservation.entry(f.admission.id).or_insert(0);
            *e = (*e).max(steps);
        }
        let (decode_tokens, decode_time) = batch.decode_totals();
        *lock(&self.shared.stats) = ServiceStats {
            steps_left: by_reservation.into_iter().collect(),
            secs_per_step: self.secs_per_step,
            decode_tokens,
            decode_secs: decode_time.as_secs_f64(),
        };
    }

    /// End `request` if every row has ended.
    fn end_if_done(&mut self, request: u64) {
        let done = self
            .state
            .borrow()
            .flights
            .get(&request)
            .is_some_and(|f| f.outcomes.iter().all(Option::is_some));
        if done {
            self.end(request);
        }
    }

    /// Release `request`'s reservation, keep its session, and send its result.
    fn end(&mut self, request: u64) {
        let Some(f) = self.state.borrow_mut().flights.remove(&request) else {
            return;
        };
        let InFlight {
            mut plan,
            prompts,
            prompt_tokens,
            admission,
            usage,
            to,
            outcomes,
            events,
            keys,
            lease,
        } = f;
        let cached_tokens = lease.as_ref().map_or(0, |l| l.positions());
        drop(lease);
        // The pages the prefix cache kept from its rows become the cache's bytes.
        let (kept, page_bytes) = match (&mut self.batch, &self.shared.prefix) {
            (Ok(b), Some(p)) => (
                keys.iter().map(|&k| b.take_kept(k) as u64).sum::<u64>(),
                p.page_bytes(),
            ),
            _ => (0, 0),
        };
        // 8. complete: before the client can see the result.
        let released = self
            .core
            .scheduler()
            .complete_keeping(admission.id, kept * page_bytes);
        let result = (|| {
            let mut completions = Vec::with_capacity(outcomes.len());
            let mut timing = (0.0, 0.0);
            for (row, outcome) in outcomes.into_iter().enumerate() {
                let (completion, t) = outcome
                    .unwrap_or_else(|| {
                        Err(ModelError::Step {
                            message: "the row never ended".into(),
                        })
                    })
                    .map_err(EngineError::DecodeCore)?;
                if row == 0 {
                    timing = t;
                }
                completions.push(completion);
            }
            released.map_err(EngineError::Release)?;
            if let Some((id, mut state)) = plan.session.take() {
                state.history = prompts[0].clone();
                state.history.extend_from_slice(&completions[0].tokens);
                self.core.keep_session(id, state);
            }
            Ok(GenerateResult {
                route: plan.route,
                prompt_tokens,
                carried_tokens: plan.carried,
                extra_positions: plan.extra_positions(),
                rows: completions,
                prefill_secs: timing.0,
                decode_secs: timing.1,
                reserved_bytes: admission.reserved_bytes,
                budget_cap: admission.budget_cap,
                usage,
                events,
                cached_tokens,
            })
        })();
        self.state
            .borrow_mut()
            .deliver(&to, Event::Finished(result));
    }
}
