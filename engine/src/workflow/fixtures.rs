//! Builders of the standard decoder workflow manifest used by the fixture packages (`tiny-decoder`, `tiny-vlm`, `smollm2`).
//!
//! Every package built here runs the same steps: per loop iteration it invokes
//! `token_embedding`, `llama_decoder`, a last-row slice graph, `lm_head`, the sampler
//! graph and the termination-check graph; the first iteration prefills the prompt, each
//! later one decodes the token sampled by the previous iteration.
//!
//! The tiny packages' weights are written with [`GgufWriter`] from a fixed-seed
//! SplitMix64 stream, so rebuilding gives byte-identical files (a test checks the
//! committed `fixtures/packages/*` against a rebuild).

use std::path::Path;

use serde_json::{Value as Json, json};

use super::manifest::Manifest;
use crate::gguf::{GgmlType, GgufError, GgufWriter, MetaArray, MetaValue};

/// What varies between the standard packages.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestSpec {
    /// Package name.
    pub name: String,
    /// Weights file name inside the package directory.
    pub weights: String,
    /// End-of-generation token ids the termination check stops on.
    pub eog: Vec<i64>,
    /// Accept a session id and carry the conversation in a `prompt_continuation` cell.
    pub session: bool,
    /// A vision projector: `(patch_dim, weight tensor, bias tensor)`; adds the required
    /// application input `pixel_values` `[n_patches, patch_dim]` whose projected
    /// embeddings are decoded before the prompt. The projector is replaceable under
    /// contract `vision_projector@1`.
    pub vision: Option<(u64, String, String)>,
}

/// Contract id@version of the replaceable vision projector.
pub const VISION_CONTRACT: &str = "vision_projector@1";

fn port(name: &str, dtype: &str, shape: Json) -> Json {
    json!({"name": name, "dtype": dtype, "shape": shape})
}

fn kv_port(name: &str) -> Json {
    json!({"name": name, "dtype": "kv"})
}

fn invoke(component: &str, inputs: Json, outputs: Json) -> Json {
    json!({"invoke": {"component": component, "inputs": inputs, "outputs": outputs}})
}

/// The manifest JSON of the standard decoder workflow.
pub fn standard_manifest_json(spec: &ManifestSpec) -> Json {
    let mut request = vec![
        json!({"role": "prompt_tokens", "value": "prompt"}),
        json!({"role": "max_new_tokens", "value": "max_new_tokens"}),
        json!({"role": "temperature", "value": "temperature"}),
        json!({"role": "seed", "value": "seed"}),
    ];
    if spec.session {
        request.push(json!({"role": "session_id"}));
    }
    let mut application = vec![];
    let mut components = decoder_components(spec);
    let mut cells = vec![
        json!({"name": "decoder_kv", "dtype": "kv", "scope": "invocation", "init": "empty"}),
        json!({"name": "pending", "dtype": "i64", "shape": ["n"], "scope": "invocation", "init": {"input": "prompt"}}),
    ];
    let mut steps = vec![];
    let mut carried = vec![json!("pending"), json!("decoder_kv")];
    if spec.session {
        cells.push(json!({
            "name": "history", "dtype": "i64", "shape": ["n"], "scope": "session",
            "init": "empty", "role": "prompt_continuation"
        }));
        steps.push(json!({"emit": {"value": "prompt", "to": "history", "mode": "append"}}));
        steps.push(json!({"emit": {"value": "history", "to": "pending", "mode": "replace"}}));
        carried.push(json!("history"));
    }
    if let Some((patch_dim, w, b)) = &spec.vision {
        application.push(json!({
            "name": "pixel_values", "dtype": "f32", "shape": ["n_patches", patch_dim],
            "required": true, "kv_positions": ["n_patches"]
        }));
        components.push(json!({
            "name": "projector",
            "inputs": [port("pixels", "f32", json!(["n_patches", patch_dim]))],
            "outputs": [port("embeddings", "f32", json!(["n_patches", "hidden"]))],
            "replaceable": VISION_CONTRACT,
            "implementation": {"graph": {
                "weights": [{"name": "w", "tensor": w}, {"name": "b", "tensor": b}],
                "nodes": [
                    {"out": "y", "op": {"kind": "MatMul", "a": "pixels", "b": "w"}},
                    {"out": "z", "op": {"kind": "Add", "a": "y", "b": "b"}}
                ],
                "outputs": {"embeddings": "z"}
            }}
        }));
        steps.push(invoke(
            "projector",
            json!({"pixels": "pixel_values"}),
            json!({"embeddings": "image_embeddings"}),
        ));
        steps.push(invoke(
            "decoder",
            json!({"hidden": "image_embeddings", "past": "decoder_kv"}),
            json!({"present": "decoder_kv"}),
        ));
    }
    steps.push(decode_loop(spec.session, carried));
    json!({
        "schema_version": super::manifest::SCHEMA_VERSION,
        "name": spec.name,
        "weights": spec.weights,
        "inputs": {"request": request, "application": application},
        "components": components,
        "cells": cells,
        "outputs": [{"name": "tokens", "dtype": "i64", "stream_tokens": true}],
        "steps": steps
    })
}

/// The components every standard manifest has: the embedding, the decoder, the last row,
/// the LM head, the sampler (greedy at temperature 0) and the stop check against the
/// end-of-generation ids of `spec`.
fn decoder_components(spec: &ManifestSpec) -> Vec<Json> {
    let n_eog = spec.eog.len() as u64;
    let eog: Vec<f64> = spec.eog.iter().map(|&x| x as f64).collect();
    vec![
        json!({
            "name": "embed",
            "inputs": [port("tokens", "i64", json!(["n"]))],
            "outputs": [port("hidden", "f32", json!(["n", "hidden"]))],
            "implementation": {"native": {"block": "token_embedding", "tensor_prefix": "token_embd."}}
        }),
        json!({
            "name": "decoder",
            "inputs": [port("hidden", "f32", json!(["n", "hidden"])), kv_port("past")],
            "outputs": [port("hidden", "f32", json!(["n", "hidden"])), kv_port("present")],
            "implementation": {"native": {"block": "llama_decoder", "tensor_prefix": "blk."}}
        }),
        json!({
            "name": "last_row",
            "inputs": [port("hidden", "f32", json!(["n", "hidden"]))],
            "outputs": [port("last", "f32", json!([1, "hidden"]))],
            "implementation": {"graph": {
                "nodes": [{"out": "last", "op": {"kind": "Slice", "input": "hidden", "axis": 0, "start": -1}}],
                "outputs": {"last": "last"}
            }}
        }),
        json!({
            "name": "head",
            "inputs": [port("hidden", "f32", json!([1, "hidden"]))],
            "outputs": [port("logits", "f32", json!([1, "vocab"]))],
            "implementation": {"native": {"block": "lm_head", "tensor_prefix": "output"}}
        }),
        json!({
            "name": "sampler",
            "inputs": [
                port("logits", "f32", json!([1, "vocab"])),
                port("temperature", "f32", json!([])),
                port("seed", "i64", json!([])),
                port("counter", "i64", json!([]))
            ],
            "outputs": [port("token", "i64", json!([1]))],
            "implementation": {"graph": {
                "constants": [{"name": "zero", "dtype": "f32", "shape": [], "data": [0.0]}],
                "nodes": [
                    {"out": "greedy", "op": {"kind": "ArgMax", "input": "logits", "axis": 1}},
                    {"out": "scaled", "op": {"kind": "Div", "a": "logits", "b": "temperature"}},
                    {"out": "probs", "op": {"kind": "Softmax", "input": "scaled", "axis": 1}},
                    {"out": "cdf", "op": {"kind": "CumSum", "input": "probs", "axis": 1}},
                    {"out": "u", "op": {"kind": "RandomUniform", "seed": "seed", "counter": "counter"}},
                    {"out": "above", "op": {"kind": "Greater", "a": "cdf", "b": "u"}},
                    {"out": "above_f", "op": {"kind": "Cast", "input": "above", "to": "f32"}},
                    {"out": "sampled", "op": {"kind": "ArgMax", "input": "above_f", "axis": 1}},
                    {"out": "hot", "op": {"kind": "Greater", "a": "temperature", "b": "zero"}},
                    {"out": "token", "op": {"kind": "Where", "cond": "hot", "a": "sampled", "b": "greedy"}}
                ],
                "outputs": {"token": "token"}
            }}
        }),
        json!({
            "name": "stop_check",
            "inputs": [port("token", "i64", json!([1]))],
            "outputs": [port("continue", "bool", json!([]))],
            "implementation": {"graph": {
                "constants": [{"name": "eog", "dtype": "i64", "shape": [n_eog], "data": eog}],
                "nodes": [
                    {"out": "hit", "op": {"kind": "Equal", "a": "token", "b": "eog"}},
                    {"out": "any", "op": {"kind": "ReduceMax", "input": "hit", "axis": 0}},
                    {"out": "go", "op": {"kind": "Not", "input": "any"}}
                ],
                "outputs": {"continue": "go"}
            }}
        }),
    ]
}

/// The decode loop: embed the pending tokens, decode, sample, emit the token (and append it
/// to the session's history when `session`), stop at an end-of-generation token or at
/// `max_new_tokens`; `carried` are the cells it carries.
fn decode_loop(session: bool, carried: Vec<Json>) -> Json {
    let mut body = vec![
        invoke(
            "embed",
            json!({"tokens": "pending"}),
            json!({"hidden": "x"}),
        ),
        invoke(
            "decoder",
            json!({"hidden": "x", "past": "decoder_kv"}),
            json!({"hidden": "h", "present": "decoder_kv"}),
        ),
        invoke(
            "last_row",
            json!({"hidden": "h"}),
            json!({"last": "h_last"}),
        ),
        invoke(
            "head",
            json!({"hidden": "h_last"}),
            json!({"logits": "logits"}),
        ),
        invoke(
            "sampler",
            json!({"logits": "logits", "temperature": "temperature", "seed": "seed", "counter": "step"}),
            json!({"token": "pending"}),
        ),
        json!({"emit": {"value": "pending", "to": "tokens", "mode": "append"}}),
    ];
    if session {
        body.push(json!({"emit": {"value": "pending", "to": "history", "mode": "append"}}));
    }
    body.push(invoke(
        "stop_check",
        json!({"token": "pending"}),
        json!({"continue": "go"}),
    ));
    json!({"loop": {
        "carried": carried,
        "counter": "step",
        "body": body,
        "continue_if": "go",
        "max_iterations": {"role": "max_new_tokens"}
    }})
}

/// The standard manifest as typed [`Manifest`].
pub fn standard_manifest(spec: &ManifestSpec) -> Manifest {
    serde_json::from_value(standard_manifest_json(spec))
        .expect("the standard manifest matches the manifest types")
}

/// Hyper-parameters of the tiny fixture models (a 2-layer llama with GQA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TinyDims {
    /// Decoder layers.
    pub n_layers: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Query heads.
    pub n_heads: usize,
    /// KV heads.
    pub n_kv_heads: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// Context length.
    pub context: usize,
}

/// The tiny fixture model's dimensions.
pub const TINY: TinyDims = TinyDims {
    n_layers: 2,
    hidden: 32,
    n_heads: 4,
    n_kv_heads: 2,
    ffn: 64,
    context: 256,
};

/// Patch width of `tiny-vlm`'s `pixel_values` (`[n_patches, 12]`).
pub const TINY_PATCH_DIM: u64 = 12;

/// Merges of the tiny byte-level vocabulary (each adds one token).
const TINY_MERGES: [(&str, &str); 4] = [("h", "e"), ("Ġ", "t"), ("Ġt", "he"), ("l", "l")];

/// Control tokens appended after the bytes and merges.
const TINY_SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves, the
/// others to U+0100 onwards in byte order (Radford et al., GPT-2 `encoder.py`).
fn byte_to_unicode(b: u8) -> char {
    let printable = |x: u8| {
        (b'!'..=b'~').contains(&x) || (0xA1..=0xAC).contains(&x) || (0xAE..=0xFF).contains(&x)
    };
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).expect("valid code point")
}

/// The tiny byte-level BPE vocabulary: tokens, token types, merges; ids of
/// `<|endoftext|>` (eos) and `<|im_end|>`.
pub fn tiny_vocab() -> (Vec<String>, Vec<i32>, Vec<String>, u32, u32) {
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|b| byte_to_unicode(b).to_string())
        .collect();
    let mut merges = Vec::new();
    for (a, b) in TINY_MERGES {
        merges.push(format!("{a} {b}"));
        tokens.push(format!("{a}{b}"));
    }
    let mut types = vec![1; tokens.len()];
    let first_special = tokens.len() as u32;
    for sp in TINY_SPECIALS {
        tokens.push(sp.to_string());
        types.push(3);
    }
    (tokens, types, merges, first_special, first_special + 2)
}

/// Deterministic uniform numbers in `[-1, 1)` (SplitMix64).
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn bytes(&mut self, n: usize, scale: f32, offset: f32) -> Vec<u8> {
        (0..n)
            .flat_map(|_| (offset + scale * self.next()).to_le_bytes())
            .collect()
    }
}

/// The GGUF of a tiny fixture model: llama metadata, the byte-level vocabulary, F32
/// weights from seed `seed`, and with `vision` the projector tensors
/// `vision.proj.weight` (dims `[hidden, 12]`) and `vision.proj.bias` (`[hidden]`).
pub fn tiny_gguf(name: &str, seed: u64, vision: bool) -> Result<GgufWriter, GgufError> {
    let d = TINY;
    let (tokens, types, merges, eos, _) = tiny_vocab();
    let vocab = tokens.len();
    let mut w = GgufWriter::new();
    let u32v = |x: usize| MetaValue::U32(x as u32);
    w.metadata("general.architecture", MetaValue::String("llama".into()))
        .metadata("general.name", MetaValue::String(name.into()))
        .metadata("llama.block_count", u32v(d.n_layers))
        .metadata("llama.context_length", u32v(d.context))
        .metadata("llama.embedding_length", u32v(d.hidden))
        .metadata("llama.feed_forward_length", u32v(d.ffn))
        .metadata("llama.attention.head_count", u32v(d.n_heads))
        .metadata("llama.attention.head_count_kv", u32v(d.n_kv_heads))
        .metadata("llama.rope.freq_base", MetaValue::F32(10000.0))
        .metadata(
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(1e-5),
        )
        .metadata("llama.vocab_size", u32v(vocab))
        .metadata("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .metadata("tokenizer.ggml.pre", MetaValue::String("gpt-2".into()))
        .metadata(
            "tokenizer.ggml.tokens",
            MetaValue::Array(MetaArray::String(tokens)),
        )
        .metadata(
            "tokenizer.ggml.token_type",
            MetaValue::Array(MetaArray::I32(types)),
        )
        .metadata(
            "tokenizer.ggml.merges",
            MetaValue::Array(MetaArray::String(merges)),
        )
        .metadata("tokenizer.ggml.bos_token_id", MetaValue::U32(eos))
        .metadata("tokenizer.ggml.eos_token_id", MetaValue::U32(eos))
        .metadata("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));
    let mut rng = Stream(seed);
    let h = d.hidden as u64;
    let kv = (d.hidden / d.n_heads * d.n_kv_heads) as u64;
    let f = d.ffn as u64;
    let mut mat = |w: &mut GgufWriter, name: &str, inp: u64, out: u64| -> Result<(), GgufError> {
        let scale = 1.0 / (inp as f32).sqrt();
        w.tensor(
            name,
            &[inp, out],
            GgmlType::F32,
            rng.bytes((inp * out) as usize, scale, 0.0),
        )?;
        Ok(())
    };
    mat(&mut w, "token_embd.weight", h, vocab as u64)?;
    for l in 0..d.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}.weight");
        mat(&mut w, &n("attn_q"), h, h)?;
        mat(&mut w, &n("attn_k"), h, kv)?;
        mat(&mut w, &n("attn_v"), h, kv)?;
        mat(&mut w, &n("attn_output"), h, h)?;
        mat(&mut w, &n("ffn_gate"), h, f)?;
        mat(&mut w, &n("ffn_up"), h, f)?;
        mat(&mut w, &n("ffn_down"), f, h)?;
    }
    mat(&mut w, "output.weight", h, vocab as u64)?;
    if vision {
        mat(&mut w, "vision.proj.weight", h, TINY_PATCH_DIM)?;
    }
    let mut vec =
        |w: &mut GgufWriter, name: &str, scale: f32, offset: f32| -> Result<(), GgufError> {
            w.tensor(
                name,
                &[h],
                GgmlType::F32,
                rng.bytes(d.hidden, scale, offset),
            )?;
            Ok(())
        };
    for l in 0..d.n_layers {
        vec(&mut w, &format!("blk.{l}.attn_norm.weight"), 0.1, 1.0)?;
        vec(&mut w, &format!("blk.{l}.ffn_norm.weight"), 0.1, 1.0)?;
    }
    vec(&mut w, "output_norm.weight", 0.1, 1.0)?;
    if vision {
        vec(&mut w, "vision.proj.bias", 0.1, 0.0)?;
    }
    Ok(w)
}

/// The manifest spec of a tiny fixture package (`model.gguf` beside `package.json`).
pub fn tiny_spec(name: &str, vision: bool) -> ManifestSpec {
    let (_, _, _, eos, im_end) = tiny_vocab();
    ManifestSpec {
        name: name.into(),
        weights: "model.gguf".into(),
        eog: vec![i64::from(eos), i64::from(im_end)],
        session: true,
        vision: vision.then(|| {
            (
                TINY_PATCH_DIM,
                "vision.proj.weight".to_string(),
                "vision.proj.bias".to_string(),
            )
        }),
    }
}

/// The manifest spec of the `smollm2` package over the fetched real model
/// (`fixtures/models/SmolLM2-135M-Instruct.Q4_1.gguf`; end of generation on
/// `<|endoftext|>` = 0 and `<|im_end|>` = 2).
pub fn smollm2_spec() -> ManifestSpec {
    ManifestSpec {
        name: "smollm2".into(),
        weights: "../../models/SmolLM2-135M-Instruct.Q4_1.gguf".into(),
        eog: vec![0, 2],
        session: true,
        vision: None,
    }
}

/// `package.json` text for a spec: pretty JSON with a trailing newline.
pub fn package_json_text(spec: &ManifestSpec) -> String {
    let mut s = serde_json::to_string_pretty(&standard_manifest_json(spec)).expect("json");
    s.push('\n');
    s
}

/// Seeds of the tiny packages' weights.
pub const TINY_DECODER_SEED: u64 = 0x0074_696e_7964_6563;
/// Seed of `tiny-vlm`'s weights.
pub const TINY_VLM_SEED: u64 = 0x0074_696e_7976_6c6d;

/// Write the three fixture packages under `root` (`root/tiny-decoder`, `root/tiny-vlm`
/// with `model.gguf` and `package.json`; `root/smollm2/package.json`).
pub fn write_fixture_packages(root: &Path) -> Result<(), GgufError> {
    for (name, seed, vision) in [
        ("tiny-decoder", TINY_DECODER_SEED, false),
        ("tiny-vlm", TINY_VLM_SEED, true),
    ] {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| GgufError::Io {
            path: dir.clone(),
            source: e,
        })?;
        tiny_gguf(name, seed, vision)?.write_to(dir.join("model.gguf"))?;
        write_text(
            &dir.join("package.json"),
            &package_json_text(&tiny_spec(name, vision)),
        )?;
    }
    let dir = root.join("smollm2");
    std::fs::create_dir_all(&dir).map_err(|e| GgufError::Io {
        path: dir.clone(),
        source: e,
    })?;
    write_text(
        &dir.join("package.json"),
        &package_json_text(&smollm2_spec()),
    )
}

fn write_text(path: &Path, text: &str) -> Result<(), GgufError> {
    std::fs::write(path, text).map_err(|e| GgufError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}
