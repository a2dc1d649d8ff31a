//! Requests the admission funnel must turn away before pricing them (`BadRequest`), and text prompts, which it must encode before pricing.
//!
//! Every rejected request is checked for the typed variant with the values at fault,
//! a message naming them, no `on_admitted` signal, no streamed token and an idle
//! scheduler afterwards. Text prompts run on the tiny fixture package model, whose
//! vocabulary is the 256 GPT-2 byte symbols, 4 merges (`h e`, `Ġ t`, `Ġt he`, `l l`) and
//! three ChatML special tokens (`fixtures/packages/README.md`): ASCII text encodes to one
//! token per byte except where those merges apply, and each special token written in the
//! text to one token.

use engine::kv::KvDtype;

use engine::runtime::Flow;
use engine::runtime::{
    BadRequest, Engine, EngineError, EngineOptions, GenerateRequest, GenerateResult, Prompt,
};
use engine::workflow::Tensor;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/packages");

/// KV bytes per token of the tiny fixture decoders: 2 (K, V) x 2 layers x 2 KV heads x
/// head dim 8 x 4 bytes (f32 cache), from their published geometry.
const BPT: u64 = 2 * 2 * 2 * 8 * 4;

fn opts(budget: u64) -> EngineOptions {
    EngineOptions {
        kv_budget_bytes: budget,
        max_running: 4,
        decode_core: true,
        threads: 1,
        kv_dtype: KvDtype::F32,
    }
}

fn bare(budget: u64) -> Engine {
    Engine::load_gguf(format!("{FIXTURES}/tiny-decoder/model.gguf"), opts(budget))
        .expect("fixture model loads")
}

fn interpreter_only(budget: u64) -> Engine {
    Engine::load_package(
        format!("{FIXTURES}/tiny-decoder"),
        EngineOptions {
            decode_core: false,
            ..opts(budget)
        },
    )
    .expect("fixture package loads")
}

/// What the caller saw: admission signals, the scheduler's used bytes at the signal,
/// streamed tokens, and the result.
struct Seen {
    signals: usize,
    used_at_signal: Option<u64>,
    streamed: usize,
    result: Result<GenerateResult, EngineError>,
}

fn serve(e: &Engine, req: &GenerateRequest) -> Seen {
    let mut signals = 0;
    let mut used_at_signal = None;
    let mut streamed = 0;
    let result = e.generate_with(
        req,
        &mut |_| {
            signals += 1;
            used_at_signal = Some(e.scheduler().usage().used_bytes);
        },
        &mut |_, _| {
            streamed += 1;
            Flow::Continue
        },
    );
    Seen {
        signals,
        used_at_signal,
        streamed,
        result,
    }
}

fn assert_idle(e: &Engine) {
    let u = e.scheduler().usage();
    assert_eq!(
        (u.used_bytes, u.running),
        (0, 0),
        "scheduler not idle: {u:?}"
    );
}

/// The request is rejected as `want`, nothing was signalled or streamed, and the message
/// contains every fragment of `names`.
fn rejected(e: &Engine, req: GenerateRequest, want: BadRequest, names: &[&str]) {
    let seen = serve(e, &req);
    match &seen.result {
        Err(EngineError::BadRequest(got)) => {
            assert_eq!(got, &want);
            let text = seen.result.as_ref().err().unwrap().to_string();
            for n in names {
                assert!(text.contains(n), "message {text:?} does not name {n:?}");
            }
        }
        Err(other) => panic!("expected {want:?}, got error: {other}"),
        Ok(r) => panic!(
            "expected {want:?}, but it was admitted and ran {:?}",
            r.events.invoked()
        ),
    }
    assert_eq!(seen.signals, 0, "on_admitted fired for a bad request");
    assert_eq!(seen.streamed, 0, "a bad request streamed tokens");
    assert_idle(e);
}

#[test]
fn empty_prompts_are_bad_requests_on_both_executors() {
    for e in [bare(1 << 20), interpreter_only(1 << 20)] {
        rejected(
            &e,
            GenerateRequest::tokens(vec![], 4),
            BadRequest::EmptyPrompt { row: 0 },
            &["empty", "row 0"],
        );
        rejected(
            &e,
            GenerateRequest::new(Prompt::Text(String::new()), 4),
            BadRequest::EmptyPrompt { row: 0 },
            &["empty"],
        );
        rejected(
            &e,
            GenerateRequest::new(Prompt::Rows(vec![]), 4),
            BadRequest::NoRows,
            &["0 token rows"],
        );
        rejected(
            &e,
            GenerateRequest::new(Prompt::Rows(vec![vec![], vec![]]), 4),
            BadRequest::EmptyPrompt { row: 0 },
            &["empty"],
        );
    }
}

#[test]
fn unequal_rows_name_the_first_row_that_differs() {
    let e = bare(1 << 20);
    rejected(
        &e,
        GenerateRequest::new(
            Prompt::Rows(vec![vec![72, 73], vec![74, 75], vec![76], vec![77, 78, 79]]),
            4,
        ),
        BadRequest::UnequalRows {
            first: 2,
            row: 2,
            len: 1,
        },
        &["row 0 has 2 tokens", "row 2 has 1"],
    );
}

#[test]
fn token_rows_cannot_continue_a_session() {
    let e = bare(1 << 20);
    rejected(
        &e,
        GenerateRequest::new(Prompt::Rows(vec![vec![72, 73], vec![74, 75]]), 4)
            .with_session("chat-7"),
        BadRequest::RowsInSession {
            session: "chat-7".into(),
        },
        &["chat-7"],
    );
}

#[test]
fn a_bare_model_refuses_application_tensors() {
    let e = bare(1 << 20);
    let pixels = Tensor::f32(&[1, 12], vec![0.5; 12]).expect("shape matches");
    rejected(
        &e,
        GenerateRequest::tokens(vec![72, 73], 4).with_input("pixel_values", pixels),
        BadRequest::NoPackage {
            inputs: vec!["pixel_values".into()],
            overrides: vec![],
        },
        &["pixel_values", "bare GGUF"],
    );
}

#[test]
fn text_is_encoded_before_it_is_priced() {
    // "hi there" = h, i, Ġthe (two merges), r, e: 5 tokens; "<|im_start|>hill" =
    // <|im_start|>, h, i, ll: 4 tokens.
    for (text, tokens) in [("hi there", 5u64), ("<|im_start|>hill", 4)] {
        for e in [bare(1 << 20), interpreter_only(1 << 20)] {
            let max_new = 3u64;
            let req = GenerateRequest::new(Prompt::Text(text.into()), max_new as usize);
            let demand = e.demand(&req).expect("a valid text request");
            assert_eq!(demand.prompt_tokens as u64, tokens, "{text:?}");
            let seen = serve(&e, &req);
            let r = match &seen.result {
                Ok(r) => r,
                Err(err) => panic!("{text:?}: expected admission and success, got: {err}"),
            };
            assert_eq!(seen.signals, 1, "on_admitted must fire exactly once");
            assert_eq!(r.prompt_tokens as u64, tokens);
            assert_eq!(r.reserved_bytes, (tokens + max_new) * BPT);
            assert_eq!(seen.used_at_signal, Some((tokens + max_new) * BPT));
            assert_eq!(seen.streamed, r.rows[0].tokens.len());
            assert_idle(&e);
        }
    }
}

#[test]
fn text_over_the_budget_is_refused_by_its_encoded_length() {
    // "hi there" encodes to 5 tokens (see above). Its minimum (the prompt and one new
    // token) is 6 tokens' bytes: one byte less is refused, and exactly that is admitted
    // under a budget cap of one new token. Priced by its 8 characters it would need 9.
    let req = GenerateRequest::new(Prompt::Text("hi there".into()), 3);
    let e = bare(6 * BPT - 1);
    let seen = serve(&e, &req);
    assert!(
        matches!(seen.result, Err(EngineError::Refused(_))),
        "expected a refusal, got {:?}",
        seen.result.as_ref().map(|r| r.reserved_bytes)
    );
    assert_eq!(seen.signals, 0);
    assert_eq!(seen.streamed, 0);
    assert_idle(&e);

    let e = bare(6 * BPT);
    let seen = serve(&e, &req);
    match &seen.result {
        Ok(r) => {
            assert_eq!(r.reserved_bytes, 6 * BPT);
            assert!(r.budget_cap.is_some(), "admitted under a budget cap");
            assert_eq!(r.rows[0].tokens.len(), 1, "the cap allows one new token");
        }
        Err(err) => panic!("exactly the minimum must be admitted, got: {err}"),
    }
    assert_idle(&e);
}
