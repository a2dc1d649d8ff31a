//! `genai bench --concurrency N,...` and `--response-format`: concurrent streams through the admission funnel and the continuous batch, and the decode-rate cost of constrained decoding.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use engine::batch::{Done, Piece, Sink};
use engine::constrain::Grammar;
use engine::kernels::sample::SamplerConfig;
use engine::runtime::{Engine, Flow, GenerateRequest, Prompt};

use super::median;

/// A deterministic prompt of ordinary text, repeated to `prompt_tokens` tokens.
pub(crate) fn prompt(engine: &Engine, prompt_tokens: usize, gen_tokens: usize) -> Result<Vec<u32>> {
    let model = engine.model().context("the model has no decode core")?;
    let context = model.config().context_len;
    if prompt_tokens + gen_tokens > context || prompt_tokens == 0 {
        bail!(
            "--prompt-tokens {prompt_tokens} + --gen-tokens {gen_tokens} must be between 1 and \
             the context length {context}"
        );
    }
    let tok = engine.tokenizer().context("the model has no tokenizer")?;
    let base = tok.encode(
        "The quick brown fox jumps over the lazy dog while the committee reviews the annual \
         budget, and a small robot counts prime numbers in the garden. ",
    )?;
    Ok(base.iter().copied().cycle().take(prompt_tokens).collect())
}

/// Records one stream's time to first token.
struct Timing<'a> {
    ttft: &'a mut Option<f64>,
    tokens: &'a mut usize,
}

impl Sink for Timing<'_> {
    fn token(&mut self, _: Piece<'_>) -> Flow {
        *self.tokens += 1;
        Flow::Continue
    }
    fn finish(&mut self, done: Done<'_>) {
        *self.ttft = done.ttft;
    }
}

/// One measurement: `n` streams arrive together.
struct Run {
    streams: usize,
    /// Tokens per second of the batched decode passes (all streams together).
    decode_tps: f64,
    /// Generated tokens over wall time, prefill included.
    wall_tps: f64,
    ttft: Vec<f64>,
}

fn run(engine: &Engine, prompt: &[u32], gen_tokens: usize, n: usize) -> Result<Run> {
    let mut req = GenerateRequest::tokens(prompt.to_vec(), gen_tokens);
    req.stop_at_eog = false;
    let mut ttft = vec![None; n];
    let mut tokens = vec![0usize; n];
    let mut admissions = Vec::new();
    let t0 = Instant::now();
    let decode_tps;
    {
        let mut batch = engine
            .batch(n * (prompt.len() + gen_tokens), n)
            .context("the model has no decode core")??;
        for (i, (t, k)) in ttft.iter_mut().zip(tokens.iter_mut()).enumerate() {
            let (demand, mut spec) = engine.prepare(&req)?;
            let a = engine
                .scheduler()
                .admit(&demand)
                .map_err(|e| anyhow::anyhow!("stream {i} refused: {e}"))?;
            spec.max_new_tokens = a.max_new_tokens;
            admissions.push(a.id);
            batch.join(
                i as u64,
                spec,
                Box::new(Timing { ttft: t, tokens: k }),
                None,
            )?;
        }
        batch.run_to_end();
        decode_tps = batch.decode_rate().unwrap_or(0.0);
    }
    let wall = t0.elapsed().as_secs_f64();
    for id in admissions {
        engine.scheduler().complete(id)?;
    }
    let total: usize = tokens.iter().sum();
    Ok(Run {
        streams: n,
        decode_tps,
        wall_tps: total as f64 / wall,
        ttft: ttft.into_iter().map(|t| t.unwrap_or(wall)).collect(),
    })
}

/// The `q`-quantile (nearest rank) of `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Run each stream count of `counts` once (after one warm-up stream) and print aggregate
/// decode tok/s and p50/p99 time to first token.
pub(crate) fn concurrent(
    engine: &Engine,
    prompt_tokens: usize,
    gen_tokens: usize,
    counts: &[usize],
    json: bool,
) -> Result<()> {
    let prompt = prompt(engine, prompt_tokens, gen_tokens)?;
    let model = engine.model().context("the model has no decode core")?;
    run(engine, &prompt, gen_tokens.min(8), 1)?;
    let mut runs = Vec::new();
    for &n in counts {
        if n == 0 {
            bail!("--concurrency counts must be at least 1");
        }
        runs.push(run(engine, &prompt, gen_tokens, n)?);
    }
    let one = runs.iter().find(|r| r.streams == 1).map(|r| r.decode_tps);
    if json {
        let rows: Vec<_> = runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "streams": r.streams, "decode_tokens_per_sec": r.decode_tps,
                    "wall_tokens_per_sec": r.wall_tps,
                    "ttft_p50_secs": quantile(&r.ttft, 0.5), "ttft_p99_secs": quantile(&r.ttft, 0.99),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "prompt_tokens": prompt_tokens, "gen_tokens": gen_tokens,
                "threads": model.cpu().threads(), "isa": model.cpu().isa().name(),
                "runs": rows,
            })
        );
        return Ok(());
    }
    println!(
        "genai bench --concurrency: {} threads, {}, prompt {prompt_tokens} tokens, {gen_tokens} new tokens per stream",
        model.cpu().threads(),
        model.cpu().isa()
    );
    println!("streams  decode tok/s  (x 1 stream)  wall tok/s  TTFT p50 s  TTFT p99 s");
    for r in &runs {
        let ratio = one.map_or(String::from("-"), |o| format!("{:.2}", r.decode_tps / o));
        println!(
            "{:>7}  {:>12.1}  {:>13}  {:>10.1}  {:>10.3}  {:>10.3}",
            r.streams,
            r.decode_tps,
            ratio,
            r.wall_tps,
            quantile(&r.ttft, 0.5),
            quantile(&r.ttft, 0.99)
        );
    }
    Ok(())
}

/// Decode tokens/s with and without a JSON constraint, alternating runs of the same chat
/// prompt (`text`, rendered) and sampling; the constrained runs end at the value's end (an
/// end-of-generation token) or at `gen_tokens`, the unconstrained ones generate
/// `gen_tokens` through end-of-generation. Prints both medians, the ratio
/// (constrained / unconstrained), the mean tokens per constrained run and the load average.
pub(crate) fn constrained(
    engine: &Engine,
    text: String,
    grammar: Grammar,
    gen_tokens: usize,
    runs: usize,
    temperature: f32,
    json: bool,
) -> Result<()> {
    let model = engine.model().context("the model has no decode core")?;
    let grammar = Arc::new(grammar);
    let sampling = SamplerConfig {
        temperature,
        seed: 1,
        ..SamplerConfig::default()
    };
    let mut plain = Vec::new();
    let mut constrained = Vec::new();
    let mut lengths = Vec::new();
    let rate = |tokens: usize, secs: f64| tokens.saturating_sub(1) as f64 / secs.max(1e-9);
    for run in 0..=runs {
        let mut free =
            GenerateRequest::new(Prompt::Text(text.clone()), gen_tokens).with_sampling(sampling);
        free.stop_at_eog = false;
        let r = engine.generate_with(&free, &mut |_| {}, &mut |_, _| Flow::Continue)?;
        let free_rate = rate(r.tokens().len(), r.decode_secs);
        let bound = GenerateRequest::new(Prompt::Text(text.clone()), gen_tokens)
            .with_sampling(sampling)
            .with_constraint(grammar.clone());
        let r = engine.generate_with(&bound, &mut |_| {}, &mut |_, _| Flow::Continue)?;
        if run > 0 {
            plain.push(free_rate);
            constrained.push(rate(r.tokens().len(), r.decode_secs));
            lengths.push(r.tokens().len());
        }
    }
    let (p, c) = (median(&mut plain.clone()), median(&mut constrained.clone()));
    let mean_len = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    if json {
        println!(
            "{}",
            serde_json::json!({
                "threads": model.cpu().threads(), "isa": model.cpu().isa().name(),
                "temperature": temperature, "gen_tokens": gen_tokens, "runs": runs,
                "unconstrained_decode_tokens_per_sec_median": p,
                "constrained_decode_tokens_per_sec_median": c,
                "ratio": c / p,
                "unconstrained_decode_tokens_per_sec": plain,
                "constrained_decode_tokens_per_sec": constrained,
                "constrained_tokens": lengths, "load_average": load,
            })
        );
    } else {
        println!(
            "genai bench --response-format: {} threads, {}, temperature {temperature}, {runs} alternating runs, load average {load}",
            model.cpu().threads(),
            model.cpu().isa()
        );
        println!("unconstrained  median {p:8.1} tok/s   runs {plain:.1?}");
        println!(
            "constrained    median {c:8.1} tok/s   runs {constrained:.1?} ({mean_len:.0} tokens per run on average)"
        );
        println!(
            "ratio          {:.3} (constrained / unconstrained; cost {:+.1}%)",
            c / p,
            (1.0 - c / p) * 100.0
        );
    }
    Ok(())
}
