//! The driver's side of the admission contract: a ticket resolves exactly once, admitted or refused; never-fits is refused at once; fits-the-limit-but-not-now waits in FIFO order.

mod admission {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Duration;

    use engine::driver::{Driver, Resolution, TicketEvent};
    use engine::kv::KvDtype;
    use engine::runtime::{Engine, EngineError, EngineOptions, GenerateRequest, Route};
    use engine::scheduler::{AdmissionError, Demand, Scheduler, SchedulerConfig};

    const MODEL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/packages/tiny-decoder/model.gguf"
    );

    /// KV bytes per token of the tiny fixture decoder (fixtures/packages/README.md):
    /// 2 x 2 layers x 2 KV heads x head dim 8 x 4 bytes.
    pub(super) const BPT: u64 = 256;

    pub(super) fn engine(budget_tokens: u64) -> Engine {
        Engine::load_gguf(
            MODEL,
            EngineOptions {
                kv_budget_bytes: budget_tokens * BPT,
                max_running: 4,
                decode_core: true,
                threads: 1,
                kv_dtype: KvDtype::F32,
            },
        )
        .expect("fixture model loads")
    }

    pub(super) fn prompt(n: usize) -> Vec<u32> {
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

/// The driver's own obligations beyond admission: the blocking reader sees every event then
/// the end, and stopping the driver (shutdown or drop) answers a job still waiting for bytes
/// instead of leaving it, or the caller, hanging.
mod lifecycle {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Duration;

    use engine::driver::{Driver, TicketEvent};
    use engine::runtime::{EngineError, GenerateRequest};
    use engine::scheduler::{AdmissionError, Demand, Scheduler, SchedulerConfig};

    use super::admission::{BPT, engine, prompt};

    /// A driver whose engine shares a 20-token budget with another holder of 12 tokens,
    /// and that holder's scheduler: a request of 10 tokens fits the limit but waits.
    fn driver_with_budget_held() -> (Driver, Scheduler) {
        let shared = Scheduler::new(SchedulerConfig {
            budget_bytes: 20 * BPT,
            bytes_per_token: Some(BPT),
            max_running: 4,
        })
        .expect("config");
        shared.admit(&Demand::prompt(11, 1)).expect("holder fits");
        let driver = Driver::spawn(
            engine(20)
                .with_scheduler(shared.clone())
                .expect("same pricing"),
        );
        (driver, shared)
    }

    #[test]
    fn next_event_yields_admission_tokens_result_then_none() {
        let driver = Driver::spawn(engine(64));
        let ticket = driver.submit(GenerateRequest::tokens(prompt(4), 2));
        let mut events = Vec::new();
        while let Some(e) = ticket.next_event() {
            events.push(e);
            assert!(
                events.len() <= 4,
                "more events than admission, 2 tokens, result: {events:?}"
            );
        }
        assert!(matches!(events[0], TicketEvent::Admitted(_)), "{events:?}");
        let tokens = events
            .iter()
            .filter(|e| matches!(e, TicketEvent::Token { .. }))
            .count();
        match events.last() {
            Some(TicketEvent::Finished(Ok(r))) => assert_eq!(r.tokens().len(), tokens),
            other => panic!("the last event is not a successful result: {other:?}"),
        }
    }

    #[test]
    fn shutdown_refuses_a_job_still_waiting_for_bytes() {
        let (driver, shared) = driver_with_budget_held();
        let waiting = driver.submit(GenerateRequest::tokens(prompt(8), 2));
        assert!(
            matches!(
                waiting.next_event_timeout(Duration::from_millis(100)),
                Err(RecvTimeoutError::Timeout)
            ),
            "the job must wait for bytes"
        );
        // Shut down on another thread: a driver that never answers the waiting job would
        // hang there, and the test must fail rather than hang.
        std::thread::spawn(move || driver.shutdown());
        match waiting.next_event_timeout(Duration::from_secs(10)) {
            Ok(TicketEvent::Refused(EngineError::Refused(AdmissionError::OverBudget(s)))) => {
                assert_eq!(s.used_bytes, 12 * BPT)
            }
            other => panic!("expected the not-now refusal at shutdown, got {other:?}"),
        }
        assert_eq!(shared.usage().running, 1, "only the other holder runs");
    }

    #[test]
    fn dropping_the_driver_returns_after_every_ticket_is_answered() {
        let (driver, _shared) = driver_with_budget_held();
        let waiting = driver.submit(GenerateRequest::tokens(prompt(8), 2));
        // Behind it, a job that fits the 8 free tokens: at shutdown it is served.
        let behind = driver.submit(GenerateRequest::tokens(prompt(1), 1));
        drop(driver);
        // Nothing may still be on its way once drop returned.
        assert!(
            matches!(
                waiting.next_event_timeout(Duration::ZERO),
                Ok(TicketEvent::Refused(EngineError::Refused(
                    AdmissionError::OverBudget(_)
                )))
            ),
            "the waiting job is refused before drop returns"
        );
        let mut events = Vec::new();
        loop {
            match behind.next_event_timeout(Duration::ZERO) {
                Ok(e) => events.push(e),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("drop returned before the job behind was answered: {events:?}")
                }
            }
        }
        assert!(matches!(events[0], TicketEvent::Admitted(_)), "{events:?}");
        assert!(
            matches!(events.last(), Some(TicketEvent::Finished(Ok(_)))),
            "{events:?}"
        );
    }
}
