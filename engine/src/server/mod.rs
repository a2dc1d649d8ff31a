//! `genai serve`: an OpenAI-compatible HTTP server (axum on tokio), a client of the engine's one service (queue, admission, continuous batch).
//!
//! Every generation request is submitted to the engine's service
//! ([`Engine::submit`](crate::runtime::Engine::submit), docs/design.md §2.1), which
//! validates, encodes, counts and admits it like every other front end's; the server only
//! translates the ticket:
//!
//! - admitted (at once or from the queue): its tokens as one JSON body or server-sent
//!   events;
//! - queued: a streamed request gets its `200` only once it is admitted;
//! - refused: a bad request or one that can never fit `400` (the byte arithmetic and the
//!   levers), a full queue `429` with the service's own `Retry-After`, shutting down `503`.
//!
//! A client that disconnects (or drops its stream) drops its ticket, which cancels the
//! request: a queued one leaves the queue, a running one leaves the batch at the next step,
//! and its reservation is released. Shutdown (the future given to [`serve`], SIGTERM in
//! `genai serve`) stops accepting, drains the service (running requests finish, queued ones
//! are answered `503`), and returns. See `docs/serve.md`.
//!
//! The modules: `edge` (the listener, the router, the endpoints that do not generate),
//! `generate` (a generation request: built, submitted, its refusal answered), `feed` (the
//! ticket's events as the handler's output), `respond` (its JSON or streamed answer),
//! `tools` (a chat request's tools: its prompt, the grammar of a forced call, the calls in
//! OpenAI's shapes), `load` (the model under its budget and queue bound), and what they
//! share (`state`, `http`).

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
            chunk: crate::service::ServiceOptions::default().chunk,
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
