//! Token selection from logits: argmax and seeded sampling with temperature, top-k, top-p, min-p, after OpenAI's frequency and presence penalties and logit bias.

use std::collections::HashMap;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// Index of the largest logit; the lowest index wins ties, NaN never wins.
///
/// Shape: `logits` is `[vocab]`. Returns `None` when `logits` is empty or every value is NaN.
/// `-inf` is an ordinary value (so all `-inf` returns `Some(0)`); `-0.0` and `+0.0` tie.
///
/// Two passes the compiler vectorises, instead of one branchy pass: the maximum under `>`
/// (NaN compares false, so it never replaces a maximum) over [`ARGMAX_LANES`] running lanes,
/// then the first block of lanes holding a value equal to it and the first such index in
/// that block. Greedy decoding runs this once per token over the whole vocabulary.
pub fn argmax(logits: &[f32]) -> Option<usize> {
    let greater = |m: f32, v: f32| if v > m { v } else { m };
    let mut lanes = [f32::NEG_INFINITY; ARGMAX_LANES];
    let mut blocks = logits.chunks_exact(ARGMAX_LANES);
    for block in &mut blocks {
        for (m, &v) in lanes.iter_mut().zip(block) {
            *m = greater(*m, v);
        }
    }
    let max = blocks.remainder().iter().fold(
        lanes.into_iter().fold(f32::NEG_INFINITY, greater),
        |m, &v| greater(m, v),
    );
    let first_block = logits
        .chunks(ARGMAX_LANES)
        .position(|block| block.iter().fold(false, |hit, &v| hit | (v == max)))?;
    let at = first_block * ARGMAX_LANES;
    logits[at..].iter().position(|&v| v == max).map(|i| at + i)
}

/// Running maxima of [`argmax`]: one AVX-512 register of f32.
const ARGMAX_LANES: usize = 16;

/// Settings of a [`Sampler`]. Every value has a defined meaning (see the fields), so a
/// sampler can always be built; [`SamplerConfig::validate`] rejects values a request should
/// not carry (NaN, negative, out of range).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; logits are divided by it. `0` (or less) means greedy: [`argmax`].
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; `0` turns the filter off.
    pub top_k: usize,
    /// Nucleus sampling: keep the smallest set of most likely tokens whose probability sums to
    /// at least `top_p` (always at least one token); `1` (or more) turns the filter off.
    pub top_p: f32,
    /// Keep tokens whose probability is at least `min_p` times the most likely token's;
    /// `0` (or less) turns the filter off.
    pub min_p: f32,
    /// Seed of the ChaCha8 stream the draws come from.
    pub seed: u64,
    /// OpenAI's `frequency_penalty`: subtracted from a token's logit once for every time
    /// the sequence has generated it so far. `0` turns it off.
    pub frequency_penalty: f32,
    /// OpenAI's `presence_penalty`: subtracted once from the logit of every token the
    /// sequence has generated so far. `0` turns it off.
    pub presence_penalty: f32,
    /// OpenAI's `logit_bias`: `(token id, bias)` pairs, the bias added to the token's logit
    /// before sampling; a bias of [`BAN_BIAS`] (or less) bans the token (its logit becomes
    /// `-inf`). Empty turns it off. The biases of an id given twice add up.
    pub logit_bias: Arc<[(u32, f32)]>,
}

/// The `logit_bias` value that bans a token (OpenAI: "values like -100 ... should result in
/// a ban"); the bias is then not added but the logit set to `-inf`.
pub const BAN_BIAS: f32 = -100.0;

/// The largest penalty magnitude OpenAI accepts (`frequency_penalty`, `presence_penalty`).
pub const MAX_PENALTY: f32 = 2.0;

/// The largest bias magnitude OpenAI accepts in `logit_bias`.
pub const MAX_BIAS: f32 = 100.0;

impl Default for SamplerConfig {
    /// Greedy decoding: temperature 0, every filter off, seed 0.
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            logit_bias: Arc::new([]),
        }
    }
}

/// Why a sampler setting or a sampling call was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// A configuration field holds a value outside its documented range.
    #[error("sampler setting `{field}` = {value} is invalid: {expected}")]
    InvalidSetting {
        /// Field name in [`SamplerConfig`].
        field: &'static str,
        /// The rejected value.
        value: f32,
        /// The accepted range.
        expected: &'static str,
    },
    /// The logits row is empty.
    #[error("cannot sample from an empty logits row")]
    EmptyLogits,
    /// A `logit_bias` token id outside the vocabulary.
    #[error(
        "sampler setting `logit_bias` names token {token}, outside the vocabulary of {vocab} tokens"
    )]
    BiasToken {
        /// The token id.
        token: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// No logit is a number greater than `-inf` (all NaN or `-inf`), so there is no
    /// distribution to draw from.
    #[error("cannot sample: none of the {vocab} logits is a finite number or +inf")]
    NoCandidate {
        /// Length of the logits row.
        vocab: usize,
    },
}

impl SampleError {
    /// The [`SamplerConfig`] field at fault, if the error is about a setting.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            SampleError::InvalidSetting { field, .. } => Some(field),
            SampleError::BiasToken { .. } => Some("logit_bias"),
            _ => None,
        }
    }
}

impl SamplerConfig {
    /// Whether penalties or a bias change the logits (otherwise the row is drawn from as
    /// given, and greedy decoding is the plain [`argmax`]).
    pub fn adjusts(&self) -> bool {
        self.frequency_penalty != 0.0 || self.presence_penalty != 0.0 || !self.logit_bias.is_empty()
    }

    /// [`SamplerConfig::validate`], and every `logit_bias` id below `vocab`.
    ///
    /// # Errors
    /// [`SampleError::InvalidSetting`] or [`SampleError::BiasToken`] naming the value.
    pub fn validate_for_vocab(&self, vocab: usize) -> Result<(), SampleError> {
        self.validate()?;
        match self.logit_bias.iter().find(|(id, _)| *id as usize >= vocab) {
            Some(&(token, _)) => Err(SampleError::BiasToken { token, vocab }),
            None => Ok(()),
        }
    }

    /// Check that every field is in range: `temperature` finite and `≥ 0`, `top_p` in
    /// `(0, 1]`, `min_p` in `[0, 1]`, the penalties in `[-2, 2]` and each bias in
    /// `[-100, 100]` (OpenAI's ranges).
    pub fn validate(&self) -> Result<(), SampleError> {
        let bad = |field, value, expected| {
            Err(SampleError::InvalidSetting {
                field,
                value,
                expected,
            })
        };
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temperature", self.temperature, "a finite number >= 0");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p, "a number in (0, 1]");
        }
        if !(self.min_p >= 0.0 && self.min_p <= 1.0) {
            return bad("min_p", self.min_p, "a number in [0, 1]");
        }
        for (field, v) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ] {
            if !(-MAX_PENALTY..=MAX_PENALTY).contains(&v) {
                return bad(field, v, "a number in [-2, 2]");
            }
        }
        if let Some(&(_, b)) = self
            .logit_bias
            .iter()
            .find(|(_, b)| !(-MAX_BIAS..=MAX_BIAS).contains(b))
        {
            return bad("logit_bias", b, "a bias in [-100, 100]");
        }
        Ok(())
    }
}

/// A seeded token sampler. The same configuration (seed included) fed the same logits in the
/// same order draws the same tokens, on every machine: the stream is ChaCha8
/// (`rand_chacha`), and the order candidates are walked in depends only on the logits.
///
/// Before the draw, when the configuration [adjusts](SamplerConfig::adjusts) them, the logits
/// get OpenAI's penalties and bias ([`Sampler::adjust_into`]), over the tokens the caller
/// reported as generated ([`Sampler::observe`]). One call of [`Sampler::sample`] with
/// `temperature > 0` then:
/// 1. candidates are the tokens whose logit is not NaN and not `-inf`, with logit `l / T`;
///    if some logit is `+inf`, the lowest such id is returned (it holds all the mass);
/// 2. top-k keeps the `k` best; 3. probabilities `p = softmax(l / T)` over what is kept;
///    top-p keeps the shortest prefix whose mass reaches `top_p`; 4. min-p keeps tokens with
///    `p ≥ min_p * p_max`; 5. one uniform draw in `[0, Σ p)` over the kept tokens, walked in
///    rank order when top-p or min-p is on, else in the order left by step 2.
///
/// Filters act on the temperature-scaled distribution (the Hugging Face `generate` order).
/// The candidate buffer is kept between calls, so sampling allocates only on first use.
#[derive(Debug, Clone)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: ChaCha8Rng,
    cands: Vec<(u32, f32)>,
    /// How many times each generated token was generated (penalties only).
    counts: HashMap<u32, u32>,
    /// The adjusted row of the last [`Sampler::try_sample`].
    adjusted: Vec<f32>,
}

impl Sampler {
    /// A sampler with the stream seeded from `cfg.seed`. Out-of-range settings take the
    /// meanings documented on [`SamplerConfig`]'s fields; call [`SamplerConfig::validate`]
    /// first to reject them instead.
    pub fn new(cfg: SamplerConfig) -> Sampler {
        Sampler {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            cands: Vec::new(),
            counts: HashMap::new(),
            adjusted: Vec::new(),
        }
    }

    /// The configuration this sampler was built with.
    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Record that the sequence generated `token` (the frequency and presence penalties
    /// count what was recorded). Free when no penalty is set.
    pub fn observe(&mut self, token: u32) {
        if self.cfg.frequency_penalty != 0.0 || self.cfg.presence_penalty != 0.0 {
            *self.counts.entry(token).or_insert(0) += 1;
        }
    }

    /// `logits` (`[vocab]`) with OpenAI's adjustments, written to `out`: for each token `j`
    /// generated `c[j] > 0` times so far, `l[j] - c[j] * frequency_penalty -
    /// presence_penalty`; then `l[j] + bias[j]` for each `logit_bias` entry (`-inf` for a
    /// bias of [`BAN_BIAS`]; an id outside the row is skipped). Returns `false`, leaving
    /// `out` untouched, when the configuration adjusts nothing: the row is then used as
    /// given.
    pub fn adjust_into(&self, logits: &[f32], out: &mut Vec<f32>) -> bool {
        if !self.cfg.adjusts() {
            return false;
        }
        out.clear();
        out.extend_from_slice(logits);
        let (freq, pres) = (self.cfg.frequency_penalty, self.cfg.presence_penalty);
        for (&id, &c) in &self.counts {
            if let Some(l) = out.get_mut(id as usize) {
                *l -= c as f32 * freq + pres;
            }
        }
        for &(id, bias) in self.cfg.logit_bias.iter() {
            if let Some(l) = out.get_mut(id as usize) {
                *l = if bias <= BAN_BIAS {
                    f32::NEG_INFINITY
                } else {
                    *l + bias
                };
            }
        }
        true
    }

    /// Pick the next token from `logits` (`[vocab]`).
    ///
    /// Returns token 0 when no token can be chosen (empty row, or every logit NaN or, when
    /// sampling, `-inf`); [`Sampler::try_sample`] reports that case as an error instead.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        self.try_sample(logits).unwrap_or(0)
    }

    /// Pick the next token from `logits` (`[vocab]`) after the penalties and bias
    /// ([`Sampler::adjust_into`]), or say why none can be picked.
    ///
    /// Greedy (`temperature ≤ 0` or NaN) returns [`argmax`] and consumes no randomness.
    pub fn try_sample(&mut self, logits: &[f32]) -> Result<u32, SampleError> {
        let mut adjusted = std::mem::take(&mut self.adjusted);
        let r = if self.adjust_into(logits, &mut adjusted) {
            self.draw(&adjusted)
        } else {
            self.draw(logits)
        };
        self.adjusted = adjusted;
        r
    }

    /// Pick the next token from `logits` (`[vocab]`) as given (no penalty or bias: for a
    /// row the caller already adjusted), or say why none can be picked.
    pub fn draw(&mut self, logits: &[f32]) -> Result<u32, SampleError> {
        if logits.is_empty() {
            return Err(SampleError::EmptyLogits);
        }
        let no_candidate = SampleError::NoCandidate {
            vocab: logits.len(),
        };
        let t = self.cfg.temperature;
        if t.is_nan() || t <= 0.0 {
            return argmax(logits).map(|i| i as u32).ok_or(no_candidate);
        }
        if let Some(i) = logits.iter().position(|&l| l == f32::INFINITY) {
            return Ok(i as u32);
        }
        let cands = &mut self.cands;
        cands.clear();
        cands.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.is_nan() && **l != f32::NEG_INFINITY)
                .map(|(i, &l)| (i as u32, l / t)),
        );
        if cands.is_empty() {
            return Err(no_candidate);
        }
        // Total order: logit descending, then id ascending (ids are unique).
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let k = self.cfg.top_k;
        let (top_p, min_p) = (self.cfg.top_p, self.cfg.min_p);
        if k > 0 && k < cands.len() {
            cands.select_nth_unstable_by(k - 1, order);
            cands.truncate(k);
        }
        // Only top-p and min-p need the candidates ranked; without them the draw walks the
        // candidates in id order (still deterministic), sparing a sort of the whole vocabulary.
        let ranked = top_p < 1.0 || min_p > 0.0;
        if ranked {
            cands.sort_unstable_by(order);
        }

        // Unnormalised probabilities e^(l - l_max); the best candidate has weight 1.
        let max = cands.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
        for c in cands.iter_mut() {
            c.1 = (c.1 - max).exp();
        }
        if top_p < 1.0 {
            let total: f64 = cands.iter().map(|c| c.1 as f64).sum();
            let target = top_p as f64 * total;
            let mut cum = 0.0f64;
            let mut keep = cands.len();
            for (i, c) in cands.iter().enumerate() {
                cum += c.1 as f64;
                if cum >= target {
                    keep = i + 1;
                    break;
                }
            }
            cands.truncate(keep.max(1));
        }
        if min_p > 0.0 {
            // p_i / p_max = e^(l_i - l_max), the weight itself; sorted, so keep a prefix.
            let keep = cands.iter().take_while(|c| c.1 >= min_p).count();
            cands.truncate(keep.max(1));
        }

        let total: f64 = cands.iter().map(|c| c.1 as f64).sum();
        // 53 random bits -> uniform in [0, 1).
        let u = (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let r = u * total;
        let mut cum = 0.0f64;
        for c in cands.iter() {
            cum += c.1 as f64;
            if r < cum {
                return Ok(c.0);
            }
        }
        Ok(cands[cands.len() - 1].0)
    }
}
