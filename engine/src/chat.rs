//! Chat templates: a model's Jinja template (`tokenizer.chat_template`) rendered with minijinja as Hugging Face renders it.
//!
//! The environment mirrors what `transformers`' `apply_chat_template` gives a template:
//! `trim_blocks` and `lstrip_blocks` on, loop controls (`{% break %}`), the variables `messages`
//! (a list of `{role, content}` maps), `bos_token`, `eos_token`, `add_generation_prompt`, the
//! function `raise_exception(message)`, a `tojson` filter with Python's `json.dumps` separators,
//! and Python string/dict/list methods (`.strip()`, `.startswith()`, `.items()`, ...) through
//! `minijinja-contrib`'s pycompat layer. The template is rendered as written: a template that
//! inserts a default system turn when the conversation has none (SmolLM2's does) keeps doing so.

use minijinja::value::Kwargs;
use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;

/// Name under which the template is stored in its environment: minijinja's errors cite it with
/// the line, e.g. `(in tokenizer.chat_template:2)`.
const TEMPLATE_NAME: &str = "tokenizer.chat_template";

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

/// Errors from compiling or rendering a chat template. Messages carry minijinja's description,
/// which names the template line at fault (`(in tokenizer.chat_template:LINE)`).
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The template source does not compile.
    #[error("chat template does not compile: {0}")]
    Syntax(#[source] Error),
    /// The template called `raise_exception(message)`.
    #[error("chat template refused the conversation: {message}")]
    Raised {
        /// The message the template passed.
        message: String,
    },
    /// Rendering failed for another reason (unknown filter, wrong types, ...).
    #[error("chat template failed to render: {0}")]
    Render(#[source] Error),
}

/// Marker prefix that lets [`ChatTemplate::render`] tell a `raise_exception` apart from other
/// render errors.
const RAISED: &str = "raise_exception: ";

/// A compiled chat template with the special-token strings it is rendered with.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles `source` (Jinja). `bos_token` / `eos_token` are the texts of the model's
    /// bos/eos tokens (empty when the model has none), exposed as the template variables of
    /// the same names.
    ///
    /// Errors: [`ChatError::Syntax`] when the source does not compile.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate, ChatError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(ChatError::Syntax)?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// Renders the conversation. With `add_generation_prompt` the template appends the opening
    /// of an assistant turn, so the model's continuation is the answer.
    ///
    /// Errors: [`ChatError::Raised`] when the template rejects the conversation, otherwise
    /// [`ChatError::Render`].
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(ChatError::Render)?;
        let ctx = minijinja::context! {
            messages => Value::from_serialize(messages),
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
            add_generation_prompt => add_generation_prompt,
        };
        template
            .render(ctx)
            .map_err(|e| match e.detail().and_then(|d| d.strip_prefix(RAISED)) {
                Some(message) if e.kind() == ErrorKind::InvalidOperation => ChatError::Raised {
                    message: message.to_string(),
                },
                _ => ChatError::Render(e),
            })
    }
}

/// `raise_exception(message)`: how Hugging Face chat templates reject a conversation.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("{RAISED}{message}"),
    ))
}

/// `tojson` as `transformers` defines it for chat templates: `json.dumps(value,
/// ensure_ascii=False, indent=indent)`, i.e. `", "` and `": "` separators when compact, and no
/// HTML escaping (minijinja's built-in `tojson` escapes `<`, `>`, `&` and `'`).
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let result = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let mut ser = serde_json::Serializer::with_formatter(
                &mut out,
                serde_json::ser::PrettyFormatter::with_indent(&pad),
            );
            value.serialize(&mut ser)
        }
        None => {
            let mut ser = serde_json::Serializer::with_formatter(&mut out, PyCompactFormatter);
            value.serialize(&mut ser)
        }
    };
    result.map_err(|e| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson could not serialise the value: {e}"),
        )
    })?;
    let text = String::from_utf8(out).map_err(|e| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson produced invalid UTF-8: {e}"),
        )
    })?;
    Ok(Value::from_safe_string(text))
}

/// Python `json.dumps` default separators: `", "` between items, `": "` after keys.
struct PyCompactFormatter;

impl serde_json::ser::Formatter for PyCompactFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}
