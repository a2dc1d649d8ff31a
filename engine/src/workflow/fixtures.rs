//! Builders of the standard decoder workflow manifest used by the fixture packages (`tiny-decoder`, `tiny-vlm`, `smollm2`).
//!
//! Every package built here runs the same steps: per loop iteration it invokes
//! `token_embedding`, `llama_decoder`, a last-row slice graph, `lm_head`, the sampler
//! graph and the termination-check graph; the first iteration prefills the prompt, each
//! later one decodes the token sampled by the previous iteration.

use serde_json::{Value as Json, json};

use super::manifest::Manifest;

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
    let n_eog = spec.eog.len() as u64;
    let eog: Vec<f64> = spec.eog.iter().map(|&x| x as f64).collect();
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
    let mut components = vec![
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
    ];
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
    let mut body = vec![
        invoke("embed", json!({"tokens": "pending"}), json!({"hidden": "x"})),
        invoke(
            "decoder",
            json!({"hidden": "x", "past": "decoder_kv"}),
            json!({"hidden": "h", "present": "decoder_kv"}),
        ),
        invoke("last_row", json!({"hidden": "h"}), json!({"last": "h_last"})),
        invoke("head", json!({"hidden": "h_last"}), json!({"logits": "logits"})),
        invoke(
            "sampler",
            json!({"logits": "logits", "temperature": "temperature", "seed": "seed", "counter": "step"}),
            json!({"token": "pending"}),
        ),
        json!({"emit": {"value": "pending", "to": "tokens", "mode": "append"}}),
    ];
    if spec.session {
        body.push(json!({"emit": {"value": "pending", "to": "history", "mode": "append"}}));
    }
    body.push(invoke("stop_check", json!({"token": "pending"}), json!({"continue": "go"})));
    steps.push(json!({"loop": {
        "carried": carried,
        "counter": "step",
        "body": body,
        "continue_if": "go",
        "max_iterations": {"role": "max_new_tokens"}
    }}));
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

/// The standard manifest as typed [`Manifest`].
pub fn standard_manifest(spec: &ManifestSpec) -> Manifest {
    serde_json::from_value(standard_manifest_json(spec)).expect("the standard manifest matches the manifest types")
}
