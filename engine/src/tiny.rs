//! Deterministic tiny Llama models written as GGUF, for tests and fixture packages.
//!
//! A tiny model has the exact tensor layout and metadata keys of a llama.cpp `llama` GGUF
//! (so the real loader runs on it), random weights from a seeded generator, and a
//! byte-level BPE vocabulary: the 256 GPT-2 byte symbols, no merges, and the ChatML special
//! tokens `<|endoftext|>` (0), `<|im_start|>` (1), `<|im_end|>` (2).

use crate::gguf::{GgmlType, GgufError, GgufWriter, MetaArray, MetaValue};
use crate::quant::{self, QuantError};

/// Shape and storage of a tiny Llama model.
#[derive(Debug, Clone)]
pub struct TinyLlamaSpec {
    /// `general.architecture` (only `llama` loads; others exercise the refusal).
    pub architecture: String,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Residual width; a multiple of 32 for quantized weight types.
    pub hidden: usize,
    /// FFN width; a multiple of 32 for quantized weight types.
    pub ffn: usize,
    /// Query heads.
    pub n_heads: usize,
    /// KV heads.
    pub n_kv_heads: usize,
    /// Context length in positions.
    pub context_len: usize,
    /// RoPE base.
    pub rope_base: f32,
    /// Storage type of the projection matrices (norms stay F32).
    pub weight_type: GgmlType,
    /// Storage type of the token embedding (also the tied LM head).
    pub embedding_type: GgmlType,
    /// Seed of the weight generator.
    pub seed: u64,
    /// Tensors to leave out (to exercise missing-tensor errors).
    pub omit_tensors: Vec<String>,
}

impl Default for TinyLlamaSpec {
    fn default() -> Self {
        TinyLlamaSpec {
            architecture: "llama".into(),
            n_layers: 2,
            hidden: 64,
            ffn: 128,
            n_heads: 4,
            n_kv_heads: 2,
            context_len: 256,
            rope_base: 10_000.0,
            weight_type: GgmlType::F32,
            embedding_type: GgmlType::F32,
            seed: 7,
            omit_tensors: Vec::new(),
        }
    }
}

/// Special tokens of the tiny vocabulary, by id.
pub const TINY_SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// Vocabulary size of a tiny model: three special tokens and 256 byte symbols.
pub const TINY_VOCAB: usize = 3 + 256;

/// The GPT-2 byte-to-symbol map used by byte-level BPE vocabularies: printable Latin-1
/// bytes map to themselves, the others to code points from U+0100 upward in byte order.
pub fn gpt2_byte_symbols() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in out.iter_mut().enumerate() {
        let printable = (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
        *slot = if printable {
            char::from_u32(b as u32).expect("Latin-1 is valid")
        } else {
            let c = char::from_u32(next).expect("small code point");
            next += 1;
            c
        };
    }
    out
}

/// A seeded SplitMix64 stream mapped to uniform floats in `[-1, 1)`.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Build the GGUF of a tiny Llama model described by `spec`.
///
/// Widths must be whole blocks of the chosen weight types (a multiple of 32 for Q4/Q8).
///
/// Errors: the writer's, e.g. a tensor whose size does not match its type and shape.
pub fn tiny_llama(spec: &TinyLlamaSpec) -> Result<GgufWriter, GgufError> {
    let arch = spec.architecture.as_str();
    let head_dim = spec.hidden / spec.n_heads;
    let mut w = GgufWriter::new();
    let u32v = |v: usize| MetaValue::U32(v as u32);
    w.metadata("general.architecture", MetaValue::String(arch.into()));
    w.metadata("general.name", MetaValue::String("tiny-llama".into()));
    w.metadata(&format!("{arch}.block_count"), u32v(spec.n_layers));
    w.metadata(&format!("{arch}.context_length"), u32v(spec.context_len));
    w.metadata(&format!("{arch}.embedding_length"), u32v(spec.hidden));
    w.metadata(&format!("{arch}.feed_forward_length"), u32v(spec.ffn));
    w.metadata(&format!("{arch}.attention.head_count"), u32v(spec.n_heads));
    w.metadata(
        &format!("{arch}.attention.head_count_kv"),
        u32v(spec.n_kv_heads),
    );
    w.metadata(&format!("{arch}.rope.dimension_count"), u32v(head_dim));
    w.metadata(
        &format!("{arch}.rope.freq_base"),
        MetaValue::F32(spec.rope_base),
    );
    w.metadata(
        &format!("{arch}.attention.layer_norm_rms_epsilon"),
        MetaValue::F32(1e-5),
    );
    let symbols = gpt2_byte_symbols();
    let mut tokens: Vec<String> = TINY_SPECIALS.iter().map(|s| s.to_string()).collect();
    tokens.extend(symbols.iter().map(|c| c.to_string()));
    let mut types = vec![3i32; TINY_SPECIALS.len()];
    types.extend(std::iter::repeat_n(1i32, 256));
    w.metadata("tokenizer.ggml.model", MetaValue::String("gpt2".into()));
    w.metadata("tokenizer.ggml.pre", MetaValue::String("default".into()));
    w.metadata(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::String(tokens)),
    );
    w.metadata(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(types)),
    );
    w.metadata(
        "tokenizer.ggml.merges",
        MetaValue::Array(MetaArray::String(Vec::new())),
    );
    w.metadata("tokenizer.ggml.bos_token_id", MetaValue::U32(1));
    w.metadata("tokenizer.ggml.eos_token_id", MetaValue::U32(2));
    w.metadata("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));
    w.metadata(
        "tokenizer.chat_template",
        MetaValue::String(
            "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}".into(),
        ),
    );

    let mut rng = Rng(spec.seed);
    let (h, f, q, kv) = (
        spec.hidden,
        spec.ffn,
        spec.n_heads * head_dim,
        spec.n_kv_heads * head_dim,
    );
    let mut add = |w: &mut GgufWriter,
                   name: String,
                   rows: usize,
                   cols: usize,
                   ty: GgmlType,
                   norm: bool|
     -> Result<(), GgufError> {
        if spec.omit_tensors.contains(&name) {
            return Ok(());
        }
        let scale = 1.0 / (cols as f32).sqrt();
        let values: Vec<f32> = (0..rows * cols)
            .map(|_| {
                let r = rng.next_f32();
                if norm { 1.0 + 0.1 * r } else { r * scale }
            })
            .collect();
        // Types without a quantizer here get zero blocks: enough to exercise the loader's
        // refusal of tensor types that have no kernel.
        let bytes = match quant::quantize(ty, &values) {
            Ok(b) => b,
            Err(QuantError::Unsupported { .. } | QuantError::NoQuantizer { .. }) => {
                vec![0u8; ty.bytes_for(rows * cols).expect("whole blocks")]
            }
            Err(e) => panic!("{ty} does not quantize a row of {cols}: {e}"),
        };
        let dims: Vec<u64> = if rows == 1 {
            vec![cols as u64]
        } else {
            vec![cols as u64, rows as u64]
        };
        w.tensor(&name, &dims, ty, bytes)?;
        Ok(())
    };
    add(
        &mut w,
        "token_embd.weight".into(),
        TINY_VOCAB,
        h,
        spec.embedding_type,
        false,
    )?;
    for l in 0..spec.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}.weight");
        let wt = spec.weight_type;
        add(&mut w, n("attn_norm"), 1, h, GgmlType::F32, true)?;
        add(&mut w, n("attn_q"), q, h, wt, false)?;
        add(&mut w, n("attn_k"), kv, h, wt, false)?;
        add(&mut w, n("attn_v"), kv, h, wt, false)?;
        add(&mut w, n("attn_output"), h, q, wt, false)?;
        add(&mut w, n("ffn_norm"), 1, h, GgmlType::F32, true)?;
        add(&mut w, n("ffn_gate"), f, h, wt, false)?;
        add(&mut w, n("ffn_up"), f, h, wt, false)?;
        add(&mut w, n("ffn_down"), h, f, wt, false)?;
    }
    add(
        &mut w,
        "output_norm.weight".into(),
        1,
        h,
        GgmlType::F32,
        true,
    )?;
    Ok(w)
}
