//! A fixed number of worker threads over a list of jobs: results in the list's order, and no
//! new job once one has failed.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Runs `job(i)` for every `i` in `0..n` on up to `workers` threads at once (at least one),
/// each worker taking the next job in order when it is free. Once a job has returned `Err`
/// no further job starts (those going on run to their end). Returns every job's result at
/// its index, `None` for a job that never started. A panicking job panics the caller.
pub fn run_in_order<T, E, F>(n: usize, workers: usize, job: F) -> Vec<Option<Result<T, E>>>
where
    T: Send,
    E: Send,
    F: Fn(usize) -> Result<T, E> + Sync,
{
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<T, E>>>> = Mutex::new((0..n).map(|_| None).collect());
    let worker = || {
        loop {
            let i = next.fetch_add(1, Ordering::SeqCst);
            if i >= n || failed.load(Ordering::SeqCst) {
                return;
            }
            let res = job(i);
            if res.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(res);
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, n.max(1)) {
            scope.spawn(worker);
        }
    });
    results.into_inner().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn every_job_runs_and_its_result_keeps_its_place() {
        let got = run_in_order(5, 3, |i| Ok::<usize, ()>(i * 10));
        assert_eq!(got, (0..5).map(|i| Some(Ok(i * 10))).collect::<Vec<_>>());
        assert_eq!(run_in_order(0, 2, Ok::<usize, ()>), Vec::new());
    }

    #[test]
    fn no_job_starts_after_one_has_failed() {
        let got = run_in_order(5, 1, |i| if i == 1 { Err(i) } else { Ok(i) });
        assert_eq!(got, vec![Some(Ok(0)), Some(Err(1)), None, None, None]);
    }

    #[test]
    fn two_workers_run_two_jobs_at_once_and_never_three() {
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let got = run_in_order(4, 2, |_| {
            let at = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(at, Ordering::SeqCst);
            // Wait (up to 5 s) until another job runs beside this one, or the last is done.
            let deadline = Instant::now() + Duration::from_secs(5);
            while most.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            now.fetch_sub(1, Ordering::SeqCst);
            Ok::<(), ()>(())
        });
        assert_eq!(got.len(), 4);
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}
