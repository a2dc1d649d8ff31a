//! The native-block interface: the decode core's `token_embedding`, `llama_decoder` and `lm_head` behind a trait, and weight sources for graphs.

use std::any::Any;
use std::collections::BTreeMap;

use super::error::BoxError;
use super::validate::WeightIndex;
use super::value::Tensor;

/// KV geometry of a `llama_decoder` block (the scheduler's type); it sets the package's
/// bytes per token.
pub use crate::scheduler::KvGeometry;

/// One sequence's KV state inside a native backend (all layers).
pub trait KvState: Send {
    /// Positions the state holds.
    fn positions(&self) -> usize;
    /// Downcast hook for the backend that created the state.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The native blocks of a decoder model.
///
/// Shapes are row-major: `hidden` is `[n, hidden]`, logits `[n, vocab]`.
pub trait NativeBlocks: Send + Sync {
    /// Hidden size.
    fn hidden(&self) -> usize;
    /// Vocabulary size.
    fn vocab(&self) -> usize;
    /// KV geometry of the decoder.
    fn kv_geometry(&self) -> KvGeometry;
    /// A fresh, empty KV state able to hold `max_positions` positions.
    fn new_kv(&self, max_positions: usize) -> Result<Box<dyn KvState>, BoxError>;
    /// `token_embedding`: `[n]` ids → `[n, hidden]`.
    fn token_embedding(&self, tokens: &[u32]) -> Result<Vec<f32>, BoxError>;
    /// `llama_decoder`: all layers over the next `n` positions of `kv`, in place on
    /// `x` (`[n, hidden]`); K/V rows are appended to `kv`.
    fn llama_decoder(&self, x: &mut [f32], kv: &mut dyn KvState) -> Result<(), BoxError>;
    /// `lm_head`: `[n, hidden]` → `[n, vocab]` logits.
    fn lm_head(&self, x: &[f32]) -> Result<Vec<f32>, BoxError>;
}

/// A source of named f32 tensors for graph components (a package's weights file).
pub trait Weights: Send + Sync {
    /// Every tensor's name and shape (outermost first).
    fn index(&self) -> &WeightIndex;
    /// A tensor as f32 (dequantized if stored otherwise), shape as in [`Weights::index`].
    fn load_f32(&self, name: &str) -> Result<Tensor, BoxError>;
}

/// In-memory weights (tests, synthetic packages).
#[derive(Debug, Clone, Default)]
pub struct MemWeights {
    index: WeightIndex,
    tensors: BTreeMap<String, Tensor>,
}

impl MemWeights {
    /// Empty.
    pub fn new() -> MemWeights {
        MemWeights::default()
    }

    /// Add a tensor (any dtype; [`Weights::load_f32`] errors on a non-f32 one).
    pub fn insert(&mut self, name: &str, t: Tensor) -> &mut Self {
        self.index.insert(name.to_string(), t.shape().to_vec());
        self.tensors.insert(name.to_string(), t);
        self
    }

    /// Add a name with a shape only (for native blocks, which bind by prefix).
    pub fn declare(&mut self, name: &str, shape: &[usize]) -> &mut Self {
        self.index.insert(name.to_string(), shape.to_vec());
        self
    }
}

impl Weights for MemWeights {
    fn index(&self) -> &WeightIndex {
        &self.index
    }

    fn load_f32(&self, name: &str) -> Result<Tensor, BoxError> {
        match self.tensors.get(name) {
            Some(t @ Tensor::F32(_)) => Ok(t.clone()),
            Some(t) => Err(format!("tensor '{name}' is {}, not f32", t.dtype()).into()),
            None => Err(format!("tensor '{name}' has no data").into()),
        }
    }
}
