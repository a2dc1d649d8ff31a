//! The decode loop: continuous batching of sequences over one KV cache (chunked prefill, one batched decode step for every running sequence).
//!
//! A [`Batch`] holds the running sequences of one model. Each [`Batch::step`]:
//!
//! 1. **prefill**: the first sequence whose prompt is not yet in the cache gets one chunk
//!    of at most [`Batch::chunk`] prompt tokens (a matrix-matrix pass); when its last
//!    chunk is in, its first token is sampled;
//! 2. **decode**: every other running sequence gets one new token from one batched pass
//!    over the weights ([`Model::decode_batch`]).
//!
//! Sequences join with [`Batch::join`] between steps and leave when they finish, so a
//! running stream never waits longer than one prefill chunk plus one decode step for
//! its next token. Every sequence's output is what it would be alone: the batch only
//! changes which rows share a matrix product, never the numbers of a row.
//!
//! Stops (in this order, after each token): an end-of-generation token, a stop string
//! in the text (the text is cut before it), the new-token limit, the sink asking to
//! stop, cancellation. Text is streamed to the sink held back while it may still be
//! the start of a stop string, so a stop string never reaches the client.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::constrain::{Constraint, ConstraintError, Grammar};
use crate::flow::Flow;
use crate::kernels::logprob::{TokenLogprobs, token_logprobs};
use crate::kernels::sample::{Sampler, SamplerConfig, argmax};
use crate::kv::{KV_DTYPE, KvCache, KvDtype, SeqId};
use crate::model::{Logits, Model, ModelError};
use crate::prefix::PrefixCache;
use crate::tokenizer::{StreamState, Tokenizer, TokenizerError};

/// Default prefill chunk, in tokens.
pub const DEFAULT_CHUNK: usize = 64;

/// Why one sequence's generation ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Finish {
    /// An end-of-generation token (kept in the tokens).
    EndOfGeneration {
        /// The token id.
        token: u32,
    },
    /// The text reached a stop string; the text is cut before it.
    StopString {
        /// The stop string that matched.
        stop: String,
    },
    /// The requested `max_new_tokens` were generated.
    MaxTokens,
    /// The admitted new-token count was generated: the request was clamped to the
    /// KV budget.
    BudgetCap,
    /// The per-token callback asked to stop.
    Callback,
    /// The request was cancelled (its client went away).
    Cancelled,
}

/// What a sequence generates and when it stops.
#[derive(Debug, Clone)]
pub struct SeqSpec {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// New-token limit (the end-of-generation token counts).
    pub max_new_tokens: usize,
    /// Whether `max_new_tokens` is a budget clamp ([`Finish::BudgetCap`] rather than
    /// [`Finish::MaxTokens`] when it is reached).
    pub capped: bool,
    /// Sampling settings.
    pub sampling: SamplerConfig,
    /// Stop strings (empty strings are ignored).
    pub stop: Vec<String>,
    /// Stop at an end-of-generation token.
    pub stop_at_eog: bool,
    /// Log probabilities to report with each token ([`Piece::logprobs`]): `Some(n)` gives
    /// the token's own and the `n` most likely tokens' at its step; `None` computes none.
    pub logprobs: Option<usize>,
    /// Constrained decoding: every token keeps the output a prefix of a JSON value this
    /// grammar admits, and generation can end only once the value is complete (the logits
    /// are masked before sampling, so [`Piece::logprobs`] are over the allowed tokens).
    /// Needs the batch's tokenizer. `None`: unconstrained.
    pub constraint: Option<Arc<Grammar>>,
}

/// One streamed token: its id and the text it releases (possibly empty: an incomplete
/// character, an end-of-generation token, or text held back as a possible stop string).
#[derive(Debug, Clone, Copy)]
pub struct Piece<'a> {
    /// The token id.
    pub id: u32,
    /// Text released with it.
    pub text: &'a str,
    /// Its log probabilities, from the logits it was sampled from, when
    /// [`SeqSpec::logprobs`] asks for them; `None` for an end-of-generation token that ends
    /// the sequence (it is no part of the text).
    pub logprobs: Option<&'a TokenLogprobs>,
}

/// Receives a sequence's tokens as they are generated and its end.
pub trait Sink {
    /// A new token; return [`Flow::Stop`] to end the sequence after it.
    fn token(&mut self, piece: Piece<'_>) -> Flow;
    /// The sequence ended: the generated ids, the full text (cut before a stop string),
    /// and why. Any text not yet released is released here (`tail`).
    fn finish(&mut self, done: Done<'_>);
}

/// A finished sequence.
#[derive(Debug)]
pub struct Done<'a> {
    /// Generated ids in order.
    pub tokens: &'a [u32],
    /// Generated text (end-of-generation tokens not rendered; cut before a stop string).
    pub text: &'a str,
    /// Text not released with any token (the held-back end).
    pub tail: &'a str,
    /// Why it ended; `Err` when the model failed on this sequence.
    pub finish: Result<Finish, String>,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Seconds from joining to the first token.
    pub ttft: Option<f64>,
    /// Seconds from the first token to the last.
    pub decode_secs: f64,
}

/// A caller's key for a sequence of the batch.
pub type Key = u64;

struct Running<'s> {
    key: Key,
    seq: SeqId,
    spec: SeqSpec,
    /// Prompt tokens already in the cache.
    prefilled: usize,
    /// The last sampled token, not yet in the cache.
    next: Option<u32>,
    tokens: Vec<u32>,
    text: String,
    /// Bytes of `text` released to the sink.
    released: usize,
    sampler: Sampler,
    /// The logits row after the sampler's penalties and bias, reused from step to step.
    adjusted: Vec<f32>,
    /// The constraint's state, when the spec has one.
    constraint: Option<Constraint>,
    /// The masked logits row of a constrained sequence, reused from step to step.
    masked: Vec<f32>,
    decoder: StreamState,
    sink: Box<dyn Sink + 's>,
    cancel: Option<Arc<AtomicBool>>,
    joined: Instant,
    first: Option<Instant>,
}

/// The running sequences of one model over one paged KV cache.
pub struct Batch<'s> {
    model: Arc<Model>,
    tokenizer: Option<Arc<Tokenizer>>,
    kv: KvCache,
    running: Vec<Running<'s>>,
    chunk: usize,
    /// Tokens emitted and seconds spent by the decode passes (for the decode rate).
    decode_tokens: u64,
    decode_time: Duration,
    /// The last decode pass's logits, `[rows, vocab]`; reused from step to step.
    logits: Vec<f32>,
    /// The shared prefix cache, when the batch keeps finished prefixes.
    prefix: Option<PrefixCache>,
    /// Pages the prefix cache newly kept from each ended sequence, by key.
    kept: HashMap<Key, usize>,
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("running", &self.running.len())
            .field("chunk", &self.chunk)
            .finish_non_exhaustive()
    }
}

/// What one [`Batch::step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Prompt tokens prefilled.
    pub prefilled: usize,
    /// Sequences that got a token from the batched decode pass.
    pub decoded: usize,
}

impl<'s> Batch<'s> {
    /// An empty batch whose KV cache holds at most `max_tokens` positions in total
    /// (plus one page of slack per sequence, up to `max_seqs` sequences).
    ///
    /// Errors: the KV cache's configuration errors.
    pub fn new(
        model: Arc<Model>,
        tokenizer: Option<Arc<Tokenizer>>,
        max_tokens: usize,
        max_seqs: usize,
    ) -> Result<Batch<'s>, ModelError> {
        Batch::with_kv_dtype(model, tokenizer, max_tokens, max_seqs, KV_DTYPE)
    }

    /// [`Batch::new`] with a KV cache of element type `dtype`.
    ///
    /// Errors: the KV cache's configuration errors.
    pub fn with_kv_dtype(
        model: Arc<Model>,
        tokenizer: Option<Arc<Tokenizer>>,
        max_tokens: usize,
        max_seqs: usize,
        dtype: KvDtype,
    ) -> Result<Batch<'s>, ModelError> {
        let mut cfg = model.kv_config(max_tokens, dtype);
        cfg.max_pages += max_seqs.max(1);
        let kv = KvCache::new(cfg)?;
        Ok(Batch {
            model,
            tokenizer,
            kv,
            running: Vec::new(),
            chunk: DEFAULT_CHUNK,
            decode_tokens: 0,
            decode_time: Duration::ZERO,
            logits: Vec::new(),
            prefix: None,
            kept: HashMap::new(),
        })
    }

    /// The same batch keeping the full KV pages of every sequence that ends well in
    /// `cache` (its page size must be this batch's KV page size).
    pub fn with_prefix_cache(mut self, cache: PrefixCache) -> Batch<'s> {
        self.prefix = Some(cache);
        self
    }

    /// Positions per page of the batch's KV cache.
    pub fn page_tokens(&self) -> usize {
        self.kv.config().page_tokens
    }

    /// Pages the prefix cache newly kept from the sequence `key` when it ended (0 without a
    /// prefix cache); asked once per key.
    pub fn take_kept(&mut self, key: Key) -> usize {
        self.kept.remove(&key).unwrap_or(0)
    }

    /// The same batch with prefill chunks of `chunk` tokens (at least 1).
    pub fn with_chunk(mut self, chunk: usize) -> Batch<'s> {
        self.chunk = chunk.max(1);
        self
    }

    /// The prefill chunk, in tokens.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Running sequences.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// No sequence is running.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Aggregate decode rate so far, in tokens per second (`None` before any decode).
    pub fn decode_rate(&self) -> Option<f64> {
        let secs = self.decode_time.as_secs_f64();
        (self.decode_tokens > 0 && secs > 0.0).then(|| self.decode_tokens as f64 / secs)
    }

    /// Tokens the decode passes produced so far, and the time they took.
    pub fn decode_totals(&self) -> (u64, Duration) {
        (self.decode_tokens, self.decode_time)
    }

    /// Steps each running sequence takes at most before it ends, by key, in join order: the
    /// prefill chunks of its prompt and of the prompts that join before it still prefilling
    /// (one chunk per step, first come first served), then one step per new token left
    /// (the first new token comes from the step that ends its prefill). A sequence that
    /// stops early (end of generation, a stop string) ends sooner.
    pub fn steps_left(&self) -> Vec<(Key, u64)> {
        let mut prefill_steps = 0u64;
        self.running
            .iter()
            .map(|r| {
                let tokens_left = r.spec.max_new_tokens.saturating_sub(r.tokens.len()) as u64;
                let prompt_left = r.spec.prompt.len().saturating_sub(r.prefilled);
                if prompt_left == 0 {
                    return (r.key, tokens_left);
                }
                prefill_steps += prompt_left.div_ceil(self.chunk) as u64;
                (r.key, prefill_steps + tokens_left.saturating_sub(1))
            })
            .collect()
    }

    /// Add a sequence under `key`; it is prefilled from the next step on. `cancel`, when
    /// set, ends it with [`Finish::Cancelled`] at the next step.
    ///
    /// Errors: an empty prompt ([`ModelError::Empty`]), a prompt plus new tokens beyond
    /// the context length ([`ModelError::ContextOverflow`]).
    pub fn join(
        &mut self,
        key: Key,
        spec: SeqSpec,
        sink: Box<dyn Sink + 's>,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<(), ModelError> {
        self.join_cached(key, spec, &[], sink, cancel)
    }

    /// [`Batch::join`] for a sequence whose prompt starts with the full KV pages `cached`
    /// (a [`crate::prefix::PrefixLease`]'s): they are shared, not computed again, and its
    /// prefill starts after them. They must hold fewer positions than the prompt.
    ///
    /// Errors: as [`Batch::join`]; a page the cache no longer holds.
    pub fn join_cached(
        &mut self,
        key: Key,
        spec: SeqSpec,
        cached: &[usize],
        sink: Box<dyn Sink + 's>,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<(), ModelError> {
        if spec.prompt.is_empty() {
            return Err(ModelError::Empty);
        }
        let positions = spec.prompt.len() + spec.max_new_tokens;
        let context = self.model.config().context_len;
        if positions > context {
            return Err(ModelError::ContextOverflow { positions, context });
        }
        let prefilled = cached.len() * self.kv.config().page_tokens;
        if prefilled >= spec.prompt.len() {
            return Err(ModelError::Empty);
        }
        let seq = self.kv.adopt(cached)?;
        self.running.push(Running {
            key,
            seq,
            sampler: Sampler::new(spec.sampling.clone()),
            adjusted: Vec::new(),
            constraint: spec.constraint.clone().map(Constraint::new),
            masked: Vec::new(),
            spec,
            prefilled,
            next: None,
            tokens: Vec::new(),
            text: String::new(),
            released: 0,
            decoder: StreamState::default(),
            sink,
            cancel,
            joined: Instant::now(),
            first: None,
        });
        Ok(())
    }

    /// One step: one prefill chunk (if a sequence is still prefilling), then one
    /// batched decode pass over every sequence that has a token to feed. Finished
    /// sequences leave the batch and their keys are returned (their sinks got
    /// [`Sink::finish`]).
    pub fn step(&mut self) -> (StepReport, Vec<Key>) {
        let mut report = StepReport::default();
        let mut ended: HashMap<Key, Result<Finish, String>> = HashMap::new();
        // Pages the prefix cache evicted: drop its hold on each.
        if let Some(prefix) = &self.prefix {
            for page in prefix.take_evicted() {
                self.kv.unretain(page);
            }
        }
        // Cancelled sequences leave before any work is spent on them.
        for r in &self.running {
            if r.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                ended.insert(r.key, Ok(Finish::Cancelled));
            }
        }
        // The decode set is fixed before the prefill: a sequence whose prompt completes in
        // this step samples its first token from the prefill and decodes from the next.
        let decode: Vec<usize> = (0..self.running.len())
            .filter(|&i| {
                !ended.contains_key(&self.running[i].key) && self.running[i].next.is_some()
            })
            .collect();
        // 1. one prefill chunk
        if let Some(i) = (0..self.running.len()).find(|&i| {
            let r = &self.running[i];
            r.prefilled < r.spec.prompt.len() && !ended.contains_key(&r.key)
        }) {
            let r = &mut self.running[i];
            let end = (r.prefilled + self.chunk).min(r.spec.prompt.len());
            let chunk = &r.spec.prompt[r.prefilled..end];
            report.prefilled = chunk.len();
            match self.model.forward(&mut self.kv, r.seq, chunk, Logits::Last) {
                Ok(logits) => {
                    r.prefilled = end;
                    if end == r.spec.prompt.len() {
                        if r.spec.max_new_tokens == 0 {
                            ended.insert(r.key, Ok(Finish::MaxTokens));
                        } else {
                            if let Some(f) = draw(r, &logits, self.tokenizer.as_deref()) {
                                ended.insert(r.key, f);
                            }
                        }
                    }
                }
                Err(e) => {
                    ended.insert(r.key, Err(e.to_string()));
                }
            }
        }
        // 2. one batched decode pass
        if !decode.is_empty() {
            let rows: Vec<(SeqId, u32)> = decode
                .iter()
                .map(|&i| {
                    let r = &self.running[i];
                    (
                        r.seq,
                        r.next
                            .expect("decode set holds sequences with a next token"),
                    )
                })
                .collect();
            let t0 = Instant::now();
            match self
                .model
                .decode_batch_into(&mut self.kv, &rows, &mut self.logits)
            {
                Ok(()) => {
                    let logits = &self.logits;
                    self.decode_time += t0.elapsed();
                    self.decode_tokens += rows.len() as u64;
                    report.decoded = rows.len();
                    let vocab = self.model.config().vocab;
                    for (j, &i) in decode.iter().enumerate() {
                        let r = &mut self.running[i];
                        let row = &logits[j * vocab..(j + 1) * vocab];
                        if let Some(f) = draw(r, row, self.tokenizer.as_deref()) {
                            ended.insert(r.key, f);
                        }
                    }
                }
                Err(e) => {
                    for &i in &decode {
                        ended.insert(self.running[i].key, Err(e.to_string()));
                    }
                }
            }
        }
        let mut keys = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            let Some(finish) = ended.remove(&self.running[i].key) else {
                i += 1;
                continue;
            };
            let mut r = self.running.swap_remove(i);
            if let (Some(prefix), Ok(_)) = (&self.prefix, &finish) {
                // Only prompt positions are kept: their rows are what a prefill computes, so a
                // later request that shares them gets the rows recomputing would give. (The
                // generated tokens' rows come from the decode pass, whose products may differ
                // from the prefill's in the last bits, enough to flip a near-tie much later.)
                let written = self.kv.len(r.seq).min(r.spec.prompt.len());
                let pt = self.kv.config().page_tokens;
                let full = written / pt;
                let stream = r.spec.prompt[..full * pt].to_vec();
                let blocks = self.kv.block_table(r.seq)[..full].to_vec();
                let kept = prefix.offer(&stream, &blocks);
                for &page in &kept {
                    let _ = self.kv.retain(page);
                }
                self.kept.insert(r.key, kept.len());
            }
            self.kv.release(r.seq);
            finish_seq(&mut r, finish, self.tokenizer.as_deref());
            keys.push(r.key);
        }
        // Keep join order for the prefill (FIFO) after swap_remove.
        self.running.sort_by_key(|r| r.key);
        (report, keys)
    }

    /// Step until every sequence has finished.
    pub fn run_to_end(&mut self) {
        while !self.running.is_empty() {
            self.step();
        }
    }
}

/// Draw the next token of `r` from `row` and [`accept`] it: whether the sequence ends.
fn draw(
    r: &mut Running<'_>,
    row: &[f32],
    tokenizer: Option<&Tokenizer>,
) -> Option<Result<Finish, String>> {
    match choose(r, row, tokenizer) {
        Ok((next, lp)) => accept(r, next, lp, tokenizer),
        Err(e) => Some(Err(e)),
    }
}

/// Draw the next token of `r` from `row` (`[vocab]` logits), with its log probabilities
/// when asked for. Under a constraint the row is masked to the allowed tokens first; a
/// greedy draw without log probabilities first tries the unmasked argmax, which is the
/// masked argmax whenever the constraint allows it (the mask only removes tokens, and ties
/// go to the lower id either way).
///
/// Errors: a constrained sequence without a tokenizer, or one no token can continue.
fn choose(
    r: &mut Running<'_>,
    row: &[f32],
    tokenizer: Option<&Tokenizer>,
) -> Result<(u32, Option<TokenLogprobs>), String> {
    // Penalties and logit bias first: the row the token is drawn from (and its log
    // probabilities) is the adjusted one.
    let row: &[f32] = if r.sampler.adjust_into(row, &mut r.adjusted) {
        &r.adjusted
    } else {
        row
    };
    let Some(c) = r.constraint.as_mut() else {
        let next = r.sampler.draw(row).unwrap_or(0);
        return Ok((next, r.spec.logprobs.map(|n| token_logprobs(row, next, n))));
    };
    let Some(tok) = tokenizer else {
        return Err("constrained decoding needs the model's tokenizer".to_string());
    };
    let vocab = tok.constraint_vocab();
    let refused = |e: ConstraintError| format!("constrained decoding: {e}");
    if r.spec.sampling.temperature <= 0.0
        && r.spec.logprobs.is_none()
        && let Some(best) = argmax(row).map(|i| i as u32)
        && c.advance(vocab, best).is_ok()
    {
        return Ok((best, None));
    }
    if !c.mask_logits(vocab, row, &mut r.masked) {
        return Err(refused(ConstraintError::NoToken));
    }
    let next = r.sampler.draw(&r.masked).unwrap_or(0);
    c.advance(vocab, next).map_err(refused)?;
    let lp = r.spec.logprobs.map(|n| token_logprobs(&r.masked, next, n));
    Ok((next, lp))
}

/// Record token `next` of `r`, stream it, and tell whether the sequence ends with it.
fn accept(
    r: &mut Running<'_>,
    next: u32,
    logprobs: Option<TokenLogprobs>,
    tokenizer: Option<&Tokenizer>,
) -> Option<Result<Finish, String>> {
    if r.first.is_none() {
        r.first = Some(Instant::now());
    }
    r.tokens.push(next);
    r.sampler.observe(next);
    let eog = tokenizer.is_some_and(|t| t.is_eog(next));
    if let Some(tok) = tokenizer.filter(|_| !eog) {
        match r.decoder.push(tok, next) {
            Ok(piece) => r.text.push_str(&piece.unwrap_or_default()),
            Err(e) => return Some(Err(tokenizer_error(e))),
        }
    }
    let stop = find_stop(&r.text, &r.spec.stop);
    let safe = match &stop {
        Some((_, at)) => *at,
        None => r.text.len() - held_back(&r.text, &r.spec.stop),
    };
    let safe = safe.max(r.released);
    let flow = r.sink.token(Piece {
        id: next,
        text: &r.text[r.released..safe],
        logprobs: logprobs.as_ref().filter(|_| !(eog && r.spec.stop_at_eog)),
    });
    r.released = safe;
    if eog && r.spec.stop_at_eog {
        return Some(Ok(Finish::EndOfGeneration { token: next }));
    }
    if let Some((stop, at)) = stop {
        r.text.truncate(at);
        return Some(Ok(Finish::StopString { stop }));
    }
    if r.tokens.len() >= r.spec.max_new_tokens {
        return Some(Ok(if r.spec.capped {
            Finish::BudgetCap
        } else {
            Finish::MaxTokens
        }));
    }
    if flow == Flow::Stop {
        return Some(Ok(Finish::Callback));
    }
    if r.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
        return Some(Ok(Finish::Cancelled));
    }
    r.next = Some(next);
    None
}

fn tokenizer_error(e: TokenizerError) -> String {
    format!("decoding a generated token: {e}")
}

fn finish_seq(r: &mut Running<'_>, finish: Result<Finish, String>, tokenizer: Option<&Tokenizer>) {
    let mut finish = finish;
    if let Some(tok) = tokenizer.filter(|_| !matches!(finish, Ok(Finish::StopString { .. }))) {
        match r.decoder.finish(tok) {
            Ok(Some(rest)) => r.text.push_str(&rest),
            Ok(None) => {}
            Err(e) => finish = Err(tokenizer_error(e)),
        }
    }
    let released = r.released.min(r.text.len());
    let decode_secs = r.first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    r.sink.finish(Done {
        tokens: &r.tokens,
        text: &r.text,
        tail: &r.text[released..],
        finish,
        prompt_tokens: r.spec.prompt.len(),
        ttft: r.first.map(|t| (t - r.joined).as_secs_f64()),
        decode_secs,
    });
}

/// The earliest stop string in `text`, with the byte offset where it starts.
fn find_stop(text: &str, stops: &[String]) -> Option<(String, usize)> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|at| (s.clone(), at)))
        .min_by_key(|(_, at)| *at)
}

/// Bytes at the end of `text` that may be the start of a stop string (held back).
fn held_back(text: &str, stops: &[String]) -> usize {
    let mut hold = 0;
    for s in stops.iter().filter(|s| !s.is_empty()) {
        for (k, _) in s.char_indices().skip(1) {
            if k > hold && text.ends_with(&s[..k]) {
                hold = k;
            }
        }
    }
    hold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_back_keeps_a_possible_stop_prefix() {
        let stops = vec!["END".to_string()];
        assert_eq!(held_back("abc E", &stops), 1);
        assert_eq!(held_back("abc EN", &stops), 2);
        assert_eq!(held_back("abc", &stops), 0);
        assert_eq!(find_stop("xx END yy", &stops), Some(("END".into(), 3)));
    }
}
