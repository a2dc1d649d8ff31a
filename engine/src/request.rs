//! What a request is and what becomes of it: the prompt, the generation request, the route that ran it, its result, and the typed errors before and after admission.

// EngineError carries the typed errors of the model, package and interpreter by value;
// boxing them is a follow-up (see the report).
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::batch::Finish;
use crate::constrain::Grammar;
use crate::kernels::sample::SamplerConfig;
use crate::model::ModelError;
use crate::scheduler::{AdmissionError, BudgetCap, ConfigError, ReleaseError, Usage};
use crate::tokenizer::TokenizerError;
use crate::workflow::{EventLog, Replacement, RequestError, RunError, Tensor, WorkflowError};

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
        /// The queue's bound (the service options' `max_queue`).
        limit: usize,
        /// Whole seconds (at least 1) until the scheduler would admit it if the batch
        /// keeps its pace.
        retry_after_secs: u64,
    },
    /// The engine is draining (`Engine::drain`): queued and new requests are refused.
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
