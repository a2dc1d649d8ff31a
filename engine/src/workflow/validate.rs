//! Load-time validation: every port, value, cell, tensor and component reference resolves, types and ranks agree, loops are bounded.
//!
//! Validation walks the steps symbolically, keeping the static type (dtype and rank) of
//! every value name available at each point. Values defined inside a loop body are local
//! to one iteration; only cells listed in the loop's `carried` may be written there.

use std::collections::{BTreeMap, BTreeSet};

use super::error::ValidationError;
use super::manifest::{
    Bound, Cell, CellRole, Component, Dim, Emit, EmitMode, Graph, Implementation, Init, Invoke,
    Loop, MAX_FIXED_ITERATIONS, Manifest, NativeKind, Port, Role, Scope, Step, shape_string,
};
use super::ops::TypeInfo;
use super::value::DType;

/// The tensors of a weights file: name → shape, outermost dimension first (GGUF dims
/// reversed).
pub type WeightIndex = BTreeMap<String, Vec<usize>>;

/// A port's `(name, dtype, rank)`.
pub type PortSig = (&'static str, DType, usize);

/// The fixed port signature of a native block: `(name, dtype, rank)` for inputs and
/// outputs. Shapes: `token_embedding` `tokens [n]` → `hidden [n, hidden]`;
/// `llama_decoder` `hidden [n, hidden]`, `past` (kv) → `hidden [n, hidden]`, `present`
/// (kv); `lm_head` `hidden [n, hidden]` → `logits [n, vocab]`.
pub fn native_signature(kind: NativeKind) -> (&'static [PortSig], &'static [PortSig]) {
    match kind {
        NativeKind::TokenEmbedding => (&[("tokens", DType::I64, 1)], &[("hidden", DType::F32, 2)]),
        NativeKind::LlamaDecoder => (
            &[("hidden", DType::F32, 2), ("past", DType::Kv, 0)],
            &[("hidden", DType::F32, 2), ("present", DType::Kv, 0)],
        ),
        NativeKind::LmHead => (&[("hidden", DType::F32, 2)], &[("logits", DType::F32, 2)]),
    }
}

/// The static type of a port.
pub fn port_type(p: &Port) -> TypeInfo {
    TypeInfo {
        dtype: p.dtype,
        rank: p.shape.as_ref().map_or(0, Vec::len),
    }
}

fn describe(t: TypeInfo) -> String {
    if t.dtype == DType::Kv {
        "kv".into()
    } else {
        t.to_string()
    }
}

/// Validate a whole manifest against the tensors of its weights file (`None` when the
/// package has no weights file).
///
/// Errors: the first problem found, naming the component, port, value, cell or step.
pub fn validate(m: &Manifest, weights: Option<&WeightIndex>) -> Result<(), ValidationError> {
    let mut v = Validator {
        components: BTreeMap::new(),
        cells: BTreeMap::new(),
        outputs: BTreeMap::new(),
        inputs: BTreeSet::new(),
        roles: BTreeSet::new(),
    };
    let mut env: BTreeMap<String, TypeInfo> = BTreeMap::new();
    v.request_roles(m, &mut env)?;
    v.application_inputs(m, &mut env)?;
    let decoders = v.components(m, weights)?;
    v.outputs(m)?;
    v.cells(m, &mut env, decoders.first())?;
    let mut loops = Vec::new();
    v.walk(&m.steps, "steps", &mut env, &mut loops)
}

fn check_name(kind: &'static str, name: &str) -> Result<(), ValidationError> {
    if name.is_empty() {
        return Err(ValidationError::Duplicate {
            kind,
            name: "<empty name>".into(),
        });
    }
    Ok(())
}

fn validate_component(c: &Component, weights: Option<&WeightIndex>) -> Result<(), ValidationError> {
    for (dir, ports) in [("input", &c.inputs), ("output", &c.outputs)] {
        let mut seen = BTreeSet::new();
        for p in ports.iter() {
            if !seen.insert(p.name.as_str()) {
                return Err(ValidationError::Duplicate {
                    kind: if dir == "input" {
                        "input port"
                    } else {
                        "output port"
                    },
                    name: format!("{}.{}", c.name, p.name),
                });
            }
            match (p.dtype, &p.shape) {
                (DType::Kv, Some(_)) => {
                    return Err(ValidationError::Port {
                        component: c.name.clone(),
                        port: p.name.clone(),
                        reason: "a kv port has no shape".into(),
                    });
                }
                (DType::Kv, None) => {}
                (_, None) => {
                    return Err(ValidationError::Port {
                        component: c.name.clone(),
                        port: p.name.clone(),
                        reason: "a tensor port must declare its shape".into(),
                    });
                }
                (_, Some(_)) => {}
            }
        }
    }
    if let Some(contract) = &c.replaceable {
        validate_contract(contract).map_err(|reason| ValidationError::Component {
            component: c.name.clone(),
            reason,
        })?;
    }
    match &c.implementation {
        Implementation::Native(n) => {
            let (ins, outs) = native_signature(n.block);
            for (dir, want, got) in [("input", ins, &c.inputs), ("output", outs, &c.outputs)] {
                let got_sig: Vec<(&str, DType, usize)> = got
                    .iter()
                    .map(|p| (p.name.as_str(), p.dtype, port_type(p).rank))
                    .collect();
                if got_sig != want {
                    let fmt = |s: &[(&str, DType, usize)]| -> String {
                        s.iter()
                            .map(|(n, d, r)| {
                                if *d == DType::Kv {
                                    format!("{n}: kv")
                                } else {
                                    format!("{n}: {d} rank {r}")
                                }
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    return Err(ValidationError::Component {
                        component: c.name.clone(),
                        reason: format!(
                            "{} block {dir} ports must be ({}), found ({})",
                            n.block,
                            fmt(want),
                            fmt(&got_sig)
                        ),
                    });
                }
            }
            if c.replaceable.is_some() {
                return Err(ValidationError::Component {
                    component: c.name.clone(),
                    reason: "a native block cannot be replaceable (replacements are op graphs)"
                        .into(),
                });
            }
            let Some(w) = weights else {
                return Err(ValidationError::NoWeights {
                    component: c.name.clone(),
                });
            };
            if n.tensor_prefix.is_empty() || !w.keys().any(|k| k.starts_with(&n.tensor_prefix)) {
                return Err(ValidationError::UnknownTensor {
                    component: c.name.clone(),
                    tensor: format!("{}*", n.tensor_prefix),
                });
            }
            Ok(())
        }
        Implementation::Graph(g) => validate_graph(c, g, weights),
    }
}

/// Check a contract string `id@version` (both parts non-empty, no whitespace).
pub fn validate_contract(contract: &str) -> Result<(), String> {
    match contract.split_once('@') {
        Some((id, ver))
            if !id.is_empty()
                && !ver.is_empty()
                && !ver.contains('@')
                && !contract.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(format!("contract '{contract}' must be written id@version")),
    }
}

/// Validate an op graph against its component's ports: every operand resolves, ops type
/// check, every output port is fed by a value of its dtype and rank.
pub fn validate_graph(
    c: &Component,
    g: &Graph,
    weights: Option<&WeightIndex>,
) -> Result<(), ValidationError> {
    let mut types: BTreeMap<&str, TypeInfo> = BTreeMap::new();
    let dup = |name: &str| ValidationError::Duplicate {
        kind: "graph value",
        name: format!("{}.{}", c.name, name),
    };
    for p in &c.inputs {
        if p.dtype == DType::Kv {
            return Err(ValidationError::Port {
                component: c.name.clone(),
                port: p.name.clone(),
                reason: "graph components have no kv ports".into(),
            });
        }
        types.insert(p.name.as_str(), port_type(p));
    }
    for k in &g.constants {
        if k.dtype == DType::Kv {
            return Err(ValidationError::GraphNode {
                component: c.name.clone(),
                node: k.name.clone(),
                reason: "a constant cannot have dtype kv".into(),
            });
        }
        let n: Option<u64> = k.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        if n != Some(k.data.len() as u64) {
            return Err(ValidationError::GraphNode {
                component: c.name.clone(),
                node: k.name.clone(),
                reason: format!(
                    "constant has {} elements but shape {:?}",
                    k.data.len(),
                    k.shape
                ),
            });
        }
        if k.dtype != DType::F32 && k.data.iter().any(|x| x.fract() != 0.0 || !x.is_finite()) {
            return Err(ValidationError::GraphNode {
                component: c.name.clone(),
                node: k.name.clone(),
                reason: format!("{} constant has a non-integral element", k.dtype),
            });
        }
        let t = TypeInfo {
            dtype: k.dtype,
            rank: k.shape.len(),
        };
        if types.insert(k.name.as_str(), t).is_some() {
            return Err(dup(&k.name));
        }
    }
    for w in &g.weights {
        let Some(index) = weights else {
            return Err(ValidationError::NoWeights {
                component: c.name.clone(),
            });
        };
        let Some(shape) = index.get(&w.tensor) else {
            return Err(ValidationError::UnknownTensor {
                component: c.name.clone(),
                tensor: w.tensor.clone(),
            });
        };
        let t = TypeInfo {
            dtype: DType::F32,
            rank: shape.len(),
        };
        if types.insert(w.name.as_str(), t).is_some() {
            return Err(dup(&w.name));
        }
    }
    for node in &g.nodes {
        let mut ts = Vec::new();
        for o in node.op.operands() {
            let Some(t) = types.get(o) else {
                return Err(ValidationError::GraphValue {
                    component: c.name.clone(),
                    node: node.out.clone(),
                    value: o.to_string(),
                });
            };
            ts.push(*t);
        }
        let t = node
            .op
            .infer(&ts)
            .map_err(|reason| ValidationError::GraphNode {
                component: c.name.clone(),
                node: node.out.clone(),
                reason: format!("{}: {reason}", node.op.kind()),
            })?;
        if types.insert(node.out.as_str(), t).is_some() {
            return Err(dup(&node.out));
        }
    }
    for p in &c.outputs {
        let Some(src) = g.outputs.get(&p.name) else {
            return Err(ValidationError::Port {
                component: c.name.clone(),
                port: p.name.clone(),
                reason: "output port is not fed by any graph value".into(),
            });
        };
        let Some(t) = types.get(src.as_str()) else {
            return Err(ValidationError::GraphValue {
                component: c.name.clone(),
                node: format!("output {}", p.name),
                value: src.clone(),
            });
        };
        if *t != port_type(p) {
            return Err(ValidationError::Port {
                component: c.name.clone(),
                port: p.name.clone(),
                reason: format!(
                    "declared {}, but graph value '{src}' is {}",
                    describe(port_type(p)),
                    describe(*t)
                ),
            });
        }
    }
    if let Some(extra) = g
        .outputs
        .keys()
        .find(|k| !c.outputs.iter().any(|p| &p.name == *k))
    {
        return Err(ValidationError::Port {
            component: c.name.clone(),
            port: extra.clone(),
            reason: "graph output names no declared output port".into(),
        });
    }
    Ok(())
}

struct Validator<'a> {
    components: BTreeMap<&'a str, &'a Component>,
    cells: BTreeMap<&'a str, &'a Cell>,
    outputs: BTreeMap<&'a str, DType>,
    inputs: BTreeSet<String>,
    roles: BTreeSet<Role>,
}

impl<'a> Validator<'a> {
    /// The request roles: each declared once, binding a value exactly when its role does
    /// (the value's type then enters `env`).
    fn request_roles(
        &mut self,
        m: &Manifest,
        env: &mut BTreeMap<String, TypeInfo>,
    ) -> Result<(), ValidationError> {
        for r in &m.inputs.request {
            if !self.roles.insert(r.role) {
                return Err(ValidationError::Duplicate {
                    kind: "request role",
                    name: r.role.to_string(),
                });
            }
            match (r.role.value_type(), &r.value) {
                (None, None) => {}
                (None, Some(_)) => {
                    return Err(ValidationError::Role {
                        role: r.role.to_string(),
                        reason: "binds no value; remove 'value'".into(),
                    });
                }
                (Some(_), None) => {
                    return Err(ValidationError::Role {
                        role: r.role.to_string(),
                        reason: "must name the value it binds".into(),
                    });
                }
                (Some((dtype, rank)), Some(name)) => {
                    check_name("input value", name)?;
                    if env.insert(name.clone(), TypeInfo { dtype, rank }).is_some() {
                        return Err(ValidationError::Duplicate {
                            kind: "input value",
                            name: name.clone(),
                        });
                    }
                    self.inputs.insert(name.clone());
                }
            }
        }
        Ok(())
    }

    /// The application inputs: named, not KV, their `kv_positions` dimensions among their
    /// shape's, each value declared once (its type then enters `env`).
    fn application_inputs(
        &mut self,
        m: &Manifest,
        env: &mut BTreeMap<String, TypeInfo>,
    ) -> Result<(), ValidationError> {
        for a in &m.inputs.application {
            check_name("input value", &a.name)?;
            if a.dtype == DType::Kv {
                return Err(ValidationError::AppInput {
                    input: a.name.clone(),
                    reason: "dtype kv is not allowed for an application input".into(),
                });
            }
            let symbols: BTreeSet<&str> = a
                .shape
                .iter()
                .filter_map(|d| match d {
                    Dim::Symbol(s) => Some(s.as_str()),
                    Dim::Fixed(_) => None,
                })
                .collect();
            for d in &a.kv_positions {
                if let Dim::Symbol(s) = d
                    && !symbols.contains(s.as_str())
                {
                    return Err(ValidationError::AppInput {
                        input: a.name.clone(),
                        reason: format!(
                            "kv_positions names dimension '{s}', which its shape {} does not have",
                            shape_string(&a.shape)
                        ),
                    });
                }
            }
            let t = TypeInfo {
                dtype: a.dtype,
                rank: a.shape.len(),
            };
            if env.insert(a.name.clone(), t).is_some() {
                return Err(ValidationError::Duplicate {
                    kind: "input value",
                    name: a.name.clone(),
                });
            }
            self.inputs.insert(a.name.clone());
        }
        Ok(())
    }

    /// The components: named once each, each valid against the weights, at most one
    /// `llama_decoder` block. Returns the decoders' names.
    fn components(
        &mut self,
        m: &'a Manifest,
        weights: Option<&WeightIndex>,
    ) -> Result<Vec<String>, ValidationError> {
        let mut decoders = Vec::new();
        for c in &m.components {
            check_name("component", &c.name)?;
            if self.components.insert(c.name.as_str(), c).is_some() {
                return Err(ValidationError::Duplicate {
                    kind: "component",
                    name: c.name.clone(),
                });
            }
            validate_component(c, weights)?;
            if let Implementation::Native(n) = &c.implementation
                && n.block == NativeKind::LlamaDecoder
            {
                decoders.push(c.name.clone());
            }
        }
        if decoders.len() > 1 {
            return Err(ValidationError::Component {
                component: decoders[1].clone(),
                reason: format!(
                    "a package has at most one llama_decoder block (also '{}'): its KV geometry is the package's",
                    decoders[0]
                ),
            });
        }
        Ok(decoders)
    }

    /// The outputs: named once each, not KV, at most one token stream (of `i64`).
    fn outputs(&mut self, m: &'a Manifest) -> Result<(), ValidationError> {
        let mut streams = 0;
        for o in &m.outputs {
            check_name("output", &o.name)?;
            if o.dtype == DType::Kv {
                return Err(ValidationError::Write {
                    step: "outputs".into(),
                    reason: format!("output '{}' cannot have dtype kv", o.name),
                });
            }
            if o.stream_tokens {
                streams += 1;
                if o.dtype != DType::I64 {
                    return Err(ValidationError::Write {
                        step: "outputs".into(),
                        reason: format!("token-stream output '{}' must be i64", o.name),
                    });
                }
            }
            if self.outputs.insert(o.name.as_str(), o.dtype).is_some() {
                return Err(ValidationError::Duplicate {
                    kind: "output",
                    name: o.name.clone(),
                });
            }
        }
        if streams > 1 {
            return Err(ValidationError::Write {
                step: "outputs".into(),
                reason: "at most one output may stream tokens".into(),
            });
        }
        Ok(())
    }

    /// The cells: named once each and apart from the inputs and outputs, each valid (its
    /// initial value against `env`, a KV cell against the `decoder`), at most one prompt
    /// continuation (its type then enters `env`).
    fn cells(
        &mut self,
        m: &'a Manifest,
        env: &mut BTreeMap<String, TypeInfo>,
        decoder: Option<&String>,
    ) -> Result<(), ValidationError> {
        let mut continuation = None;
        for c in &m.cells {
            check_name("cell", &c.name)?;
            if env.contains_key(&c.name) || self.outputs.contains_key(c.name.as_str()) {
                return Err(ValidationError::Duplicate {
                    kind: "cell (also an input value or output)",
                    name: c.name.clone(),
                });
            }
            let t = self.validate_cell(c, env, decoder)?;
            if c.role == Some(CellRole::PromptContinuation)
                && let Some(prev) = continuation.replace(c.name.clone())
            {
                {
                    return Err(ValidationError::Cell {
                        cell: c.name.clone(),
                        reason: format!("a second prompt_continuation cell (also '{prev}')"),
                    });
                }
            }
            if self.cells.insert(c.name.as_str(), c).is_some() {
                return Err(ValidationError::Duplicate {
                    kind: "cell",
                    name: c.name.clone(),
                });
            }
            env.insert(c.name.clone(), t);
        }
        Ok(())
    }

    fn validate_cell(
        &self,
        c: &Cell,
        env: &BTreeMap<String, TypeInfo>,
        decoder: Option<&String>,
    ) -> Result<TypeInfo, ValidationError> {
        let err = |reason: String| ValidationError::Cell {
            cell: c.name.clone(),
            reason,
        };
        if c.dtype == DType::Kv {
            if c.shape.is_some() {
                return Err(err("a kv cell has no shape".into()));
            }
            if c.scope != Scope::Invocation {
                return Err(err(
                    "a kv cell must have invocation scope (no KV is held between turns)".into(),
                ));
            }
            if c.init != Init::Empty {
                return Err(err("a kv cell's init must be 'empty'".into()));
            }
            if decoder.is_none() {
                return Err(err("a kv cell needs a llama_decoder component".into()));
            }
            if c.role.is_some() {
                return Err(err("a kv cell cannot have a role".into()));
            }
            return Ok(TypeInfo {
                dtype: DType::Kv,
                rank: 0,
            });
        }
        let Some(shape) = &c.shape else {
            return Err(err("a tensor cell must declare its shape".into()));
        };
        let t = TypeInfo {
            dtype: c.dtype,
            rank: shape.len(),
        };
        match &c.init {
            Init::Empty => {
                if shape.is_empty() {
                    return Err(err("init 'empty' needs a rank of at least 1".into()));
                }
                if shape[1..].iter().any(|d| matches!(d, Dim::Symbol(_))) {
                    return Err(err(format!(
                        "init 'empty' needs fixed dimensions after the first, shape is {}",
                        shape_string(shape)
                    )));
                }
            }
            Init::Input(name) => match env.get(name) {
                None => {
                    return Err(err(format!("init references unknown input value '{name}'")));
                }
                Some(it) if *it != t => {
                    return Err(err(format!(
                        "declared {t}, but init input '{name}' is {it}"
                    )));
                }
                Some(_) => {}
            },
            Init::Literal(data) => {
                let mut n = 1u64;
                for d in shape {
                    match d {
                        Dim::Fixed(k) => n = n.saturating_mul(*k),
                        Dim::Symbol(s) => {
                            return Err(err(format!(
                                "a literal init needs fixed dimensions, '{s}' is symbolic"
                            )));
                        }
                    }
                }
                if n != data.len() as u64 {
                    return Err(err(format!(
                        "literal has {} elements, shape {} holds {n}",
                        data.len(),
                        shape_string(shape)
                    )));
                }
            }
        }
        if c.role == Some(CellRole::PromptContinuation) {
            if c.scope != Scope::Session || c.dtype != DType::I64 || shape.len() != 1 {
                return Err(err(
                    "a prompt_continuation cell must be a session-scope i64 rank-1 cell".into(),
                ));
            }
            if !self.roles.contains(&Role::SessionId) {
                return Err(err(
                    "a prompt_continuation cell needs the session_id request role".into(),
                ));
            }
        }
        Ok(t)
    }

    /// Check that a step may write `name` (a cell, or a fresh/local value) with type `t`.
    fn check_write(
        &self,
        step: &str,
        name: &str,
        t: TypeInfo,
        env: &BTreeMap<String, TypeInfo>,
        loops: &[LoopScope],
        what: &str,
    ) -> Result<(), ValidationError> {
        if name.is_empty() {
            return Err(ValidationError::Write {
                step: step.into(),
                reason: format!("{what} writes an empty value name"),
            });
        }
        if self.inputs.contains(name) {
            return Err(ValidationError::Write {
                step: step.into(),
                reason: format!("{what} writes input value '{name}', which is read-only"),
            });
        }
        if let Some(cell) = self.cells.get(name) {
            let ct = env[name];
            if ct != t {
                return Err(ValidationError::TypeMismatch {
                    step: step.into(),
                    target: format!("cell '{}'", cell.name),
                    value: name.into(),
                    expected: describe(ct),
                    found: format!("{} (written by {what})", describe(t)),
                });
            }
            if let Some(l) = loops.iter().find(|l| !l.carried.contains(name)) {
                return Err(ValidationError::Write {
                    step: step.into(),
                    reason: format!(
                        "{what} writes cell '{name}' inside loop {} that does not carry it",
                        l.step
                    ),
                });
            }
            return Ok(());
        }
        if t.dtype == DType::Kv {
            return Err(ValidationError::Write {
                step: step.into(),
                reason: format!("{what} writes kv state to '{name}', which is not a kv cell"),
            });
        }
        if let Some(l) = loops.last()
            && l.outer.contains(name)
        {
            return Err(ValidationError::Write {
                step: step.into(),
                reason: format!(
                    "{what} redefines '{name}', defined before loop {}; make it a carried cell",
                    l.step
                ),
            });
        }
        Ok(())
    }

    /// Walk `steps` (at `path`, e.g. `steps[2].body`) in order, keeping in `env` the type of
    /// every value available after each step; `loops` are the enclosing loops.
    fn walk(
        &self,
        steps: &[Step],
        path: &str,
        env: &mut BTreeMap<String, TypeInfo>,
        loops: &mut Vec<LoopScope>,
    ) -> Result<(), ValidationError> {
        for (i, s) in steps.iter().enumerate() {
            let here = format!("{path}[{i}]");
            match s {
                Step::Invoke(inv) => self.walk_invoke(inv, here, env, loops)?,
                Step::Loop(l) => self.walk_loop(l, here, env, loops)?,
                Step::Emit(e) => self.walk_emit(e, here, env, loops)?,
            }
        }
        Ok(())
    }

    /// An invoke step: its component exists, its ports are the component's, every input is
    /// bound to an available value of the port's type, and every output is written once.
    fn walk_invoke(
        &self,
        inv: &Invoke,
        here: String,
        env: &mut BTreeMap<String, TypeInfo>,
        loops: &[LoopScope],
    ) -> Result<(), ValidationError> {
        let Some(c) = self.components.get(inv.component.as_str()) else {
            return Err(ValidationError::UnknownComponent {
                step: here,
                component: inv.component.clone(),
            });
        };
        for p in inv.inputs.keys() {
            if !c.inputs.iter().any(|q| &q.name == p) {
                return Err(ValidationError::UnknownPort {
                    step: here,
                    component: c.name.clone(),
                    direction: "input",
                    port: p.clone(),
                });
            }
        }
        for p in inv.outputs.keys() {
            if !c.outputs.iter().any(|q| &q.name == p) {
                return Err(ValidationError::UnknownPort {
                    step: here,
                    component: c.name.clone(),
                    direction: "output",
                    port: p.clone(),
                });
            }
        }
        for p in &c.inputs {
            let Some(val) = inv.inputs.get(&p.name) else {
                return Err(ValidationError::UnboundPort {
                    step: here,
                    component: c.name.clone(),
                    port: p.name.clone(),
                });
            };
            let Some(t) = env.get(val) else {
                return Err(ValidationError::UnavailableValue {
                    step: here,
                    component: c.name.clone(),
                    port: p.name.clone(),
                    value: val.clone(),
                });
            };
            if *t != port_type(p) {
                return Err(ValidationError::TypeMismatch {
                    step: here,
                    target: format!("component '{}' input '{}'", c.name, p.name),
                    value: val.clone(),
                    expected: describe(port_type(p)),
                    found: describe(*t),
                });
            }
        }
        let mut written = BTreeSet::new();
        for p in &c.outputs {
            let Some(val) = inv.outputs.get(&p.name) else {
                continue;
            };
            if !written.insert(val.as_str()) {
                return Err(ValidationError::Write {
                    step: here,
                    reason: format!(
                        "component '{}' writes value '{val}' from two output ports",
                        c.name
                    ),
                });
            }
            let what = format!("component '{}' output '{}'", c.name, p.name);
            self.check_write(&here, val, port_type(p), env, loops, &what)?;
            env.insert(val.clone(), port_type(p));
        }
        Ok(())
    }

    /// A loop step: its carried cells are declared, it is bounded, its counter shadows
    /// nothing, its body is valid, and `continue_if` names a boolean available at the end of
    /// the body.
    fn walk_loop(
        &self,
        l: &Loop,
        here: String,
        env: &BTreeMap<String, TypeInfo>,
        loops: &mut Vec<LoopScope>,
    ) -> Result<(), ValidationError> {
        let mut carried = BTreeSet::new();
        for c in &l.carried {
            if !self.cells.contains_key(c.as_str()) {
                return Err(ValidationError::Loop {
                    step: here,
                    reason: format!("carries '{c}', which is not a declared cell"),
                });
            }
            carried.insert(c.clone());
        }
        match &l.max_iterations {
            Bound::Fixed(n) if *n == 0 || *n > MAX_FIXED_ITERATIONS => {
                return Err(ValidationError::Loop {
                    step: here,
                    reason: format!("max_iterations {n} is outside 1..={MAX_FIXED_ITERATIONS}"),
                });
            }
            Bound::Fixed(_) => {}
            Bound::Role(Role::MaxNewTokens) => {
                if !self.roles.contains(&Role::MaxNewTokens) {
                    return Err(ValidationError::Loop {
                        step: here,
                        reason: "is bounded by max_new_tokens, which the package does not declare as a request input".into(),
                    });
                }
            }
            Bound::Role(r) => {
                return Err(ValidationError::Loop {
                    step: here,
                    reason: format!(
                        "cannot be bounded by role '{r}' (only max_new_tokens or a fixed count)"
                    ),
                });
            }
        }
        let mut body_env = env.clone();
        if let Some(cn) = &l.counter {
            if env.contains_key(cn) || self.outputs.contains_key(cn.as_str()) {
                return Err(ValidationError::Loop {
                    step: here,
                    reason: format!("counter '{cn}' shadows an existing name"),
                });
            }
            body_env.insert(
                cn.clone(),
                TypeInfo {
                    dtype: DType::I64,
                    rank: 0,
                },
            );
        }
        loops.push(LoopScope {
            step: here.clone(),
            carried,
            outer: body_env.keys().cloned().collect(),
        });
        self.walk(&l.body, &format!("{here}.body"), &mut body_env, loops)?;
        loops.pop();
        match body_env.get(&l.continue_if) {
            None => {
                return Err(ValidationError::Loop {
                    step: here,
                    reason: format!(
                        "continue_if references value '{}', which is not available at the end of the body",
                        l.continue_if
                    ),
                });
            }
            Some(t) if t.dtype != DType::Bool || t.rank > 1 => {
                return Err(ValidationError::Loop {
                    step: here,
                    reason: format!(
                        "continue_if value '{}' must be bool of rank 0 or 1, found {t}",
                        l.continue_if
                    ),
                });
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// An emit step: its value is available and not KV, an append emits a value of rank at
    /// least 1, and its target is a declared output of the value's dtype or a cell it may
    /// write.
    fn walk_emit(
        &self,
        e: &Emit,
        here: String,
        env: &BTreeMap<String, TypeInfo>,
        loops: &[LoopScope],
    ) -> Result<(), ValidationError> {
        let Some(t) = env.get(&e.value).copied() else {
            return Err(ValidationError::Write {
                step: here,
                reason: format!("emit references unavailable value '{}'", e.value),
            });
        };
        if t.dtype == DType::Kv {
            return Err(ValidationError::Write {
                step: here,
                reason: format!("emit of kv value '{}'", e.value),
            });
        }
        if e.mode == EmitMode::Append && t.rank == 0 {
            return Err(ValidationError::Write {
                step: here,
                reason: format!(
                    "append needs a value of rank at least 1, '{}' is a scalar",
                    e.value
                ),
            });
        }
        if let Some(dt) = self.outputs.get(e.to.as_str()) {
            if *dt != t.dtype {
                return Err(ValidationError::TypeMismatch {
                    step: here,
                    target: format!("output '{}'", e.to),
                    value: e.value.clone(),
                    expected: dt.to_string(),
                    found: describe(t),
                });
            }
        } else if self.cells.contains_key(e.to.as_str()) {
            self.check_write(&here, &e.to, t, env, loops, "emit")?;
        } else {
            return Err(ValidationError::UnknownTarget {
                step: here,
                target: e.to.clone(),
            });
        }
        Ok(())
    }
}

struct LoopScope {
    step: String,
    carried: BTreeSet<String>,
    /// Names available when the body starts; non-cells among them may not be redefined.
    outer: BTreeSet<String>,
}
