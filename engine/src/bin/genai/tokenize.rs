//! `genai tokenize`: the token ids of a text, special tokens recognised.

use anyhow::Result;
use clap::Args;

use engine::runtime::EngineOptions;

use crate::model::{ModelArgs, load_engine};

/// Arguments of `genai tokenize`.
#[derive(Args)]
pub(crate) struct TokenizeArgs {
    /// The text.
    text: String,
    #[command(flatten)]
    model: ModelArgs,
}

/// Print the token ids of `args.text`, separated by spaces.
pub(crate) fn run(args: TokenizeArgs) -> Result<()> {
    let l = load_engine(&args.model, EngineOptions::default())?;
    let ids = l.tokenizer()?.encode(&args.text)?;
    println!(
        "{}",
        ids.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}
