//! What an `Engine` tells its caller besides admission: its accessors, a shared scheduler's pricing check, sessions, the interpreter's unsupported settings, and the timings and event log of a result.
//!
//! Runs on the tiny fixture models (`fixtures/packages/README.md`): `bare` is the tiny
//! GGUF on the decode core, `interpreter_only` the `tiny-decoder` package with the decode
//! core off. A few tests load a changed copy of a fixture package from a temporary
//! directory ([`package_copy`]): one without its decoder, one whose pixels are optional,
//! one with a `tokenizer.json` written by the `tokenizers` library.

use engine::kv::KvDtype;

use engine::gguf::{GgufFile, GgufWriter};
use engine::runtime::{
    BadRequest, Engine, EngineError, EngineOptions, Finish, Flow, GenerateRequest, Prompt, Route,
};
use engine::scheduler::{AdmissionError, KvGeometry, Scheduler, SchedulerConfig};
use engine::workflow::{Event, Tensor};
use serde_json::{Value as Json, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/packages");

/// KV bytes per token of the tiny fixture decoders: 2 (K, V) x 2 layers x 2 KV heads x
/// head dim 8 x 4 bytes (f32 cache), from their published geometry.
const BPT: u64 = 2 * 2 * 2 * 8 * 4;

fn opts(decode_core: bool) -> EngineOptions {
    EngineOptions {
        kv_budget_bytes: 1 << 20,
        max_running: 4,
        decode_core,
        threads: 1,
        kv_dtype: KvDtype::F32,
    }
}

fn bare() -> Engine {
    Engine::load_gguf(format!("{FIXTURES}/tiny-decoder/model.gguf"), opts(true))
        .expect("fixture model loads")
}

fn interpreter_only() -> Engine {
    Engine::load_package(format!("{FIXTURES}/tiny-decoder"), opts(false))
        .expect("fixture package loads")
}

fn package_on_core() -> Engine {
    Engine::load_package(format!("{FIXTURES}/tiny-decoder"), opts(true))
        .expect("fixture package loads")
}

/// A copy of fixture package `name` (its `package.json` changed by `edit`, its weights
/// copied) in a temporary directory, removed when the returned guard drops.
fn package_copy(name: &str, edit: impl FnOnce(&mut Json)) -> tempfile::TempDir {
    let from = std::path::Path::new(FIXTURES).join(name);
    let dir = tempfile::tempdir().expect("temporary directory");
    let text = std::fs::read_to_string(from.join("package.json")).expect("fixture manifest");
    let mut manifest: Json = serde_json::from_str(&text).expect("fixture manifest is JSON");
    edit(&mut manifest);
    std::fs::write(dir.path().join("package.json"), manifest.to_string()).expect("write");
    std::fs::copy(from.join("model.gguf"), dir.path().join("model.gguf")).expect("copy");
    dir
}

fn priced(bytes_per_token: u64) -> Scheduler {
    Scheduler::new(SchedulerConfig {
        budget_bytes: 1 << 20,
        bytes_per_token: Some(bytes_per_token),
        max_running: 4,
    })
    .expect("valid config")
}

#[test]
fn accessors_describe_what_each_engine_serves() {
    let geometry = KvGeometry {
        n_layers: 2,
        n_kv_heads: 2,
        head_dim: 8,
        elem_bytes: 4,
    };
    let core = bare();
    assert!(core.has_decode_core());
    assert!(core.package().is_none());
    assert!(core.tokenizer().is_some(), "the GGUF vocabulary");
    assert!(core.model().is_some());
    assert_eq!(core.kv_geometry(), Some(geometry));
    let interp = interpreter_only();
    assert!(!interp.has_decode_core());
    assert!(interp.package().is_some());
    assert!(interp.tokenizer().is_some(), "the weights' GGUF vocabulary");
    assert!(interp.model().is_none(), "no decode core, no model");
    assert_eq!(interp.kv_geometry(), Some(geometry));
    assert!(package_on_core().has_decode_core());
}

#[test]
fn debug_shows_the_route_package_geometry_and_usage() {
    let core = format!("{:?}", bare());
    for part in [
        "Engine",
        "decode_core: true",
        "package: None",
        "n_layers: 2",
        "used_bytes: 0",
    ] {
        assert!(core.contains(part), "{core:?} lacks {part:?}");
    }
    let interp = format!("{:?}", interpreter_only());
    for part in ["decode_core: false", "package: Some(", "tiny"] {
        assert!(interp.contains(part), "{interp:?} lacks {part:?}");
    }
}

#[test]
fn a_shared_scheduler_must_price_tokens_as_the_model_does() {
    match bare().with_scheduler(priced(BPT + 1)) {
        Err(EngineError::SchedulerMismatch { scheduler, model }) => {
            assert_eq!((scheduler, model), (BPT + 1, BPT))
        }
        other => panic!("expected SchedulerMismatch, got {:?}", other.map(|_| ())),
    }
    let shared = priced(BPT);
    let e = bare().with_scheduler(shared.clone()).expect("same pricing");
    let r = e
        .generate(&GenerateRequest::tokens(vec![72, 73], 2))
        .expect("runs");
    assert_eq!(r.usage.used_bytes, 4 * BPT, "the shared scheduler held it");
    // A scheduler without a byte price is accepted (no byte budget).
    let free = Scheduler::new(SchedulerConfig {
        budget_bytes: 0,
        bytes_per_token: None,
        max_running: 1,
    })
    .expect("valid config");
    bare()
        .with_scheduler(free)
        .expect("no byte budget is accepted");
}

#[test]
fn refusal_names_the_admission_error_and_only_it() {
    let e = EngineError::Refused(AdmissionError::ZeroRows);
    assert_eq!(e.refusal(), Some(&AdmissionError::ZeroRows));
    let bad = EngineError::BadRequest(BadRequest::NoTokenizer);
    assert_eq!(bad.refusal(), None);
}

#[test]
fn a_session_carries_its_turns_until_it_ends() {
    let e = bare();
    let first = e
        .generate(&GenerateRequest::tokens(vec![72, 73, 74], 2).with_session("s"))
        .expect("turn 1");
    assert_eq!(first.carried_tokens, 0);
    let second = e
        .generate(&GenerateRequest::tokens(vec![75], 1).with_session("s"))
        .expect("turn 2");
    assert_eq!(second.carried_tokens, 3 + first.tokens().len());
    assert!(e.end_session("s"));
    assert!(!e.end_session("s"), "already ended");
    let fresh = e
        .generate(&GenerateRequest::tokens(vec![75], 1).with_session("s"))
        .expect("a new session");
    assert_eq!(fresh.carried_tokens, 0);
}

#[test]
fn the_interpreter_refuses_each_decode_core_only_setting_by_name() {
    let e = interpreter_only();
    let base = GenerateRequest::tokens(vec![72, 73], 2);
    let mut no_eog = base.clone();
    no_eog.stop_at_eog = false;
    let mut top_k = base.clone();
    top_k.sampling.top_k = 5;
    let mut top_p = base.clone();
    top_p.sampling.top_p = 0.5;
    let mut min_p = base.clone();
    min_p.sampling.min_p = 0.1;
    let cases = [
        ("stop", base.clone().with_stop(vec!["x".into()])),
        ("stop_at_eog", no_eog),
        ("top_k", top_k),
        ("top_p", top_p),
        ("min_p", min_p),
    ];
    for (field, req) in cases {
        match e.generate(&req) {
            Err(EngineError::BadRequest(BadRequest::InterpreterUnsupported { field: got })) => {
                assert_eq!(got, field)
            }
            other => panic!(
                "{field}: expected InterpreterUnsupported, got {:?}",
                other.map(|_| ())
            ),
        }
    }
    // The decode core honours them all.
    let mut all = base.with_stop(vec!["x".into()]);
    all.stop_at_eog = false;
    all.sampling.top_k = 5;
    bare().generate(&all).expect("the decode core takes them");
    e.generate(&GenerateRequest::tokens(vec![72, 73], 2))
        .expect("defaults run on the interpreter");
}

#[test]
fn interpreter_results_time_row_zero_prefill() {
    let e = interpreter_only();
    // Row 0's callback takes 100 ms per token and row 1's none: row 0's decode time, from
    // its first token to its end, covers every one of those pauses.
    let pause = std::time::Duration::from_millis(100);
    let mut row0_tokens = 0u32;
    let r = e
        .generate_with(
            &GenerateRequest::new(Prompt::Rows(vec![vec![72, 73], vec![74, 75]]), 3),
            &mut |_| {},
            &mut |row, _| {
                if row == 0 {
                    row0_tokens += 1;
                    std::thread::sleep(pause);
                }
                Flow::Continue
            },
        )
        .expect("runs");
    assert_eq!(r.route, Route::Interpreter);
    assert_eq!(r.rows.len(), 2);
    assert!(
        r.prefill_secs > 0.0,
        "row 0's prefill is timed: {}",
        r.prefill_secs
    );
    let paused = (pause * row0_tokens).as_secs_f64();
    assert!(
        r.decode_secs >= paused,
        "the decode time {} s is row 0's, which paused {paused} s",
        r.decode_secs
    );
}

#[test]
fn decode_core_events_number_every_step_of_every_row() {
    let e = bare();
    let r = e
        .generate(&GenerateRequest::new(
            Prompt::Rows(vec![vec![72, 73], vec![74, 75]]),
            3,
        ))
        .expect("runs");
    assert_eq!(r.route, Route::DecodeCore);
    for row in 0..2 {
        let step = format!("decode_core.row[{row}]");
        let seen: Vec<(usize, &str, &str)> = r
            .events
            .events
            .iter()
            .filter_map(|ev| match ev {
                Event::Invoke {
                    step: s,
                    iteration,
                    component,
                    implementation,
                } if *s == step => {
                    Some((iteration[0], component.as_str(), implementation.as_str()))
                }
                _ => None,
            })
            .collect();
        let want: Vec<(usize, &str, &str)> = (0..r.rows[row].tokens.len())
            .flat_map(|i| {
                [
                    (i, "token_embedding", "native:token_embedding"),
                    (i, "llama_decoder", "native:llama_decoder"),
                    (i, "lm_head", "native:lm_head"),
                ]
            })
            .collect();
        assert_eq!(seen, want, "row {row}");
    }
}

#[test]
fn interpreter_streams_the_text_of_its_result_and_stops_when_asked() {
    let e = interpreter_only();
    let req = GenerateRequest::new(Prompt::Text("hi there".into()), 6);
    let mut streamed = String::new();
    let r = e
        .generate_stream(&req, &mut |_| {}, &mut |_, piece| {
            streamed.push_str(piece.text);
            Flow::Continue
        })
        .expect("runs");
    let text = r.rows[0].text.clone().expect("the package has a tokenizer");
    // The pieces release whole characters only; the result's text also renders a trailing
    // incomplete byte sequence.
    assert!(
        !streamed.is_empty(),
        "six generated tokens stream some text"
    );
    assert!(
        text.starts_with(&streamed),
        "the streamed pieces {streamed:?} begin the result's text {text:?}"
    );
    assert_eq!(r.rows[0].finish, Finish::MaxTokens, "{:?}", r.rows[0]);
    // A callback that stops after the first token ends the row as Callback.
    let r = e
        .generate_with(&req, &mut |_| {}, &mut |_, _| Flow::Stop)
        .expect("runs");
    assert_eq!(r.rows[0].tokens.len(), 1);
    assert_eq!(r.rows[0].finish, Finish::Callback);
}

/// `tiny-decoder` without its `llama_decoder` component: embedding, last row, head and
/// sampler only (a bigram model), so the package declares no KV cache.
fn without_decoder(j: &mut Json) {
    let components = j["components"].as_array_mut().expect("components");
    components.retain(|c| c["name"] != "decoder");
    let cells = j["cells"].as_array_mut().expect("cells");
    cells.retain(|c| c["name"] != "decoder_kv");
    let body = j["steps"][2]["loop"]["body"]
        .as_array_mut()
        .expect("the loop body");
    body.retain(|s| s["invoke"]["component"] != "decoder");
    body[1]["invoke"]["inputs"]["hidden"] = json!("x");
    j["steps"][2]["loop"]["carried"] = json!(["pending", "history"]);
}

#[test]
fn a_package_without_a_decoder_prices_nothing_and_refuses_a_priced_scheduler() {
    let dir = package_copy("tiny-decoder", without_decoder);
    let e = Engine::load_package(dir.path(), opts(true)).expect("the package loads");
    assert_eq!(e.kv_geometry(), None, "no llama_decoder, no KV geometry");
    assert!(!e.has_decode_core());
    match e.with_scheduler(priced(BPT)) {
        Err(EngineError::SchedulerMismatch { scheduler, model }) => {
            assert_eq!((scheduler, model), (BPT, 0))
        }
        other => panic!("expected SchedulerMismatch, got {:?}", other.map(|_| ())),
    }
    let e = Engine::load_package(dir.path(), opts(true)).expect("the package loads");
    let free = Scheduler::with_geometry(0, None, 2).expect("no byte budget");
    let e = e.with_scheduler(free).expect("an unpriced scheduler fits");
    let r = e
        .generate(&GenerateRequest::tokens(vec![72, 73], 2))
        .expect("runs on the interpreter");
    assert_eq!(r.route, Route::Interpreter);
    assert_eq!(r.reserved_bytes, 0);
    assert_eq!(r.usage.max_running, 2, "the shared scheduler admitted it");
}

/// `pixels` patches of tiny-vlm's `pixel_values` (12 values each).
fn pixels(patches: usize) -> Tensor {
    let data = (0..patches * 12).map(|i| (i as f32 * 0.37).sin()).collect();
    Tensor::f32(&[patches, 12], data).expect("shape matches")
}

#[test]
fn a_session_refuses_a_turn_on_the_other_route() {
    // tiny-vlm with `pixel_values` optional: prompt-only turns run on the decode core,
    // turns with pixels on the interpreter.
    let dir = package_copy("tiny-vlm", |j| {
        j["inputs"]["application"][0]["required"] = json!(false)
    });
    let e = Engine::load_package(dir.path(), opts(true)).expect("the package loads");
    assert!(e.has_decode_core());
    let plain = |s: &str| GenerateRequest::tokens(vec![72, 73], 2).with_session(s);
    let seen = |s: &str| plain(s).with_input("pixel_values", pixels(2));
    let first = e
        .generate(&plain("core"))
        .expect("turn 1 on the decode core");
    assert_eq!(first.route, Route::DecodeCore);
    let started = e
        .generate(&seen("interp"))
        .expect("turn 1 on the interpreter");
    assert_eq!(started.route, Route::Interpreter);
    for (req, session, was, now) in [
        (seen("core"), "core", Route::DecodeCore, Route::Interpreter),
        (
            plain("interp"),
            "interp",
            Route::Interpreter,
            Route::DecodeCore,
        ),
    ] {
        match e.generate(&req) {
            Err(EngineError::BadRequest(BadRequest::SessionRoute {
                session: s,
                started,
                now: n,
            })) => assert_eq!((s.as_str(), started, n), (session, was, now)),
            other => panic!(
                "{session}: expected SessionRoute, got {:?}",
                other.map(|r| r.route)
            ),
        }
    }
    assert_eq!(e.scheduler().usage().used_bytes, 0, "nothing was admitted");
    let again = e
        .generate(&plain("core"))
        .expect("its own route still serves it");
    assert_eq!(again.carried_tokens, 2 + first.tokens().len());
}

/// A word-level `tokenizer.json` of 300 words `w0`..`w299` split on whitespace, written
/// by the `tokenizers` library (more ids than the weights' vocabulary, so its special ids
/// fit).
fn write_word_tokenizer(path: &std::path::Path) {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::WhitespaceSplit;
    let model = WordLevel::builder()
        .vocab((0..300u32).map(|i| (format!("w{i}"), i)).collect())
        .unk_token("w0".into())
        .build()
        .expect("a word-level model");
    let mut t = tokenizers::Tokenizer::new(model);
    t.with_pre_tokenizer(Some(WhitespaceSplit));
    t.save(path, false).expect("tokenizer.json written");
}

#[test]
fn a_package_tokenizer_json_replaces_the_weights_vocabulary() {
    let dir = package_copy("tiny-decoder", |_| {});
    write_word_tokenizer(&dir.path().join("tokenizer.json"));
    let e = Engine::load_package(dir.path(), opts(false)).expect("the package loads");
    let tok = e.tokenizer().expect("the package's tokenizer.json");
    assert_eq!(tok.vocab_size(), 300);
    assert_eq!(tok.encode("w72 w73").expect("encodes"), vec![72, 73]);
    let r = e
        .generate(&GenerateRequest::new(Prompt::Text("w72 w73".into()), 1))
        .expect("runs");
    assert_eq!(r.prompt_tokens, 2, "two words, two tokens");
}

/// Copies the GGUF at `from` to `to` without its `tokenizer.*` metadata (the weights and
/// every other key unchanged), as a model converted without its vocabulary would be.
fn without_vocabulary(from: &std::path::Path, to: &std::path::Path) {
    let file = GgufFile::open(from).expect("fixture weights");
    let mut w = GgufWriter::new().alignment(file.alignment());
    for (key, value) in file.metadata().iter() {
        if !key.starts_with("tokenizer.") {
            w.metadata(key, value.clone());
        }
    }
    for info in file.tensors() {
        let view = file.require_tensor(&info.name).expect("a listed tensor");
        w.tensor(&info.name, &info.dims, info.ty, view.data.to_vec())
            .expect("the same tensor");
    }
    w.write_to(to).expect("weights written");
}

#[test]
fn weights_without_a_vocabulary_serve_token_ids_and_refuse_text_first() {
    let dir = package_copy("tiny-decoder", |_| {});
    let weights = dir.path().join("model.gguf");
    let from = std::path::Path::new(FIXTURES).join("tiny-decoder/model.gguf");
    without_vocabulary(&from, &weights);
    let e = Engine::load_package(dir.path(), opts(false)).expect("loads without a tokenizer");
    assert!(
        e.tokenizer().is_none(),
        "neither tokenizer.json nor a GGUF vocabulary"
    );
    let r = e
        .generate(&GenerateRequest::tokens(vec![72, 73], 2))
        .expect("token ids run");
    assert_eq!(r.rows[0].text, None, "no tokenizer, no text");
    assert!(!r.tokens().is_empty());
    // A text prompt is refused as such before any other setting is looked at.
    let mut text = GenerateRequest::new(Prompt::Text("hi".into()), 2);
    text.sampling.top_k = 5;
    match e.generate(&text) {
        Err(EngineError::BadRequest(BadRequest::NoTokenizer)) => {}
        other => panic!("expected NoTokenizer, got {:?}", other.map(|r| r.route)),
    }
}

#[test]
fn an_interpreter_row_ends_at_the_token_the_packages_stop_check_names() {
    let req = GenerateRequest::tokens(vec![72, 73], 4);
    let first = interpreter_only()
        .generate(&GenerateRequest::tokens(vec![72, 73], 1))
        .expect("runs")
        .tokens()[0];
    // The same package whose termination check stops on that token (and only on it).
    let dir = package_copy("tiny-decoder", |j| {
        let check = j["components"]
            .as_array_mut()
            .expect("components")
            .iter_mut()
            .find(|c| c["name"] == "stop_check")
            .expect("the termination check");
        check["implementation"]["graph"]["constants"][0]["data"] = json!([first as f64]);
        check["implementation"]["graph"]["constants"][0]["shape"] = json!([1]);
    });
    let e = Engine::load_package(dir.path(), opts(false)).expect("the package loads");
    let r = e.generate(&req).expect("runs");
    assert_eq!(r.tokens(), &[first]);
    assert_eq!(*r.finish(), Finish::EndOfGeneration { token: first });
}

#[test]
fn zero_new_tokens_on_the_decode_core_prefill_the_whole_prompt() {
    // 40 positions: more than the two KV pages of 16 a batch holds beyond its positions.
    let prompt: Vec<u32> = (0..40).map(|i| 72 + i % 20).collect();
    let r = bare()
        .generate(&GenerateRequest::tokens(prompt, 0))
        .expect("a prefill-only request runs");
    assert_eq!(r.route, Route::DecodeCore);
    assert_eq!(r.prompt_tokens, 40);
    assert!(r.tokens().is_empty(), "{:?}", r.tokens());
    assert_eq!(*r.finish(), Finish::MaxTokens);
    assert_eq!(r.reserved_bytes, 40 * BPT, "the prompt's positions only");
}

/// `EngineOptions::kv_dtype` sets the KV element size the engine prices and runs with, on
/// the decode core and on the interpreter: f16 (the default) costs half the bytes per
/// token of f32, and a request reserves `(prompt + new tokens) × bytes per token`.
#[test]
fn kv_dtype_sets_the_bytes_per_token_on_every_route() {
    assert_eq!(EngineOptions::default().kv_dtype, KvDtype::F16);
    for (dtype, bpt) in [(KvDtype::F32, BPT), (KvDtype::F16, BPT / 2)] {
        let o = |core| EngineOptions {
            kv_dtype: dtype,
            ..opts(core)
        };
        let engines = [
            Engine::load_gguf(format!("{FIXTURES}/tiny-decoder/model.gguf"), o(true)),
            Engine::load_package(format!("{FIXTURES}/tiny-decoder"), o(true)),
            Engine::load_package(format!("{FIXTURES}/tiny-decoder"), o(false)),
        ];
        for (i, e) in engines.into_iter().enumerate() {
            let e = e.expect("fixture loads");
            assert_eq!(e.kv_dtype(), dtype, "engine {i}");
            assert_eq!(
                e.kv_geometry().unwrap().bytes_per_token().unwrap(),
                bpt,
                "engine {i} {dtype:?}"
            );
            let r = e
                .generate(&GenerateRequest::new(
                    Prompt::Tokens(vec![104, 101, 108]),
                    4,
                ))
                .unwrap();
            assert_eq!(r.reserved_bytes, (3 + 4) * bpt, "engine {i} {dtype:?}");
            assert!(!r.rows[0].tokens.is_empty(), "engine {i} {dtype:?}");
        }
    }
}
