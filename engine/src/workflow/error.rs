//! Typed errors of loading, validating, binding and running a package; each names the component, port, value, cell or input at fault.

use std::path::PathBuf;

/// A boxed error from a native block or a weights source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Any error of the workflow module.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// A package file could not be read.
    #[error("package file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `package.json` is not valid JSON or does not match the manifest types (unknown
    /// fields are rejected); serde's message gives the line and column.
    #[error("package manifest {path}: {source}")]
    Json {
        /// The manifest path.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// The manifest's `schema_version` is not the one this engine reads.
    #[error(
        "package manifest {path}: schema_version {found} is not supported (this engine reads {supported})"
    )]
    SchemaVersion {
        /// The manifest path.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// [`super::manifest::SCHEMA_VERSION`].
        supported: u32,
    },
    /// Load-time validation failed.
    #[error("package '{package}': {source}")]
    Invalid {
        /// Package name.
        package: String,
        /// What is wrong.
        source: Box<ValidationError>,
    },
    /// The weights file could not be opened or bound.
    #[error("package '{package}' weights {path}: {source}")]
    Weights {
        /// Package name.
        package: String,
        /// Weights path.
        path: PathBuf,
        /// The cause.
        source: BoxError,
    },
    /// A request does not fit the package's declared inputs.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Execution failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A load-time validation error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValidationError {
    /// Two declarations share a name.
    #[error("duplicate {kind} '{name}'")]
    Duplicate {
        /// What kind of name (component, cell, input value, output, port, graph value).
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// A request role is declared wrongly.
    #[error("request role '{role}': {reason}")]
    Role {
        /// The role.
        role: String,
        /// What is wrong.
        reason: String,
    },
    /// An application input is declared wrongly.
    #[error("application input '{input}': {reason}")]
    AppInput {
        /// Input name.
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// A component's port is declared wrongly.
    #[error("component '{component}' port '{port}': {reason}")]
    Port {
        /// Component name.
        component: String,
        /// Port name.
        port: String,
        /// What is wrong.
        reason: String,
    },
    /// A component is declared wrongly (contract, native signature, ...).
    #[error("component '{component}': {reason}")]
    Component {
        /// Component name.
        component: String,
        /// What is wrong.
        reason: String,
    },
    /// A component references a GGUF tensor (or tensor-name prefix) the weights file lacks.
    #[error(
        "component '{component}' references tensor '{tensor}', which the weights file does not contain"
    )]
    UnknownTensor {
        /// Component name.
        component: String,
        /// Tensor name or prefix.
        tensor: String,
    },
    /// A component needs weights but the package has none.
    #[error("component '{component}' needs a weights file, but the package declares none")]
    NoWeights {
        /// Component name.
        component: String,
    },
    /// A graph node is wrong (type, rank, attribute).
    #[error("component '{component}' node '{node}': {reason}")]
    GraphNode {
        /// Component name.
        component: String,
        /// The node's output value name.
        node: String,
        /// What is wrong.
        reason: String,
    },
    /// A graph node or output references a value the graph does not define.
    #[error("component '{component}' node '{node}' references unknown value '{value}'")]
    GraphValue {
        /// Component name.
        component: String,
        /// The node's output name (or `output <port>` for graph outputs).
        node: String,
        /// The missing value.
        value: String,
    },
    /// A state cell is declared wrongly.
    #[error("cell '{cell}': {reason}")]
    Cell {
        /// Cell name.
        cell: String,
        /// What is wrong.
        reason: String,
    },
    /// A step invokes a component the package does not declare.
    #[error("step {step} invokes unknown component '{component}'")]
    UnknownComponent {
        /// Step path, e.g. `steps[2].body[0]`.
        step: String,
        /// The name.
        component: String,
    },
    /// A step binds a port the component does not have.
    #[error("step {step}: component '{component}' has no {direction} port '{port}'")]
    UnknownPort {
        /// Step path.
        step: String,
        /// Component name.
        component: String,
        /// `input` or `output`.
        direction: &'static str,
        /// The port name.
        port: String,
    },
    /// A step leaves an input port unbound.
    #[error("step {step}: component '{component}' input '{port}' is not bound")]
    UnboundPort {
        /// Step path.
        step: String,
        /// Component name.
        component: String,
        /// The port name.
        port: String,
    },
    /// A step binds an input port to a value that is not available at that point.
    #[error(
        "step {step}: component '{component}' input '{port}' references unavailable value '{value}'"
    )]
    UnavailableValue {
        /// Step path.
        step: String,
        /// Component name.
        component: String,
        /// The port name.
        port: String,
        /// The value name.
        value: String,
    },
    /// A value's type or rank does not match the port, cell or output it flows into.
    #[error("step {step}: {target} expects {expected}, but value '{value}' is {found}")]
    TypeMismatch {
        /// Step path.
        step: String,
        /// What receives the value, e.g. `component 'decoder' input 'hidden'`.
        target: String,
        /// The value name.
        value: String,
        /// Expected type.
        expected: String,
        /// Found type.
        found: String,
    },
    /// A step writes a value it may not write.
    #[error("step {step}: {reason}")]
    Write {
        /// Step path.
        step: String,
        /// What is wrong.
        reason: String,
    },
    /// A loop is malformed or unbounded.
    #[error("step {step}: loop {reason}")]
    Loop {
        /// Step path.
        step: String,
        /// What is wrong.
        reason: String,
    },
    /// An emit step names no declared output or cell.
    #[error("step {step}: emit to '{target}', which is neither a declared output nor a cell")]
    UnknownTarget {
        /// Step path.
        step: String,
        /// The target name.
        target: String,
    },
}

/// A request that does not fit the package's declarations (checked before admission).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The request binds tensors the package does not declare.
    #[error("undeclared application input(s): {} (the package declares: {})", .names.join(", "), if .declared.is_empty() { "none".to_string() } else { .declared.join(", ") })]
    UndeclaredInputs {
        /// The undeclared names, sorted.
        names: Vec<String>,
        /// The declared application input names.
        declared: Vec<String>,
    },
    /// A required application input is absent.
    #[error("required application input '{name}' is missing")]
    MissingInput {
        /// Input name.
        name: String,
    },
    /// An application tensor has the wrong element type.
    #[error("application input '{name}': expected dtype {expected}, got {got}")]
    InputDtype {
        /// Input name.
        name: String,
        /// Declared dtype.
        expected: String,
        /// Bound dtype.
        got: String,
    },
    /// An application tensor has the wrong shape.
    #[error("application input '{name}': expected shape {expected}, got {got}")]
    InputShape {
        /// Input name.
        name: String,
        /// Declared shape (symbolic).
        expected: String,
        /// Bound shape.
        got: String,
    },
    /// An override names a component the package does not declare.
    #[error("override of unknown component '{component}'")]
    UnknownComponent {
        /// The name.
        component: String,
    },
    /// An override names a component the package does not let the application replace.
    #[error("component '{component}' is not replaceable by the application")]
    NotReplaceable {
        /// Component name.
        component: String,
    },
    /// A replacement implements another contract.
    #[error(
        "replacement for component '{component}' implements contract '{got}', but the package requires '{expected}'"
    )]
    ContractMismatch {
        /// Component name.
        component: String,
        /// The contract the package declares.
        expected: String,
        /// The replacement's contract.
        got: String,
    },
    /// A replacement graph does not validate against the component's ports.
    #[error("replacement for component '{component}': {source}")]
    InvalidReplacement {
        /// Component name.
        component: String,
        /// What is wrong.
        source: Box<ValidationError>,
    },
    /// A session id was given to a package that declares no `session_id` role.
    #[error("package '{package}' does not accept a session id (it declares no session_id input)")]
    SessionUnsupported {
        /// Package name.
        package: String,
    },
    /// A count overflowed.
    #[error("request: {what} overflows")]
    Overflow {
        /// What overflowed.
        what: String,
    },
}

/// An error while running the steps.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An input port's value is not available at run time.
    #[error("component '{component}' input '{port}' references unavailable value '{value}'")]
    UnavailableValue {
        /// Component name.
        component: String,
        /// Port name.
        port: String,
        /// Value name.
        value: String,
    },
    /// A value does not match the port's declared type or shape.
    #[error(transparent)]
    PortValue(Box<PortMismatch>),
    /// A KV-state value no longer matches its state (it was consumed by a later decoder run).
    #[error(
        "component '{component}' input '{port}' references stale KV value '{value}' ({value_positions} positions; the state now holds {state_positions})"
    )]
    StaleKv {
        /// Component name.
        component: String,
        /// Port name.
        port: String,
        /// Value name.
        value: String,
        /// Positions recorded in the value.
        value_positions: usize,
        /// Positions the state holds.
        state_positions: usize,
    },
    /// A native block failed.
    #[error("component '{component}' ({block}): {source}")]
    Native {
        /// Component name.
        component: String,
        /// Block kind.
        block: String,
        /// The cause.
        source: BoxError,
    },
    /// A graph op failed.
    #[error("component '{component}' node '{node}' ({op}): {reason}")]
    Op {
        /// Component name.
        component: String,
        /// Node output name.
        node: String,
        /// Op kind.
        op: &'static str,
        /// What failed.
        reason: String,
    },
    /// A value or cell used by a step is missing or malformed at run time.
    #[error("{context}: {reason}")]
    Value {
        /// Where (step path, cell, output).
        context: String,
        /// What is wrong.
        reason: String,
    },
    /// The package has native components but no native backend was bound.
    #[error("component '{component}' is a native block, but the package has no model bound")]
    NoNative {
        /// Component name.
        component: String,
    },
    /// The session passed to the run is not the request's session.
    #[error("request session id {request:?} does not match the session given ({session:?})")]
    SessionMismatch {
        /// The request's session id.
        request: Option<String>,
        /// The session's id.
        session: Option<String>,
    },
}

/// A value that does not match a port's declared type or shape at run time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "component '{component}' {direction} '{port}' (value '{value}'): expected {expected}, got {got}"
)]
pub struct PortMismatch {
    /// Component name.
    pub component: String,
    /// `input` or `output`.
    pub direction: &'static str,
    /// Port name.
    pub port: String,
    /// Value name.
    pub value: String,
    /// Declared type and shape.
    pub expected: String,
    /// Actual type and shape.
    pub got: String,
}
