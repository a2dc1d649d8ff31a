//! Binding of GGUF tensors to the Llama layout: names, shapes and types checked at load.

use std::sync::Arc;

use crate::gguf::{GgmlType, GgufFile};
use crate::isa::Isa;
use crate::kernels::matmul::packed::PackedWeights;
use crate::kernels::matmul::{WeightMatrix, uses_packed};
use crate::quant;

use super::{LlamaConfig, ModelError};

/// A weight matrix `[rows = outputs, cols = inputs]` held in the memory-mapped file,
/// addressed by its tensor name and, resolved at load, its position in the file's tensor
/// table. Checked once at load; [`Weights::matrix`] rebuilds the zero-copy view on use
/// without looking the name up (a decode step builds some two hundred views).
#[derive(Debug, Clone)]
pub struct MatrixRef {
    /// GGUF tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Storage type.
    pub ty: GgmlType,
    /// Output rows.
    pub rows: usize,
    /// Input columns.
    pub cols: usize,
    /// Position in [`GgufFile::tensors`].
    index: usize,
}

/// One transformer block's weights.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// RMSNorm weight before attention, `[hidden]`.
    pub attn_norm: Vec<f32>,
    /// Query projection `[n_heads·head_dim, hidden]`.
    pub wq: MatrixRef,
    /// Key projection `[n_kv_heads·head_dim, hidden]`.
    pub wk: MatrixRef,
    /// Value projection `[n_kv_heads·head_dim, hidden]`.
    pub wv: MatrixRef,
    /// Attention output projection `[hidden, n_heads·head_dim]`.
    pub wo: MatrixRef,
    /// RMSNorm weight before the FFN, `[hidden]`.
    pub ffn_norm: Vec<f32>,
    /// FFN gate projection `[ffn, hidden]`.
    pub w_gate: MatrixRef,
    /// FFN up projection `[ffn, hidden]`.
    pub w_up: MatrixRef,
    /// FFN down projection `[hidden, ffn]`.
    pub w_down: MatrixRef,
}

/// All weights of a Llama model, bound to the GGUF file that holds them.
#[derive(Debug)]
pub struct Weights {
    file: Arc<GgufFile>,
    /// Token embedding `[vocab, hidden]` (`token_embd.weight`).
    pub token_embd: MatrixRef,
    /// Per-block weights, `n_layers` of them.
    pub layers: Vec<LayerWeights>,
    /// Final RMSNorm weight `[hidden]` (`output_norm.weight`).
    pub output_norm: Vec<f32>,
    /// LM head `[vocab, hidden]`: `output.weight`, or the token embedding when the model
    /// ties them (no `output.weight` in the file).
    pub lm_head: MatrixRef,
    /// Whether the LM head is the token embedding.
    pub tied_embeddings: bool,
    /// 16-row packings of the Q4_1 and Q8_0 matrices, by position in the file's tensor
    /// table (see [`Weights::pack`]); empty before packing.
    packed: Vec<Option<PackedWeights>>,
}

impl Weights {
    /// Bind and check every tensor the Llama layout needs. Fills `cfg.vocab` from the
    /// token embedding when the metadata did not give it.
    ///
    /// Errors name the tensor: [`ModelError::MissingTensor`], [`ModelError::TensorShape`]
    /// (expected and found GGUF dims), [`ModelError::UnsupportedTensorType`].
    pub fn bind(file: Arc<GgufFile>, cfg: &mut LlamaConfig) -> Result<Weights, ModelError> {
        let embd = file
            .tensor("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor {
                name: "token_embd.weight".into(),
            })?;
        let dims = &embd.info.dims;
        if dims.len() != 2 || dims[0] != cfg.hidden as u64 {
            return Err(ModelError::TensorShape {
                name: "token_embd.weight".into(),
                expected: format!("[{}, vocab]", cfg.hidden),
                found: format!("{dims:?}"),
            });
        }
        let vocab = usize::try_from(dims[1]).map_err(|_| ModelError::TensorShape {
            name: "token_embd.weight".into(),
            expected: "a vocabulary that fits in usize".into(),
            found: format!("{dims:?}"),
        })?;
        if cfg.vocab != 0 && cfg.vocab != vocab {
            return Err(ModelError::TensorShape {
                name: "token_embd.weight".into(),
                expected: format!("[{}, {}] (llama.vocab_size)", cfg.hidden, cfg.vocab),
                found: format!("{dims:?}"),
            });
        }
        cfg.vocab = vocab;

        let (h, q, kv, f) = (cfg.hidden, cfg.q_width(), cfg.kv_width(), cfg.ffn);
        let token_embd = matrix(&file, "token_embd.weight", vocab, h)?;
        let mut layers = Vec::with_capacity(cfg.n_layers.min(4096));
        for l in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{l}.{s}.weight");
            layers.push(LayerWeights {
                attn_norm: vector(&file, &n("attn_norm"), h)?,
                wq: matrix(&file, &n("attn_q"), q, h)?,
                wk: matrix(&file, &n("attn_k"), kv, h)?,
                wv: matrix(&file, &n("attn_v"), kv, h)?,
                wo: matrix(&file, &n("attn_output"), h, q)?,
                ffn_norm: vector(&file, &n("ffn_norm"), h)?,
                w_gate: matrix(&file, &n("ffn_gate"), f, h)?,
                w_up: matrix(&file, &n("ffn_up"), f, h)?,
                w_down: matrix(&file, &n("ffn_down"), h, f)?,
            });
        }
        let output_norm = vector(&file, "output_norm.weight", h)?;
        let (lm_head, tied) = if file.tensor("output.weight").is_some() {
            (matrix(&file, "output.weight", vocab, h)?, false)
        } else {
            (token_embd.clone(), true)
        };
        Ok(Weights {
            file,
            token_embd,
            layers,
            output_norm,
            lm_head,
            tied_embeddings: tied,
            packed: Vec::new(),
        })
    }

    /// The zero-copy view of a bound matrix, with its packing if [`Weights::pack`] made one.
    pub fn matrix(&self, m: &MatrixRef) -> WeightMatrix<'_> {
        let view = self
            .file
            .tensor_at(m.index)
            .expect("bound tensors stay in the file they were bound from");
        let w = WeightMatrix::new(m.ty, m.rows, m.cols, view.data)
            .expect("bound tensors were checked at load");
        match self.packed.get(m.index) {
            Some(Some(p)) => w.with_packed(p),
            _ => w,
        }
    }

    /// Pack every block matrix and the LM head whose type has packed kernels on `isa`
    /// ([`uses_packed`]) and whose rows are whole 16-row groups ([`PackedWeights::pack`]),
    /// for the kernels that read one weight row per vector lane. The packings (as many
    /// bytes as those matrices) take the place of the matrices' pages of the file, which
    /// are handed back to the system ([`GgufFile::release_tensor_pages`]), so the resident
    /// weights stay about one file. Returns the bytes packed.
    pub fn pack(&mut self, isa: Isa) -> usize {
        let mut packed: Vec<Option<PackedWeights>> = Vec::new();
        packed.resize_with(self.file.tensors().len(), || None);
        for lw in &self.layers {
            for m in [
                &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down,
            ] {
                if !uses_packed(isa, m.ty) {
                    continue;
                }
                if let Some(p) = PackedWeights::pack(&self.matrix(m)) {
                    packed[m.index] = Some(p);
                }
            }
        }
        if uses_packed(isa, self.lm_head.ty)
            && let Some(p) = PackedWeights::pack(&self.matrix(&self.lm_head))
        {
            packed[self.lm_head.index] = Some(p);
        }
        // The packings replace those matrices' bytes in the file for every product, so
        // the file's pages of them go back to the system (they would double the resident
        // weights); the tied embedding's rows read later fault in again one by one.
        for (index, p) in packed.iter().enumerate() {
            if p.is_some() {
                self.file.release_tensor_pages(index);
            }
        }
        let bytes = packed.iter().flatten().map(PackedWeights::bytes).sum();
        self.packed = packed;
        bytes
    }

    /// The GGUF file the weights live in.
    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }
}

fn matrix(file: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<MatrixRef, ModelError> {
    let missing = || ModelError::MissingTensor {
        name: name.to_string(),
    };
    let index = file.tensor_index(name).ok_or_else(missing)?;
    let view = file.tensor_at(index).ok_or_else(missing)?;
    let dims = &view.info.dims;
    if dims.len() != 2 || dims[0] != cols as u64 || dims[1] != rows as u64 {
        return Err(ModelError::TensorShape {
            name: name.to_string(),
            expected: format!("[{cols}, {rows}]"),
            found: format!("{dims:?}"),
        });
    }
    let ty = view.info.ty;
    if !quant::supported(ty) {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_string(),
            ty,
        });
    }
    WeightMatrix::new(ty, rows, cols, view.data).map_err(|e| ModelError::Tensor {
        name: name.to_string(),
        message: e.to_string(),
    })?;
    Ok(MatrixRef {
        name: name.to_string(),
        ty,
        rows,
        cols,
        index,
    })
}

fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let view = file.tensor(name).ok_or_else(|| ModelError::MissingTensor {
        name: name.to_string(),
    })?;
    let dims = &view.info.dims;
    if dims.len() != 1 || dims[0] != len as u64 {
        return Err(ModelError::TensorShape {
            name: name.to_string(),
            expected: format!("[{len}]"),
            found: format!("{dims:?}"),
        });
    }
    let ty = view.info.ty;
    if !quant::supported(ty) {
        return Err(ModelError::UnsupportedTensorType {
            name: name.to_string(),
            ty,
        });
    }
    let mut out = vec![0.0; len];
    quant::dequantize(ty, view.data, &mut out).map_err(|e| ModelError::Tensor {
        name: name.to_string(),
        message: e.to_string(),
    })?;
    Ok(out)
}
