//! Graph weights read from a package's GGUF file: the tensor index (names and shapes) and f32 loading of F32/F16 tensors.

use std::sync::Arc;

use half::f16;

use super::error::BoxError;
use super::native::Weights;
use super::validate::WeightIndex;
use super::value::Tensor;
use crate::gguf::{GgmlType, GgufFile};

/// A GGUF file as a [`Weights`] source. Shapes are the GGUF dims reversed (outermost
/// first), so a GGUF matrix with dims `[in, out]` is the row-major tensor `[out, in]`.
#[derive(Debug, Clone)]
pub struct GgufWeights {
    file: Arc<GgufFile>,
    index: WeightIndex,
}

impl GgufWeights {
    /// Index the tensors of `file`. Errors on a dimension that does not fit in usize.
    pub fn new(file: Arc<GgufFile>) -> Result<GgufWeights, BoxError> {
        let mut index = WeightIndex::new();
        for t in file.tensors() {
            let mut shape = Vec::with_capacity(t.dims.len());
            for &d in t.dims.iter().rev() {
                shape.push(usize::try_from(d).map_err(|_| {
                    format!("tensor '{}' dimension {d} does not fit in usize", t.name)
                })?);
            }
            index.insert(t.name.clone(), shape);
        }
        Ok(GgufWeights { file, index })
    }

    /// The underlying file.
    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }
}

impl Weights for GgufWeights {
    fn index(&self) -> &WeightIndex {
        &self.index
    }

    /// F32 and F16 tensors only (graph weights are small); other types are an error
    /// naming the tensor and its type.
    fn load_f32(&self, name: &str) -> Result<Tensor, BoxError> {
        let view = self.file.require_tensor(name)?;
        let shape = self
            .index
            .get(name)
            .ok_or_else(|| format!("tensor '{name}' is not indexed"))?;
        let data: Vec<f32> = match view.info.ty {
            GgmlType::F32 => view
                .data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            GgmlType::F16 => view
                .data
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(format!(
                    "tensor '{name}' has type {other:?}; graph weights must be F32 or F16"
                )
                .into());
            }
        };
        Tensor::f32(shape, data)
            .ok_or_else(|| format!("tensor '{name}' data does not fill its shape {shape:?}").into())
    }
}
