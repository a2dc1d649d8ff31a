//! The `Engine`: one request funnel (validate → encode → count → admit → on_admitted → clamp → run → complete) for every request on every route.
//!
//! An [`Engine`] serves a bare GGUF model or a declared-workflow package. Every
//! request, whatever it carries (text, token ids or token rows; bound application
//! tensors; component overrides; a session id) and whichever executor runs it, takes
//! the same path, written out once in [`Engine::generate_with`] (docs/design.md §2.1):
//!
//! 1. **validate**: the request's shape, its application tensors and component
//!    overrides against the package's declarations ([`Package::validate_request`]),
//!    its session; the route is chosen here;
//! 2. **encode**: text to token ids (token prompts pass through);
//! 3. **count**: the [`Demand`]: prompt tokens per row, token rows, the session's
//!    carried prefix, positions contributed by application inputs (from their
//!    declared shapes), new tokens;
//! 4. **admit**: the [`Scheduler`] reserves the KV bytes, clamps or refuses;
//! 5. **on_admitted**: the caller's signal, exactly once, only after admission;
//! 6. **clamp**: `max_new_tokens` lowered to the admitted count;
//! 7. **run**: the fused decode core or the workflow interpreter;
//! 8. **complete**: the reservation is released, after success and after failure.
//!
//! Routes (docs/design.md §2.2): an engine holding a decode core (a bare GGUF, or a package
//! whose decoder is the native `llama_decoder` block) runs prompt-only requests on it;
//! a request binding an application tensor or overriding a component runs on the
//! interpreter; an engine without a decode core runs everything on the interpreter.
//! Both executors record the components they invoke in an [`EventLog`].
//!
//! KV geometry: the scheduler's [`KvGeometry`] is the one concept; a package's
//! `llama_decoder` geometry ([`crate::workflow::KvGeometry`]) is converted to it.

// EngineError carries the typed errors of the model, package and interpreter by value;
// boxing them is a follow-up (see the report).
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::batch::Piece;
use crate::constrain::Grammar;
use crate::gguf::GgufFile;
use crate::isa::Isa;
use crate::kernels::matmul::Cpu;
use crate::kernels::sample::SamplerConfig;
use crate::model::{Model, ModelError};
use crate::scheduler::{
    AdmissionError, BudgetCap, ConfigError, Demand, KvGeometry, ReleaseError, Scheduler, Usage,
};
use crate::service::{Service, ServiceOptions, ServiceStats, SubmitOptions, Ticket};
use crate::tokenizer::{GgufVocab, StreamState, Tokenizer, TokenizerError};
use crate::workflow::manifest::{Implementation, NativeKind};
use crate::workflow::{
    self, BoundRequest, EventLog, GgufWeights, Interpreter, LoopExit, ModelBlocks, NativeBlocks,
    Package, Replacement, Request, RequestError, RunError, Session, Tensor, WorkflowError,
};

/// KV element type of the decode core's caches (the interpreter's native blocks use the same).
use crate::kv::{KV_DTYPE, KvDtype};

pub use crate::batch::Finish;
/// What a per-token callback tells the generation (one enum for both executors).
pub use crate::flow::Flow;

/// How an [`Engine`] is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// The KV byte budget, in bytes, of the engine's own scheduler.
    pub kv_budget_bytes: u64,
    /// Running-batch limit of the engine's own scheduler (≥ 1).
    pub max_running: usize,
    /// Run prompt-only requests on the fused decode core when the model has one;
    /// `false` runs every request on the workflow interpreter.
    pub decode_core: bool,
    /// Kernel threads (0: one per core).
    pub threads: usize,
    /// Element type of the KV caches (decode core and interpreter); it sets the KV
    /// geometry's bytes per element, so the byte budget holds twice as many f16 tokens.
    pub kv_dtype: KvDtype,
}

impl Default for EngineOptions {
    /// A 1 GiB budget, 8 running requests, the decode core on, one thread per core, an
    /// f16 KV cache ([`KV_DTYPE`]).
    fn default() -> Self {
        EngineOptions {
            kv_budget_bytes: 1 << 30,
            max_running: 8,
            decode_core: true,
            threads: 0,
            kv_dtype: KV_DTYPE,
        }
    }
}

/// The prompt of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Text, encoded with the model's tokenizer (no chat template is applied).
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
    /// Equal-length token rows run as one batch; each row generates on its own.
    Rows(Vec<Vec<u32>>),
}

/// One generation request.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateRequest {
    /// The prompt (the new turn only for a continuing session).
    pub prompt: Prompt,
    /// Upper bound on new tokens per row (the end-of-generation token counts).
    pub max_new_tokens: usize,
    /// Sampling settings (temperature, top-k, top-p, min-p, seed); the default is greedy.
    pub sampling: SamplerConfig,
    /// Stop strings: generation ends when the text contains one, and the text is cut
    /// before it (decode core only).
    pub stop: Vec<String>,
    /// End a row at an end-of-generation token (`false` generates through it, as a
    /// benchmark does; decode core only).
    pub stop_at_eog: bool,
    /// A continuing conversation: its earlier turns are the carried prefix.
    pub session_id: Option<String>,
    /// Application tensors by declared input name (packages only).
    pub inputs: BTreeMap<String, Tensor>,
    /// Component overrides by component name (packages only).
    pub overrides: BTreeMap<String, Replacement>,
    /// Constrained decoding ([`crate::batch::SeqSpec::constraint`]): every token keeps the output a
    /// prefix of a JSON value the grammar admits (decode core only).
    pub constraint: Option<Arc<Grammar>>,
    /// Log probabilities with each token ([`crate::batch::SeqSpec::logprobs`]): the token's own and the
    /// `n` most likely tokens' (decode core only).
    pub logprobs: Option<usize>,
}

impl GenerateRequest {
    /// A greedy request with no tensors, overrides or session.
    pub fn new(prompt: Prompt, max_new_tokens: usize) -> GenerateRequest {
        GenerateRequest {
            prompt,
            max_new_tokens,
            sampling: SamplerConfig::default(),
            stop: Vec::new(),
            stop_at_eog: true,
            session_id: None,
            inputs: BTreeMap::new(),
            overrides: BTreeMap::new(),
            constraint: None,
            logprobs: None,
        }
    }

    /// The request under a JSON constraint (decode core only).
    pub fn with_constraint(mut self, grammar: Arc<Grammar>) -> GenerateRequest {
        self.constraint = Some(grammar);
        self
    }

    /// A greedy request on token ids.
    pub fn tokens(tokens: Vec<u32>, max_new_tokens: usize) -> GenerateRequest {
        GenerateRequest::new(Prompt::Tokens(tokens), max_new_tokens)
    }

    /// The same request binding application tensor `name`.
    pub fn with_input(mut self, name: &str, tensor: Tensor) -> GenerateRequest {
        self.inputs.insert(name.to_string(), tensor);
        self
    }

    /// The same request replacing component `name`.
    pub fn with_override(mut self, name: &str, replacement: Replacement) -> GenerateRequest {
        self.overrides.insert(name.to_string(), replacement);
        self
    }

    /// The same request with sampling settings `sampling`.
    pub fn with_sampling(mut self, sampling: SamplerConfig) -> GenerateRequest {
        self.sampling = sampling;
        self
    }

    /// The same request stopping at any of `stop`.
    pub fn with_stop(mut self, stop: Vec<String>) -> GenerateRequest {
        self.stop = stop;
        self
    }

    /// The same request as a turn of session `id`.
    pub fn with_session(mut self, id: &str) -> GenerateRequest {
        self.session_id = Some(id.to_string());
        self
    }
}

/// Which executor ran a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// The fused native decode core.
    DecodeCore,
    /// The declared-workflow interpreter.
    Interpreter,
}

/// The generated tokens of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Generated ids in order.
    pub tokens: Vec<u32>,
    /// Their text (end-of-generation tokens not rendered); `None` without a tokenizer.
    pub text: Option<String>,
    /// Why it ended.
    pub finish: Finish,
}

/// The result of an admitted, completed request.
#[derive(Debug, Clone)]
pub struct GenerateResult {
    /// The executor that ran it.
    pub route: Route,
    /// Prompt tokens per row (the new turn).
    pub prompt_tokens: usize,
    /// Tokens the session carried into this turn (0 without a session).
    pub carried_tokens: usize,
    /// KV positions contributed by application inputs.
    pub extra_positions: usize,
    /// One completion per token row.
    pub rows: Vec<Completion>,
    /// Seconds from the start of the run to row 0's first token (prefill).
    pub prefill_secs: f64,
    /// Seconds from row 0's first token to its last (decode).
    pub decode_secs: f64,
    /// Bytes the scheduler reserved for the request (0 without KV geometry).
    pub reserved_bytes: u64,
    /// Set when `max_new_tokens` was clamped to fit the budget.
    pub budget_cap: Option<BudgetCap>,
    /// The scheduler's state right after admission (this request's bytes included).
    pub usage: Usage,
    /// Components invoked, in order (all rows).
    pub events: EventLog,
    /// Prompt positions (the carried prefix included) taken from the prefix cache rather
    /// than computed (0 without a prefix cache, or when nothing matched).
    pub cached_tokens: usize,
}

impl GenerateResult {
    /// The first row's tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.rows[0].tokens
    }

    /// The first row's finish reason.
    pub fn finish(&self) -> &Finish {
        &self.rows[0].finish
    }
}

/// What is wrong with a request's shape, found before admission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    /// No prompt tokens (text that encodes to nothing, an empty id list or row).
    #[error("the prompt is empty (row {row}): at least one token is needed")]
    EmptyPrompt {
        /// The empty row.
        row: usize,
    },
    /// `Prompt::Rows` with no rows.
    #[error("the prompt has 0 token rows; at least one is needed")]
    NoRows,
    /// Token rows of different lengths.
    #[error("token rows must have equal length: row 0 has {first} tokens, row {row} has {len}")]
    UnequalRows {
        /// Length of row 0.
        first: usize,
        /// The first row that differs.
        row: usize,
        /// Its length.
        len: usize,
    },
    /// Token rows in a continuing session.
    #[error("token rows cannot continue session '{session}': a session runs one row")]
    RowsInSession {
        /// The session id.
        session: String,
    },
    /// Application tensors or overrides sent to a bare GGUF model.
    #[error(
        "a bare GGUF model declares no application inputs or replaceable components; \
         got inputs [{}] and overrides [{}]",
        inputs.join(", "), overrides.join(", ")
    )]
    NoPackage {
        /// Input names sent.
        inputs: Vec<String>,
        /// Override names sent.
        overrides: Vec<String>,
    },
    /// A session continued on the other executor (the carried state differs).
    #[error(
        "session '{session}' was started on the {started:?} route; this turn would run on {now:?}"
    )]
    SessionRoute {
        /// The session id.
        session: String,
        /// The route of its earlier turns.
        started: Route,
        /// This turn's route.
        now: Route,
    },
    /// A sampling setting out of range.
    #[error("sampling setting: {message}")]
    Sampling {
        /// The setting ([`crate::kernels::sample::SamplerConfig`]'s field name).
        field: &'static str,
        /// The sampler's message, naming the field and value.
        message: String,
    },
    /// A setting the interpreter route cannot honour (it samples with temperature and
    /// seed only, and has no stop strings).
    #[error("`{field}` is supported on the decode core only; this request runs on the interpreter")]
    InterpreterUnsupported {
        /// The setting.
        field: &'static str,
    },
    /// A request the continuous batch cannot run (it needs the decode core, one token row,
    /// no session).
    #[error("this request cannot join the continuous batch: {reason}")]
    NotBatchable {
        /// Why.
        reason: &'static str,
    },
    /// Text prompt but no tokenizer.
    #[error("a text prompt needs a tokenizer, and this model has none; send token ids")]
    NoTokenizer,
    /// The prompt (with a session's carried prefix) plus the new tokens exceed the model's
    /// context length.
    #[error(
        "the prompt ({prompt_tokens} tokens) plus max_new_tokens ({max_new_tokens}) is {} positions, \
         more than the model's context length of {context}",
        prompt_tokens + max_new_tokens
    )]
    ContextOverflow {
        /// Prompt tokens, the carried prefix included.
        prompt_tokens: usize,
        /// New tokens asked for.
        max_new_tokens: usize,
        /// The model's context length, in positions.
        context: usize,
    },
}

/// Errors of loading an engine or serving a request.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The GGUF model could not be loaded.
    #[error("model {path}: {source}")]
    Model {
        /// The GGUF path.
        path: PathBuf,
        /// The cause.
        source: ModelError,
    },
    /// The package could not be loaded.
    #[error(transparent)]
    Package(#[from] WorkflowError),
    /// The tokenizer could not be built, or text could not be encoded or decoded.
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] TokenizerError),
    /// The scheduler configuration is invalid.
    #[error("scheduler: {0}")]
    Scheduler(#[from] ConfigError),
    /// A shared scheduler prices tokens differently from this model's KV geometry.
    #[error(
        "the scheduler prices {scheduler} bytes per token but this model's KV cache takes {model} \
         bytes per token; build it with this engine's kv_geometry() (or none for no byte budget)"
    )]
    SchedulerMismatch {
        /// The scheduler's bytes per token.
        scheduler: u64,
        /// The model's.
        model: u64,
    },
    /// The request's shape is invalid (validation stage).
    #[error("invalid request: {0}")]
    BadRequest(#[from] BadRequest),
    /// The request does not match the package's declarations (validation stage).
    #[error("invalid request: {0}")]
    Request(#[from] RequestError),
    /// The scheduler refused the request; nothing ran.
    #[error("refused: {0}")]
    Refused(AdmissionError),
    /// The request fits the budget only later, and the service's queue is full; nothing
    /// ran.
    #[error(
        "the wait queue is full ({limit} requests wait for KV budget); retry after {retry_after_secs} s"
    )]
    QueueFull {
        /// The queue's bound ([`ServiceOptions::max_queue`]).
        limit: usize,
        /// Whole seconds (at least 1) until the scheduler would admit it if the batch
        /// keeps its pace.
        retry_after_secs: u64,
    },
    /// The engine is draining ([`Engine::drain`]): queued and new requests are refused.
    #[error("the engine is shutting down; the request was not started")]
    ShuttingDown,
    /// The engine's configuration cannot change once its service has started.
    #[error("the engine's service has started (a request was submitted); configure it before")]
    ServiceStarted,
    /// The decode core failed after admission (the reservation was released).
    #[error("decode core failed: {0}")]
    DecodeCore(ModelError),
    /// The interpreter failed after admission (the reservation was released).
    #[error("interpreter failed: {0}")]
    Interpreter(RunError),
    /// Releasing the reservation failed (an engine fault, not the request's).
    #[error("releasing the KV reservation failed: {0}")]
    Release(ReleaseError),
}

impl EngineError {
    /// The admission refusal, if the request was refused.
    pub fn refusal(&self) -> Option<&AdmissionError> {
        match self {
            EngineError::Refused(e) => Some(e),
            _ => None,
        }
    }
}

/// The fused decode core: the Llama model and the names its components log under.
#[derive(Debug)]
struct DecodeCore {
    model: Arc<Model>,
    /// Component names for `token_embedding`, `llama_decoder`, `lm_head`.
    names: [String; 3],
}

/// What a session keeps between turns (tokens only; each turn re-prefills).
#[derive(Debug, Clone)]
pub(crate) struct SessionState {
    route: Route,
    /// Decode-core route: every token of earlier turns.
    pub(crate) history: Vec<u32>,
    /// Interpreter route: the package's session cells.
    cells: Session,
}

/// A request after validation: its route, its bound package request, its session.
pub(crate) struct Plan {
    pub(crate) route: Route,
    bound: Option<BoundRequest>,
    pub(crate) session: Option<(String, SessionState)>,
    pub(crate) carried: usize,
}

impl Plan {
    pub(crate) fn extra_positions(&self) -> usize {
        self.bound.as_ref().map_or(0, BoundRequest::extra_positions)
    }
}

/// Stage 3: the KV positions of a validated, encoded request, before any component
/// runs: prompt tokens per row, every row, the session's carried prefix, and the
/// positions its application inputs contribute (from their declared shapes).
fn count(plan: &Plan, rows: &[Vec<u32>], req: &GenerateRequest) -> Demand {
    Demand::prompt(rows[0].len(), req.max_new_tokens)
        .with_rows(rows.len())
        .with_carried_prefix(plan.carried)
        .with_extra_positions(plan.extra_positions())
}

/// What the engine serves: the model, its package, tokenizer and KV geometry, the
/// scheduler that prices and admits requests, and the sessions' carried state. The
/// service's worker ([`crate::service`]) and the front ends' submitting threads share it.
pub(crate) struct Core {
    core: Option<DecodeCore>,
    package: Option<Package>,
    tokenizer: Option<Arc<Tokenizer>>,
    geometry: Option<KvGeometry>,
    scheduler: Scheduler,
    sessions: Mutex<HashMap<String, SessionState>>,
    kv_dtype: KvDtype,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("decode_core", &self.core.is_some())
            .field("package", &self.package.as_ref().map(Package::name))
            .field("geometry", &self.geometry)
            .field("usage", &self.scheduler.usage())
            .finish_non_exhaustive()
    }
}

fn model_geometry(model: &Model, dtype: KvDtype) -> KvGeometry {
    let c = model.config();
    KvGeometry {
        n_layers: c.n_layers,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        elem_bytes: dtype.size(),
    }
}

/// A CPU inference engine: one model behind one service ([`crate::service`]) that every
/// request, from every front end, enters through (one queue, one admission, one continuous
/// batch).
///
/// [`Engine::submit`] is the one door: it runs stages 1–3 of the funnel (validate, encode,
/// count) on the caller's thread and admits, queues or refuses under the service's lock;
/// the service's worker thread runs every admitted request (the decode core's rows join its
/// continuous batch; the interpreter's requests run on a thread of their own) and releases
/// its reservation when it ends. [`Engine::generate_stream`] and friends are clients of
/// `submit` that wait for the result.
pub struct Engine {
    core: Arc<Core>,
    options: ServiceOptions,
    service: OnceLock<Service>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("decode_core", &self.core.core.is_some())
            .field("package", &self.core.package.as_ref().map(Package::name))
            .field("geometry", &self.core.geometry)
            .field("usage", &self.core.scheduler.usage())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Serve a bare GGUF model on the decode core (tokenizer from its vocabulary).
    ///
    /// Errors: [`EngineError::Model`] naming the path, [`EngineError::Tokenizer`],
    /// [`EngineError::Scheduler`].
    pub fn load_gguf(path: impl AsRef<Path>, opts: EngineOptions) -> Result<Engine, EngineError> {
        let path = path.as_ref();
        let merr = |source| EngineError::Model {
            path: path.to_path_buf(),
            source,
        };
        let file = Arc::new(GgufFile::open(path).map_err(|e| merr(e.into()))?);
        let tokenizer = Tokenizer::from_vocab(&GgufVocab::from_metadata(file.metadata())?)?;
        let model =
            Arc::new(Model::from_file(file, Cpu::new(opts.threads, Isa::best())).map_err(merr)?);
        let geometry = model_geometry(&model, opts.kv_dtype);
        let names = ["token_embedding", "llama_decoder", "lm_head"].map(String::from);
        Engine::assemble(
            Some(DecodeCore { model, names }),
            None,
            Some(Arc::new(tokenizer)),
            Some(geometry),
            opts,
        )
    }

    /// Serve a package directory: its decoder runs prompt-only requests on the decode
    /// core when it is the native `llama_decoder` block and `opts.decode_core` is set;
    /// everything else runs on the interpreter. The tokenizer is the package's
    /// `tokenizer.json` if present, else its weights' GGUF vocabulary, else none.
    ///
    /// Errors: [`EngineError::Package`] (manifest, validation, weights),
    /// [`EngineError::Model`], [`EngineError::Tokenizer`], [`EngineError::Scheduler`].
    pub fn load_package(dir: impl AsRef<Path>, opts: EngineOptions) -> Result<Engine, EngineError> {
        let dir = dir.as_ref();
        let mpath = dir.join("package.json");
        let text = std::fs::read_to_string(&mpath).map_err(|source| WorkflowError::Io {
            path: mpath.clone(),
            source,
        })?;
        let manifest = Package::parse_manifest(&text, &mpath)?;
        let native_block = |kind: NativeKind| {
            manifest
                .components
                .iter()
                .find_map(|c| match &c.implementation {
                    Implementation::Native(n) if n.block == kind => Some(c.name.clone()),
                    _ => None,
                })
        };
        let names = [
            native_block(NativeKind::TokenEmbedding),
            native_block(NativeKind::LlamaDecoder),
            native_block(NativeKind::LmHead),
        ];
        let has_native = names.iter().any(Option::is_some);
        let mut file = None;
        let mut model = None;
        if let Some(w) = &manifest.weights {
            let wpath = dir.join(w);
            let merr = |source| EngineError::Model {
                path: wpath.clone(),
                source,
            };
            let f = Arc::new(GgufFile::open(&wpath).map_err(|e| merr(e.into()))?);
            if has_native {
                let cpu = Cpu::new(opts.threads, Isa::best());
                model = Some(Arc::new(Model::from_file(f.clone(), cpu).map_err(merr)?));
            }
            file = Some(f);
        }
        let tjson = dir.join("tokenizer.json");
        let tokenizer = match &file {
            _ if tjson.is_file() => {
                let vocab = file
                    .as_ref()
                    .and_then(|f| GgufVocab::from_metadata(f.metadata()).ok());
                Some(Tokenizer::from_tokenizer_json(
                    &tjson,
                    vocab.as_ref().and_then(|v| v.bos),
                    vocab.as_ref().and_then(|v| v.eos),
                )?)
            }
            Some(f) if f.metadata().get("tokenizer.ggml.tokens").is_some() => Some(
                Tokenizer::from_vocab(&GgufVocab::from_metadata(f.metadata())?)?,
            ),
            _ => None,
        };
        let weights: Option<Arc<dyn workflow::Weights>> = match &file {
            Some(f) => Some(Arc::new(GgufWeights::new(f.clone()).map_err(|source| {
                WorkflowError::Weights {
                    package: manifest.name.clone(),
                    path: dir.join(manifest.weights.as_deref().unwrap_or_default()),
                    source,
                }
            })?)),
            None => None,
        };
        let native: Option<Arc<dyn NativeBlocks>> = model.as_ref().map(|m| {
            Arc::new(ModelBlocks::from_model(m.clone()).with_kv_dtype(opts.kv_dtype))
                as Arc<dyn NativeBlocks>
        });
        let package = Package::from_parts(manifest, weights, native)?;
        let geometry = package.kv_geometry().map(|g| KvGeometry {
            n_layers: g.n_layers,
            n_kv_heads: g.n_kv_heads,
            head_dim: g.head_dim,
            elem_bytes: g.elem_bytes,
        });
        let core = match (&model, names) {
            (Some(model), [Some(e), Some(d), Some(h)]) if opts.decode_core => Some(DecodeCore {
                model: model.clone(),
                names: [e, d, h],
            }),
            _ => None,
        };
        Engine::assemble(core, Some(package), tokenizer.map(Arc::new), geometry, opts)
    }

    fn assemble(
        core: Option<DecodeCore>,
        package: Option<Package>,
        tokenizer: Option<Arc<Tokenizer>>,
        geometry: Option<KvGeometry>,
        opts: EngineOptions,
    ) -> Result<Engine, EngineError> {
        let scheduler = Scheduler::with_geometry(opts.kv_budget_bytes, geometry, opts.max_running)?;
        Ok(Engine {
            core: Arc::new(Core {
                core,
                package,
                tokenizer,
                geometry,
                scheduler,
                sessions: Mutex::new(HashMap::new()),
                kv_dtype: opts.kv_dtype,
            }),
            options: ServiceOptions::default(),
            service: OnceLock::new(),
        })
    }

    /// The core, to change before the service starts.
    ///
    /// Errors: [`EngineError::ServiceStarted`] once a request was submitted (the worker
    /// shares the core from then on).
    fn core_mut(&mut self) -> Result<&mut Core, EngineError> {
        if self.service.get().is_some() {
            return Err(EngineError::ServiceStarted);
        }
        Arc::get_mut(&mut self.core).ok_or(EngineError::ServiceStarted)
    }

    /// Share a scheduler (one KV byte budget across holders) instead of the engine's own.
    ///
    /// Errors: [`EngineError::SchedulerMismatch`] if it prices tokens differently from
    /// this model's KV geometry (a scheduler without `bytes_per_token`, no byte budget, is
    /// accepted); [`EngineError::ServiceStarted`] after the first request.
    pub fn with_scheduler(mut self, scheduler: Scheduler) -> Result<Engine, EngineError> {
        let model = self
            .core
            .geometry
            .map(|g| g.bytes_per_token())
            .transpose()?;
        match (scheduler.bytes_per_token(), model) {
            (Some(s), Some(m)) if s != m => {
                return Err(EngineError::SchedulerMismatch {
                    scheduler: s,
                    model: m,
                });
            }
            (Some(s), None) => {
                return Err(EngineError::SchedulerMismatch {
                    scheduler: s,
                    model: 0,
                });
            }
            _ => {}
        }
        self.core_mut()?.scheduler = scheduler;
        Ok(self)
    }

    /// The same engine with a KV byte budget of `bytes` (its own scheduler, the same KV
    /// geometry and running-batch limit).
    ///
    /// Errors: [`EngineError::Scheduler`] for an invalid configuration;
    /// [`EngineError::ServiceStarted`] after the first request.
    pub fn with_kv_budget(mut self, bytes: u64) -> Result<Engine, EngineError> {
        let max_running = self.core.scheduler.usage().max_running;
        let geometry = self.core.geometry;
        self.core_mut()?.scheduler = Scheduler::with_geometry(bytes, geometry, max_running)?;
        Ok(self)
    }

    /// The same engine whose service runs with `options` (queue bound, prefill chunk, step
    /// pace).
    ///
    /// Errors: [`EngineError::ServiceStarted`] after the first request.
    pub fn with_service(mut self, options: ServiceOptions) -> Result<Engine, EngineError> {
        self.core_mut()?;
        self.options = options;
        Ok(self)
    }

    /// The scheduler (a handle on the shared budget).
    pub fn scheduler(&self) -> &Scheduler {
        &self.core.scheduler
    }

    /// The KV budget's state now: bytes used and limit, running and queued requests.
    pub fn usage(&self) -> Usage {
        self.core.scheduler.usage()
    }

    /// Element type of the engine's KV caches ([`EngineOptions::kv_dtype`]).
    pub fn kv_dtype(&self) -> KvDtype {
        self.core.kv_dtype
    }

    /// Bytes of the budget the prefix cache holds now (part of [`Engine::usage`]'s used
    /// bytes; evicted before any request waits for bytes).
    pub fn cached_bytes(&self) -> u64 {
        self.core.scheduler.cached_bytes()
    }

    /// KV geometry of the model's decoder; `None` without one.
    pub fn kv_geometry(&self) -> Option<KvGeometry> {
        self.core.geometry
    }

    /// Whether prompt-only requests run on the fused decode core.
    pub fn has_decode_core(&self) -> bool {
        self.core.core.is_some()
    }

    /// The package, when serving one.
    pub fn package(&self) -> Option<&Package> {
        self.core.package.as_ref()
    }

    /// The tokenizer, if the model has one.
    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.core.tokenizer.as_deref()
    }

    /// The decode core's model, when the engine has one.
    pub fn model(&self) -> Option<&Arc<Model>> {
        self.core.core.as_ref().map(|c| &c.model)
    }

    /// Forget a session's carried state. Returns whether it existed.
    pub fn end_session(&self, id: &str) -> bool {
        self.core.sessions_lock().remove(id).is_some()
    }

    /// The service, started on first use.
    fn service(&self) -> &Service {
        self.service
            .get_or_init(|| Service::start(self.core.clone(), self.options.clone()))
    }

    /// Submit `req`: the one door of every request. Stages 1–3 of the funnel run here,
    /// then admission under the service's lock; the [`Ticket`] resolves once (admitted,
    /// queued, or refused with the typed reason), then streams tokens and one result.
    /// Dropping or cancelling the ticket releases its KV reservation.
    pub fn submit(&self, req: GenerateRequest, options: SubmitOptions) -> Ticket {
        self.service().submit(req, options)
    }

    /// Stop admitting: new requests and queued ones are refused with
    /// [`EngineError::ShuttingDown`]; running ones finish.
    pub fn drain(&self) {
        if let Some(s) = self.service.get() {
            s.drain();
        }
    }

    /// The service's figures now (seconds per batch step, decode tokens and seconds so
    /// far); the default before the first request.
    pub fn service_stats(&self) -> ServiceStats {
        self.service.get().map(Service::stats).unwrap_or_default()
    }

    /// `Retry-After` for a request of `demand` that found the queue full: whole seconds (at
    /// least 1) until the scheduler would admit it if the batch keeps its pace.
    pub fn retry_after_secs(&self, demand: &Demand) -> u64 {
        self.service.get().map_or(1, |s| s.retry_after(demand))
    }

    /// Serve `req` without callbacks; see [`Engine::generate_with`].
    ///
    /// # Errors
    /// As [`Engine::generate_with`].
    pub fn generate(&self, req: &GenerateRequest) -> Result<GenerateResult, EngineError> {
        self.submit(req.clone(), SubmitOptions::default()).wait()
    }

    /// As [`Engine::generate_stream`] with a callback that sees token ids only.
    ///
    /// # Errors
    /// As [`Engine::generate_stream`].
    pub fn generate_with(
        &self,
        req: &GenerateRequest,
        on_admitted: &mut dyn FnMut(Route),
        on_token: &mut dyn FnMut(usize, u32) -> Flow,
    ) -> Result<GenerateResult, EngineError> {
        self.generate_stream(req, on_admitted, &mut |row, piece| on_token(row, piece.id))
    }

    /// Serve `req` through the service and wait for it, in lockstep: `on_admitted(route)`
    /// is called exactly once, after the scheduler admitted the request and before any
    /// component runs, and never for a refused request; `on_token(row, piece)` is called
    /// for every generated token with the text it releases, before the row's next token is
    /// generated, and may stop that row. A request that fits the budget only later waits
    /// in the service's queue.
    ///
    /// # Errors
    /// Before admission: [`EngineError::BadRequest`], [`EngineError::Request`],
    /// [`EngineError::Tokenizer`], then [`EngineError::Refused`] or
    /// [`EngineError::QueueFull`] (nothing ran). After admission:
    /// [`EngineError::DecodeCore`], [`EngineError::Interpreter`] (the reservation is released
    /// either way), [`EngineError::Release`].
    pub fn generate_stream(
        &self,
        req: &GenerateRequest,
        on_admitted: &mut dyn FnMut(Route),
        on_token: &mut dyn FnMut(usize, Piece<'_>) -> Flow,
    ) -> Result<GenerateResult, EngineError> {
        let ticket = self.submit(req.clone(), SubmitOptions { lockstep: true });
        ticket.follow(on_admitted, on_token)
    }

    /// Stages 1–3 of the funnel without admitting: what the request would ask the
    /// scheduler for.
    ///
    /// # Errors
    /// The funnel's errors before admission.
    pub fn demand(&self, req: &GenerateRequest) -> Result<Demand, EngineError> {
        Ok(self.core.plan(req)?.demand)
    }
}

/// A request after stages 1–3: its plan, token rows and demand, ready to admit.
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(crate) rows: Vec<Vec<u32>>,
    pub(crate) demand: Demand,
    /// The cached prefix pages it starts with, pinned while it lives (decode core, one row).
    pub(crate) lease: Option<crate::prefix::PrefixLease>,
}

impl Core {
    pub(crate) fn sessions_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionState>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The scheduler every request is admitted by.
    pub(crate) fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The decode core's model and component names, when the engine has one.
    pub(crate) fn decode_model(&self) -> Option<(&Arc<Model>, &[String; 3])> {
        self.core.as_ref().map(|c| (&c.model, &c.names))
    }

    /// The tokenizer, shared.
    pub(crate) fn tokenizer_arc(&self) -> Option<&Arc<Tokenizer>> {
        self.tokenizer.as_ref()
    }

    /// Element type of the KV caches.
    pub(crate) fn kv_dtype(&self) -> KvDtype {
        self.kv_dtype
    }

    /// Stages 1–3: validate, encode, count.
    ///
    /// # Errors
    /// The funnel's errors before admission.
    pub(crate) fn plan(&self, req: &GenerateRequest) -> Result<Planned, EngineError> {
        // 1. validate
        let plan = self.validate(req)?;
        // 2. encode
        let rows = self.encode(&req.prompt)?;
        // 3. count
        let demand = count(&plan, &rows, req);
        if plan.route == Route::DecodeCore
            && let Some((model, _)) = self.decode_model()
        {
            let context = model.config().context_len;
            let positions = plan.carried + rows[0].len() + req.max_new_tokens;
            if positions > context {
                return Err(BadRequest::ContextOverflow {
                    prompt_tokens: plan.carried + rows[0].len(),
                    max_new_tokens: req.max_new_tokens,
                    context,
                }
                .into());
            }
        }
        Ok(Planned {
            plan,
            rows,
            demand,
            lease: None,
        })
    }

    /// Keep a session's state after a turn ran.
    pub(crate) fn keep_session(&self, id: String, state: SessionState) {
        self.sessions_lock().insert(id, state);
    }

    /// Stage 1: the request's shape, its package declarations, its session and route.
    pub(crate) fn validate(&self, req: &GenerateRequest) -> Result<Plan, EngineError> {
        let vocab = self
            .core
            .as_ref()
            .map(|c| c.model.config().vocab)
            .or_else(|| self.tokenizer.as_ref().map(|t| t.vocab_size()));
        let checked = match vocab {
            Some(v) => req.sampling.validate_for_vocab(v),
            None => req.sampling.validate(),
        };
        checked.map_err(|e| BadRequest::Sampling {
            field: e.field().unwrap_or("sampling"),
            message: e.to_string(),
        })?;
        match &req.prompt {
            Prompt::Text(_) if self.tokenizer.is_none() => {
                return Err(BadRequest::NoTokenizer.into());
            }
            Prompt::Text(_) => {}
            Prompt::Tokens(t) if t.is_empty() => {
                return Err(BadRequest::EmptyPrompt { row: 0 }.into());
            }
            Prompt::Tokens(_) => {}
            Prompt::Rows(rows) => {
                let first = rows.first().ok_or(BadRequest::NoRows)?.len();
                if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != first) {
                    return Err(BadRequest::UnequalRows {
                        first,
                        row,
                        len: r.len(),
                    }
                    .into());
                }
                if first == 0 {
                    return Err(BadRequest::EmptyPrompt { row: 0 }.into());
                }
                if let Some(s) = &req.session_id {
                    return Err(BadRequest::RowsInSession { session: s.clone() }.into());
                }
            }
        }
        let needs_interpreter = !req.inputs.is_empty() || !req.overrides.is_empty();
        let bound = match &self.package {
            Some(p) => Some(p.validate_request(&Request {
                prompt_tokens: Vec::new(),
                max_new_tokens: req.max_new_tokens,
                temperature: req.sampling.temperature,
                seed: req.sampling.seed,
                session_id: req.session_id.clone(),
                inputs: req.inputs.clone(),
                overrides: req.overrides.clone(),
            })?),
            None if needs_interpreter => {
                return Err(BadRequest::NoPackage {
                    inputs: req.inputs.keys().cloned().collect(),
                    overrides: req.overrides.keys().cloned().collect(),
                }
                .into());
            }
            None => None,
        };
        let route = if self.core.is_some() && !needs_interpreter {
            Route::DecodeCore
        } else {
            Route::Interpreter
        };
        if route == Route::Interpreter {
            let d = SamplerConfig::default();
            let unsupported = [
                ("stop", !req.stop.is_empty()),
                ("stop_at_eog", !req.stop_at_eog),
                ("top_k", req.sampling.top_k != d.top_k),
                ("top_p", req.sampling.top_p != d.top_p),
                ("min_p", req.sampling.min_p != d.min_p),
                (
                    "frequency_penalty",
                    req.sampling.frequency_penalty != d.frequency_penalty,
                ),
                (
                    "presence_penalty",
                    req.sampling.presence_penalty != d.presence_penalty,
                ),
                ("logit_bias", !req.sampling.logit_bias.is_empty()),
                ("constraint", req.constraint.is_some()),
                ("logprobs", req.logprobs.is_some()),
            ];
            if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
                return Err(BadRequest::InterpreterUnsupported { field }.into());
            }
        }
        let session = match &req.session_id {
            None => None,
            Some(id) => {
                let state = self.sessions_lock().get(id).cloned();
                let state = match state {
                    Some(s) if s.route != route => {
                        return Err(BadRequest::SessionRoute {
                            session: id.clone(),
                            started: s.route,
                            now: route,
                        }
                        .into());
                    }
                    Some(s) => s,
                    None => SessionState {
                        route,
                        history: Vec::new(),
                        cells: Session::new(Some(id.clone())),
                    },
                };
                Some((id.clone(), state))
            }
        };
        let carried = match (&session, route, &self.package) {
            (None, _, _) => 0,
            (Some((_, s)), Route::DecodeCore, _) => s.history.len(),
            (Some((_, s)), Route::Interpreter, Some(p)) => p.carried_tokens(&s.cells),
            (Some(_), Route::Interpreter, None) => 0,
        };
        Ok(Plan {
            route,
            bound,
            session,
            carried,
        })
    }

    /// Stage 2: token rows of the prompt.
    pub(crate) fn encode(&self, prompt: &Prompt) -> Result<Vec<Vec<u32>>, EngineError> {
        match prompt {
            Prompt::Text(text) => {
                let tok = self.tokenizer.as_ref().ok_or(BadRequest::NoTokenizer)?;
                let ids = tok.encode(text)?;
                if ids.is_empty() {
                    return Err(BadRequest::EmptyPrompt { row: 0 }.into());
                }
                Ok(vec![ids])
            }
            Prompt::Tokens(ids) => Ok(vec![ids.clone()]),
            Prompt::Rows(rows) => Ok(rows.clone()),
        }
    }

    /// Stage 7 on the interpreter: run every row, each token to `on_token`; on success the
    /// session keeps its cells. Returns the completions, the events, and row 0's prefill
    /// and decode seconds.
    #[allow(clippy::type_complexity)]
    pub(crate) fn run_interpreter(
        &self,
        plan: &mut Plan,
        rows: &[Vec<u32>],
        max_new_tokens: usize,
        capped: bool,
        on_token: &mut dyn FnMut(usize, Piece<'_>) -> Flow,
    ) -> Result<(Vec<Completion>, EventLog, (f64, f64)), EngineError> {
        let mut events = EventLog::default();
        let mut completions = Vec::with_capacity(rows.len());
        let t0 = std::time::Instant::now();
        let mut timing = (0.0, 0.0);
        let (Some(package), Some(bound)) = (&self.package, &mut plan.bound) else {
            // Validation routes to the interpreter only an engine serving a package.
            return Err(BadRequest::NoPackage {
                inputs: Vec::new(),
                overrides: Vec::new(),
            }
            .into());
        };
        {
            bound.clamp_max_new_tokens(max_new_tokens);
            let interpreter = Interpreter::new(package);
            for (r, row) in rows.iter().enumerate() {
                bound.prompt_tokens = row.clone();
                let mut scratch = Session::new(None);
                let session = match &mut plan.session {
                    Some((_, s)) => &mut s.cells,
                    None => &mut scratch,
                };
                let mut text = StreamState::default();
                let mut first = None;
                let tok = self.tokenizer.as_deref();
                let out = interpreter
                    .run(bound, session, &mut |t| {
                        first.get_or_insert_with(std::time::Instant::now);
                        let piece = tok
                            .filter(|k| !k.is_eog(t))
                            .and_then(|k| text.push(k, t).ok().flatten())
                            .unwrap_or_default();
                        on_token(
                            r,
                            Piece {
                                id: t,
                                text: &piece,
                                logprobs: None,
                            },
                        )
                    })
                    .map_err(EngineError::Interpreter)?;
                let finish = match (out.events.loop_exits().last(), out.tokens.last()) {
                    (Some(LoopExit::Condition), Some(&token)) => Finish::EndOfGeneration { token },
                    (Some(LoopExit::Callback), _) => Finish::Callback,
                    _ if capped => Finish::BudgetCap,
                    _ => Finish::MaxTokens,
                };
                if r == 0 {
                    timing = match first {
                        Some(f) => ((f - t0).as_secs_f64(), f.elapsed().as_secs_f64()),
                        None => (t0.elapsed().as_secs_f64(), 0.0),
                    };
                }
                events.events.extend(out.events.events);
                let text = match tok {
                    Some(t) => {
                        let shown: Vec<u32> = out
                            .tokens
                            .iter()
                            .copied()
                            .filter(|&id| !t.is_eog(id))
                            .collect();
                        Some(t.decode(&shown)?)
                    }
                    None => None,
                };
                completions.push(Completion {
                    tokens: out.tokens,
                    text,
                    finish,
                });
            }
        }
        if let Some((id, state)) = plan.session.take() {
            self.keep_session(id, state);
        }
        Ok((completions, events, timing))
    }
}
