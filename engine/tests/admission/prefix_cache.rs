//! The shared prefix cache through the engine service: a request that starts with a finished request's tokens reuses its full KV pages, is priced only for the positions it adds, and gives the tokens recomputing gives; unused cached pages give way before anyone waits for bytes.

use crate::common;

use engine::runtime::{Engine, EngineOptions};
use engine::service::ServiceOptions;

use admission::{PAGE, run};

/// The admission side of the prefix cache (the admission battery runs these).
mod admission {
    use std::time::Duration;

    use engine::kv::KvDtype;
    use engine::runtime::{Engine, EngineOptions, GenerateRequest, GenerateResult};
    use engine::service::{Event, ServiceOptions};

    const TINY: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/packages/tiny-decoder/model.gguf"
    );

    /// KV bytes per token of the tiny fixture decoder (fixtures/packages/README.md).
    const BPT: u64 = 256;
    /// Positions per KV page.
    pub(super) const PAGE: usize = 16;

    fn tiny(budget_tokens: u64, prefix_cache: bool) -> Engine {
        Engine::load_gguf(
            TINY,
            EngineOptions {
                kv_budget_bytes: budget_tokens * BPT,
                max_running: 4,
                decode_core: true,
                threads: 1,
                kv_dtype: KvDtype::F32,
            },
        )
        .expect("fixture model loads")
        .with_service(ServiceOptions {
            prefix_cache,
            ..ServiceOptions::default()
        })
        .expect("not started")
    }

    fn prompt(n: usize, salt: u32) -> Vec<u32> {
        (0..n as u32).map(|i| 72 + (i * 7 + salt) % 40).collect()
    }

    pub(super) fn run(e: &Engine, tokens: Vec<u32>, new: usize) -> GenerateResult {
        let mut req = GenerateRequest::tokens(tokens, new);
        req.stop_at_eog = false;
        e.generate(&req).expect("admitted and run")
    }

    /// A follow-up whose tokens start with an earlier request's prompt and reply (a chat's next
    /// turn) reuses the full pages, reserves only what it adds, and generates what it
    /// generates without the cache.
    #[test]
    fn prefix_follow_up_reuses_full_pages_reserves_what_it_adds_and_equals_recomputing() {
        let cached = tiny(512, true);
        let plain = tiny(512, false);
        let first = prompt(40, 0);
        let a = run(&cached, first.clone(), 10);
        assert_eq!(a.cached_tokens, 0, "nothing cached yet");
        assert_eq!(
            a.tokens(),
            run(&plain, first.clone(), 10).tokens(),
            "the cache changes nothing for a first request"
        );
        // Of the 40 prompt positions (the generated ones are not kept), two full pages.
        assert_eq!(cached.cached_bytes(), 2 * PAGE as u64 * BPT);
        assert_eq!(cached.usage().running, 0);
        let mut next = first.clone();
        next.extend_from_slice(a.tokens());
        next.extend(prompt(12, 3));
        let b = run(&cached, next.clone(), 12);
        let b_plain = run(&plain, next.clone(), 12);
        assert_eq!(b.cached_tokens, 2 * PAGE);
        assert_eq!(
            b.tokens(),
            b_plain.tokens(),
            "reuse gives the tokens recomputing gives"
        );
        assert_eq!(
            b.reserved_bytes,
            b_plain.reserved_bytes - (2 * PAGE) as u64 * BPT,
            "only the positions it adds are reserved"
        );
    }

    /// Cached pages nobody uses give way: a request that needs the whole budget is admitted at
    /// once (not queued behind the cache), and the cache shrinks.
    #[test]
    fn prefix_unused_cached_pages_are_evicted_before_a_request_waits() {
        let e = tiny(128, true);
        run(&e, prompt(60, 1), 20);
        let held = e.cached_bytes();
        assert!(
            held >= 3 * PAGE as u64 * BPT,
            "the first request's pages are kept: {held}"
        );
        // 100 + 28 = the whole budget; free now is 128 tokens minus the cache.
        let mut t = e.submit(
            {
                let mut r = GenerateRequest::tokens(prompt(100, 2), 28);
                r.stop_at_eog = false;
                r
            },
            Default::default(),
        );
        match t.next_event_timeout(Duration::from_secs(10)) {
            Ok(Event::Admitted(a)) => {
                assert_eq!(a.reserved_bytes, 128 * BPT);
                assert!(a.budget_cap.is_none(), "admitted whole, not clamped");
                // The usage at admission (the request may finish and keep its own pages
                // before this line runs): the whole budget is the request's, the cache's
                // pages gave way.
                assert!(held > 0);
                assert_eq!(
                    a.usage.used_bytes,
                    128 * BPT,
                    "the cache gave way: nothing but the reservation is in use"
                );
            }
            other => panic!("expected an admission at once, got {other:?}"),
        }
        assert!(t.wait().is_ok());
        assert!(e.usage().used_bytes <= 128 * BPT);
    }
}

/// On the real model, a 4-turn conversation re-sent whole each turn (as chat clients do)
/// gives the same greedy tokens with the prefix cache as without, and from the second turn
/// on most of its prompt comes from the cache.
#[test]
fn smollm2_chat_turns_equal_recomputing_and_reuse_the_history() {
    let path = common::model_path();
    let open = |prefix_cache| {
        Engine::load_gguf(
            &path,
            EngineOptions {
                threads: 2,
                ..EngineOptions::default()
            },
        )
        .expect("SmolLM2 loads")
        .with_service(ServiceOptions {
            prefix_cache,
            ..ServiceOptions::default()
        })
        .expect("not started")
    };
    let (cached, plain) = (open(true), open(false));
    let tok = cached.tokenizer().expect("a tokenizer");
    let mut history = tok
        .encode("You are a helpful assistant. Answer in one short sentence.\n")
        .expect("encodes");
    for (turn, question) in [
        "What is the capital of France?",
        "And of Italy?",
        "Which of the two is further north?",
        "Name a river in the first one.",
    ]
    .iter()
    .enumerate()
    {
        history.extend(
            tok.encode(&format!("User: {question}\nAssistant:"))
                .expect("encodes"),
        );
        let a = run(&cached, history.clone(), 12);
        let b = run(&plain, history.clone(), 12);
        assert_eq!(
            a.tokens(),
            b.tokens(),
            "turn {turn}: cached and recomputed differ"
        );
        if turn > 0 {
            assert!(
                a.cached_tokens >= (history.len() - 48) / PAGE * PAGE,
                "turn {turn}: only {} of {} prompt tokens came from the cache",
                a.cached_tokens,
                history.len()
            );
        }
        history.extend_from_slice(a.tokens());
        history.extend(tok.encode("\n").expect("encodes"));
    }
}
