//! `genai template render`: the prompt a chat template renders for a conversation, byte for byte.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use engine::chat::{ChatDate, TemplateFiles};

use crate::model::resolve_model;

#[derive(Subcommand)]
pub(crate) enum TemplateCommand {
    /// Print the prompt the chat template renders for a conversation, byte for byte, to stdout.
    Render(TemplateRenderArgs),
}

#[derive(Args)]
pub(crate) struct TemplateRenderArgs {
    /// GGUF model whose template and special tokens are used [default: the SmolLM2 file
    /// fetched by scripts/fetch-model].
    #[arg(long, short)]
    model: Option<PathBuf>,
    /// A Jinja template file used instead of the model's (special tokens still from the model).
    #[arg(long)]
    template: Option<PathBuf>,
    /// The conversation: a JSON array of messages ({"role": ..., "content": ...}, tool_calls, ...).
    #[arg(long)]
    messages: PathBuf,
    /// Tool schemas: a JSON array, visible to the template as `tools`.
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Do not append the opening of an assistant turn.
    #[arg(long)]
    no_generation_prompt: bool,
    /// Extra template arguments as a JSON object, e.g. '{"enable_thinking": false}'.
    #[arg(long)]
    kwargs: Option<String>,
    /// The date `strftime_now` reports (YYYY-MM-DD, at midnight) [default: now].
    #[arg(long)]
    date: Option<ChatDate>,
}

/// Run a `genai template` subcommand.
pub(crate) fn run(command: TemplateCommand) -> Result<()> {
    let TemplateCommand::Render(a) = command;
    let files = TemplateFiles {
        model: resolve_model(&a.model)?,
        template: a.template,
        messages: a.messages,
        tools: a.tools,
        add_generation_prompt: !a.no_generation_prompt,
        kwargs: a.kwargs,
        date: a.date,
    };
    let prompt = files.render()?;
    let mut out = std::io::stdout().lock();
    out.write_all(prompt.as_bytes())?;
    out.flush()?;
    Ok(())
}
