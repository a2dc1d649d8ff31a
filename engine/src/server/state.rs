//! What the handlers, the loader and the batch worker share: the loaded app, the router's state, and a request's output for its handler.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use axum::response::Response;

use super::http::unavailable;
use super::metrics::Metrics;
use crate::chat::ChatTemplate;
use crate::kernels::logprob::TokenLogprobs;
use crate::runtime::{Engine, Finish};

/// One request's output for its handler (from its [`super::feed::Feed`]).
#[derive(Debug)]
pub(super) enum Out {
    /// A token: the text it releases, and its log probabilities when asked for.
    Token(String, Option<TokenLogprobs>),
    /// The end: generated tokens, the remaining text, why.
    Done {
        completion_tokens: usize,
        /// Prompt tokens taken from the prefix cache.
        cached_tokens: usize,
        tail: String,
        finish: Result<Finish, String>,
    },
    /// Refused after waiting (shutdown): status and message.
    Refused(StatusCode, String),
}

/// The loaded model and everything the handlers share.
pub(super) struct App {
    pub(super) engine: Arc<Engine>,
    pub(super) template: Option<ChatTemplate>,
    pub(super) model_name: String,
    pub(super) created: u64,
    pub(super) context_len: usize,
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
