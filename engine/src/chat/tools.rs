//! Tool calls in a model family's own syntax: which syntax its chat template teaches, the calls parsed out of its output, and the grammar that makes a forced call valid.
//!
//! The formats, from the templates in `fixtures/chat-templates/templates/` (the way each
//! renders an assistant turn's `tool_calls` is the way its model was taught to call):
//!
//! | Format | Templates | A call |
//! |---|---|---|
//! | [`ToolFormat::Hermes`] | Qwen2.5, Qwen3, QwQ, Hermes 2 Pro / 3 (`<tool_call>` and `{"name": <function-name>, ...` in the source) | `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per call |
//! | [`ToolFormat::Llama3`] | Llama 3.1, 3.2, 3.3 (`"parameters": dictionary` in the source) | `{"name": "f", "parameters": {...}}`, optionally after `<\|python_tag\|>`; one call |
//! | [`ToolFormat::MistralJson`] | Mistral Nemo (`[TOOL_CALLS]` without `[ARGS]`) | `[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]` |
//! | [`ToolFormat::MistralArgs`] | Mistral Small 3.2, Devstral, Ministral 3 (`[TOOL_CALLS]` and `[ARGS]`) | `[TOOL_CALLS]f[ARGS]{...}` per call |
//! | [`ToolFormat::SmolLM2`] | SmolLM2, and any template that renders no tools | `<tool_call>[{"name": "f", "arguments": {...}}, ...]</tool_call>` |
//!
//! SmolLM2's template renders neither tools nor tool calls; its model card teaches the
//! format above in a system prompt (the one Ollama's SmolLM2 template writes), so for it
//! the server writes that prompt, the assistant turns' calls and the tool results
//! (`<tool_response>` in a user turn) itself ([`teach_smollm2`]). A template that renders
//! tools in another syntax has no format here ([`ToolFormat::detect`] is `None`).

use serde_json::Value;

use crate::constrain::schema::NodeId;
use crate::constrain::{BuildError, Grammar, GrammarBuilder, SchemaError};

/// A model family's tool-call syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` blocks (Hermes, Qwen).
    Hermes,
    /// One `{"name": ..., "parameters": ...}` object (Llama 3.x).
    Llama3,
    /// `[TOOL_CALLS]` and a JSON list of `{"name", "arguments"}` (Mistral Nemo).
    MistralJson,
    /// `[TOOL_CALLS]name[ARGS]{...}` per call (Mistral Small 3.2 and later).
    MistralArgs,
    /// `<tool_call>[...]</tool_call>`, a JSON list of `{"name", "arguments"}` (SmolLM2's
    /// model card), taught by the server.
    SmolLM2,
}

/// One function a request offers: its name and its parameters' JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// The name (`[a-zA-Z0-9_-]{1,64}`, OpenAI's rule).
    pub name: String,
    /// The parameters' JSON Schema (`{"type": "object", "properties": {}}` when absent).
    pub parameters: Value,
}

/// A call parsed out of the model's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCall {
    /// The function's name.
    pub name: String,
    /// The arguments as a JSON text (OpenAI's `function.arguments`).
    pub arguments: String,
}

/// The model's output split into text and tool calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The text outside the calls, trimmed.
    pub content: String,
    /// The calls, in order (at least one).
    pub calls: Vec<ParsedCall>,
}

/// Why a tool-call grammar cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolGrammarError {
    /// A function's `parameters` are outside the enforced JSON Schema subset.
    #[error("function {index} (`{name}`) parameters: {source}")]
    Schema {
        /// The function's index among those offered.
        index: usize,
        /// Its name.
        name: String,
        /// The schema error (keyword and JSON pointer).
        source: SchemaError,
    },
    /// The functions cannot be told apart (no function, too many, duplicate names).
    #[error("{0}")]
    Build(#[from] BuildError),
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";
const MISTRAL_CALLS: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";
const MISTRAL_CALL_ID: &str = "[CALL_ID]";

/// The system prompt that teaches SmolLM2 its tool-call format (SmolLM2's model card, as
/// Ollama's SmolLM2 template writes it); `{tools}` is the offered tools as a JSON list.
pub const SMOLLM2_TOOL_PROMPT: &str = "You are an expert in composing functions. You are given a question and a set of possible functions.
Based on the question, you will need to make one or more function/tool calls to achieve the purpose.
If none of the functions can be used, point it out and refuse to answer.
If the given question lacks the parameters required by the function, also point it out.
You have access to the following tools:
<tools>{tools}</tools>
The output MUST strictly adhere to the following format, and NO other text MUST be included.
The example format is as follows. Please make sure the parameter type is correct. If no function call is needed, please make the tool calls an empty list '[]'.
<tool_call>[
{\"name\": \"func_name1\", \"arguments\": {\"argument1\": \"value1\", \"argument2\": \"value2\"}},
(more tool calls as required)
]</tool_call>";

impl ToolFormat {
    /// The format a template's source teaches: by the markers it renders tool calls with
    /// (see the module docs); a template that never mentions `tools` or `tool_calls` gets
    /// [`ToolFormat::SmolLM2`] (the server teaches it). `None`: the template renders tools
    /// in a syntax not parsed here.
    pub fn detect(source: &str) -> Option<ToolFormat> {
        if source.contains(MISTRAL_CALLS) {
            return Some(if source.contains(MISTRAL_ARGS) {
                ToolFormat::MistralArgs
            } else {
                ToolFormat::MistralJson
            });
        }
        // Hermes and Qwen teach `{"name": <function-name>, "arguments": ...}` in their
        // tags (GLM's `<tool_call>{function-name}` and `<arg_key>` lines are not this).
        if source.contains(HERMES_OPEN) && source.contains("<function-name>,") {
            return Some(ToolFormat::Hermes);
        }
        if source.contains("\"parameters\": dictionary") {
            return Some(ToolFormat::Llama3);
        }
        if !source.contains("tools") && !source.contains("tool_calls") {
            return Some(ToolFormat::SmolLM2);
        }
        None
    }

    /// The format's name in docs and errors.
    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
            ToolFormat::Llama3 => "llama3-json",
            ToolFormat::MistralJson => "mistral-json",
            ToolFormat::MistralArgs => "mistral-args",
            ToolFormat::SmolLM2 => "smollm2",
        }
    }

    /// Whether the syntax holds several calls in one reply (Llama 3.x's does not).
    pub fn parallel(self) -> bool {
        self != ToolFormat::Llama3
    }

    /// Where a tool call starts in `text`, or may start (a proper prefix of the format's
    /// opening at its end): the text before it is plain content. A streamed reply holds
    /// back everything from here.
    pub fn call_start(self, text: &str) -> Option<usize> {
        let marker = match self {
            ToolFormat::Hermes | ToolFormat::SmolLM2 => HERMES_OPEN,
            ToolFormat::MistralJson | ToolFormat::MistralArgs => MISTRAL_CALLS,
            ToolFormat::Llama3 => {
                // The call is the whole reply: a JSON object, or the python tag first.
                let t = text.trim_start();
                let starts = t.is_empty()
                    || t.starts_with('{')
                    || PYTHON_TAG.starts_with(t)
                    || t.starts_with(PYTHON_TAG);
                return starts.then_some(0);
            }
        };
        if let Some(at) = text.find(marker) {
            return Some(at);
        }
        (1..marker.len())
            .rev()
            .find(|&n| text.ends_with(&marker[..n]))
            .map(|n| text.len() - n)
    }

    /// The calls in `text`, with the text around them as content; `None` when `text`
    /// holds no complete, well-formed call in this syntax (it is then plain content).
    pub fn parse(self, text: &str) -> Option<Parsed> {
        let (content, calls) = match self {
            ToolFormat::Hermes => parse_hermes(text)?,
            ToolFormat::SmolLM2 => parse_smollm2(text)?,
            ToolFormat::Llama3 => {
                let t = text.trim();
                let t = t.strip_prefix(PYTHON_TAG).unwrap_or(t).trim();
                let v: Value = serde_json::from_str(t).ok()?;
                (String::new(), vec![call(&v, "parameters")?])
            }
            ToolFormat::MistralJson => {
                let at = text.find(MISTRAL_CALLS)?;
                let list = &text[at + MISTRAL_CALLS.len()..];
                let v: Value = serde_json::from_str(list.trim()).ok()?;
                (text[..at].to_string(), calls_of(&v)?)
            }
            ToolFormat::MistralArgs => parse_mistral_args(text)?,
        };
        if calls.is_empty() {
            return None;
        }
        Some(Parsed {
            content: content.trim().to_string(),
            calls,
        })
    }

    /// The grammar of a reply that is one call (`parallel`: one or more) of `functions`
    /// in this syntax, spelt as the template spells it, each call's arguments following
    /// its function's `parameters` (the JSON Schema subset of [`crate::constrain::schema`]).
    ///
    /// # Errors
    /// [`ToolGrammarError::Schema`] naming the function whose parameters are outside the
    /// subset; [`ToolGrammarError::Build`] for no function, more than 64, or two with the
    /// same name.
    pub fn grammar(
        self,
        functions: &[Function],
        parallel: bool,
    ) -> Result<Grammar, ToolGrammarError> {
        let mut b = GrammarBuilder::new();
        let parallel = parallel && self.parallel();
        // Each call: its opening (naming the function), its arguments, its closing bytes.
        let (opening, close): (fn(&str) -> String, &[u8]) = match self {
            ToolFormat::Hermes => (
                |n| format!("{HERMES_OPEN}\n{{\"name\": {n}, \"arguments\": "),
                b"}\n</tool_call>",
            ),
            ToolFormat::MistralArgs => (|n| format!("{n}{MISTRAL_ARGS}"), b""),
            ToolFormat::Llama3 => (|n| format!("{{\"name\": {n}, \"parameters\": "), b"}"),
            ToolFormat::MistralJson | ToolFormat::SmolLM2 => {
                (|n| format!("{{\"name\": {n}, \"arguments\": "), b"}")
            }
        };
        let mut alts = Vec::with_capacity(functions.len());
        for (index, f) in functions.iter().enumerate() {
            let args = b
                .schema(&f.parameters)
                .map_err(|source| ToolGrammarError::Schema {
                    index,
                    name: f.name.clone(),
                    source,
                })?;
            let rest = if close.is_empty() {
                args
            } else {
                let close = b.text(close)?;
                b.seq(vec![args, close])?
            };
            // Mistral's name stands bare; the others' is a JSON string.
            let name = match self {
                ToolFormat::MistralArgs => f.name.clone(),
                _ => serde_json::to_string(&f.name).expect("a string serializes"),
            };
            alts.push((opening(&name).into_bytes(), rest));
        }
        let one = b.choice(alts)?;
        let calls = |b: &mut GrammarBuilder, sep: &[u8]| -> Result<NodeId, BuildError> {
            if parallel {
                b.repeat(one, sep, 1, u32::MAX)
            } else {
                Ok(one)
            }
        };
        let root = match self {
            ToolFormat::Hermes => calls(&mut b, b"\n")?,
            ToolFormat::Llama3 => one,
            ToolFormat::MistralArgs => {
                let open = b.text(MISTRAL_CALLS.as_bytes())?;
                let calls = calls(&mut b, MISTRAL_CALLS.as_bytes())?;
                b.seq(vec![open, calls])?
            }
            ToolFormat::MistralJson => {
                let open = b.text(format!("{MISTRAL_CALLS}[").as_bytes())?;
                let calls = calls(&mut b, b", ")?;
                let close = b.text(b"]")?;
                b.seq(vec![open, calls, close])?
            }
            ToolFormat::SmolLM2 => {
                let open = b.text(format!("{HERMES_OPEN}[").as_bytes())?;
                let calls = calls(&mut b, b", ")?;
                let close = b.text(format!("]{HERMES_CLOSE}").as_bytes())?;
                b.seq(vec![open, calls, close])?
            }
        };
        Ok(b.build(root))
    }
}

/// `{"name": "f", ARGS_KEY: {...}}` (the arguments also under `arguments`, or as a JSON
/// text) as a call; `None` when it is not one.
fn call(v: &Value, args_key: &str) -> Option<ParsedCall> {
    let obj = v.as_object()?;
    let name = obj.get("name")?.as_str()?;
    let args = obj.get(args_key).or_else(|| obj.get("arguments"))?;
    let arguments = match args {
        Value::String(s) => {
            // Arguments sent as a JSON text must be one.
            serde_json::from_str::<Value>(s).ok()?;
            s.clone()
        }
        Value::Object(_) => serde_json::to_string(args).ok()?,
        _ => return None,
    };
    Some(ParsedCall {
        name: name.to_string(),
        arguments,
    })
}

/// A JSON list of calls (or one call object).
fn calls_of(v: &Value) -> Option<Vec<ParsedCall>> {
    match v {
        Value::Array(items) => items.iter().map(|c| call(c, "arguments")).collect(),
        Value::Object(_) => Some(vec![call(v, "arguments")?]),
        _ => None,
    }
}

/// The `<tool_call>...</tool_call>` blocks of `text` (each one call object), and the text
/// outside them.
fn parse_hermes(text: &str) -> Option<(String, Vec<ParsedCall>)> {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(HERMES_OPEN) {
        content.push_str(&rest[..at]);
        let body = &rest[at + HERMES_OPEN.len()..];
        let end = body.find(HERMES_CLOSE)?;
        let v: Value = serde_json::from_str(body[..end].trim()).ok()?;
        calls.push(call(&v, "arguments")?);
        rest = &body[end + HERMES_CLOSE.len()..];
    }
    content.push_str(rest);
    Some((content, calls))
}

/// `<tool_call>[...]</tool_call>` (a list of call objects, or one) and the text around it.
fn parse_smollm2(text: &str) -> Option<(String, Vec<ParsedCall>)> {
    let at = text.find(HERMES_OPEN)?;
    let body = &text[at + HERMES_OPEN.len()..];
    let end = body.find(HERMES_CLOSE)?;
    let v: Value = serde_json::from_str(body[..end].trim()).ok()?;
    let content = format!("{}{}", &text[..at], &body[end + HERMES_CLOSE.len()..]);
    Some((content, calls_of(&v)?))
}

/// `[TOOL_CALLS]name[ARGS]{...}` (optionally `[CALL_ID]id` before `[ARGS]`) per call.
fn parse_mistral_args(text: &str) -> Option<(String, Vec<ParsedCall>)> {
    let at = text.find(MISTRAL_CALLS)?;
    let mut calls = Vec::new();
    for part in text[at + MISTRAL_CALLS.len()..].split(MISTRAL_CALLS) {
        let (head, args) = part.split_once(MISTRAL_ARGS)?;
        let name = head.split(MISTRAL_CALL_ID).next()?.trim();
        if name.is_empty() {
            return None;
        }
        let v: Value = serde_json::from_str(args.trim()).ok()?;
        if !v.is_object() {
            return None;
        }
        calls.push(ParsedCall {
            name: name.to_string(),
            arguments: serde_json::to_string(&v).ok()?,
        });
    }
    Some((text[..at].to_string(), calls))
}

/// Each assistant turn's `tool_calls[].function.arguments` that is a JSON text of an object
/// (OpenAI's shape) replaced by that object, which is what chat templates render (with
/// `tojson`) and what transformers hands them; other values are left as they are.
pub fn arguments_as_objects(messages: &mut [Value]) {
    for m in messages {
        let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) else {
            continue;
        };
        for c in calls {
            if let Some(a) = c.pointer_mut("/function/arguments")
                && let Some(v) = a
                    .as_str()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .filter(Value::is_object)
            {
                *a = v;
            }
        }
    }
}

/// SmolLM2's conversation with tools, as its model card teaches it (its template renders
/// neither tools nor calls): `tools` (when given) in the system prompt
/// [`SMOLLM2_TOOL_PROMPT`] (before the conversation's own system text, if any), each
/// assistant turn's `tool_calls` as its `<tool_call>[...]</tool_call>` content, and each
/// `tool` turn as a user turn `<tool_response>\n...\n</tool_response>`.
///
/// `messages` are OpenAI-shaped turns (`role`, `content`, `tool_calls` with
/// `function.name` and `function.arguments` as a JSON text).
pub fn teach_smollm2(messages: &mut Vec<Value>, tools: Option<&[Value]>) {
    for m in messages.iter_mut() {
        let Some(obj) = m.as_object_mut() else {
            continue;
        };
        if let Some(Value::Array(calls)) = obj.remove("tool_calls") {
            let listed: Vec<String> = calls
                .iter()
                .map(|c| {
                    let f = &c["function"];
                    let name = serde_json::to_string(&f["name"]).unwrap_or_default();
                    let args = match &f["arguments"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    format!("{{\"name\": {name}, \"arguments\": {args}}}")
                })
                .collect();
            let text = obj
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let calls = format!("{HERMES_OPEN}[{}]{HERMES_CLOSE}", listed.join(", "));
            let joined = if text.is_empty() {
                calls
            } else {
                format!("{text}\n{calls}")
            };
            obj.insert("content".into(), joined.into());
        }
        if obj.get("role").and_then(Value::as_str) == Some("tool") {
            obj.remove("tool_call_id");
            let text = obj.get("content").and_then(Value::as_str).unwrap_or("");
            let wrapped = format!("<tool_response>\n{text}\n</tool_response>");
            obj.insert("content".into(), wrapped.into());
            obj.insert("role".into(), "user".into());
        }
    }
    let Some(tools) = tools else { return };
    let listed = serde_json::to_string(tools).expect("JSON values serialize");
    let prompt = SMOLLM2_TOOL_PROMPT.replace("{tools}", &listed);
    match messages.first_mut() {
        Some(first) if first["role"] == "system" => {
            let own = first["content"].as_str().unwrap_or("").to_string();
            first["content"] = if own.is_empty() {
                prompt.into()
            } else {
                format!("{prompt}\n\n{own}").into()
            };
        }
        _ => messages.insert(0, serde_json::json!({"role": "system", "content": prompt})),
    }
}
