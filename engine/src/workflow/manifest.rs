//! The package manifest (`package.json`): serde types of schema version 1; unknown fields are rejected.
//!
//! A package declares what a request may bring (request-derived roles and application
//! inputs), its components (native blocks or op graphs) with typed ports, state cells,
//! declared outputs, and the steps the interpreter runs. The JSON Schema committed at
//! `engine/schema/package.schema.json` is generated from these types (see
//! [`crate::workflow::schema`]).

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ops::Op;
use super::value::DType;

/// The manifest schema version this engine reads.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole `package.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Must equal [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Package name, for messages.
    pub name: String,
    /// GGUF weights file, relative to the package directory. Required when a component is
    /// a native block or a graph binds weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    /// Optional `tokenizer.json`, relative to the package directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// What a request may bring.
    #[serde(default)]
    pub inputs: Inputs,
    /// Components, each with a unique name.
    pub components: Vec<Component>,
    /// State cells, each with a unique name (distinct from every input value name).
    #[serde(default)]
    pub cells: Vec<Cell>,
    /// Declared outputs that `emit` steps write.
    pub outputs: Vec<OutputDecl>,
    /// The steps, run in order.
    pub steps: Vec<Step>,
}

/// Inputs of a request: request-derived roles and application tensors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    /// Request-derived roles and the value names they bind.
    #[serde(default)]
    pub request: Vec<RequestInput>,
    /// Tensors the application may bind by name.
    #[serde(default)]
    pub application: Vec<AppInput>,
}

/// A value derived from the request itself.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The prompt's token ids: i64 `[n_prompt]`.
    PromptTokens,
    /// The request's `max_new_tokens` (after any budget clamp): i64 scalar.
    MaxNewTokens,
    /// Sampling temperature: f32 scalar (0 = greedy).
    Temperature,
    /// Sampling seed: i64 scalar.
    Seed,
    /// The package accepts a session id; binds no value (session-scope cells persist
    /// between runs of the same session id).
    SessionId,
}

impl Role {
    /// The role's name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::PromptTokens => "prompt_tokens",
            Role::MaxNewTokens => "max_new_tokens",
            Role::Temperature => "temperature",
            Role::Seed => "seed",
            Role::SessionId => "session_id",
        }
    }

    /// The dtype and rank of the value a role binds; `None` for `session_id`.
    pub fn value_type(self) -> Option<(DType, usize)> {
        match self {
            Role::PromptTokens => Some((DType::I64, 1)),
            Role::MaxNewTokens | Role::Seed => Some((DType::I64, 0)),
            Role::Temperature => Some((DType::F32, 0)),
            Role::SessionId => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request-derived role bound to a value name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestInput {
    /// Which role.
    pub role: Role,
    /// The value name it binds (absent, and only absent, for `session_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// One dimension of a declared shape: a fixed size or a symbol bound at request time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Dim {
    /// A fixed size.
    Fixed(u64),
    /// A symbolic size, e.g. `"n_patches"`; every use within one binding must agree.
    Symbol(String),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Symbol(s) => f.write_str(s),
        }
    }
}

/// A shape as text: `[n_patches, 16]`.
pub fn shape_string(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A tensor the application may bind by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppInput {
    /// Name, also the value name it binds.
    pub name: String,
    /// Element type (not `kv`).
    pub dtype: DType,
    /// Declared shape, outermost first.
    pub shape: Vec<Dim>,
    /// Whether every request must bind it.
    #[serde(default)]
    pub required: bool,
    /// KV positions the input contributes: the product of these dimensions of its shape
    /// (symbols are resolved from the bound tensor); empty means none.
    #[serde(default)]
    pub kv_positions: Vec<Dim>,
}

/// A component: a native block or an op graph, with typed ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Component {
    /// Unique name, used by `invoke` steps and in the event log.
    pub name: String,
    /// Input ports.
    pub inputs: Vec<Port>,
    /// Output ports.
    pub outputs: Vec<Port>,
    /// When present, the application may replace this component with an implementation
    /// of the same contract, written `id@version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaceable: Option<String>,
    /// What runs.
    pub implementation: Implementation,
}

/// A typed port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Port {
    /// Port name.
    pub name: String,
    /// Element type; `kv` for a KV-family port of a `llama_decoder`.
    pub dtype: DType,
    /// Shape, outermost first; must be absent for `kv` ports and present otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<Dim>>,
}

/// How a component runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Implementation {
    /// A block of the native decode core.
    Native(NativeBlock),
    /// A small op graph evaluated on ndarray.
    Graph(Graph),
}

/// A native block bound to GGUF tensors by name prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NativeBlock {
    /// Which block.
    pub block: NativeKind,
    /// GGUF tensor-name prefix the block's weights live under (e.g. `blk.`); at least one
    /// tensor of the weights file must start with it.
    pub tensor_prefix: String,
}

/// The native blocks a package can name; their port signatures are fixed (see
/// [`crate::workflow::validate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NativeKind {
    /// `tokens` i64 `[n]` → `hidden` f32 `[n, hidden]`.
    TokenEmbedding,
    /// `hidden` f32 `[n, hidden]`, `past` kv → `hidden` f32 `[n, hidden]`, `present` kv:
    /// every layer over the next `n` positions; per-layer KV state as values `<family>.NNNN`.
    LlamaDecoder,
    /// `hidden` f32 `[n, hidden]` → `logits` f32 `[n, vocab]` (final norm + output projection).
    LmHead,
}

impl fmt::Display for NativeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NativeKind::TokenEmbedding => "token_embedding",
            NativeKind::LlamaDecoder => "llama_decoder",
            NativeKind::LmHead => "lm_head",
        })
    }
}

/// An op graph: constants, weights bound from the GGUF, nodes in evaluation order, and
/// which node value feeds each output port. Node inputs name input ports, constants,
/// weights or earlier nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// Literal tensors.
    #[serde(default)]
    pub constants: Vec<Constant>,
    /// f32 tensors read from the package's GGUF (F32 or F16 storage), by tensor name.
    #[serde(default)]
    pub weights: Vec<WeightRef>,
    /// Nodes in evaluation order.
    pub nodes: Vec<Node>,
    /// Output port name → the graph value that feeds it.
    pub outputs: BTreeMap<String, String>,
}

/// A literal tensor of a graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Constant {
    /// Graph value name.
    pub name: String,
    /// Element type (not `kv`).
    pub dtype: DType,
    /// Shape (empty for a scalar).
    pub shape: Vec<u64>,
    /// Row-major elements (bool: 0 or 1; i64: integral numbers).
    pub data: Vec<f64>,
}

/// A GGUF tensor a graph reads as an f32 tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightRef {
    /// Graph value name.
    pub name: String,
    /// GGUF tensor name. The value's shape is the GGUF dims reversed (outermost first).
    pub tensor: String,
}

/// One node: an op and the graph value name it defines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// The value this node defines (unique within the graph).
    pub out: String,
    /// The op and its operands.
    pub op: Op,
}

/// Scope of a state cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Initialised at the start of every run, dropped at its end.
    Invocation,
    /// Persists between runs of the same session id (tensors only: no KV between turns).
    Session,
}

/// A cell's special meaning to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellRole {
    /// An i64 `[n]` session cell carrying the conversation's tokens; its length is the
    /// carried prefix the scheduler counts.
    PromptContinuation,
}

/// How a cell starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Init {
    /// A tensor with zero rows (first dimension 0, other fixed dims as declared), or for a
    /// `kv` cell an empty KV state of the package's `llama_decoder` (one value per layer).
    Empty,
    /// A copy of a request or application input value, by value name.
    Input(String),
    /// A literal (row-major elements, shape as declared with only fixed dims).
    Literal(Vec<f64>),
}

/// A state cell: a named value that lives across steps (and, with session scope, runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// Name; for `kv` cells the family name whose layers are `<name>.NNNN`.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape (absent for `kv` cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<Dim>>,
    /// Lifetime.
    pub scope: Scope,
    /// Initial value.
    pub init: Init,
    /// Special meaning, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<CellRole>,
}

/// A declared output that `emit` steps write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputDecl {
    /// Name.
    pub name: String,
    /// Element type (not `kv`).
    pub dtype: DType,
    /// Whether this output is the generated token stream (i64 ids passed to the caller's
    /// token callback as they are emitted). At most one output streams.
    #[serde(default)]
    pub stream_tokens: bool,
}

/// One step of the workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Run a component.
    Invoke(Invoke),
    /// Repeat a body.
    Loop(Loop),
    /// Write a value to an output or a cell.
    Emit(Emit),
}

/// Run a component: bind every input port to a value and every output port to a value name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Invoke {
    /// Component name.
    pub component: String,
    /// Input port → value name (for a `kv` port, the KV family name).
    pub inputs: BTreeMap<String, String>,
    /// Output port → value name it defines (a cell name writes the cell).
    pub outputs: BTreeMap<String, String>,
}

/// Repeat `body` while `continue_if` is true, at most `max_iterations` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Loop {
    /// Cells whose values flow from one iteration to the next and out of the loop; every
    /// other value defined in the body is local to one iteration.
    pub carried: Vec<String>,
    /// Optional value name bound to the 0-based iteration index (i64 scalar) in the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<String>,
    /// The body.
    pub body: Vec<Step>,
    /// A bool value defined by the body (one element); the loop stops when it is false.
    pub continue_if: String,
    /// The bound: the loop never runs more iterations than this.
    pub max_iterations: Bound,
}

/// A loop bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Bound {
    /// A fixed count (1 ..= [`MAX_FIXED_ITERATIONS`]).
    Fixed(u64),
    /// The request's `max_new_tokens` (the role must be declared).
    Role(Role),
}

/// Upper limit for a fixed loop bound.
pub const MAX_FIXED_ITERATIONS: u64 = 1 << 20;

/// How an emit writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EmitMode {
    /// Concatenate along the first axis.
    Append,
    /// Overwrite.
    Replace,
}

/// Write a value to a declared output or a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Emit {
    /// The value written.
    pub value: String,
    /// A declared output or a cell name.
    pub to: String,
    /// Append or replace.
    pub mode: EmitMode,
}
