//! The admission contract (docs/design.md §2.4), one test per clause and route, driving the real `Engine` on the tiny fixture models.
//!
//! Routes: `core` = a bare tiny GGUF on the fused decode core; `vlm` = the `tiny-vlm`
//! package, whose required `pixel_values` tensor sends every request to the
//! interpreter; `interp` = the `tiny-decoder` package on an engine without a decode
//! core (everything on the interpreter). Each test asserts observables: the
//! scheduler's usage, how often `on_admitted` fired and what the scheduler held then,
//! the tokens streamed, and the event log of component runs.

mod admission {
    use engine::kv::KvDtype;
    use engine::runtime::Flow;
    use engine::runtime::{
        Engine, EngineError, EngineOptions, Finish, GenerateRequest, GenerateResult, Prompt, Route,
    };
    use engine::scheduler::{AdmissionError, Scheduler, Usage};
    use engine::workflow::manifest::Graph;
    use engine::workflow::{Replacement, Tensor};

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/packages");

    /// KV bytes per token of the tiny fixture decoders, from their published geometry
    /// (fixtures/packages/README.md): 2 (K and V) x 2 layers x 2 KV heads x head dim
    /// (hidden 32 / 4 query heads = 8) x 4 bytes (f32 cache).
    const BPT: u64 = 2 * 2 * 2 * 8 * 4;

    /// Width of one `pixel_values` patch in tiny-vlm.
    const PATCH: usize = 12;

    #[derive(Clone, Copy, Debug)]
    enum R {
        Core,
        Vlm,
        Interp,
    }

    fn opts(budget: u64) -> EngineOptions {
        EngineOptions {
            kv_budget_bytes: budget,
            max_running: 4,
            decode_core: true,
            threads: 1,
            kv_dtype: KvDtype::F32,
        }
    }

    fn engine(route: R, budget: u64) -> Engine {
        let e = match route {
            R::Core => {
                Engine::load_gguf(format!("{FIXTURES}/tiny-decoder/model.gguf"), opts(budget))
            }
            R::Vlm => Engine::load_package(format!("{FIXTURES}/tiny-vlm"), opts(budget)),
            R::Interp => Engine::load_package(
                format!("{FIXTURES}/tiny-decoder"),
                EngineOptions {
                    decode_core: false,
                    ..opts(budget)
                },
            ),
        }
        .expect("fixture model loads");
        assert_eq!(
            e.scheduler().bytes_per_token(),
            Some(BPT),
            "fixture geometry"
        );
        e
    }

    fn expected_route(route: R) -> Route {
        match route {
            R::Core => Route::DecodeCore,
            R::Vlm | R::Interp => Route::Interpreter,
        }
    }

    fn pixels(patches: usize) -> Tensor {
        let data = (0..patches * PATCH)
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        Tensor::f32(&[patches, PATCH], data).expect("shape matches")
    }

    /// The projector graph of tiny-vlm written out again as an application replacement.
    fn projector_override() -> Replacement {
        let graph: Graph = serde_json::from_value(serde_json::json!({
        "weights": [{"name": "w", "tensor": "vision.proj.weight"}, {"name": "b", "tensor": "vision.proj.bias"}],
        "nodes": [
            {"op": {"kind": "MatMul", "a": "pixels", "b": "w"}, "out": "y"},
            {"op": {"kind": "Add", "a": "y", "b": "b"}, "out": "z"}
        ],
        "outputs": {"embeddings": "z"}
    }))
    .expect("graph json");
        Replacement {
            contract: "vision_projector@1".into(),
            graph,
        }
    }

    /// Image patches every tiny-vlm request in these tests binds.
    const PATCHES: usize = 2;

    /// A prompt-only request on `route`, or on tiny-vlm one binding `PATCHES` patches.
    fn request(route: R, prompt: Vec<u32>, max_new: usize) -> GenerateRequest {
        let req = GenerateRequest::tokens(prompt, max_new);
        match route {
            R::Vlm => req.with_input("pixel_values", pixels(PATCHES)),
            _ => req,
        }
    }

    /// KV positions a request's image contributes on `route`.
    fn image_positions(route: R) -> u64 {
        match route {
            R::Vlm => PATCHES as u64,
            _ => 0,
        }
    }

    fn prompt(n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| 72 + (i * 7) % 40).collect()
    }

    /// What a caller observes of one request.
    struct Seen {
        signals: usize,
        usage_at_signal: Option<Usage>,
        tokens_before_signal: Option<usize>,
        streamed: usize,
        result: Result<GenerateResult, EngineError>,
    }

    fn serve(e: &Engine, req: &GenerateRequest) -> Seen {
        let mut signals = 0;
        let mut usage_at_signal = None;
        let mut tokens_before_signal = None;
        let streamed = std::cell::Cell::new(0usize);
        let result = e.generate_with(
            req,
            &mut |_route| {
                signals += 1;
                usage_at_signal = Some(e.scheduler().usage());
                tokens_before_signal = Some(streamed.get());
            },
            &mut |_, _| {
                streamed.set(streamed.get() + 1);
                Flow::Continue
            },
        );
        Seen {
            signals,
            usage_at_signal,
            tokens_before_signal,
            streamed: streamed.get(),
            result,
        }
    }

    fn idle(e: &Engine) {
        let u = e.scheduler().usage();
        assert_eq!(
            (u.used_bytes, u.running),
            (0, 0),
            "scheduler not idle: {u:?}"
        );
    }

    fn refused(seen: &Seen) -> &AdmissionError {
        let err = match &seen.result {
            Err(EngineError::Refused(e)) => e,
            Err(other) => panic!("expected an admission refusal, got error: {other}"),
            Ok(r) => panic!(
                "expected an admission refusal, but it was admitted and ran {} components: {:?}",
                r.events.invoked().len(),
                r.events.invoked()
            ),
        };
        assert_eq!(seen.signals, 0, "on_admitted fired for a refused request");
        assert_eq!(seen.streamed, 0, "a refused request streamed tokens");
        err
    }

    fn admitted(seen: &Seen) -> &GenerateResult {
        match &seen.result {
            Ok(r) => {
                assert_eq!(seen.signals, 1, "on_admitted must fire exactly once");
                r
            }
            Err(e) => panic!("expected admission and success, got: {e}"),
        }
    }

    // ---- clause 1: refused before any component runs, whatever the request carries ----

    fn over_budget_refused(route: R, req: GenerateRequest) {
        // 4 prompt tokens (+ image) and 1 new token need (4 + image + 1) tokens' bytes.
        let need = 4 + image_positions(route) + 1;
        let e = engine(route, (need - 1) * BPT);
        let seen = serve(&e, &req);
        let err = refused(&seen);
        assert!(
            matches!(err, AdmissionError::NeverFits(s) if s.minimum_bytes == need * BPT),
            "{err}"
        );
        idle(&e);
    }

    #[test]
    fn clause1_over_budget_prompt_only_refused_before_any_component_core() {
        over_budget_refused(R::Core, request(R::Core, prompt(4), 4));
    }

    #[test]
    fn clause1_over_budget_prompt_only_refused_before_any_component_interp() {
        over_budget_refused(R::Interp, request(R::Interp, prompt(4), 4));
    }

    #[test]
    fn clause1_over_budget_bound_tensor_refused_before_any_component_vlm() {
        over_budget_refused(R::Vlm, request(R::Vlm, prompt(4), 4));
    }

    #[test]
    fn clause1_over_budget_component_override_refused_before_any_component_vlm() {
        let req = request(R::Vlm, prompt(4), 4).with_override("projector", projector_override());
        over_budget_refused(R::Vlm, req);
    }

    #[test]
    fn clause1_image_positions_count_before_any_component_vlm() {
        // Three patches: exactly (4 + 3 + 1) tokens' bytes admits, one byte less refuses.
        let req = GenerateRequest::tokens(prompt(4), 1).with_input("pixel_values", pixels(3));
        let e = engine(R::Vlm, 8 * BPT - 1);
        refused(&serve(&e, &req));
        let e = engine(R::Vlm, 8 * BPT);
        let seen = serve(&e, &req);
        let r = admitted(&seen);
        assert_eq!((r.extra_positions, r.reserved_bytes), (3, 8 * BPT));
        idle(&e);
    }

    // ---- clause 2: on_admitted only after admission, exactly once, before components ----

    fn signal_after_admission(route: R, req: GenerateRequest, first_component: &str) {
        let e = engine(route, 64 * BPT);
        let seen = serve(&e, &req);
        let r = admitted(&seen);
        let at = seen.usage_at_signal.expect("signalled");
        assert_eq!(
            at.running, 1,
            "signal before the scheduler admitted: {at:?}"
        );
        assert_eq!(
            at.used_bytes, r.reserved_bytes,
            "signal before the reservation: {at:?}"
        );
        assert!(r.reserved_bytes > 0);
        assert_eq!(
            seen.tokens_before_signal,
            Some(0),
            "tokens streamed before the signal"
        );
        assert_eq!(r.route, expected_route(route));
        let invoked = r.events.invoked();
        assert_eq!(
            invoked.first().copied(),
            Some(first_component),
            "{invoked:?}"
        );
        assert_eq!(seen.streamed, r.tokens().len());
        assert!(!r.tokens().is_empty());
        idle(&e);
    }

    #[test]
    fn clause2_on_admitted_once_after_admission_before_components_core() {
        signal_after_admission(R::Core, request(R::Core, prompt(4), 3), "token_embedding");
    }

    #[test]
    fn clause2_on_admitted_once_after_admission_before_components_interp() {
        signal_after_admission(R::Interp, request(R::Interp, prompt(4), 3), "embed");
    }

    #[test]
    fn clause2_bound_tensor_within_budget_admitted_and_signalled_once_vlm() {
        signal_after_admission(R::Vlm, request(R::Vlm, prompt(4), 3), "projector");
    }

    #[test]
    fn clause2_override_within_budget_admitted_and_signalled_once_vlm() {
        let req = request(R::Vlm, prompt(4), 3).with_override("projector", projector_override());
        let e = engine(R::Vlm, 64 * BPT);
        let seen = serve(&e, &req);
        let r = admitted(&seen);
        assert_eq!(seen.usage_at_signal.map(|u| u.running), Some(1));
        let first = r.events.events.iter().find_map(|ev| match ev {
            engine::workflow::Event::Invoke {
                component,
                implementation,
                ..
            } => Some((component.as_str(), implementation.as_str())),
            _ => None,
        });
        assert_eq!(first, Some(("projector", "replacement:vision_projector@1")));
        idle(&e);
    }

    // ---- clause 3: what fits is admitted; exact boundary admits, one byte less refuses ----

    fn boundary(route: R) {
        let need = (4 + image_positions(route) + 1) * BPT;
        let req = request(route, prompt(4), 1);
        let e = engine(route, need);
        let seen = serve(&e, &req);
        let r = admitted(&seen);
        assert_eq!(r.reserved_bytes, need);
        assert_eq!(r.budget_cap, None);
        assert_eq!(seen.usage_at_signal.map(|u| u.used_bytes), Some(need));
        assert_eq!(r.tokens().len(), 1);
        idle(&e);
        let e = engine(route, need - 1);
        let seen = serve(&e, &req);
        let err = refused(&seen);
        assert!(
            matches!(err, AdmissionError::NeverFits(s) if s.shortfall_bytes == 1),
            "{err}"
        );
        idle(&e);
    }

    #[test]
    fn clause3_exact_boundary_admits_one_byte_less_refuses_core() {
        boundary(R::Core);
    }

    #[test]
    fn clause3_exact_boundary_admits_one_byte_less_refuses_interp() {
        boundary(R::Interp);
    }

    #[test]
    fn clause3_exact_boundary_admits_one_byte_less_refuses_vlm() {
        boundary(R::Vlm);
    }

    // ---- clause 4: the reservation is released after success and after failure ----

    fn released(route: R) {
        // The budget holds exactly one such request at a time.
        let need = (4 + image_positions(route) + 2) * BPT;
        let e = engine(route, need);
        let ok = request(route, prompt(4), 2);
        admitted(&serve(&e, &ok));
        idle(&e);
        admitted(&serve(&e, &ok));
        idle(&e);
        // Token 5000 is outside the 263-token vocabulary: admitted, then the embedding fails.
        let mut bad_prompt = prompt(4);
        bad_prompt[1] = 5000;
        let seen = serve(&e, &request(route, bad_prompt, 2));
        assert_eq!(seen.signals, 1, "the failing request was admitted");
        assert_eq!(seen.usage_at_signal.map(|u| u.used_bytes), Some(need));
        match (&seen.result, route) {
            (Err(EngineError::DecodeCore(_)), R::Core) => {}
            (Err(EngineError::Interpreter(_)), R::Vlm | R::Interp) => {}
            (other, _) => panic!(
                "expected a run failure, got {:?}",
                other.as_ref().map(|r| r.tokens())
            ),
        }
        idle(&e);
        let seen = serve(&e, &ok);
        let again = admitted(&seen);
        assert_eq!(again.reserved_bytes, need);
        idle(&e);
    }

    #[test]
    fn clause4_reservation_released_after_success_and_failure_core() {
        released(R::Core);
    }

    #[test]
    fn clause4_reservation_released_after_success_and_failure_interp() {
        released(R::Interp);
    }

    #[test]
    fn clause4_reservation_released_after_success_and_failure_vlm() {
        released(R::Vlm);
    }

    // ---- clause 5: a continuing session's carried prefix counts ----

    fn carried_prefix(route: R) {
        let img = image_positions(route);
        // Turn 1: 4 prompt + image + 4 new tokens fits a budget of (10 + image) tokens.
        let budget = (10 + img) * BPT;
        let e = engine(route, budget);
        let t1 = admitted(&serve(&e, &request(route, prompt(4), 4).with_session("s"))).clone();
        let generated = t1.tokens().len() as u64;
        assert!(
            generated >= 2,
            "turn 1 must leave a carried prefix longer than the slack: {generated}"
        );
        idle(&e);
        // Turn 2 alone (4 + image + 1) fits; with the carried 4 + generated it cannot.
        let turn2 = request(route, prompt(4), 1).with_session("s");
        let alone = request(route, prompt(4), 1);
        let seen = serve(&e, &turn2);
        let err = refused(&seen);
        let carried = 4 + generated;
        assert!(
            matches!(err, AdmissionError::NeverFits(s) if s.minimum_bytes == (carried + 4 + img + 1) * BPT),
            "{err}"
        );
        idle(&e);
        let seen = serve(&e, &alone);
        let r = admitted(&seen);
        assert_eq!(r.carried_tokens, 0);
        // With room, the carried prefix is reserved and re-prefilled.
        let e2 = engine(route, 64 * BPT);
        admitted(&serve(&e2, &request(route, prompt(4), 4).with_session("s")));
        let seen = serve(&e2, &turn2);
        let r = admitted(&seen);
        assert_eq!(r.carried_tokens as u64, carried);
        assert_eq!(r.reserved_bytes, (carried + 4 + img + 1) * BPT);
    }

    #[test]
    fn clause5_carried_prefix_counts_toward_reservation_core() {
        carried_prefix(R::Core);
    }

    #[test]
    fn clause5_carried_prefix_counts_toward_reservation_interp() {
        carried_prefix(R::Interp);
    }

    #[test]
    fn clause5_carried_prefix_counts_toward_reservation_vlm() {
        carried_prefix(R::Vlm);
    }

    // ---- clause 6: a clamped request reports its cap and stops at it ----

    fn clamped(route: R) {
        let img = image_positions(route);
        let req = request(route, prompt(4), 8);
        // Unclamped, this prompt generates more than 3 tokens (no early end of generation).
        let free = admitted(&serve(&engine(route, 64 * BPT), &req)).clone();
        assert!(free.tokens().len() > 3, "precondition: {:?}", free.finish());
        assert_eq!(free.budget_cap, None);
        let e = engine(route, (4 + img + 3) * BPT);
        let seen = serve(&e, &req);
        let r = admitted(&seen);
        let cap = r.budget_cap.expect("a partial fit reports its budget cap");
        assert_eq!((cap.requested_tokens, cap.admitted_tokens), (8, 3));
        assert_eq!(cap.admitted_bytes, (4 + img + 3) * BPT);
        assert_eq!(cap.requested_bytes, (4 + img + 8) * BPT);
        assert_eq!(r.tokens(), &free.tokens()[..3], "stops at the cap");
        assert_eq!(r.finish(), &Finish::BudgetCap);
        assert_eq!(seen.streamed, 3);
        idle(&e);
    }

    #[test]
    fn clause6_clamped_request_reports_cap_and_stops_at_cap_core() {
        clamped(R::Core);
    }

    #[test]
    fn clause6_clamped_request_reports_cap_and_stops_at_cap_interp() {
        clamped(R::Interp);
    }

    #[test]
    fn clause6_clamped_request_reports_cap_and_stops_at_cap_vlm() {
        clamped(R::Vlm);
    }

    // ---- clause 7: token rows count every row ----

    fn rows(route: R) {
        let img = image_positions(route);
        let rows: Vec<Vec<u32>> = (0..3)
            .map(|r| prompt(4).into_iter().map(|t| t + r).collect())
            .collect();
        let mut req = request(route, Vec::new(), 1);
        req.prompt = Prompt::Rows(rows);
        let need = 3 * (4 + img + 1) * BPT;
        let e = engine(route, need);
        let r = admitted(&serve(&e, &req)).clone();
        assert_eq!(r.reserved_bytes, need);
        assert_eq!(r.rows.len(), 3);
        assert!(r.rows.iter().all(|c| c.tokens.len() == 1));
        idle(&e);
        let e = engine(route, need - 1);
        refused(&serve(&e, &req));
        idle(&e);
    }

    #[test]
    fn clause7_token_rows_count_every_row_core() {
        rows(R::Core);
    }

    #[test]
    fn clause7_token_rows_count_every_row_vlm() {
        rows(R::Vlm);
    }

    // ---- clause 8: without KV geometry nothing is reserved and nothing capped ----

    fn no_geometry(route: R) {
        let e = engine(route, BPT)
            .with_scheduler(Scheduler::with_geometry(0, None, 4).expect("pass-through"))
            .expect("a scheduler without geometry is accepted");
        let seen = serve(&e, &request(route, prompt(4), 5));
        let r = admitted(&seen);
        assert_eq!(r.reserved_bytes, 0);
        assert_eq!(r.budget_cap, None);
        assert_ne!(r.finish(), &Finish::BudgetCap);
        let at = seen.usage_at_signal.expect("signalled");
        assert_eq!((at.used_bytes, at.running), (0, 1));
        idle(&e);
    }

    #[test]
    fn clause8_without_kv_geometry_nothing_reserved_nothing_capped_core() {
        no_geometry(R::Core);
    }

    #[test]
    fn clause8_without_kv_geometry_nothing_reserved_nothing_capped_vlm() {
        no_geometry(R::Vlm);
    }
}
