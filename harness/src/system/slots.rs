//! A bound on how many children the harness runs at once, shared by every thread of the
//! process: `-j N` over several batteries run side by side.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::system::interrupt::{self, Interrupted};

/// How long a thread waiting for a slot sleeps before it looks for a signal again.
const WAKE: Duration = Duration::from_millis(25);

/// Slots for children: at most `limit` taken at once, or any number with no limit.
#[derive(Debug)]
pub struct Slots {
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug)]
struct State {
    limit: Option<usize>,
    taken: usize,
}

/// One taken slot; given back when dropped.
#[derive(Debug)]
#[must_use = "the slot is given back as soon as it is dropped"]
pub struct Slot<'s> {
    slots: &'s Slots,
}

/// The slots of every child [`crate::system::runner::Runner`] starts; no limit unless a
/// command sets one ([`limit_children`]).
pub static CHILDREN: Slots = Slots::new();

impl Slots {
    /// Slots with no limit.
    pub const fn new() -> Slots {
        Slots {
            state: Mutex::new(State {
                limit: None,
                taken: 0,
            }),
            freed: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the limit (`None`: none; `Some(0)` counts as 1). Slots already taken stay
    /// taken; waiting threads look again.
    pub fn set_limit(&self, limit: Option<usize>) {
        self.state().limit = limit.map(|n| n.max(1));
        self.freed.notify_all();
    }

    /// Takes a slot, waiting while the limit's worth are taken. Errors: [`Interrupted`]
    /// when a signal asked the harness to stop while it waited.
    pub fn take(&self) -> Result<Slot<'_>, Interrupted> {
        let mut state = self.state();
        while state.limit.is_some_and(|l| state.taken >= l) {
            if interrupt::requested() {
                return Err(Interrupted);
            }
            state = self
                .freed
                .wait_timeout(state, WAKE)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        state.taken += 1;
        Ok(Slot { slots: self })
    }

    /// How many slots are taken now.
    pub fn taken(&self) -> usize {
        self.state().taken
    }
}

impl Default for Slots {
    fn default() -> Slots {
        Slots::new()
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots.state().taken -= 1;
        self.slots.freed.notify_one();
    }
}

/// Limits [`CHILDREN`] to `n` at once until the returned guard is dropped (then no limit).
pub fn limit_children(n: usize) -> ChildLimit {
    CHILDREN.set_limit(Some(n));
    ChildLimit
}

/// Lifts the limit [`limit_children`] set when dropped.
#[derive(Debug)]
#[must_use = "the limit is lifted as soon as it is dropped"]
pub struct ChildLimit;

impl Drop for ChildLimit {
    fn drop(&mut self) {
        CHILDREN.set_limit(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `threads` threads each hold a slot of `slots` for a while; the most held at once.
    fn most_at_once(slots: &Slots, threads: usize) -> usize {
        let now = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let _slot = slots.take().unwrap();
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(30));
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        most.load(Ordering::SeqCst)
    }

    #[test]
    fn no_more_than_the_limit_are_taken_at_once() {
        let slots = Slots::new();
        slots.set_limit(Some(2));
        assert_eq!(most_at_once(&slots, 6), 2);
        assert_eq!(slots.taken(), 0, "every slot is given back");
    }

    #[test]
    fn without_a_limit_every_thread_takes_one_at_once() {
        let slots = Slots::new();
        assert_eq!(most_at_once(&slots, 4), 4);
    }

    #[test]
    fn lifting_the_limit_frees_a_waiting_thread() {
        let slots = Slots::new();
        slots.set_limit(Some(1));
        let held = slots.take().unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| slots.take().map(|_| ()));
            std::thread::sleep(Duration::from_millis(50));
            assert!(!waiter.is_finished(), "waits while the one slot is held");
            slots.set_limit(None);
            waiter.join().unwrap().unwrap();
        });
        drop(held);
        assert_eq!(slots.taken(), 0);
    }
}
