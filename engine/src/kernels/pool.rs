//! A fork-join pool whose workers spin briefly between jobs, for the decode step's many short parallel loops.
//!
//! One decode step of a 30-block model runs about 150 parallel loops of a few to a few
//! hundred microseconds each. A pool whose idle workers sleep on a futex pays a wake-up
//! (tens of microseconds on a virtual machine) on most of them. Here idle workers spin on
//! an epoch counter for [`SPIN`] after each job before parking, so back-to-back loops
//! start without a system call; the thread that dispatches runs tasks too. Tasks are
//! claimed dynamically from an atomic counter. The same scheme as the spinning barrier of
//! llama.cpp's CPU thread pool; the code is this project's own.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins for the next job before parking.
pub const SPIN: Duration = Duration::from_micros(200);

/// One dispatched loop: the body, the task count and the claiming/completion counters.
/// It lives on the dispatching thread's stack for the duration of [`SpinPool::run`].
struct Job<'a> {
    body: &'a (dyn Fn(usize) + Sync),
    n: usize,
    next: AtomicUsize,
    remaining: AtomicUsize,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Job<'_> {
    /// Claim and run tasks until none is left; a panicking task is recorded, not unwound.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| (self.body)(i))) {
                self.panic
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(p);
            }
            self.remaining.fetch_sub(1, Ordering::Release);
        }
    }
}

/// A job reference with its lifetime erased; see the safety argument in [`SpinPool::run`].
#[derive(Clone, Copy)]
struct JobRef(*const Job<'static>);
// SAFETY: a `Job` is only shared while `SpinPool::run` keeps it alive, and all its fields
// are `Sync`.
unsafe impl Send for JobRef {}

/// The current job and the parked-worker count, under one mutex.
struct Slot {
    job: Option<JobRef>,
    parked: usize,
}

struct Shared {
    /// Bumped (under the slot mutex) for every job and at shutdown.
    epoch: AtomicU64,
    slot: Mutex<Slot>,
    wake: Condvar,
    /// Workers holding the current job's reference (incremented under the slot mutex).
    active: AtomicUsize,
    shutdown: AtomicBool,
}

/// A pool of `threads - 1` spinning workers plus the dispatching thread.
pub struct SpinPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Held while a job runs; a dispatch that finds it held (a nested or concurrent one)
    /// runs its tasks inline on the calling thread.
    dispatch: Mutex<()>,
}

impl std::fmt::Debug for SpinPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinPool")
            .field("threads", &(self.workers.len() + 1))
            .finish()
    }
}

impl SpinPool {
    /// A pool running jobs on `threads` threads: the caller of [`SpinPool::run`] and
    /// `threads - 1` workers named `<name>-<i>` (none for `threads <= 1`).
    ///
    /// Panics only if the operating system refuses to start a thread.
    pub fn new(threads: usize, name: &str) -> SpinPool {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            slot: Mutex::new(Slot {
                job: None,
                parked: 0,
            }),
            wake: Condvar::new(),
            active: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
        });
        let workers = (1..threads.max(1))
            .map(|i| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || worker(&s))
                    .expect("cannot start a kernel pool thread")
            })
            .collect();
        SpinPool {
            shared,
            workers,
            dispatch: Mutex::new(()),
        }
    }

    /// Threads a job runs on (workers + the caller).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Run `body(i)` for every `i < n`, on the pool's workers and the calling thread, and
    /// return when all have finished. Tasks are claimed in increasing order but may run
    /// in any order and concurrently. A panic in a task is resumed on the caller after
    /// every task has finished. Nested or concurrent calls run inline.
    pub fn run(&self, n: usize, body: &(dyn Fn(usize) + Sync)) {
        if n == 0 {
            return;
        }
        let guard = match self.dispatch.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if self.workers.is_empty() || n == 1 || guard.is_none() {
            (0..n).for_each(body);
            return;
        }
        let job = Job {
            body,
            n,
            next: AtomicUsize::new(0),
            remaining: AtomicUsize::new(n),
            panic: Mutex::new(None),
        };
        // SAFETY (lifetime erasure): workers obtain the reference only from `slot.job`
        // under the mutex, and count themselves in `slot.active` there. Before `job` goes
        // out of scope below, the reference is removed from the slot under the mutex and
        // this thread waits until `active` is zero, so no worker touches `job` afterwards.
        let r = JobRef((&job as *const Job<'_>).cast::<Job<'static>>());
        let parked = {
            let mut slot = self.lock();
            slot.job = Some(r);
            self.shared.epoch.fetch_add(1, Ordering::Release);
            slot.parked
        };
        if parked > 0 {
            self.shared.wake.notify_all();
        }
        job.work();
        while job.remaining.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        self.lock().job = None;
        while self.shared.active.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        drop(guard);
        if let Some(p) = job.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            resume_unwind(p);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.shared.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        {
            let _slot = self.lock();
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.epoch.fetch_add(1, Ordering::Release);
        }
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A worker's loop. It starts from epoch 0, the value before any job, not from the epoch
/// it finds when the thread first runs: a thread that starts late (after jobs, or after
/// shutdown) must still see every later change.
fn worker(s: &Shared) {
    let mut seen = 0;
    loop {
        // Spin for the next epoch, then park until it comes.
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if s.epoch.load(Ordering::Acquire) != seen {
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || start.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            let mut slot = s.slot.lock().unwrap_or_else(|e| e.into_inner());
            slot.parked += 1;
            while s.epoch.load(Ordering::Acquire) == seen && !s.shutdown.load(Ordering::Acquire) {
                slot = s.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            slot.parked -= 1;
            break;
        }
        seen = s.epoch.load(Ordering::Acquire);
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        let job = {
            let slot = s.slot.lock().unwrap_or_else(|e| e.into_inner());
            let job = slot.job;
            if job.is_some() {
                s.active.fetch_add(1, Ordering::AcqRel);
            }
            drop(slot);
            job
        };
        if let Some(JobRef(p)) = job {
            // SAFETY: see `SpinPool::run`: the job outlives this use.
            unsafe { &*p }.work();
            s.active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_exactly_once_across_many_jobs() {
        let pool = SpinPool::new(3, "test-pool");
        for n in [1usize, 2, 3, 7, 64, 1000] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            for _ in 0..50 {
                pool.run(n, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
            }
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 50),
                "n={n}"
            );
        }
    }

    /// A pool dropped right after creation, before its workers have first run, must still
    /// shut down (a worker that read its starting epoch late once parked forever).
    #[test]
    fn pools_shut_down_even_when_workers_start_late() {
        for _ in 0..200 {
            let pool = SpinPool::new(3, "test-pool");
            pool.run(4, &|_| {});
            drop(pool);
        }
    }

    #[test]
    fn work_is_shared_and_survives_parking() {
        let pool = SpinPool::new(2, "test-pool");
        let threads = Mutex::new(std::collections::HashSet::new());
        for round in 0..20 {
            pool.run(64, &|_| {
                threads.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(Duration::from_micros(200));
            });
            if round % 5 == 0 {
                // Long enough for the worker to park: the next job must wake it.
                std::thread::sleep(SPIN * 5);
            }
        }
        assert_eq!(threads.lock().unwrap().len(), 2, "both threads ran tasks");
    }

    #[test]
    fn nested_runs_inline_and_panics_reach_the_caller() {
        let pool = SpinPool::new(2, "test-pool");
        let total = AtomicUsize::new(0);
        pool.run(4, &|_| {
            pool.run(3, &|_| {
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 12);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(8, &|i| assert!(i != 5, "task five fails"));
        }));
        assert!(r.is_err(), "the task's panic reaches the caller");
        let after = AtomicUsize::new(0);
        pool.run(8, &|_| {
            after.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(after.load(Ordering::Relaxed), 8, "the pool still works");
    }
}
