//! The step machine: binds request values and cells, runs invoke/loop/emit steps, streams emitted tokens and records the event log.

use std::collections::{BTreeMap, HashMap, HashSet};

use ndarray::{ArrayD, Axis, IxDyn};

use super::Package;
use super::error::{PortMismatch, RunError};
use super::events::{Event, EventLog, LoopExit};
use super::manifest::{
    Bound, Cell, CellRole, Component, Dim, Emit, EmitMode, Implementation, Init, Invoke, Loop,
    NativeKind, Port, Role, Scope, Step, shape_string,
};
use super::native::KvState;
use super::request::BoundRequest;
use super::value::{DType, KvHandle, Tensor, Value, kv_layer_name};
use crate::flow::Flow;

/// The state a conversation keeps between runs: its session-scope cells (tensors only;
/// no KV is held between turns).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    id: Option<String>,
    cells: BTreeMap<String, Tensor>,
}

impl Session {
    /// A session with this id (`None`: a one-off run whose session cells are discarded).
    pub fn new(id: Option<String>) -> Session {
        Session {
            id,
            cells: BTreeMap::new(),
        }
    }

    /// The session id.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// A session cell's current value (absent before the first run).
    pub fn cell(&self, name: &str) -> Option<&Tensor> {
        self.cells.get(name)
    }
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct Output {
    /// Declared outputs that were emitted, by name.
    pub outputs: BTreeMap<String, Tensor>,
    /// Tokens emitted to the token-stream output, in order.
    pub tokens: Vec<u32>,
    /// What ran.
    pub events: EventLog,
}

/// Runs a package's steps for bound requests.
#[derive(Debug, Clone, Copy)]
pub struct Interpreter<'p> {
    package: &'p Package,
}

impl<'p> Interpreter<'p> {
    /// An interpreter over `package`.
    pub fn new(package: &'p Package) -> Interpreter<'p> {
        Interpreter { package }
    }

    /// Run the steps for `bound`, reading and updating `session`'s cells, calling
    /// `on_token` for each token emitted to the token-stream output.
    ///
    /// The session is updated only when the run succeeds. Errors name the component,
    /// port, value or cell that failed.
    pub fn run(
        &self,
        bound: &BoundRequest,
        session: &mut Session,
        on_token: &mut dyn FnMut(u32) -> Flow,
    ) -> Result<Output, RunError> {
        if bound.session_id.as_deref() != session.id() {
            return Err(RunError::SessionMismatch {
                request: bound.session_id.clone(),
                session: session.id.clone(),
            });
        }
        let pkg = self.package;
        let m = pkg.manifest();
        let mut run = Run {
            pkg,
            bound,
            values: HashMap::new(),
            kv: Vec::new(),
            outputs: BTreeMap::new(),
            tokens: Vec::new(),
            events: EventLog::default(),
            iters: Vec::new(),
            on_token,
            stopped: false,
        };
        for r in &m.inputs.request {
            let Some(name) = &r.value else { continue };
            let v = match r.role {
                Role::PromptTokens => Tensor::i64(
                    &[bound.prompt_tokens.len()],
                    bound.prompt_tokens.iter().map(|&t| i64::from(t)).collect(),
                )
                .expect("length matches"),
                Role::MaxNewTokens => Tensor::scalar_i64(bound.max_new_tokens as i64),
                Role::Temperature => Tensor::scalar_f32(bound.temperature),
                Role::Seed => Tensor::scalar_i64(bound.seed as i64),
                Role::SessionId => continue,
            };
            run.values.insert(name.clone(), Value::Tensor(v));
        }
        for (name, t) in &bound.inputs {
            run.values.insert(name.clone(), Value::Tensor(t.clone()));
        }
        let carried = pkg.carried_tokens(session);
        for c in &m.cells {
            run.init_cell(c, session, carried)?;
        }
        run.steps(&m.steps, "steps")?;
        for c in &m.cells {
            if c.scope == Scope::Session
                && let Some(Value::Tensor(t)) = run.values.get(&c.name)
            {
                session.cells.insert(c.name.clone(), t.clone());
            }
        }
        Ok(Output {
            outputs: run.outputs,
            tokens: run.tokens,
            events: run.events,
        })
    }
}

struct Run<'a, 'f> {
    pkg: &'a Package,
    bound: &'a BoundRequest,
    values: HashMap<String, Value>,
    kv: Vec<Box<dyn KvState>>,
    outputs: BTreeMap<String, Tensor>,
    tokens: Vec<u32>,
    events: EventLog,
    iters: Vec<usize>,
    on_token: &'f mut dyn FnMut(u32) -> Flow,
    stopped: bool,
}

fn empty_tensor(dtype: DType, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    match dtype {
        DType::F32 => Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), vec![0.0; n]).expect("n")),
        DType::I64 => Tensor::I64(ArrayD::from_shape_vec(IxDyn(shape), vec![0; n]).expect("n")),
        _ => Tensor::Bool(ArrayD::from_shape_vec(IxDyn(shape), vec![false; n]).expect("n")),
    }
}

impl Run<'_, '_> {
    fn init_cell(&mut self, c: &Cell, session: &Session, carried: usize) -> Result<(), RunError> {
        let ctx = || format!("cell '{}'", c.name);
        if c.scope == Scope::Session
            && let Some(t) = session.cells.get(&c.name)
        {
            self.values.insert(c.name.clone(), Value::Tensor(t.clone()));
            return Ok(());
        }
        let fixed = |shape: &[Dim]| -> Vec<usize> {
            shape
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => *n as usize,
                    Dim::Symbol(_) => 0,
                })
                .collect()
        };
        match (&c.init, c.dtype) {
            (Init::Empty, DType::Kv) => {
                let native = self.pkg.native().ok_or_else(|| RunError::Value {
                    context: ctx(),
                    reason: "a kv cell needs the package's model, which is not bound".into(),
                })?;
                let b = self.bound;
                let capacity = carried
                    .saturating_add(b.prompt_tokens.len())
                    .saturating_add(b.extra_positions)
                    .saturating_add(b.max_new_tokens)
                    .max(1);
                let state = native.new_kv(capacity).map_err(|e| RunError::Native {
                    component: c.name.clone(),
                    block: "llama_decoder".into(),
                    source: e,
                })?;
                let store = self.kv.len();
                self.kv.push(state);
                for layer in 0..native.kv_geometry().n_layers {
                    self.values.insert(
                        kv_layer_name(&c.name, layer),
                        Value::Kv(KvHandle {
                            store,
                            layer,
                            positions: 0,
                        }),
                    );
                }
            }
            (Init::Empty, dt) => {
                let mut shape = fixed(c.shape.as_deref().unwrap_or(&[]));
                shape[0] = 0;
                self.values
                    .insert(c.name.clone(), Value::Tensor(empty_tensor(dt, &shape)));
            }
            (Init::Input(name), _) => {
                let v = self
                    .values
                    .get(name)
                    .cloned()
                    .ok_or_else(|| RunError::Value {
                        context: ctx(),
                        reason: format!("init input '{name}' is not bound by this request"),
                    })?;
                self.values.insert(c.name.clone(), v);
            }
            (Init::Literal(data), dt) => {
                let shape = fixed(c.shape.as_deref().unwrap_or(&[]));
                let t = match dt {
                    DType::F32 => Tensor::f32(&shape, data.iter().map(|&x| x as f32).collect()),
                    DType::I64 => Tensor::i64(&shape, data.iter().map(|&x| x as i64).collect()),
                    _ => Tensor::bool(&shape, data.iter().map(|&x| x != 0.0).collect()),
                }
                .ok_or_else(|| RunError::Value {
                    context: ctx(),
                    reason: "literal does not match the declared shape".into(),
                })?;
                self.values.insert(c.name.clone(), Value::Tensor(t));
            }
        }
        Ok(())
    }

    fn steps(&mut self, steps: &[Step], path: &str) -> Result<(), RunError> {
        for (i, s) in steps.iter().enumerate() {
            let here = format!("{path}[{i}]");
            match s {
                Step::Invoke(inv) => self.invoke(inv, &here)?,
                Step::Loop(l) => self.run_loop(l, &here)?,
                Step::Emit(e) => self.emit(e, &here)?,
            }
        }
        Ok(())
    }

    fn run_loop(&mut self, l: &Loop, here: &str) -> Result<(), RunError> {
        let max = match &l.max_iterations {
            Bound::Fixed(n) => *n as usize,
            Bound::Role(_) => self.bound.max_new_tokens,
        };
        let outer: HashSet<String> = self.values.keys().cloned().collect();
        let mut exit = LoopExit::MaxIterations;
        let mut n = 0;
        while n < max {
            self.iters.push(n);
            if let Some(c) = &l.counter {
                self.values
                    .insert(c.clone(), Value::Tensor(Tensor::scalar_i64(n as i64)));
            }
            self.steps(&l.body, &format!("{here}.body"))?;
            let cont = match self.values.get(&l.continue_if) {
                Some(Value::Tensor(Tensor::Bool(b))) if b.len() == 1 => {
                    *b.iter().next().expect("one element")
                }
                other => {
                    return Err(RunError::Value {
                        context: format!("step {here} continue_if '{}'", l.continue_if),
                        reason: format!(
                            "expected one bool, got {}",
                            other.map_or("no value".to_string(), Value::describe)
                        ),
                    });
                }
            };
            self.values.retain(|k, _| outer.contains(k));
            self.iters.pop();
            n += 1;
            if self.stopped {
                exit = LoopExit::Callback;
                break;
            }
            if !cont {
                exit = LoopExit::Condition;
                break;
            }
        }
        self.events.events.push(Event::LoopEnd {
            step: here.to_string(),
            iterations: n,
            exit,
        });
        Ok(())
    }

    fn emit(&mut self, e: &Emit, here: &str) -> Result<(), RunError> {
        let ctx = || format!("step {here} emit '{}' to '{}'", e.value, e.to);
        let t = match self.values.get(&e.value) {
            Some(Value::Tensor(t)) => t.clone(),
            other => {
                return Err(RunError::Value {
                    context: ctx(),
                    reason: format!(
                        "value is {}",
                        other.map_or("unavailable".to_string(), Value::describe)
                    ),
                });
            }
        };
        let decl = self.pkg.manifest().outputs.iter().find(|o| o.name == e.to);
        if decl.is_some_and(|o| o.stream_tokens) {
            for &id in t.i64_elements().iter() {
                let tok = u32::try_from(id).map_err(|_| RunError::Value {
                    context: ctx(),
                    reason: format!("token id {id} is outside 0..=u32::MAX"),
                })?;
                self.tokens.push(tok);
                if !self.stopped && (self.on_token)(tok) == Flow::Stop {
                    self.stopped = true;
                }
            }
        }
        let elements = t.len();
        let slot = if decl.is_some() {
            self.outputs.remove(&e.to).map(Value::Tensor)
        } else {
            self.values.remove(&e.to)
        };
        let new = match (e.mode, slot) {
            (EmitMode::Replace, _) | (EmitMode::Append, None) => t,
            (EmitMode::Append, Some(Value::Tensor(old))) => {
                append(&old, &t).map_err(|reason| RunError::Value {
                    context: ctx(),
                    reason,
                })?
            }
            (EmitMode::Append, Some(Value::Kv(_))) => {
                return Err(RunError::Value {
                    context: ctx(),
                    reason: "cannot append to kv state".into(),
                });
            }
        };
        if decl.is_some() {
            self.outputs.insert(e.to.clone(), new);
        } else {
            self.values.insert(e.to.clone(), Value::Tensor(new));
        }
        self.events.events.push(Event::Emit {
            step: here.to_string(),
            iteration: self.iters.clone(),
            to: e.to.clone(),
            mode: e.mode,
            elements,
        });
        Ok(())
    }

    fn invoke(&mut self, inv: &Invoke, here: &str) -> Result<(), RunError> {
        let pkg = self.pkg;
        let c: &Component = pkg
            .component(&inv.component)
            .ok_or_else(|| RunError::Value {
                context: format!("step {here}"),
                reason: format!("unknown component '{}'", inv.component),
            })?;
        let mut syms: HashMap<String, usize> = HashMap::new();
        let mut tensors: BTreeMap<&str, &Tensor> = BTreeMap::new();
        for p in c.inputs.iter().filter(|p| p.dtype != DType::Kv) {
            let vname = &inv.inputs[&p.name];
            match self.values.get(vname) {
                Some(Value::Tensor(t)) => {
                    check_port(c, p, "input", vname, t, &mut syms)?;
                    tensors.insert(p.name.as_str(), t);
                }
                Some(v) => {
                    return Err(port_err(c, p, "input", vname, v.describe()));
                }
                None => {
                    return Err(RunError::UnavailableValue {
                        component: c.name.clone(),
                        port: p.name.clone(),
                        value: vname.clone(),
                    });
                }
            }
        }
        let (implementation, mut outs, kv_out) = if let Some((contract, g)) =
            self.bound.overrides.get(&c.name)
        {
            let outs = g.eval(&c.name, &tensors)?;
            (format!("replacement:{contract}"), outs, None)
        } else {
            match &c.implementation {
                Implementation::Graph(_) => {
                    let g = pkg
                        .prepared_graph(&c.name)
                        .expect("validated graph is prepared");
                    (String::from("graph"), g.eval(&c.name, &tensors)?, None)
                }
                Implementation::Native(nb) => {
                    let (outs, kv_out) =
                        Self::native(pkg, &self.values, &mut self.kv, c, nb.block, inv, &tensors)?;
                    (format!("native:{}", nb.block), outs, kv_out)
                }
            }
        };
        drop(tensors);
        for p in &c.outputs {
            let Some(target) = inv.outputs.get(&p.name) else {
                continue;
            };
            if p.dtype == DType::Kv {
                let (store, positions) = kv_out.expect("native decoder returns its KV state");
                let layers = pkg.native().map_or(0, |n| n.kv_geometry().n_layers);
                for layer in 0..layers {
                    self.values.insert(
                        kv_layer_name(target, layer),
                        Value::Kv(KvHandle {
                            store,
                            layer,
                            positions,
                        }),
                    );
                }
                continue;
            }
            let t = outs.remove(&p.name).ok_or_else(|| RunError::Value {
                context: format!("component '{}' output '{}'", c.name, p.name),
                reason: "not produced".into(),
            })?;
            check_port(c, p, "output", target, &t, &mut syms)?;
            self.values.insert(target.clone(), Value::Tensor(t));
        }
        self.events.events.push(Event::Invoke {
            step: here.to_string(),
            iteration: self.iters.clone(),
            component: c.name.clone(),
            implementation,
        });
        Ok(())
    }

    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn native(
        pkg: &Package,
        values: &HashMap<String, Value>,
        kv: &mut [Box<dyn KvState>],
        c: &Component,
        block: NativeKind,
        inv: &Invoke,
        tensors: &BTreeMap<&str, &Tensor>,
    ) -> Result<(BTreeMap<String, Tensor>, Option<(usize, usize)>), RunError> {
        let native = pkg.native().ok_or_else(|| RunError::NoNative {
            component: c.name.clone(),
        })?;
        let nerr = |e| RunError::Native {
            component: c.name.clone(),
            block: block.to_string(),
            source: e,
        };
        let hidden_in = |name: &str| -> Result<(usize, Vec<f32>), RunError> {
            let t = tensors[name];
            let Tensor::F32(a) = t else {
                unreachable!("port checked")
            };
            let h = native.hidden();
            if a.shape()[1] != h {
                return Err(RunError::PortValue(Box::new(PortMismatch {
                    component: c.name.clone(),
                    direction: "input",
                    port: name.into(),
                    value: inv.inputs[name].clone(),
                    expected: format!("f32 [n, {h}]"),
                    got: t.shape_string(),
                })));
            }
            Ok((a.shape()[0], a.iter().copied().collect()))
        };
        let mut outs = BTreeMap::new();
        match block {
            NativeKind::TokenEmbedding => {
                let ids = tensors["tokens"].i64_elements();
                let mut toks = Vec::with_capacity(ids.len());
                for &id in ids.iter() {
                    toks.push(u32::try_from(id).map_err(|_| {
                        nerr(format!("token id {id} is outside 0..=u32::MAX").into())
                    })?);
                }
                let x = native.token_embedding(&toks).map_err(nerr)?;
                let t = Tensor::f32(&[toks.len(), native.hidden()], x)
                    .ok_or_else(|| nerr("embedding returned a wrong length".into()))?;
                outs.insert("hidden".to_string(), t);
                Ok((outs, None))
            }
            NativeKind::LmHead => {
                let (n, x) = hidden_in("hidden")?;
                let logits = native.lm_head(&x).map_err(nerr)?;
                let t = Tensor::f32(&[n, native.vocab()], logits)
                    .ok_or_else(|| nerr("lm_head returned a wrong length".into()))?;
                outs.insert("logits".to_string(), t);
                Ok((outs, None))
            }
            NativeKind::LlamaDecoder => {
                let (n, mut x) = hidden_in("hidden")?;
                let family = &inv.inputs["past"];
                let layers = native.kv_geometry().n_layers;
                let mut store = None;
                for layer in 0..layers {
                    let vname = kv_layer_name(family, layer);
                    let h = match values.get(&vname) {
                        Some(Value::Kv(h)) => *h,
                        Some(v) => {
                            return Err(RunError::PortValue(Box::new(PortMismatch {
                                component: c.name.clone(),
                                direction: "input",
                                port: "past".into(),
                                value: vname,
                                expected: "kv".into(),
                                got: v.describe(),
                            })));
                        }
                        None => {
                            return Err(RunError::UnavailableValue {
                                component: c.name.clone(),
                                port: "past".into(),
                                value: vname,
                            });
                        }
                    };
                    let held = kv[h.store].positions();
                    if h.positions != held
                        || store.is_some_and(|s| s != h.store)
                        || h.layer != layer
                    {
                        return Err(RunError::StaleKv {
                            component: c.name.clone(),
                            port: "past".into(),
                            value: vname,
                            value_positions: h.positions,
                            state_positions: held,
                        });
                    }
                    store = Some(h.store);
                }
                let store = store.ok_or_else(|| nerr("the decoder has no layers".into()))?;
                native
                    .llama_decoder(&mut x, kv[store].as_mut())
                    .map_err(nerr)?;
                let positions = kv[store].positions();
                let t = Tensor::f32(&[n, native.hidden()], x).expect("same length as input");
                outs.insert("hidden".to_string(), t);
                Ok((outs, Some((store, positions))))
            }
        }
    }
}

fn port_err(c: &Component, p: &Port, dir: &'static str, value: &str, got: String) -> RunError {
    RunError::PortValue(Box::new(PortMismatch {
        component: c.name.clone(),
        direction: dir,
        port: p.name.clone(),
        value: value.to_string(),
        expected: format!(
            "{} {}",
            p.dtype,
            p.shape.as_deref().map(shape_string).unwrap_or_default()
        ),
        got,
    }))
}

/// Check a tensor against a port: dtype, rank, fixed dims, and symbols consistent within
/// one invocation.
fn check_port(
    c: &Component,
    p: &Port,
    dir: &'static str,
    value: &str,
    t: &Tensor,
    syms: &mut HashMap<String, usize>,
) -> Result<(), RunError> {
    let shape = p.shape.as_deref().unwrap_or(&[]);
    let got = || format!("{} {}", t.dtype(), t.shape_string());
    if t.dtype() != p.dtype || t.rank() != shape.len() {
        return Err(port_err(c, p, dir, value, got()));
    }
    for (d, &n) in shape.iter().zip(t.shape()) {
        match d {
            Dim::Fixed(k) if *k as usize != n => return Err(port_err(c, p, dir, value, got())),
            Dim::Fixed(_) => {}
            Dim::Symbol(s) => {
                if let Some(&prev) = syms.get(s) {
                    if prev != n {
                        return Err(port_err(
                            c,
                            p,
                            dir,
                            value,
                            format!("{} ('{s}' is {prev} elsewhere in this invocation)", got()),
                        ));
                    }
                } else {
                    syms.insert(s.clone(), n);
                }
            }
        }
    }
    Ok(())
}

/// Concatenate along axis 0 (same dtype, same trailing dims).
fn append(old: &Tensor, new: &Tensor) -> Result<Tensor, String> {
    let mismatch = || {
        format!(
            "cannot append {} {} to {} {}",
            new.dtype(),
            new.shape_string(),
            old.dtype(),
            old.shape_string()
        )
    };
    if old.rank() == 0 || old.rank() != new.rank() || old.shape()[1..] != new.shape()[1..] {
        return Err(mismatch());
    }
    Ok(match (old, new) {
        (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(
            ndarray::concatenate(Axis(0), &[a.view(), b.view()]).map_err(|_| mismatch())?,
        ),
        (Tensor::I64(a), Tensor::I64(b)) => Tensor::I64(
            ndarray::concatenate(Axis(0), &[a.view(), b.view()]).map_err(|_| mismatch())?,
        ),
        (Tensor::Bool(a), Tensor::Bool(b)) => Tensor::Bool(
            ndarray::concatenate(Axis(0), &[a.view(), b.view()]).map_err(|_| mismatch())?,
        ),
        _ => return Err(mismatch()),
    })
}

/// The continuation cell of a manifest, if any.
pub(crate) fn continuation_cell(cells: &[Cell]) -> Option<&Cell> {
    cells
        .iter()
        .find(|c| c.role == Some(CellRole::PromptContinuation))
}
