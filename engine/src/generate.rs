//! The generation loop of the decode core: prefill, then sample and decode one token at a time until a stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::kernels::sample::{Sampler, SamplerConfig};
use crate::kv::{KvCache, SeqId};
use crate::model::{Logits, Model, ModelError};
use crate::tokenizer::{Tokenizer, TokenizerError};

/// What a generation may do and when it stops.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Upper bound on generated tokens (the end-of-generation token counts).
    pub max_new_tokens: usize,
    /// Sampling parameters; the default is greedy.
    pub sampler: SamplerConfig,
    /// Stop as soon as the generated text contains one of these; the text is cut before it.
    pub stop_strings: Vec<String>,
    /// Stop on an end-of-generation token (eos, `<|im_end|>`, ...).
    pub stop_at_eog: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_new_tokens: 128,
            sampler: SamplerConfig::default(),
            stop_strings: Vec::new(),
            stop_at_eog: true,
        }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FinishReason {
    /// The model produced an end-of-generation token (kept in `tokens`).
    EndOfGeneration {
        /// The token id.
        token: u32,
    },
    /// The text reached a stop string.
    StopString {
        /// The stop string that matched.
        stop: String,
    },
    /// `max_new_tokens` tokens were generated.
    MaxTokens,
    /// The caller cancelled between steps.
    Cancelled,
    /// The per-token callback asked to stop.
    Callback,
}

/// What the per-token callback tells the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep generating.
    Continue,
    /// Stop after this token.
    Stop,
}

/// The outcome of one generation.
#[derive(Debug, Clone)]
pub struct Generation {
    /// Tokens in the prompt that was prefilled.
    pub prompt_tokens: usize,
    /// Generated token ids, in order.
    pub tokens: Vec<u32>,
    /// Generated text (end-of-generation tokens are not rendered; cut before a stop string).
    pub text: String,
    /// Why it ended.
    pub finish: FinishReason,
    /// Wall seconds of the prefill (the prompt's forward pass and first sample).
    pub prefill_secs: f64,
    /// Wall seconds of the decode steps after the first token.
    pub decode_secs: f64,
}

impl Generation {
    /// Prompt tokens per second of the prefill.
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        rate(self.prompt_tokens, self.prefill_secs)
    }

    /// Generated tokens per second of decode (tokens after the first over decode time).
    pub fn decode_tokens_per_sec(&self) -> f64 {
        rate(self.tokens.len().saturating_sub(1), self.decode_secs)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

/// Errors of a generation.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The forward pass failed (context overflow, KV cache full, bad token id...).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Decoding a generated token to text failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// An empty prompt: there is nothing to condition on.
    #[error("the prompt is empty: at least one token is needed")]
    EmptyPrompt,
}

/// Prefill `prompt` into `seq` of `kv`, then generate until a stop.
///
/// `on_token(id, piece)` is called for every generated token with the text it completes
/// (empty while a multi-byte character is incomplete, and for end-of-generation tokens);
/// `cancel` is checked between steps. The sequence keeps the prompt and every generated
/// token but the last in the cache.
#[allow(clippy::too_many_arguments)]
pub fn generate(
    model: &Model,
    tokenizer: &Tokenizer,
    kv: &mut KvCache,
    seq: SeqId,
    prompt: &[u32],
    opts: &GenerateOptions,
    cancel: Option<&AtomicBool>,
    on_token: &mut dyn FnMut(u32, &str) -> Flow,
) -> Result<Generation, GenerateError> {
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    let mut sampler = Sampler::new(opts.sampler);
    let mut decoder = tokenizer.stream_decoder();
    let mut tokens = Vec::new();
    let mut text = String::new();
    let cancelled = || cancel.is_some_and(|c| c.load(Ordering::Relaxed));

    let t0 = Instant::now();
    if opts.max_new_tokens == 0 {
        model.forward(kv, seq, prompt, Logits::Last)?;
        return Ok(Generation {
            prompt_tokens: prompt.len(),
            tokens,
            text,
            finish: FinishReason::MaxTokens,
            prefill_secs: t0.elapsed().as_secs_f64(),
            decode_secs: 0.0,
        });
    }
    let mut logits = model.forward(kv, seq, prompt, Logits::Last)?;
    let mut next = sampler.sample(&logits);
    let prefill_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();

    let finish = loop {
        tokens.push(next);
        let eog = tokenizer.is_eog(next);
        let piece = if eog {
            String::new()
        } else {
            decoder.push(next)?.unwrap_or_default()
        };
        text.push_str(&piece);
        let flow = on_token(next, &piece);
        if eog && opts.stop_at_eog {
            break FinishReason::EndOfGeneration { token: next };
        }
        if let Some((stop, at)) = find_stop(&text, &opts.stop_strings) {
            text.truncate(at);
            break FinishReason::StopString { stop };
        }
        if tokens.len() >= opts.max_new_tokens {
            break FinishReason::MaxTokens;
        }
        if flow == Flow::Stop {
            break FinishReason::Callback;
        }
        if cancelled() {
            break FinishReason::Cancelled;
        }
        logits = model.forward(kv, seq, &[next], Logits::Last)?;
        next = sampler.sample(&logits);
    };
    if !matches!(finish, FinishReason::StopString { .. })
        && let Some(rest) = decoder.finish()?
    {
        text.push_str(&rest);
    }
    Ok(Generation {
        prompt_tokens: prompt.len(),
        tokens,
        text,
        finish,
        prefill_secs,
        decode_secs: t1.elapsed().as_secs_f64(),
    })
}

/// The earliest stop string in `text`, with the byte offset where it starts.
fn find_stop(text: &str, stops: &[String]) -> Option<(String, usize)> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|at| (s.clone(), at)))
        .min_by_key(|(_, at)| *at)
}
