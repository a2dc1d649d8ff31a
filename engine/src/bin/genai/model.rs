//! The model a command runs: the `--model`, `--threads`, `--isa` and `--kv-dtype` flags, the default model, and the engine they load.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;

use engine::chat::ChatTemplate;
use engine::kernels::Isa;
use engine::kv::KvDtype;
use engine::model::Model;
use engine::runtime::{Engine, EngineOptions};
use engine::tokenizer::Tokenizer;

/// Where `scripts/fetch-model` puts the default model, relative to the workspace root.
const DEFAULT_MODEL: &str = "fixtures/models/SmolLM2-135M-Instruct.Q4_1.gguf";

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
    pub(crate) fn options(&self) -> EngineOptions {
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

/// An engine loaded for a command, and how long the load took.
pub(crate) struct Loaded {
    pub(crate) engine: Engine,
    pub(crate) load_secs: f64,
}

impl Loaded {
    /// The decode core's model (every command but generate/chat needs one).
    pub(crate) fn model(&self) -> Result<&Arc<Model>> {
        self.engine.model().context(
            "this package's decoder is not the native llama_decoder block: it has no decode core",
        )
    }

    /// The tokenizer (a text prompt needs one).
    pub(crate) fn tokenizer(&self) -> Result<&Tokenizer> {
        self.engine
            .tokenizer()
            .context("this model has no tokenizer (no tokenizer.json and no GGUF vocabulary)")
    }

    /// Size of the model's GGUF file in bytes (0 when it has no path).
    pub(crate) fn file_bytes(&self) -> u64 {
        self.engine
            .model()
            .and_then(|m| m.weights().file().path().map(Path::to_path_buf))
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len())
    }
}

/// `--model` as given (it must exist), else the default model.
pub(crate) fn resolve_model(arg: &Option<PathBuf>) -> Result<PathBuf> {
    match arg {
        Some(p) if !p.exists() => bail!("model file {} does not exist", p.display()),
        Some(p) => Ok(p.clone()),
        None => default_model(),
    }
}

/// The default model (`DEFAULT_MODEL`, from the working directory or the workspace root),
/// or an error saying how to fetch it.
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

/// What `--model` names.
pub(crate) enum ModelKind {
    Gguf,
    Package,
}

/// Whether `path` is a GGUF file (by its magic) or a package directory (holding
/// `package.json`); anything else is an error saying what was expected.
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

/// The chat template of the loaded model's GGUF metadata.
pub(crate) fn chat_template(l: &Loaded) -> Result<ChatTemplate> {
    let model = l.model()?;
    Ok(ChatTemplate::from_gguf(
        model.weights().file().metadata(),
        None,
    )?)
}
