//! The op set of graph components: definitions (serde), static type/rank inference, and evaluation on ndarray.
//!
//! Semantics follow the ONNX operators of the same names where one exists (numpy-style
//! broadcasting for element-wise ops, negative axes count from the end, `Slice` clamps
//! like Python slicing). `ArgMax` returns the lowest index among equal maxima and a NaN
//! never wins. `RandomUniform` is counter-based (SplitMix64, Steele, Lea & Flood 2014):
//! the same `seed` and `counter` always give the same number.

use ndarray::{ArrayD, Axis, IxDyn, Slice as NdSlice, Zip};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::value::{DType, Tensor};

/// Apply an expression to the array inside a tensor of any element type.
macro_rules! map_tensor {
    ($t:expr, $a:ident => $e:expr) => {
        match $t {
            Tensor::F32($a) => Tensor::F32($e),
            Tensor::I64($a) => Tensor::I64($e),
            Tensor::Bool($a) => Tensor::Bool($e),
        }
    };
}

/// One op with its operands (graph value names) and attributes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum Op {
    /// Rows of `data` selected along `axis` by i64 `indices`; output shape is
    /// `data.shape[..axis] ++ indices.shape ++ data.shape[axis+1..]`.
    Gather {
        /// Source tensor.
        data: String,
        /// i64 indices (negative counts from the end).
        indices: String,
        /// Axis of `data`.
        axis: i64,
    },
    /// f32 matrix product `[m, k] × [k, n] → [m, n]`.
    MatMul {
        /// Left `[m, k]`.
        a: String,
        /// Right `[k, n]`.
        b: String,
    },
    /// Element-wise `a + b` (f32 or i64, broadcasting).
    Add {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Element-wise `a - b` (f32 or i64, broadcasting).
    Sub {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Element-wise `a * b` (f32 or i64, broadcasting).
    Mul {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Element-wise `a / b` (f32 IEEE division, or i64 division that errors on zero).
    Div {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Same elements, new shape; one entry may be -1 (inferred).
    Reshape {
        /// Input.
        input: String,
        /// New shape.
        shape: Vec<i64>,
    },
    /// Permute axes: output axis `i` is input axis `perm[i]`.
    Transpose {
        /// Input.
        input: String,
        /// A permutation of `0..rank`.
        perm: Vec<usize>,
    },
    /// Join tensors of one dtype and rank along `axis`.
    Concat {
        /// Inputs, in order.
        inputs: Vec<String>,
        /// Axis.
        axis: i64,
    },
    /// `input[start:end]` along `axis` (Python semantics: negative from the end, clamped).
    Slice {
        /// Input.
        input: String,
        /// Axis.
        axis: i64,
        /// First index.
        start: i64,
        /// One past the last index; absent means to the end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<i64>,
    },
    /// Numerically stable softmax along `axis` (f32).
    Softmax {
        /// Input.
        input: String,
        /// Axis.
        axis: i64,
    },
    /// Index of the maximum along `axis` (i64 output).
    ArgMax {
        /// Input (f32 or i64).
        input: String,
        /// Axis.
        axis: i64,
        /// Keep the reduced axis with size 1.
        #[serde(default)]
        keepdims: bool,
    },
    /// Maximum along `axis` (f32, i64 or bool: any-true).
    ReduceMax {
        /// Input.
        input: String,
        /// Axis.
        axis: i64,
        /// Keep the reduced axis with size 1.
        #[serde(default)]
        keepdims: bool,
    },
    /// Sum along `axis` (f32 or i64).
    ReduceSum {
        /// Input.
        input: String,
        /// Axis.
        axis: i64,
        /// Keep the reduced axis with size 1.
        #[serde(default)]
        keepdims: bool,
    },
    /// Inclusive running sum along `axis` (f32 or i64).
    CumSum {
        /// Input.
        input: String,
        /// Axis.
        axis: i64,
    },
    /// Convert element type (f32 → i64 truncates toward zero and saturates, NaN → 0;
    /// bool → 0/1; number → bool is `!= 0`).
    Cast {
        /// Input.
        input: String,
        /// Target type (not `kv`).
        to: DType,
    },
    /// Element-wise `a == b` (same dtype, broadcasting) → bool.
    Equal {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Element-wise `a > b` (f32 or i64, broadcasting) → bool.
    Greater {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Element-wise logical and (bool, broadcasting).
    And {
        /// Left operand.
        a: String,
        /// Right operand.
        b: String,
    },
    /// Element-wise logical not (bool).
    Not {
        /// Input.
        input: String,
    },
    /// Element-wise `cond ? a : b` (broadcasting all three).
    Where {
        /// bool condition.
        cond: String,
        /// Chosen where true.
        a: String,
        /// Chosen where false.
        b: String,
    },
    /// A uniform f32 scalar in `[0, 1)` from i64 scalars `seed` and `counter`.
    RandomUniform {
        /// i64 scalar seed.
        seed: String,
        /// i64 scalar counter (e.g. a loop counter).
        counter: String,
    },
}

/// Static type of a graph value: element type and rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeInfo {
    /// Element type.
    pub dtype: DType,
    /// Rank.
    pub rank: usize,
}

impl std::fmt::Display for TypeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} rank {}", self.dtype, self.rank)
    }
}

impl Op {
    /// The op's name as written in manifests.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Gather { .. } => "Gather",
            Op::MatMul { .. } => "MatMul",
            Op::Add { .. } => "Add",
            Op::Sub { .. } => "Sub",
            Op::Mul { .. } => "Mul",
            Op::Div { .. } => "Div",
            Op::Reshape { .. } => "Reshape",
            Op::Transpose { .. } => "Transpose",
            Op::Concat { .. } => "Concat",
            Op::Slice { .. } => "Slice",
            Op::Softmax { .. } => "Softmax",
            Op::ArgMax { .. } => "ArgMax",
            Op::ReduceMax { .. } => "ReduceMax",
            Op::ReduceSum { .. } => "ReduceSum",
            Op::CumSum { .. } => "CumSum",
            Op::Cast { .. } => "Cast",
            Op::Equal { .. } => "Equal",
            Op::Greater { .. } => "Greater",
            Op::And { .. } => "And",
            Op::Not { .. } => "Not",
            Op::Where { .. } => "Where",
            Op::RandomUniform { .. } => "RandomUniform",
        }
    }

    /// The operand value names, in order.
    pub fn operands(&self) -> Vec<&str> {
        match self {
            Op::Gather { data, indices, .. } => vec![data, indices],
            Op::MatMul { a, b }
            | Op::Add { a, b }
            | Op::Sub { a, b }
            | Op::Mul { a, b }
            | Op::Div { a, b }
            | Op::Equal { a, b }
            | Op::Greater { a, b }
            | Op::And { a, b } => vec![a, b],
            Op::Reshape { input, .. }
            | Op::Transpose { input, .. }
            | Op::Slice { input, .. }
            | Op::Softmax { input, .. }
            | Op::ArgMax { input, .. }
            | Op::ReduceMax { input, .. }
            | Op::ReduceSum { input, .. }
            | Op::CumSum { input, .. }
            | Op::Cast { input, .. }
            | Op::Not { input } => vec![input],
            Op::Concat { inputs, .. } => inputs.iter().map(String::as_str).collect(),
            Op::Where { cond, a, b } => vec![cond, a, b],
            Op::RandomUniform { seed, counter } => vec![seed, counter],
        }
    }

    /// Mutable access to the operand names (used to rename references).
    pub fn operands_mut(&mut self) -> Vec<&mut String> {
        match self {
            Op::Gather { data, indices, .. } => vec![data, indices],
            Op::MatMul { a, b }
            | Op::Add { a, b }
            | Op::Sub { a, b }
            | Op::Mul { a, b }
            | Op::Div { a, b }
            | Op::Equal { a, b }
            | Op::Greater { a, b }
            | Op::And { a, b } => vec![a, b],
            Op::Reshape { input, .. }
            | Op::Transpose { input, .. }
            | Op::Slice { input, .. }
            | Op::Softmax { input, .. }
            | Op::ArgMax { input, .. }
            | Op::ReduceMax { input, .. }
            | Op::ReduceSum { input, .. }
            | Op::CumSum { input, .. }
            | Op::Cast { input, .. }
            | Op::Not { input } => vec![input],
            Op::Concat { inputs, .. } => inputs.iter_mut().collect(),
            Op::Where { cond, a, b } => vec![cond, a, b],
            Op::RandomUniform { seed, counter } => vec![seed, counter],
        }
    }

    /// Infer the output type from the operand types (in [`Op::operands`] order).
    ///
    /// Errors: a text saying which operand or attribute is wrong.
    pub fn infer(&self, t: &[TypeInfo]) -> Result<TypeInfo, String> {
        if t.iter().any(|x| x.dtype == DType::Kv) {
            return Err("kv values cannot be graph operands".into());
        }
        let numeric = |x: TypeInfo, what: &str| -> Result<(), String> {
            match x.dtype {
                DType::F32 | DType::I64 => Ok(()),
                d => Err(format!("{what} must be f32 or i64, found {d}")),
            }
        };
        let same = |a: TypeInfo, b: TypeInfo| -> Result<(), String> {
            if a.dtype == b.dtype {
                Ok(())
            } else {
                Err(format!(
                    "operands have different dtypes: {} and {}",
                    a.dtype, b.dtype
                ))
            }
        };
        let axis_ok = |axis: i64, rank: usize| norm_axis(axis, rank).map(|_| ());
        Ok(match self {
            Op::Gather { axis, .. } => {
                let (d, i) = (t[0], t[1]);
                if i.dtype != DType::I64 {
                    return Err(format!("indices must be i64, found {}", i.dtype));
                }
                axis_ok(*axis, d.rank)?;
                TypeInfo {
                    dtype: d.dtype,
                    rank: d.rank - 1 + i.rank,
                }
            }
            Op::MatMul { .. } => {
                for (x, n) in t.iter().zip(["a", "b"]) {
                    if x.dtype != DType::F32 || x.rank != 2 {
                        return Err(format!("operand {n} must be f32 rank 2, found {x}"));
                    }
                }
                TypeInfo {
                    dtype: DType::F32,
                    rank: 2,
                }
            }
            Op::Add { .. } | Op::Sub { .. } | Op::Mul { .. } | Op::Div { .. } => {
                same(t[0], t[1])?;
                numeric(t[0], "operands")?;
                TypeInfo {
                    dtype: t[0].dtype,
                    rank: t[0].rank.max(t[1].rank),
                }
            }
            Op::Reshape { shape, .. } => {
                if shape.iter().filter(|&&d| d == -1).count() > 1 {
                    return Err("shape has more than one -1".into());
                }
                if let Some(d) = shape.iter().find(|&&d| d < -1) {
                    return Err(format!("shape has a negative dimension {d}"));
                }
                TypeInfo {
                    dtype: t[0].dtype,
                    rank: shape.len(),
                }
            }
            Op::Transpose { perm, .. } => {
                let mut seen = perm.clone();
                seen.sort_unstable();
                if seen != (0..t[0].rank).collect::<Vec<_>>() {
                    return Err(format!(
                        "perm {perm:?} is not a permutation of the input's {} axes",
                        t[0].rank
                    ));
                }
                t[0]
            }
            Op::Concat { axis, .. } => {
                if t.is_empty() {
                    return Err("Concat needs at least one input".into());
                }
                for x in &t[1..] {
                    if *x != t[0] {
                        return Err(format!("inputs differ: {} and {}", t[0], x));
                    }
                }
                axis_ok(*axis, t[0].rank)?;
                t[0]
            }
            Op::Slice { axis, .. } => {
                axis_ok(*axis, t[0].rank)?;
                t[0]
            }
            Op::Softmax { axis, .. } => {
                if t[0].dtype != DType::F32 {
                    return Err(format!("input must be f32, found {}", t[0].dtype));
                }
                axis_ok(*axis, t[0].rank)?;
                t[0]
            }
            Op::ArgMax { axis, keepdims, .. } => {
                numeric(t[0], "input")?;
                axis_ok(*axis, t[0].rank)?;
                TypeInfo {
                    dtype: DType::I64,
                    rank: if *keepdims { t[0].rank } else { t[0].rank - 1 },
                }
            }
            Op::ReduceMax { axis, keepdims, .. } => {
                axis_ok(*axis, t[0].rank)?;
                TypeInfo {
                    dtype: t[0].dtype,
                    rank: if *keepdims { t[0].rank } else { t[0].rank - 1 },
                }
            }
            Op::ReduceSum { axis, keepdims, .. } => {
                numeric(t[0], "input")?;
                axis_ok(*axis, t[0].rank)?;
                TypeInfo {
                    dtype: t[0].dtype,
                    rank: if *keepdims { t[0].rank } else { t[0].rank - 1 },
                }
            }
            Op::CumSum { axis, .. } => {
                numeric(t[0], "input")?;
                axis_ok(*axis, t[0].rank)?;
                t[0]
            }
            Op::Cast { to, .. } => {
                if *to == DType::Kv {
                    return Err("cannot cast to kv".into());
                }
                TypeInfo {
                    dtype: *to,
                    rank: t[0].rank,
                }
            }
            Op::Equal { .. } => {
                same(t[0], t[1])?;
                TypeInfo {
                    dtype: DType::Bool,
                    rank: t[0].rank.max(t[1].rank),
                }
            }
            Op::Greater { .. } => {
                same(t[0], t[1])?;
                numeric(t[0], "operands")?;
                TypeInfo {
                    dtype: DType::Bool,
                    rank: t[0].rank.max(t[1].rank),
                }
            }
            Op::And { .. } => {
                for x in &t[..2] {
                    if x.dtype != DType::Bool {
                        return Err(format!("operands must be bool, found {}", x.dtype));
                    }
                }
                TypeInfo {
                    dtype: DType::Bool,
                    rank: t[0].rank.max(t[1].rank),
                }
            }
            Op::Not { .. } => {
                if t[0].dtype != DType::Bool {
                    return Err(format!("input must be bool, found {}", t[0].dtype));
                }
                t[0]
            }
            Op::Where { .. } => {
                if t[0].dtype != DType::Bool {
                    return Err(format!("cond must be bool, found {}", t[0].dtype));
                }
                same(t[1], t[2])?;
                TypeInfo {
                    dtype: t[1].dtype,
                    rank: t[0].rank.max(t[1].rank).max(t[2].rank),
                }
            }
            Op::RandomUniform { .. } => {
                for (x, n) in t.iter().zip(["seed", "counter"]) {
                    if x.dtype != DType::I64 || x.rank != 0 {
                        return Err(format!("{n} must be an i64 scalar, found {x}"));
                    }
                }
                TypeInfo {
                    dtype: DType::F32,
                    rank: 0,
                }
            }
        })
    }

    /// Evaluate on concrete operands (in [`Op::operands`] order).
    ///
    /// Errors: a text naming the operand, shape or index at fault.
    pub fn eval(&self, x: &[&Tensor]) -> Result<Tensor, String> {
        match self {
            Op::Gather { axis, .. } => gather(x[0], x[1], *axis),
            Op::MatMul { .. } => match (x[0], x[1]) {
                (Tensor::F32(a), Tensor::F32(b)) => {
                    let a2 = a
                        .view()
                        .into_dimensionality::<ndarray::Ix2>()
                        .map_err(|_| format!("a must be rank 2, got {:?}", a.shape()))?;
                    let b2 = b
                        .view()
                        .into_dimensionality::<ndarray::Ix2>()
                        .map_err(|_| format!("b must be rank 2, got {:?}", b.shape()))?;
                    if a2.ncols() != b2.nrows() {
                        return Err(format!(
                            "inner dimensions differ: a {:?}, b {:?}",
                            a.shape(),
                            b.shape()
                        ));
                    }
                    Ok(Tensor::F32(a2.dot(&b2).into_dyn()))
                }
                _ => Err(type_err(x)),
            },
            Op::Add { .. } => arith(x[0], x[1], |a, b| a + b, |a, b| Ok(a.wrapping_add(b))),
            Op::Sub { .. } => arith(x[0], x[1], |a, b| a - b, |a, b| Ok(a.wrapping_sub(b))),
            Op::Mul { .. } => arith(x[0], x[1], |a, b| a * b, |a, b| Ok(a.wrapping_mul(b))),
            Op::Div { .. } => arith(
                x[0],
                x[1],
                |a, b| a / b,
                |a, b| {
                    a.checked_div(b)
                        .ok_or_else(|| format!("i64 division {a} / {b}"))
                },
            ),
            Op::Reshape { shape, .. } => reshape(x[0], shape),
            Op::Transpose { perm, .. } => {
                if perm.len() != x[0].rank() {
                    return Err(format!(
                        "perm {perm:?} does not match input rank {}",
                        x[0].rank()
                    ));
                }
                Ok(
                    map_tensor!(x[0], a => a.clone().permuted_axes(IxDyn(perm)).as_standard_layout().into_owned()),
                )
            }
            Op::Concat { axis, .. } => concat(x, *axis),
            Op::Slice {
                axis, start, end, ..
            } => {
                let ax = norm_axis(*axis, x[0].rank())?;
                let n = x[0].shape()[ax] as i64;
                let clamp = |i: i64| -> i64 { if i < 0 { (n + i).max(0) } else { i.min(n) } };
                let s = clamp(*start);
                let e = clamp(end.unwrap_or(n)).max(s);
                let sl = NdSlice::from(s as isize..e as isize);
                Ok(map_tensor!(x[0], a => a.slice_axis(Axis(ax), sl).to_owned()))
            }
            Op::Softmax { axis, .. } => match x[0] {
                Tensor::F32(a) => {
                    let ax = norm_axis(*axis, a.ndim())?;
                    let mut out = a.clone();
                    for mut lane in out.lanes_mut(Axis(ax)) {
                        let m = lane.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                        let mut sum = 0.0f32;
                        lane.map_inplace(|v| {
                            *v = (*v - m).exp();
                            sum += *v;
                        });
                        lane.map_inplace(|v| *v /= sum);
                    }
                    Ok(Tensor::F32(out))
                }
                _ => Err(type_err(x)),
            },
            Op::ArgMax { axis, keepdims, .. } => {
                let ax = norm_axis(*axis, x[0].rank())?;
                check_nonempty_axis(x[0], ax)?;
                let out = match x[0] {
                    Tensor::F32(a) => a.map_axis(Axis(ax), |lane| {
                        let mut best: Option<(usize, f32)> = None;
                        for (i, &v) in lane.iter().enumerate() {
                            if v.is_nan() {
                                continue;
                            }
                            if best.is_none_or(|(_, b)| v > b) {
                                best = Some((i, v));
                            }
                        }
                        best.map_or(0, |(i, _)| i as i64)
                    }),
                    Tensor::I64(a) => a.map_axis(Axis(ax), |lane| {
                        let mut best = 0usize;
                        for (i, &v) in lane.iter().enumerate() {
                            if v > lane[best] {
                                best = i;
                            }
                        }
                        best as i64
                    }),
                    Tensor::Bool(_) => return Err(type_err(x)),
                };
                Ok(keep(Tensor::I64(out), ax, *keepdims))
            }
            Op::ReduceMax { axis, keepdims, .. } => {
                let ax = norm_axis(*axis, x[0].rank())?;
                check_nonempty_axis(x[0], ax)?;
                let out = match x[0] {
                    Tensor::F32(a) => Tensor::F32(a.map_axis(Axis(ax), |l| {
                        l.iter().cloned().fold(f32::NEG_INFINITY, f32::max)
                    })),
                    Tensor::I64(a) => Tensor::I64(
                        a.map_axis(Axis(ax), |l| l.iter().cloned().max().unwrap_or(i64::MIN)),
                    ),
                    Tensor::Bool(a) => Tensor::Bool(a.map_axis(Axis(ax), |l| l.iter().any(|&b| b))),
                };
                Ok(keep(out, ax, *keepdims))
            }
            Op::ReduceSum { axis, keepdims, .. } => {
                let ax = norm_axis(*axis, x[0].rank())?;
                let out = match x[0] {
                    Tensor::F32(a) => Tensor::F32(a.sum_axis(Axis(ax))),
                    Tensor::I64(a) => Tensor::I64(
                        a.map_axis(Axis(ax), |l| l.iter().fold(0i64, |s, &v| s.wrapping_add(v))),
                    ),
                    Tensor::Bool(_) => return Err(type_err(x)),
                };
                Ok(keep(out, ax, *keepdims))
            }
            Op::CumSum { axis, .. } => {
                let ax = norm_axis(*axis, x[0].rank())?;
                match x[0] {
                    Tensor::F32(a) => {
                        let mut out = a.clone();
                        out.accumulate_axis_inplace(Axis(ax), |&p, c| *c += p);
                        Ok(Tensor::F32(out))
                    }
                    Tensor::I64(a) => {
                        let mut out = a.clone();
                        out.accumulate_axis_inplace(Axis(ax), |&p, c| *c = c.wrapping_add(p));
                        Ok(Tensor::I64(out))
                    }
                    Tensor::Bool(_) => Err(type_err(x)),
                }
            }
            Op::Cast { to, .. } => cast(x[0], *to),
            Op::Equal { .. } => match (x[0], x[1]) {
                (Tensor::F32(a), Tensor::F32(b)) => zip2(a, b, |p, q| p == q).map(Tensor::Bool),
                (Tensor::I64(a), Tensor::I64(b)) => zip2(a, b, |p, q| p == q).map(Tensor::Bool),
                (Tensor::Bool(a), Tensor::Bool(b)) => zip2(a, b, |p, q| p == q).map(Tensor::Bool),
                _ => Err(type_err(x)),
            },
            Op::Greater { .. } => match (x[0], x[1]) {
                (Tensor::F32(a), Tensor::F32(b)) => zip2(a, b, |p, q| p > q).map(Tensor::Bool),
                (Tensor::I64(a), Tensor::I64(b)) => zip2(a, b, |p, q| p > q).map(Tensor::Bool),
                _ => Err(type_err(x)),
            },
            Op::And { .. } => match (x[0], x[1]) {
                (Tensor::Bool(a), Tensor::Bool(b)) => zip2(a, b, |p, q| *p && *q).map(Tensor::Bool),
                _ => Err(type_err(x)),
            },
            Op::Not { .. } => match x[0] {
                Tensor::Bool(a) => Ok(Tensor::Bool(a.mapv(|b| !b))),
                _ => Err(type_err(x)),
            },
            Op::Where { .. } => {
                let Tensor::Bool(c) = x[0] else {
                    return Err(type_err(x));
                };
                match (x[1], x[2]) {
                    (Tensor::F32(a), Tensor::F32(b)) => select(c, a, b).map(Tensor::F32),
                    (Tensor::I64(a), Tensor::I64(b)) => select(c, a, b).map(Tensor::I64),
                    (Tensor::Bool(a), Tensor::Bool(b)) => select(c, a, b).map(Tensor::Bool),
                    _ => Err(type_err(x)),
                }
            }
            Op::RandomUniform { .. } => {
                let (Tensor::I64(s), Tensor::I64(c)) = (x[0], x[1]) else {
                    return Err(type_err(x));
                };
                let (Some(&s), Some(&c)) = (s.iter().next(), c.iter().next()) else {
                    return Err("seed and counter must each hold one element".into());
                };
                Ok(Tensor::scalar_f32(uniform(s as u64, c as u64)))
            }
        }
    }
}

/// A uniform f32 in `[0, 1)` from SplitMix64 of `seed` mixed with `counter`.
fn uniform(seed: u64, counter: u64) -> f32 {
    let mut z = seed.wrapping_add(counter.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // 24 high bits → exactly representable f32 in [0, 1).
    (z >> 40) as f32 / (1u64 << 24) as f32
}

/// Resolve a possibly negative axis against a rank.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    } else {
        Ok(a as usize)
    }
}

fn type_err(x: &[&Tensor]) -> String {
    let parts: Vec<String> = x
        .iter()
        .map(|t| format!("{} {}", t.dtype(), t.shape_string()))
        .collect();
    format!("unsupported operand types: {}", parts.join(", "))
}

fn check_nonempty_axis(t: &Tensor, ax: usize) -> Result<(), String> {
    if t.shape()[ax] == 0 {
        Err(format!(
            "cannot reduce an empty axis {ax} of shape {}",
            t.shape_string()
        ))
    } else {
        Ok(())
    }
}

fn keep(t: Tensor, ax: usize, keepdims: bool) -> Tensor {
    if !keepdims {
        return t;
    }
    map_tensor!(t, a => a.insert_axis(Axis(ax)))
}

/// numpy broadcast of two shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

fn zip2<A, B, C>(
    a: &ArrayD<A>,
    b: &ArrayD<B>,
    f: impl Fn(&A, &B) -> C,
) -> Result<ArrayD<C>, String> {
    let sh = broadcast_shape(a.shape(), b.shape())?;
    let av = a.broadcast(IxDyn(&sh)).ok_or("broadcast failed")?;
    let bv = b.broadcast(IxDyn(&sh)).ok_or("broadcast failed")?;
    Ok(Zip::from(&av).and(&bv).map_collect(f))
}

fn select<T: Clone>(c: &ArrayD<bool>, a: &ArrayD<T>, b: &ArrayD<T>) -> Result<ArrayD<T>, String> {
    let sh = broadcast_shape(&broadcast_shape(c.shape(), a.shape())?, b.shape())?;
    let cv = c.broadcast(IxDyn(&sh)).ok_or("broadcast failed")?;
    let av = a.broadcast(IxDyn(&sh)).ok_or("broadcast failed")?;
    let bv = b.broadcast(IxDyn(&sh)).ok_or("broadcast failed")?;
    Ok(Zip::from(&cv)
        .and(&av)
        .and(&bv)
        .map_collect(|&c, p, q| if c { p.clone() } else { q.clone() }))
}

fn arith(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(f32, f32) -> f32,
    g: impl Fn(i64, i64) -> Result<i64, String>,
) -> Result<Tensor, String> {
    match (a, b) {
        (Tensor::F32(x), Tensor::F32(y)) => zip2(x, y, |p, q| f(*p, *q)).map(Tensor::F32),
        (Tensor::I64(x), Tensor::I64(y)) => {
            let r = zip2(x, y, |p, q| g(*p, *q))?;
            let mut out = Vec::with_capacity(r.len());
            for v in r.iter() {
                out.push(v.clone()?);
            }
            Ok(Tensor::I64(
                ArrayD::from_shape_vec(r.raw_dim(), out).map_err(|e| e.to_string())?,
            ))
        }
        _ => Err(type_err(&[a, b])),
    }
}

fn gather(data: &Tensor, indices: &Tensor, axis: i64) -> Result<Tensor, String> {
    let ax = norm_axis(axis, data.rank())?;
    let Tensor::I64(idx) = indices else {
        return Err(format!("indices must be i64, found {}", indices.dtype()));
    };
    let n = data.shape()[ax] as i64;
    let mut flat = Vec::with_capacity(idx.len());
    for &i in idx.iter() {
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(format!(
                "index {i} is out of range for axis {ax} of size {n}"
            ));
        }
        flat.push(j as usize);
    }
    let mut shape: Vec<usize> = data.shape()[..ax].to_vec();
    shape.extend_from_slice(idx.shape());
    shape.extend_from_slice(&data.shape()[ax + 1..]);
    let out = map_tensor!(data, a => {
        let s = a.select(Axis(ax), &flat);
        let s = s.as_standard_layout().into_owned();
        s.into_shape_with_order(IxDyn(&shape)).map_err(|e| e.to_string())?
    });
    Ok(out)
}

fn reshape(t: &Tensor, shape: &[i64]) -> Result<Tensor, String> {
    let total = t.len();
    let known: usize = shape
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .product();
    let mut dims = Vec::with_capacity(shape.len());
    for &d in shape {
        if d == -1 {
            if known == 0 || !total.is_multiple_of(known) {
                return Err(format!("cannot infer -1 in {shape:?} for {total} elements"));
            }
            dims.push(total / known);
        } else if d < 0 {
            return Err(format!("negative dimension {d} in {shape:?}"));
        } else {
            dims.push(d as usize);
        }
    }
    if dims.iter().product::<usize>() != total {
        return Err(format!(
            "cannot reshape {} ({total} elements) to {dims:?}",
            t.shape_string()
        ));
    }
    Ok(
        map_tensor!(t, a => a.as_standard_layout().into_owned().into_shape_with_order(IxDyn(&dims)).map_err(|e| e.to_string())?),
    )
}

fn concat(x: &[&Tensor], axis: i64) -> Result<Tensor, String> {
    let first = x.first().ok_or("Concat needs at least one input")?;
    let ax = norm_axis(axis, first.rank())?;
    macro_rules! cat {
        ($variant:ident) => {{
            let mut views = Vec::with_capacity(x.len());
            for t in x {
                match t {
                    Tensor::$variant(a) => views.push(a.view()),
                    _ => return Err(type_err(x)),
                }
            }
            Tensor::$variant(ndarray::concatenate(Axis(ax), &views).map_err(|_| {
                let shapes: Vec<String> = x.iter().map(|t| t.shape_string()).collect();
                format!(
                    "shapes {} do not concatenate along axis {ax}",
                    shapes.join(", ")
                )
            })?)
        }};
    }
    Ok(match first {
        Tensor::F32(_) => cat!(F32),
        Tensor::I64(_) => cat!(I64),
        Tensor::Bool(_) => cat!(Bool),
    })
}

fn cast(t: &Tensor, to: DType) -> Result<Tensor, String> {
    Ok(match (t, to) {
        (Tensor::F32(a), DType::F32) => Tensor::F32(a.clone()),
        (Tensor::F32(a), DType::I64) => Tensor::I64(a.mapv(|v| v as i64)),
        (Tensor::F32(a), DType::Bool) => Tensor::Bool(a.mapv(|v| v != 0.0)),
        (Tensor::I64(a), DType::F32) => Tensor::F32(a.mapv(|v| v as f32)),
        (Tensor::I64(a), DType::I64) => Tensor::I64(a.clone()),
        (Tensor::I64(a), DType::Bool) => Tensor::Bool(a.mapv(|v| v != 0)),
        (Tensor::Bool(a), DType::F32) => Tensor::F32(a.mapv(|v| if v { 1.0 } else { 0.0 })),
        (Tensor::Bool(a), DType::I64) => Tensor::I64(a.mapv(i64::from)),
        (Tensor::Bool(a), DType::Bool) => Tensor::Bool(a.clone()),
        (_, DType::Kv) => return Err("cannot cast to kv".into()),
    })
}
