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
use std::sync::{Arc, Mutex};

use crate::generate::Flow;
use crate::gguf::GgufFile;
use crate::kernels::Isa;
use crate::kernels::matmul::Cpu;
use crate::kernels::sample::{Sampler, SamplerConfig};
use crate::kv::{KvCache, KvDtype};
use crate::model::{Model, ModelError};
use crate::scheduler::{
    AdmissionError, BudgetCap, ConfigError, Demand, KvGeometry, ReleaseError, Scheduler, Usage,
};
use crate::tokenizer::{GgufVocab, Tokenizer, TokenizerError};
use crate::workflow::manifest::{Implementation, NativeKind};
use crate::workflow::{
    self, BoundRequest, Event, EventLog, GgufWeights, Interpreter, LoopExit, ModelBlocks,
    NativeBlocks, Package, Replacement, Request, RequestError, RunError, Session, Tensor,
    WorkflowError,
};

/// KV element type of the decode core's caches (the interpreter's native blocks use the same).
const KV_DTYPE: KvDtype = KvDtype::F32;

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
}

impl Default for EngineOptions {
    /// A 1 GiB budget, 8 running requests, the decode core on, one thread per core.
    fn default() -> Self {
        EngineOptions {
            kv_budget_bytes: 1 << 30,
            max_running: 8,
            decode_core: true,
            threads: 0,
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
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
    /// Sampling seed.
    pub seed: u64,
    /// A continuing conversation: its earlier turns are the carried prefix.
    pub session_id: Option<String>,
    /// Application tensors by declared input name (packages only).
    pub inputs: BTreeMap<String, Tensor>,
    /// Component overrides by component name (packages only).
    pub overrides: BTreeMap<String, Replacement>,
}

impl GenerateRequest {
    /// A greedy request with no tensors, overrides or session.
    pub fn new(prompt: Prompt, max_new_tokens: usize) -> GenerateRequest {
        GenerateRequest {
            prompt,
            max_new_tokens,
            temperature: 0.0,
            seed: 0,
            session_id: None,
            inputs: BTreeMap::new(),
            overrides: BTreeMap::new(),
        }
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

/// Why one row's generation ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Finish {
    /// An end-of-generation token (kept in the tokens).
    EndOfGeneration {
        /// The token id.
        token: u32,
    },
    /// The requested `max_new_tokens` were generated.
    MaxTokens,
    /// The admitted new-token count was generated: the request was clamped to the
    /// KV budget (see [`GenerateResult::budget_cap`]).
    BudgetCap,
    /// The per-token callback asked to stop.
    Callback,
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
    /// Bytes the scheduler reserved for the request (0 without KV geometry).
    pub reserved_bytes: u64,
    /// Set when `max_new_tokens` was clamped to fit the budget.
    pub budget_cap: Option<BudgetCap>,
    /// The scheduler's state right after admission (this request's bytes included).
    pub usage: Usage,
    /// Components invoked, in order (all rows).
    pub events: EventLog,
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
    /// Text prompt but no tokenizer.
    #[error("a text prompt needs a tokenizer, and this model has none; send token ids")]
    NoTokenizer,
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
struct SessionState {
    route: Route,
    /// Decode-core route: every token of earlier turns.
    history: Vec<u32>,
    /// Interpreter route: the package's session cells.
    cells: Session,
}

/// A request after validation: its route, its bound package request, its session.
struct Plan {
    route: Route,
    bound: Option<BoundRequest>,
    session: Option<(String, SessionState)>,
    carried: usize,
}

impl Plan {
    fn extra_positions(&self) -> usize {
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

/// A CPU inference engine serving one model through one admission funnel.
pub struct Engine {
    core: Option<DecodeCore>,
    package: Option<Package>,
    tokenizer: Option<Tokenizer>,
    geometry: Option<KvGeometry>,
    scheduler: Scheduler,
    sessions: Mutex<HashMap<String, SessionState>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("decode_core", &self.core.is_some())
            .field("package", &self.package.as_ref().map(Package::name))
            .field("geometry", &self.geometry)
            .field("usage", &self.scheduler.usage())
            .finish_non_exhaustive()
    }
}

fn model_geometry(model: &Model) -> KvGeometry {
    let c = model.config();
    KvGeometry {
        n_layers: c.n_layers,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        elem_bytes: KV_DTYPE.size(),
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
        let geometry = model_geometry(&model);
        let names = ["token_embedding", "llama_decoder", "lm_head"].map(String::from);
        Engine::assemble(
            Some(DecodeCore { model, names }),
            None,
            Some(tokenizer),
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
        let native: Option<Arc<dyn NativeBlocks>> = model
            .as_ref()
            .map(|m| Arc::new(ModelBlocks::from_model(m.clone())) as Arc<dyn NativeBlocks>);
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
        Engine::assemble(core, Some(package), tokenizer, geometry, opts)
    }

    fn assemble(
        core: Option<DecodeCore>,
        package: Option<Package>,
        tokenizer: Option<Tokenizer>,
        geometry: Option<KvGeometry>,
        opts: EngineOptions,
    ) -> Result<Engine, EngineError> {
        let scheduler = Scheduler::with_geometry(opts.kv_budget_bytes, geometry, opts.max_running)?;
        Ok(Engine {
            core,
            package,
            tokenizer,
            geometry,
            scheduler,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// Share a scheduler (one KV byte budget across holders) instead of the engine's own.
    ///
    /// Errors: [`EngineError::SchedulerMismatch`] if it prices tokens differently from
    /// this model's KV geometry; a scheduler without `bytes_per_token` (no byte budget)
    /// is accepted.
    pub fn with_scheduler(mut self, scheduler: Scheduler) -> Result<Engine, EngineError> {
        let model = self.geometry.map(|g| g.bytes_per_token()).transpose()?;
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
        self.scheduler = scheduler;
        Ok(self)
    }

    /// The scheduler (a handle on the shared budget).
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// KV geometry of the model's decoder; `None` without one.
    pub fn kv_geometry(&self) -> Option<KvGeometry> {
        self.geometry
    }

    /// Whether prompt-only requests run on the fused decode core.
    pub fn has_decode_core(&self) -> bool {
        self.core.is_some()
    }

    /// The package, when serving one.
    pub fn package(&self) -> Option<&Package> {
        self.package.as_ref()
    }

    /// The tokenizer, if the model has one.
    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.tokenizer.as_ref()
    }

    /// Forget a session's carried state. Returns whether it existed.
    pub fn end_session(&self, id: &str) -> bool {
        self.sessions_lock().remove(id).is_some()
    }

    fn sessions_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionState>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serve `req` without callbacks; see [`Engine::generate_with`].
    ///
    /// # Errors
    /// As [`Engine::generate_with`].
    pub fn generate(&self, req: &GenerateRequest) -> Result<GenerateResult, EngineError> {
        self.generate_with(req, &mut |_| {}, &mut |_, _| Flow::Continue)
    }

    /// Serve `req` through the funnel. `on_admitted(route)` is called exactly once,
    /// after the scheduler admitted the request and before any component runs, and
    /// never for a refused request; `on_token(row, id)` is called for every generated
    /// token and may stop that row.
    ///
    /// # Errors
    /// Before admission: [`EngineError::BadRequest`], [`EngineError::Request`],
    /// [`EngineError::Tokenizer`], then [`EngineError::Refused`] (nothing ran). After
    /// admission: [`EngineError::DecodeCore`], [`EngineError::Interpreter`] (the
    /// reservation is released either way), [`EngineError::Release`].
    pub fn generate_with(
        &self,
        req: &GenerateRequest,
        on_admitted: &mut dyn FnMut(Route),
        on_token: &mut dyn FnMut(usize, u32) -> Flow,
    ) -> Result<GenerateResult, EngineError> {
        // 1. validate
        let mut plan = self.validate(req)?;
        // 2. encode
        let rows = self.encode(&req.prompt)?;
        // 3. count
        let demand = count(&plan, &rows, req);
        // 4. ADMIT
        let admission = self
            .scheduler
            .admit(&demand)
            .map_err(EngineError::Refused)?;
        let usage = self.scheduler.usage();
        // 5. on_admitted
        on_admitted(plan.route);
        // 6. clamp
        let max_new_tokens = admission.max_new_tokens;
        // 7. run
        let capped = admission.budget_cap.is_some();
        let outcome = self.run(&mut plan, req, &rows, max_new_tokens, capped, on_token);
        // 8. complete
        let released = self.scheduler.complete(admission.id);
        let (completions, events) = outcome?;
        released.map_err(EngineError::Release)?;
        Ok(GenerateResult {
            route: plan.route,
            prompt_tokens: rows[0].len(),
            carried_tokens: plan.carried,
            extra_positions: plan.extra_positions(),
            rows: completions,
            reserved_bytes: admission.reserved_bytes,
            budget_cap: admission.budget_cap,
            usage,
            events,
        })
    }

    /// Stages 1–3 of the funnel without admitting: what the request would ask the
    /// scheduler for (a driver uses it to refuse a never-fitting request at once).
    ///
    /// # Errors
    /// The funnel's errors before admission.
    pub fn demand(&self, req: &GenerateRequest) -> Result<Demand, EngineError> {
        let plan = self.validate(req)?;
        let rows = self.encode(&req.prompt)?;
        Ok(count(&plan, &rows, req))
    }

    /// Stage 1: the request's shape, its package declarations, its session and route.
    fn validate(&self, req: &GenerateRequest) -> Result<Plan, EngineError> {
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
                temperature: req.temperature,
                seed: req.seed,
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
    fn encode(&self, prompt: &Prompt) -> Result<Vec<Vec<u32>>, EngineError> {
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

    /// Stage 7: run on the plan's executor; on success, the session keeps its tokens.
    fn run(
        &self,
        plan: &mut Plan,
        req: &GenerateRequest,
        rows: &[Vec<u32>],
        max_new_tokens: usize,
        capped: bool,
        on_token: &mut dyn FnMut(usize, u32) -> Flow,
    ) -> Result<(Vec<Completion>, EventLog), EngineError> {
        let mut events = EventLog::default();
        let mut completions = Vec::with_capacity(rows.len());
        match (plan.route, &self.core, &self.package, &mut plan.bound) {
            (Route::DecodeCore, Some(core), _, _) => {
                let sampler = SamplerConfig {
                    temperature: req.temperature,
                    seed: req.seed,
                    ..SamplerConfig::default()
                };
                let carried = plan
                    .session
                    .as_ref()
                    .map(|(_, s)| s.history.clone())
                    .unwrap_or_default();
                for (r, row) in rows.iter().enumerate() {
                    let mut prompt = carried.clone();
                    prompt.extend_from_slice(row);
                    let (tokens, finish) = self
                        .decode_core(
                            core,
                            &prompt,
                            r,
                            max_new_tokens,
                            capped,
                            sampler,
                            on_token,
                            &mut events,
                        )
                        .map_err(EngineError::DecodeCore)?;
                    if let Some((_, s)) = &mut plan.session {
                        s.history = prompt;
                        s.history.extend_from_slice(&tokens);
                    }
                    completions.push(self.completion(tokens, finish)?);
                }
            }
            (_, _, Some(package), Some(bound)) => {
                bound.clamp_max_new_tokens(max_new_tokens);
                let interpreter = Interpreter::new(package);
                for (r, row) in rows.iter().enumerate() {
                    bound.prompt_tokens = row.clone();
                    let mut scratch = Session::new(None);
                    let session = match &mut plan.session {
                        Some((_, s)) => &mut s.cells,
                        None => &mut scratch,
                    };
                    let out = interpreter
                        .run(bound, session, &mut |t| match on_token(r, t) {
                            Flow::Continue => workflow::Flow::Continue,
                            Flow::Stop => workflow::Flow::Stop,
                        })
                        .map_err(EngineError::Interpreter)?;
                    let finish = match (out.events.loop_exits().last(), out.tokens.last()) {
                        (Some(LoopExit::Condition), Some(&token)) => {
                            Finish::EndOfGeneration { token }
                        }
                        (Some(LoopExit::Callback), _) => Finish::Callback,
                        _ if capped => Finish::BudgetCap,
                        _ => Finish::MaxTokens,
                    };
                    events.events.extend(out.events.events);
                    completions.push(self.completion(out.tokens, finish)?);
                }
            }
            _ => unreachable!(
                "validate routes to the decode core only when the engine has one, else a package"
            ),
        }
        if let Some((id, state)) = plan.session.take() {
            self.sessions_lock().insert(id, state);
        }
        Ok((completions, events))
    }

    fn completion(&self, tokens: Vec<u32>, finish: Finish) -> Result<Completion, EngineError> {
        let text = match &self.tokenizer {
            Some(t) => {
                let shown: Vec<u32> = tokens.iter().copied().filter(|&id| !t.is_eog(id)).collect();
                Some(t.decode(&shown)?)
            }
            None => None,
        };
        Ok(Completion {
            tokens,
            text,
            finish,
        })
    }

    /// The decode core's generation loop for one row: prefill `prompt`, then one token
    /// per step, each step invoking `token_embedding`, `llama_decoder` and `lm_head`
    /// (logged as events), until end of generation, the callback, or `max_new_tokens`.
    #[allow(clippy::too_many_arguments)]
    fn decode_core(
        &self,
        core: &DecodeCore,
        prompt: &[u32],
        row: usize,
        max_new_tokens: usize,
        capped: bool,
        sampler: SamplerConfig,
        on_token: &mut dyn FnMut(usize, u32) -> Flow,
        events: &mut EventLog,
    ) -> Result<(Vec<u32>, Finish), ModelError> {
        let model = &core.model;
        let h = model.config().hidden;
        let mut kv = KvCache::new(model.kv_config(prompt.len() + max_new_tokens, KV_DTYPE))?;
        let seq = kv.create_sequence();
        let mut sampler = Sampler::new(sampler);
        let mut tokens = Vec::new();
        let mut pending = prompt.to_vec();
        let mut log = |step: usize, which: usize| {
            events.events.push(Event::Invoke {
                step: format!("decode_core.row[{row}]"),
                iteration: vec![step],
                component: core.names[which].clone(),
                implementation: [
                    "native:token_embedding",
                    "native:llama_decoder",
                    "native:lm_head",
                ][which]
                    .to_string(),
            });
        };
        let finish = loop {
            if tokens.len() >= max_new_tokens {
                break if capped {
                    Finish::BudgetCap
                } else {
                    Finish::MaxTokens
                };
            }
            let step = tokens.len();
            let mut x = model.embed(&pending)?;
            log(step, 0);
            model.decoder(&mut x, &mut kv, seq)?;
            log(step, 1);
            let logits = model.lm_head(&x[x.len() - h..]);
            log(step, 2);
            let next = sampler.sample(&logits);
            tokens.push(next);
            let flow = on_token(row, next);
            if self.tokenizer.as_ref().is_some_and(|t| t.is_eog(next)) {
                break Finish::EndOfGeneration { token: next };
            }
            if flow == Flow::Stop {
                break Finish::Callback;
            }
            pending = vec![next];
        };
        Ok((tokens, finish))
    }
}
