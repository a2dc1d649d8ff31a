//! `genai`: command-line front end of the engine (generate, chat, template, tokenize, info, bench, serve).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use engine::chat::{ChatDate, ChatTemplate, Message, TemplateFiles};
use engine::kernels::Isa;
use engine::kernels::sample::SamplerConfig;
use engine::kv::{KvCache, KvDtype};
use engine::model::{Logits, Model};
use engine::roofline::{self, Roofline};
use engine::runtime::{Engine, EngineOptions, Flow, GenerateRequest, Prompt};
use engine::tokenizer::Tokenizer;

#[path = "genai/bench.rs"]
mod bench;
#[path = "genai/serve.rs"]
mod serve;

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
pub(crate) struct ModelArgs {
    /// A GGUF model file or a package directory (holding package.json) [default: the
    /// SmolLM2 file fetched by scripts/fetch-model].
    #[arg(long, short)]
    pub(crate) model: Option<PathBuf>,
    /// Worker threads for the kernels [default: all cores].
    #[arg(long, short)]
    pub(crate) threads: Option<usize>,
    /// Force a SIMD path: portable, avx2, avx512, avx512vnni [default: best supported].
    #[arg(long)]
    pub(crate) isa: Option<String>,
}

/// The KV cache's element type, for the commands that run a model.
#[derive(Args, Clone)]
pub(crate) struct KvArgs {
    /// KV cache element type: f16 (half the bytes per token; llama.cpp's default K and V
    /// type) or f32.
    #[arg(long, value_enum, default_value_t = KvType::F16)]
    kv_dtype: KvType,
}

/// Values of `--kv-dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum KvType {
    F16,
    F32,
}

impl KvArgs {
    /// Engine options with this KV element type, the rest default.
    fn options(&self) -> EngineOptions {
        EngineOptions {
            kv_dtype: self.dtype(),
            ..EngineOptions::default()
        }
    }

    /// The chosen element type.
    pub(crate) fn dtype(&self) -> KvDtype {
        match self.kv_dtype {
            KvType::F16 => KvDtype::F16,
            KvType::F32 => KvDtype::F32,
        }
    }
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
        kv: KvArgs,
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
        kv: KvArgs,
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
    },
    /// An OpenAI-compatible HTTP server on the engine's admission funnel and continuous batch.
    Serve(serve::ServeArgs),
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

pub(crate) struct Loaded {
    pub(crate) engine: Engine,
    load_secs: f64,
}

impl Loaded {
    /// The decode core's model (every command but generate/chat needs one).
    fn model(&self) -> Result<&Arc<Model>> {
        self.engine.model().context(
            "this package's decoder is not the native llama_decoder block: it has no decode core",
        )
    }

    /// The tokenizer (a text prompt needs one).
    fn tokenizer(&self) -> Result<&Tokenizer> {
        self.engine
            .tokenizer()
            .context("this model has no tokenizer (no tokenizer.json and no GGUF vocabulary)")
    }

    /// Size of the model's GGUF file in bytes (0 when it has no path).
    fn file_bytes(&self) -> u64 {
        self.engine
            .model()
            .and_then(|m| m.weights().file().path().map(Path::to_path_buf))
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len())
    }
}

/// `--model` as given (it must exist), else the default model.
fn resolve_model(arg: &Option<PathBuf>) -> Result<PathBuf> {
    match arg {
        Some(p) if !p.exists() => bail!("model file {} does not exist", p.display()),
        Some(p) => Ok(p.clone()),
        None => default_model(),
    }
}

pub(crate) fn default_model() -> Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for base in [Path::new("."), workspace.as_path()] {
        let p = base.join(DEFAULT_MODEL);
        if p.exists() {
            return Ok(p);
        }
    }
    bail!(
        "no model given and the default {DEFAULT_MODEL} is missing: run scripts/fetch-model \
         (from the workspace root) or pass --model FILE.gguf or --model PACKAGE_DIR"
    )
}

/// Load `args.model` into an engine: a GGUF file (by its `GGUF` magic) or a package
/// directory (holding `package.json`); anything else is an error saying what was expected.
pub(crate) fn load_engine(args: &ModelArgs, opts: EngineOptions) -> Result<Loaded> {
    let path = match &args.model {
        Some(p) => p.clone(),
        None => default_model()?,
    };
    apply_isa(args)?;
    let t0 = Instant::now();
    let opts = EngineOptions {
        threads: args.threads.unwrap_or(0),
        ..opts
    };
    let engine = match model_kind(&path)? {
        ModelKind::Gguf => Engine::load_gguf(&path, opts),
        ModelKind::Package => Engine::load_package(&path, opts),
    }
    .with_context(|| format!("loading {}", path.display()))?;
    Ok(Loaded {
        engine,
        load_secs: t0.elapsed().as_secs_f64(),
    })
}

/// `--isa`: checked against this CPU, then handed to the kernels as `GENAI_ISA`.
pub(crate) fn apply_isa(args: &ModelArgs) -> Result<()> {
    let Some(s) = &args.isa else { return Ok(()) };
    let isa = Isa::parse(s)
        .with_context(|| format!("unknown --isa '{s}' (portable, avx2, avx512, avx512vnni)"))?;
    if !isa.supported() {
        bail!("--isa {isa} is not supported by this CPU");
    }
    // SAFETY: called on the main thread before the engine (and any other thread that
    // could read the environment) starts.
    unsafe { std::env::set_var("GENAI_ISA", isa.name()) };
    Ok(())
}

pub(crate) enum ModelKind {
    Gguf,
    Package,
}

pub(crate) fn model_kind(path: &Path) -> Result<ModelKind> {
    const EXPECTED: &str = "expected a GGUF model file or a package directory holding package.json";
    let meta = std::fs::metadata(path)
        .with_context(|| format!("--model {}: cannot read it ({EXPECTED})", path.display()))?;
    if meta.is_dir() {
        if path.join("package.json").is_file() {
            return Ok(ModelKind::Package);
        }
        bail!(
            "--model {}: the directory has no package.json ({EXPECTED})",
            path.display()
        );
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok();
    if !meta.is_file() || !read || &magic != b"GGUF" {
        bail!(
            "--model {}: not a GGUF file (its first bytes are not the GGUF magic; {EXPECTED})",
            path.display()
        );
    }
    Ok(ModelKind::Gguf)
}

fn chat_template(l: &Loaded) -> Result<ChatTemplate> {
    let model = l.model()?;
    Ok(ChatTemplate::from_gguf(
        model.weights().file().metadata(),
        None,
    )?)
}

fn request(text: String, s: &SampleArgs) -> GenerateRequest {
    GenerateRequest::new(Prompt::Text(text), s.max_new_tokens)
        .with_sampling(SamplerConfig {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            seed: s.seed,
        })
        .with_stop(s.stop.clone())
}

/// Run `req` through the engine's funnel, streaming its text to stdout; the stats line
/// goes to stderr. `interrupt`, when given and set (Ctrl-C), stops the reply after the
/// token in hand and is cleared. Returns the generated text.
fn stream(l: &Loaded, req: &GenerateRequest, interrupt: Option<&AtomicBool>) -> Result<String> {
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

/// Lines of standard input, read on their own thread so that the chat prompt can also wait
/// for Ctrl-C; the channel closes at end of input or on a read error.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        loop {
            let mut line = String::new();
            match stdin.lock().read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Generate {
            prompt,
            chat,
            system,
            model,
            kv,
            sample,
        } => {
            let l = load_engine(&model, kv.options())?;
            let text = if chat {
                let mut msgs = Vec::new();
                if let Some(s) = system {
                    msgs.push(Message::system(s));
                }
                msgs.push(Message::user(prompt));
                chat_template(&l)?.render(&msgs, true)?
            } else {
                if system.is_some() {
                    bail!("--system needs --chat");
                }
                prompt
            };
            stream(&l, &request(text, &sample), None)?;
        }
        Command::Chat {
            system,
            model,
            kv,
            sample,
        } => {
            let l = load_engine(&model, kv.options())?;
            let template = chat_template(&l)?;
            let mut msgs = Vec::new();
            if let Some(s) = system {
                msgs.push(Message::system(s));
            }
            // Ctrl-C during a reply stops the reply and returns to the prompt; Ctrl-C, Ctrl-D
            // (end of input) or an empty line at the prompt ends the chat with exit 0.
            let interrupt = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(signal_hook::consts::SIGINT, interrupt.clone())
                .context("installing the Ctrl-C handler")?;
            let lines = stdin_lines();
            loop {
                // Cleared before the prompt shows: a Ctrl-C seen at the prompt ends the chat.
                interrupt.store(false, Ordering::SeqCst);
                eprint!("> ");
                let line = loop {
                    match lines.recv_timeout(Duration::from_millis(50)) {
                        Ok(line) => break Some(line),
                        Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if interrupt.load(Ordering::SeqCst) {
                                break None;
                            }
                        }
                    }
                };
                let Some(line) = line.filter(|l| !l.trim().is_empty()) else {
                    eprintln!();
                    break;
                };
                msgs.push(Message::user(line.trim_end()));
                let prompt = template.render(&msgs, true)?;
                let text = stream(&l, &request(prompt, &sample), Some(&interrupt))?;
                msgs.push(Message::assistant(text));
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
            let l = load_engine(&model, EngineOptions::default())?;
            let ids = l.tokenizer()?.encode(&text)?;
            println!(
                "{}",
                ids.iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        Command::Info { memory, model } => {
            let l = load_engine(&model, EngineOptions::default())?;
            let m = l.model()?;
            let file = m.weights().file();
            let c = m.config();
            let size = l.file_bytes();
            println!(
                "file            {}",
                file.path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            println!("gguf version    {}", file.version());
            println!("architecture    {}", c.architecture);
            if let Ok(name) = file.metadata().get_str("general.name") {
                println!("name            {name}");
            }
            println!("tensors         {}", file.tensors().len());
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
            println!("tied embeddings {}", m.weights().tied_embeddings);
            println!(
                "kernels         {} threads, {}",
                m.cpu().threads(),
                m.cpu().isa()
            );
            if memory {
                // One decode step touches every weight page, so the figure counts them all.
                let mut kv = KvCache::new(m.kv_config(1, engine::kv::KV_DTYPE))?;
                let seq = kv.create_sequence();
                m.forward(&mut kv, seq, &[0], Logits::Last)?;
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
            concurrency,
            response_format,
            temperature,
            model,
            kv,
        } => {
            let l = load_engine(&model, kv.options())?;
            if let Some(format) = response_format {
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
                bench::constrained(
                    &l.engine,
                    text,
                    grammar,
                    gen_tokens,
                    runs.max(1),
                    temperature,
                    json,
                )?
            } else if concurrency.is_empty() {
                bench(&l, prompt_tokens, gen_tokens, runs.max(1), json)?
            } else {
                bench::concurrent(&l.engine, prompt_tokens, gen_tokens, &concurrency, json)?
            }
        }
        Command::Serve(args) => serve::run(args)?,
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
    let model = l.model()?;
    let prompt = bench::prompt(&l.engine, prompt_tokens, gen_tokens)?;
    let mut req = GenerateRequest::tokens(prompt.clone(), gen_tokens);
    req.stop_at_eog = false;
    let bpt = l
        .engine
        .scheduler()
        .bytes_per_token()
        .context("the model has no KV geometry")?;
    let mut prefill = Vec::new();
    let mut decode = Vec::new();
    let mut rss = 0u64;
    // The KV cache of one sequence, in whole pages of 16 positions.
    let kv_bytes = (prompt_tokens + gen_tokens).div_ceil(16) as u64 * 16 * bpt;
    for run in 0..=runs {
        let mut n = 0;
        let r = l.engine.generate_with(&req, &mut |_| {}, &mut |_, _| {
            n += 1;
            if run == runs && n == gen_tokens {
                // Resident memory with the last run's KV cache still held.
                rss = resident_bytes().unwrap_or(0);
            }
            Flow::Continue
        })?;
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
