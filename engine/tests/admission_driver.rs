//! The driver's side of the admission contract: a ticket resolves exactly once, admitted or refused; never-fits is refused at once; fits-the-limit-but-not-now waits in FIFO order.

mod admission {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Duration;

    use engine::driver::{Driver, Resolution, TicketEvent};
    use engine::runtime::{Engine, EngineError, EngineOptions, GenerateRequest, Route};
    use engine::scheduler::{AdmissionError, Demand, Scheduler, SchedulerConfig};

    const MODEL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/packages/tiny-decoder/model.gguf"
    );

    /// KV bytes per token of the tiny fixture decoder (fixtures/packages/README.md):
    /// 2 x 2 layers x 2 KV heads x head dim 8 x 4 bytes.
    const BPT: u64 = 256;

    fn engine(budget_tokens: u64) -> Engine {
        Engine::load_gguf(
            MODEL,
            EngineOptions {
                kv_budget_bytes: budget_tokens * BPT,
                max_running: 4,
                decode_core: true,
                threads: 1,
            },
        )
        .expect("fixture model loads")
    }

    fn prompt(n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| 72 + (i * 5) % 30).collect()
    }

    /// Every event a ticket receives until the worker drops its sender; a ticket left
    /// unanswered for 10 s fails the test instead of hanging it.
    fn drain(t: &engine::driver::Ticket) -> Vec<TicketEvent> {
        let mut events = Vec::new();
        loop {
            match t.next_event_timeout(Duration::from_secs(10)) {
                Ok(e) => events.push(e),
                Err(RecvTimeoutError::Disconnected) => return events,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("ticket unanswered after 10 s; events so far: {events:?}")
                }
            }
        }
    }

    fn resolutions(events: &[TicketEvent]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, TicketEvent::Admitted(_) | TicketEvent::Refused(_)))
            .count()
    }

    #[test]
    fn driver_ticket_resolves_exactly_once_admitted_then_tokens_then_result() {
        let driver = Driver::spawn(engine(64));
        let ticket = driver.submit(GenerateRequest::tokens(prompt(4), 3));
        let events = drain(&ticket);
        assert_eq!(resolutions(&events), 1, "{events:?}");
        assert!(
            matches!(events[0], TicketEvent::Admitted(Route::DecodeCore)),
            "{events:?}"
        );
        let streamed: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                TicketEvent::Token { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        match events.last() {
            Some(TicketEvent::Finished(Ok(r))) => assert_eq!(r.tokens(), &streamed[..]),
            other => panic!("the last event is not a successful result: {other:?}"),
        }
        // The typed reader agrees: one admission, then tokens and one result.
        let ticket = driver.submit(GenerateRequest::tokens(prompt(4), 2));
        assert!(matches!(
            ticket.admission(),
            Ok(Resolution::Admitted(Route::DecodeCore))
        ));
        let (tokens, result) = ticket.finish().expect("well-formed ticket");
        assert_eq!(tokens.len(), result.expect("success").tokens().len());
        let engine = driver.shutdown().expect("worker returns the engine");
        assert_eq!(engine.scheduler().usage().used_bytes, 0);
    }

    #[test]
    fn driver_ticket_resolves_exactly_once_refused_at_once_when_never_fits() {
        let driver = Driver::spawn(engine(4));
        let ticket = driver.submit(GenerateRequest::tokens(prompt(4), 2));
        let events = drain(&ticket);
        assert_eq!(resolutions(&events), 1, "{events:?}");
        assert_eq!(events.len(), 1, "nothing follows a refusal: {events:?}");
        match &events[0] {
            TicketEvent::Refused(EngineError::Refused(AdmissionError::NeverFits(s))) => {
                assert_eq!(s.minimum_bytes, 5 * BPT)
            }
            other => panic!("expected a never-fits refusal, got {other:?}"),
        }
    }

    #[test]
    fn driver_fits_limit_but_not_now_waits_in_fifo_order() {
        // One budget of 20 tokens shared with another holder that takes 12.
        let shared = Scheduler::new(SchedulerConfig {
            budget_bytes: 20 * BPT,
            bytes_per_token: Some(BPT),
            max_running: 4,
        })
        .expect("config");
        let other = shared.admit(&Demand::prompt(11, 1)).expect("holder fits");
        let driver = Driver::spawn(
            engine(20)
                .with_scheduler(shared.clone())
                .expect("same pricing"),
        );
        // A needs 10 tokens: fits the limit, not the 8 free now.
        let a = driver.submit(GenerateRequest::tokens(prompt(8), 2));
        // B can never fit the limit: refused at once although A waits.
        let b = driver.submit(GenerateRequest::tokens(prompt(20), 1));
        // C needs 5 tokens: fits now, but A came first.
        let c = driver.submit(GenerateRequest::tokens(prompt(4), 1));
        let b_events = drain(&b);
        assert_eq!(resolutions(&b_events), 1);
        assert!(
            matches!(
                &b_events[0],
                TicketEvent::Refused(EngineError::Refused(AdmissionError::NeverFits(_)))
            ),
            "{b_events:?}"
        );
        let wait = Duration::from_millis(150);
        assert!(
            matches!(a.next_event_timeout(wait), Err(RecvTimeoutError::Timeout)),
            "A must wait for bytes"
        );
        assert!(
            matches!(c.next_event_timeout(wait), Err(RecvTimeoutError::Timeout)),
            "C must wait behind A (FIFO)"
        );
        assert_eq!(shared.usage().used_bytes, 12 * BPT);
        shared.complete(other.id).expect("release the other holder");
        let a_events = drain(&a);
        let c_events = drain(&c);
        for events in [&a_events, &c_events] {
            assert_eq!(resolutions(events), 1, "{events:?}");
            assert!(matches!(events[0], TicketEvent::Admitted(_)), "{events:?}");
            assert!(
                matches!(events.last(), Some(TicketEvent::Finished(Ok(_)))),
                "{events:?}"
            );
        }
        drop(driver);
        assert_eq!(shared.usage().used_bytes, 0);
    }
}
