//! A generation's answer in the shape of its endpoint (completion or chat): one JSON body, or server-sent events as the worker's tokens arrive.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::feed::Feed;
use super::http::error;
use super::logprobs;
use super::state::{App, Out};
use super::tools::{ToolParse, call_deltas, message_calls};
use crate::runtime::Finish;

/// Which endpoint a generation answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `/v1/completions`.
    Completion,
    /// `/v1/chat/completions`, with the tool-call syntax to parse out of the reply when
    /// the model may call a tool.
    Chat(Option<ToolParse>),
}

impl Kind {
    /// The request field that holds the prompt.
    pub(super) fn prompt_field(self) -> &'static str {
        match self {
            Kind::Completion => "prompt",
            Kind::Chat(_) => "messages",
        }
    }
}

/// What every answer to one generation names: the endpoint, the response id, when it was
/// created (Unix seconds), the model, and the prompt's length in tokens (for `usage`).
pub(super) struct Answer {
    /// The loaded app (its tokenizer renders log probabilities).
    pub(super) app: Arc<App>,
    /// The endpoint answered.
    pub(super) kind: Kind,
    /// `cmpl-N` or `chatcmpl-N`.
    pub(super) id: String,
    /// Unix seconds.
    pub(super) created: u64,
    /// The model's name.
    pub(super) model: String,
    /// Prompt tokens.
    pub(super) prompt_tokens: usize,
}

/// OpenAI's `finish_reason` for how a sequence ended.
fn finish_reason(f: &Finish) -> &'static str {
    match f {
        Finish::EndOfGeneration { .. } | Finish::StopString { .. } => "stop",
        Finish::MaxTokens | Finish::BudgetCap => "length",
        Finish::Callback | Finish::Cancelled => "cancelled",
    }
}

/// `finish_reason` of a reply that holds tool calls: `tool_calls` when it ended on its own
/// (`stop`), else as [`finish_reason`].
fn call_finish_reason(f: &Finish) -> &'static str {
    match finish_reason(f) {
        "stop" => "tool_calls",
        other => other,
    }
}

/// A streamed reply that may hold tool calls: all its text so far, and how much of it went
/// out as content (the text before a call's start, [`crate::chat::tools::ToolFormat::call_start`]).
struct Held {
    tools: ToolParse,
    full: String,
    sent: usize,
}

impl Held {
    /// Take `piece`; the text now known to be content.
    fn push(&mut self, piece: &str) -> String {
        self.full.push_str(piece);
        let limit = self
            .tools
            .format
            .call_start(&self.full)
            .unwrap_or(self.full.len())
            .max(self.sent);
        let out = self.full[self.sent..limit].to_string();
        self.sent = limit;
        out
    }
}

/// The answer of a request that did not ask to stream: the worker's events collected into
/// one JSON body (with log probabilities when `top_logprobs` is given), or the
/// error that ended it.
pub(super) async fn json_answer(
    mut rx: Feed,
    answer: Answer,
    top_logprobs: Option<usize>,
) -> Response {
    let object = match answer.kind {
        Kind::Completion => "text_completion",
        Kind::Chat(_) => "chat.completion",
    };
    let mut text = String::new();
    let mut lps = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Out::Token(t, lp) => {
                text.push_str(&t);
                lps.extend(lp);
            }
            Out::Refused(status, message) => {
                return error(status, "unavailable_error", None, message);
            }
            Out::Done {
                completion_tokens,
                cached_tokens,
                tail,
                finish,
            } => {
                text.push_str(&tail);
                let finish = match finish {
                    Ok(f) => f,
                    Err(e) => {
                        return error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", None, e);
                    }
                };
                let tok = answer.app.engine.tokenizer();
                let choice = match answer.kind {
                    Kind::Completion => json!({
                        "text": text, "index": 0,
                        "logprobs": top_logprobs.map(|_| logprobs::completion(tok, &lps, 0)),
                        "finish_reason": finish_reason(&finish),
                    }),
                    Kind::Chat(tools) => {
                        let lp = top_logprobs.map(|_| logprobs::chat(tok, &lps));
                        match tools.and_then(|f| f.parse(&text)) {
                            Some(p) => json!({
                                "index": 0, "logprobs": lp,
                                "finish_reason": call_finish_reason(&finish),
                                "message": {"role": "assistant",
                                    "content": (!p.content.is_empty()).then_some(&p.content),
                                    "refusal": null,
                                    "tool_calls": message_calls(&p, &answer.id)},
                            }),
                            None => json!({
                                "index": 0, "logprobs": lp,
                                "finish_reason": finish_reason(&finish),
                                "message": {"role": "assistant", "content": text, "refusal": null},
                            }),
                        }
                    }
                };
                return axum::Json(json!({
                    "id": answer.id, "object": object, "created": answer.created,
                    "model": answer.model, "choices": [choice],
                    "usage": {
                        "prompt_tokens": answer.prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": answer.prompt_tokens + completion_tokens,
                        "prompt_tokens_details": {"cached_tokens": cached_tokens},
                    },
                }))
                .into_response();
            }
        }
    }
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        None,
        "the worker stopped before the request finished",
    )
}

/// The answer of a request that asked to stream: `200` and server-sent events, after a
/// queued request (`queued`) learned that it started (or the error that refused it).
pub(super) async fn stream_answer(
    mut rx: Feed,
    queued: bool,
    answer: Answer,
    include_usage: bool,
) -> Response {
    // A queued request has not started: its status (503 if the server stops before
    // admitting it) must be known before a 200 and the event stream are sent.
    let mut first = None;
    if queued {
        match rx.recv().await {
            Some(Out::Refused(status, message)) => {
                return error(status, "unavailable_error", None, message);
            }
            Some(ev) => first = Some(ev),
            None => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    None,
                    "the worker stopped before the request started",
                );
            }
        }
    }
    let stream = sse(rx, first, answer, include_usage);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The server-sent events of a streamed request, starting with `first` (the event a queued
/// request's handler waited for before answering 200). A task forwards the worker's events as
/// chunks; when the client goes away the response stream is dropped, the task sees its
/// channel closed and ends, and its [`Feed`] cancels the request.
fn sse(
    mut rx: Feed,
    mut first: Option<Out>,
    answer: Answer,
    include_usage: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let Answer {
        app,
        kind,
        id,
        created,
        model,
        prompt_tokens,
    } = answer;
    let (out, events) = mpsc::channel::<Result<SseEvent, Infallible>>(16);
    let object = match kind {
        Kind::Completion => "text_completion",
        Kind::Chat(_) => "chat.completion.chunk",
    };
    let (cid, cmodel) = (id.clone(), model.clone());
    let chunk = move |text: Option<&str>, lp: Value, finish: Option<&str>, first: bool| {
        let choice = match kind {
            Kind::Completion => json!({
                "text": text.unwrap_or(""), "index": 0, "logprobs": lp, "finish_reason": finish,
            }),
            Kind::Chat(_) => {
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
        if matches!(kind, Kind::Chat(_)) && !send(chunk(Some(""), Value::Null, None, true)).await {
            return;
        }
        let mut held = match kind {
            Kind::Chat(Some(tools)) => Some(Held {
                tools,
                full: String::new(),
                sent: 0,
            }),
            _ => None,
        };
        // The last chunk when the client asked for usage.
        let usage_chunk = |completion_tokens: usize, cached_tokens: usize| {
            let body = json!({
                "id": id, "object": object, "created": created, "model": model, "choices": [],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": cached_tokens},
                },
            });
            SseEvent::default().data(body.to_string())
        };
        // A delta of tool calls, in a chunk of its own.
        let delta_chunk = |delta: Value, finish: Option<&str>| {
            let body = json!({
                "id": id, "object": object, "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            });
            SseEvent::default().data(body.to_string())
        };
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
                        (Some(lp), Kind::Chat(_)) => {
                            json!({"content": [logprobs::chat_entry(tok, &lp)], "refusal": null})
                        }
                        (Some(lp), Kind::Completion) => {
                            let v = logprobs::completion(tok, std::slice::from_ref(&lp), offset);
                            offset += logprobs::token_len(tok, lp.id);
                            v
                        }
                    };
                    let t = match &mut held {
                        Some(h) => h.push(&t),
                        None => t,
                    };
                    if (!t.is_empty() || !lp.is_null())
                        && !send(chunk(Some(&t), lp, None, false)).await
                    {
                        return;
                    }
                }
                Out::Refused(_, message) => {
                    let body = json!({"error": {"message": message, "type": "unavailable_error"}});
                    send(SseEvent::default().data(body.to_string())).await;
                    break;
                }
                Out::Done {
                    completion_tokens,
                    cached_tokens,
                    tail,
                    finish,
                } => {
                    // With tools: the held text is calls (their deltas) or, if it parses as
                    // none, content after all.
                    let mut calls = None;
                    let tail = match &mut held {
                        None => tail,
                        Some(h) => {
                            h.full.push_str(&tail);
                            calls = h.tools.parse(&h.full);
                            match &calls {
                                Some(p) => {
                                    let before = h.full[..h.sent].trim();
                                    p.content.strip_prefix(before).unwrap_or("").to_string()
                                }
                                None => h.full[h.sent..].to_string(),
                            }
                        }
                    };
                    if !tail.is_empty() {
                        send(chunk(Some(&tail), Value::Null, None, false)).await;
                    }
                    for delta in calls.iter().flat_map(|p| call_deltas(p, &id)) {
                        send(delta_chunk(delta, None)).await;
                    }
                    match finish {
                        Ok(f) if calls.is_some() => {
                            let reason = call_finish_reason(&f);
                            send(delta_chunk(json!({}), Some(reason))).await;
                            if include_usage {
                                send(usage_chunk(completion_tokens, cached_tokens)).await;
                            }
                        }
                        Ok(f) => {
                            let text = (kind == Kind::Completion).then_some("");
                            send(chunk(text, Value::Null, Some(finish_reason(&f)), false)).await;
                            if include_usage {
                                send(usage_chunk(completion_tokens, cached_tokens)).await;
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
        drop(rx);
    });
    tokio_stream::wrappers::ReceiverStream::new(events)
}
