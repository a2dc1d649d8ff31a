//! A generation request at the HTTP edge: the completion and chat endpoints, the engine's request built from the body, and admission (admitted, queued or refused).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::DEFAULT_SEQ_TOKENS;
use super::cancel::CancelGuard;
use super::http::{bad_request, error, parse, unavailable};
use super::openai::{ChatRequest, Common, CompletionPrompt, CompletionRequest, Unsupported};
use super::respond::{Answer, Kind, json_answer, stream_answer};
use super::state::{App, Job, Out, Shared, admitted_job, lock, seconds_now};
use crate::batch::SeqSpec;
use crate::kernels::sample::SamplerConfig;
use crate::runtime::{BadRequest, EngineError, GenerateRequest, Prompt};
use crate::scheduler::{AdmissionError, Demand, ReservationId, Submitted};

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

/// The funnel at the HTTP edge: prepare, admit or queue or refuse, then answer.
async fn generate(
    s: Shared,
    app: Arc<App>,
    kind: Kind,
    prompt: Prompt,
    max_tokens: usize,
    common: Common,
) -> Response {
    let req = request(prompt, max_tokens, &common);
    let (demand, spec) = match prepare(&s, &app, kind, &req, max_tokens, &common) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let prompt_tokens = spec.prompt.len();
    let (tx, rx) = mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let arrived = Instant::now();
    let (reservation, queued) = match admit(&s, &app, &demand, spec, tx, cancel.clone(), arrived) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let guard = CancelGuard {
        app: app.clone(),
        metrics: s.metrics.clone(),
        reservation,
        cancel,
        finished: false,
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
        return stream_answer(rx, queued, guard, answer, common.include_usage).await;
    }
    json_answer(rx, guard, answer, common.logprobs).await
}

/// The engine's request for a body's prompt, `max_tokens` and sampling settings (without a
/// seed: one drawn from the clock).
fn request(prompt: Prompt, max_tokens: usize, common: &Common) -> GenerateRequest {
    let seed = common.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    GenerateRequest::new(prompt, max_tokens)
        .with_sampling(SamplerConfig {
            temperature: common.temperature,
            top_p: common.top_p,
            seed,
            frequency_penalty: common.frequency_penalty,
            presence_penalty: common.presence_penalty,
            logit_bias: common.logit_bias.as_slice().into(),
            ..SamplerConfig::default()
        })
        .with_stop(common.stop.clone())
}

/// The funnel's validate, encode and count ([`crate::runtime::Engine::prepare`]), the
/// body's log probabilities and response format set on the sequence, and the context
/// length checked: the demand to admit and the sequence to run, or the `400` to answer.
fn prepare(
    s: &Shared,
    app: &App,
    kind: Kind,
    req: &GenerateRequest,
    max_tokens: usize,
    common: &Common,
) -> Result<(Demand, SeqSpec), Response> {
    let (demand, mut spec) = match app.engine.prepare(req) {
        Ok(x) => x,
        Err(EngineError::BadRequest(BadRequest::EmptyPrompt { .. })) => {
            s.metrics.refused("bad_request");
            return Err(bad_request(
                Some(kind.prompt_field()),
                format!(
                    "`{}`: the prompt is empty (it encodes to no token); at least one token is needed",
                    kind.prompt_field()
                ),
            ));
        }
        Err(e) => {
            s.metrics.refused("bad_request");
            let param = match &e {
                EngineError::Tokenizer(_) => Some(kind.prompt_field()),
                EngineError::BadRequest(BadRequest::Sampling { field, .. }) => Some(*field),
                _ => None,
            };
            return Err(bad_request(param, e.to_string()));
        }
    };
    spec.logprobs = common.logprobs;
    spec.constraint = common.constraint.clone();
    let prompt_tokens = spec.prompt.len();
    if prompt_tokens >= app.context_len {
        s.metrics.refused("bad_request");
        return Err(bad_request(
            Some(kind.prompt_field()),
            format!(
                "`{}`: the prompt is {prompt_tokens} tokens, and the model's context length is {}; \
                 a prompt must leave room for at least one new token",
                kind.prompt_field(),
                app.context_len
            ),
        ));
    }
    if prompt_tokens + max_tokens > app.context_len {
        s.metrics.refused("bad_request");
        return Err(bad_request(
            Some("max_tokens"),
            format!(
                "the prompt ({prompt_tokens} tokens) plus max_tokens ({max_tokens}) is {} positions, \
                 more than the model's context length of {}",
                prompt_tokens + max_tokens,
                app.context_len
            ),
        ));
    }
    Ok((demand, spec))
}

/// Admission, in one step under the waiting lock (so the worker's `admit_ready` sees a
/// queued job as soon as the scheduler does): an admitted job goes to the worker, a queued
/// one waits in [`App::waiting`]; a full queue is `429` with `Retry-After`, a refusal `400`.
/// Returns the reservation and whether it is queued.
fn admit(
    s: &Shared,
    app: &App,
    demand: &Demand,
    spec: SeqSpec,
    tx: mpsc::UnboundedSender<Out>,
    cancel: Arc<AtomicBool>,
    arrived: Instant,
) -> Result<(ReservationId, bool), Response> {
    let mut queued = false;
    let reservation = {
        let mut waiting = lock(&app.waiting);
        match app.engine.scheduler().submit(demand) {
            Ok(Submitted::Admitted(a)) => {
                let job = admitted_job(spec, &a, tx, cancel, arrived, &s.metrics);
                let sent = lock(&app.jobs).as_ref().map(|j| j.send(job).is_ok());
                if sent != Some(true) {
                    let _ = app.engine.scheduler().cancel(a.id);
                    return Err(unavailable("the server is shutting down"));
                }
                a.id
            }
            Ok(Submitted::Queued(id)) => {
                if app.engine.scheduler().usage().queued > app.max_queue {
                    let _ = app.engine.scheduler().cancel(id);
                    drop(waiting);
                    s.metrics.refused("queue_full");
                    let secs = retry_after(app, demand);
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
                    return Err(r);
                }
                queued = true;
                waiting.insert(
                    id,
                    Job {
                        spec,
                        reservation: id,
                        tx,
                        cancel,
                        arrived,
                    },
                );
                id
            }
            Err(e) => {
                drop(waiting);
                return Err(refusal(s, &e));
            }
        }
    };
    Ok((reservation, queued))
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
