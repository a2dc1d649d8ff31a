//! Interpreter, validation and request-binding tests over a fake native backend whose outputs are known by construction.

use std::any::Any;
use std::path::Path;
use std::sync::{Arc, Mutex};

use engine::workflow::fixtures::{ManifestSpec, VISION_CONTRACT, standard_manifest_json};
use engine::workflow::manifest::Graph;
use engine::workflow::{
    BoxError, Flow, Interpreter, KvGeometry, KvState, LoopExit, MemWeights, NativeBlocks, Package,
    Replacement, Request, Session, Tensor,
};
use proptest::prelude::*;
use serde_json::{Value as Json, json};

const HIDDEN: usize = 4;
const VOCAB: usize = 6;

/// Fake KV state: counts positions, refuses to grow past its capacity.
struct FakeKv {
    n: usize,
    cap: usize,
}

impl KvState for FakeKv {
    fn positions(&self) -> usize {
        self.n
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A fake decoder: embedding row of token t is `[t, 0, 0, 0]`; the decoder writes each
/// row's absolute position into element 1; lm_head puts logit 1 on `(row[0] + 1) % VOCAB`
/// and 0 elsewhere. So greedy decoding continues `t, t+1, t+2, ...` modulo VOCAB.
#[derive(Default)]
struct Fake {
    /// Rows passed to each decoder call, and the KV positions before it.
    decoder_calls: Mutex<Vec<(usize, usize)>>,
}

impl NativeBlocks for Fake {
    fn hidden(&self) -> usize {
        HIDDEN
    }
    fn vocab(&self) -> usize {
        VOCAB
    }
    fn kv_geometry(&self) -> KvGeometry {
        KvGeometry {
            n_layers: 2,
            n_kv_heads: 1,
            head_dim: 2,
            elem_bytes: 4,
        }
    }
    fn new_kv(&self, max_positions: usize) -> Result<Box<dyn KvState>, BoxError> {
        Ok(Box::new(FakeKv {
            n: 0,
            cap: max_positions,
        }))
    }
    fn token_embedding(&self, tokens: &[u32]) -> Result<Vec<f32>, BoxError> {
        let mut out = vec![0.0; tokens.len() * HIDDEN];
        for (i, &t) in tokens.iter().enumerate() {
            if t as usize >= VOCAB {
                return Err(format!("token {t} out of vocabulary").into());
            }
            out[i * HIDDEN] = t as f32;
        }
        Ok(out)
    }
    fn llama_decoder(&self, x: &mut [f32], kv: &mut dyn KvState) -> Result<(), BoxError> {
        let kv = kv
            .as_any_mut()
            .downcast_mut::<FakeKv>()
            .ok_or("foreign KV state")?;
        let n = x.len() / HIDDEN;
        self.decoder_calls.lock().unwrap().push((n, kv.n));
        if kv.n + n > kv.cap {
            return Err(format!("KV full: {} + {n} > {}", kv.n, kv.cap).into());
        }
        for i in 0..n {
            x[i * HIDDEN + 1] = (kv.n + i) as f32;
        }
        kv.n += n;
        Ok(())
    }
    fn lm_head(&self, x: &[f32]) -> Result<Vec<f32>, BoxError> {
        let n = x.len() / HIDDEN;
        let mut out = vec![0.0; n * VOCAB];
        for i in 0..n {
            let target = (x[i * HIDDEN] as usize + 1) % VOCAB;
            out[i * VOCAB + target] = 1.0;
        }
        Ok(out)
    }
}

const PATCH: u64 = 3;

fn weights() -> MemWeights {
    let mut w = MemWeights::new();
    w.declare("token_embd.weight", &[VOCAB, HIDDEN])
        .declare("blk.0.attn_q.weight", &[HIDDEN, HIDDEN])
        .declare("output_norm.weight", &[HIDDEN]);
    // Projector: pixel row p → embedding [p0 + p1 + p2, 0, 0, 0] + bias [1, 0, 0, 0].
    let mut wdata = vec![0.0f32; PATCH as usize * HIDDEN];
    for r in 0..PATCH as usize {
        wdata[r * HIDDEN] = 1.0;
    }
    w.insert(
        "vision.proj.weight",
        Tensor::f32(&[PATCH as usize, HIDDEN], wdata).unwrap(),
    );
    w.insert(
        "vision.proj.bias",
        Tensor::f32(&[HIDDEN], vec![1.0, 0.0, 0.0, 0.0]).unwrap(),
    );
    w
}

fn spec(session: bool, vision: bool) -> ManifestSpec {
    ManifestSpec {
        name: "fake".into(),
        weights: "fake.gguf".into(),
        eog: vec![5],
        session,
        vision: vision.then(|| {
            (
                PATCH,
                "vision.proj.weight".to_string(),
                "vision.proj.bias".to_string(),
            )
        }),
    }
}

fn package_from_json(j: &Json, fake: Arc<Fake>) -> Result<Package, String> {
    let text = serde_json::to_string(j).unwrap();
    let m = Package::parse_manifest(&text, Path::new("package.json")).map_err(|e| e.to_string())?;
    Package::from_parts(m, Some(Arc::new(weights())), Some(fake)).map_err(|e| e.to_string())
}

fn package(session: bool, vision: bool) -> (Package, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let p = package_from_json(
        &standard_manifest_json(&spec(session, vision)),
        fake.clone(),
    )
    .expect("standard manifest validates");
    (p, fake)
}

fn run(p: &Package, req: &Request, session: &mut Session) -> engine::workflow::Output {
    let bound = p.validate_request(req).expect("request binds");
    Interpreter::new(p)
        .run(&bound, session, &mut |_| Flow::Continue)
        .expect("run succeeds")
}

const STEP_COMPONENTS: [&str; 6] = [
    "embed",
    "decoder",
    "last_row",
    "head",
    "sampler",
    "stop_check",
];

#[test]
fn greedy_run_streams_tokens_and_stops_at_eog() {
    let (p, fake) = package(false, false);
    let mut streamed = Vec::new();
    let bound = p.validate_request(&Request::new(vec![1, 2], 10)).unwrap();
    let out = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |t| {
            streamed.push(t);
            Flow::Continue
        })
        .unwrap();
    // 2 → 3 → 4 → 5 (end of generation).
    assert_eq!(out.tokens, vec![3, 4, 5]);
    assert_eq!(streamed, vec![3, 4, 5]);
    assert_eq!(
        out.outputs["tokens"],
        Tensor::i64(&[3], vec![3, 4, 5]).unwrap()
    );
    // Prefill of the two prompt tokens, then one decode per generated token but the last.
    assert_eq!(
        *fake.decoder_calls.lock().unwrap(),
        vec![(2, 0), (1, 2), (1, 3)]
    );
    for it in 0..3 {
        assert_eq!(
            out.events.invoked_in(&[it]),
            STEP_COMPONENTS,
            "iteration {it}"
        );
    }
    assert!(out.events.invoked_in(&[3]).is_empty());
    assert!(out.events.invoked_in(&[]).is_empty());
    assert_eq!(out.events.loop_exits(), vec![LoopExit::Condition]);
    // 2 (K and V) × 2 layers × 1 KV head × 2 head_dim × 4 bytes.
    assert_eq!(p.bytes_per_token(), Some(32));
}

#[test]
fn loop_stops_at_max_new_tokens_and_on_callback() {
    let (p, _) = package(false, false);
    let out = run(&p, &Request::new(vec![0], 2), &mut Session::new(None));
    assert_eq!(out.tokens, vec![1, 2]);
    assert_eq!(out.events.loop_exits(), vec![LoopExit::MaxIterations]);

    let bound = p.validate_request(&Request::new(vec![0], 10)).unwrap();
    let out = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |t| {
            if t == 2 { Flow::Stop } else { Flow::Continue }
        })
        .unwrap();
    assert_eq!(out.tokens, vec![1, 2]);
    assert_eq!(out.events.loop_exits(), vec![LoopExit::Callback]);

    let out = run(&p, &Request::new(vec![0], 0), &mut Session::new(None));
    assert!(out.tokens.is_empty());
    assert!(out.events.invoked().is_empty());
}

#[test]
fn clamped_request_stops_at_the_cap() {
    let (p, _) = package(false, false);
    let mut bound = p.validate_request(&Request::new(vec![0], 10)).unwrap();
    bound.clamp_max_new_tokens(3);
    bound.clamp_max_new_tokens(7); // never raises
    assert_eq!(bound.max_new_tokens(), 3);
    let out = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap();
    assert_eq!(out.tokens, vec![1, 2, 3]);
}

#[test]
fn temperature_sampling_is_seeded_and_reproducible() {
    let (p, _) = package(false, false);
    let mut req = Request::new(vec![0], 4);
    req.temperature = 1.0;
    req.seed = 42;
    let a = run(&p, &req, &mut Session::new(None));
    let b = run(&p, &req, &mut Session::new(None));
    assert_eq!(a.tokens, b.tokens);
    assert!(a.tokens.iter().all(|&t| (t as usize) < VOCAB));
}

#[test]
fn session_carries_tokens_between_turns_and_re_prefills() {
    let (p, fake) = package(true, false);
    let mut s = Session::new(Some("chat-1".into()));
    assert_eq!(p.carried_tokens(&s), 0);
    let mut req = Request::new(vec![1], 2);
    req.session_id = Some("chat-1".into());
    let out = run(&p, &req, &mut s);
    assert_eq!(out.tokens, vec![2, 3]);
    // prompt 1 + generated 2, 3
    assert_eq!(p.carried_tokens(&s), 3);
    assert_eq!(
        s.cell("history"),
        Some(&Tensor::i64(&[3], vec![1, 2, 3]).unwrap())
    );

    let mut req2 = Request::new(vec![0], 2);
    req2.session_id = Some("chat-1".into());
    let out = run(&p, &req2, &mut s);
    assert_eq!(out.tokens, vec![1, 2]);
    assert_eq!(p.carried_tokens(&s), 6);
    // Turn 2 re-prefills the carried prefix plus the new token from an empty KV state.
    let calls = fake.decoder_calls.lock().unwrap().clone();
    assert_eq!(calls, vec![(1, 0), (1, 1), (4, 0), (1, 4)]);

    // A session id against another session is refused.
    let bound = p.validate_request(&req2).unwrap();
    let err = Interpreter::new(&p)
        .run(&bound, &mut Session::new(Some("other".into())), &mut |_| {
            Flow::Continue
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("chat-1") && err.contains("other"), "{err}");
}

#[test]
fn session_id_rejected_by_package_without_session_role() {
    let (p, _) = package(false, false);
    let mut req = Request::new(vec![1], 2);
    req.session_id = Some("s".into());
    let err = p.validate_request(&req).unwrap_err().to_string();
    assert!(err.contains("'fake' does not accept a session id"), "{err}");
}

fn pixels(n: usize) -> Tensor {
    Tensor::f32(
        &[n, PATCH as usize],
        (0..n * PATCH as usize).map(|_| 0.0).collect(),
    )
    .unwrap()
}

#[test]
fn vision_embeddings_are_decoded_before_the_prompt() {
    let (p, fake) = package(false, true);
    let mut req = Request::new(vec![2], 2);
    req.inputs.insert("pixel_values".into(), pixels(4));
    assert_eq!(p.kv_positions(&req.inputs).unwrap(), 4);
    let bound = p.validate_request(&req).unwrap();
    assert_eq!(bound.extra_positions(), 4);
    assert!(bound.needs_interpreter());
    let out = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap();
    assert_eq!(out.tokens, vec![3, 4]);
    // 4 image positions first, then the prompt at position 4, then one decode.
    assert_eq!(
        *fake.decoder_calls.lock().unwrap(),
        vec![(4, 0), (1, 4), (1, 5)]
    );
    assert_eq!(out.events.invoked_in(&[]), vec!["projector", "decoder"]);
    assert_eq!(out.events.invoked_in(&[0]), STEP_COMPONENTS);
}

fn identity_projector_graph() -> Graph {
    serde_json::from_value(json!({
        "constants": [{"name": "w", "dtype": "f32", "shape": [3, 4],
                       "data": [0,0,0,0, 0,0,0,0, 0,0,0,0]}],
        "nodes": [{"out": "y", "op": {"kind": "MatMul", "a": "pixels", "b": "w"}}],
        "outputs": {"embeddings": "y"}
    }))
    .unwrap()
}

#[test]
fn replacement_with_same_contract_runs_instead_of_the_component() {
    let (p, _) = package(false, true);
    let mut req = Request::new(vec![2], 1);
    req.inputs.insert("pixel_values".into(), pixels(2));
    req.overrides.insert(
        "projector".into(),
        Replacement {
            contract: VISION_CONTRACT.into(),
            graph: identity_projector_graph(),
        },
    );
    let out = run(&p, &req, &mut Session::new(None));
    let impls: Vec<String> = out
        .events
        .events
        .iter()
        .filter_map(|e| match e {
            engine::workflow::Event::Invoke {
                component,
                implementation,
                ..
            } if component == "projector" => Some(implementation.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(impls, vec![format!("replacement:{VISION_CONTRACT}")]);
}

#[test]
fn request_errors_name_what_is_wrong() {
    let (p, _) = package(false, true);
    let base = || {
        let mut r = Request::new(vec![2], 1);
        r.inputs.insert("pixel_values".into(), pixels(2));
        r
    };
    let err = |r: &Request| p.validate_request(r).unwrap_err().to_string();

    let mut r = base();
    r.inputs.insert("audio".into(), pixels(1));
    r.inputs.insert("depth".into(), pixels(1));
    let e = err(&r);
    assert!(
        e.contains("undeclared application input(s): audio, depth"),
        "{e}"
    );
    assert!(e.contains("declares: pixel_values"), "{e}");

    let mut r = base();
    r.inputs.insert(
        "pixel_values".into(),
        Tensor::i64(&[2, 3], vec![0; 6]).unwrap(),
    );
    let e = err(&r);
    assert!(
        e.contains("'pixel_values': expected dtype f32, got i64"),
        "{e}"
    );

    let mut r = base();
    r.inputs.insert(
        "pixel_values".into(),
        Tensor::f32(&[2, 5], vec![0.0; 10]).unwrap(),
    );
    let e = err(&r);
    assert!(
        e.contains("'pixel_values': expected shape [n_patches, 3], got [2, 5]"),
        "{e}"
    );

    let mut r = base();
    r.inputs.clear();
    let e = err(&r);
    assert!(
        e.contains("required application input 'pixel_values' is missing"),
        "{e}"
    );

    let mut r = base();
    r.overrides.insert(
        "decoder".into(),
        Replacement {
            contract: VISION_CONTRACT.into(),
            graph: identity_projector_graph(),
        },
    );
    let e = err(&r);
    assert!(e.contains("component 'decoder' is not replaceable"), "{e}");

    let mut r = base();
    r.overrides.insert(
        "projector".into(),
        Replacement {
            contract: "vision_projector@2".into(),
            graph: identity_projector_graph(),
        },
    );
    let e = err(&r);
    assert!(
        e.contains("implements contract 'vision_projector@2', but the package requires 'vision_projector@1'"),
        "{e}"
    );

    let mut r = base();
    let mut g = identity_projector_graph();
    g.outputs.insert("embeddings".into(), "nope".into());
    r.overrides.insert(
        "projector".into(),
        Replacement {
            contract: VISION_CONTRACT.into(),
            graph: g,
        },
    );
    let e = err(&r);
    assert!(
        e.contains("replacement for component 'projector'") && e.contains("'nope'"),
        "{e}"
    );

    let mut r = base();
    r.overrides.insert(
        "nosuch".into(),
        Replacement {
            contract: VISION_CONTRACT.into(),
            graph: identity_projector_graph(),
        },
    );
    assert!(err(&r).contains("unknown component 'nosuch'"));
}

#[test]
fn run_errors_name_component_port_and_value() {
    // An optional input used by a step: absent at run time.
    let mut j = standard_manifest_json(&spec(false, true));
    j["inputs"]["application"][0]["required"] = json!(false);
    let p = package_from_json(&j, Arc::new(Fake::default())).unwrap();
    let bound = p.validate_request(&Request::new(vec![1], 1)).unwrap();
    let e = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "component 'projector' input 'pixels' references unavailable value 'pixel_values'"
    );

    // A token outside the fake vocabulary: the native block's error names the component.
    let (p, _) = package(false, false);
    let bound = p.validate_request(&Request::new(vec![9], 1)).unwrap();
    let e = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("component 'embed' (token_embedding): token 9"),
        "{e}"
    );

    // A second decoder run on KV values the first run already advanced: stale.
    let mut j = standard_manifest_json(&spec(false, false));
    j["cells"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "kv_b", "dtype": "kv", "scope": "invocation", "init": "empty"}));
    j["steps"] = json!([
        {"invoke": {"component": "embed", "inputs": {"tokens": "prompt"}, "outputs": {"hidden": "x"}}},
        {"invoke": {"component": "decoder", "inputs": {"hidden": "x", "past": "decoder_kv"},
                    "outputs": {"present": "kv_b"}}},
        {"invoke": {"component": "decoder", "inputs": {"hidden": "x", "past": "decoder_kv"},
                    "outputs": {"present": "kv_b"}}}
    ]);
    let p = package_from_json(&j, Arc::new(Fake::default())).unwrap();
    let bound = p.validate_request(&Request::new(vec![1, 2], 1)).unwrap();
    let e = Interpreter::new(&p)
        .run(&bound, &mut Session::new(None), &mut |_| Flow::Continue)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("component 'decoder' input 'past' references stale KV value 'decoder_kv.0000'"),
        "{e}"
    );
}

/// Validate the standard manifest after `f` edits its JSON; the error text.
fn invalid(vision: bool, f: impl FnOnce(&mut Json)) -> String {
    let mut j = standard_manifest_json(&spec(false, vision));
    f(&mut j);
    match package_from_json(&j, Arc::new(Fake::default())) {
        Ok(_) => panic!("edited manifest validated: {j}"),
        Err(e) => e,
    }
}

fn body(j: &mut Json) -> &mut Vec<Json> {
    let steps = j["steps"].as_array_mut().unwrap();
    let l = steps.last_mut().unwrap();
    l["loop"]["body"].as_array_mut().unwrap()
}

#[test]
fn validation_errors_name_what_is_wrong() {
    type Edit = Box<dyn FnOnce(&mut Json)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|j| body(j)[3]["invoke"]["component"] = json!("heda")),
            "step steps[2].body[3] invokes unknown component 'heda'",
        ),
        (
            Box::new(|j| body(j)[0]["invoke"]["inputs"] = json!({"tokenz": "pending"})),
            "component 'embed' has no input port 'tokenz'",
        ),
        (
            Box::new(|j| body(j)[0]["invoke"]["inputs"]["tokens"] = json!("pendng")),
            "component 'embed' input 'tokens' references unavailable value 'pendng'",
        ),
        (
            Box::new(|j| body(j)[4]["invoke"]["inputs"]["logits"] = json!("pending")),
            "component 'sampler' input 'logits' expects f32 rank 2, but value 'pending' is i64 rank 1",
        ),
        (
            Box::new(|j| body(j)[1]["invoke"]["inputs"]["past"] = json!("kv")),
            "component 'decoder' input 'past' references unavailable value 'kv'",
        ),
        (
            Box::new(|j| {
                let l = j["steps"].as_array_mut().unwrap().last_mut().unwrap();
                l["loop"]["max_iterations"] = json!({"fixed": 0});
            }),
            "loop max_iterations 0 is outside",
        ),
        (
            Box::new(|j| {
                let l = j["steps"].as_array_mut().unwrap().last_mut().unwrap();
                l["loop"]["max_iterations"] = json!({"role": "temperature"});
            }),
            "cannot be bounded by role 'temperature'",
        ),
        (
            Box::new(|j| {
                let l = j["steps"].as_array_mut().unwrap().last_mut().unwrap();
                l["loop"]["carried"] = json!(["decoder_kv"]);
            }),
            "writes cell 'pending' inside loop steps[2] that does not carry it",
        ),
        (
            Box::new(|j| {
                let l = j["steps"].as_array_mut().unwrap().last_mut().unwrap();
                l["loop"]["continue_if"] = json!("stop");
            }),
            "continue_if references value 'stop'",
        ),
        (
            Box::new(|j| j["cells"][0]["scope"] = json!("session")),
            "cell 'decoder_kv': a kv cell must have invocation scope",
        ),
        (
            Box::new(|j| {
                j["components"][5]["implementation"]["graph"]["nodes"][0]["op"]["b"] = json!("eogx")
            }),
            "component 'stop_check' node 'hit' references unknown value 'eogx'",
        ),
        (
            Box::new(|j| {
                j["components"][5]["implementation"]["graph"]["nodes"][1]["op"]["axis"] = json!(3)
            }),
            "component 'stop_check' node 'any': ReduceMax: axis 3 is out of range for rank 1",
        ),
        (
            Box::new(|j| {
                j["components"][1]["implementation"]["native"]["tensor_prefix"] = json!("layers.")
            }),
            "component 'decoder' references tensor 'layers.*'",
        ),
        (
            Box::new(|j| {
                j["components"][6]["implementation"]["graph"]["weights"][0]["tensor"] =
                    json!("vision.nope")
            }),
            "component 'projector' references tensor 'vision.nope'",
        ),
        (
            Box::new(|j| j["components"][2]["outputs"][0]["shape"] = json!(["hidden"])),
            "component 'last_row' port 'last': declared f32 rank 1, but graph value 'last' is f32 rank 2",
        ),
        (
            Box::new(|j| j["components"][0]["inputs"][0]["dtype"] = json!("f32")),
            "component 'embed': token_embedding block input ports must be (tokens: i64 rank 1)",
        ),
        (
            Box::new(|j| body(j)[4]["invoke"]["outputs"]["token"] = json!("prompt")),
            "writes input value 'prompt', which is read-only",
        ),
        (
            Box::new(|j| body(j)[5]["emit"]["to"] = json!("tokenz")),
            "emit to 'tokenz', which is neither a declared output nor a cell",
        ),
        (
            Box::new(|j| j["components"][6]["replaceable"] = json!("vision_projector")),
            "component 'projector': contract 'vision_projector' must be written id@version",
        ),
        (
            Box::new(|j| {
                let c = j["components"][0].clone();
                j["components"].as_array_mut().unwrap().push(c);
            }),
            "duplicate component 'embed'",
        ),
        (
            Box::new(|j| j["components"][0]["bogus"] = json!(1)),
            "unknown field `bogus`",
        ),
        (
            Box::new(|j| j["schema_version"] = json!(2)),
            "schema_version 2 is not supported (this engine reads 1)",
        ),
    ];
    for (i, (edit, want)) in cases.into_iter().enumerate() {
        let e = invalid(true, edit);
        assert!(e.contains(want), "case {i}: expected {want:?} in {e:?}");
    }
}

#[test]
fn native_blocks_need_a_model() {
    let j = standard_manifest_json(&spec(false, false));
    let m = Package::parse_manifest(&j.to_string(), Path::new("p.json")).unwrap();
    let e = Package::from_parts(m.clone(), None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("component 'embed' needs a weights file"), "{e}");
    let e = Package::from_parts(m, Some(Arc::new(weights())), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("component 'embed': is a native block, but no model is bound"),
        "{e}"
    );
}

#[test]
fn package_without_decoder_has_no_kv_geometry() {
    let j = json!({
        "schema_version": 1, "name": "graph-only",
        "inputs": {"request": [{"role": "prompt_tokens", "value": "prompt"}]},
        "components": [{
            "name": "echo",
            "inputs": [{"name": "t", "dtype": "i64", "shape": ["n"]}],
            "outputs": [{"name": "u", "dtype": "i64", "shape": ["n"]}],
            "implementation": {"graph": {"nodes": [], "outputs": {"u": "t"}}}
        }],
        "outputs": [{"name": "tokens", "dtype": "i64", "stream_tokens": true}],
        "steps": [
            {"invoke": {"component": "echo", "inputs": {"t": "prompt"}, "outputs": {"u": "v"}}},
            {"emit": {"value": "v", "to": "tokens", "mode": "append"}}
        ]
    });
    let m = Package::parse_manifest(&j.to_string(), Path::new("p.json")).unwrap();
    let p = Package::from_parts(m, None, None).unwrap();
    assert_eq!(p.kv_geometry(), None);
    assert_eq!(p.bytes_per_token(), None);
    let out = run(&p, &Request::new(vec![7, 8], 4), &mut Session::new(None));
    assert_eq!(out.tokens, vec![7, 8]);
    assert_eq!(out.events.invoked(), vec!["echo"]);
}

/// JSON pointers of every reference (not definition) in a manifest, found by walking the
/// JSON independently of the engine's validator.
fn reference_sites(j: &Json) -> Vec<String> {
    let mut out = Vec::new();
    fn steps(s: &Json, path: &str, out: &mut Vec<String>) {
        for (i, st) in s.as_array().unwrap().iter().enumerate() {
            let p = format!("{path}/{i}");
            if let Some(inv) = st.get("invoke") {
                out.push(format!("{p}/invoke/component"));
                for k in inv["inputs"].as_object().unwrap().keys() {
                    out.push(format!("{p}/invoke/inputs/{k}"));
                }
            } else if st.get("emit").is_some() {
                out.push(format!("{p}/emit/value"));
                out.push(format!("{p}/emit/to"));
            } else if let Some(l) = st.get("loop") {
                for k in 0..l["carried"].as_array().unwrap().len() {
                    out.push(format!("{p}/loop/carried/{k}"));
                }
                out.push(format!("{p}/loop/continue_if"));
                steps(&l["body"], &format!("{p}/loop/body"), out);
            }
        }
    }
    steps(&j["steps"], "/steps", &mut out);
    for (ci, c) in j["components"].as_array().unwrap().iter().enumerate() {
        let base = format!("/components/{ci}/implementation");
        if let Some(g) = c["implementation"].get("graph") {
            for (ni, n) in g["nodes"].as_array().unwrap().iter().enumerate() {
                for (k, v) in n["op"].as_object().unwrap() {
                    if v.is_string() && !["kind", "to"].contains(&k.as_str()) {
                        out.push(format!("{base}/graph/nodes/{ni}/op/{k}"));
                    }
                }
            }
            for k in g["outputs"].as_object().unwrap().keys() {
                out.push(format!("{base}/graph/outputs/{k}"));
            }
            for wi in 0..g
                .get("weights")
                .and_then(Json::as_array)
                .map_or(0, Vec::len)
            {
                out.push(format!("{base}/graph/weights/{wi}/tensor"));
            }
        }
    }
    for (i, c) in j["cells"].as_array().unwrap().iter().enumerate() {
        if c["init"].get("input").is_some() {
            out.push(format!("/cells/{i}/init/input"));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Renaming any one reference to a name nothing defines fails validation with an
    /// error (never a panic, never a pass), in every standard package variant.
    #[test]
    fn one_reference_renamed_fails_validation(
        session in any::<bool>(),
        vision in any::<bool>(),
        pick in any::<prop::sample::Index>(),
        suffix in "[a-z]{1,6}",
    ) {
        let mut j = standard_manifest_json(&spec(session, vision));
        let sites = reference_sites(&j);
        prop_assert!(sites.len() > 20);
        let site = &sites[pick.index(sites.len())];
        let slot = j.pointer_mut(site).unwrap();
        let old = slot.as_str().unwrap().to_string();
        *slot = json!(format!("{old}__{suffix}"));
        let r = package_from_json(&j, Arc::new(Fake::default()));
        prop_assert!(r.is_err(), "renaming {} ({}) still validated", site, old);
    }

    /// Arbitrary byte edits of a valid manifest never panic the parser or validator.
    #[test]
    fn mutated_manifest_text_never_panics(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = serde_json::to_vec(&standard_manifest_json(&spec(true, true))).unwrap();
        for (i, b) in edits {
            let k = i.index(bytes.len());
            bytes[k] = b;
        }
        if let Ok(text) = String::from_utf8(bytes)
            && let Ok(m) = Package::parse_manifest(&text, Path::new("p.json"))
        {
            let _ = Package::from_parts(m, Some(Arc::new(weights())), Some(Arc::new(Fake::default())));
        }
    }
}

#[test]
fn reference_sites_cover_the_manifest() {
    // Guard for the property test above: the walker finds references of every kind.
    let j = standard_manifest_json(&spec(true, true));
    let sites = reference_sites(&j);
    for needle in [
        "/invoke/component",
        "/invoke/inputs/past",
        "/emit/to",
        "/loop/carried/2",
        "/loop/continue_if",
        "/graph/nodes/0/op/input",
        "/graph/outputs/token",
        "/graph/weights/1/tensor",
        "/cells/1/init/input",
    ] {
        assert!(
            sites.iter().any(|s| s.ends_with(needle)),
            "no site ending {needle}"
        );
    }
}
