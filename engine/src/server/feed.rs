//! A request's ticket at the HTTP edge: the service's events as the handler's output, the metrics they feed, and the cancellation a gone client causes.

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;

use super::metrics::Metrics;
use super::state::Out;
use crate::runtime::EngineError;
use crate::service::{Admitted, Event, Ticket};

/// How a request's admission resolved, at the edge.
pub(super) enum Start {
    /// Admitted at once: its prompt tokens.
    Admitted(Admitted),
    /// Waiting in the service's queue: its prompt tokens.
    Queued(usize),
    /// Refused: the error to answer with.
    Refused(EngineError),
}

/// A request's events for its handler. Dropping it before the request ended (the client
/// went away) drops the ticket, which cancels the request and releases its reservation.
pub(super) struct Feed {
    ticket: Ticket,
    metrics: Arc<Metrics>,
    arrived: Instant,
    last: Option<Instant>,
    /// Text sent with tokens so far (what the result's text starts with).
    released: usize,
    ended: bool,
}

impl Feed {
    pub(super) fn new(ticket: Ticket, metrics: Arc<Metrics>, arrived: Instant) -> Feed {
        Feed {
            ticket,
            metrics,
            arrived,
            last: None,
            released: 0,
            ended: false,
        }
    }

    fn admitted(&self, a: &Admitted) {
        self.metrics.admissions.inc();
        if a.budget_cap.is_some() {
            self.metrics.clamps.inc();
        }
    }

    /// Wait for the admission to resolve.
    pub(super) async fn start(&mut self) -> Start {
        match self.ticket.recv().await {
            Some(Event::Admitted(a)) => {
                self.admitted(&a);
                Start::Admitted(a)
            }
            Some(Event::Queued { prompt_tokens, .. }) => Start::Queued(prompt_tokens),
            Some(Event::Refused(e)) => {
                self.ended = true;
                Start::Refused(e)
            }
            // The service sends nothing else first; nothing at all when it stopped.
            Some(_) | None => {
                self.ended = true;
                Start::Refused(EngineError::ShuttingDown)
            }
        }
    }

    /// The next output for the handler; `None` once the service sends nothing more.
    pub(super) async fn recv(&mut self) -> Option<Out> {
        loop {
            match self.ticket.recv().await? {
                Event::Queued { .. } => {}
                Event::Admitted(a) => self.admitted(&a),
                Event::Token(t) => {
                    let now = Instant::now();
                    match self.last {
                        None => self
                            .metrics
                            .ttft
                            .observe((now - self.arrived).as_secs_f64()),
                        Some(last) => self
                            .metrics
                            .token_latency
                            .observe((now - last).as_secs_f64()),
                    }
                    self.last = Some(now);
                    self.metrics.tokens.inc();
                    self.released += t.text.len();
                    return Some(Out::Token(t.text, t.logprobs));
                }
                Event::Refused(e) => {
                    self.ended = true;
                    self.metrics.refused("shutting_down");
                    return Some(Out::Refused(StatusCode::SERVICE_UNAVAILABLE, e.to_string()));
                }
                Event::Finished(r) => {
                    self.ended = true;
                    return Some(match r {
                        Ok(result) => {
                            let row = &result.rows[0];
                            let text = row.text.as_deref().unwrap_or("");
                            Out::Done {
                                completion_tokens: row.tokens.len(),
                                cached_tokens: result.cached_tokens,
                                tail: text.get(self.released..).unwrap_or("").to_string(),
                                finish: Ok(row.finish.clone()),
                            }
                        }
                        Err(e) => Out::Done {
                            completion_tokens: 0,
                            cached_tokens: 0,
                            tail: String::new(),
                            finish: Err(e.to_string()),
                        },
                    });
                }
            }
        }
    }
}

impl Drop for Feed {
    /// A handler gone before its request ended: the client went away.
    fn drop(&mut self) {
        if !self.ended {
            self.metrics.cancellations.inc();
        }
    }
}
