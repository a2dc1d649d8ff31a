//! `genai serve`: an OpenAI-compatible HTTP server (axum on tokio) on the engine's admission funnel and continuous batch.
//!
//! Every generation request takes the engine's funnel: validate and encode
//! ([`Engine::prepare`](crate::runtime::Engine::prepare)), count, then admission against
//! the KV byte budget at the HTTP edge
//! ([`Scheduler::submit`](crate::scheduler::Scheduler::submit)):
//!
//! - admitted: the request joins the continuous [`Batch`](crate::batch::Batch) run by one
//!   worker thread;
//! - fits the budget later: it waits in the scheduler's FIFO queue, bounded by
//!   `max_queue`; a full queue answers `429` with `Retry-After`;
//! - can never fit: `400` with the byte arithmetic and the levers.
//!
//! A client that disconnects (or drops its stream) cancels its request: a queued one
//! leaves the queue, a running one leaves the batch at the next step, and its
//! reservation is released. Shutdown (the future given to [`serve`], SIGTERM in
//! `genai serve`) stops accepting, lets running requests finish, answers queued ones
//! `503`, and returns.
//!
//! `Retry-After` (whole seconds, at least 1) is when the queue's head is admitted if the
//! batch keeps its pace: the running requests' steps left
//! ([`Batch::steps_left`](crate::batch::Batch::steps_left)), the fewest releases in that
//! order after which the scheduler admits the head
//! ([`Scheduler::releases_before_admission`](crate::scheduler::Scheduler::releases_before_admission)),
//! times the measured seconds per worker step; 1 before the first step. See
//! `docs/serve.md`.
//!
//! The modules: `edge` (the listener, the router, the endpoints that do not generate),
//! `generate` (a generation request: built, then admitted, queued or refused) and `respond`
//! (its JSON or streamed answer), `tools` (a chat request's tools: its prompt, the grammar of
//! a forced call, the calls in OpenAI's shapes), `worker` (the thread that owns the batch), `load` (the
//! model and the worker's start), and what they share (`state`, `cancel`, `http`).

// Handlers return axum's `Response` as their error (it is what they answer), and
// `ServeError` carries the engine's errors by value, as `runtime` does.
#![allow(clippy::result_large_err)]

pub mod logprobs;
pub mod metrics;
pub mod openai;

mod edge;
mod feed;
mod generate;
mod http;
mod load;
mod respond;
mod state;
mod tools;

use std::path::PathBuf;
use std::time::Duration;

use crate::kv::KvDtype;
use crate::runtime::EngineError;

pub use edge::serve;

/// Tokens per sequence the default KV budget holds (`max_running` of them).
pub const DEFAULT_SEQ_TOKENS: u64 = 2048;

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A GGUF file or a package directory.
    pub model: PathBuf,
    /// Kernel threads (0: one per core).
    pub threads: usize,
    /// KV byte budget; `None`: `max_running` sequences of [`DEFAULT_SEQ_TOKENS`] tokens.
    pub kv_budget_bytes: Option<u64>,
    /// Requests running in the batch at once (≥ 1).
    pub max_running: usize,
    /// Requests waiting for KV budget at once; one more is answered 429.
    pub max_queue: usize,
    /// Largest accepted request body, in bytes (larger: 413).
    pub max_body_bytes: usize,
    /// Prefill chunk, in tokens.
    pub chunk: usize,
    /// Pace of the batch: a step starts no sooner than this after the previous one
    /// started (zero: as fast as the model runs). Lets a demonstration or a test hold
    /// requests running on a tiny model.
    pub step_interval: Duration,
    /// Element type of the KV cache; the default budget's bytes follow it.
    pub kv_dtype: KvDtype,
    /// Keep the KV pages of finished requests for later requests that start with the same
    /// tokens (a chat's history, a shared system prompt): see
    /// [`crate::service::ServiceOptions::prefix_cache`].
    pub prefix_cache: bool,
}

impl ServerConfig {
    /// Defaults for `model`: 4 running, 16 queued, 1 MiB bodies, 64-token chunks, the f16
    /// KV cache, the prefix cache on.
    pub fn new(model: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            model: model.into(),
            threads: 0,
            kv_budget_bytes: None,
            max_running: 4,
            max_queue: 16,
            max_body_bytes: 1 << 20,
            chunk: crate::batch::DEFAULT_CHUNK,
            step_interval: Duration::ZERO,
            kv_dtype: crate::kv::KV_DTYPE,
            prefix_cache: true,
        }
    }
}

/// What the loaded server prints at start: the budget in bytes and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The KV byte budget.
    pub bytes: u64,
    /// Bytes per token position.
    pub bytes_per_token: u64,
    /// Token positions the budget holds.
    pub tokens: u64,
    /// Requests running at once.
    pub max_running: usize,
    /// Requests waiting at once.
    pub max_queue: usize,
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KV budget {} bytes = {} tokens at {} bytes per token; at most {} running, {} queued",
            self.bytes, self.tokens, self.bytes_per_token, self.max_running, self.max_queue
        )
    }
}

/// Errors of loading the server's model.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The engine failed to load.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The model cannot serve the OpenAI endpoints.
    #[error("{0}")]
    Unservable(String),
}
