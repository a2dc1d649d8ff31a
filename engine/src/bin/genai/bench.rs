//! `genai bench`: prefill and decode rates of one stream with the roofline, concurrent streams through the engine's service (one admission, one continuous batch) (`--concurrency`), and the decode-rate cost of constrained decoding (`--response-format`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;

use engine::chat::Message;
use engine::constrain::Grammar;
use engine::kernels::sample::SamplerConfig;
use engine::roofline::{self, Roofline};
use engine::runtime::{Engine, GenerateRequest, Prompt};
use engine::service::{Event, SubmitOptions};

use crate::measure::{median, memory_bound, memory_bound_line, rate, resident_bytes};
use crate::model::{KvArgs, Loaded, ModelArgs, chat_template, load_engine};

/// Arguments of `genai bench`.
#[derive(Args)]
pub(crate) struct BenchArgs {
    /// Prompt length in tokens.
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// Tokens to decode (greedy, end-of-generation ignored).
    #[arg(long, default_value_t = 128)]
    gen_tokens: usize,
    /// Timed runs after one warm-up.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Concurrent streams through the continuous batch, e.g. `1,2,4,8`: aggregate
    /// decode tok/s and p50/p99 time to first token for each count.
    #[arg(long, value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Decode-rate cost of constrained decoding: `json_object`, or a JSON Schema file
    /// (the `json_schema` subset of `genai serve`). Alternates unconstrained and
    /// constrained runs of a chat prompt asking for JSON, and prints both medians and
    /// their ratio.
    #[arg(long, value_name = "json_object|SCHEMA.json")]
    response_format: Option<String>,
    /// Sampling temperature of the `--response-format` runs (0: greedy).
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    kv: KvArgs,
}

/// Run the benchmark `args` chooses: constrained decoding (`--response-format`), concurrent
/// streams (`--concurrency`), or one stream.
pub(crate) fn run(args: BenchArgs) -> Result<()> {
    let l = load_engine(&args.model, args.kv.options())?;
    if let Some(format) = args.response_format {
        let grammar = match format.as_str() {
            "json_object" => engine::constrain::Grammar::json_object(),
            path => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--response-format {path}: cannot read it"))?;
                let schema: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("--response-format {path}: not JSON"))?;
                engine::constrain::Grammar::from_schema(&schema)
                    .with_context(|| format!("--response-format {path}"))?
            }
        };
        let text = chat_template(&l)?.render(
            &[Message::user(
                "Describe three people who live in Paris, with their names, ages, \
                 jobs and hobbies, as JSON."
                    .to_string(),
            )],
            true,
        )?;
        constrained(
            &l.engine,
            text,
            grammar,
            args.gen_tokens,
            args.runs.max(1),
            args.temperature,
            args.json,
        )?
    } else if args.concurrency.is_empty() {
        single(
            &l,
            args.prompt_tokens,
            args.gen_tokens,
            args.runs.max(1),
            args.json,
        )?
    } else {
        concurrent(
            &l.engine,
            args.prompt_tokens,
            args.gen_tokens,
            &args.concurrency,
            args.json,
        )?
    }
    Ok(())
}

/// One stream: prefill and decode medians over `runs` runs after a warm-up, resident
/// memory against the memory bound, and the roofline lines (or all of it as JSON).
fn single(
    l: &Loaded,
    prompt_tokens: usize,
    gen_tokens: usize,
    runs: usize,
    json: bool,
) -> Result<()> {
    let model = l.model()?;
    let prompt = prompt(&l.engine, prompt_tokens, gen_tokens)?;
    let mut req = GenerateRequest::tokens(prompt.clone(), gen_tokens);
    req.stop_at_eog = false;
    let bpt = l
        .engine
        .usage()
        .bytes_per_token
        .context("the model has no KV geometry")?;
    let mut prefill = Vec::new();
    let mut decode = Vec::new();
    let mut rss = 0u64;
    // The KV cache of one sequence, in whole pages of 16 positions.
    let kv_bytes = (prompt_tokens + gen_tokens).div_ceil(16) as u64 * 16 * bpt;
    for run in 0..=runs {
        let mut n = 0;
        let mut ticket = l.engine.submit(req.clone(), SubmitOptions::default());
        let r = loop {
            match ticket.next_event() {
                Some(Event::Token(_)) => {
                    n += 1;
                    if run == runs && n == gen_tokens {
                        // Resident memory with the last run's KV cache still held.
                        rss = resident_bytes().unwrap_or(0);
                    }
                }
                Some(Event::Finished(r)) => break r?,
                Some(Event::Refused(e)) => return Err(e.into()),
                Some(Event::Queued { .. } | Event::Admitted(_)) => {}
                None => bail!("the engine's service stopped"),
            }
        };
        if run > 0 {
            prefill.push(rate(r.prompt_tokens, r.prefill_secs));
            decode.push(rate(r.tokens().len().saturating_sub(1), r.decode_secs));
        }
    }
    let (p, d) = (median(&mut prefill), median(&mut decode));
    let file_bytes = l.file_bytes();
    let cpu = model.cpu();
    let roofline = Roofline {
        weight_bytes: roofline::decode_weight_bytes(model.weights()),
        decode_tokens_per_sec: d,
        memory: roofline::measure_memory_read(
            cpu,
            roofline::read_buffer_bytes(roofline::last_level_cache_bytes()),
            5,
        ),
        prompt_tokens,
        prefill_flops: roofline::prefill_flops(model.config(), prompt_tokens),
        prefill_tokens_per_sec: p,
        peak: roofline::measure_peak(cpu, 5),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "prompt_tokens": prompt_tokens, "gen_tokens": gen_tokens, "runs": runs,
                "threads": model.cpu().threads(), "isa": model.cpu().isa().name(),
                "kv_dtype": l.engine.kv_dtype().name(),
                "prefill_tokens_per_sec_median": p, "decode_tokens_per_sec_median": d,
                "prefill_tokens_per_sec": prefill, "decode_tokens_per_sec": decode,
                "resident_bytes": rss, "kv_bytes": kv_bytes, "file_bytes": file_bytes,
                "memory_bound_bytes": memory_bound(file_bytes, kv_bytes), "prompt_ids": prompt,
                "roofline": roofline.json(),
            })
        );
    } else {
        println!(
            "genai bench: {} threads, {}, KV {}, prompt {prompt_tokens} tokens, {gen_tokens} new tokens, {runs} runs",
            model.cpu().threads(),
            model.cpu().isa(),
            l.engine.kv_dtype().name()
        );
        println!("prefill  median {p:8.1} tok/s   runs {prefill:.1?}");
        println!("decode   median {d:8.1} tok/s   runs {decode:.1?}");
        memory_bound_line(rss, file_bytes, kv_bytes);
        println!("{}", roofline.lines());
    }
    Ok(())
}

/// A deterministic prompt of ordinary text, repeated to `prompt_tokens` tokens.
fn prompt(engine: &Engine, prompt_tokens: usize, gen_tokens: usize) -> Result<Vec<u32>> {
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

/// One measurement: `n` streams arrive together.
struct Run {
    streams: usize,
    /// Tokens per second of the batched decode passes (all streams together).
    decode_tps: f64,
    /// Generated tokens over wall time, prefill included.
    wall_tps: f64,
    ttft: Vec<f64>,
}

/// `n` streams of `prompt` arriving together through the engine's service (one admission,
/// one continuous batch), `gen_tokens` each (end-of-generation ignored).
fn run_streams(engine: &Engine, prompt: &[u32], gen_tokens: usize, n: usize) -> Result<Run> {
    let mut req = GenerateRequest::tokens(prompt.to_vec(), gen_tokens);
    req.stop_at_eog = false;
    let before = engine.service_stats();
    let t0 = Instant::now();
    let tickets: Vec<_> = (0..n)
        .map(|_| engine.submit(req.clone(), SubmitOptions::default()))
        .collect();
    let mut ttft = Vec::with_capacity(n);
    let mut total = 0;
    for (i, t) in tickets.into_iter().enumerate() {
        let r = t
            .wait()
            .map_err(|e| anyhow::anyhow!("stream {i} failed: {e}"))?;
        total += r.tokens().len();
        ttft.push(r.prefill_secs);
    }
    let wall = t0.elapsed().as_secs_f64();
    let after = engine.service_stats();
    let secs = after.decode_secs - before.decode_secs;
    let tokens = after.decode_tokens - before.decode_tokens;
    Ok(Run {
        streams: n,
        decode_tps: if secs > 0.0 {
            tokens as f64 / secs
        } else {
            0.0
        },
        wall_tps: total as f64 / wall,
        ttft,
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
fn concurrent(
    engine: &Engine,
    prompt_tokens: usize,
    gen_tokens: usize,
    counts: &[usize],
    json: bool,
) -> Result<()> {
    let prompt = prompt(engine, prompt_tokens, gen_tokens)?;
    let model = engine.model().context("the model has no decode core")?;
    run_streams(engine, &prompt, gen_tokens.min(8), 1)?;
    let mut runs = Vec::new();
    for &n in counts {
        if n == 0 {
            bail!("--concurrency counts must be at least 1");
        }
        runs.push(run_streams(engine, &prompt, gen_tokens, n)?);
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
fn constrained(
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
        let mut free = GenerateRequest::new(Prompt::Text(text.clone()), gen_tokens)
            .with_sampling(sampling.clone());
        free.stop_at_eog = false;
        let r = engine.generate(&free)?;
        let free_rate = rate(r.tokens().len(), r.decode_secs);
        let bound = GenerateRequest::new(Prompt::Text(text.clone()), gen_tokens)
            .with_sampling(sampling.clone())
            .with_constraint(grammar.clone());
        let r = engine.generate(&bound)?;
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
