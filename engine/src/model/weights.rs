//! Binding of GGUF tensors to the decoder layouts: names, shapes and types checked at load.

use std::sync::Arc;

use crate::gguf::{GgmlType, GgufFile};
use crate::isa::Isa;
use crate::kernels::matmul::packed::PackedWeights;
use crate::kernels::matmul::{WeightMatrix, uses_packed};
use crate::quant;

use super::{Arch, LlamaConfig, ModelError};

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

/// The attention input projections: three matrices, or one fused `attn_qkv` (Phi-3)
/// whose output rows are Q, then K, then V.
#[derive(Debug, Clone)]
pub enum QkvWeights {
    /// `attn_q` `[n_heads·head_dim, hidden]`, `attn_k` and `attn_v`
    /// `[n_kv_heads·head_dim, hidden]`.
    Split {
        /// Query projection.
        q: MatrixRef,
        /// Key projection.
        k: MatrixRef,
        /// Value projection.
        v: MatrixRef,
    },
    /// `attn_qkv` `[(n_heads + 2·n_kv_heads)·head_dim, hidden]`.
    Fused(MatrixRef),
}

/// The FFN input projections: gate and up, or one fused `ffn_up` of `2·ffn` rows (Phi-3)
/// whose first `ffn` output rows are the gate and the rest the up projection.
#[derive(Debug, Clone)]
pub enum GateUpWeights {
    /// `ffn_gate` and `ffn_up`, each `[ffn, hidden]`.
    Split {
        /// Gate projection.
        gate: MatrixRef,
        /// Up projection.
        up: MatrixRef,
    },
    /// `ffn_up` `[2·ffn, hidden]`.
    Fused(MatrixRef),
}

/// One transformer block's weights.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// RMSNorm weight before attention, `[hidden]`.
    pub attn_norm: Vec<f32>,
    /// Q, K and V projections.
    pub qkv: QkvWeights,
    /// Biases of Q, K and V (`attn_q.bias`, ... : Qwen2), `[q_width]`, `[kv_width]`,
    /// `[kv_width]`.
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMSNorm weights of Q and K (`attn_q_norm`, `attn_k_norm`: Qwen3, Gemma 3),
    /// each `[head_dim]`.
    pub qk_norm: Option<[Vec<f32>; 2]>,
    /// Attention output projection `[hidden, n_heads·head_dim]`.
    pub wo: MatrixRef,
    /// RMSNorm of the attention output before the residual add (`post_attention_norm`:
    /// Gemma), `[hidden]`.
    pub attn_post_norm: Option<Vec<f32>>,
    /// RMSNorm weight before the FFN, `[hidden]`.
    pub ffn_norm: Vec<f32>,
    /// FFN gate and up projections.
    pub gate_up: GateUpWeights,
    /// FFN down projection `[hidden, ffn]`.
    pub w_down: MatrixRef,
    /// RMSNorm of the FFN output before the residual add (`post_ffw_norm`: Gemma), `[hidden]`.
    pub ffn_post_norm: Option<Vec<f32>>,
}

impl LayerWeights {
    /// Every matrix of the block, in pass order.
    pub fn matrices(&self) -> Vec<&MatrixRef> {
        let mut out = Vec::with_capacity(7);
        match &self.qkv {
            QkvWeights::Split { q, k, v } => out.extend([q, k, v]),
            QkvWeights::Fused(m) => out.push(m),
        }
        out.push(&self.wo);
        match &self.gate_up {
            GateUpWeights::Split { gate, up } => out.extend([gate, up]),
            GateUpWeights::Fused(m) => out.push(m),
        }
        out.push(&self.w_down);
        out
    }

    /// Every norm weight of the block (attention, FFN, and the optional post and Q/K norms).
    pub fn norms(&self) -> Vec<&[f32]> {
        let mut out: Vec<&[f32]> = vec![&self.attn_norm, &self.ffn_norm];
        out.extend(self.attn_post_norm.as_deref());
        out.extend(self.ffn_post_norm.as_deref());
        if let Some([q, k]) = &self.qk_norm {
            out.extend([q.as_slice(), k.as_slice()]);
        }
        if let Some(b) = &self.qkv_bias {
            out.extend(b.iter().map(Vec::as_slice));
        }
        out
    }
}

/// All weights of a decoder, bound to the GGUF file that holds them.
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
    /// Llama 3 RoPE frequency factors (`rope_freqs.weight`, `[head_dim / 2]`): pair `i`'s
    /// angle is divided by `rope_freqs[i]`.
    pub rope_freqs: Option<Vec<f32>>,
    /// 16-row packings of the Q4_1 and Q8_0 matrices, by position in the file's tensor
    /// table (see [`Weights::pack`]); empty before packing.
    packed: Vec<Option<PackedWeights>>,
}

impl Weights {
    /// Bind and check every tensor the architecture's layout needs (`cfg.arch`). Fills `cfg.vocab` from the
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
        let d = cfg.head_dim;
        let arch = cfg.arch;
        let token_embd = matrix(&file, "token_embd.weight", vocab, h)?;
        let mut layers = Vec::with_capacity(cfg.n_layers.min(4096));
        for l in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{l}.{s}.weight");
            let b = |s: &str| format!("blk.{l}.{s}.bias");
            let qkv = if arch == Arch::Phi3 && file.tensor(&n("attn_qkv")).is_some() {
                QkvWeights::Fused(matrix(&file, &n("attn_qkv"), q + 2 * kv, h)?)
            } else {
                QkvWeights::Split {
                    q: matrix(&file, &n("attn_q"), q, h)?,
                    k: matrix(&file, &n("attn_k"), kv, h)?,
                    v: matrix(&file, &n("attn_v"), kv, h)?,
                }
            };
            let qkv_bias = if arch == Arch::Qwen2 {
                Some([
                    vector(&file, &b("attn_q"), q)?,
                    vector(&file, &b("attn_k"), kv)?,
                    vector(&file, &b("attn_v"), kv)?,
                ])
            } else {
                None
            };
            let qk_norm = if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
                Some([
                    vector(&file, &n("attn_q_norm"), d)?,
                    vector(&file, &n("attn_k_norm"), d)?,
                ])
            } else {
                None
            };
            let gate_up = if arch == Arch::Phi3 {
                GateUpWeights::Fused(matrix(&file, &n("ffn_up"), 2 * f, h)?)
            } else {
                GateUpWeights::Split {
                    gate: matrix(&file, &n("ffn_gate"), f, h)?,
                    up: matrix(&file, &n("ffn_up"), f, h)?,
                }
            };
            let post = |s: &str| -> Result<Option<Vec<f32>>, ModelError> {
                if arch.is_gemma() {
                    Ok(Some(vector(&file, &n(s), h)?))
                } else {
                    Ok(None)
                }
            };
            layers.push(LayerWeights {
                attn_norm: vector(&file, &n("attn_norm"), h)?,
                qkv,
                qkv_bias,
                qk_norm,
                wo: matrix(&file, &n("attn_output"), h, q)?,
                attn_post_norm: post("post_attention_norm")?,
                ffn_norm: vector(&file, &n("ffn_norm"), h)?,
                gate_up,
                w_down: matrix(&file, &n("ffn_down"), h, f)?,
                ffn_post_norm: post("post_ffw_norm")?,
            });
        }
        // Phi-3's LongRoPE factors (128k-context files) are not implemented: refuse the file
        // rather than run it with the wrong angles.
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            if file.tensor(name).is_some() {
                return Err(ModelError::UnsupportedTensor {
                    name: name.to_string(),
                    reason: "LongRoPE frequency factors are not implemented".into(),
                });
            }
        }
        let rope_freqs = if file.tensor("rope_freqs.weight").is_some() {
            Some(vector(&file, "rope_freqs.weight", d / 2)?)
        } else {
            None
        };
        let output_norm = vector(&file, "output_norm.weight", h)?;
        // llama.cpp's Gemma 2 graph always reads the token embedding as the LM head.
        let (lm_head, tied) = if file.tensor("output.weight").is_some() && arch != Arch::Gemma2 {
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
            rope_freqs,
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
            for m in lw.matrices() {
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
