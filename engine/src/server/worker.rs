//! The batch worker: the thread that owns the continuous batch, and the outbox that hands each step's output to the request handlers.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::sync::mpsc;

use super::cancel::cancel_request;
use super::metrics::Metrics;
use super::state::{App, Job, Out, WorkerStats, admitted_job, lock};
use crate::batch::{Batch, Done, Piece, Sink};
use crate::flow::Flow;
use crate::scheduler::ReservationId;

/// Weight of the newest step in [`WorkerStats::secs_per_step`].
const STEP_TIME_WEIGHT: f64 = 0.2;

/// Where a request's output goes: its handler's channel, and its cancel flag for when the
/// handler has gone away.
pub(super) struct Recipient {
    tx: mpsc::UnboundedSender<Out>,
    cancel: Arc<AtomicBool>,
}

/// A step's output for the handlers, in the order the batch produced it.
pub(super) type Deliveries = Vec<(Arc<Recipient>, Out)>;

/// Hands each step's output to the handlers in one message: `deliver` gets the step's
/// [`Deliveries`] (nothing when the step produced none), and a task on the async runtime
/// ([`fan_out`]) passes them on. One wake-up of the runtime per step instead of one per
/// token: a wake-up from the batch thread lets the runtime's thread run on the batch
/// thread's core, and on a machine whose cores all run kernel threads each such switch
/// stalls the whole step (figures: docs/design.md §2.5).
struct Outbox {
    pending: std::cell::RefCell<Deliveries>,
    deliver: mpsc::UnboundedSender<Deliveries>,
}

impl Outbox {
    fn push(&self, to: &Arc<Recipient>, out: Out) {
        self.pending.borrow_mut().push((to.clone(), out));
    }

    /// Send what the last step produced.
    fn flush(&self) {
        let step = std::mem::take(&mut *self.pending.borrow_mut());
        if !step.is_empty() {
            // The runtime is gone only when the server is stopping: nobody is listening.
            let _ = self.deliver.send(step);
        }
    }
}

/// The runtime side of [`Outbox`]: each step's output to its handlers; a handler that has
/// gone away cancels its request.
pub(super) async fn fan_out(mut steps: mpsc::UnboundedReceiver<Deliveries>) {
    while let Some(step) = steps.recv().await {
        for (to, out) in step {
            if to.tx.send(out).is_err() {
                cancel_request(&to.cancel);
            }
        }
    }
}

/// The sink of one request in the batch: queues text for its handler in the worker's
/// [`Outbox`], records latencies.
struct JobSink {
    to: Arc<Recipient>,
    outbox: std::rc::Rc<Outbox>,
    metrics: Arc<Metrics>,
    arrived: Instant,
    last: Option<Instant>,
}

impl Sink for JobSink {
    fn token(&mut self, piece: Piece<'_>) -> Flow {
        let now = Instant::now();
        match self.last {
            None => self
                .metrics
                .ttft
                .observe((now - self.arrived).as_secs_f64()),
            Some(t) => self.metrics.token_latency.observe((now - t).as_secs_f64()),
        }
        self.last = Some(now);
        self.metrics.tokens.inc();
        // A handler that went away cancels its sequence (at once when the channel is
        // already closed; otherwise when the step's output finds it closed).
        if self.to.tx.is_closed() {
            cancel_request(&self.to.cancel);
        } else {
            self.outbox.push(
                &self.to,
                Out::Token(piece.text.to_string(), piece.logprobs.cloned()),
            );
        }
        Flow::Continue
    }

    fn finish(&mut self, done: Done<'_>) {
        self.outbox.push(
            &self.to,
            Out::Done {
                completion_tokens: done.tokens.len(),
                tail: done.tail.to_string(),
                finish: done.finish,
            },
        );
    }
}

/// The worker thread: owns the continuous batch; joins admitted jobs between steps,
/// admits queued ones as budget frees, releases reservations as sequences finish.
pub(super) fn worker(
    app: Arc<App>,
    metrics: Arc<Metrics>,
    jobs: std_mpsc::Receiver<Job>,
    mut batch: Batch<'static>,
    step_interval: Duration,
    deliver: mpsc::UnboundedSender<Deliveries>,
) {
    let outbox = std::rc::Rc::new(Outbox {
        pending: std::cell::RefCell::new(Vec::new()),
        deliver,
    });
    let scheduler = app.engine.scheduler().clone();
    let mut running: HashMap<u64, (ReservationId, Arc<AtomicBool>)> = HashMap::new();
    let mut next_key = 0u64;
    let mut open = true;
    let mut secs_per_step: Option<f64> = None;
    let mut join =
        |batch: &mut Batch<'static>,
         job: Job,
         running: &mut HashMap<u64, (ReservationId, Arc<AtomicBool>)>| {
            let key = next_key;
            next_key += 1;
            let sink = JobSink {
                to: Arc::new(Recipient {
                    tx: job.tx.clone(),
                    cancel: job.cancel.clone(),
                }),
                outbox: outbox.clone(),
                metrics: metrics.clone(),
                arrived: job.arrived,
                last: None,
            };
            match batch.join(key, job.spec, Box::new(sink), Some(job.cancel.clone())) {
                Ok(()) => {
                    running.insert(key, (job.reservation, job.cancel));
                }
                Err(e) => {
                    let _ = scheduler.complete(job.reservation);
                    let _ = job.tx.send(Out::Done {
                        completion_tokens: 0,
                        tail: String::new(),
                        finish: Err(e.to_string()),
                    });
                }
            }
        };
    loop {
        // New admitted jobs: wait only when idle.
        let first = if batch.is_empty() && open {
            match jobs.recv_timeout(Duration::from_millis(20)) {
                Ok(j) => Some(j),
                Err(std_mpsc::RecvTimeoutError::Timeout) => None,
                Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                    open = false;
                    None
                }
            }
        } else {
            None
        };
        if let Some(j) = first {
            join(&mut batch, j, &mut running);
        }
        loop {
            match jobs.try_recv() {
                Ok(j) => join(&mut batch, j, &mut running),
                Err(std_mpsc::TryRecvError::Empty) => break,
                Err(std_mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        // Queued jobs whose turn has come (FIFO), or all of them refused on shutdown.
        {
            let mut waiting = lock(&app.waiting);
            if app.draining.load(Ordering::SeqCst) {
                for (id, job) in waiting.drain() {
                    let _ = scheduler.cancel(id);
                    metrics.refused("shutting_down");
                    let _ = job.tx.send(Out::Refused(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the server is shutting down; the request was not started".into(),
                    ));
                }
            } else {
                for a in scheduler.admit_ready() {
                    match waiting.remove(&a.id) {
                        Some(job) => {
                            let job = admitted_job(
                                job.spec,
                                &a,
                                job.tx,
                                job.cancel,
                                job.arrived,
                                &metrics,
                            );
                            join(&mut batch, job, &mut running);
                        }
                        // Cancelled between the queue and here.
                        None => {
                            let _ = scheduler.complete(a.id);
                        }
                    }
                }
            }
        }
        if batch.is_empty() {
            if !open {
                return;
            }
            continue;
        }
        let started = Instant::now();
        let (_, ended) = batch.step();
        outbox.flush();
        for key in ended {
            if let Some((id, cancel)) = running.remove(&key) {
                if cancel.load(Ordering::SeqCst) {
                    metrics.cancellations.inc();
                }
                let _ = scheduler.complete(id);
            }
        }
        if let Some(rest) = step_interval.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
        let took = started.elapsed().as_secs_f64();
        secs_per_step =
            Some(secs_per_step.map_or(took, |mean| mean + STEP_TIME_WEIGHT * (took - mean)));
        let steps_left = batch
            .steps_left()
            .into_iter()
            .filter_map(|(key, steps)| running.get(&key).map(|&(id, _)| (id, steps)))
            .collect();
        *lock(&app.stats) = WorkerStats {
            steps_left,
            secs_per_step,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Finish;

    fn recipient() -> (
        Arc<Recipient>,
        mpsc::UnboundedReceiver<Out>,
        Arc<AtomicBool>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let recipient = Arc::new(Recipient {
            tx,
            cancel: cancel.clone(),
        });
        (recipient, rx, cancel)
    }

    fn text(out: &Out) -> String {
        match out {
            Out::Token(t, _) => t.clone(),
            Out::Done { tail, .. } => format!("done:{tail}"),
            Out::Refused(_, m) => format!("refused:{m}"),
        }
    }

    /// A step's output leaves the batch thread as one message, in the order the batch
    /// produced it, and a step that produced nothing sends nothing.
    #[test]
    fn a_step_reaches_the_runtime_as_one_message_in_batch_order() {
        let (deliver, mut steps) = mpsc::unbounded_channel();
        let outbox = Outbox {
            pending: std::cell::RefCell::new(Vec::new()),
            deliver,
        };
        let ((a, _ra, _), (b, _rb, _)) = (recipient(), recipient());
        outbox.push(&a, Out::Token("a1".into(), None));
        outbox.push(&b, Out::Token("b1".into(), None));
        outbox.push(
            &a,
            Out::Done {
                completion_tokens: 1,
                tail: "!".into(),
                finish: Ok(Finish::MaxTokens),
            },
        );
        outbox.flush();
        outbox.flush();
        let step = steps.try_recv().expect("one message for the step");
        let got: Vec<(bool, String)> = step
            .iter()
            .map(|(r, out)| (Arc::ptr_eq(r, &a), text(out)))
            .collect();
        assert_eq!(
            got,
            [
                (true, "a1".to_string()),
                (false, "b1".to_string()),
                (true, "done:!".to_string())
            ]
        );
        assert!(steps.try_recv().is_err(), "an empty step must send nothing");
    }

    /// The runtime side passes each output to its own handler; a handler that has gone
    /// away (its receiver dropped, as when the client disconnects) cancels its request,
    /// and the others still get theirs.
    #[tokio::test]
    async fn fan_out_delivers_per_request_and_cancels_a_request_whose_handler_is_gone() {
        let (deliver, steps) = mpsc::unbounded_channel();
        let task = tokio::spawn(fan_out(steps));
        let (a, mut ra, cancel_a) = recipient();
        let (b, rb, cancel_b) = recipient();
        drop(rb);
        deliver
            .send(vec![
                (a.clone(), Out::Token("x".into(), None)),
                (b.clone(), Out::Token("y".into(), None)),
                (a.clone(), Out::Token("z".into(), None)),
            ])
            .expect("the fan-out task is running");
        drop(deliver);
        task.await
            .expect("the fan-out task ends when the worker hangs up");
        let mut got = Vec::new();
        while let Ok(out) = ra.try_recv() {
            got.push(text(&out));
        }
        assert_eq!(got, ["x", "z"]);
        assert!(cancel_b.load(Ordering::SeqCst), "a gone handler cancels");
        assert!(
            !cancel_a.load(Ordering::SeqCst),
            "a live handler is not cancelled"
        );
    }
}
