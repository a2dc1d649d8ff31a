//! A conversation given as files (model, template, messages, tools) rendered to the exact prompt: what `genai template render` prints.

use std::path::PathBuf;

use super::{ChatDate, ChatError, ChatRequest, ChatTemplate};
use crate::gguf::GgufFile;

/// The inputs of one rendering, as paths and texts.
#[derive(Debug, Clone)]
pub struct TemplateFiles {
    /// GGUF model: its special tokens, and its `tokenizer.chat_template` unless `template` is given.
    pub model: PathBuf,
    /// A Jinja file that replaces the model's template.
    pub template: Option<PathBuf>,
    /// JSON array of message objects.
    pub messages: PathBuf,
    /// JSON array of tool schemas (`tools`).
    pub tools: Option<PathBuf>,
    /// Append the opening of an assistant turn.
    pub add_generation_prompt: bool,
    /// JSON object of extra template arguments.
    pub kwargs: Option<String>,
    /// The date `strftime_now` reports; now when `None`.
    pub date: Option<ChatDate>,
}

fn read(path: &PathBuf) -> Result<String, ChatError> {
    std::fs::read_to_string(path).map_err(|e| ChatError::Input {
        what: path.display().to_string(),
        message: format!("cannot read: {e}"),
    })
}

impl TemplateFiles {
    /// Reads the files and renders the prompt.
    ///
    /// Errors: [`ChatError::Input`] naming the file (unreadable, not JSON, not the expected
    /// shape, a model without a template) or `--kwargs`; otherwise the template's own errors.
    pub fn render(&self) -> Result<String, ChatError> {
        let gguf = GgufFile::open(&self.model).map_err(|e| ChatError::Input {
            what: self.model.display().to_string(),
            message: e.to_string(),
        })?;
        let source = match &self.template {
            Some(p) => Some(read(p)?),
            None => None,
        };
        let template = ChatTemplate::from_gguf(gguf.metadata(), source.as_deref())?;
        let mut req = ChatRequest::from_json(
            &read(&self.messages)?,
            &self.messages.display().to_string(),
            self.add_generation_prompt,
        )?;
        if let Some(p) = &self.tools {
            req = req.with_tools_json(&read(p)?, &p.display().to_string())?;
        }
        if let Some(k) = &self.kwargs {
            req = req.with_kwargs_json(k, "--kwargs")?;
        }
        req.date = self.date;
        template.render_request(&req)
    }
}
