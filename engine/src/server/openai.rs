//! The OpenAI request schema of `/v1/completions` and `/v1/chat/completions`: every documented field accepted, the ones the engine cannot honour refused by name.
//!
//! Source of the schema: OpenAI's API reference ("Create completion", "Create chat
//! completion"). Unknown fields are refused (`deny_unknown_fields`); a field whose value
//! would change the output in a way the engine does not implement (`n` > 1, penalties,
//! `logit_bias`, tool calls, ...) is refused with [`Unsupported`] naming it;
//! fields that only label a request (`user`, `metadata`, `store`, ...) are accepted and
//! ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constrain::Grammar;

/// `prompt`: a string, a list of strings, a list of token ids, or a list of id lists.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    /// One text prompt.
    Text(String),
    /// Several text prompts (one is supported).
    Texts(Vec<String>),
    /// One prompt as token ids.
    Tokens(Vec<u32>),
    /// Several prompts as token ids (one is supported).
    TokenLists(Vec<Vec<u32>>),
}

/// `stop`: a string or a list of up to 4 strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StopInput {
    /// One stop string.
    One(String),
    /// Several stop strings.
    Many(Vec<String>),
}

impl StopInput {
    /// The stop strings.
    pub fn strings(self) -> Vec<String> {
        match self {
            StopInput::One(s) => vec![s],
            StopInput::Many(v) => v,
        }
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// Send a last chunk with `usage` before `data: [DONE]`.
    pub include_usage: Option<bool>,
    /// Obfuscation padding of stream chunks (accepted; not sent).
    pub include_obfuscation: Option<bool>,
}

/// Declares an OpenAI request body: the fields both endpoints share (sampling, limits,
/// streaming; checked by [`common`]), then the endpoint's own. Every field is optional
/// unless its type says otherwise; unknown fields are refused.
macro_rules! request_body {
    ($(#[$meta:meta])* $name:ident { $(pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(missing_docs)]
        pub struct $name {
            pub model: String,
            pub frequency_penalty: Option<f32>,
            pub logit_bias: Option<BTreeMap<String, f32>>,
            pub n: Option<u32>,
            pub presence_penalty: Option<f32>,
            pub seed: Option<i64>,
            pub stop: Option<StopInput>,
            pub stream: Option<bool>,
            pub stream_options: Option<StreamOptions>,
            pub temperature: Option<f32>,
            pub top_p: Option<f32>,
            pub user: Option<String>,
            $(pub $field: $ty,)*
        }

        impl $name {
            /// The shared fields checked; `max_tokens` names the limit field and its value.
            fn common(&mut self, max_tokens: Option<(&str, u32)>) -> Result<Common, Unsupported> {
                common(
                    self.n,
                    self.temperature,
                    self.top_p,
                    self.frequency_penalty,
                    self.presence_penalty,
                    &self.logit_bias,
                    self.seed,
                    self.stop.take(),
                    max_tokens,
                    self.stream,
                    self.stream_options.take(),
                )
            }
        }
    };
}

request_body! {
    /// The body of `POST /v1/completions`.
    CompletionRequest {
        pub prompt: PromptInput,
        pub best_of: Option<u32>,
        pub echo: Option<bool>,
        pub logprobs: Option<u32>,
        pub max_tokens: Option<u32>,
        // Not in OpenAI's completions API; accepted as llama.cpp's server accepts it
        // (the chat shape: `json_object` or `json_schema`).
        pub response_format: Option<Value>,
        pub suffix: Option<String>,
    }
}

/// A chat message's `content`: text or a list of content parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts (text parts only are supported).
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    pub image_url: Option<Value>,
    pub input_audio: Option<Value>,
    pub file: Option<Value>,
    pub refusal: Option<String>,
}

/// One message of `messages`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ChatMessage {
    pub role: String,
    pub content: Option<MessageContent>,
    pub name: Option<String>,
    pub refusal: Option<String>,
    pub audio: Option<Value>,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub tool_call_id: Option<String>,
    pub function_call: Option<Value>,
}

/// One tool call of an assistant message (`messages[i].tool_calls[j]`), handed to the
/// chat template as given.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The call's id, which the answering `tool` message names in `tool_call_id`.
    pub id: String,
    /// `function` (the one kind supported).
    #[serde(rename = "type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
}

/// The function of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// Its arguments, a JSON text as OpenAI sends them.
    pub arguments: String,
}

request_body! {
    /// The body of `POST /v1/chat/completions`.
    ChatRequest {
        pub messages: Vec<ChatMessage>,
        pub audio: Option<Value>,
        pub function_call: Option<Value>,
        pub functions: Option<Vec<Value>>,
        pub logprobs: Option<bool>,
        pub max_completion_tokens: Option<u32>,
        pub max_tokens: Option<u32>,
        pub metadata: Option<BTreeMap<String, String>>,
        pub modalities: Option<Vec<String>>,
        pub parallel_tool_calls: Option<bool>,
        pub prediction: Option<Value>,
        pub prompt_cache_key: Option<String>,
        pub reasoning_effort: Option<String>,
        pub response_format: Option<Value>,
        pub safety_identifier: Option<String>,
        pub service_tier: Option<String>,
        pub store: Option<bool>,
        pub tool_choice: Option<Value>,
        pub tools: Option<Vec<Value>>,
        pub top_logprobs: Option<u32>,
        pub verbosity: Option<String>,
        pub web_search_options: Option<Value>,
    }
}

/// A chat request's `tools` (OpenAI tool definitions, as sent).
pub type Tools = Vec<Value>;

/// A field whose value the engine cannot honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The field, as a JSON path (`n`, `messages[2].role`).
    pub field: String,
    /// Why, and what is accepted.
    pub message: String,
}

fn refuse(field: impl Into<String>, message: impl Into<String>) -> Unsupported {
    Unsupported {
        field: field.into(),
        message: message.into(),
    }
}

/// Sampling and limits common to both endpoints, after the checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    /// `temperature` (default 1).
    pub temperature: f32,
    /// `top_p` (default 1).
    pub top_p: f32,
    /// `seed`, if given.
    pub seed: Option<u64>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// `max_tokens` / `max_completion_tokens`, if given.
    pub max_tokens: Option<usize>,
    /// `stream`.
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// Log probabilities asked for: `Some(n)` reports each token's and the `n` most
    /// likely tokens' (chat `logprobs: true` with `top_logprobs: n`, completions
    /// `logprobs: n`); `None` reports none.
    pub logprobs: Option<usize>,
    /// The grammar every output token must keep the text a prefix of
    /// (`response_format` `json_object` or `json_schema`); `None` for plain text.
    pub constraint: Option<Arc<Grammar>>,
}

#[allow(clippy::too_many_arguments)]
fn common(
    n: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    frequency_penalty: Option<f32>,
    presence_penalty: Option<f32>,
    logit_bias: &Option<BTreeMap<String, f32>>,
    seed: Option<i64>,
    stop: Option<StopInput>,
    max_tokens: Option<(&str, u32)>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
) -> Result<Common, Unsupported> {
    if n.is_some_and(|n| n != 1) {
        return Err(refuse(
            "n",
            "only n = 1 (one choice per request) is supported",
        ));
    }
    for (field, v) in [
        ("frequency_penalty", frequency_penalty),
        ("presence_penalty", presence_penalty),
    ] {
        if v.is_some_and(|v| v != 0.0) {
            return Err(refuse(
                field,
                "penalties are not supported; only 0 is accepted",
            ));
        }
    }
    if logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
        return Err(refuse(
            "logit_bias",
            "logit_bias is not supported; send {} or null",
        ));
    }
    let temperature = temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(refuse(
            "temperature",
            format!("must be between 0 and 2, got {temperature}"),
        ));
    }
    let top_p = top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(refuse("top_p", format!("must be in (0, 1], got {top_p}")));
    }
    let stop = stop.map(StopInput::strings).unwrap_or_default();
    if stop.len() > 4 {
        return Err(refuse(
            "stop",
            format!("at most 4 stop strings, got {}", stop.len()),
        ));
    }
    let max_tokens = match max_tokens {
        Some((field, 0)) => return Err(refuse(field, "must be at least 1")),
        Some((_, m)) => Some(m as usize),
        None => None,
    };
    let stream = stream.unwrap_or(false);
    if stream_options.is_some() && !stream {
        return Err(refuse("stream_options", "only allowed with stream: true"));
    }
    Ok(Common {
        temperature,
        top_p,
        seed: seed.map(|s| s as u64),
        stop,
        max_tokens,
        stream,
        include_usage: stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
        logprobs: None,
        constraint: None,
    })
}

/// The grammar of a `response_format` (chat; completions as an extension): `None` for `{"type": "text"}`,
/// [`Grammar::json_object`] for `{"type": "json_object"}`, and the compiled
/// `json_schema.schema` for `{"type": "json_schema", "json_schema": {"name", "schema",
/// "strict"?, "description"?}}` (OpenAI's shape; without `schema`, any JSON value). The
/// schema is enforced whatever `strict` says.
///
/// # Errors
/// [`Unsupported`] on field `response_format` for an unknown type, a malformed
/// `json_schema`, or a schema outside the subset of [`crate::constrain::schema`] (naming the
/// keyword and its JSON pointer): a schema the engine cannot enforce is refused, never run
/// unconstrained.
fn response_format(f: &Value) -> Result<Option<Arc<Grammar>>, Unsupported> {
    const FIELD: &str = "response_format";
    let Some(obj) = f.as_object() else {
        return Err(refuse(FIELD, "must be an object with a `type`"));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Arc::new(Grammar::json_object()))),
        Some("json_schema") => {
            let Some(js) = obj.get("json_schema").and_then(Value::as_object) else {
                return Err(refuse(
                    FIELD,
                    "type `json_schema` needs a `json_schema` object \
                     ({\"name\": ..., \"schema\": {...}})",
                ));
            };
            if let Some(name) = js.get("name")
                && !name.as_str().is_some_and(|n| {
                    !n.is_empty()
                        && n.len() <= 64
                        && n.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                })
            {
                return Err(refuse(
                    FIELD,
                    format!(
                        "json_schema.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -, got {name}"
                    ),
                ));
            }
            if let Some(strict) = js.get("strict")
                && !strict.is_boolean()
                && !strict.is_null()
            {
                return Err(refuse(
                    FIELD,
                    format!("json_schema.strict must be a boolean, got {strict}"),
                ));
            }
            let schema = js
                .get("schema")
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            match Grammar::from_schema(&schema) {
                Ok(g) => Ok(Some(Arc::new(g))),
                Err(e) => Err(refuse(FIELD, format!("json_schema.schema: {e}"))),
            }
        }
        Some(other) => Err(refuse(
            FIELD,
            format!("type `{other}` is not supported (text, json_object, json_schema)"),
        )),
        None => Err(refuse(
            FIELD,
            "needs a `type`: text, json_object or json_schema",
        )),
    }
}

/// The largest completions `logprobs` (OpenAI's limit).
pub const MAX_COMPLETION_LOGPROBS: u32 = 5;

/// The largest chat `top_logprobs` (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: u32 = 20;

/// What a completions request asks for.
#[derive(Debug, Clone)]
pub enum CompletionPrompt {
    /// Text (special tokens recognised, as `genai generate` does).
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
}

impl CompletionRequest {
    /// The prompt and common settings, or the field the engine cannot honour.
    ///
    /// # Errors
    /// [`Unsupported`] naming the field.
    pub fn check(mut self) -> Result<(CompletionPrompt, Common), Unsupported> {
        if self.best_of.is_some_and(|b| b != 1) {
            return Err(refuse("best_of", "only best_of = 1 is supported"));
        }
        if self.echo == Some(true) {
            return Err(refuse("echo", "echo is not supported"));
        }
        let logprobs = match self.logprobs {
            Some(n) if n > MAX_COMPLETION_LOGPROBS => {
                return Err(refuse(
                    "logprobs",
                    format!("must be between 0 and {MAX_COMPLETION_LOGPROBS}, got {n}"),
                ));
            }
            n => n.map(|n| n as usize),
        };
        if self.suffix.as_ref().is_some_and(|s| !s.is_empty()) {
            return Err(refuse("suffix", "suffix (insertion) is not supported"));
        }
        let constraint = match &self.response_format {
            Some(f) => response_format(f)?,
            None => None,
        };
        let mut common = self.common(self.max_tokens.map(|m| ("max_tokens", m)))?;
        common.logprobs = logprobs;
        common.constraint = constraint;
        let one = "one prompt per request is supported";
        let prompt = match self.prompt {
            PromptInput::Text(t) => CompletionPrompt::Text(t),
            PromptInput::Texts(mut v) if v.len() == 1 => CompletionPrompt::Text(v.remove(0)),
            PromptInput::Tokens(t) => CompletionPrompt::Tokens(t),
            PromptInput::TokenLists(mut v) if v.len() == 1 => CompletionPrompt::Tokens(v.remove(0)),
            _ => return Err(refuse("prompt", one)),
        };
        Ok((prompt, common))
    }
}

/// A chat turn after the checks, as the chat template receives it: role (`system`,
/// `user`, `assistant`, `tool`), text, and the tool fields when present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Turn {
    /// `system` (also for `developer`), `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
    /// An assistant turn's tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// A tool turn: the id of the call it answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatRequest {
    /// The conversation and common settings, or the field the engine cannot honour.
    ///
    /// # Errors
    /// [`Unsupported`] naming the field.
    /// The third value is `tools` as given, when sent with `tool_choice: "none"`: the
    /// template renders them (as transformers' `apply_chat_template(tools=...)` does) and
    /// the model is never asked to call one.
    pub fn check(mut self) -> Result<(Vec<Turn>, Option<Tools>, Common), Unsupported> {
        let nulls = [
            ("audio", self.audio.is_some()),
            ("function_call", self.function_call.is_some()),
            ("prediction", self.prediction.is_some()),
            ("web_search_options", self.web_search_options.is_some()),
            ("reasoning_effort", self.reasoning_effort.is_some()),
            ("verbosity", self.verbosity.is_some()),
            (
                "tools",
                self.tools.as_ref().is_some_and(|t| !t.is_empty())
                    && self.tool_choice.as_ref().is_none_or(|c| c != "none"),
            ),
            (
                "functions",
                self.functions.as_ref().is_some_and(|t| !t.is_empty()),
            ),
        ];
        if let Some((field, _)) = nulls.iter().find(|(_, set)| *set) {
            let why = if *field == "tools" {
                "tools are accepted only with tool_choice: \"none\" (rendered into the prompt \
                 by the chat template, never called): the server does not parse tool calls out \
                 of the model's output (tool and tool-call messages in `messages` are accepted)"
            } else if *field == "functions" {
                "the deprecated functions are not supported; send tools with tool_choice: \"none\""
            } else {
                "this feature is not supported by the engine"
            };
            return Err(refuse(*field, why));
        }
        if let Some(c) = &self.tool_choice
            && c != "none"
        {
            return Err(refuse(
                "tool_choice",
                "only \"none\" is supported: tools are rendered into the prompt, never called",
            ));
        }
        if let Some(m) = &self.modalities
            && m.iter().any(|m| m != "text")
        {
            return Err(refuse("modalities", "only [\"text\"] is supported"));
        }
        let constraint = match &self.response_format {
            Some(f) => response_format(f)?,
            None => None,
        };
        let logprobs = match (self.logprobs, self.top_logprobs) {
            (_, Some(n)) if n > MAX_TOP_LOGPROBS => {
                return Err(refuse(
                    "top_logprobs",
                    format!("must be between 0 and {MAX_TOP_LOGPROBS}, got {n}"),
                ));
            }
            (Some(true), n) => Some(n.unwrap_or(0) as usize),
            (_, Some(_)) => {
                return Err(refuse("top_logprobs", "top_logprobs needs logprobs: true"));
            }
            _ => None,
        };
        if self.messages.is_empty() {
            return Err(refuse("messages", "at least one message is needed"));
        }
        let max = match (self.max_completion_tokens, self.max_tokens) {
            (Some(m), _) => Some(("max_completion_tokens", m)),
            (None, Some(m)) => Some(("max_tokens", m)),
            (None, None) => None,
        };
        let mut common = self.common(max)?;
        common.logprobs = logprobs;
        common.constraint = constraint;
        let turns = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| turn(i, m))
            .collect::<Result<Vec<_>, _>>()?;
        let tools = self.tools.filter(|t| !t.is_empty());
        Ok((turns, tools, common))
    }
}

/// Message `i` of a chat request as a template turn (`developer` is `system`), or the field
/// the engine cannot honour: an unknown role, audio, a deprecated `function_call`,
/// misplaced `tool_calls` or `tool_call_id`, a tool call not of type `function`, a content
/// part that is not text.
fn turn(i: usize, m: ChatMessage) -> Result<Turn, Unsupported> {
    let role = match m.role.as_str() {
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        other => {
            return Err(refuse(
                format!("messages[{i}].role"),
                format!(
                    "role '{other}' is not supported \
                     (system, developer, user, assistant, tool)"
                ),
            ));
        }
    };
    for (field, set, why) in [
        (
            "audio",
            m.audio.is_some(),
            "audio messages are not supported",
        ),
        (
            "function_call",
            m.function_call.is_some(),
            "the deprecated function_call is not supported; send tool_calls",
        ),
        (
            "tool_calls",
            m.tool_calls.is_some() && role != "assistant",
            "only an assistant message carries tool_calls",
        ),
        (
            "tool_call_id",
            (role == "tool") != m.tool_call_id.is_some(),
            "a tool message names the call it answers in tool_call_id, and only a tool message does",
        ),
    ] {
        if set {
            return Err(refuse(format!("messages[{i}].{field}"), why));
        }
    }
    for (j, call) in m.tool_calls.iter().flatten().enumerate() {
        if call.kind != "function" {
            return Err(refuse(
                format!("messages[{i}].tool_calls[{j}].type"),
                format!("tool call type '{}' is not supported (function)", call.kind),
            ));
        }
    }
    let content = match m.content {
        None => String::new(),
        Some(MessageContent::Text(t)) => t,
        Some(MessageContent::Parts(parts)) => {
            let mut text = String::new();
            for (j, p) in parts.into_iter().enumerate() {
                match (p.kind.as_str(), p.text) {
                    ("text", Some(t)) => text.push_str(&t),
                    _ => {
                        return Err(refuse(
                            format!("messages[{i}].content[{j}]"),
                            "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported",
                        ));
                    }
                }
            }
            text
        }
    };
    Ok(Turn {
        role: role.to_string(),
        content,
        tool_calls: m.tool_calls,
        tool_call_id: m.tool_call_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(v: Value) -> Result<(Vec<Turn>, Common), Unsupported> {
        serde_json::from_value::<ChatRequest>(v)
            .unwrap()
            .check()
            .map(|(turns, _, common)| (turns, common))
    }

    /// `tools` pass through to the template with `tool_choice: "none"` and are refused,
    /// naming `tools`, with any other choice (the default, "auto", included).
    #[test]
    fn tools_are_accepted_with_tool_choice_none_only() {
        let tool = serde_json::json!({"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
        let base = serde_json::json!({"model": "m", "tools": [tool],
            "messages": [{"role": "user", "content": "hi"}]});
        let mut none = base.clone();
        none["tool_choice"] = "none".into();
        let (_, tools, _) = serde_json::from_value::<ChatRequest>(none)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!(tools, Some(vec![tool]));
        for choice in [Value::Null, "auto".into(), "required".into()] {
            let mut b = base.clone();
            if !choice.is_null() {
                b["tool_choice"] = choice.clone();
            }
            let e = chat(b).unwrap_err();
            assert_eq!(e.field, "tools", "{choice}");
            assert!(e.message.contains("tool_choice"), "{}", e.message);
        }
    }

    #[test]
    fn unsupported_values_name_their_field() {
        let base =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        assert!(chat(base.clone()).is_ok());
        for (k, v, field) in [
            ("n", serde_json::json!(2), "n"),
            (
                "presence_penalty",
                serde_json::json!(0.5),
                "presence_penalty",
            ),
            ("tools", serde_json::json!([{"type": "function"}]), "tools"),
            ("temperature", serde_json::json!(3.0), "temperature"),
        ] {
            let mut b = base.clone();
            b[k] = v;
            assert_eq!(chat(b).unwrap_err().field, field);
        }
        let mut b = base.clone();
        b["messages"][0]["role"] = "function".into();
        assert_eq!(chat(b).unwrap_err().field, "messages[0].role");
    }

    /// Tool turns reach the template with their fields; a malformed one is refused by name.
    #[test]
    fn tool_turns_are_accepted_and_checked_by_name() {
        let call = serde_json::json!({"id": "c1", "type": "function",
            "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}});
        let convo = serde_json::json!({"model": "m", "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "18 C, sunny"},
        ]});
        let (turns, _) = chat(convo.clone()).unwrap();
        assert_eq!(
            turns[1].tool_calls.as_ref().unwrap()[0].function.name,
            "weather"
        );
        assert_eq!(turns[2].role, "tool");
        assert_eq!(turns[2].tool_call_id.as_deref(), Some("c1"));
        let as_template_sees: Value = serde_json::to_value(&turns[2]).unwrap();
        assert_eq!(
            as_template_sees,
            serde_json::json!({"role": "tool", "content": "18 C, sunny", "tool_call_id": "c1"})
        );
        let mut b = convo.clone();
        b["messages"][2]["tool_call_id"] = Value::Null;
        assert_eq!(chat(b).unwrap_err().field, "messages[2].tool_call_id");
        let mut b = convo.clone();
        b["messages"][0]["tool_call_id"] = "c1".into();
        assert_eq!(chat(b).unwrap_err().field, "messages[0].tool_call_id");
        let mut b = convo.clone();
        b["messages"][1]["tool_calls"][0]["type"] = "custom".into();
        assert_eq!(chat(b).unwrap_err().field, "messages[1].tool_calls[0].type");
        let mut b = convo.clone();
        b["messages"][0]["tool_calls"] = serde_json::json!([call]);
        assert_eq!(chat(b).unwrap_err().field, "messages[0].tool_calls");
    }
}
