//! The interpreter on real weights: fixture packages bound to the decode core's Model agree with the fused decode core (logits on tiny-decoder, greedy tokens on SmolLM2).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use engine::gguf::{GgmlType, GgufFile};
use engine::kernels::Isa;
use engine::kernels::matmul::Cpu;
use engine::kv::{KV_DTYPE, KvCache};
use engine::model::{Logits, Model};
use engine::workflow::fixtures::{ManifestSpec, standard_manifest_json};
use engine::workflow::{
    Flow, GgufWeights, Interpreter, ModelBlocks, Package, Request, Session, Tensor,
};
use serde_json::{Value as Json, json};

use crate::common;
use common::model_path;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn packages() -> PathBuf {
    root().join("fixtures/packages")
}

fn cpu() -> Cpu {
    Cpu::new(0, Isa::best())
}

/// A package over the given GGUF whose loop also emits each step's logits to an output
/// `logits` (so the test can read them), sharing `model` with the test's decode core.
fn logits_package(spec: &ManifestSpec, file: Arc<GgufFile>, model: Arc<Model>) -> Package {
    let mut j = standard_manifest_json(spec);
    j["outputs"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "logits", "dtype": "f32"}));
    let steps = j["steps"].as_array_mut().unwrap();
    let body = steps.last_mut().unwrap()["loop"]["body"]
        .as_array_mut()
        .unwrap();
    let head = body
        .iter()
        .position(|s| s["invoke"]["component"] == json!("head"))
        .unwrap();
    body.insert(
        head + 1,
        json!({"emit": {"value": "logits", "to": "logits", "mode": "append"}}),
    );
    let m = Package::parse_manifest(&j.to_string(), Path::new("package.json")).unwrap();
    Package::from_parts(
        m,
        Some(Arc::new(GgufWeights::new(file).unwrap())),
        Some(Arc::new(ModelBlocks::from_model(model))),
    )
    .unwrap()
}

fn tiny_spec_from_committed(name: &str) -> ManifestSpec {
    // Read back the committed package's spec facts (eog ids) from its package.json.
    let j: Json = serde_json::from_str(
        &std::fs::read_to_string(packages().join(name).join("package.json")).unwrap(),
    )
    .unwrap();
    let eog = j["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == json!("stop_check"))
        .unwrap()["implementation"]["graph"]["constants"][0]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as i64)
        .collect();
    ManifestSpec {
        name: name.into(),
        weights: "model.gguf".into(),
        eog,
        session: true,
        vision: None,
    }
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

fn rows(t: &Tensor) -> Vec<Vec<f32>> {
    let Tensor::F32(a) = t else {
        panic!("logits are f32")
    };
    let v = a.shape()[1];
    a.iter()
        .copied()
        .collect::<Vec<_>>()
        .chunks(v)
        .map(<[f32]>::to_vec)
        .collect()
}

#[test]
fn tiny_decoder_interpreter_logits_match_decode_core() {
    let file = Arc::new(GgufFile::open(packages().join("tiny-decoder/model.gguf")).unwrap());
    let model = Arc::new(Model::from_file(file.clone(), cpu()).unwrap());
    let p = logits_package(
        &tiny_spec_from_committed("tiny-decoder"),
        file,
        model.clone(),
    );
    let prompt = vec![104u32, 101, 108, 108, 111, 32, 119];
    let steps = 12;
    // Run greedy with no end-of-generation so every step runs.
    let mut req = Request::new(prompt.clone(), steps);
    req.session_id = None;
    let bound = p.validate_request(&req).unwrap();
    let out = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap();
    let got = rows(&out.outputs["logits"]);
    assert_eq!(got.len(), out.tokens.len());
    assert!(!out.tokens.is_empty());

    // The fused decode core over the same tokens: prefill, then one token at a time.
    let mut kv = KvCache::new(model.kv_config(64, KV_DTYPE)).unwrap();
    let seq = kv.create_sequence();
    let mut logits = model.forward(&mut kv, seq, &prompt, Logits::Last).unwrap();
    for (i, row) in got.iter().enumerate() {
        assert_eq!(row.len(), logits.len());
        let worst = row
            .iter()
            .zip(&logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= 1e-5, "step {i}: max |diff| {worst}");
        assert_eq!(out.tokens[i], argmax(&logits), "step {i}");
        if i + 1 < got.len() {
            logits = model
                .forward(&mut kv, seq, &[out.tokens[i]], Logits::Last)
                .unwrap();
        }
    }
    // Event log: every iteration ran the six components in order.
    for it in 0..out.tokens.len() {
        assert_eq!(
            out.events.invoked_in(&[it]),
            [
                "embed",
                "decoder",
                "last_row",
                "head",
                "sampler",
                "stop_check"
            ],
            "iteration {it}"
        );
    }
}

#[test]
fn tiny_decoder_package_loads_with_kv_geometry_and_sessions() {
    let p = Package::load_with_cpu(packages().join("tiny-decoder"), cpu()).unwrap();
    // 2 (K and V) × 2 layers × 2 KV heads × 8 head_dim × 2 bytes (f16 cache).
    assert_eq!(p.bytes_per_token(), Some(128));
    assert_eq!(p.model().unwrap().config().n_layers, 2);
    assert!(p.weights_file().unwrap().tensor("output.weight").is_some());

    let mut s = Session::new(Some("t".into()));
    let mut req = Request::new(vec![104, 105], 5);
    req.session_id = Some("t".into());
    let run = |p: &Package, r: &Request, s: &mut Session| {
        let b = p.validate_request(r).unwrap();
        Interpreter::new(p)
            .run(&b, s, &mut |_| Flow::Continue)
            .unwrap()
    };
    let first = run(&p, &req, &mut s);
    assert_eq!(p.carried_tokens(&s), 2 + first.tokens.len());
    let mut req2 = Request::new(vec![33], 5);
    req2.session_id = Some("t".into());
    let second = run(&p, &req2, &mut s);

    // Turn 2 equals a one-off run over carried prefix + new prompt (re-prefill).
    let mut whole = vec![104, 105];
    whole.extend(&first.tokens);
    whole.push(33);
    let mut one_off = Request::new(whole.clone(), 5);
    one_off.session_id = Some("fresh".into());
    let fresh = run(&p, &one_off, &mut Session::new(Some("fresh".into())));
    assert_eq!(second.tokens, fresh.tokens);
    assert_eq!(p.carried_tokens(&s), whole.len() + second.tokens.len());
}

#[test]
fn tiny_vlm_places_projected_image_before_the_prompt() {
    let dir = packages().join("tiny-vlm");
    let p = Package::load_with_cpu(&dir, cpu()).unwrap();
    let file = Arc::new(GgufFile::open(dir.join("model.gguf")).unwrap());
    let model = Model::from_file(file.clone(), cpu()).unwrap();
    let (n_patches, patch, hidden) = (3usize, 12usize, 32usize);
    let pixels: Vec<f32> = (0..n_patches * patch)
        .map(|i| (i as f32 * 0.37).sin())
        .collect();
    let mut req = Request::new(vec![104, 101], 1);
    req.inputs.insert(
        "pixel_values".into(),
        Tensor::f32(&[n_patches, patch], pixels.clone()).unwrap(),
    );
    let bound = p.validate_request(&req).unwrap();
    assert_eq!(bound.extra_positions(), n_patches);
    let out = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap();
    assert_eq!(out.events.invoked_in(&[]), ["projector", "decoder"]);

    // Reference: project by hand from the raw F32 tensors, decode the image rows first,
    // then the prompt, and take the greedy token.
    let f32s = |name: &str| -> Vec<f32> {
        let t = file.tensor(name).unwrap();
        assert_eq!(t.info.ty, GgmlType::F32);
        t.data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    let (w, b) = (f32s("vision.proj.weight"), f32s("vision.proj.bias"));
    let mut emb = vec![0.0f32; n_patches * hidden];
    for r in 0..n_patches {
        for o in 0..hidden {
            let mut acc = b[o];
            for k in 0..patch {
                acc += pixels[r * patch + k] * w[k * hidden + o];
            }
            emb[r * hidden + o] = acc;
        }
    }
    let mut kv = KvCache::new(model.kv_config(16, KV_DTYPE)).unwrap();
    let seq = kv.create_sequence();
    model.decoder(&mut emb, &mut kv, seq).unwrap();
    let logits = model
        .forward(&mut kv, seq, &[104, 101], Logits::Last)
        .unwrap();
    assert_eq!(out.tokens, vec![argmax(&logits)]);
}

#[derive(serde::Deserialize)]
struct Reference {
    generate: Vec<GenerateCase>,
}

#[derive(serde::Deserialize)]
struct GenerateCase {
    prompt_ids: Vec<u32>,
    greedy_ids: Vec<u32>,
}

/// Greedy decode-core tokens: fused forward passes, stop after an end-of-generation id.
fn core_greedy(model: &Model, prompt: &[u32], max_new: usize, eog: &[u32]) -> Vec<u32> {
    let mut kv = KvCache::new(model.kv_config(prompt.len() + max_new, KV_DTYPE)).unwrap();
    let seq = kv.create_sequence();
    let mut logits = model.forward(&mut kv, seq, prompt, Logits::Last).unwrap();
    let mut out = Vec::new();
    loop {
        let t = argmax(&logits);
        out.push(t);
        if eog.contains(&t) || out.len() == max_new {
            return out;
        }
        logits = model.forward(&mut kv, seq, &[t], Logits::Last).unwrap();
    }
}

#[test]
fn smollm2_interpreter_greedy_tokens_match_decode_core_on_every_reference_prompt() {
    let file = Arc::new(GgufFile::open(model_path()).unwrap());
    let p = Package::load_with_cpu(packages().join("smollm2"), cpu()).unwrap();
    // 2 × 30 layers × 3 KV heads × 64 head_dim × 2 bytes (f16 cache).
    assert_eq!(p.bytes_per_token(), Some(23_040));
    let model = Model::from_file(file, cpu()).unwrap();
    let reference: Reference = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/reference/smollm2-llamacpp.json")).unwrap(),
    )
    .unwrap();
    assert!(!reference.generate.is_empty());
    for (i, case) in reference.generate.iter().enumerate() {
        let max_new = case.greedy_ids.len();
        let bound = p
            .validate_request(&Request::new(case.prompt_ids.clone(), max_new))
            .unwrap();
        let out = Interpreter::new(&p)
            .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
            .unwrap();
        let core = core_greedy(&model, &case.prompt_ids, max_new, &[0, 2]);
        assert_eq!(out.tokens, core, "reference prompt {i}");
    }
}

/// Decode tokens/s of the interpreter vs the fused decode core on the real model, in
/// the same run. Run with
/// `cargo test --release -p engine --test model -- workflow_model:: --ignored --nocapture`.
#[test]
#[ignore = "benchmark: run explicitly in release mode"]
fn bench_interpreter_decode_vs_decode_core() {
    let path = model_path();
    let file = Arc::new(GgufFile::open(&path).unwrap());
    let model = Arc::new(Model::from_file(file.clone(), cpu()).unwrap());
    let spec = ManifestSpec {
        name: "bench".into(),
        weights: path.display().to_string(),
        eog: vec![-1], // never stops early: both sides decode exactly `n` tokens
        session: false,
        vision: None,
    };
    let m = Package::parse_manifest(&standard_manifest_json(&spec).to_string(), &path).unwrap();
    let p = Package::from_parts(
        m,
        Some(Arc::new(GgufWeights::new(file).unwrap())),
        Some(Arc::new(ModelBlocks::from_model(model.clone()))),
    )
    .unwrap();
    let prompt: Vec<u32> = vec![
        1, 4093, 198, 19161, 253, 1789, 563, 253, 2365, 30, 2, 198, 1, 520, 9531, 198,
    ];
    let n = 64;
    // Alternate the two executors over several rounds and compare aggregate decode
    // throughput, so load changes on a shared machine hit both sides alike.
    let (mut interp_secs, mut core_secs) = (0.0f64, 0.0f64);
    let rounds = 5;
    for round in 0..rounds {
        // Interpreter: time from the first emitted token to the last.
        let bound = p
            .validate_request(&Request::new(prompt.clone(), n))
            .unwrap();
        let mut first = None;
        let out = Interpreter::new(&p)
            .run(&bound, &mut Session::new(None), &mut |_| {
                if first.is_none() {
                    first = Some(Instant::now());
                }
                Flow::Continue
            })
            .unwrap();
        let ti = first.unwrap().elapsed().as_secs_f64();
        // Decode core: same tokens, same timing window.
        let mut kv = KvCache::new(model.kv_config(prompt.len() + n, KV_DTYPE)).unwrap();
        let seq = kv.create_sequence();
        let mut logits = model.forward(&mut kv, seq, &prompt, Logits::Last).unwrap();
        let mut toks = vec![argmax(&logits)];
        let t0 = Instant::now();
        while toks.len() < n {
            logits = model
                .forward(&mut kv, seq, &[*toks.last().unwrap()], Logits::Last)
                .unwrap();
            toks.push(argmax(&logits));
        }
        let tc = t0.elapsed().as_secs_f64();
        assert_eq!(out.tokens, toks);
        println!(
            "round {round}: interpreter {:.1} tok/s, decode core {:.1} tok/s",
            (n - 1) as f64 / ti,
            (n - 1) as f64 / tc
        );
        interp_secs += ti;
        core_secs += tc;
    }
    let tokens = (rounds * (n - 1)) as f64;
    let (interp, core) = (tokens / interp_secs, tokens / core_secs);
    let ratio = interp / core;
    println!(
        "aggregate: interpreter {interp:.1} tok/s, decode core {core:.1} tok/s, ratio {ratio:.3}"
    );
    assert!(
        ratio >= 0.9,
        "interpreter decode is {ratio:.3}x the decode core"
    );
}

#[test]
fn tiny_packages_carry_a_working_byte_level_tokenizer() {
    use engine::tokenizer::{GgufVocab, Tokenizer};
    for name in ["tiny-decoder", "tiny-vlm"] {
        let file = GgufFile::open(packages().join(name).join("model.gguf")).unwrap();
        let tok =
            Tokenizer::from_vocab(&GgufVocab::from_metadata(file.metadata()).unwrap()).unwrap();
        // 256 byte tokens + 4 merges + 3 control tokens.
        assert_eq!(tok.vocab_size(), 263);
        let text = "hello the café <|im_end|>";
        let ids = tok.encode(text).unwrap();
        // "he", "ll", " the" merge; "<|im_end|>" is one control token (id 262).
        assert!(
            ids.contains(&256) && ids.contains(&259) && ids.contains(&262),
            "{ids:?}"
        );
        assert_eq!(tok.decode(&ids).unwrap(), text);
        assert!(tok.is_eog(262));
    }
}
