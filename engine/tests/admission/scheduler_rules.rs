//! One test per admission rule of the scheduler, with every expected number worked out by hand.

use engine::scheduler::{
    Admission, AdmissionError, BudgetCap, ConfigError, Demand, KvGeometry, ReleaseError, Scheduler,
    SchedulerConfig, Submitted, Usage,
};

/// A scheduler pricing every token position at `bpt` bytes.
fn sched(budget_bytes: u64, bpt: u64, max_running: usize) -> Scheduler {
    Scheduler::new(SchedulerConfig {
        budget_bytes,
        bytes_per_token: Some(bpt),
        max_running,
    })
    .expect("valid config")
}

fn used(s: &Scheduler) -> u64 {
    s.usage().used_bytes
}

#[test]
fn bytes_per_token_of_smollm2_135m_geometry() {
    // SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64.
    // f32 cache: 2 × 30 × 3 × 64 × 4 = 2 × 90 × 256 = 46_080 bytes per token.
    let g = KvGeometry {
        n_layers: 30,
        n_kv_heads: 3,
        head_dim: 64,
        elem_bytes: 4,
    };
    assert_eq!(g.bytes_per_token(), Ok(46_080));
    // f16 cache: half of that.
    let g16 = KvGeometry { elem_bytes: 2, ..g };
    assert_eq!(g16.bytes_per_token(), Ok(23_040));
}

#[test]
fn geometry_zero_field_and_overflow_are_typed_errors() {
    let g = KvGeometry {
        n_layers: 30,
        n_kv_heads: 3,
        head_dim: 0,
        elem_bytes: 4,
    };
    assert_eq!(
        g.bytes_per_token(),
        Err(ConfigError::ZeroGeometry { field: "head_dim" })
    );
    let huge = KvGeometry {
        n_layers: usize::MAX,
        n_kv_heads: 3,
        head_dim: 64,
        elem_bytes: 4,
    };
    assert!(matches!(
        huge.bytes_per_token(),
        Err(ConfigError::GeometryOverflow { .. })
    ));
    let err = Scheduler::with_geometry(1000, Some(g), 4).unwrap_err();
    assert!(err.to_string().contains("head_dim"), "{err}");
}

#[test]
fn config_rejects_zero_running_limit_and_zero_bytes_per_token() {
    let zero_running = SchedulerConfig {
        budget_bytes: 100,
        bytes_per_token: Some(10),
        max_running: 0,
    };
    assert_eq!(
        Scheduler::new(zero_running).unwrap_err(),
        ConfigError::ZeroMaxRunning
    );
    let zero_bpt = SchedulerConfig {
        budget_bytes: 100,
        bytes_per_token: Some(0),
        max_running: 1,
    };
    assert_eq!(
        Scheduler::new(zero_bpt).unwrap_err(),
        ConfigError::ZeroBytesPerToken
    );
}

#[test]
fn boundary_exact_minimum_admits_one_byte_less_refuses() {
    // prompt 5 + 1 new token = 6 positions × 10 bytes = 60 bytes.
    let d = Demand::prompt(5, 1);
    let s = sched(60, 10, 4);
    let a = s.admit(&d).expect("exactly 60 bytes fit a 60-byte budget");
    assert_eq!(a.reserved_bytes, 60);
    assert_eq!(a.max_new_tokens, 1);
    assert_eq!(a.budget_cap, None);
    assert_eq!(used(&s), 60);

    let s = sched(59, 10, 4);
    match s.admit(&d) {
        Err(AdmissionError::NeverFits(f)) => {
            assert_eq!(f.requested_bytes, 60);
            assert_eq!(f.minimum_bytes, 60);
            assert_eq!(f.limit_bytes, 59);
            assert_eq!(f.used_bytes, 0);
            assert_eq!(f.available_bytes, 59);
            assert_eq!(f.shortfall_bytes, 1);
        }
        other => panic!("expected NeverFits, got {other:?}"),
    }
    assert_eq!(used(&s), 0);
    assert_eq!(s.usage().running, 0);
}

#[test]
fn full_request_at_exact_budget_is_not_clamped() {
    // (5 + 3) × 10 = 80 bytes.
    let s = sched(80, 10, 4);
    let a = s.admit(&Demand::prompt(5, 3)).unwrap();
    assert_eq!(
        (a.reserved_bytes, a.max_new_tokens, a.budget_cap),
        (80, 3, None)
    );
}

#[test]
fn partial_fit_clamps_and_reports_the_cap() {
    // Requested (5 + 3) × 10 = 80 bytes; 79 available hold 7 positions,
    // i.e. 2 new tokens: 70 bytes reserved.
    let s = sched(79, 10, 4);
    let a = s.admit(&Demand::prompt(5, 3)).unwrap();
    assert_eq!(a.max_new_tokens, 2);
    assert_eq!(a.reserved_bytes, 70);
    assert_eq!(
        a.budget_cap,
        Some(BudgetCap {
            requested_tokens: 3,
            admitted_tokens: 2,
            requested_bytes: 80,
            admitted_bytes: 70,
            available_bytes: 79,
        })
    );
    assert_eq!(used(&s), 70);
    let text = a.budget_cap.unwrap().to_string();
    assert!(text.contains("2 of 3 new tokens"), "{text}");
    assert!(text.contains("79 bytes were available"), "{text}");
}

#[test]
fn clamp_uses_only_what_is_free_now() {
    // Budget 100; 40 bytes held. A (2 + 8) × 10 = 100-byte request sees
    // 60 bytes: 6 positions, 4 new tokens, 60 bytes reserved.
    let s = sched(100, 10, 4);
    let first = s.admit(&Demand::prompt(3, 1)).unwrap();
    assert_eq!(first.reserved_bytes, 40);
    let a = s.admit(&Demand::prompt(2, 8)).unwrap();
    assert_eq!(a.max_new_tokens, 4);
    assert_eq!(a.reserved_bytes, 60);
    let cap = a.budget_cap.unwrap();
    assert_eq!((cap.requested_bytes, cap.available_bytes), (100, 60));
    assert_eq!(used(&s), 100);
}

#[test]
fn over_budget_now_is_distinct_from_never_fits_and_names_the_numbers() {
    // Budget 100: 80 held by (5 + 3) × 10. A (2 + 1) × 10 = 30-byte request
    // fits the limit but not the 20 bytes free: short by 10.
    let s = sched(100, 10, 4);
    s.admit(&Demand::prompt(5, 3)).unwrap();
    let err = s.admit(&Demand::prompt(2, 1)).unwrap_err();
    assert!(err.is_not_now());
    match err {
        AdmissionError::OverBudget(f) => {
            assert_eq!(f.requested_bytes, 30);
            assert_eq!(f.minimum_bytes, 30);
            assert_eq!(f.used_bytes, 80);
            assert_eq!(f.limit_bytes, 100);
            assert_eq!(f.available_bytes, 20);
            assert_eq!(f.shortfall_bytes, 10);
        }
        ref other => panic!("expected OverBudget, got {other:?}"),
    }
    let text = err.to_string();
    for phrase in [
        "at least 30 bytes",
        "requested 30 bytes",
        "80 of 100 bytes are used",
        "20 available",
        "short by 10 bytes",
        "larger KV budget",
        "fewer new tokens",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?} in: {text}");
    }
    assert_eq!(used(&s), 80, "a refusal reserves nothing");
}

#[test]
fn never_fits_text_names_requested_minimum_limit_and_shortfall() {
    // (10 + 5) × 10 = 150 requested, (10 + 1) × 10 = 110 minimum, limit 100.
    let s = sched(100, 10, 4);
    let err = s.admit(&Demand::prompt(10, 5)).unwrap_err();
    assert!(!err.is_not_now());
    let text = err.to_string();
    for phrase in [
        "can never fit",
        "at least 110 bytes",
        "requested 150 bytes for 5 new tokens",
        "limit is 100 bytes",
        "short by 10 bytes",
        "0 bytes used, 100 available",
        "larger KV budget",
        "fewer new tokens / a shorter prompt",
    ] {
        assert!(text.contains(phrase), "missing {phrase:?} in: {text}");
    }
}

#[test]
fn carried_prefix_counts_toward_the_reservation() {
    // New turn alone: (3 + 2) × 10 = 50 bytes, fits 100.
    let s = sched(100, 10, 4);
    let alone = s.admit(&Demand::prompt(3, 2)).unwrap();
    assert_eq!(alone.reserved_bytes, 50);
    s.complete(alone.id).unwrap();
    // With 6 carried tokens: requested (6 + 3 + 2) × 10 = 110, minimum 100: clamped to 1.
    let a = s
        .admit(&Demand::prompt(3, 2).with_carried_prefix(6))
        .unwrap();
    assert_eq!((a.reserved_bytes, a.max_new_tokens), (100, 1));
    assert_eq!(a.budget_cap.unwrap().requested_bytes, 110);
    s.complete(a.id).unwrap();
    // With 7 carried tokens: minimum (7 + 3 + 1) × 10 = 110 > 100: refused.
    match s.admit(&Demand::prompt(3, 2).with_carried_prefix(7)) {
        Err(AdmissionError::NeverFits(f)) => {
            assert_eq!((f.minimum_bytes, f.shortfall_bytes), (110, 10));
        }
        other => panic!("expected NeverFits, got {other:?}"),
    }
    assert_eq!(used(&s), 0);
}

#[test]
fn token_rows_count_every_row() {
    // 3 rows × (4 prompt + 2 new) × 10 = 180 bytes.
    let d = Demand::prompt(4, 2).with_rows(3);
    let s = sched(180, 10, 4);
    let a = s.admit(&d).unwrap();
    assert_eq!(
        (a.reserved_bytes, a.max_new_tokens, a.budget_cap),
        (180, 2, None)
    );
    // 179 bytes: 179 / 30 = 5 positions per row, 1 new token, 3 × 5 × 10 = 150 bytes.
    let s = sched(179, 10, 4);
    let a = s.admit(&d).unwrap();
    assert_eq!((a.reserved_bytes, a.max_new_tokens), (150, 1));
    assert_eq!(a.budget_cap.unwrap().requested_bytes, 180);
    // 149 bytes: the 150-byte minimum does not fit.
    let s = sched(149, 10, 4);
    match s.admit(&d) {
        Err(AdmissionError::NeverFits(f)) => {
            assert_eq!((f.minimum_bytes, f.shortfall_bytes), (150, 1))
        }
        other => panic!("expected NeverFits, got {other:?}"),
    }
}

#[test]
fn application_input_positions_count() {
    // 4 prompt + 16 image positions + 4 new = 24 positions × 10 = 240 bytes.
    let d = Demand::prompt(4, 4).with_extra_positions(16);
    let s = sched(240, 10, 4);
    assert_eq!(s.admit(&d).unwrap().reserved_bytes, 240);
    // 239 bytes: 23 positions, 3 new tokens, 230 bytes.
    let s = sched(239, 10, 4);
    let a = s.admit(&d).unwrap();
    assert_eq!((a.reserved_bytes, a.max_new_tokens), (230, 3));
    // 200 bytes: minimum (20 + 1) × 10 = 210 does not fit.
    let s = sched(200, 10, 4);
    match s.admit(&d) {
        Err(AdmissionError::NeverFits(f)) => assert_eq!(f.minimum_bytes, 210),
        other => panic!("expected NeverFits, got {other:?}"),
    }
}

#[test]
fn zero_new_tokens_reserves_the_positions_only() {
    // Prefill only: 5 × 10 = 50 bytes.
    let s = sched(50, 10, 4);
    let a = s.admit(&Demand::prompt(5, 0)).unwrap();
    assert_eq!(
        (a.reserved_bytes, a.max_new_tokens, a.budget_cap),
        (50, 0, None)
    );
}

#[test]
fn without_geometry_admission_reserves_nothing_and_caps_nothing() {
    let s = Scheduler::with_geometry(0, None, 2).unwrap();
    assert_eq!(s.bytes_per_token(), None);
    let huge = Demand::prompt(1_000_000, 1_000_000)
        .with_rows(8)
        .with_carried_prefix(5_000)
        .with_extra_positions(4_096);
    let a = s.admit(&huge).unwrap();
    assert_eq!(
        (a.reserved_bytes, a.max_new_tokens, a.budget_cap),
        (0, 1_000_000, None)
    );
    assert_eq!(used(&s), 0);
    // The running-batch limit still applies.
    s.admit(&huge).unwrap();
    assert_eq!(
        s.admit(&huge).unwrap_err(),
        AdmissionError::BatchFull {
            running: 2,
            limit: 2
        }
    );
    s.complete(a.id).unwrap();
    assert_eq!(s.usage().running, 1);
}

#[test]
fn running_batch_limit_refuses_with_count_and_limit() {
    let s = sched(1_000, 10, 2);
    let a = s.admit(&Demand::prompt(1, 1)).unwrap();
    s.admit(&Demand::prompt(1, 1)).unwrap();
    let err = s.admit(&Demand::prompt(1, 1)).unwrap_err();
    assert_eq!(
        err,
        AdmissionError::BatchFull {
            running: 2,
            limit: 2
        }
    );
    assert!(err.is_not_now());
    assert!(err.to_string().contains("2 of 2 requests running"), "{err}");
    assert_eq!(used(&s), 40);
    s.complete(a.id).unwrap();
    s.admit(&Demand::prompt(1, 1)).unwrap();
}

#[test]
fn complete_releases_and_the_same_request_is_admitted_again() {
    let s = sched(80, 10, 4);
    let d = Demand::prompt(5, 3);
    let a = s.admit(&d).unwrap();
    assert!(s.admit(&Demand::prompt(0, 1)).is_err());
    s.complete(a.id).unwrap();
    assert_eq!(used(&s), 0);
    assert_eq!(s.usage().running, 0);
    let again = s.admit(&d).unwrap();
    assert_eq!((again.reserved_bytes, again.budget_cap), (80, None));
    assert_ne!(again.id, a.id);
}

#[test]
fn cancel_releases_a_running_request() {
    let s = sched(80, 10, 4);
    let a = s.admit(&Demand::prompt(5, 3)).unwrap();
    s.cancel(a.id).unwrap();
    assert_eq!(used(&s), 0);
    assert_eq!(s.admit(&Demand::prompt(5, 3)).unwrap().reserved_bytes, 80);
}

#[test]
fn double_release_is_a_typed_error_and_never_credits_twice() {
    let s = sched(100, 10, 4);
    let a = s.admit(&Demand::prompt(2, 2)).unwrap(); // 40 bytes
    let b = s.admit(&Demand::prompt(1, 2)).unwrap(); // 30 bytes
    s.complete(a.id).unwrap();
    assert_eq!(used(&s), 30);
    assert_eq!(s.complete(a.id), Err(ReleaseError::AlreadyReleased(a.id)));
    assert_eq!(s.cancel(a.id), Err(ReleaseError::AlreadyReleased(a.id)));
    assert_eq!(used(&s), 30, "b's 30 bytes are still held");
    s.cancel(b.id).unwrap();
    assert_eq!(s.complete(b.id), Err(ReleaseError::AlreadyReleased(b.id)));
    assert_eq!(used(&s), 0);
    let text = ReleaseError::AlreadyReleased(b.id).to_string();
    assert!(text.contains("already released"), "{text}");
}

#[test]
fn an_id_from_another_scheduler_is_rejected() {
    let s1 = sched(100, 10, 4);
    let s2 = sched(100, 10, 4);
    let a1 = s1.admit(&Demand::prompt(1, 1)).unwrap();
    let a2 = s2.admit(&Demand::prompt(2, 1)).unwrap();
    assert_eq!(s2.complete(a1.id), Err(ReleaseError::Foreign(a1.id)));
    assert_eq!(s2.cancel(a1.id), Err(ReleaseError::Foreign(a1.id)));
    assert_eq!(used(&s2), 30);
    s2.complete(a2.id).unwrap();
    s1.complete(a1.id).unwrap();
}

#[test]
fn clones_share_one_budget() {
    let s = sched(100, 10, 4);
    let other = s.clone();
    let a = other.admit(&Demand::prompt(5, 3)).unwrap(); // 80 bytes
    assert_eq!(used(&s), 80);
    assert!(matches!(
        s.admit(&Demand::prompt(2, 1)),
        Err(AdmissionError::OverBudget(_))
    ));
    s.complete(a.id).unwrap();
    assert_eq!(other.usage().used_bytes, 0);
}

#[test]
fn usage_snapshot_reports_used_limit_running_and_queued() {
    let s = sched(100, 10, 3);
    s.admit(&Demand::prompt(5, 3)).unwrap(); // 80
    s.enqueue(&Demand::prompt(3, 1)).unwrap(); // waits for 40
    assert_eq!(
        s.usage(),
        Usage {
            used_bytes: 80,
            limit_bytes: 100,
            bytes_per_token: Some(10),
            running: 1,
            max_running: 3,
            queued: 1,
        }
    );
}

#[test]
fn queue_admits_in_fifo_order_and_a_later_request_does_not_jump() {
    let s = sched(100, 10, 4);
    let a = s.admit(&Demand::prompt(5, 3)).unwrap(); // 80 bytes, 20 free
    let b = s.enqueue(&Demand::prompt(3, 1)).unwrap(); // needs 40
    let c = s.enqueue(&Demand::prompt(0, 1)).unwrap(); // needs 10: fits now, but is behind b
    assert!(s.admit_ready().is_empty(), "c must not jump b");
    assert_eq!(
        s.admit(&Demand::prompt(0, 1)).unwrap_err(),
        AdmissionError::QueuedAhead { queued: 2 }
    );
    assert_eq!(used(&s), 80);
    s.complete(a.id).unwrap();
    let admitted: Vec<Admission> = s.admit_ready();
    let got: Vec<_> = admitted.iter().map(|x| (x.id, x.reserved_bytes)).collect();
    assert_eq!(got, vec![(b, 40), (c, 10)]);
    assert_eq!(s.usage().queued, 0);
    assert_eq!(used(&s), 50);
}

#[test]
fn queue_head_waits_for_a_running_slot_too() {
    let s = sched(1_000, 10, 1);
    let a = s.admit(&Demand::prompt(1, 1)).unwrap();
    let b = s.enqueue(&Demand::prompt(1, 1)).unwrap();
    assert!(s.admit_ready().is_empty());
    s.complete(a.id).unwrap();
    let ready = s.admit_ready();
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].id, b);
}

#[test]
fn queued_request_is_admitted_clamped_when_only_part_fits() {
    // 60 held; a (2 + 8) × 10 = 100-byte request waits, needing 30 minimum.
    let s = sched(100, 10, 4);
    let a = s.admit(&Demand::prompt(5, 1)).unwrap(); // 60
    let b = s.admit(&Demand::prompt(2, 1)).unwrap(); // 30, 10 free
    let q = s.enqueue(&Demand::prompt(2, 8)).unwrap();
    assert!(s.admit_ready().is_empty());
    s.complete(b.id).unwrap(); // 40 free: 4 positions, 2 new tokens
    let ready = s.admit_ready();
    assert_eq!(ready.len(), 1);
    assert_eq!(
        (
            ready[0].id,
            ready[0].reserved_bytes,
            ready[0].max_new_tokens
        ),
        (q, 40, 2)
    );
    assert_eq!(ready[0].budget_cap.unwrap().available_bytes, 40);
    s.complete(a.id).unwrap();
    s.complete(q).unwrap();
    assert_eq!(used(&s), 0);
}

#[test]
fn enqueue_refuses_what_can_never_fit() {
    let s = sched(100, 10, 4);
    let err = s.enqueue(&Demand::prompt(10, 1)).unwrap_err(); // minimum 110
    assert!(matches!(err, AdmissionError::NeverFits(_)), "{err:?}");
    assert_eq!(s.usage().queued, 0);
}

#[test]
fn cancel_withdraws_a_queued_request_and_complete_refuses_it() {
    let s = sched(100, 10, 4);
    let a = s.admit(&Demand::prompt(5, 3)).unwrap(); // 80
    let b = s.enqueue(&Demand::prompt(3, 1)).unwrap(); // 40, waits
    let c = s.enqueue(&Demand::prompt(0, 1)).unwrap(); // 10
    assert_eq!(s.complete(b), Err(ReleaseError::NotAdmitted(b)));
    s.cancel(b).unwrap();
    assert_eq!(s.usage().queued, 1);
    // With b withdrawn, c is the head and fits the 20 free bytes.
    let ready = s.admit_ready();
    assert_eq!(ready.iter().map(|x| x.id).collect::<Vec<_>>(), vec![c]);
    assert_eq!(s.cancel(b), Err(ReleaseError::AlreadyReleased(b)));
    s.complete(a.id).unwrap();
    s.complete(c).unwrap();
    assert_eq!(
        s.usage(),
        Usage {
            used_bytes: 0,
            limit_bytes: 100,
            bytes_per_token: Some(10),
            running: 0,
            max_running: 4,
            queued: 0
        }
    );
}

#[test]
fn submit_admits_queues_or_refuses() {
    let s = sched(100, 10, 4);
    let Submitted::Admitted(a) = s.submit(&Demand::prompt(5, 3)).unwrap() else {
        panic!("an empty budget admits 80 bytes");
    };
    assert_eq!(a.reserved_bytes, 80);
    let Submitted::Queued(q) = s.submit(&Demand::prompt(3, 1)).unwrap() else {
        panic!("40 bytes do not fit the 20 free");
    };
    // Something that would fit now still queues behind q.
    assert!(matches!(
        s.submit(&Demand::prompt(0, 1)).unwrap(),
        Submitted::Queued(_)
    ));
    assert!(matches!(
        s.submit(&Demand::prompt(10, 1)),
        Err(AdmissionError::NeverFits(_))
    ));
    assert_eq!(s.usage().queued, 2);
    s.complete(a.id).unwrap();
    assert_eq!(s.admit_ready()[0].id, q);
}

#[test]
fn zero_rows_and_overflowing_demands_are_typed_errors() {
    let s = sched(100, 10, 4);
    assert_eq!(
        s.admit(&Demand::prompt(1, 1).with_rows(0)).unwrap_err(),
        AdmissionError::ZeroRows
    );
    let err = s
        .admit(&Demand::prompt(usize::MAX, 1).with_carried_prefix(1))
        .unwrap_err();
    assert!(
        matches!(err, AdmissionError::DemandOverflow { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("overflows"), "{err}");
    assert_eq!(s.usage().running, 0);
}

#[test]
fn release_errors_name_the_reservation() {
    let s = sched(100, 10, 4);
    let a = s.admit(&Demand::prompt(1, 1)).unwrap();
    let b = s.admit(&Demand::prompt(1, 1)).unwrap();
    let (an, bn) = (a.id.to_string(), b.id.to_string());
    assert!(an.starts_with("reservation #"), "{an:?}");
    assert!(an.contains("of scheduler "), "{an:?}");
    assert_ne!(an, bn, "two reservations read differently");
    s.complete(a.id).unwrap();
    let err = s.complete(a.id).unwrap_err().to_string();
    assert_eq!(err, format!("{an} was already released"));
}

#[test]
fn releases_before_admission_counts_releases_in_the_given_order() {
    // Budget 100 tokens at 1 byte each. A reserves 60 (10 + 50), B reserves 30 (10 + 20).
    let s = sched(100, 1, 4);
    let a = s.admit(&Demand::prompt(10, 50)).unwrap().id;
    let b = s.admit(&Demand::prompt(10, 20)).unwrap().id;
    // 10 bytes free. A request needing 10 + 15 = 25 at least: admissible after B (30 free
    // + 10 = 40) alone, or after A alone (70 free).
    let wants_25 = Demand::prompt(10, 15);
    assert_eq!(s.releases_before_admission(&wants_25, &[b, a]), Some(1));
    assert_eq!(s.releases_before_admission(&wants_25, &[a, b]), Some(1));
    // Minimum 10 + 41 = 51 bytes: B's 30 + 10 free is not enough, A's 60 + 10 is.
    let wants_51 = Demand::prompt(50, 1);
    assert_eq!(s.releases_before_admission(&wants_51, &[b, a]), Some(2));
    assert_eq!(s.releases_before_admission(&wants_51, &[a, b]), Some(1));
    // Fits now (a partial fit counts: it is admitted, clamped).
    assert_eq!(
        s.releases_before_admission(&Demand::prompt(5, 40), &[a, b]),
        Some(0)
    );
    // Releasing only B never admits the 51-byte minimum.
    assert_eq!(s.releases_before_admission(&wants_51, &[b]), None);
    // Nothing was released by asking.
    assert_eq!(used(&s), 90);
    assert_eq!(s.usage().running, 2);
}

#[test]
fn releases_before_admission_asks_for_the_queue_head_and_the_batch_limit() {
    // max_running 2, both slots taken, budget wide open: one release frees a slot.
    let s = sched(1000, 1, 2);
    let a = s.admit(&Demand::prompt(1, 1)).unwrap().id;
    let b = s.admit(&Demand::prompt(1, 1)).unwrap().id;
    let small = Demand::prompt(1, 1);
    assert_eq!(s.releases_before_admission(&small, &[a, b]), Some(1));
    // Budget 10, A and B reserve 4 each, the queue's head needs 7 at least (6 + 1): 2
    // free, 6 after one release, so both must release, though the refused request itself
    // (2 bytes) would fit now.
    let t = sched(10, 1, 4);
    let a = t.admit(&Demand::prompt(2, 2)).unwrap().id;
    let b = t.admit(&Demand::prompt(2, 2)).unwrap().id;
    t.enqueue(&Demand::prompt(6, 1)).unwrap();
    assert_eq!(t.releases_before_admission(&small, &[a, b]), Some(2));
    // Ids of another scheduler release nothing here.
    let other = sched(1000, 1, 2);
    let x = other.admit(&small).unwrap().id;
    assert_eq!(t.releases_before_admission(&small, &[x]), None);
    assert_eq!(t.releases_before_admission(&small, &[x, a, b]), Some(3));
}
