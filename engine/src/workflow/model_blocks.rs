//! The decode core's Llama [`Model`] as the workflow's native blocks, with one paged KV cache sequence per KV state.

use std::any::Any;
use std::sync::Arc;

use super::error::BoxError;
use super::native::{KvGeometry, KvState, NativeBlocks};
use crate::gguf::GgufFile;
use crate::kernels::matmul::Cpu;
use crate::kv::{KvCache, KvDtype, SeqId};
use crate::model::{Model, ModelError};

/// `token_embedding`, `llama_decoder` and `lm_head` of a loaded [`Model`].
#[derive(Debug)]
pub struct ModelBlocks {
    model: Arc<Model>,
    kv_dtype: KvDtype,
}

impl ModelBlocks {
    /// Bind the Llama weights of an opened GGUF file on `cpu`.
    pub fn new(file: Arc<GgufFile>, cpu: Cpu) -> Result<ModelBlocks, ModelError> {
        Ok(ModelBlocks::from_model(Arc::new(Model::from_file(
            file, cpu,
        )?)))
    }

    /// Wrap an already loaded model (shared with a decode core), with KV states of the
    /// decode core's default element type ([`crate::kv::KV_DTYPE`]).
    pub fn from_model(model: Arc<Model>) -> ModelBlocks {
        ModelBlocks {
            model,
            kv_dtype: crate::kv::KV_DTYPE,
        }
    }

    /// The same blocks with KV states of element type `dtype` (it sets
    /// [`NativeBlocks::kv_geometry`]'s bytes per element).
    pub fn with_kv_dtype(self, dtype: KvDtype) -> ModelBlocks {
        ModelBlocks {
            kv_dtype: dtype,
            ..self
        }
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }
}

/// One sequence of a private paged KV cache sized for one invocation.
struct ModelKv {
    cache: KvCache,
    seq: SeqId,
}

impl KvState for ModelKv {
    fn positions(&self) -> usize {
        self.cache.len(self.seq)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl NativeBlocks for ModelBlocks {
    fn hidden(&self) -> usize {
        self.model.config().hidden
    }

    fn vocab(&self) -> usize {
        self.model.config().vocab
    }

    fn kv_geometry(&self) -> KvGeometry {
        let c = self.model.config();
        KvGeometry {
            n_layers: c.n_layers,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            elem_bytes: self.kv_dtype.size(),
        }
    }

    fn new_kv(&self, max_positions: usize) -> Result<Box<dyn KvState>, BoxError> {
        let mut cache = KvCache::new(self.model.kv_config(max_positions, self.kv_dtype))?;
        let seq = cache.create_sequence();
        Ok(Box::new(ModelKv { cache, seq }))
    }

    fn token_embedding(&self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        Ok(self.model.embed(tokens)?)
    }

    fn llama_decoder(&self, x: &mut [f32], kv: &mut dyn KvState) -> Result<(), BoxError> {
        let h = self.hidden();
        if x.is_empty() || !x.len().is_multiple_of(h) {
            return Err(
                format!("hidden states of {} values are not [n >= 1, {h}]", x.len()).into(),
            );
        }
        let state = kv
            .as_any_mut()
            .downcast_mut::<ModelKv>()
            .ok_or("KV state was not created by this model")?;
        self.model.decoder(x, &mut state.cache, state.seq)?;
        Ok(())
    }

    fn lm_head(&self, x: &[f32]) -> Result<Vec<f32>, BoxError> {
        let h = self.hidden();
        if !x.len().is_multiple_of(h) {
            return Err(format!("hidden states of {} values are not [n, {h}]", x.len()).into());
        }
        Ok(self.model.lm_head(x))
    }
}
