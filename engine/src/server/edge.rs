//! The HTTP edge: the listener and its graceful shutdown, the router, and the endpoints that do not generate (health, models, metrics, tokenize).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::generate::{chat_completions, completions};
use super::http::{bad_request, error, parse, unavailable};
use super::load::load;
use super::metrics::Metrics;
use super::state::Shared;
use super::{Budget, ServeError, ServerConfig};

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
    let (usage, cached) = match s.app.get() {
        Some(a) => (a.engine.usage(), a.engine.cached_bytes()),
        None => return unavailable("Loading model"),
    };
    let mut r = s.metrics.render(&usage, cached).into_response();
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
        // llama.cpp's server: bos/eos as the vocabulary adds them, only when asked.
        let ids = match tok.encode_special(&b.content, b.add_special == Some(true)) {
            Ok(ids) => ids,
            Err(e) => return bad_request(Some("content"), e.to_string()),
        };
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
        match tok.decode_continuation(&b.tokens) {
            Ok(content) => axum::Json(json!({"content": content})).into_response(),
            Err(e) => bad_request(Some("tokens"), e.to_string()),
        }
    })
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
    let loader = {
        let shared = shared.clone();
        let runtime = tokio::runtime::Handle::current();
        let config = config.clone();
        tokio::task::spawn_blocking(move || match load(&config, runtime) {
            Ok((app, budget)) => {
                let _ = shared.app.set(app);
                on_ready(&budget);
                Ok(())
            }
            Err(e) => {
                let _ = shared.load_error.set(e.to_string());
                Err(e)
            }
        })
    };
    let app_cell = shared.app.clone();
    let drain = async move {
        shutdown.await;
        if let Some(app) = app_cell.get() {
            app.draining.store(true, Ordering::SeqCst);
            app.engine.drain();
        }
    };
    let router = router(shared.clone(), config.max_body_bytes);
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(drain)
        .await;
    // Every connection is closed; the engine's service stops when the app goes.
    served.map_err(|e| ServeError::Unservable(format!("the listener failed: {e}")))?;
    match loader.await {
        Ok(r) => r,
        Err(e) => Err(ServeError::Unservable(format!("the loader panicked: {e}"))),
    }
}
