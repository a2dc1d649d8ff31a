//! `genai serve`: an OpenAI-compatible HTTP server (axum on tokio) on the engine's admission funnel and continuous batch.
//!
//! Every generation request takes the engine's funnel: validate and encode
//! ([`Engine::prepare`]), count, then admission against the KV byte budget at the HTTP
//! edge ([`Scheduler::submit`]):
//!
//! - admitted: the request joins the continuous [`Batch`] run by one worker thread;
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
//! batch keeps its pace: the running requests' steps left ([`Batch::steps_left`]), the
//! fewest releases in that order after which the scheduler admits the head
//! ([`Scheduler::releases_before_admission`]), times the measured seconds per worker
//! step; 1 before the first step. See `docs/serve.md`.

// Handlers return axum's `Response` as their error (it is what they answer), and
// `ServeError` carries the engine's errors by value, as `runtime` does.
#![allow(clippy::result_large_err)]

pub mod logprobs;
pub mod metrics;
pub mod openai;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::batch::{Batch, Done, Finish, Piece, SeqSpec, Sink};
use crate::chat::{self, ChatTemplate};
use crate::kernels::logprob::TokenLogprobs;
use crate::kernels::sample::SamplerConfig;
use crate::kv::KvDtype;
use crate::runtime::{
    BadRequest, Engine, EngineError, EngineOptions, Flow, GenerateRequest, Prompt,
};
use crate::scheduler::{Admission, AdmissionError, Demand, ReservationId, Submitted};

use metrics::Metrics;
use openai::{ChatRequest, Common, CompletionPrompt, CompletionRequest, Unsupported};

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
}

impl ServerConfig {
    /// Defaults for `model`: 4 running, 16 queued, 1 MiB bodies, 64-token chunks, the f16
    /// KV cache.
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
        }
    }
}

/// Events from the worker to one request's handler.
#[derive(Debug)]
enum Out {
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
struct Job {
    spec: SeqSpec,
    reservation: ReservationId,
    tx: mpsc::UnboundedSender<Out>,
    cancel: Arc<AtomicBool>,
    arrived: Instant,
}

/// What the worker publishes after each step for `Retry-After`.
#[derive(Debug, Default, Clone)]
struct WorkerStats {
    /// Each running request's reservation and the steps it takes at most before it ends
    /// ([`Batch::steps_left`]).
    steps_left: Vec<(ReservationId, u64)>,
    /// Wall seconds per worker step (the step, its deliveries and the step interval),
    /// an exponentially weighted mean; `None` before the first step.
    secs_per_step: Option<f64>,
}

/// Weight of the newest step in [`WorkerStats::secs_per_step`].
const STEP_TIME_WEIGHT: f64 = 0.2;

/// The loaded model and everything the handlers share.
struct App {
    engine: Arc<Engine>,
    template: Option<ChatTemplate>,
    model_name: String,
    created: u64,
    context_len: usize,
    max_queue: usize,
    jobs: Mutex<Option<std_mpsc::Sender<Job>>>,
    /// Queued requests by reservation; the scheduler's queue holds their order.
    waiting: Mutex<HashMap<ReservationId, Job>>,
    stats: Mutex<WorkerStats>,
    draining: AtomicBool,
    next_id: AtomicU64,
}

/// Shared state of the router: the app once loaded, and the metrics.
#[derive(Clone)]
struct Shared {
    app: Arc<OnceLock<Arc<App>>>,
    metrics: Arc<Metrics>,
    load_error: Arc<OnceLock<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An OpenAI-style error response.
fn error(
    status: StatusCode,
    kind: &str,
    param: Option<&str>,
    message: impl Into<String>,
) -> Response {
    let body = json!({"error": {
        "message": message.into(), "type": kind, "param": param, "code": Value::Null,
    }});
    (status, axum::Json(body)).into_response()
}

fn bad_request(param: Option<&str>, message: impl Into<String>) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        param,
        message,
    )
}

fn unavailable(message: &str) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable_error",
        None,
        message,
    )
}

/// Parse a JSON body, naming the field at fault.
fn parse<T: for<'de> Deserialize<'de>>(body: Result<Bytes, BytesRejection>) -> Result<T, Response> {
    let body = body.map_err(|r| {
        let status = r.status();
        let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "request_too_large"
        } else {
            "invalid_request_error"
        };
        error(status, kind, None, r.body_text())
    })?;
    let de = &mut serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match body_fault(&path, &inner) {
            Some(field) => bad_request(Some(&field), format!("field `{field}`: {inner}")),
            None => bad_request(None, format!("invalid JSON body: {inner}")),
        }
    })
}

/// The field a body's parse error is about, as a JSON path (`max_tokens`,
/// `messages[0].role`), or `None` when no field is at fault (the body is not JSON).
///
/// `serde_path_to_error` gives the path of the value being read: `.` for the top-level
/// object (a missing field is reported there, named only in serde's message "missing field
/// `model`"), `?` where the text is not JSON at all (the parser lost its place).
fn body_fault(path: &str, inner: &serde_json::Error) -> Option<String> {
    if inner.is_syntax() || inner.is_eof() || path.ends_with('?') {
        return None;
    }
    let missing = inner
        .to_string()
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split_once('`').map(|(f, _)| f.to_string()));
    match (path, missing) {
        (".", Some(field)) => Some(field),
        (".", None) => None,
        (p, Some(field)) => Some(format!("{p}.{field}")),
        (p, None) => Some(p.to_string()),
    }
}

impl Shared {
    fn ready(&self) -> Result<Arc<App>, Response> {
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

/// The router of every endpoint.
fn router(shared: Shared, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics_text))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(shared)
}

async fn health(State(s): State<Shared>) -> Response {
    match s.app.get() {
        Some(_) => (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response(),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_error",
            None,
            match s.load_error.get() {
                Some(e) => format!("the model failed to load: {e}"),
                None => "Loading model".to_string(),
            },
        ),
    }
}

async fn models(State(s): State<Shared>) -> Response {
    let app = match s.app.get() {
        Some(a) => a.clone(),
        None => return unavailable("Loading model"),
    };
    axum::Json(json!({"object": "list", "data": [{
        "id": app.model_name, "object": "model", "created": app.created, "owned_by": "genai",
    }]}))
    .into_response()
}

async fn metrics_text(State(s): State<Shared>) -> Response {
    let usage = match s.app.get() {
        Some(a) => a.engine.scheduler().usage(),
        None => return unavailable("Loading model"),
    };
    let mut r = s.metrics.render(&usage).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenizeBody {
    content: String,
    add_special: Option<bool>,
    with_pieces: Option<bool>,
}

/// A tokenizer endpoint: the loaded app's tokenizer and the body parsed as `B`, handed to
/// `answer`; loading, draining, a bad body or a model without tokenizer is the response.
fn with_tokenizer<B: for<'de> Deserialize<'de>>(
    s: &Shared,
    body: Result<Bytes, BytesRejection>,
    answer: impl FnOnce(&crate::tokenizer::Tokenizer, B) -> Response,
) -> Response {
    let app = match s.ready() {
        Ok(a) => a,
        Err(r) => return r,
    };
    let b: B = match parse(body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    match app.engine.tokenizer() {
        Some(tok) => answer(tok, b),
        None => bad_request(None, "this model has no tokenizer"),
    }
}

async fn tokenize(State(s): State<Shared>, body: Result<Bytes, BytesRejection>) -> Response {
    with_tokenizer(&s, body, |tok, b: TokenizeBody| {
        let mut ids = match tok.encode(&b.content) {
            Ok(ids) => ids,
            Err(e) => return bad_request(Some("content"), e.to_string()),
        };
        if b.add_special == Some(true)
            && let Some(bos) = tok.bos()
        {
            ids.insert(0, bos);
        }
        if b.with_pieces == Some(true) {
            let tokens: Vec<Value> = ids
                .iter()
                .map(|&id| json!({"id": id, "piece": tok.token_to_piece(id).unwrap_or_default()}))
                .collect();
            return axum::Json(json!({"tokens": tokens})).into_response();
        }
        axum::Json(json!({"tokens": ids})).into_response()
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DetokenizeBody {
    tokens: Vec<u32>,
}

async fn detokenize(State(s): State<Shared>, body: Result<Bytes, BytesRejection>) -> Response {
    with_tokenizer(&s, body, |tok, b: DetokenizeBody| {
        match tok.decode(&b.tokens) {
            Ok(content) => axum::Json(json!({"content": content})).into_response(),
            Err(e) => bad_request(Some("tokens"), e.to_string()),
        }
    })
}

/// Which endpoint a generation answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Completion,
    Chat,
}

impl Kind {
    /// The request field that holds the prompt.
    fn prompt_field(self) -> &'static str {
        match self {
            Kind::Completion => "prompt",
            Kind::Chat => "messages",
        }
    }
}

/// The start of a generation handler: the loaded app, the body parsed as `R` and checked
/// by `check`; a refusal (loading, draining, bad body, unsupported field) is the response.
fn accept<R: for<'de> Deserialize<'de>, T>(
    s: &Shared,
    body: Result<Bytes, BytesRejection>,
    check: impl FnOnce(R) -> Result<T, Unsupported>,
) -> Result<(Arc<App>, T), Response> {
    let app = s.ready()?;
    let req: R = parse(body).inspect_err(|_| s.metrics.refused("bad_request"))?;
    let checked = check(req).map_err(|u| unsupported(s, u))?;
    Ok((app, checked))
}

async fn completions(State(s): State<Shared>, body: Result<Bytes, BytesRejection>) -> Response {
    let (app, (prompt, common)) = match accept(&s, body, CompletionRequest::check) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let prompt = match prompt {
        CompletionPrompt::Text(t) => Prompt::Text(t),
        CompletionPrompt::Tokens(t) => Prompt::Tokens(t),
    };
    // OpenAI's default for completions.
    let max_tokens = common.max_tokens.unwrap_or(16);
    generate(s, app, Kind::Completion, prompt, max_tokens, common).await
}

async fn chat_completions(
    State(s): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (app, (turns, tools, common)) = match accept(&s, body, ChatRequest::check) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(template) = &app.template else {
        return bad_request(Some("messages"), "this model has no chat template");
    };
    let request = chat::ChatRequest {
        messages: minijinja::Value::from_serialize(&turns),
        tools: tools.map(|t| minijinja::Value::from_serialize(&t)),
        ..chat::ChatRequest::new(&[], true)
    };
    let text = match template.render_request(&request) {
        Ok(t) => t,
        Err(e) => return bad_request(Some("messages"), e.to_string()),
    };
    // Without max_tokens: up to this sequence's share of the default budget.
    let max_tokens = match common.max_tokens {
        Some(m) => m,
        None => {
            let used = app
                .engine
                .tokenizer()
                .and_then(|t| t.encode(&text).ok())
                .map_or(0, |ids| ids.len());
            (app.context_len.min(DEFAULT_SEQ_TOKENS as usize))
                .saturating_sub(used)
                .max(1)
        }
    };
    generate(s, app, Kind::Chat, Prompt::Text(text), max_tokens, common).await
}

fn unsupported(s: &Shared, u: Unsupported) -> Response {
    s.metrics.refused("bad_request");
    bad_request(Some(&u.field), format!("`{}`: {}", u.field, u.message))
}

/// Marks a request cancelled: the batch ends it at its next step (and the worker then
/// releases its reservation).
fn cancel_request(cancel: &AtomicBool) {
    cancel.store(true, Ordering::SeqCst);
}

/// Cancels its request when dropped before the request finished (the client went away).
struct CancelGuard {
    app: Arc<App>,
    metrics: Arc<Metrics>,
    reservation: ReservationId,
    cancel: Arc<AtomicBool>,
    finished: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        cancel_request(&self.cancel);
        // Still queued: leave the queue here (the worker never saw it).
        let queued = lock(&self.app.waiting).remove(&self.reservation);
        if queued.is_some() {
            let _ = self.app.engine.scheduler().cancel(self.reservation);
            self.metrics.cancellations.inc();
        }
    }
}

fn seconds_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `Retry-After` for a full queue (the refused request is `demand`); see the module docs.
fn retry_after(app: &App, demand: &Demand) -> u64 {
    let st = lock(&app.stats).clone();
    let Some(secs_per_step) = st.secs_per_step else {
        return 1;
    };
    let mut order = st.steps_left;
    order.sort_by_key(|&(_, steps)| steps);
    let ids: Vec<ReservationId> = order.iter().map(|&(id, _)| id).collect();
    let steps = match app
        .engine
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

fn finish_reason(f: &Finish) -> &'static str {
    match f {
        Finish::EndOfGeneration { .. } | Finish::StopString { .. } => "stop",
        Finish::MaxTokens | Finish::BudgetCap => "length",
        Finish::Callback | Finish::Cancelled => "cancelled",
    }
}

/// The funnel at the HTTP edge: prepare, admit or queue or refuse, then answer.
async fn generate(
    s: Shared,
    app: Arc<App>,
    kind: Kind,
    prompt: Prompt,
    max_tokens: usize,
    common: Common,
) -> Response {
    let seed = common.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let req = GenerateRequest::new(prompt, max_tokens)
        .with_sampling(SamplerConfig {
            temperature: common.temperature,
            top_p: common.top_p,
            seed,
            ..SamplerConfig::default()
        })
        .with_stop(common.stop.clone());
    let (demand, mut spec) = match app.engine.prepare(&req) {
        Ok(x) => x,
        Err(EngineError::BadRequest(BadRequest::EmptyPrompt { .. })) => {
            s.metrics.refused("bad_request");
            return bad_request(
                Some(kind.prompt_field()),
                format!(
                    "`{}`: the prompt is empty (it encodes to no token); at least one token is needed",
                    kind.prompt_field()
                ),
            );
        }
        Err(e) => {
            s.metrics.refused("bad_request");
            let param = match &e {
                EngineError::Tokenizer(_) => Some(kind.prompt_field()),
                _ => None,
            };
            return bad_request(param, e.to_string());
        }
    };
    spec.logprobs = common.logprobs;
    spec.constraint = common.constraint.clone();
    let prompt_tokens = spec.prompt.len();
    if prompt_tokens >= app.context_len {
        s.metrics.refused("bad_request");
        return bad_request(
            Some(kind.prompt_field()),
            format!(
                "`{}`: the prompt is {prompt_tokens} tokens, and the model's context length is {}; \
                 a prompt must leave room for at least one new token",
                kind.prompt_field(),
                app.context_len
            ),
        );
    }
    if prompt_tokens + max_tokens > app.context_len {
        s.metrics.refused("bad_request");
        return bad_request(
            Some("max_tokens"),
            format!(
                "the prompt ({prompt_tokens} tokens) plus max_tokens ({max_tokens}) is {} positions, \
                 more than the model's context length of {}",
                prompt_tokens + max_tokens,
                app.context_len
            ),
        );
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let arrived = Instant::now();
    // Admission: one step under the waiting lock, so the worker's admit_ready sees the
    // queued job as soon as the scheduler does.
    let mut queued = false;
    let reservation = {
        let mut waiting = lock(&app.waiting);
        match app.engine.scheduler().submit(&demand) {
            Ok(Submitted::Admitted(a)) => {
                let job = admitted_job(spec, &a, tx, cancel.clone(), arrived, &s.metrics);
                let sent = lock(&app.jobs).as_ref().map(|j| j.send(job).is_ok());
                if sent != Some(true) {
                    let _ = app.engine.scheduler().cancel(a.id);
                    return unavailable("the server is shutting down");
                }
                a.id
            }
            Ok(Submitted::Queued(id)) => {
                if app.engine.scheduler().usage().queued > app.max_queue {
                    let _ = app.engine.scheduler().cancel(id);
                    drop(waiting);
                    s.metrics.refused("queue_full");
                    let secs = retry_after(&app, &demand);
                    let mut r = error(
                        StatusCode::TOO_MANY_REQUESTS,
                        "rate_limit_exceeded",
                        None,
                        format!(
                            "the wait queue is full ({} requests wait for KV budget); retry after {secs} s",
                            app.max_queue
                        ),
                    );
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                    return r;
                }
                queued = true;
                waiting.insert(
                    id,
                    Job {
                        spec,
                        reservation: id,
                        tx,
                        cancel: cancel.clone(),
                        arrived,
                    },
                );
                id
            }
            Err(e) => {
                drop(waiting);
                return refusal(&s, &e);
            }
        }
    };
    let mut guard = CancelGuard {
        app: app.clone(),
        metrics: s.metrics.clone(),
        reservation,
        cancel,
        finished: false,
    };
    let id = app.next_id.fetch_add(1, Ordering::Relaxed);
    let (id, object) = match kind {
        Kind::Completion => (format!("cmpl-{id}"), "text_completion"),
        Kind::Chat => (format!("chatcmpl-{id}"), "chat.completion"),
    };
    let created = seconds_now();
    let model = app.model_name.clone();
    if common.stream {
        // A queued request has not started: its status (503 if the server stops before
        // admitting it) must be known before a 200 and the event stream are sent.
        let mut first = None;
        if queued {
            match rx.recv().await {
                Some(Out::Refused(status, message)) => {
                    guard.finished = true;
                    return error(status, "unavailable_error", None, message);
                }
                Some(ev) => first = Some(ev),
                None => {
                    guard.finished = true;
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        None,
                        "the worker stopped before the request started",
                    );
                }
            }
        }
        let stream = sse(
            rx,
            first,
            guard,
            app.clone(),
            kind,
            id,
            created,
            model,
            prompt_tokens,
            common.include_usage,
        );
        return Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response();
    }
    let mut text = String::new();
    let mut lps = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Out::Token(t, lp) => {
                text.push_str(&t);
                lps.extend(lp);
            }
            Out::Refused(status, message) => {
                guard.finished = true;
                return error(status, "unavailable_error", None, message);
            }
            Out::Done {
                completion_tokens,
                tail,
                finish,
            } => {
                guard.finished = true;
                text.push_str(&tail);
                let finish = match finish {
                    Ok(f) => f,
                    Err(e) => {
                        return error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", None, e);
                    }
                };
                let tok = app.engine.tokenizer();
                let choice = match kind {
                    Kind::Completion => json!({
                        "text": text, "index": 0,
                        "logprobs": common.logprobs.map(|_| logprobs::completion(tok, &lps, 0)),
                        "finish_reason": finish_reason(&finish),
                    }),
                    Kind::Chat => json!({
                        "index": 0,
                        "logprobs": common.logprobs.map(|_| logprobs::chat(tok, &lps)),
                        "finish_reason": finish_reason(&finish),
                        "message": {"role": "assistant", "content": text, "refusal": null},
                    }),
                };
                return axum::Json(json!({
                    "id": id, "object": object, "created": created, "model": model,
                    "choices": [choice],
                    "usage": {
                        "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                }))
                .into_response();
            }
        }
    }
    guard.finished = true;
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        None,
        "the worker stopped before the request finished",
    )
}

fn admitted_job(
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

/// A refusal at admission: never fits → 400 with the byte arithmetic.
fn refusal(s: &Shared, e: &AdmissionError) -> Response {
    let kind = match e {
        AdmissionError::NeverFits(_) => "never_fits",
        _ => "bad_request",
    };
    s.metrics.refused(kind);
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        Some("max_tokens"),
        e.to_string(),
    )
}

/// The server-sent events of a streamed request, starting with `first` (the event a queued
/// request's handler waited for before answering 200). A task forwards the worker's events as
/// chunks; when the client goes away the response stream is dropped, the task sees its
/// channel closed and ends, and its [`CancelGuard`] cancels the request.
#[allow(clippy::too_many_arguments)]
fn sse(
    mut rx: mpsc::UnboundedReceiver<Out>,
    mut first: Option<Out>,
    mut guard: CancelGuard,
    app: Arc<App>,
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    prompt_tokens: usize,
    include_usage: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let (out, events) = mpsc::channel::<Result<SseEvent, Infallible>>(16);
    let object = match kind {
        Kind::Completion => "text_completion",
        Kind::Chat => "chat.completion.chunk",
    };
    let (cid, cmodel) = (id.clone(), model.clone());
    let chunk = move |text: Option<&str>, lp: Value, finish: Option<&str>, first: bool| {
        let choice = match kind {
            Kind::Completion => json!({
                "text": text.unwrap_or(""), "index": 0, "logprobs": lp, "finish_reason": finish,
            }),
            Kind::Chat => {
                let mut delta = serde_json::Map::new();
                if first {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(t) = text {
                    delta.insert("content".into(), t.into());
                }
                json!({"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish})
            }
        };
        let body = json!({
            "id": cid, "object": object, "created": created, "model": cmodel, "choices": [choice],
        });
        SseEvent::default().data(body.to_string())
    };
    tokio::spawn(async move {
        let send = |ev: SseEvent| {
            let out = out.clone();
            async move { out.send(Ok(ev)).await.is_ok() }
        };
        if kind == Kind::Chat && !send(chunk(Some(""), Value::Null, None, true)).await {
            return;
        }
        // Bytes of generated text before the next token (completions' `text_offset`).
        let mut offset = 0usize;
        loop {
            let ev = match first.take() {
                Some(ev) => Some(ev),
                None => tokio::select! {
                    ev = rx.recv() => ev,
                    () = out.closed() => return,
                },
            };
            let Some(ev) = ev else { break };
            match ev {
                Out::Token(t, lp) => {
                    let tok = app.engine.tokenizer();
                    // A token with log probabilities gets its chunk even when it releases
                    // no text (the content is then ""), so every token's entry is sent.
                    let lp = match (lp, kind) {
                        (None, _) => Value::Null,
                        (Some(lp), Kind::Chat) => {
                            json!({"content": [logprobs::chat_entry(tok, &lp)], "refusal": null})
                        }
                        (Some(lp), Kind::Completion) => {
                            let v = logprobs::completion(tok, std::slice::from_ref(&lp), offset);
                            offset += logprobs::token_len(tok, lp.id);
                            v
                        }
                    };
                    if (!t.is_empty() || !lp.is_null())
                        && !send(chunk(Some(&t), lp, None, false)).await
                    {
                        return;
                    }
                }
                Out::Refused(_, message) => {
                    guard.finished = true;
                    let body = json!({"error": {"message": message, "type": "unavailable_error"}});
                    send(SseEvent::default().data(body.to_string())).await;
                    break;
                }
                Out::Done {
                    completion_tokens,
                    tail,
                    finish,
                } => {
                    guard.finished = true;
                    if !tail.is_empty() {
                        send(chunk(Some(&tail), Value::Null, None, false)).await;
                    }
                    match finish {
                        Ok(f) => {
                            let text = (kind == Kind::Completion).then_some("");
                            send(chunk(text, Value::Null, Some(finish_reason(&f)), false)).await;
                            if include_usage {
                                let body = json!({
                                    "id": id, "object": object, "created": created,
                                    "model": model, "choices": [],
                                    "usage": {
                                        "prompt_tokens": prompt_tokens,
                                        "completion_tokens": completion_tokens,
                                        "total_tokens": prompt_tokens + completion_tokens,
                                    },
                                });
                                send(SseEvent::default().data(body.to_string())).await;
                            }
                        }
                        Err(e) => {
                            let body = json!({"error": {"message": e, "type": "server_error"}});
                            send(SseEvent::default().data(body.to_string())).await;
                        }
                    }
                    break;
                }
            }
        }
        send(SseEvent::default().data("[DONE]")).await;
        drop(guard);
    });
    tokio_stream::wrappers::ReceiverStream::new(events)
}

/// Where a request's output goes: its handler's channel, and its cancel flag for when the
/// handler has gone away.
struct Route {
    tx: mpsc::UnboundedSender<Out>,
    cancel: Arc<AtomicBool>,
}

/// A step's output for the handlers, in the order the batch produced it.
type Deliveries = Vec<(Arc<Route>, Out)>;

/// Hands each step's output to the handlers in one message: `deliver` gets the step's
/// [`Deliveries`] (nothing when the step produced none), and a task on the async runtime
/// ([`fan_out`]) passes them on. One wake-up of the runtime per step instead of one per
/// token: a wake-up from the batch thread lets the runtime's thread run on the batch
/// thread's core, and on a machine whose cores all run kernel threads each such switch
/// stalls the whole step (measured: a channel send from the batch thread took 54 µs per
/// token with four streams on two cores).
struct Outbox {
    pending: std::cell::RefCell<Deliveries>,
    deliver: mpsc::UnboundedSender<Deliveries>,
}

impl Outbox {
    fn push(&self, route: &Arc<Route>, out: Out) {
        self.pending.borrow_mut().push((route.clone(), out));
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
async fn fan_out(mut steps: mpsc::UnboundedReceiver<Deliveries>) {
    while let Some(step) = steps.recv().await {
        for (route, out) in step {
            if route.tx.send(out).is_err() {
                cancel_request(&route.cancel);
            }
        }
    }
}

/// The sink of one request in the batch: queues text for its handler in the worker's
/// [`Outbox`], records latencies.
struct JobSink {
    route: Arc<Route>,
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
        if self.route.tx.is_closed() {
            cancel_request(&self.route.cancel);
        } else {
            self.outbox.push(
                &self.route,
                Out::Token(piece.text.to_string(), piece.logprobs.cloned()),
            );
        }
        Flow::Continue
    }

    fn finish(&mut self, done: Done<'_>) {
        self.outbox.push(
            &self.route,
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
fn worker(
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
                route: Arc::new(Route {
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

/// The model's name in `/v1/models` and responses: the GGUF file stem or the package
/// directory name.
fn model_name(path: &std::path::Path) -> String {
    let name = if path.is_dir() {
        path.file_name()
    } else {
        path.file_stem()
    };
    name.map_or_else(|| "model".to_string(), |n| n.to_string_lossy().into_owned())
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

fn load(
    config: &ServerConfig,
    metrics: Arc<Metrics>,
    deliver: mpsc::UnboundedSender<Deliveries>,
) -> Result<(Arc<App>, Budget), ServeError> {
    let probe = EngineOptions {
        threads: config.threads,
        max_running: config.max_running.max(1),
        kv_dtype: config.kv_dtype,
        ..EngineOptions::default()
    };
    let open = |opts: EngineOptions| {
        if config.model.is_dir() {
            Engine::load_package(&config.model, opts)
        } else {
            Engine::load_gguf(&config.model, opts)
        }
    };
    let engine = open(probe)?;
    let geometry = engine.kv_geometry().ok_or_else(|| {
        ServeError::Unservable("the model has no KV geometry (no decoder)".into())
    })?;
    let bpt = geometry
        .bytes_per_token()
        .map_err(|e| ServeError::Engine(e.into()))?;
    let bytes = config
        .kv_budget_bytes
        .unwrap_or(config.max_running.max(1) as u64 * DEFAULT_SEQ_TOKENS * bpt);
    let engine = engine.with_scheduler(
        crate::scheduler::Scheduler::with_geometry(
            bytes,
            Some(geometry),
            config.max_running.max(1),
        )
        .map_err(|e| ServeError::Engine(e.into()))?,
    )?;
    let model = engine.model().cloned().ok_or_else(|| {
        ServeError::Unservable(
            "the model has no decode core (its decoder is not the native llama_decoder block); \
             the server runs requests on the continuous batch only"
                .into(),
        )
    })?;
    let metadata = model.weights().file().metadata();
    let template = match metadata.get_str("tokenizer.chat_template") {
        Ok(_) => Some(
            ChatTemplate::from_gguf(metadata, None)
                .map_err(|e| ServeError::Unservable(format!("the model's chat template: {e}")))?,
        ),
        Err(_) => None,
    };
    // The vocabulary's byte trie for `response_format`, built while loading rather than in
    // the first constrained request's first step.
    if let Some(tok) = engine.tokenizer() {
        tok.constraint_vocab();
    }
    let tokens = bytes / bpt;
    let (jobs, rx) = std_mpsc::channel();
    let app = Arc::new(App {
        context_len: model.config().context_len,
        engine: Arc::new(engine),
        template,
        model_name: model_name(&config.model),
        created: seconds_now(),
        max_queue: config.max_queue,
        jobs: Mutex::new(Some(jobs)),
        waiting: Mutex::new(HashMap::new()),
        stats: Mutex::new(WorkerStats::default()),
        draining: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
    });
    let worker_app = app.clone();
    let (step_interval, chunk, max_running) = (
        config.step_interval,
        config.chunk,
        config.max_running.max(1),
    );
    // The batch (and its sinks) lives on the worker thread; it reports whether it started.
    let (started, start) = std_mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("genai-batch".into())
        .spawn(move || {
            let batch = match worker_app.engine.batch(tokens as usize, max_running) {
                Some(Ok(b)) => b.with_chunk(chunk),
                Some(Err(e)) => {
                    let _ = started.send(Err(format!("the KV cache: {e}")));
                    return;
                }
                None => {
                    let _ = started.send(Err("the engine has no decode core".to_string()));
                    return;
                }
            };
            let _ = started.send(Ok(()));
            worker(worker_app, metrics, rx, batch, step_interval, deliver)
        })
        .map_err(|e| ServeError::Unservable(format!("starting the batch worker: {e}")))?;
    start
        .recv()
        .map_err(|_| ServeError::Unservable("the batch worker stopped at start".into()))?
        .map_err(ServeError::Unservable)?;
    Ok((
        app,
        Budget {
            bytes,
            bytes_per_token: bpt,
            tokens,
            max_running: config.max_running.max(1),
            max_queue: config.max_queue,
        },
    ))
}

/// Serve on `listener` until `shutdown` resolves, then stop accepting, let running
/// requests finish, answer queued ones 503, and return. `/health` answers 503 while the
/// model loads (on a blocking thread) and 200 once it is ready; `on_ready` gets the budget.
///
/// # Errors
/// The model failed to load (the server keeps answering `/health` 503 until `shutdown`),
/// or the listener failed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServerConfig,
    on_ready: impl FnOnce(&Budget) + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let shared = Shared {
        app: Arc::new(OnceLock::new()),
        metrics: Arc::new(Metrics::new()),
        load_error: Arc::new(OnceLock::new()),
    };
    let (deliver, steps) = mpsc::unbounded_channel();
    tokio::spawn(fan_out(steps));
    let loader = {
        let shared = shared.clone();
        let config = config.clone();
        tokio::task::spawn_blocking(
            move || match load(&config, shared.metrics.clone(), deliver) {
                Ok((app, budget)) => {
                    let _ = shared.app.set(app);
                    on_ready(&budget);
                    Ok(())
                }
                Err(e) => {
                    let _ = shared.load_error.set(e.to_string());
                    Err(e)
                }
            },
        )
    };
    let app_cell = shared.app.clone();
    let drain = async move {
        shutdown.await;
        if let Some(app) = app_cell.get() {
            app.draining.store(true, Ordering::SeqCst);
        }
    };
    let router = router(shared.clone(), config.max_body_bytes);
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(drain)
        .await;
    // Every connection is closed: stop the worker once its batch is empty.
    if let Some(app) = shared.app.get() {
        lock(&app.jobs).take();
    }
    served.map_err(|e| ServeError::Unservable(format!("the listener failed: {e}")))?;
    match loader.await {
        Ok(r) => r,
        Err(e) => Err(ServeError::Unservable(format!("the loader panicked: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> (Arc<Route>, mpsc::UnboundedReceiver<Out>, Arc<AtomicBool>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let route = Arc::new(Route {
            tx,
            cancel: cancel.clone(),
        });
        (route, rx, cancel)
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
        let ((a, _ra, _), (b, _rb, _)) = (route(), route());
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
        let (a, mut ra, cancel_a) = route();
        let (b, rb, cancel_b) = route();
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
