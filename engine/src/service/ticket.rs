//! A client's ticket: the events of one submitted request, its cancellation, and the answers of a lockstep client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;

use super::{Admitted, Event, Shared};
use crate::batch::Piece;
use crate::flow::Flow;
use crate::request::{EngineError, GenerateResult, Route};
use crate::scheduler::ReservationId;

/// How a ticket's admission resolved.
#[derive(Debug)]
pub enum Resolution {
    /// Admitted; tokens and the result follow.
    Admitted(Admitted),
    /// Refused with this error; nothing follows.
    Refused(EngineError),
}

/// Errors of following a ticket.
#[derive(Debug, thiserror::Error)]
pub enum TicketError {
    /// The service stopped before the ticket was answered.
    #[error("the engine's service stopped before answering this ticket")]
    ServiceGone,
    /// An event arrived out of the documented order (a service fault).
    #[error("ticket protocol violated: {0}")]
    Protocol(String),
    /// Nothing arrived within the time given.
    #[error("no event within {0:?}")]
    Timeout(std::time::Duration),
}

/// A client's handle on one submitted request (see [`crate::service`]).
///
/// Events arrive in this order: at most one [`Event::Queued`], then exactly one of
/// [`Event::Admitted`] or [`Event::Refused`]; after `Admitted`, any number of
/// [`Event::Token`]s and exactly one [`Event::Finished`]. Dropping the ticket before its
/// end cancels the request and releases its reservation.
pub struct Ticket {
    rx: mpsc::UnboundedReceiver<Event>,
    answers: Option<std_mpsc::Sender<Flow>>,
    cancel: Arc<AtomicBool>,
    shared: Arc<Shared>,
    /// The reservation while the request waits in the queue.
    pub(super) queued: Option<ReservationId>,
    ended: bool,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("lockstep", &self.answers.is_some())
            .field("queued", &self.queued)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Ticket {
    pub(super) fn new(
        rx: mpsc::UnboundedReceiver<Event>,
        answers: Option<std_mpsc::Sender<Flow>>,
        cancel: Arc<AtomicBool>,
        shared: Arc<Shared>,
    ) -> Ticket {
        Ticket {
            rx,
            answers,
            cancel,
            shared,
            queued: None,
            ended: false,
        }
    }

    fn seen(&mut self, event: Option<Event>) -> Option<Event> {
        match &event {
            Some(Event::Refused(_) | Event::Finished(_)) | None => self.ended = true,
            Some(Event::Admitted(_)) => self.queued = None,
            _ => {}
        }
        event
    }

    /// The next event, blocking the calling thread (not for use inside an async task: use
    /// [`Ticket::recv`]). `None` once the service will send nothing more.
    pub fn next_event(&mut self) -> Option<Event> {
        let event = self.rx.blocking_recv();
        self.seen(event)
    }

    /// The next event, awaited. `None` once the service will send nothing more.
    pub async fn recv(&mut self) -> Option<Event> {
        let event = self.rx.recv().await;
        self.seen(event)
    }

    /// The next event if one is waiting now.
    pub fn try_next_event(&mut self) -> Option<Event> {
        let event = self.rx.try_recv().ok()?;
        self.seen(Some(event))
    }

    /// The next event if one arrives within `timeout` (polled every millisecond).
    ///
    /// # Errors
    /// [`TicketError::Timeout`] when nothing arrived in time, [`TicketError::ServiceGone`]
    /// when the service will send nothing more.
    pub fn next_event_timeout(
        &mut self,
        timeout: std::time::Duration,
    ) -> Result<Event, TicketError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            match self.rx.try_recv() {
                Ok(event) => return self.seen(Some(event)).ok_or(TicketError::ServiceGone),
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.ended = true;
                    return Err(TicketError::ServiceGone);
                }
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            if std::time::Instant::now() >= deadline {
                return Err(TicketError::Timeout(timeout));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// A lockstep client's answer to the admission (any value) or to a token (`Stop` ends
    /// the row after it). Ignored for other tickets.
    pub fn reply(&self, flow: Flow) {
        if let Some(tx) = &self.answers {
            let _ = tx.send(flow);
        }
    }

    /// Cancel the request: a queued one leaves the queue at once, a running one leaves the
    /// batch at its next step; either way its reservation is released.
    pub fn cancel(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some(id) = self.queued.take() {
            self.shared.leave_queue(id);
        }
    }

    /// Block until the admission resolves (skipping a `Queued`).
    ///
    /// # Errors
    /// [`TicketError::ServiceGone`], or [`TicketError::Protocol`] if a token or a result
    /// came first.
    pub fn admission(&mut self) -> Result<Resolution, TicketError> {
        loop {
            match self.next_event() {
                Some(Event::Queued { .. }) => continue,
                Some(Event::Admitted(a)) => return Ok(Resolution::Admitted(a)),
                Some(Event::Refused(e)) => return Ok(Resolution::Refused(e)),
                Some(other) => {
                    return Err(TicketError::Protocol(format!(
                        "{other:?} arrived before the admission"
                    )));
                }
                None => return Err(TicketError::ServiceGone),
            }
        }
    }

    /// Wait for the result, ignoring the streamed tokens.
    ///
    /// # Errors
    /// The refusal, the error the request failed with, or [`EngineError::ShuttingDown`]
    /// when the service stopped before answering.
    pub fn wait(self) -> Result<GenerateResult, EngineError> {
        self.follow(&mut |_| {}, &mut |_, _| Flow::Continue)
    }

    /// Follow the request to its end: `on_admitted(route)` once when it is admitted (never
    /// for a refused request), `on_token(row, piece)` for each token (its answer is the
    /// lockstep reply), then the result.
    ///
    /// # Errors
    /// As [`Ticket::wait`].
    pub fn follow(
        mut self,
        on_admitted: &mut dyn FnMut(Route),
        on_token: &mut dyn FnMut(usize, Piece<'_>) -> Flow,
    ) -> Result<GenerateResult, EngineError> {
        loop {
            match self.next_event() {
                Some(Event::Queued { .. }) => {}
                Some(Event::Admitted(a)) => {
                    on_admitted(a.route);
                    self.reply(Flow::Continue);
                }
                Some(Event::Token(t)) => {
                    let flow = on_token(
                        t.row,
                        Piece {
                            id: t.id,
                            text: &t.text,
                            logprobs: t.logprobs.as_ref(),
                        },
                    );
                    self.reply(flow);
                }
                Some(Event::Refused(e)) => return Err(e),
                Some(Event::Finished(r)) => return r,
                None => return Err(EngineError::ShuttingDown),
            }
        }
    }
}

impl Drop for Ticket {
    /// A ticket dropped before its end cancels its request.
    fn drop(&mut self) {
        if !self.ended {
            self.cancel();
        }
    }
}
