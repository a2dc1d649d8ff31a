//! The service's side of the admission contract: a ticket resolves exactly once (admitted, queued, or refused); never-fits is refused at once; fits-the-limit-but-not-now waits in FIFO order; a full queue is refused with its wait; a dropped ticket releases its reservation.

mod admission {
    use std::time::Duration;

    use engine::kv::KvDtype;
    use engine::runtime::{Engine, EngineError, EngineOptions, GenerateRequest, Route};
    use engine::scheduler::{Demand, Scheduler, SchedulerConfig};
    use engine::service::{AdmissionError, Event, Resolution, Ticket, TicketError};

    const MODEL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/packages/tiny-decoder/model.gguf"
    );

    /// KV bytes per token of the tiny fixture decoder (fixtures/packages/README.md):
    /// 2 x 2 layers x 2 KV heads x head dim 8 x 4 bytes.
    pub(super) const BPT: u64 = 256;

    pub(super) fn options(budget_tokens: u64) -> EngineOptions {
        EngineOptions {
            kv_budget_bytes: budget_tokens * BPT,
            max_running: 4,
            decode_core: true,
            threads: 1,
            kv_dtype: KvDtype::F32,
        }
    }

    pub(super) fn engine(budget_tokens: u64) -> Engine {
        Engine::load_gguf(MODEL, options(budget_tokens)).expect("fixture model loads")
    }

    pub(super) fn prompt(n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| 72 + (i * 5) % 30).collect()
    }

    /// Every event a ticket receives until its end; a ticket left unanswered for 10 s fails
    /// the test instead of hanging it.
    pub(super) fn drain(t: &mut Ticket) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            match t.next_event_timeout(Duration::from_secs(10)) {
                Ok(e) => {
                    let end = matches!(e, Event::Refused(_) | Event::Finished(_));
                    events.push(e);
                    if end {
                        return events;
                    }
                }
                Err(TicketError::ServiceGone) => return events,
                Err(e) => panic!("ticket unanswered: {e}; events so far: {events:?}"),
            }
        }
    }

    fn resolutions(events: &[Event]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, Event::Admitted(_) | Event::Refused(_)))
            .count()
    }

    /// A 20-token budget shared with another holder of 12 tokens, an engine on it, and the
    /// other holder's reservation: a request of 10 tokens fits the limit but waits.
    pub(super) fn engine_with_budget_held() -> (Engine, Scheduler, engine::scheduler::Admission) {
        let shared = Scheduler::new(SchedulerConfig {
            budget_bytes: 20 * BPT,
            bytes_per_token: Some(BPT),
            max_running: 4,
        })
        .expect("config");
        let other = shared.admit(&Demand::prompt(11, 1)).expect("holder fits");
        let e = engine(20)
            .with_scheduler(shared.clone())
            .expect("same pricing");
        (e, shared, other)
    }

    #[test]
    fn service_ticket_resolves_exactly_once_admitted_then_tokens_then_result() {
        let e = engine(64);
        let mut ticket = e.submit(GenerateRequest::tokens(prompt(4), 3), Default::default());
        let events = drain(&mut ticket);
        assert_eq!(resolutions(&events), 1, "{events:?}");
        assert!(
            matches!(&events[0], Event::Admitted(a) if a.route == Route::DecodeCore && a.reserved_bytes == 7 * BPT),
            "{events:?}"
        );
        let streamed: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Token(t) => Some(t.id),
                _ => None,
            })
            .collect();
        match events.last() {
            Some(Event::Finished(Ok(r))) => assert_eq!(r.tokens(), &streamed[..]),
            other => panic!("the last event is not a successful result: {other:?}"),
        }
        // The typed reader agrees: one admission, then the result.
        let mut ticket = e.submit(GenerateRequest::tokens(prompt(4), 2), Default::default());
        assert!(matches!(
            ticket.admission(),
            Ok(Resolution::Admitted(a)) if a.route == Route::DecodeCore
        ));
        let result = ticket.wait().expect("success");
        assert_eq!(result.tokens().len(), 2);
        assert_eq!(e.usage().used_bytes, 0, "released before the result");
    }

    #[test]
    fn service_ticket_resolves_exactly_once_refused_at_once_when_never_fits() {
        let e = engine(4);
        let mut ticket = e.submit(GenerateRequest::tokens(prompt(4), 2), Default::default());
        let events = drain(&mut ticket);
        assert_eq!(resolutions(&events), 1, "{events:?}");
        assert_eq!(events.len(), 1, "nothing follows a refusal: {events:?}");
        match &events[0] {
            Event::Refused(EngineError::Refused(AdmissionError::NeverFits(s))) => {
                assert_eq!(s.minimum_bytes, 5 * BPT)
            }
            other => panic!("expected a never-fits refusal, got {other:?}"),
        }
        assert_eq!(e.usage().queued, 0, "a never-fitting request never queues");
    }

    #[test]
    fn service_fits_limit_but_not_now_waits_in_fifo_order() {
        let (e, shared, other) = engine_with_budget_held();
        // A needs 10 tokens: fits the limit, not the 8 free now.
        let mut a = e.submit(GenerateRequest::tokens(prompt(8), 2), Default::default());
        // B can never fit the limit: refused at once although A waits.
        let mut b = e.submit(GenerateRequest::tokens(prompt(20), 1), Default::default());
        // C needs 5 tokens: fits now, but A came first.
        let mut c = e.submit(GenerateRequest::tokens(prompt(4), 1), Default::default());
        let b_events = drain(&mut b);
        assert_eq!(resolutions(&b_events), 1);
        assert!(
            matches!(
                &b_events[0],
                Event::Refused(EngineError::Refused(AdmissionError::NeverFits(_)))
            ),
            "{b_events:?}"
        );
        for (t, ahead) in [(&mut a, 0), (&mut c, 1)] {
            match t.next_event_timeout(Duration::from_secs(10)) {
                Ok(Event::Queued { ahead: got, .. }) => assert_eq!(got, ahead),
                other => panic!("expected Queued, got {other:?}"),
            }
        }
        let wait = Duration::from_millis(150);
        assert!(
            matches!(a.next_event_timeout(wait), Err(TicketError::Timeout(_))),
            "A must wait for bytes"
        );
        assert!(
            matches!(c.next_event_timeout(wait), Err(TicketError::Timeout(_))),
            "C must wait behind A (FIFO)"
        );
        assert_eq!(shared.usage().used_bytes, 12 * BPT);
        assert_eq!(shared.usage().queued, 2);
        shared.complete(other.id).expect("release the other holder");
        let a_events = drain(&mut a);
        let c_events = drain(&mut c);
        for events in [&a_events, &c_events] {
            assert_eq!(resolutions(events), 1, "{events:?}");
            assert!(matches!(events[0], Event::Admitted(_)), "{events:?}");
            assert!(
                matches!(events.last(), Some(Event::Finished(Ok(_)))),
                "{events:?}"
            );
        }
        assert_eq!(shared.usage().used_bytes, 0);
    }

    #[test]
    fn service_queue_full_is_refused_with_its_wait_and_nothing_reserved() {
        let (e, shared, other) = engine_with_budget_held();
        let e = e
            .with_service(engine::service::ServiceOptions {
                max_queue: 1,
                ..Default::default()
            })
            .expect("not started");
        let mut first = e.submit(GenerateRequest::tokens(prompt(8), 2), Default::default());
        assert!(matches!(
            first.next_event_timeout(Duration::from_secs(10)),
            Ok(Event::Queued { .. })
        ));
        let mut second = e.submit(GenerateRequest::tokens(prompt(8), 2), Default::default());
        match drain(&mut second).as_slice() {
            [
                Event::Refused(EngineError::QueueFull {
                    limit: 1,
                    retry_after_secs,
                }),
            ] => assert!(*retry_after_secs >= 1),
            other => panic!("expected a queue-full refusal, got {other:?}"),
        }
        assert_eq!(
            shared.usage().queued,
            1,
            "the refused request left the queue"
        );
        shared.complete(other.id).expect("release");
        assert!(matches!(
            drain(&mut first).last(),
            Some(Event::Finished(Ok(_)))
        ));
    }

    #[test]
    fn service_dropped_ticket_releases_its_reservation() {
        // Queued: dropping the ticket leaves the queue at once.
        let (e, shared, other) = engine_with_budget_held();
        let mut waiting = e.submit(GenerateRequest::tokens(prompt(8), 2), Default::default());
        assert!(matches!(
            waiting.next_event_timeout(Duration::from_secs(10)),
            Ok(Event::Queued { .. })
        ));
        assert_eq!(shared.usage().queued, 1);
        drop(waiting);
        assert_eq!(
            shared.usage().queued,
            0,
            "a dropped ticket leaves the queue at once"
        );
        shared.complete(other.id).expect("release");
        // Running: dropping the ticket ends the request at the next step and releases it.
        // Paced steps hold the request running while the test drops its ticket.
        let e = engine(256)
            .with_service(engine::service::ServiceOptions {
                step_interval: Duration::from_millis(20),
                ..Default::default()
            })
            .expect("not started");
        let mut req = GenerateRequest::tokens(prompt(4), 60);
        req.stop_at_eog = false;
        let mut running = e.submit(req, Default::default());
        assert!(matches!(running.admission(), Ok(Resolution::Admitted(_))));
        assert!(e.usage().used_bytes > 0);
        drop(running);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while e.usage().used_bytes > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped request still holds {:?}",
                e.usage()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The service's lifecycle: the blocking reader sees every event then the end; draining
/// refuses queued and new requests while running ones finish; dropping the engine answers a
/// job still waiting for bytes instead of leaving it hanging.
mod lifecycle {
    use std::time::Duration;

    use engine::runtime::{EngineError, GenerateRequest};
    use engine::service::{Event, TicketError};

    use super::admission::{drain, engine, engine_with_budget_held, prompt};

    #[test]
    fn next_event_yields_admission_tokens_result_then_none() {
        let e = engine(64);
        let mut ticket = e.submit(GenerateRequest::tokens(prompt(4), 2), Default::default());
        let mut events = Vec::new();
        while let Some(ev) = ticket.next_event() {
            let end = matches!(ev, Event::Finished(_));
            events.push(ev);
            assert!(
                events.len() <= 4,
                "more events than admission, 2 tokens, result: {events:?}"
            );
            if end {
                break;
            }
        }
        assert!(matches!(events[0], Event::Admitted(_)), "{events:?}");
        let tokens = events
            .iter()
            .filter(|e| matches!(e, Event::Token(_)))
            .count();
        match events.last() {
            Some(Event::Finished(Ok(r))) => assert_eq!(r.tokens().len(), tokens),
            other => panic!("the last event is not a successful result: {other:?}"),
        }
    }

    #[test]
    fn drain_refuses_queued_and_new_requests_running_ones_finish() {
        let (e, shared, other) = engine_with_budget_held();
        let mut running = e.submit(GenerateRequest::tokens(prompt(4), 3), Default::default());
        let mut waiting = e.submit(GenerateRequest::tokens(prompt(8), 2), Default::default());
        e.drain();
        assert!(matches!(
            drain(&mut waiting).last(),
            Some(Event::Refused(EngineError::ShuttingDown))
        ));
        assert!(matches!(
            drain(&mut running).last(),
            Some(Event::Finished(Ok(_)))
        ));
        let mut late = e.submit(GenerateRequest::tokens(prompt(4), 1), Default::default());
        assert!(matches!(
            drain(&mut late).as_slice(),
            [Event::Refused(EngineError::ShuttingDown)]
        ));
        assert_eq!(shared.usage().queued, 0);
        shared.complete(other.id).expect("release");
        assert_eq!(shared.usage().used_bytes, 0);
    }

    #[test]
    fn dropping_the_engine_answers_a_job_still_waiting_for_bytes() {
        let (e, shared, _other) = engine_with_budget_held();
        let mut waiting = e.submit(GenerateRequest::tokens(prompt(8), 2), Default::default());
        assert!(matches!(
            waiting.next_event_timeout(Duration::from_secs(10)),
            Ok(Event::Queued { .. })
        ));
        drop(e);
        match waiting.next_event_timeout(Duration::from_secs(10)) {
            Ok(Event::Refused(EngineError::ShuttingDown)) => {}
            other => panic!("expected the shutdown refusal, got {other:?}"),
        }
        assert!(matches!(
            waiting.next_event_timeout(Duration::from_secs(1)),
            Err(TicketError::ServiceGone)
        ));
        assert_eq!(shared.usage().queued, 0);
        assert_eq!(shared.usage().running, 1, "only the other holder runs");
    }
}
