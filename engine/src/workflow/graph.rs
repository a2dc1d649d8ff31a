//! Evaluation of op-graph components: constants and weights resolved once, nodes run in order on ndarray.

use std::collections::BTreeMap;

use ndarray::{ArrayD, IxDyn};

use super::error::{RunError, ValidationError};
use super::manifest::{Component, Graph};
use super::native::Weights;
use super::value::{DType, Tensor};

/// A graph ready to run: its definition plus its constants and weights as tensors.
#[derive(Debug, Clone)]
pub struct PreparedGraph {
    /// The definition.
    pub graph: Graph,
    fixed: Vec<(String, Tensor)>,
}

impl PreparedGraph {
    /// Materialise constants and load weights of an already validated graph.
    ///
    /// Errors: a weight that cannot be read as f32, named with its component.
    pub fn new(
        c: &Component,
        g: &Graph,
        weights: Option<&dyn Weights>,
    ) -> Result<PreparedGraph, ValidationError> {
        let mut fixed = Vec::new();
        for k in &g.constants {
            let shape: Vec<usize> = k.shape.iter().map(|&d| d as usize).collect();
            let t = match k.dtype {
                DType::F32 => Tensor::F32(arr(&shape, k.data.iter().map(|&x| x as f32).collect())),
                DType::I64 => Tensor::I64(arr(&shape, k.data.iter().map(|&x| x as i64).collect())),
                DType::Bool => {
                    Tensor::Bool(arr(&shape, k.data.iter().map(|&x| x != 0.0).collect()))
                }
                DType::Kv => unreachable!("validated: constants are not kv"),
            };
            fixed.push((k.name.clone(), t));
        }
        for w in &g.weights {
            let src = weights.ok_or_else(|| ValidationError::NoWeights {
                component: c.name.clone(),
            })?;
            let t = src
                .load_f32(&w.tensor)
                .map_err(|e| ValidationError::GraphNode {
                    component: c.name.clone(),
                    node: w.name.clone(),
                    reason: format!("weight '{}': {e}", w.tensor),
                })?;
            fixed.push((w.name.clone(), t));
        }
        Ok(PreparedGraph {
            graph: g.clone(),
            fixed,
        })
    }

    /// Run the graph of component `component` on its input port values.
    ///
    /// Returns output port name → tensor. Errors name the component and node.
    pub fn eval(
        &self,
        component: &str,
        inputs: &BTreeMap<&str, &Tensor>,
    ) -> Result<BTreeMap<String, Tensor>, RunError> {
        let mut produced: Vec<(&str, Tensor)> = Vec::with_capacity(self.graph.nodes.len());
        for node in &self.graph.nodes {
            let result = {
                let mut ops = Vec::new();
                for name in node.op.operands() {
                    let t = lookup(name, &produced, inputs, &self.fixed).ok_or_else(|| {
                        RunError::Op {
                            component: component.into(),
                            node: node.out.clone(),
                            op: node.op.kind(),
                            reason: format!("operand '{name}' is not available"),
                        }
                    })?;
                    ops.push(t);
                }
                node.op.eval(&ops).map_err(|reason| RunError::Op {
                    component: component.into(),
                    node: node.out.clone(),
                    op: node.op.kind(),
                    reason,
                })?
            };
            produced.push((node.out.as_str(), result));
        }
        let mut out = BTreeMap::new();
        for (port, src) in &self.graph.outputs {
            let t = lookup(src, &produced, inputs, &self.fixed).ok_or_else(|| RunError::Value {
                context: format!("component '{component}' output '{port}'"),
                reason: format!("graph value '{src}' is not available"),
            })?;
            out.insert(port.clone(), t.clone());
        }
        Ok(out)
    }
}

fn arr<T>(shape: &[usize], data: Vec<T>) -> ArrayD<T> {
    ArrayD::from_shape_vec(IxDyn(shape), data).expect("validated: constant length matches shape")
}

fn lookup<'a>(
    name: &str,
    produced: &'a [(&str, Tensor)],
    inputs: &BTreeMap<&str, &'a Tensor>,
    fixed: &'a [(String, Tensor)],
) -> Option<&'a Tensor> {
    produced
        .iter()
        .rev()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| t)
        .or_else(|| inputs.get(name).copied())
        .or_else(|| fixed.iter().find(|(n, _)| n == name).map(|(_, t)| t))
}
