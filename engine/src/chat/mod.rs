//! Chat templates: a model's Jinja template (`tokenizer.chat_template`) rendered with minijinja as transformers renders it.
//!
//! The reference is transformers' chat-template utilities (`utils/chat_template_utils.py`,
//! `render_jinja_template`, and `apply_chat_template` of its tokenizers), which render with
//! Jinja2's `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)` plus the
//! `loopcontrols` extension. This module gives a template the same environment:
//!
//! - whitespace control as Jinja2's: `trim_blocks`, `lstrip_blocks`, the `-`/`+` modifiers, and
//!   one trailing newline of the source dropped;
//! - the `{% generation %}...{% endgeneration %}` extension tag (renders its body; see
//!   [`source`]);
//! - the globals `raise_exception(message)` and `strftime_now(format)` (see [`clock`]; a fixed
//!   [`ChatDate`] makes prompts reproducible);
//! - the `tojson` filter as transformers defines it (`json.dumps` with `ensure_ascii`, `indent`,
//!   `separators`, `sort_keys`; insertion-ordered keys; no HTML escaping), and Python's `str()`
//!   for printing values and for the `string` and `join` filters (see [`python`]);
//! - maps in insertion order throughout (minijinja's `preserve_order`), as Python dicts are;
//! - Python string, dict and list methods (`.strip()`, `.split()`, `.items()`, `.get()`, ...);
//! - the variables `messages`, `tools` and `documents` (none unless given),
//!   `add_generation_prompt`, the model's special tokens (`bos_token`, `eos_token`, `unk_token`,
//!   `sep_token`, `pad_token`, `cls_token`, `mask_token`, those the model has) and any extra
//!   template arguments (`enable_thinking`, ...), which override special tokens of the same name.
//!
//! Messages are prepared as `apply_chat_template` prepares them: keys whose value is null are
//! dropped, and a reasoning text given as `reasoning_content`, `thinking` or `reasoning` is
//! visible under `thinking` and `reasoning_content` too.
//!
//! Refused (an error naming the construct and its line): `+` with a `|safe` string (Jinja2
//! HTML-escapes the other operand), iterating or taking the length of none (Python's
//! `TypeError`). Known differences that remain, none of them met by the corpus templates: the
//! `~` operator prints a list or map operand as minijinja does (`["a"]`, not Python's
//! `['a']`); `x in none` is false instead of a `TypeError`; tuples (from `.partition()`,
//! `.items()`) print as lists; `.split()`/`.strip()` without arguments use Unicode
//! `White_Space`, which lacks Python's `\x1c`-`\x1f`.

pub mod clock;
pub mod files;
pub mod python;
pub mod source;
pub mod tools;

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, State, Value};
use serde::Serialize;

pub use clock::{BadDate, ChatDate};
pub use files::TemplateFiles;

use crate::gguf::Metadata;
use crate::tokenizer::{GgufVocab, KEY_CHAT_TEMPLATE, TokenizerError};

/// Name under which the template is stored in its environment: minijinja's errors cite it with
/// the line, e.g. `(in tokenizer.chat_template:2)`.
pub const TEMPLATE_NAME: &str = "tokenizer.chat_template";

/// Who speaks a turn. Serialised as the lowercase role name the templates compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the assistant (`system`).
    System,
    /// The person talking to the model (`user`).
    User,
    /// The model (`assistant`).
    Assistant,
}

impl Role {
    /// The role name as templates see it: `system`, `user` or `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn of a conversation, as a template sees it (`message['role']`, `message['content']`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said (plain text; special-token text in it is not escaped).
    pub content: String,
}

impl Message {
    /// A turn with the given role and text.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
        }
    }

    /// A system turn.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content)
    }

    /// A user turn.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }

    /// An assistant turn.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }
}

/// Errors from compiling or rendering a chat template, or from its inputs. Template errors
/// carry minijinja's description, which names the construct and the template line at fault
/// (`(in tokenizer.chat_template:LINE)`); the description is part of the message, not a
/// separate cause, so an error chain prints it once.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The template source does not compile (an unknown tag or filter syntax, ...).
    #[error("chat template does not compile: {0}")]
    Syntax(Error),
    /// The template called `raise_exception(message)`.
    #[error("chat template refused the conversation{}: {message}", line_suffix(*.line))]
    Raised {
        /// The message the template passed (what transformers raises as `TemplateError`).
        message: String,
        /// The template line of the call.
        line: Option<usize>,
    },
    /// Rendering failed for another reason (unknown filter or method, wrong types, ...).
    #[error("chat template failed to render: {0}")]
    Render(Error),
    /// An input (messages, tools, documents, template arguments) is not what a template takes.
    #[error("{what}: {message}")]
    Input {
        /// Which input, e.g. `messages[2]` or `--kwargs`.
        what: String,
        /// What is wrong with it.
        message: String,
    },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(" (in {TEMPLATE_NAME}:{l})"))
        .unwrap_or_default()
}

/// Marker prefix that lets [`ChatTemplate::render_request`] tell a `raise_exception` apart from
/// other render errors.
const RAISED: &str = "raise_exception: ";

/// The special-token texts a template sees as variables (transformers' `special_tokens_map`:
/// only the tokens the model defines are set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// `bos_token`.
    pub bos_token: Option<String>,
    /// `eos_token`.
    pub eos_token: Option<String>,
    /// `unk_token`.
    pub unk_token: Option<String>,
    /// `sep_token`.
    pub sep_token: Option<String>,
    /// `pad_token`.
    pub pad_token: Option<String>,
    /// `cls_token`.
    pub cls_token: Option<String>,
    /// `mask_token`.
    pub mask_token: Option<String>,
}

/// GGUF keys of the special-token ids beyond those [`GgufVocab`] reads (the misspelling
/// `seperator` is the format's own).
const KEY_SEP: &str = "tokenizer.ggml.seperator_token_id";
const KEY_CLS: &str = "tokenizer.ggml.cls_token_id";
const KEY_MASK: &str = "tokenizer.ggml.mask_token_id";

impl SpecialTokens {
    /// The texts of a model's special tokens, from its GGUF tokenizer metadata
    /// (`tokenizer.ggml.{bos,eos,unknown,seperator,padding,cls,mask}_token_id` looked up in
    /// `tokenizer.ggml.tokens`).
    ///
    /// Errors: a tokenizer key of the wrong type, or an id outside the vocabulary
    /// ([`TokenizerError`] names the key).
    pub fn from_gguf(md: &Metadata) -> Result<SpecialTokens, TokenizerError> {
        let vocab = GgufVocab::from_metadata(md)?;
        let text = |key: &'static str, id: Option<u32>| -> Result<Option<String>, TokenizerError> {
            match id {
                None => Ok(None),
                Some(id) => vocab.tokens.get(id as usize).cloned().map(Some).ok_or(
                    TokenizerError::SpecialIdOutOfRange {
                        key,
                        id,
                        vocab_size: vocab.tokens.len(),
                    },
                ),
            }
        };
        let extra = |key: &'static str| -> Result<Option<u32>, TokenizerError> {
            match md.get_u32(key) {
                Ok(v) => Ok(Some(v)),
                Err(crate::gguf::GgufError::MissingKey { .. }) => Ok(None),
                Err(e) => Err(TokenizerError::BadKey {
                    key,
                    message: e.to_string(),
                }),
            }
        };
        Ok(SpecialTokens {
            bos_token: text("tokenizer.ggml.bos_token_id", vocab.bos)?,
            eos_token: text("tokenizer.ggml.eos_token_id", vocab.eos)?,
            unk_token: text("tokenizer.ggml.unknown_token_id", vocab.unk)?,
            sep_token: text(KEY_SEP, extra(KEY_SEP)?)?,
            pad_token: text("tokenizer.ggml.padding_token_id", vocab.pad)?,
            cls_token: text(KEY_CLS, extra(KEY_CLS)?)?,
            mask_token: text(KEY_MASK, extra(KEY_MASK)?)?,
        })
    }

    /// The set tokens as `(variable name, text)` pairs, in transformers' order.
    pub fn variables(&self) -> Vec<(&'static str, &str)> {
        [
            ("bos_token", &self.bos_token),
            ("eos_token", &self.eos_token),
            ("unk_token", &self.unk_token),
            ("sep_token", &self.sep_token),
            ("pad_token", &self.pad_token),
            ("cls_token", &self.cls_token),
            ("mask_token", &self.mask_token),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.as_deref().map(|t| (name, t)))
        .collect()
    }
}

/// Everything one rendering takes besides the template: what `apply_chat_template(conversation,
/// tools=..., documents=..., add_generation_prompt=..., **kwargs)` takes.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The conversation: a list of message maps (`role`, `content`, and whatever else the
    /// template reads: `tool_calls`, `reasoning_content`, ...), keys in their given order.
    pub messages: Value,
    /// Tool schemas (`tools`), none by default.
    pub tools: Option<Value>,
    /// Documents for retrieval-augmented templates (`documents`), none by default.
    pub documents: Option<Value>,
    /// Append the opening of an assistant turn.
    pub add_generation_prompt: bool,
    /// Extra template variables (`enable_thinking`, ...), in order; they override special
    /// tokens of the same name.
    pub kwargs: Vec<(String, Value)>,
    /// The date `strftime_now` reports (at midnight); today's local time when `None`.
    pub date: Option<ChatDate>,
}

/// Names a template argument may not take (transformers passes them itself).
const RESERVED: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];

impl ChatRequest {
    /// A request for these turns, without tools or documents.
    pub fn new(messages: &[Message], add_generation_prompt: bool) -> ChatRequest {
        ChatRequest {
            messages: Value::from_serialize(messages),
            tools: None,
            documents: None,
            add_generation_prompt,
            kwargs: Vec::new(),
            date: None,
        }
    }

    /// A request whose messages are the JSON array `messages_json` (OpenAI / transformers
    /// message objects, keys kept in their order).
    ///
    /// Errors: [`ChatError::Input`] naming `what` when the text is not JSON or not an array of
    /// objects.
    pub fn from_json(
        messages_json: &str,
        what: &str,
        add_generation_prompt: bool,
    ) -> Result<ChatRequest, ChatError> {
        let messages = parse_json(messages_json, what)?;
        check_list_of_maps(&messages, what, "messages")?;
        Ok(ChatRequest {
            messages,
            tools: None,
            documents: None,
            add_generation_prompt,
            kwargs: Vec::new(),
            date: None,
        })
    }

    /// Sets `tools` from a JSON array of tool schemas.
    ///
    /// Errors: [`ChatError::Input`] naming `what` when it is not a JSON array of objects.
    pub fn with_tools_json(mut self, json: &str, what: &str) -> Result<ChatRequest, ChatError> {
        let tools = parse_json(json, what)?;
        check_list_of_maps(&tools, what, "tools")?;
        self.tools = Some(tools);
        Ok(self)
    }

    /// Adds the entries of a JSON object as template arguments (`{"enable_thinking": false}`).
    ///
    /// Errors: [`ChatError::Input`] naming `what` when it is not a JSON object, or names one of
    /// `messages`, `tools`, `documents`, `add_generation_prompt`.
    pub fn with_kwargs_json(mut self, json: &str, what: &str) -> Result<ChatRequest, ChatError> {
        let map = parse_json(json, what)?;
        if map.kind() != ValueKind::Map {
            return Err(input(
                what,
                format!("expected a JSON object, got {}", map.kind()),
            ));
        }
        for key in map.try_iter().map_err(|e| input(what, e.to_string()))? {
            let name = key.as_str().unwrap_or_default().to_string();
            if RESERVED.contains(&name.as_str()) {
                return Err(input(
                    what,
                    format!("'{name}' is set by the request itself, not as a template argument"),
                ));
            }
            let value = map.get_item(&key).map_err(|e| input(what, e.to_string()))?;
            self.kwargs.push((name, value));
        }
        Ok(self)
    }
}

fn input(what: &str, message: impl Into<String>) -> ChatError {
    ChatError::Input {
        what: what.to_string(),
        message: message.into(),
    }
}

/// JSON text into a template value with object keys in their given order.
fn parse_json(text: &str, what: &str) -> Result<Value, ChatError> {
    serde_json::from_str::<Value>(text).map_err(|e| input(what, format!("invalid JSON: {e}")))
}

fn check_list_of_maps(v: &Value, what: &str, noun: &str) -> Result<(), ChatError> {
    if v.kind() != ValueKind::Seq {
        return Err(input(
            what,
            format!("{noun} must be a JSON array of objects, got {}", v.kind()),
        ));
    }
    for (i, item) in v
        .try_iter()
        .map_err(|e| input(what, e.to_string()))?
        .enumerate()
    {
        if item.kind() != ValueKind::Map {
            return Err(input(
                &format!("{what}: {noun}[{i}]"),
                format!("expected an object, got {}", item.kind()),
            ));
        }
    }
    Ok(())
}

/// Names a message's reasoning text is passed under (transformers' `_REASONING_FIELDS`).
const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "thinking", "reasoning"];

/// One message as `apply_chat_template` hands it to the template: null-valued keys dropped,
/// then the reasoning text (the first non-null of [`REASONING_FIELDS`]) placed under `thinking`
/// (first key, unless the message has it) and `reasoning_content` (at its place, or last).
fn prepare_message(message: &Value, index: usize) -> Result<Value, ChatError> {
    if message.kind() != ValueKind::Map {
        return Err(input(
            &format!("messages[{index}]"),
            format!("expected a map, got {}", message.kind()),
        ));
    }
    let keys: Vec<Value> = message
        .try_iter()
        .map_err(|e| input(&format!("messages[{index}]"), e.to_string()))?
        .collect();
    let mut pairs: Vec<(Value, Value)> = Vec::with_capacity(keys.len() + 2);
    for key in keys {
        let value = message.get_item(&key).unwrap_or_default();
        if !value.is_none() {
            pairs.push((key, value));
        }
    }
    let get = |pairs: &[(Value, Value)], name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k.as_str() == Some(name))
            .map(|(_, v)| v.clone())
    };
    let reasoning = REASONING_FIELDS.iter().find_map(|f| get(&pairs, f));
    if let Some(r) = reasoning {
        let mut out: Vec<(Value, Value)> = Vec::with_capacity(pairs.len() + 2);
        out.push((Value::from("thinking"), r.clone()));
        for (k, v) in pairs {
            match k.as_str() {
                Some("thinking") => {}
                Some("reasoning_content") => out.push((k, r.clone())),
                _ => out.push((k, v)),
            }
        }
        if !out
            .iter()
            .any(|(k, _)| k.as_str() == Some("reasoning_content"))
        {
            out.push((Value::from("reasoning_content"), r));
        }
        pairs = out;
    }
    Ok(pairs.into_iter().collect())
}

/// A compiled chat template with the special-token texts it is rendered with.
pub struct ChatTemplate {
    env: Environment<'static>,
    special: SpecialTokens,
    tool_format: Option<tools::ToolFormat>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("special", &self.special)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source` (Jinja). `bos_token` / `eos_token` are the texts of the model's
    /// bos/eos tokens, exposed as the template variables of the same names (an empty text
    /// leaves the variable unset, as for a model without that token).
    ///
    /// Errors: [`ChatError::Syntax`] when the source does not compile.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate, ChatError> {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        ChatTemplate::with_special_tokens(
            source,
            SpecialTokens {
                bos_token: some(bos_token),
                eos_token: some(eos_token),
                ..SpecialTokens::default()
            },
        )
    }

    /// Compiles `source` (Jinja) to be rendered with these special-token variables.
    ///
    /// Errors: [`ChatError::Syntax`] when the source does not compile; the message names the
    /// construct and its line (e.g. an unknown tag: `unknown statement include`).
    pub fn with_special_tokens(
        source: &str,
        special: SpecialTokens,
    ) -> Result<ChatTemplate, ChatError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(python_methods);
        env.set_formatter(python::format_output);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", python::tojson_filter);
        env.add_filter("string", python::string_filter);
        env.add_filter("join", python::join_filter);
        env.add_filter(source::ITERABLE_FILTER, python::iterable_filter);
        env.add_filter("safe", python::safe_filter);
        env.add_filter("length", python::length_filter);
        env.add_filter("count", python::length_filter);
        env.add_template_owned(TEMPLATE_NAME, source::rewrite_source(source))
            .map_err(ChatError::Syntax)?;
        Ok(ChatTemplate {
            env,
            special,
            tool_format: tools::ToolFormat::detect(source),
        })
    }

    /// A model's template (`tokenizer.chat_template`), or `source` instead of it, with the
    /// model's special tokens ([`SpecialTokens::from_gguf`]).
    ///
    /// Errors: [`ChatError::Input`] when the tokenizer metadata is malformed or the model has
    /// no template and none is given; [`ChatError::Syntax`] when the template does not compile.
    pub fn from_gguf(md: &Metadata, source: Option<&str>) -> Result<ChatTemplate, ChatError> {
        let special =
            SpecialTokens::from_gguf(md).map_err(|e| input("tokenizer metadata", e.to_string()))?;
        let source = match source {
            Some(s) => s.to_string(),
            None => md
                .get_str(KEY_CHAT_TEMPLATE)
                .map_err(|e| {
                    input(
                        KEY_CHAT_TEMPLATE,
                        format!("the model has no chat template ({e})"),
                    )
                })?
                .to_string(),
        };
        ChatTemplate::with_special_tokens(&source, special)
    }

    /// The special-token variables this template is rendered with.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The tool-call syntax the template teaches ([`tools::ToolFormat::detect`]); `None`
    /// when it renders tools in a syntax the engine does not parse.
    pub fn tool_format(&self) -> Option<tools::ToolFormat> {
        self.tool_format
    }

    /// Renders plain turns. With `add_generation_prompt` the template appends the opening of an
    /// assistant turn, so the model's continuation is the answer. `strftime_now` reports today.
    ///
    /// Errors: [`ChatError::Raised`] when the template rejects the conversation, otherwise
    /// [`ChatError::Render`].
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        self.render_request(&ChatRequest::new(messages, add_generation_prompt))
    }

    /// Renders a request as transformers' `apply_chat_template(..., tokenize=False)` renders it.
    ///
    /// Errors: [`ChatError::Input`] when a message is not a map; [`ChatError::Raised`] when the
    /// template rejects the conversation; otherwise [`ChatError::Render`], naming the construct
    /// and the line.
    pub fn render_request(&self, req: &ChatRequest) -> Result<String, ChatError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(ChatError::Render)?;
        if req.messages.kind() != ValueKind::Seq {
            return Err(input(
                "messages",
                format!("expected a list, got {}", req.messages.kind()),
            ));
        }
        let messages: Vec<Value> = req
            .messages
            .try_iter()
            .map_err(|e| input("messages", e.to_string()))?
            .enumerate()
            .map(|(i, m)| prepare_message(&m, i))
            .collect::<Result<_, _>>()?;
        let date = req.date;
        let mut ctx: Vec<(String, Value)> = vec![
            ("messages".into(), Value::from(messages)),
            ("tools".into(), req.tools.clone().unwrap_or(Value::from(()))),
            (
                "documents".into(),
                req.documents.clone().unwrap_or(Value::from(())),
            ),
            (
                "add_generation_prompt".into(),
                Value::from(req.add_generation_prompt),
            ),
            (
                "strftime_now".into(),
                Value::from_function(move |format: &str| clock::strftime_now(date, format)),
            ),
        ];
        for (name, text) in self.special.variables() {
            ctx.push((name.into(), Value::from(text)));
        }
        for (name, value) in &req.kwargs {
            if RESERVED.contains(&name.as_str()) {
                return Err(input(
                    "template arguments",
                    format!("'{name}' is set by the request itself"),
                ));
            }
            match ctx.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value.clone(),
                None => ctx.push((name.clone(), value.clone())),
            }
        }
        let ctx: Value = ctx.into_iter().collect();
        template
            .render(ctx)
            .map_err(|e| match e.detail().and_then(|d| d.strip_prefix(RAISED)) {
                Some(message) if e.kind() == ErrorKind::InvalidOperation => ChatError::Raised {
                    message: message.to_string(),
                    line: e.line(),
                },
                _ => ChatError::Render(python::explain_markup_error(e)),
            })
    }
}

/// `raise_exception(message)`: how chat templates reject a conversation.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("{RAISED}{message}"),
    ))
}

/// Python methods on template values: minijinja-contrib's pycompat set, plus the string and
/// list methods it lacks (`rsplit`, `removeprefix`, `removesuffix`, `partition`, `rpartition`,
/// `index`, `rindex`, `ljust`, `rjust`, `center`, `zfill`, `swapcase`, `casefold`, list
/// `index`, dict `copy`). An unknown method is an error naming it.
fn python_methods(
    state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if let Some(s) = value.as_str()
        && let Some(v) = string_method(s, method, args)?
    {
        return Ok(v);
    }
    match (value.kind(), method) {
        (ValueKind::Seq, "index") => {
            let (what,): (&Value,) = minijinja::value::from_args(args)?;
            return value
                .try_iter()?
                .position(|x| &x == what)
                .map(Value::from)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        format!("{what} is not in list"),
                    )
                });
        }
        (ValueKind::Map, "copy") => {
            let () = minijinja::value::from_args(args)?;
            return Ok(value.clone());
        }
        _ => {}
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args).map_err(|e| {
        if e.kind() == ErrorKind::UnknownMethod {
            Error::new(
                ErrorKind::UnknownMethod,
                format!("{} has no method named {method}", value.kind()),
            )
        } else {
            e
        }
    })
}

/// The string methods pycompat lacks; `Ok(None)` for any other method.
fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    use minijinja::value::from_args;
    let not_found = || Error::new(ErrorKind::InvalidOperation, "substring not found");
    let pad = |width: usize, fill: Option<&str>| -> Result<(usize, char), Error> {
        let fill = match fill {
            None => ' ',
            Some(f) if f.chars().count() == 1 => f.chars().next().unwrap_or(' '),
            Some(_) => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "the fill character must be exactly one character long",
                ));
            }
        };
        Ok((width.saturating_sub(s.chars().count()), fill))
    };
    Ok(Some(match method {
        "rsplit" => {
            let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
            let max = maxsplit.filter(|m| *m >= 0).map(|m| m as usize);
            let mut parts: Vec<&str> = match (sep, max) {
                (Some(sep), Some(m)) => s.rsplitn(m + 1, sep).collect(),
                (Some(sep), None) => s.rsplit(sep).collect(),
                (None, None) => s.split_whitespace().rev().collect(),
                (None, Some(m)) => {
                    // Python strips the text's end, cuts off at most `m` words from the right
                    // and keeps the remainder's leading whitespace.
                    let mut out = Vec::new();
                    let mut rest = s.trim_end();
                    while out.len() < m && !rest.is_empty() {
                        match rest.char_indices().rev().find(|(_, c)| c.is_whitespace()) {
                            Some((i, c)) => {
                                out.push(&rest[i + c.len_utf8()..]);
                                rest = rest[..i].trim_end();
                            }
                            None => {
                                out.push(rest);
                                rest = "";
                            }
                        }
                    }
                    if !rest.is_empty() {
                        out.push(rest);
                    }
                    out
                }
            };
            parts.reverse();
            parts.into_iter().map(Value::from).collect()
        }
        "removeprefix" => {
            let (p,): (&str,) = from_args(args)?;
            Value::from(s.strip_prefix(p).unwrap_or(s))
        }
        "removesuffix" => {
            let (p,): (&str,) = from_args(args)?;
            Value::from(s.strip_suffix(p).unwrap_or(s))
        }
        "partition" => {
            let (sep,): (&str,) = from_args(args)?;
            let parts = match s.split_once(sep) {
                Some((a, b)) => [a, sep, b],
                None => [s, "", ""],
            };
            parts.into_iter().map(Value::from).collect()
        }
        "rpartition" => {
            let (sep,): (&str,) = from_args(args)?;
            let parts = match s.rsplit_once(sep) {
                Some((a, b)) => [a, sep, b],
                None => ["", "", s],
            };
            parts.into_iter().map(Value::from).collect()
        }
        "index" | "rindex" => {
            let (what,): (&str,) = from_args(args)?;
            let at = if method == "index" {
                s.find(what)
            } else {
                s.rfind(what)
            };
            Value::from(s[..at.ok_or_else(not_found)?].chars().count())
        }
        "ljust" | "rjust" | "center" => {
            let (width, fill): (usize, Option<&str>) = from_args(args)?;
            let (n, c) = pad(width, fill)?;
            let fill = |k: usize| c.to_string().repeat(k);
            Value::from(match method {
                "ljust" => format!("{s}{}", fill(n)),
                "rjust" => format!("{}{s}", fill(n)),
                // Python puts the extra fill character on the left when the width is odd
                // and the text's length even (and on the right otherwise).
                _ => {
                    let left = n / 2 + (n & width & 1);
                    format!("{}{s}{}", fill(left), fill(n - left))
                }
            })
        }
        "zfill" => {
            let (width,): (usize,) = from_args(args)?;
            let n = width.saturating_sub(s.chars().count());
            match s.strip_prefix(['+', '-']) {
                Some(rest) => Value::from(format!("{}{}{rest}", &s[..1], "0".repeat(n))),
                None => Value::from(format!("{}{s}", "0".repeat(n))),
            }
        }
        "swapcase" => {
            let () = from_args(args)?;
            Value::from(
                s.chars()
                    .flat_map(|c| {
                        if c.is_uppercase() {
                            c.to_lowercase().collect::<Vec<_>>()
                        } else {
                            c.to_uppercase().collect::<Vec<_>>()
                        }
                    })
                    .collect::<String>(),
            )
        }
        "casefold" => {
            let () = from_args(args)?;
            Value::from(s.to_lowercase())
        }
        _ => return Ok(None),
    }))
}
