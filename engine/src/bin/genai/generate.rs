//! `genai generate`: one continuation of a prompt streamed to stdout; and the sampling flags and the streamed reply it shares with `genai chat`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, bail};
use clap::Args;

use engine::chat::Message;
use engine::kernels::sample::SamplerConfig;
use engine::runtime::{Flow, GenerateRequest, Prompt};

use crate::measure::rate;
use crate::model::{KvArgs, Loaded, ModelArgs, chat_template, load_engine};

/// Arguments of `genai generate`.
#[derive(Args)]
pub(crate) struct GenerateArgs {
    /// The prompt.
    prompt: String,
    /// Wrap the prompt as a user turn with the model's chat template.
    #[arg(long)]
    chat: bool,
    /// A system turn (with --chat).
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    kv: KvArgs,
    #[command(flatten)]
    sample: SampleArgs,
}

/// The sampling flags of `genai generate` and `genai chat`.
#[derive(Args, Clone)]
pub(crate) struct SampleArgs {
    /// Maximum new tokens.
    #[arg(long, short = 'n', default_value_t = 128)]
    max_new_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep only the k most likely tokens (0: off).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Nucleus sampling mass (1: off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Drop tokens below this fraction of the top probability (0: off).
    #[arg(long, default_value_t = 0.0)]
    min_p: f32,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop when the text contains this string (repeatable).
    #[arg(long = "stop")]
    stop: Vec<String>,
}

/// Generate a continuation of `args.prompt` (a user turn with `--chat`), streamed to stdout.
pub(crate) fn run(args: GenerateArgs) -> Result<()> {
    let l = load_engine(&args.model, args.kv.options())?;
    let text = if args.chat {
        let mut msgs = Vec::new();
        if let Some(s) = args.system {
            msgs.push(Message::system(s));
        }
        msgs.push(Message::user(args.prompt));
        chat_template(&l)?.render(&msgs, true)?
    } else {
        if args.system.is_some() {
            bail!("--system needs --chat");
        }
        args.prompt
    };
    stream(&l, &request(text, &args.sample), None)?;
    Ok(())
}

/// The engine's request for a text prompt under the sampling flags.
pub(crate) fn request(text: String, s: &SampleArgs) -> GenerateRequest {
    GenerateRequest::new(Prompt::Text(text), s.max_new_tokens)
        .with_sampling(SamplerConfig {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            seed: s.seed,
            ..SamplerConfig::default()
        })
        .with_stop(s.stop.clone())
}

/// Run `req` through the engine's funnel, streaming its text to stdout; the stats line
/// goes to stderr. `interrupt`, when given and set (Ctrl-C), stops the reply after the
/// token in hand and is cleared. Returns the generated text.
pub(crate) fn stream(
    l: &Loaded,
    req: &GenerateRequest,
    interrupt: Option<&AtomicBool>,
) -> Result<String> {
    let mut out = std::io::stdout().lock();
    let mut printed = 0;
    let r = l
        .engine
        .generate_stream(req, &mut |_| {}, &mut |_, piece| {
            printed += piece.text.len();
            let _ = out.write_all(piece.text.as_bytes());
            let _ = out.flush();
            if interrupt.is_some_and(|i| i.swap(false, Ordering::SeqCst)) {
                Flow::Stop
            } else {
                Flow::Continue
            }
        })?;
    let row = &r.rows[0];
    let text = row.text.clone().unwrap_or_default();
    // Text held back as a possible stop string is released at the end.
    writeln!(out, "{}", text.get(printed..).unwrap_or_default())?;
    let n = row.tokens.len();
    eprintln!(
        "[prompt {} tokens, generated {n} tokens, prefill {:.1} tok/s, decode {:.1} tok/s, \
         load {:.2} s, finish {:?}]",
        r.prompt_tokens,
        rate(r.prompt_tokens, r.prefill_secs),
        rate(n.saturating_sub(1), r.decode_secs),
        l.load_secs,
        row.finish
    );
    Ok(text)
}
