//! What an `Engine` tells its caller besides admission: its accessors, a shared scheduler's pricing check, sessions, the interpreter's unsupported settings, and the timings and event log of a result.
//!
//! Runs on the tiny fixture models (`fixtures/packages/README.md`): `bare` is the tiny
//! GGUF on the decode core, `interpreter_only` the `tiny-decoder` package with the decode
//! core off.

use engine::runtime::{
    BadRequest, Engine, EngineError, EngineOptions, Finish, Flow, GenerateRequest, Prompt, Route,
};
use engine::scheduler::{AdmissionError, KvGeometry, Scheduler, SchedulerConfig};
use engine::workflow::Event;

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
    let r = e
        .generate(&GenerateRequest::new(
            Prompt::Rows(vec![vec![72, 73], vec![74, 75]]),
            2,
        ))
        .expect("runs");
    assert_eq!(r.route, Route::Interpreter);
    assert_eq!(r.rows.len(), 2);
    assert!(
        r.prefill_secs > 0.0,
        "row 0's prefill is timed: {}",
        r.prefill_secs
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
