//! OpenAI's `logprobs` objects (chat `content` entries, the completions token lists) from the engine's [`TokenLogprobs`].
//!
//! Shapes, from OpenAI's API reference ("The chat completion object", "The completion
//! object"):
//!
//! - chat: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
//!   "logprob", "bytes"}]}], "refusal": null}`, one entry per generated token; a streamed
//!   chunk carries the entries of its own tokens;
//! - completions: `{"tokens": [..], "token_logprobs": [..], "top_logprobs": [{token:
//!   logprob}], "text_offset": [..]}`; `text_offset` counts UTF-8 bytes of the generated
//!   text before each token.
//!
//! `token` is the token's bytes as text (a token holding part of a character shows U+FFFD
//! there; `bytes` holds the exact bytes). A log probability that is `-inf` is written
//! `-9999.0`, as OpenAI writes it.

use serde_json::{Map, Value, json};

use crate::kernels::logprob::TokenLogprobs;
use crate::tokenizer::Tokenizer;

/// What OpenAI writes for a log probability of `-inf`.
const NEG_INF_LOGPROB: f64 = -9999.0;

fn logprob(lp: f32) -> f64 {
    if lp.is_finite() {
        f64::from(lp)
    } else {
        NEG_INF_LOGPROB
    }
}

/// The bytes of token `id` and their text (the id in decimal without a tokenizer).
fn token(tok: Option<&Tokenizer>, id: u32) -> (String, Vec<u8>) {
    match tok.and_then(|t| t.token_bytes(id).ok()) {
        Some(bytes) => (String::from_utf8_lossy(&bytes).into_owned(), bytes),
        None => (id.to_string(), Vec::new()),
    }
}

/// One entry of a chat `logprobs.content` list.
pub fn chat_entry(tok: Option<&Tokenizer>, lp: &TokenLogprobs) -> Value {
    let (text, bytes) = token(tok, lp.id);
    let top: Vec<Value> = lp
        .top
        .iter()
        .map(|&(id, l)| {
            let (text, bytes) = token(tok, id);
            json!({"token": text, "logprob": logprob(l), "bytes": bytes})
        })
        .collect();
    json!({"token": text, "logprob": logprob(lp.logprob), "bytes": bytes, "top_logprobs": top})
}

/// A chat choice's `logprobs` object for `tokens`, in order.
pub fn chat(tok: Option<&Tokenizer>, tokens: &[TokenLogprobs]) -> Value {
    let content: Vec<Value> = tokens.iter().map(|lp| chat_entry(tok, lp)).collect();
    json!({"content": content, "refusal": Value::Null})
}

/// A completions choice's `logprobs` object for `tokens`, in order; `offset` is the
/// `text_offset` of the first (the bytes of text before it, for a streamed chunk).
pub fn completion(tok: Option<&Tokenizer>, tokens: &[TokenLogprobs], offset: usize) -> Value {
    let mut texts = Vec::with_capacity(tokens.len());
    let mut lps = Vec::with_capacity(tokens.len());
    let mut tops = Vec::with_capacity(tokens.len());
    let mut offsets = Vec::with_capacity(tokens.len());
    let mut at = offset;
    for lp in tokens {
        let (text, bytes) = token(tok, lp.id);
        offsets.push(at);
        at += bytes.len();
        texts.push(text);
        lps.push(logprob(lp.logprob));
        let mut top = Map::new();
        for &(id, l) in &lp.top {
            top.insert(token(tok, id).0, json!(logprob(l)));
        }
        tops.push(Value::Object(top));
    }
    json!({"tokens": texts, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets})
}

/// The UTF-8 bytes token `id` adds to the text (0 without a tokenizer).
pub fn token_len(tok: Option<&Tokenizer>, id: u32) -> usize {
    token(tok, id).1.len()
}
