//! The in-process server loop: a worker thread owns the [`Engine`], clients submit requests and get tickets that resolve once (admitted or refused), then stream tokens and the result.
//!
//! Admission is the engine's (the one funnel); the driver only decides what to do
//! with a refusal. A request that can never fit the limit ([`AdmissionError::NeverFits`])
//! and any other error before admission resolve the ticket as refused at once. A
//! request refused for now ([`AdmissionError::is_not_now`]: the budget is held by
//! other holders of a shared scheduler, or the running batch is full) waits in the
//! driver's FIFO queue; only the head is retried, so a later request never jumps an
//! earlier one.

// EngineError carries the typed errors of the model, package and interpreter by value;
// boxing them is a follow-up (see the report).
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::flow::Flow;
use crate::runtime::{Engine, EngineError, GenerateRequest, GenerateResult, Route};

/// How often the head of the wait queue is retried while it waits for KV bytes.
const RETRY: Duration = Duration::from_millis(5);

/// What a ticket receives, in this order: exactly one of `Admitted` or `Refused`;
/// after `Admitted`, any number of `Token`s then exactly one `Finished`.
#[derive(Debug)]
pub enum TicketEvent {
    /// The scheduler admitted the request; it runs on `route`.
    Admitted(Route),
    /// The request was not admitted (or was invalid); nothing ran.
    Refused(EngineError),
    /// A generated token of row `row`.
    Token {
        /// The token row.
        row: usize,
        /// The token id.
        id: u32,
    },
    /// The admitted request ended: its result, or the error it failed with after admission.
    Finished(Result<GenerateResult, EngineError>),
}

/// How a ticket's admission resolved.
#[derive(Debug)]
pub enum Resolution {
    /// Admitted on this route; tokens and the result follow.
    Admitted(Route),
    /// Refused with this error; nothing follows.
    Refused(EngineError),
}

/// Errors of waiting on a ticket.
#[derive(Debug, thiserror::Error)]
pub enum TicketError {
    /// The worker stopped before the ticket was answered (the driver shut down or panicked).
    #[error("the driver's worker stopped before answering this ticket")]
    WorkerGone,
    /// An event arrived out of the documented order (a driver fault).
    #[error("ticket protocol violated: {0}")]
    Protocol(String),
}

/// A client's handle on one submitted request.
#[derive(Debug)]
pub struct Ticket {
    rx: Receiver<TicketEvent>,
}

impl Ticket {
    /// The next event, blocking. `None` when the worker will send nothing more.
    pub fn next_event(&self) -> Option<TicketEvent> {
        self.rx.recv().ok()
    }

    /// The next event if one arrives within `timeout`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] when nothing arrived in time,
    /// [`RecvTimeoutError::Disconnected`] when the worker will send nothing more.
    pub fn next_event_timeout(&self, timeout: Duration) -> Result<TicketEvent, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    /// Block until admission resolves.
    ///
    /// # Errors
    /// [`TicketError::WorkerGone`], or [`TicketError::Protocol`] if a token or a
    /// result came before the admission.
    pub fn admission(&self) -> Result<Resolution, TicketError> {
        match self.rx.recv() {
            Ok(TicketEvent::Admitted(route)) => Ok(Resolution::Admitted(route)),
            Ok(TicketEvent::Refused(e)) => Ok(Resolution::Refused(e)),
            Ok(other) => Err(TicketError::Protocol(format!(
                "{other:?} arrived before the admission"
            ))),
            Err(_) => Err(TicketError::WorkerGone),
        }
    }

    /// After [`Ticket::admission`] resolved `Admitted`: collect the streamed tokens
    /// of each row and the final result.
    ///
    /// # Errors
    /// [`TicketError::WorkerGone`], or [`TicketError::Protocol`] on a second admission
    /// resolution or anything after `Finished`.
    #[allow(clippy::type_complexity)]
    pub fn finish(
        self,
    ) -> Result<(Vec<(usize, u32)>, Result<GenerateResult, EngineError>), TicketError> {
        let mut tokens = Vec::new();
        loop {
            match self.rx.recv() {
                Ok(TicketEvent::Token { row, id }) => tokens.push((row, id)),
                Ok(TicketEvent::Finished(result)) => {
                    if let Ok(extra) = self.rx.recv() {
                        return Err(TicketError::Protocol(format!(
                            "{extra:?} arrived after the result"
                        )));
                    }
                    return Ok((tokens, result));
                }
                Ok(other) => {
                    return Err(TicketError::Protocol(format!(
                        "{other:?} arrived after the admission resolved"
                    )));
                }
                Err(_) => return Err(TicketError::WorkerGone),
            }
        }
    }
}

struct Job {
    request: GenerateRequest,
    tx: Sender<TicketEvent>,
}

/// The server loop: one worker thread owning the engine.
#[derive(Debug)]
pub struct Driver {
    jobs: Option<Sender<Job>>,
    worker: Option<JoinHandle<Engine>>,
}

impl Driver {
    /// Start the worker thread; it owns `engine` until [`Driver::shutdown`].
    pub fn spawn(engine: Engine) -> Driver {
        let (jobs, rx) = mpsc::channel::<Job>();
        let worker = std::thread::spawn(move || serve(engine, rx));
        Driver {
            jobs: Some(jobs),
            worker: Some(worker),
        }
    }

    /// Submit a request; the ticket resolves once, admitted or refused.
    pub fn submit(&self, request: GenerateRequest) -> Ticket {
        let (tx, rx) = mpsc::channel();
        let job = Job { request, tx };
        if let Some(jobs) = &self.jobs
            && let Err(mpsc::SendError(job)) = jobs.send(job)
        {
            // The worker is gone: dropping the sender makes the ticket report WorkerGone.
            drop(job);
        }
        Ticket { rx }
    }

    /// Stop accepting requests, let the worker serve what was submitted, and return
    /// the engine. Requests still waiting for KV bytes are refused with their
    /// not-now error (the driver never hangs on a budget held elsewhere).
    ///
    /// Returns `None` if the worker panicked.
    pub fn shutdown(mut self) -> Option<Engine> {
        self.jobs.take();
        self.worker.take().and_then(|w| w.join().ok())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// What one attempt of the head job came to.
enum Attempt {
    /// Admitted (and run) or refused for good: the ticket is answered.
    Done,
    /// Refused for now: keep the job at the head of the queue.
    Wait(Job, EngineError),
}

fn serve(engine: Engine, rx: Receiver<Job>) -> Engine {
    let mut queue: VecDeque<Job> = VecDeque::new();
    let mut open = true;
    while open || !queue.is_empty() {
        // Take every submitted job into the FIFO queue (block only when idle).
        let next = if queue.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else if open {
            rx.recv_timeout(RETRY)
        } else {
            std::thread::sleep(RETRY);
            Err(RecvTimeoutError::Timeout)
        };
        match next {
            Ok(job) => arrive(&engine, &mut queue, job),
            Err(RecvTimeoutError::Disconnected) => open = false,
            Err(RecvTimeoutError::Timeout) => {}
        }
        while let Ok(job) = rx.try_recv() {
            arrive(&engine, &mut queue, job);
        }
        // Serve from the head while it is admitted or refused for good.
        while let Some(job) = queue.pop_front() {
            match attempt(&engine, job) {
                Attempt::Done => {}
                // Shut down: a job still waiting for bytes is refused with its
                // not-now error rather than left hanging.
                Attempt::Wait(job, e) if !open => {
                    let _ = job.tx.send(TicketEvent::Refused(e));
                }
                Attempt::Wait(job, _) => {
                    queue.push_front(job);
                    break;
                }
            }
        }
    }
    engine
}

/// A new job joins the FIFO queue, unless it can never be admitted: then, even while
/// earlier jobs wait, its ticket is refused at once. The never-fits check is the
/// scheduler's own ([`crate::scheduler::Scheduler::enqueue`] refuses such a demand;
/// an accepted probe is cancelled at once).
fn arrive(engine: &Engine, queue: &mut VecDeque<Job>, job: Job) {
    if queue.is_empty() {
        queue.push_back(job);
        return;
    }
    let probe = engine
        .demand(&job.request)
        .and_then(|d| engine.scheduler().enqueue(&d).map_err(EngineError::Refused));
    match probe {
        Ok(id) => {
            // A probe id is ours and still queued: cancelling it cannot fail.
            let _ = engine.scheduler().cancel(id);
            queue.push_back(job);
        }
        Err(e) => {
            let _ = job.tx.send(TicketEvent::Refused(e));
        }
    }
}

fn attempt(engine: &Engine, job: Job) -> Attempt {
    let tx = &job.tx;
    let mut admitted = false;
    let result = engine.generate_with(
        &job.request,
        &mut |route| {
            admitted = true;
            let _ = tx.send(TicketEvent::Admitted(route));
        },
        &mut |row, id| {
            // A client that dropped its ticket stops the generation.
            match tx.send(TicketEvent::Token { row, id }) {
                Ok(()) => Flow::Continue,
                Err(_) => Flow::Stop,
            }
        },
    );
    if admitted {
        let _ = tx.send(TicketEvent::Finished(result));
        return Attempt::Done;
    }
    match result {
        Err(EngineError::Refused(e)) if e.is_not_now() => {
            Attempt::Wait(job, EngineError::Refused(e))
        }
        Err(e) => {
            let _ = tx.send(TicketEvent::Refused(e));
            Attempt::Done
        }
        Ok(r) => {
            // Unreachable while the engine signals every admission; answer the ticket
            // rather than leave the client waiting.
            let _ = tx.send(TicketEvent::Admitted(r.route));
            let _ = tx.send(TicketEvent::Finished(Ok(r)));
            Attempt::Done
        }
    }
}
