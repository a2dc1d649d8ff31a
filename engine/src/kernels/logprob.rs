//! Log probabilities of a sampled token and of the most likely tokens, from one row of raw logits.

/// The log probability of one generated token and of the `top` most likely tokens at its
/// step, under the model's distribution `softmax(logits)` (natural log; before temperature,
/// top-p or any other sampling setting, as OpenAI's `logprobs` and llama.cpp's `n_probs`
/// report them).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    /// The generated token.
    pub id: u32,
    /// `ln p(id)`, at most 0; `-inf` for a token whose logit is `-inf` or NaN.
    pub logprob: f32,
    /// The most likely tokens and their log probabilities, most likely first (ties by the
    /// lower id); as many as asked for, fewer when the row is shorter.
    pub top: Vec<(u32, f32)>,
}

/// [`TokenLogprobs`] of token `id` and the `top` most likely tokens in `logits` (`[vocab]`).
///
/// `ln p(i) = logits[i] - max - ln Σ_j exp(logits[j] - max)`, the sum in `f64` over the
/// finite logits (NaN logits count as `-inf`). A row with no finite logit gives `-inf`
/// everywhere. `id` outside the row gives `-inf` for it.
pub fn token_logprobs(logits: &[f32], id: u32, top: usize) -> TokenLogprobs {
    let finite = |l: f32| if l.is_nan() { f32::NEG_INFINITY } else { l };
    let max = logits
        .iter()
        .map(|&l| finite(l))
        .fold(f32::NEG_INFINITY, f32::max);
    let log_z = if max == f32::NEG_INFINITY {
        f64::INFINITY
    } else if max == f32::INFINITY {
        // An infinite logit takes all the mass (as the sampler picks it).
        0.0
    } else {
        let sum: f64 = logits
            .iter()
            .map(|&l| (f64::from(finite(l)) - f64::from(max)).exp())
            .sum();
        f64::from(max) + sum.ln()
    };
    let lp = |i: usize| -> f32 {
        let l = finite(logits[i]);
        if max == f32::INFINITY {
            return if l == f32::INFINITY {
                0.0
            } else {
                f32::NEG_INFINITY
            };
        }
        (f64::from(l) - log_z) as f32
    };
    let chosen = if (id as usize) < logits.len() {
        lp(id as usize)
    } else {
        f32::NEG_INFINITY
    };
    let top = top.min(logits.len());
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &l) in logits.iter().enumerate() {
            let l = finite(l);
            if best.len() == top && best.last().is_some_and(|&(_, worst)| l <= worst) {
                continue;
            }
            let at = best.partition_point(|&(_, b)| b >= l);
            best.insert(at, (i as u32, l));
            best.truncate(top);
        }
    }
    TokenLogprobs {
        id,
        logprob: chosen,
        top: best.into_iter().map(|(i, _)| (i, lp(i as usize))).collect(),
    }
}
