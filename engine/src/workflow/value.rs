//! The interpreter's value model: named n-dimensional tensors (f32, i64, bool) on ndarray, and opaque KV-state handles.

use std::fmt;

use ndarray::{ArrayD, IxDyn};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Element type of a tensor value, or `kv` for an opaque KV-state value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit signed integer (token ids, counts, seeds).
    I64,
    /// Boolean (masks, conditions).
    Bool,
    /// One layer's KV state of a `llama_decoder` block (no shape; only ports and cells of
    /// a decoder's KV family have this type).
    Kv,
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::I64 => "i64",
            DType::Bool => "bool",
            DType::Kv => "kv",
        })
    }
}

/// A dense tensor value, row-major (C order), of one of the three element types.
#[derive(Debug, Clone, PartialEq)]
pub enum Tensor {
    /// f32 elements.
    F32(ArrayD<f32>),
    /// i64 elements.
    I64(ArrayD<i64>),
    /// bool elements.
    Bool(ArrayD<bool>),
}

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::I64(_) => DType::I64,
            Tensor::Bool(_) => DType::Bool,
        }
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        match self {
            Tensor::F32(a) => a.shape(),
            Tensor::I64(a) => a.shape(),
            Tensor::Bool(a) => a.shape(),
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An f32 tensor from a shape and row-major data; `None` when `data.len()` is not the
    /// product of `shape`.
    pub fn f32(shape: &[usize], data: Vec<f32>) -> Option<Tensor> {
        ArrayD::from_shape_vec(IxDyn(shape), data)
            .ok()
            .map(Tensor::F32)
    }

    /// An i64 tensor from a shape and row-major data; `None` on a length mismatch.
    pub fn i64(shape: &[usize], data: Vec<i64>) -> Option<Tensor> {
        ArrayD::from_shape_vec(IxDyn(shape), data)
            .ok()
            .map(Tensor::I64)
    }

    /// A bool tensor from a shape and row-major data; `None` on a length mismatch.
    pub fn bool(shape: &[usize], data: Vec<bool>) -> Option<Tensor> {
        ArrayD::from_shape_vec(IxDyn(shape), data)
            .ok()
            .map(Tensor::Bool)
    }

    /// A rank-0 f32 tensor.
    pub fn scalar_f32(v: f32) -> Tensor {
        Tensor::F32(ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// A rank-0 i64 tensor.
    pub fn scalar_i64(v: i64) -> Tensor {
        Tensor::I64(ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// A rank-0 bool tensor.
    pub fn scalar_bool(v: bool) -> Tensor {
        Tensor::Bool(ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// The elements in row-major order as i64 (f32 truncated, bool as 0/1).
    pub fn i64_elements(&self) -> Vec<i64> {
        match self {
            Tensor::F32(a) => a.iter().map(|&v| v as i64).collect(),
            Tensor::I64(a) => a.iter().copied().collect(),
            Tensor::Bool(a) => a.iter().map(|&v| i64::from(v)).collect(),
        }
    }

    /// The shape as text, e.g. `[1, 576]`.
    pub fn shape_string(&self) -> String {
        format!("{:?}", self.shape())
    }
}

/// A named value in the interpreter: a tensor or a handle to one layer of a KV state.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A dense tensor.
    Tensor(Tensor),
    /// One layer of a KV state owned by the running invocation.
    Kv(KvHandle),
}

impl Value {
    /// The element type (`kv` for KV handles).
    pub fn dtype(&self) -> DType {
        match self {
            Value::Tensor(t) => t.dtype(),
            Value::Kv(_) => DType::Kv,
        }
    }

    /// A description for error messages: `f32 [1, 576]` or `kv (layer 3, 17 positions)`.
    pub fn describe(&self) -> String {
        match self {
            Value::Tensor(t) => format!("{} {}", t.dtype(), t.shape_string()),
            Value::Kv(h) => format!("kv (layer {}, {} positions)", h.layer, h.positions),
        }
    }
}

/// One layer's view of a KV state held by the interpreter for the current invocation.
///
/// The KV rows themselves live in the native block's cache; the handle records which
/// state (`store`), which layer, and how many positions the state held when the handle was
/// produced. A handle whose `positions` no longer matches its store is stale and is
/// rejected when consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvHandle {
    /// Index of the KV state in the invocation.
    pub store: usize,
    /// Layer index (0-based).
    pub layer: usize,
    /// Positions the state held when this handle was produced.
    pub positions: usize,
}

/// Name of the per-layer value of a KV family: `decoder_kv` layer 3 is `decoder_kv.0003`.
pub fn kv_layer_name(family: &str, layer: usize) -> String {
    format!("{family}.{layer:04}")
}
