//! Request binding: what a request brings (prompt, limits, sampling, session, application tensors, component overrides) checked against the package's declarations before admission.

use std::collections::BTreeMap;

use super::error::RequestError;
use super::graph::PreparedGraph;
use super::manifest::{AppInput, Dim, Graph, Manifest, shape_string};
use super::value::Tensor;

/// A request to a package, as the runtime hands it over after tokenization.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Request {
    /// Prompt token ids (the new turn only; a session's carried prefix is added by the
    /// workflow).
    pub prompt_tokens: Vec<u32>,
    /// Upper bound on generated tokens.
    pub max_new_tokens: usize,
    /// Sampling temperature (0 = greedy).
    pub temperature: f32,
    /// Sampling seed.
    pub seed: u64,
    /// Session id of a continuing conversation.
    pub session_id: Option<String>,
    /// Application tensors by declared input name.
    pub inputs: BTreeMap<String, Tensor>,
    /// Component overrides by component name.
    pub overrides: BTreeMap<String, Replacement>,
}

impl Request {
    /// A greedy request for `max_new_tokens` tokens after `prompt_tokens`.
    pub fn new(prompt_tokens: Vec<u32>, max_new_tokens: usize) -> Request {
        Request {
            prompt_tokens,
            max_new_tokens,
            ..Request::default()
        }
    }
}

/// An application-supplied implementation of a replaceable component.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement {
    /// The contract it implements, `id@version`; must equal the component's.
    pub contract: String,
    /// The op graph (same ports as the component it replaces).
    pub graph: Graph,
}

/// A request whose inputs and overrides passed the package's checks; what the runtime
/// admits and the interpreter runs.
#[derive(Debug, Clone)]
pub struct BoundRequest {
    pub(crate) prompt_tokens: Vec<u32>,
    pub(crate) max_new_tokens: usize,
    pub(crate) temperature: f32,
    pub(crate) seed: u64,
    pub(crate) session_id: Option<String>,
    pub(crate) inputs: BTreeMap<String, Tensor>,
    pub(crate) overrides: BTreeMap<String, (String, PreparedGraph)>,
    pub(crate) extra_positions: usize,
}

impl BoundRequest {
    /// The prompt's token ids.
    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt_tokens
    }

    /// The current `max_new_tokens`.
    pub fn max_new_tokens(&self) -> usize {
        self.max_new_tokens
    }

    /// Lower `max_new_tokens` to an admitted cap (never raises it).
    pub fn clamp_max_new_tokens(&mut self, cap: usize) {
        self.max_new_tokens = self.max_new_tokens.min(cap);
    }

    /// KV positions contributed by the bound application inputs, from their declared
    /// shapes (counted before any component runs).
    pub fn extra_positions(&self) -> usize {
        self.extra_positions
    }

    /// The session id, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Whether the request binds application tensors or overrides components (the
    /// routes that must run on the interpreter).
    pub fn needs_interpreter(&self) -> bool {
        !self.inputs.is_empty() || !self.overrides.is_empty()
    }
}

/// Check application tensors against the declarations and count the KV positions they
/// contribute (sum over bound inputs of the product of their `kv_positions` dims).
///
/// Errors: undeclared names (all of them, sorted), a missing required input, a dtype or
/// shape mismatch naming expected and got.
pub fn bind_inputs(m: &Manifest, inputs: &BTreeMap<String, Tensor>) -> Result<usize, RequestError> {
    let declared: Vec<&AppInput> = m.inputs.application.iter().collect();
    let undeclared: Vec<String> = inputs
        .keys()
        .filter(|k| !declared.iter().any(|d| &d.name == *k))
        .cloned()
        .collect();
    if !undeclared.is_empty() {
        return Err(RequestError::UndeclaredInputs {
            names: undeclared,
            declared: declared.iter().map(|d| d.name.clone()).collect(),
        });
    }
    let mut symbols: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    let mut positions = 0usize;
    for d in &declared {
        let Some(t) = inputs.get(&d.name) else {
            if d.required {
                return Err(RequestError::MissingInput {
                    name: d.name.clone(),
                });
            }
            continue;
        };
        if t.dtype() != d.dtype {
            return Err(RequestError::InputDtype {
                name: d.name.clone(),
                expected: d.dtype.to_string(),
                got: t.dtype().to_string(),
            });
        }
        let shape_err = |why: String| RequestError::InputShape {
            name: d.name.clone(),
            expected: shape_string(&d.shape),
            got: format!("{}{why}", t.shape_string()),
        };
        if t.rank() != d.shape.len() {
            return Err(shape_err(String::new()));
        }
        for (dim, &got) in d.shape.iter().zip(t.shape()) {
            match dim {
                Dim::Fixed(n) if *n as usize != got => return Err(shape_err(String::new())),
                Dim::Fixed(_) => {}
                Dim::Symbol(s) => match symbols.get(s.as_str()) {
                    Some(&(v, other)) if v != got => {
                        return Err(shape_err(format!(
                            " ('{s}' is {got} here but {v} in input '{other}')"
                        )));
                    }
                    _ => {
                        symbols.insert(s.as_str(), (got, d.name.as_str()));
                    }
                },
            }
        }
        let mut n = 1usize;
        if d.kv_positions.is_empty() {
            n = 0;
        }
        for dim in &d.kv_positions {
            let size = match dim {
                Dim::Fixed(k) => *k as usize,
                Dim::Symbol(s) => d
                    .shape
                    .iter()
                    .position(|x| x == dim)
                    .map(|i| t.shape()[i])
                    .ok_or_else(|| RequestError::Overflow {
                        what: format!("kv_positions dimension '{s}' of input '{}'", d.name),
                    })?,
            };
            n = n.checked_mul(size).ok_or_else(|| RequestError::Overflow {
                what: format!("KV positions of input '{}'", d.name),
            })?;
        }
        positions = positions
            .checked_add(n)
            .ok_or_else(|| RequestError::Overflow {
                what: "KV positions of application inputs".into(),
            })?;
    }
    Ok(positions)
}
