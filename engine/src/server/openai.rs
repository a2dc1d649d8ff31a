//! The OpenAI request schema of `/v1/completions` and `/v1/chat/completions`: every documented field accepted, the ones the engine cannot honour refused by name.
//!
//! Source of the schema: OpenAI's API reference ("Create completion", "Create chat
//! completion"). Unknown fields are refused (`deny_unknown_fields`); a field whose value
//! would change the output in a way the engine does not implement (`n` > 1, `echo`,
//! audio, ...) is refused with [`Unsupported`] naming it;
//! fields that only label a request (`user`, `metadata`, `store`, ...) are accepted and
//! ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::tools::Function;
use crate::constrain::Grammar;
use crate::kernels::sample::{MAX_BIAS, MAX_PENALTY};

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

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// `"none"`: the model is not asked to call (the default without tools).
    None,
    /// `"auto"`: the model may call (the default with tools); a call in its reply is parsed.
    Auto,
    /// `"required"`: the reply is one or more calls (constrained).
    Required,
    /// `{"type": "function", "function": {"name": ...}}`: the reply calls this function
    /// (constrained).
    Function(String),
}

/// A chat request's tools after the checks.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// `tools` as sent (handed to the chat template); `None` when absent or empty.
    pub tools: Option<Tools>,
    /// The offered functions, in order.
    pub functions: Vec<Function>,
    /// `tool_choice` (its default filled in).
    pub choice: ToolChoice,
    /// `parallel_tool_calls` (default `true`): a reply may hold several calls.
    pub parallel: bool,
}

impl ToolRequest {
    /// The functions a constrained reply may call: all for `required`, the named one, none
    /// for `auto` and `none` (unconstrained).
    pub fn forced(&self) -> Option<Vec<Function>> {
        match &self.choice {
            ToolChoice::Required => Some(self.functions.clone()),
            ToolChoice::Function(name) => Some(
                self.functions
                    .iter()
                    .filter(|f| &f.name == name)
                    .cloned()
                    .collect(),
            ),
            ToolChoice::None | ToolChoice::Auto => None,
        }
    }
}

/// `tools[i]` as a function: `{"type": "function", "function": {"name", "description"?,
/// "parameters"?, "strict"?}}`, the name OpenAI's `[a-zA-Z0-9_-]{1,64}`.
fn function(i: usize, tool: &Value) -> Result<Function, Unsupported> {
    let at = |field: &str| format!("tools[{i}]{field}");
    let Some(obj) = tool.as_object() else {
        return Err(refuse(
            at(""),
            "a tool is an object {\"type\": \"function\", \"function\": {...}}",
        ));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("function") => {}
        other => {
            return Err(refuse(
                at(".type"),
                format!(
                    "tool type {} is not supported (function)",
                    other.map_or("missing".to_string(), |t| format!("'{t}'"))
                ),
            ));
        }
    }
    if let Some(k) = obj.keys().find(|k| *k != "type" && *k != "function") {
        return Err(refuse(at(&format!(".{k}")), "unknown field of a tool"));
    }
    let Some(f) = obj.get("function").and_then(Value::as_object) else {
        return Err(refuse(
            at(".function"),
            "a function tool needs a `function` object",
        ));
    };
    if let Some(k) = f
        .keys()
        .find(|k| !["name", "description", "parameters", "strict"].contains(&k.as_str()))
    {
        return Err(refuse(
            at(&format!(".function.{k}")),
            "unknown field of a function",
        ));
    }
    let name = f.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(refuse(
            at(".function.name"),
            format!(
                "a function name is 1 to 64 of a-z, A-Z, 0-9, _ and -, got {:?}",
                f.get("name")
            ),
        ));
    }
    let parameters = match f.get("parameters") {
        None | Some(Value::Null) => {
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        Some(p) if p.is_object() => p.clone(),
        Some(p) => {
            return Err(refuse(
                at(".function.parameters"),
                format!("parameters are a JSON Schema object, got {p}"),
            ));
        }
    };
    Ok(Function {
        name: name.to_string(),
        parameters,
    })
}

/// `tools`, `tool_choice` and `parallel_tool_calls` checked: each tool a function with a
/// valid, distinct name; the choice one of OpenAI's shapes naming an offered function.
fn tool_request(
    tools: Option<Tools>,
    choice: Option<Value>,
    parallel: Option<bool>,
) -> Result<ToolRequest, Unsupported> {
    let tools = tools.filter(|t| !t.is_empty());
    let functions = tools
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| function(i, t))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, f) in functions.iter().enumerate() {
        if functions[..i].iter().any(|g| g.name == f.name) {
            return Err(refuse(
                format!("tools[{i}].function.name"),
                format!("function `{}` is offered twice", f.name),
            ));
        }
    }
    let choice = match &choice {
        None | Some(Value::Null) if functions.is_empty() => ToolChoice::None,
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(c)) if c == "none" => ToolChoice::None,
        Some(Value::String(c)) if c == "auto" => ToolChoice::Auto,
        Some(Value::String(c)) if c == "required" => ToolChoice::Required,
        Some(v @ Value::Object(o)) if o.get("type").and_then(Value::as_str) == Some("function") => {
            match o["function"].get("name").and_then(Value::as_str) {
                Some(n) => ToolChoice::Function(n.to_string()),
                None => {
                    return Err(refuse(
                        "tool_choice",
                        format!(
                            "a named choice is {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {v}"
                        ),
                    ));
                }
            }
        }
        Some(other) => {
            return Err(refuse(
                "tool_choice",
                format!(
                    "must be \"none\", \"auto\", \"required\" or \
                     {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {other}"
                ),
            ));
        }
    };
    match &choice {
        ToolChoice::Auto | ToolChoice::Required if functions.is_empty() => {
            return Err(refuse("tool_choice", "needs `tools` to choose from"));
        }
        ToolChoice::Function(n) if !functions.iter().any(|f| &f.name == n) => {
            return Err(refuse(
                "tool_choice",
                format!("function `{n}` is not among `tools`"),
            ));
        }
        _ => {}
    }
    Ok(ToolRequest {
        tools,
        functions,
        choice,
        parallel: parallel.unwrap_or(true),
    })
}

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
    /// `frequency_penalty` (default 0).
    pub frequency_penalty: f32,
    /// `presence_penalty` (default 0).
    pub presence_penalty: f32,
    /// `logit_bias` as `(token id, bias)`, in id order.
    pub logit_bias: Vec<(u32, f32)>,
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
        if v.is_some_and(|v| !(-MAX_PENALTY..=MAX_PENALTY).contains(&v)) {
            return Err(refuse(
                field,
                format!("must be between -2 and 2, got {}", v.unwrap_or_default()),
            ));
        }
    }
    let logit_bias = logit_bias_pairs(logit_bias)?;
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
        frequency_penalty: frequency_penalty.unwrap_or(0.0),
        presence_penalty: presence_penalty.unwrap_or(0.0),
        logit_bias,
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

/// `logit_bias` (`{"token id": bias}`, OpenAI's shape) as `(id, bias)` pairs in id order.
///
/// # Errors
/// [`Unsupported`] on `logit_bias` for a key that is not a token id (a decimal `u32`) or a
/// bias outside `[-100, 100]`; the message names the key.
fn logit_bias_pairs(b: &Option<BTreeMap<String, f32>>) -> Result<Vec<(u32, f32)>, Unsupported> {
    let mut pairs = Vec::new();
    for (key, &bias) in b.iter().flatten() {
        let Ok(id) = key.parse::<u32>() else {
            return Err(refuse(
                "logit_bias",
                format!("key \"{key}\" is not a token id (a non-negative integer)"),
            ));
        };
        if !(-MAX_BIAS..=MAX_BIAS).contains(&bias) {
            return Err(refuse(
                "logit_bias",
                format!("the bias of token {key} must be between -100 and 100, got {bias}"),
            ));
        }
        pairs.push((id, bias));
    }
    pairs.sort_by_key(|&(id, _)| id);
    if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(refuse(
            "logit_bias",
            format!("token {} is given twice", w[0].0),
        ));
    }
    Ok(pairs)
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
    /// The second value is the request's tools ([`ToolRequest`]).
    pub fn check(mut self) -> Result<(Vec<Turn>, ToolRequest, Common), Unsupported> {
        let nulls = [
            ("audio", self.audio.is_some()),
            ("function_call", self.function_call.is_some()),
            ("prediction", self.prediction.is_some()),
            ("web_search_options", self.web_search_options.is_some()),
            ("reasoning_effort", self.reasoning_effort.is_some()),
            ("verbosity", self.verbosity.is_some()),
            (
                "functions",
                self.functions.as_ref().is_some_and(|t| !t.is_empty()),
            ),
        ];
        if let Some((field, _)) = nulls.iter().find(|(_, set)| *set) {
            let why = if *field == "functions" {
                "the deprecated functions are not supported; send tools"
            } else {
                "this feature is not supported by the engine"
            };
            return Err(refuse(*field, why));
        }
        let tools = tool_request(
            self.tools.take(),
            self.tool_choice.take(),
            self.parallel_tool_calls,
        )?;
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

    fn tools_of(v: Value) -> Result<ToolRequest, Unsupported> {
        serde_json::from_value::<ChatRequest>(v)
            .unwrap()
            .check()
            .map(|(_, tools, _)| tools)
    }

    /// `tool_choice` in each of OpenAI's shapes, its defaults (`auto` with tools, `none`
    /// without), and `parallel_tool_calls`; `tools` reach the template as sent.
    #[test]
    fn tool_choice_shapes_and_defaults() {
        let tool = serde_json::json!({"type": "function", "function": {"name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
        let base = serde_json::json!({"model": "m", "tools": [tool],
            "messages": [{"role": "user", "content": "hi"}]});
        for (choice, want) in [
            (Value::Null, ToolChoice::Auto),
            ("auto".into(), ToolChoice::Auto),
            ("none".into(), ToolChoice::None),
            ("required".into(), ToolChoice::Required),
            (
                serde_json::json!({"type": "function", "function": {"name": "weather"}}),
                ToolChoice::Function("weather".into()),
            ),
        ] {
            let mut b = base.clone();
            b["tool_choice"] = choice.clone();
            let t = tools_of(b).unwrap();
            assert_eq!(t.choice, want, "{choice}");
            assert_eq!(t.tools, Some(vec![tool.clone()]));
            assert_eq!(t.functions[0].name, "weather");
            assert!(t.parallel);
        }
        let mut b = base.clone();
        b["parallel_tool_calls"] = false.into();
        assert!(!tools_of(b).unwrap().parallel);
        let none =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(tools_of(none).unwrap().choice, ToolChoice::None);
        let mut b = base.clone();
        b["tool_choice"] = "required".into();
        assert_eq!(
            tools_of(b).unwrap().forced().unwrap()[0].name,
            "weather",
            "required forces the offered functions"
        );
    }

    /// Malformed tools and choices are refused naming the field at fault.
    #[test]
    fn bad_tools_and_choices_name_their_field() {
        let tool = |name: &str| serde_json::json!({"type": "function", "function": {"name": name}});
        let cases = [
            (
                serde_json::json!([tool("a b")]),
                Value::Null,
                "tools[0].function.name",
            ),
            (
                serde_json::json!([tool("a"), tool("a")]),
                Value::Null,
                "tools[1].function.name",
            ),
            (
                serde_json::json!([{"type": "custom", "custom": {}}]),
                Value::Null,
                "tools[0].type",
            ),
            (
                serde_json::json!([{"type": "function", "function": {"name": "a", "parameters": 3}}]),
                Value::Null,
                "tools[0].function.parameters",
            ),
            (
                serde_json::json!([tool("a")]),
                "sometimes".into(),
                "tool_choice",
            ),
            (
                serde_json::json!([tool("a")]),
                serde_json::json!({"type": "function", "function": {"name": "b"}}),
                "tool_choice",
            ),
            (serde_json::json!([]), "required".into(), "tool_choice"),
        ];
        for (tools, choice, field) in cases {
            let mut b = serde_json::json!({"model": "m", "tools": tools,
                "messages": [{"role": "user", "content": "hi"}]});
            if !choice.is_null() {
                b["tool_choice"] = choice;
            }
            let e = tools_of(b.clone()).unwrap_err();
            assert_eq!(e.field, field, "{b}: {}", e.message);
        }
    }

    /// Penalties and `logit_bias` reach the sampler settings; out of range, or a key that is
    /// not a token id, is refused naming the field.
    #[test]
    fn penalties_and_logit_bias_are_checked() {
        let base =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let mut b = base.clone();
        b["frequency_penalty"] = 0.5.into();
        b["presence_penalty"] = (-1.5).into();
        b["logit_bias"] = serde_json::json!({"17": -100, "3": 2.5});
        let (_, c) = chat(b).unwrap();
        assert_eq!(c.frequency_penalty, 0.5);
        assert_eq!(c.presence_penalty, -1.5);
        assert_eq!(c.logit_bias, vec![(3, 2.5), (17, -100.0)]);
        for (k, v) in [
            ("frequency_penalty", serde_json::json!(2.5)),
            ("presence_penalty", serde_json::json!(-3)),
            ("logit_bias", serde_json::json!({"x": 1})),
            ("logit_bias", serde_json::json!({"1": 101})),
            ("logit_bias", serde_json::json!({"1": 1, "01": 2})),
        ] {
            let mut b = base.clone();
            b[k] = v.clone();
            let e = chat(b).unwrap_err();
            assert_eq!(e.field, k, "{v}: {}", e.message);
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
                serde_json::json!(2.5),
                "presence_penalty",
            ),
            (
                "tools",
                serde_json::json!([{"type": "function"}]),
                "tools[0].function",
            ),
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
