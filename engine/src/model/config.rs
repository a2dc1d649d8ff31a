//! Llama architecture hyper-parameters, read from GGUF metadata (never hard-coded).

use crate::gguf::{GgufError, Metadata};

use super::ModelError;

/// Architecture names whose GGUF tensors follow the Llama layout this core runs.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["llama"];

/// Hyper-parameters of a Llama-family decoder, as declared by the GGUF metadata keys
/// `<arch>.block_count`, `<arch>.embedding_length`, `<arch>.feed_forward_length`,
/// `<arch>.attention.head_count`, `<arch>.attention.head_count_kv`,
/// `<arch>.rope.freq_base`, `<arch>.attention.layer_norm_rms_epsilon`,
/// `<arch>.context_length` and `<arch>.rope.dimension_count` (llama.cpp's naming).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture`.
    pub architecture: String,
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
    /// Elements per attention head.
    pub head_dim: usize,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Trained context length (positions).
    pub context_len: usize,
    /// Vocabulary size (rows of the token embedding).
    pub vocab: usize,
}

impl LlamaConfig {
    /// Read the configuration from metadata. `vocab` is filled in later from the token
    /// embedding's shape when the metadata has no `<arch>.vocab_size`.
    ///
    /// Errors: [`ModelError::UnsupportedArchitecture`] for an architecture this core does
    /// not run; [`ModelError::Metadata`] naming a missing or mistyped key;
    /// [`ModelError::BadConfig`] for inconsistent values (zero sizes, heads that do not
    /// divide the width or each other).
    pub fn from_metadata(md: &Metadata) -> Result<LlamaConfig, ModelError> {
        let arch = md.get_str("general.architecture")?.to_string();
        if !SUPPORTED_ARCHITECTURES.contains(&arch.as_str()) {
            return Err(ModelError::UnsupportedArchitecture {
                architecture: arch,
                supported: SUPPORTED_ARCHITECTURES.join(", "),
            });
        }
        let key = |k: &str| format!("{arch}.{k}");
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
        let n_layers = get("block_count")?;
        let hidden = get("embedding_length")?;
        let ffn = get("feed_forward_length")?;
        let n_heads = get("attention.head_count")?;
        let n_kv_heads = optional("attention.head_count_kv")?.unwrap_or(n_heads);
        let context_len = get("context_length")?;
        let rope_base = match md.get_f32(&key("rope.freq_base")) {
            Ok(v) => v,
            Err(GgufError::MissingKey { .. }) => 10_000.0,
            Err(e) => return Err(e.into()),
        };
        let rms_eps = md.get_f32(&key("attention.layer_norm_rms_epsilon"))?;
        let vocab = optional("vocab_size")?.unwrap_or(0);
        for (name, v) in [
            ("block_count", n_layers),
            ("embedding_length", hidden),
            ("feed_forward_length", ffn),
            ("attention.head_count", n_heads),
            ("attention.head_count_kv", n_kv_heads),
            ("context_length", context_len),
        ] {
            if v == 0 {
                return Err(ModelError::BadConfig(format!("{} is 0", key(name))));
            }
        }
        if hidden % n_heads != 0 {
            return Err(ModelError::BadConfig(format!(
                "{} = {hidden} is not a multiple of {} = {n_heads}",
                key("embedding_length"),
                key("attention.head_count")
            )));
        }
        if n_heads % n_kv_heads != 0 {
            return Err(ModelError::BadConfig(format!(
                "{} = {n_heads} is not a multiple of {} = {n_kv_heads}",
                key("attention.head_count"),
                key("attention.head_count_kv")
            )));
        }
        let head_dim = optional("rope.dimension_count")?.unwrap_or(hidden / n_heads);
        if head_dim != hidden / n_heads || head_dim % 2 != 0 {
            return Err(ModelError::BadConfig(format!(
                "{} = {head_dim} must equal embedding_length / head_count = {} and be even",
                key("rope.dimension_count"),
                hidden / n_heads
            )));
        }
        Ok(LlamaConfig {
            architecture: arch,
            n_layers,
            hidden,
            ffn,
            n_heads,
            n_kv_heads,
            head_dim,
            rope_base,
            rms_eps,
            context_len,
            vocab,
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
}
