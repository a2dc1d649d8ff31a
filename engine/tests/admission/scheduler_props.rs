//! Property tests: random admit/enqueue/submit/admit_ready/complete/cancel sequences checked step by step against a test-local model.

use std::collections::VecDeque;

use engine::scheduler::{
    AdmissionError, Demand, ReleaseError, ReservationId, Scheduler, SchedulerConfig, Submitted,
};
use proptest::prelude::*;

/// The outcome kinds the model predicts for an admission attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    ZeroRows,
    NeverFits,
    OverBudget,
    BatchFull,
    QueuedAhead,
}

fn kind(e: &AdmissionError) -> Refusal {
    match e {
        AdmissionError::ZeroRows => Refusal::ZeroRows,
        AdmissionError::NeverFits(_) => Refusal::NeverFits,
        AdmissionError::OverBudget(_) => Refusal::OverBudget,
        AdmissionError::BatchFull { .. } => Refusal::BatchFull,
        AdmissionError::QueuedAhead { .. } => Refusal::QueuedAhead,
        other => panic!("the generated demands never overflow: {other:?}"),
    }
}

/// A plain reference model of the rules, written independently of the engine:
/// the admitted new-token count is found by searching downwards, not by division.
#[derive(Debug)]
struct Model {
    limit: u64,
    bpt: Option<u64>,
    max_running: usize,
    used: u64,
    running: Vec<(ReservationId, u64)>,
    queue: VecDeque<(ReservationId, Demand)>,
}

impl Model {
    /// `(reserved bytes, admitted new tokens)` or the refusal, ignoring the queue.
    fn decide(&self, d: &Demand) -> Result<(u64, usize), Refusal> {
        if d.rows == 0 {
            return Err(Refusal::ZeroRows);
        }
        let Some(bpt) = self.bpt else {
            if self.running.len() >= self.max_running {
                return Err(Refusal::BatchFull);
            }
            return Ok((0, d.max_new_tokens));
        };
        let positions = (d.carried_prefix + d.prompt_tokens + d.extra_positions) as u64;
        let cost = |new: usize| d.rows as u64 * (positions + new as u64) * bpt;
        let least = if d.max_new_tokens == 0 { 0 } else { 1 };
        if cost(least) > self.limit {
            return Err(Refusal::NeverFits);
        }
        if self.running.len() >= self.max_running {
            return Err(Refusal::BatchFull);
        }
        let free = self.limit - self.used;
        let mut new = d.max_new_tokens;
        loop {
            if cost(new) <= free {
                return Ok((cost(new), new));
            }
            if new == least {
                return Err(Refusal::OverBudget);
            }
            new -= 1;
        }
    }

    fn is_not_now(r: Refusal) -> bool {
        matches!(
            r,
            Refusal::OverBudget | Refusal::BatchFull | Refusal::QueuedAhead
        )
    }
}

#[derive(Debug, Clone)]
enum Op {
    Admit(Demand),
    Enqueue(Demand),
    Submit(Demand),
    AdmitReady,
    /// Complete the n-th id ever issued (modulo), which may be running, queued or released.
    Complete(usize),
    /// Cancel the n-th id ever issued (modulo).
    Cancel(usize),
}

fn demand() -> impl Strategy<Value = Demand> {
    (
        0usize..30,
        prop_oneof![3 => Just(0usize), 1 => 0usize..20],
        prop_oneof![8 => Just(1usize), 3 => 2usize..4, 1 => Just(0usize)],
        prop_oneof![3 => Just(0usize), 1 => 0usize..20],
        0usize..40,
    )
        .prop_map(
            |(prompt_tokens, carried_prefix, rows, extra_positions, max_new_tokens)| Demand {
                prompt_tokens,
                carried_prefix,
                rows,
                extra_positions,
                max_new_tokens,
                cached_prefix: 0,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => demand().prop_map(Op::Admit),
        2 => demand().prop_map(Op::Enqueue),
        2 => demand().prop_map(Op::Submit),
        2 => Just(Op::AdmitReady),
        3 => any::<usize>().prop_map(Op::Complete),
        2 => any::<usize>().prop_map(Op::Cancel),
    ]
}

fn config() -> impl Strategy<Value = SchedulerConfig> {
    (
        0u64..4_000,
        prop_oneof![1 => Just(None), 4 => (1u64..40).prop_map(Some)],
        1usize..5,
    )
        .prop_map(
            |(budget_bytes, bytes_per_token, max_running)| SchedulerConfig {
                budget_bytes,
                bytes_per_token,
                max_running,
            },
        )
}

/// Checks the scheduler's usage against the model and the budget invariant.
fn check_usage(s: &Scheduler, m: &Model) -> Result<(), TestCaseError> {
    let u = s.usage();
    prop_assert_eq!(u.used_bytes, m.used);
    prop_assert_eq!(u.running, m.running.len());
    prop_assert_eq!(u.queued, m.queue.len());
    prop_assert!(u.running <= m.max_running);
    if m.bpt.is_some() {
        prop_assert!(u.used_bytes <= u.limit_bytes, "{:?}", u);
    } else {
        prop_assert_eq!(u.used_bytes, 0);
    }
    let sum: u64 = m.running.iter().map(|&(_, b)| b).sum();
    prop_assert_eq!(sum, m.used);
    Ok(())
}

/// Applies a model admission (already decided) and checks the engine's matches it.
fn expect_admitted(
    m: &mut Model,
    got: &engine::scheduler::Admission,
    d: &Demand,
    bytes: u64,
    new: usize,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.reserved_bytes, bytes);
    prop_assert_eq!(got.max_new_tokens, new);
    prop_assert_eq!(got.budget_cap.is_some(), new < d.max_new_tokens);
    if let Some(cap) = got.budget_cap {
        prop_assert_eq!(cap.admitted_bytes, bytes);
        prop_assert_eq!(cap.admitted_tokens, new);
        prop_assert_eq!(cap.requested_tokens, d.max_new_tokens);
        prop_assert_eq!(cap.available_bytes, m.limit - m.used);
        prop_assert!(cap.requested_bytes > cap.available_bytes);
    }
    m.used += bytes;
    m.running.push((got.id, bytes));
    Ok(())
}

fn run(cfg: SchedulerConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let s = Scheduler::new(cfg).expect("generated configs are valid");
    // A clone drives half the operations: all handles share one budget.
    let other = s.clone();
    let mut m = Model {
        limit: cfg.budget_bytes,
        bpt: cfg.bytes_per_token,
        max_running: cfg.max_running,
        used: 0,
        running: Vec::new(),
        queue: VecDeque::new(),
    };
    let mut issued: Vec<ReservationId> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        let h = if step % 2 == 0 { &s } else { &other };
        match op {
            Op::Admit(d) => {
                let want = m.decide(&d).and_then(|ok| {
                    if m.queue.is_empty() {
                        Ok(ok)
                    } else {
                        Err(Refusal::QueuedAhead)
                    }
                });
                match (h.admit(&d), want) {
                    (Ok(a), Ok((bytes, new))) => {
                        expect_admitted(&mut m, &a, &d, bytes, new)?;
                        issued.push(a.id);
                    }
                    (Err(e), Err(r)) => prop_assert_eq!(kind(&e), r),
                    (got, want) => {
                        prop_assert!(false, "admit {:?}: got {:?}, model {:?}", d, got, want)
                    }
                }
            }
            Op::Enqueue(d) => {
                let want = match m.decide(&d) {
                    Err(r) if !Model::is_not_now(r) => Err(r),
                    _ => Ok(()),
                };
                match (h.enqueue(&d), want) {
                    (Ok(id), Ok(())) => {
                        m.queue.push_back((id, d));
                        issued.push(id);
                    }
                    (Err(e), Err(r)) => prop_assert_eq!(kind(&e), r),
                    (got, want) => {
                        prop_assert!(false, "enqueue {:?}: got {:?}, model {:?}", d, got, want)
                    }
                }
            }
            Op::Submit(d) => {
                let decided = m.decide(&d);
                match (h.submit(&d), decided) {
                    (Ok(Submitted::Admitted(a)), Ok((bytes, new))) if m.queue.is_empty() => {
                        expect_admitted(&mut m, &a, &d, bytes, new)?;
                        issued.push(a.id);
                    }
                    (Ok(Submitted::Queued(id)), decided)
                        if (decided.is_ok() && !m.queue.is_empty())
                            || matches!(decided, Err(r) if Model::is_not_now(r)) =>
                    {
                        m.queue.push_back((id, d));
                        issued.push(id);
                    }
                    (Err(e), Err(r)) if !Model::is_not_now(r) => prop_assert_eq!(kind(&e), r),
                    (got, want) => {
                        prop_assert!(false, "submit {:?}: got {:?}, model {:?}", d, got, want)
                    }
                }
            }
            Op::AdmitReady => {
                let got = h.admit_ready();
                let mut got = got.iter();
                while let Some(&(id, d)) = m.queue.front() {
                    let Ok((bytes, new)) = m.decide(&d) else {
                        break;
                    };
                    m.queue.pop_front();
                    let a = got.next();
                    prop_assert!(
                        a.is_some(),
                        "model admits queued {:?}, scheduler did not",
                        id
                    );
                    let a = a.unwrap();
                    prop_assert_eq!(a.id, id);
                    expect_admitted(&mut m, a, &d, bytes, new)?;
                }
                prop_assert!(
                    got.next().is_none(),
                    "scheduler admitted past the model's head"
                );
            }
            Op::Complete(n) | Op::Cancel(n) if issued.is_empty() => {
                let _ = n;
            }
            Op::Complete(n) => {
                let id = issued[n % issued.len()];
                let got = h.complete(id);
                if let Some(i) = m.running.iter().position(|&(r, _)| r == id) {
                    prop_assert_eq!(got, Ok(()));
                    m.used -= m.running.remove(i).1;
                } else if m.queue.iter().any(|&(q, _)| q == id) {
                    prop_assert_eq!(got, Err(ReleaseError::NotAdmitted(id)));
                } else {
                    prop_assert_eq!(got, Err(ReleaseError::AlreadyReleased(id)));
                }
            }
            Op::Cancel(n) => {
                let id = issued[n % issued.len()];
                let got = h.cancel(id);
                if let Some(i) = m.running.iter().position(|&(r, _)| r == id) {
                    prop_assert_eq!(got, Ok(()));
                    m.used -= m.running.remove(i).1;
                } else if let Some(i) = m.queue.iter().position(|&(q, _)| q == id) {
                    prop_assert_eq!(got, Ok(()));
                    m.queue.remove(i);
                } else {
                    prop_assert_eq!(got, Err(ReleaseError::AlreadyReleased(id)));
                }
            }
        }
        check_usage(&s, &m)?;
    }
    // Every path returns the budget to zero: complete what runs, cancel what waits.
    for (id, _) in std::mem::take(&mut m.running) {
        prop_assert_eq!(s.complete(id), Ok(()));
    }
    for (id, _) in std::mem::take(&mut m.queue) {
        prop_assert_eq!(other.cancel(id), Ok(()));
    }
    m.used = 0;
    check_usage(&s, &m)?;
    let u = s.usage();
    prop_assert_eq!((u.used_bytes, u.running, u.queued), (0, 0, 0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_never_exceed_the_limit_and_return_to_zero(
        cfg in config(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(cfg, ops)?;
    }
}

#[test]
fn concurrent_clones_never_exceed_the_limit_and_return_to_zero() {
    // 4 threads each admit and release through their own clone; a watcher
    // samples usage. Bytes per token 7, budget 500, so requests collide often.
    let s = Scheduler::new(SchedulerConfig {
        budget_bytes: 500,
        bytes_per_token: Some(7),
        max_running: 3,
    })
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let s = s.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut samples = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let u = s.usage();
                assert!(u.used_bytes <= 500, "{u:?}");
                assert!(u.running <= 3, "{u:?}");
                samples += 1;
            }
            samples
        })
    };
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut admitted = 0;
                for i in 0..2_000usize {
                    let d = Demand::prompt((i * 7 + t) % 40, 1 + (i + t) % 30);
                    if let Ok(a) = s.admit(&d) {
                        admitted += 1;
                        assert!(a.reserved_bytes <= 500);
                        if i % 3 == 0 {
                            s.cancel(a.id).unwrap();
                        } else {
                            s.complete(a.id).unwrap();
                        }
                        assert!(s.complete(a.id).is_err());
                    }
                }
                admitted
            })
        })
        .collect();
    let admitted: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(admitted > 0);
    let u = s.usage();
    assert_eq!((u.used_bytes, u.running, u.queued), (0, 0, 0));
}
