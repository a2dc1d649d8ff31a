//! Decoder hyper-parameters of every supported architecture, read from GGUF metadata (never hard-coded).

use crate::gguf::{GgufError, Metadata};
use crate::kernels::rope::RopeStyle;

use super::ModelError;

/// Architecture names (`general.architecture`) this core runs. Mistral files are `llama`.
pub const SUPPORTED_ARCHITECTURES: &[&str] =
    &["llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"];

/// The decoder families this core runs, each as llama.cpp builds its graph
/// (`src/models/<arch>.cpp` of llama.cpp, the version llama-cpp-python 0.3.36 vendors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `llama` (also Mistral, SmolLM2, Llama 3.x): pre-norm, SwiGLU, adjacent-pair RoPE,
    /// optional `rope_freqs.weight` (Llama 3 rope scaling).
    Llama,
    /// `qwen2` (Qwen2, Qwen2.5): Llama with biases on the Q, K and V projections and
    /// rotate-half RoPE.
    Qwen2,
    /// `qwen3`: Llama with a per-head RMSNorm of Q and K before RoPE, rotate-half RoPE.
    Qwen3,
    /// `gemma2`: embeddings scaled by √hidden, GELU-gated FFN, norms after attention and
    /// after the FFN, attention-score and final-logit soft-capping, sliding-window
    /// attention on every other layer (even layers).
    Gemma2,
    /// `gemma3`: Gemma 2 without soft-capping of scores, with Q/K RMSNorm, five
    /// sliding-window layers to one global, and a separate RoPE base for the local layers.
    Gemma3,
    /// `phi3` (Phi-3, Phi-3.5 mini): fused QKV (`attn_qkv`) and gate-up (`ffn_up` of
    /// `2 · ffn` rows) projections, rotate-half RoPE.
    Phi3,
}

impl Arch {
    fn parse(name: &str) -> Option<Arch> {
        Some(match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma2" => Arch::Gemma2,
            "gemma3" => Arch::Gemma3,
            "phi3" => Arch::Phi3,
            _ => return None,
        })
    }

    /// The RoPE pairing llama.cpp uses for this architecture (`llama_model_rope_type`):
    /// adjacent pairs for `llama` (its converter permutes Q and K), rotate-half for the rest.
    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama => RopeStyle::Adjacent,
            _ => RopeStyle::RotateHalf,
        }
    }

    /// Whether the file holds Gemma's extra norms, √hidden embedding scale and GELU FFN.
    pub fn is_gemma(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3)
    }
}

/// The FFN gate's activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `silu(gate) · up` (SwiGLU).
    Silu,
    /// `gelu_tanh(gate) · up` (GeGLU, Gemma).
    GeluTanh,
}

/// Hyper-parameters of a decoder, as declared by the GGUF metadata keys
/// `<arch>.block_count`, `<arch>.embedding_length`, `<arch>.feed_forward_length`,
/// `<arch>.attention.head_count`, `<arch>.attention.head_count_kv`,
/// `<arch>.attention.key_length`, `<arch>.rope.freq_base`, `<arch>.rope.freq_base_swa`,
/// `<arch>.rope.scaling.type` / `.factor`, `<arch>.attention.layer_norm_rms_epsilon`,
/// `<arch>.attention.sliding_window`, `<arch>.attn_logit_softcapping`,
/// `<arch>.final_logit_softcapping`, `<arch>.context_length` and
/// `<arch>.rope.dimension_count` (llama.cpp's naming).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture`.
    pub architecture: String,
    /// The family that name selects.
    pub arch: Arch,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Residual stream width (elements).
    pub hidden: usize,
    /// FFN inner width (elements).
    pub ffn: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention when smaller than `n_heads`).
    pub n_kv_heads: usize,
    /// Elements per attention head (`attention.key_length`, else `hidden / n_heads`).
    pub head_dim: usize,
    /// RoPE frequency base (global layers).
    pub rope_base: f32,
    /// RoPE frequency base of the sliding-window layers (`rope.freq_base_swa`; llama.cpp's
    /// default 10000 for Gemma 3, the global base for Gemma 2).
    pub rope_base_swa: f32,
    /// Linear RoPE scaling of the global layers: positions are multiplied by this
    /// (`1 / rope.scaling.factor` for `rope.scaling.type = linear`, else 1).
    pub rope_freq_scale: f32,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Trained context length (positions).
    pub context_len: usize,
    /// Vocabulary size (rows of the token embedding).
    pub vocab: usize,
    /// Sliding-window size in positions (a query at `p` sees keys `p - window + 1 ..= p`)
    /// of the layers [`LlamaConfig::is_swa`] names; `None` when every layer is global.
    pub sliding_window: Option<usize>,
    /// Per layer: whether it attends over the sliding window only.
    pub swa_layers: Vec<bool>,
    /// Attention scores are `c · tanh(s / c)` (Gemma 2's `attn_logit_softcapping`).
    pub attn_softcap: Option<f32>,
    /// Logits are `c · tanh(l / c)` (Gemma 2's `final_logit_softcapping`).
    pub final_softcap: Option<f32>,
    /// Scale of the attention scores (`1/√head_dim`, or Gemma's `1/√(hidden/heads)` for the
    /// 27B models, as llama.cpp sets `f_attention_scale`).
    pub attn_scale: f32,
    /// Factor the embedding rows are multiplied by (√hidden for Gemma, else 1).
    pub embed_scale: f32,
    /// The FFN gate's activation.
    pub activation: Activation,
}

impl LlamaConfig {
    /// Read the configuration from metadata. `vocab` is filled in later from the token
    /// embedding's shape when the metadata has no `<arch>.vocab_size`.
    ///
    /// Errors: [`ModelError::UnsupportedArchitecture`] naming `general.architecture` for an
    /// architecture this core does not run; [`ModelError::Metadata`] naming a missing or
    /// mistyped key; [`ModelError::BadConfig`] for inconsistent values (zero sizes, heads
    /// that do not divide each other, a partial rotary dimension, a RoPE scaling type this
    /// core does not implement).
    pub fn from_metadata(md: &Metadata) -> Result<LlamaConfig, ModelError> {
        let name = md.get_str("general.architecture")?.to_string();
        let Some(arch) = Arch::parse(&name) else {
            return Err(ModelError::UnsupportedArchitecture {
                architecture: name,
                supported: SUPPORTED_ARCHITECTURES.join(", "),
            });
        };
        let key = |k: &str| format!("{name}.{k}");
        let get = |k: &str| -> Result<usize, ModelError> {
            usize::try_from(md.get_u64(&key(k))?)
                .map_err(|_| ModelError::BadConfig(format!("{} does not fit in usize", key(k))))
        };
        let optional = |k: &str| -> Result<Option<usize>, ModelError> {
            match md.get_u64(&key(k)) {
                Ok(v) => Ok(Some(usize::try_from(v).map_err(|_| {
                    ModelError::BadConfig(format!("{} does not fit in usize", key(k)))
                })?)),
                Err(GgufError::MissingKey { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        let optional_f32 = |k: &str| -> Result<Option<f32>, ModelError> {
            match md.get_f32(&key(k)) {
                Ok(v) => Ok(Some(v)),
                Err(GgufError::MissingKey { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        let n_layers = get("block_count")?;
        let hidden = get("embedding_length")?;
        let ffn = get("feed_forward_length")?;
        let n_heads = get("attention.head_count")?;
        let n_kv_heads = optional("attention.head_count_kv")?.unwrap_or(n_heads);
        let context_len = get("context_length")?;
        let rope_base = optional_f32("rope.freq_base")?.unwrap_or(10_000.0);
        let rms_eps = md.get_f32(&key("attention.layer_norm_rms_epsilon"))?;
        let vocab = optional("vocab_size")?.unwrap_or(0);
        for (k, v) in [
            ("block_count", n_layers),
            ("embedding_length", hidden),
            ("feed_forward_length", ffn),
            ("attention.head_count", n_heads),
            ("attention.head_count_kv", n_kv_heads),
            ("context_length", context_len),
        ] {
            if v == 0 {
                return Err(ModelError::BadConfig(format!("{} is 0", key(k))));
            }
        }
        if n_heads % n_kv_heads != 0 {
            return Err(ModelError::BadConfig(format!(
                "{} = {n_heads} is not a multiple of {} = {n_kv_heads}",
                key("attention.head_count"),
                key("attention.head_count_kv")
            )));
        }
        let head_dim = match optional("attention.key_length")? {
            Some(d) => d,
            None if hidden % n_heads == 0 => hidden / n_heads,
            None => {
                return Err(ModelError::BadConfig(format!(
                    "{} = {hidden} is not a multiple of {} = {n_heads} and {} is absent",
                    key("embedding_length"),
                    key("attention.head_count"),
                    key("attention.key_length")
                )));
            }
        };
        if let Some(dv) = optional("attention.value_length")?
            && dv != head_dim
        {
            return Err(ModelError::BadConfig(format!(
                "{} = {dv} differs from the key length {head_dim}; this core needs equal K and V heads",
                key("attention.value_length")
            )));
        }
        let rot = optional("rope.dimension_count")?.unwrap_or(head_dim);
        if head_dim == 0 || head_dim % 2 != 0 || rot != head_dim {
            return Err(ModelError::BadConfig(format!(
                "{} = {rot} must equal the head size {head_dim} (partial rotary embeddings are \
                 not supported) and be even",
                key("rope.dimension_count"),
            )));
        }

        let rope_freq_scale = rope_scale(md, &key)?;
        let sliding_window = match arch {
            Arch::Gemma2 => Some(optional("attention.sliding_window")?.unwrap_or(4096)),
            Arch::Gemma3 => optional("attention.sliding_window")?.filter(|&w| w > 0),
            // llama.cpp runs Phi-3's and Mistral's files with full attention (it disables
            // Phi SWA; the `llama` graph has none), and so does this core.
            _ => None,
        };
        let swa_layers = swa_pattern(md, &key, arch, n_layers, sliding_window.is_some())?;
        let rope_base_swa = match arch {
            Arch::Gemma3 => optional_f32("rope.freq_base_swa")?.unwrap_or(10_000.0),
            _ => optional_f32("rope.freq_base_swa")?.unwrap_or(rope_base),
        };
        let nonzero = |v: Option<f32>| v.filter(|&c| c != 0.0);
        let attn_softcap = match arch {
            Arch::Gemma2 => nonzero(optional_f32("attn_logit_softcapping")?),
            _ => None,
        };
        let final_softcap = match arch {
            Arch::Gemma2 | Arch::Gemma3 => nonzero(optional_f32("final_logit_softcapping")?),
            _ => None,
        };
        // llama.cpp (gemma2.cpp, gemma3.cpp): the 27B models (46 and 62 layers) scale by
        // 1/√(hidden / heads), every other size by 1/√head_dim.
        let big_gemma = matches!((arch, n_layers), (Arch::Gemma2, 46) | (Arch::Gemma3, 62));
        let attn_scale = if big_gemma {
            1.0 / ((hidden / n_heads) as f32).sqrt()
        } else {
            1.0 / (head_dim as f32).sqrt()
        };
        let (embed_scale, activation) = if arch.is_gemma() {
            ((hidden as f32).sqrt(), Activation::GeluTanh)
        } else {
            (1.0, Activation::Silu)
        };
        Ok(LlamaConfig {
            architecture: name,
            arch,
            n_layers,
            hidden,
            ffn,
            n_heads,
            n_kv_heads,
            head_dim,
            rope_base,
            rope_base_swa,
            rope_freq_scale,
            rms_eps,
            context_len,
            vocab,
            sliding_window,
            swa_layers,
            attn_softcap,
            final_softcap,
            attn_scale,
            embed_scale,
            activation,
        })
    }

    /// Width of one position's K (or V) row: `n_kv_heads × head_dim` elements.
    pub fn kv_width(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Width of one position's query row: `n_heads × head_dim` elements.
    pub fn q_width(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Whether layer `l` attends over the sliding window only.
    pub fn is_swa(&self, l: usize) -> bool {
        self.swa_layers.get(l).copied().unwrap_or(false)
    }

    /// The first key position a query at `pos` of layer `l` sees: `pos + 1 - window` on a
    /// sliding-window layer (llama.cpp masks a key at `p0` when `pos - p0 >= window`), else 0.
    pub fn window_start(&self, l: usize, pos: usize) -> usize {
        match self.sliding_window {
            Some(w) if self.is_swa(l) => (pos + 1).saturating_sub(w),
            _ => 0,
        }
    }
}

/// `rope.scaling.type` / `rope.scaling.factor` (or the older `rope.scale_linear`) as the
/// factor positions are multiplied by. `none` and an absent type give 1; `linear` gives
/// `1 / factor` (llama.cpp's `rope_freq_scale_train`); any other type is refused naming
/// the key (YaRN and LongRoPE are not implemented).
fn rope_scale(md: &Metadata, key: &dyn Fn(&str) -> String) -> Result<f32, ModelError> {
    let ty = match md.get_str(&key("rope.scaling.type")) {
        Ok(t) => Some(t.to_string()),
        Err(GgufError::MissingKey { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let factor = match md.get_f32(&key("rope.scaling.factor")) {
        Ok(v) => Some(v),
        Err(GgufError::MissingKey { .. }) => match md.get_f32(&key("rope.scale_linear")) {
            Ok(v) => Some(v),
            Err(GgufError::MissingKey { .. }) => None,
            Err(e) => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    match ty.as_deref() {
        None | Some("linear") => match factor {
            Some(f) if f != 0.0 && f.is_finite() && f > 0.0 => Ok(1.0 / f),
            Some(f) if f != 0.0 => Err(ModelError::BadConfig(format!(
                "{} = {f} is not a positive factor",
                key("rope.scaling.factor")
            ))),
            _ => Ok(1.0),
        },
        Some("none") => Ok(1.0),
        Some(other) => Err(ModelError::BadConfig(format!(
            "{} = '{other}' is not supported (this core runs none and linear RoPE scaling, \
             and Llama 3's rope_freqs)",
            key("rope.scaling.type")
        ))),
    }
}

/// Which layers attend over the sliding window: `attention.sliding_window_pattern` as a
/// per-layer bool array when the file has one, else llama.cpp's `set_swa_pattern(n)` with
/// `n` from that key as an integer or the family's default (2 for Gemma 2, 6 for Gemma 3):
/// layer `l` is local when `l % n < n - 1`.
fn swa_pattern(
    md: &Metadata,
    key: &dyn Fn(&str) -> String,
    arch: Arch,
    n_layers: usize,
    windowed: bool,
) -> Result<Vec<bool>, ModelError> {
    if !windowed {
        return Ok(vec![false; n_layers]);
    }
    let k = key("attention.sliding_window_pattern");
    if let Some(crate::gguf::MetaValue::Array(_)) = md.get(&k) {
        return Err(ModelError::BadConfig(format!(
            "{k} as a per-layer array is not supported yet"
        )));
    }
    let n = match md.get_u64(&k) {
        Ok(v) => usize::try_from(v).map_err(|_| ModelError::BadConfig(format!("{k} = {v}")))?,
        Err(GgufError::MissingKey { .. }) => match arch {
            Arch::Gemma2 => 2,
            _ => 6,
        },
        Err(e) => return Err(e.into()),
    };
    Ok((0..n_layers).map(|l| n == 0 || l % n < n - 1).collect())
}
