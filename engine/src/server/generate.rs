//! A generation request at the HTTP edge: the completion and chat endpoints, the engine's request built from the body, and its submission to the engine service and the answer to its admission (admitted, queued or refused).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;

use super::DEFAULT_SEQ_TOKENS;
use super::feed::{Feed, Start};
use super::http::{bad_request, error, parse, unavailable};
use super::openai::{ChatRequest, Common, CompletionPrompt, CompletionRequest, Unsupported};
use super::respond::{Answer, Kind, json_answer, stream_answer};
use super::state::{App, Shared, seconds_now};
use crate::kernels::sample::SamplerConfig;
use crate::runtime::{BadRequest, EngineError, GenerateRequest, Prompt};
use crate::service::{AdmissionError, SubmitOptions};

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

/// `POST /v1/completions`.
pub(super) async fn completions(
    State(s): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
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

/// `POST /v1/chat/completions`: the conversation rendered with the model's chat template.
pub(super) async fn chat_completions(
    State(s): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (app, (turns, tools, mut common)) = match accept(&s, body, ChatRequest::check) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(template) = &app.template else {
        return bad_request(Some("messages"), "this model has no chat template");
    };
    let (text, tools) = match super::tools::chat_prompt(template, &turns, &tools, &mut common) {
        Ok(x) => x,
        Err(u) => return unsupported(&s, u),
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
    let kind = Kind::Chat(tools);
    generate(s, app, kind, Prompt::Text(text), max_tokens, common).await
}

/// A field the engine cannot honour: `400` naming it.
fn unsupported(s: &Shared, u: Unsupported) -> Response {
    s.metrics.refused("bad_request");
    bad_request(Some(&u.field), format!("`{}`: {}", u.field, u.message))
}

/// The request at the HTTP edge: built from the body, submitted to the engine's service
/// (the one queue and admission), and answered: admitted or queued requests stream or
/// collect their tokens; a refusal is its status.
async fn generate(
    s: Shared,
    app: Arc<App>,
    kind: Kind,
    prompt: Prompt,
    max_tokens: usize,
    common: Common,
) -> Response {
    let req = request(prompt, max_tokens, &common);
    let arrived = Instant::now();
    let ticket = app.engine.submit(req, SubmitOptions::default());
    let mut feed = Feed::new(ticket, s.metrics.clone(), arrived);
    let (prompt_tokens, queued) = match feed.start().await {
        Start::Admitted(a) => (a.prompt_tokens, false),
        Start::Queued(prompt_tokens) => (prompt_tokens, true),
        Start::Refused(e) => return refusal(&s, kind, e),
    };
    let id = app.next_id.fetch_add(1, Ordering::Relaxed);
    let id = match kind {
        Kind::Completion => format!("cmpl-{id}"),
        Kind::Chat(_) => format!("chatcmpl-{id}"),
    };
    let answer = Answer {
        created: seconds_now(),
        model: app.model_name.clone(),
        app,
        kind,
        id,
        prompt_tokens,
    };
    if common.stream {
        return stream_answer(feed, queued, answer, common.include_usage).await;
    }
    json_answer(feed, answer, common.logprobs).await
}

/// The engine's request for a body's prompt, `max_tokens`, sampling settings (without a
/// seed: one drawn from the clock), log probabilities and response format.
fn request(prompt: Prompt, max_tokens: usize, common: &Common) -> GenerateRequest {
    let seed = common.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let mut req = GenerateRequest::new(prompt, max_tokens)
        .with_sampling(SamplerConfig {
            temperature: common.temperature,
            top_p: common.top_p,
            seed,
            frequency_penalty: common.frequency_penalty,
            presence_penalty: common.presence_penalty,
            logit_bias: common.logit_bias.as_slice().into(),
            ..SamplerConfig::default()
        })
        .with_stop(common.stop.clone());
    req.logprobs = common.logprobs;
    req.constraint = common.constraint.clone();
    req
}

/// The answer to a request the service refused: a bad request `400` naming the field, a
/// request that can never fit `400` with the byte arithmetic, a full queue `429` with
/// `Retry-After` (the service's own figure), shutting down `503`.
fn refusal(s: &Shared, kind: Kind, e: EngineError) -> Response {
    let field = kind.prompt_field();
    match e {
        EngineError::QueueFull {
            retry_after_secs, ..
        } => {
            s.metrics.refused("queue_full");
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_exceeded",
                None,
                e.to_string(),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            r
        }
        EngineError::ShuttingDown => {
            s.metrics.refused("shutting_down");
            unavailable("the server is shutting down")
        }
        EngineError::Refused(a) => {
            s.metrics.refused(match a {
                AdmissionError::NeverFits(_) => "never_fits",
                _ => "bad_request",
            });
            error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("max_tokens"),
                a.to_string(),
            )
        }
        EngineError::BadRequest(BadRequest::EmptyPrompt { .. }) => {
            s.metrics.refused("bad_request");
            bad_request(
                Some(field),
                format!(
                    "`{field}`: the prompt is empty (it encodes to no token); at least one token is needed"
                ),
            )
        }
        EngineError::BadRequest(BadRequest::ContextOverflow {
            prompt_tokens,
            max_new_tokens,
            context,
        }) => {
            s.metrics.refused("bad_request");
            if prompt_tokens >= context {
                bad_request(
                    Some(field),
                    format!(
                        "`{field}`: the prompt is {prompt_tokens} tokens, and the model's context length is {context}; \
                         a prompt must leave room for at least one new token"
                    ),
                )
            } else {
                bad_request(
                    Some("max_tokens"),
                    format!(
                        "the prompt ({prompt_tokens} tokens) plus max_tokens ({max_new_tokens}) is {} positions, \
                         more than the model's context length of {context}",
                        prompt_tokens + max_new_tokens
                    ),
                )
            }
        }
        e => {
            s.metrics.refused("bad_request");
            let param = match &e {
                EngineError::Tokenizer(_) => Some(field),
                EngineError::BadRequest(BadRequest::Sampling { field, .. }) => Some(*field),
                _ => None,
            };
            bad_request(param, e.to_string())
        }
    }
}
