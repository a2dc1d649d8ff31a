//! `genai`: command-line front end of the engine (generate, chat, template, tokenize, info, bench).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use engine::chat::{ChatDate, ChatTemplate, Message, Role, TemplateFiles};
use engine::generate::{Flow, GenerateOptions, Generation, generate};
use engine::gguf::GgufFile;
use engine::kernels::Isa;
use engine::kernels::matmul::Cpu;
use engine::kernels::sample::SamplerConfig;
use engine::kv::{KvCache, KvDtype};
use engine::model::{Logits, Model};
use engine::tokenizer::{GgufVocab, Tokenizer};

/// Where `scripts/fetch-model` puts the default model, relative to the workspace root.
const DEFAULT_MODEL: &str = "fixtures/models/SmolLM2-135M-Instruct.Q4_1.gguf";

#[derive(Parser)]
#[command(
    name = "genai",
    version,
    about = "CPU inference for decoder LLMs (GGUF)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// GGUF model file [default: the SmolLM2 file fetched by scripts/fetch-model].
    #[arg(long, short)]
    model: Option<PathBuf>,
    /// Worker threads for the kernels [default: all cores].
    #[arg(long, short)]
    threads: Option<usize>,
    /// Force a SIMD path: portable, avx2, avx512, avx512vnni [default: best supported].
    #[arg(long)]
    isa: Option<String>,
}

#[derive(Args, Clone)]
struct SampleArgs {
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

#[derive(Subcommand)]
enum Command {
    /// Generate a continuation of PROMPT (raw text; special tokens such as <|im_start|> are recognised).
    Generate {
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
        sample: SampleArgs,
    },
    /// An interactive multi-turn chat on the terminal (empty line or EOF ends it).
    Chat {
        /// A system turn.
        #[arg(long)]
        system: Option<String>,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        sample: SampleArgs,
    },
    /// Chat templates: render a conversation with a model's template.
    Template {
        #[command(subcommand)]
        command: TemplateCommand,
    },
    /// Print the token ids of TEXT (special tokens recognised).
    Tokenize {
        /// The text.
        text: String,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Model summary from the GGUF metadata.
    Info {
        /// Also report resident memory after load (from /proc/self/status).
        #[arg(long)]
        memory: bool,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Prefill and decode tokens/s: median over several runs after a warm-up.
    Bench {
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
        #[command(flatten)]
        model: ModelArgs,
    },
}

#[derive(Subcommand)]
enum TemplateCommand {
    /// Print the prompt the chat template renders for a conversation, byte for byte, to stdout.
    Render(TemplateRenderArgs),
}

#[derive(Args)]
struct TemplateRenderArgs {
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

fn main() -> ExitCode {
    fixed_mmap_threshold();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("genai: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Pin glibc's mmap threshold at 1 MiB. By default glibc raises it after the first large
/// free (up to 32 MiB), after which prefill's multi-megabyte activation buffers come from
/// the heap and stay resident once freed; with a fixed threshold they are mapped and
/// returned to the system on free, keeping resident memory near weights + KV cache.
/// One malloc arena for every thread: the forward pass runs on the kernel pool's threads,
/// and a per-thread arena would keep each thread's freed buffers resident separately.
fn fixed_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

struct Loaded {
    model: Model,
    tokenizer: Tokenizer,
    file: Arc<GgufFile>,
    load_secs: f64,
}

impl Loaded {
    /// Size of the model's GGUF file in bytes (0 when it has no path).
    fn file_bytes(&self) -> u64 {
        self.file
            .path()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len())
    }
}

fn resolve_model(arg: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = arg {
        if !p.exists() {
            bail!("model file {} does not exist", p.display());
        }
        return Ok(p.clone());
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for base in [Path::new("."), workspace.as_path()] {
        let p = base.join(DEFAULT_MODEL);
        if p.exists() {
            return Ok(p);
        }
    }
    bail!(
        "no model given and the default {DEFAULT_MODEL} is missing: run scripts/fetch-model \
         (from the workspace root) or pass --model FILE.gguf"
    )
}

fn load(args: &ModelArgs) -> Result<Loaded> {
    let path = resolve_model(&args.model)?;
    let t0 = Instant::now();
    let isa = match &args.isa {
        Some(s) => {
            let isa = Isa::parse(s).with_context(|| {
                format!("unknown --isa '{s}' (portable, avx2, avx512, avx512vnni)")
            })?;
            if !isa.supported() {
                bail!("--isa {isa} is not supported by this CPU");
            }
            isa
        }
        None => Isa::best(),
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let file =
        Arc::new(GgufFile::open(&path).with_context(|| format!("opening {}", path.display()))?);
    let tokenizer = load_tokenizer(&file, &path)?;
    let model = Model::from_file(file.clone(), Cpu::new(threads, isa))
        .with_context(|| format!("loading {}", path.display()))?;
    Ok(Loaded {
        model,
        tokenizer,
        file,
        load_secs: t0.elapsed().as_secs_f64(),
    })
}

fn load_tokenizer(file: &GgufFile, path: &Path) -> Result<Tokenizer> {
    let vocab = GgufVocab::from_metadata(file.metadata())
        .with_context(|| format!("reading the tokenizer of {}", path.display()))?;
    let json = path.with_file_name("tokenizer.json");
    let tok = if json.exists() {
        Tokenizer::from_tokenizer_json(&json, vocab.bos, vocab.eos)?
    } else {
        Tokenizer::from_vocab(&vocab)?
    };
    Ok(tok)
}

fn chat_template(l: &Loaded) -> Result<ChatTemplate> {
    Ok(ChatTemplate::from_gguf(l.file.metadata(), None)?)
}

fn options(s: &SampleArgs) -> GenerateOptions {
    GenerateOptions {
        max_new_tokens: s.max_new_tokens,
        sampler: SamplerConfig {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            seed: s.seed,
        },
        stop_strings: s.stop.clone(),
        stop_at_eog: true,
    }
}

/// Generate with streaming to stdout; returns the generation.
fn stream(l: &Loaded, prompt: &[u32], opts: &GenerateOptions) -> Result<Generation> {
    let cfg = l.model.config();
    let total = prompt.len() + opts.max_new_tokens;
    if total > cfg.context_len {
        bail!(
            "the prompt ({} tokens) plus --max-new-tokens ({}) is {total} positions, more than \
             the model's context length of {}",
            prompt.len(),
            opts.max_new_tokens,
            cfg.context_len
        );
    }
    let mut kv = KvCache::new(l.model.kv_config(total, KvDtype::F32))?;
    let seq = kv.create_sequence();
    let mut out = std::io::stdout().lock();
    let g = generate(
        &l.model,
        &l.tokenizer,
        &mut kv,
        seq,
        prompt,
        opts,
        None,
        &mut |_, piece| {
            let _ = out.write_all(piece.as_bytes());
            let _ = out.flush();
            Flow::Continue
        },
    )?;
    writeln!(out)?;
    Ok(g)
}

fn stats(l: &Loaded, g: &Generation) {
    eprintln!(
        "[prompt {} tokens, generated {} tokens, prefill {:.1} tok/s, decode {:.1} tok/s, \
         load {:.2} s, finish {:?}]",
        g.prompt_tokens,
        g.tokens.len(),
        g.prefill_tokens_per_sec(),
        g.decode_tokens_per_sec(),
        l.load_secs,
        g.finish
    );
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Generate {
            prompt,
            chat,
            system,
            model,
            sample,
        } => {
            let l = load(&model)?;
            let text = if chat {
                let mut msgs = Vec::new();
                if let Some(s) = system {
                    msgs.push(Message {
                        role: Role::System,
                        content: s,
                    });
                }
                msgs.push(Message {
                    role: Role::User,
                    content: prompt,
                });
                chat_template(&l)?.render(&msgs, true)?
            } else {
                if system.is_some() {
                    bail!("--system needs --chat");
                }
                prompt
            };
            let ids = l.tokenizer.encode(&text)?;
            let g = stream(&l, &ids, &options(&sample))?;
            stats(&l, &g);
        }
        Command::Chat {
            system,
            model,
            sample,
        } => {
            let l = load(&model)?;
            let template = chat_template(&l)?;
            let mut msgs = Vec::new();
            if let Some(s) = system {
                msgs.push(Message {
                    role: Role::System,
                    content: s,
                });
            }
            let stdin = std::io::stdin();
            loop {
                eprint!("> ");
                let mut line = String::new();
                if stdin.lock().read_line(&mut line)? == 0 || line.trim().is_empty() {
                    break;
                }
                msgs.push(Message {
                    role: Role::User,
                    content: line.trim_end().to_string(),
                });
                let ids = l.tokenizer.encode(&template.render(&msgs, true)?)?;
                let g = stream(&l, &ids, &options(&sample))?;
                stats(&l, &g);
                msgs.push(Message {
                    role: Role::Assistant,
                    content: g.text,
                });
            }
        }
        Command::Template {
            command: TemplateCommand::Render(a),
        } => {
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
        }
        Command::Tokenize { text, model } => {
            let l = load(&model)?;
            let ids = l.tokenizer.encode(&text)?;
            println!(
                "{}",
                ids.iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        Command::Info { memory, model } => {
            let l = load(&model)?;
            let c = l.model.config();
            let size = l.file_bytes();
            println!(
                "file            {}",
                l.file
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            println!("gguf version    {}", l.file.version());
            println!("architecture    {}", c.architecture);
            if let Ok(name) = l.file.metadata().get_str("general.name") {
                println!("name            {name}");
            }
            println!("tensors         {}", l.file.tensors().len());
            println!("blocks          {}", c.n_layers);
            println!("hidden          {}", c.hidden);
            println!("ffn             {}", c.ffn);
            println!(
                "heads           {} (kv {}, head dim {})",
                c.n_heads, c.n_kv_heads, c.head_dim
            );
            println!("rope base       {}", c.rope_base);
            println!("rms eps         {}", c.rms_eps);
            println!("context         {}", c.context_len);
            println!("vocab           {}", c.vocab);
            println!("tied embeddings {}", l.model.weights().tied_embeddings);
            println!(
                "kernels         {} threads, {}",
                l.model.cpu().threads(),
                l.model.cpu().isa()
            );
            if memory {
                // One decode step touches every weight page, so the figure counts them all.
                let mut kv = KvCache::new(l.model.kv_config(1, KvDtype::F32))?;
                let seq = kv.create_sequence();
                l.model.forward(&mut kv, seq, &[0], Logits::Last)?;
                let rss = resident_bytes()?;
                let kv_bytes = (kv.created_pages() * kv.page_bytes()) as u64;
                println!("file bytes      {size}");
                println!(
                    "resident bytes  {rss} after one forward pass ({:.2}x the file)",
                    rss as f64 / size.max(1) as f64
                );
                memory_bound_line(rss, size, kv_bytes);
            }
        }
        Command::Bench {
            prompt_tokens,
            gen_tokens,
            runs,
            json,
            model,
        } => bench(&load(&model)?, prompt_tokens, gen_tokens, runs.max(1), json)?,
    }
    Ok(())
}

/// The process's resident set size in bytes (`VmRSS` of /proc/self/status).
fn resident_bytes() -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("/proc/self/status has no VmRSS line")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("malformed VmRSS line")?
        .parse()
        .context("malformed VmRSS value")?;
    Ok(kb * 1024)
}

/// The memory bound: 1.3 × the GGUF file plus the KV cache, in bytes.
fn memory_bound(file_bytes: u64, kv_bytes: u64) -> u64 {
    file_bytes * 13 / 10 + kv_bytes
}

fn memory_bound_line(rss: u64, file_bytes: u64, kv_bytes: u64) {
    let bound = memory_bound(file_bytes, kv_bytes);
    println!(
        "memory bound    {bound} (1.3 x file + KV cache {kv_bytes}): resident {rss} is {}",
        if rss <= bound { "within" } else { "OVER" }
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn bench(
    l: &Loaded,
    prompt_tokens: usize,
    gen_tokens: usize,
    runs: usize,
    json: bool,
) -> Result<()> {
    let cfg = l.model.config();
    if prompt_tokens + gen_tokens > cfg.context_len || prompt_tokens == 0 {
        bail!(
            "--prompt-tokens {prompt_tokens} + --gen-tokens {gen_tokens} must be between 1 and \
             the context length {}",
            cfg.context_len
        );
    }
    // A deterministic prompt of ordinary text, repeated to the requested length.
    let base = l.tokenizer.encode(
        "The quick brown fox jumps over the lazy dog while the committee reviews the annual \
         budget, and a small robot counts prime numbers in the garden. ",
    )?;
    let prompt: Vec<u32> = base.iter().copied().cycle().take(prompt_tokens).collect();
    let opts = GenerateOptions {
        max_new_tokens: gen_tokens,
        stop_at_eog: false,
        ..GenerateOptions::default()
    };
    let mut prefill = Vec::new();
    let mut decode = Vec::new();
    let (mut rss, mut kv_bytes) = (0u64, 0u64);
    for run in 0..=runs {
        let mut kv = KvCache::new(l.model.kv_config(prompt_tokens + gen_tokens, KvDtype::F32))?;
        let seq = kv.create_sequence();
        let g = generate(
            &l.model,
            &l.tokenizer,
            &mut kv,
            seq,
            &prompt,
            &opts,
            None,
            &mut |_, _| Flow::Continue,
        )?;
        if run == runs {
            // Resident memory with the last run's KV cache still held.
            rss = resident_bytes().unwrap_or(0);
            kv_bytes = (kv.created_pages() * kv.page_bytes()) as u64;
        }
        if run > 0 {
            prefill.push(g.prefill_tokens_per_sec());
            decode.push(g.decode_tokens_per_sec());
        }
    }
    let (p, d) = (median(&mut prefill), median(&mut decode));
    let file_bytes = l.file_bytes();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "prompt_tokens": prompt_tokens, "gen_tokens": gen_tokens, "runs": runs,
                "threads": l.model.cpu().threads(), "isa": l.model.cpu().isa().name(),
                "prefill_tokens_per_sec_median": p, "decode_tokens_per_sec_median": d,
                "prefill_tokens_per_sec": prefill, "decode_tokens_per_sec": decode,
                "resident_bytes": rss, "kv_bytes": kv_bytes, "file_bytes": file_bytes,
                "memory_bound_bytes": memory_bound(file_bytes, kv_bytes), "prompt_ids": prompt,
            })
        );
    } else {
        println!(
            "genai bench: {} threads, {}, prompt {prompt_tokens} tokens, {gen_tokens} new tokens, {runs} runs",
            l.model.cpu().threads(),
            l.model.cpu().isa()
        );
        println!("prefill  median {p:8.1} tok/s   runs {prefill:.1?}");
        println!("decode   median {d:8.1} tok/s   runs {decode:.1?}");
        memory_bound_line(rss, file_bytes, kv_bytes);
    }
    Ok(())
}
