//! Admission against a shared KV byte budget: reservation, budget cap (clamp), refusal, running-batch limit and a FIFO wait queue.
//!
//! Every request is admitted here before any component runs. A request is
//! described by a [`Demand`]: the positions it will occupy in the KV cache
//! (prompt tokens, a continuing session's carried prefix, positions contributed
//! by application inputs such as image embeddings), how many token rows run
//! together, and how many new tokens it asks for. Admission reserves
//! `rows × (positions + max_new_tokens) × bytes_per_token` bytes up front.
//!
//! - If the whole reservation fits in the bytes available now, it is admitted.
//! - If only part fits but at least `rows × (positions + 1) × bytes_per_token`
//!   does, `max_new_tokens` is clamped to what fits and the admission carries a
//!   [`BudgetCap`].
//! - Below that the request is refused: [`AdmissionError::NeverFits`] when even
//!   an empty budget could not hold its minimum, [`AdmissionError::OverBudget`]
//!   when it fits the limit but not what is free now (a driver may queue it).
//!
//! The budget counts bytes; pages are the KV cache's business. Without KV
//! geometry (`bytes_per_token` is `None`) byte admission is a pass-through:
//! nothing is reserved and nothing is capped, but the running-batch limit still
//! applies.
//!
//! [`Scheduler`] is a cheap cloneable handle: all clones share one total.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// KV cache geometry of a decoder, enough to price one token position in bytes.
///
/// Read from the model's metadata (for GGUF Llama models: `llama.block_count`,
/// `llama.attention.head_count_kv`, the head dimension, and the KV element type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvGeometry {
    /// Number of transformer layers, each holding its own K and V.
    pub n_layers: usize,
    /// Number of KV heads per layer (fewer than query heads under GQA).
    pub n_kv_heads: usize,
    /// Elements per head vector.
    pub head_dim: usize,
    /// Bytes per stored K or V element (4 for f32, 2 for f16).
    pub elem_bytes: usize,
}

impl KvGeometry {
    /// Bytes one token position occupies in the KV cache:
    /// `2 (K and V) × n_layers × n_kv_heads × head_dim × elem_bytes`.
    ///
    /// # Errors
    /// [`ConfigError::ZeroGeometry`] if any field is zero (a geometry that
    /// prices tokens at zero bytes would silently disable the budget; use no
    /// geometry for that), [`ConfigError::GeometryOverflow`] if the product
    /// does not fit in `u64`.
    pub fn bytes_per_token(&self) -> Result<u64, ConfigError> {
        let fields = [
            ("n_layers", self.n_layers),
            ("n_kv_heads", self.n_kv_heads),
            ("head_dim", self.head_dim),
            ("elem_bytes", self.elem_bytes),
        ];
        let mut bytes: u64 = 2;
        for (field, value) in fields {
            if value == 0 {
                return Err(ConfigError::ZeroGeometry { field });
            }
            bytes = u64::try_from(value)
                .ok()
                .and_then(|v| bytes.checked_mul(v))
                .ok_or(ConfigError::GeometryOverflow { geometry: *self })?;
        }
        Ok(bytes)
    }
}

/// Configuration of a [`Scheduler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// The KV byte budget shared by every holder of the scheduler, in bytes.
    pub budget_bytes: u64,
    /// Bytes one token position costs (see [`KvGeometry::bytes_per_token`]);
    /// `None` makes byte admission a pass-through.
    pub bytes_per_token: Option<u64>,
    /// Running-batch limit: at most this many admitted requests at once (≥ 1).
    pub max_running: usize,
}

/// Invalid scheduler configuration or KV geometry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A KV geometry field is zero.
    #[error("KV geometry field `{field}` is 0; every field must be at least 1")]
    ZeroGeometry {
        /// Name of the zero field.
        field: &'static str,
    },
    /// The bytes-per-token product overflows `u64`.
    #[error(
        "KV geometry overflows u64 bytes per token: 2 x {} layers x {} kv_heads x {} head_dim x {} bytes",
        .geometry.n_layers, .geometry.n_kv_heads, .geometry.head_dim, .geometry.elem_bytes
    )]
    GeometryOverflow {
        /// The geometry at fault.
        geometry: KvGeometry,
    },
    /// `bytes_per_token` is `Some(0)`.
    #[error("bytes_per_token is 0; use no KV geometry (None) for a pass-through budget")]
    ZeroBytesPerToken,
    /// `max_running` is 0, so nothing could ever run.
    #[error("running-batch limit max_running is 0; it must be at least 1")]
    ZeroMaxRunning,
}

/// What a request will occupy in the KV cache, counted before any component runs.
///
/// Positions per row = `carried_prefix + prompt_tokens + extra_positions`;
/// the reservation is `rows × (positions + max_new_tokens) × bytes_per_token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    /// Prompt tokens of this turn, per row (the row length for token rows).
    pub prompt_tokens: usize,
    /// Tokens a continuing session carries from earlier turns (re-prefilled each turn).
    pub carried_prefix: usize,
    /// Token rows run as one batch (equal-length rows); at least 1.
    pub rows: usize,
    /// Positions contributed by application inputs (e.g. image embeddings),
    /// counted by the caller from the inputs' declared shapes.
    pub extra_positions: usize,
    /// New tokens requested, per row.
    pub max_new_tokens: usize,
    /// Positions of the prefix (carried or prompt) already in the KV cache's shared prefix
    /// cache ([`crate::prefix`]): held by the cache, so not reserved again (single-row
    /// requests; at most the positions).
    pub cached_prefix: usize,
}

impl Demand {
    /// A single-row request of `prompt_tokens` prompt tokens asking for
    /// `max_new_tokens` new tokens, with no carried prefix and no extra positions.
    pub fn prompt(prompt_tokens: usize, max_new_tokens: usize) -> Demand {
        Demand {
            prompt_tokens,
            carried_prefix: 0,
            rows: 1,
            extra_positions: 0,
            max_new_tokens,
            cached_prefix: 0,
        }
    }

    /// The same demand whose first `cached_prefix` positions the prefix cache holds.
    pub fn with_cached_prefix(self, cached_prefix: usize) -> Demand {
        Demand {
            cached_prefix,
            ..self
        }
    }

    /// The same demand with a continuing session's carried prefix, in tokens.
    pub fn with_carried_prefix(self, carried_prefix: usize) -> Demand {
        Demand {
            carried_prefix,
            ..self
        }
    }

    /// The same demand run as `rows` equal-length token rows.
    pub fn with_rows(self, rows: usize) -> Demand {
        Demand { rows, ..self }
    }

    /// The same demand with positions contributed by application inputs.
    pub fn with_extra_positions(self, extra_positions: usize) -> Demand {
        Demand {
            extra_positions,
            ..self
        }
    }
}

/// Identifies one admitted or queued request of one scheduler.
///
/// Ids are never reused; an id from another scheduler is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReservationId {
    scheduler: u64,
    seq: u64,
}

impl fmt::Display for ReservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reservation #{} of scheduler {}",
            self.seq, self.scheduler
        )
    }
}

/// A budget cap: the request was admitted with fewer new tokens than it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetCap {
    /// New tokens requested, per row.
    pub requested_tokens: usize,
    /// New tokens admitted, per row (≥ 1, < `requested_tokens`).
    pub admitted_tokens: usize,
    /// Bytes the full request would have reserved.
    pub requested_bytes: u64,
    /// Bytes actually reserved.
    pub admitted_bytes: u64,
    /// Bytes that were available when the request was admitted.
    pub available_bytes: u64,
}

impl fmt::Display for BudgetCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "budget cap: {} of {} new tokens admitted ({} of {} requested bytes reserved, {} bytes were available)",
            self.admitted_tokens,
            self.requested_tokens,
            self.admitted_bytes,
            self.requested_bytes,
            self.available_bytes
        )
    }
}

/// An admitted request: its reservation, and the new-token limit it must stop at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Pass to [`Scheduler::complete`] (on success and on failure) or [`Scheduler::cancel`].
    pub id: ReservationId,
    /// Bytes reserved (0 without KV geometry).
    pub reserved_bytes: u64,
    /// New tokens per row the request may generate (clamped if `budget_cap` is set).
    pub max_new_tokens: usize,
    /// Set when `max_new_tokens` was clamped to fit the budget.
    pub budget_cap: Option<BudgetCap>,
}

/// The numbers of a refusal on bytes, in bytes unless stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortfall {
    /// Bytes the full request would reserve.
    pub requested_bytes: u64,
    /// Bytes of the smallest admissible reservation (one new token per row).
    pub minimum_bytes: u64,
    /// Bytes reserved by running requests at the time of the refusal.
    pub used_bytes: u64,
    /// The budget limit.
    pub limit_bytes: u64,
    /// `limit_bytes - used_bytes`.
    pub available_bytes: u64,
    /// Bytes missing: `minimum_bytes - limit_bytes` for [`AdmissionError::NeverFits`],
    /// `minimum_bytes - available_bytes` for [`AdmissionError::OverBudget`].
    pub shortfall_bytes: u64,
    /// New tokens requested, per row.
    pub requested_tokens: usize,
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// Even an empty budget could not hold the request's minimum: refuse at once.
    #[error(
        "request can never fit the KV budget: it needs at least {} bytes (requested {} bytes for {} new tokens) \
         but the limit is {} bytes, short by {} bytes ({} bytes used, {} available); \
         use a larger KV budget, or fewer new tokens / a shorter prompt",
        .0.minimum_bytes, .0.requested_bytes, .0.requested_tokens, .0.limit_bytes,
        .0.shortfall_bytes, .0.used_bytes, .0.available_bytes
    )]
    NeverFits(Shortfall),
    /// The request fits the limit but not the bytes free now: it may wait.
    #[error(
        "KV budget cannot hold the request now: it needs at least {} bytes (requested {} bytes for {} new tokens), \
         {} of {} bytes are used, {} available, short by {} bytes; \
         wait for running requests to complete, use a larger KV budget, or fewer new tokens / a shorter prompt",
        .0.minimum_bytes, .0.requested_bytes, .0.requested_tokens, .0.used_bytes, .0.limit_bytes,
        .0.available_bytes, .0.shortfall_bytes
    )]
    OverBudget(Shortfall),
    /// The running-batch limit is reached.
    #[error(
        "running batch is full: {running} of {limit} requests running; wait for one to complete or raise the running-batch limit"
    )]
    BatchFull {
        /// Requests running now.
        running: usize,
        /// The running-batch limit.
        limit: usize,
    },
    /// Earlier requests are waiting in the queue; admitting this one would jump them.
    #[error(
        "{queued} earlier request(s) are waiting for KV budget; this request queues behind them (first in, first out)"
    )]
    QueuedAhead {
        /// Requests waiting in the queue.
        queued: usize,
    },
    /// `rows` is 0.
    #[error("request has 0 token rows; a request needs at least 1 row")]
    ZeroRows,
    /// The demand's size overflows `u64` bytes.
    #[error(
        "request size overflows u64 bytes: {rows} rows x ({carried_prefix} carried + {prompt_tokens} prompt + \
         {extra_positions} input positions + {max_new_tokens} new tokens) x {bytes_per_token} bytes per token"
    )]
    DemandOverflow {
        /// Token rows.
        rows: usize,
        /// Carried prefix tokens.
        carried_prefix: usize,
        /// Prompt tokens per row.
        prompt_tokens: usize,
        /// Positions from application inputs.
        extra_positions: usize,
        /// New tokens requested per row.
        max_new_tokens: usize,
        /// Bytes per token position.
        bytes_per_token: u64,
    },
}

impl AdmissionError {
    /// True for refusals that may succeed later without changing the request
    /// (`OverBudget`, `BatchFull`, `QueuedAhead`): a driver queues these.
    pub fn is_not_now(&self) -> bool {
        matches!(
            self,
            AdmissionError::OverBudget(_)
                | AdmissionError::BatchFull { .. }
                | AdmissionError::QueuedAhead { .. }
        )
    }
}

/// A release ([`Scheduler::complete`] or [`Scheduler::cancel`]) that cannot be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// The reservation was already completed or cancelled; nothing is credited twice.
    #[error("{0} was already released")]
    AlreadyReleased(ReservationId),
    /// The id was issued by a different scheduler.
    #[error("{0} belongs to a different scheduler")]
    Foreign(ReservationId),
    /// `complete` on a request that is still queued (use `cancel`).
    #[error("{0} is still queued, not admitted; cancel it instead of completing it")]
    NotAdmitted(ReservationId),
}

/// A snapshot of the scheduler's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Bytes reserved by running requests.
    pub used_bytes: u64,
    /// The budget limit, in bytes.
    pub limit_bytes: u64,
    /// Bytes per token position, `None` for a pass-through budget.
    pub bytes_per_token: Option<u64>,
    /// Admitted requests not yet completed or cancelled.
    pub running: usize,
    /// The running-batch limit.
    pub max_running: usize,
    /// Requests waiting in the FIFO queue.
    pub queued: usize,
}

/// Result of [`Scheduler::submit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// Admitted at once.
    Admitted(Admission),
    /// Waiting in the FIFO queue; [`Scheduler::admit_ready`] admits it later.
    Queued(ReservationId),
}

/// The shared admission state. Cloning yields another handle on the same budget.
#[derive(Debug, Clone)]
pub struct Scheduler {
    inner: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    config: SchedulerConfig,
    tag: u64,
    next_seq: u64,
    used_bytes: u64,
    /// Bytes of the prefix cache's pages (part of `used_bytes`).
    cached_bytes: u64,
    running: HashMap<u64, u64>,
    queue: VecDeque<(u64, Demand)>,
}

/// Distinguishes schedulers so an id cannot be released on the wrong one.
static NEXT_SCHEDULER_TAG: AtomicU64 = AtomicU64::new(1);

/// What an admissible request would reserve now.
struct Decision {
    reserved_bytes: u64,
    max_new_tokens: usize,
    budget_cap: Option<BudgetCap>,
}

impl State {
    /// Applies the admission rules to `d` against the current state, reserving nothing.
    fn decide(&self, d: &Demand) -> Result<Decision, AdmissionError> {
        if d.rows == 0 {
            return Err(AdmissionError::ZeroRows);
        }
        let Some(bpt) = self.config.bytes_per_token else {
            self.check_batch()?;
            return Ok(Decision {
                reserved_bytes: 0,
                max_new_tokens: d.max_new_tokens,
                budget_cap: None,
            });
        };
        let sizes = Sizes::of(d, bpt).ok_or(AdmissionError::DemandOverflow {
            rows: d.rows,
            carried_prefix: d.carried_prefix,
            prompt_tokens: d.prompt_tokens,
            extra_positions: d.extra_positions,
            max_new_tokens: d.max_new_tokens,
            bytes_per_token: bpt,
        })?;
        let limit = self.config.budget_bytes;
        let used = self.used_bytes;
        let available = limit - used;
        let shortfall = |missing: u64| Shortfall {
            requested_bytes: sizes.requested_bytes,
            minimum_bytes: sizes.minimum_bytes,
            used_bytes: used,
            limit_bytes: limit,
            available_bytes: available,
            shortfall_bytes: missing,
            requested_tokens: d.max_new_tokens,
        };
        if sizes.never_bytes > limit {
            return Err(AdmissionError::NeverFits(Shortfall {
                minimum_bytes: sizes.never_bytes,
                ..shortfall(sizes.never_bytes - limit)
            }));
        }
        self.check_batch()?;
        if sizes.requested_bytes <= available {
            return Ok(Decision {
                reserved_bytes: sizes.requested_bytes,
                max_new_tokens: d.max_new_tokens,
                budget_cap: None,
            });
        }
        if sizes.minimum_bytes > available {
            return Err(AdmissionError::OverBudget(shortfall(
                sizes.minimum_bytes - available,
            )));
        }
        // Partial fit: the largest new-token count whose reservation fits.
        // `available / (rows × bpt) ≥ positions + 1` because the minimum fits,
        // and `< positions + max_new_tokens` because the full request does not.
        let tokens_fitting = available / sizes.bytes_per_position;
        let admitted_tokens = tokens_fitting - sizes.positions;
        let admitted_bytes = (sizes.positions + admitted_tokens) * sizes.bytes_per_position;
        let admitted_tokens = usize::try_from(admitted_tokens)
            .expect("admitted tokens are below the requested usize count");
        Ok(Decision {
            reserved_bytes: admitted_bytes,
            max_new_tokens: admitted_tokens,
            budget_cap: Some(BudgetCap {
                requested_tokens: d.max_new_tokens,
                admitted_tokens,
                requested_bytes: sizes.requested_bytes,
                admitted_bytes,
                available_bytes: available,
            }),
        })
    }

    fn check_batch(&self) -> Result<(), AdmissionError> {
        if self.running.len() >= self.config.max_running {
            return Err(AdmissionError::BatchFull {
                running: self.running.len(),
                limit: self.config.max_running,
            });
        }
        Ok(())
    }

    fn reserve(&mut self, seq: u64, decision: Decision) -> Admission {
        self.used_bytes += decision.reserved_bytes;
        debug_assert!(self.used_bytes <= self.config.budget_bytes || decision.reserved_bytes == 0);
        self.running.insert(seq, decision.reserved_bytes);
        Admission {
            id: ReservationId {
                scheduler: self.tag,
                seq,
            },
            reserved_bytes: decision.reserved_bytes,
            max_new_tokens: decision.max_new_tokens,
            budget_cap: decision.budget_cap,
        }
    }

    fn issue_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn id(&self, seq: u64) -> ReservationId {
        ReservationId {
            scheduler: self.tag,
            seq,
        }
    }

    fn check_own(&self, id: ReservationId) -> Result<(), ReleaseError> {
        if id.scheduler != self.tag {
            return Err(ReleaseError::Foreign(id));
        }
        Ok(())
    }

    fn release_running(&mut self, seq: u64) -> bool {
        match self.running.remove(&seq) {
            Some(bytes) => {
                self.used_bytes -= bytes;
                true
            }
            None => false,
        }
    }
}

/// A demand's sizes in bytes for a given `bytes_per_token`, all checked.
struct Sizes {
    /// Positions per row before new tokens that the request adds (its cached prefix left
    /// out).
    positions: u64,
    /// The smallest reservation on an empty cache (the cached prefix counted): above the
    /// limit, the request can never fit.
    never_bytes: u64,
    /// `rows × bytes_per_token`: bytes one position costs across all rows.
    bytes_per_position: u64,
    requested_bytes: u64,
    minimum_bytes: u64,
}

impl Sizes {
    fn of(d: &Demand, bpt: u64) -> Option<Sizes> {
        let n = |v: usize| u64::try_from(v).ok();
        let all = n(d.carried_prefix)?
            .checked_add(n(d.prompt_tokens)?)?
            .checked_add(n(d.extra_positions)?)?;
        let positions = all - n(d.cached_prefix)?.min(all);
        let bytes_per_position = n(d.rows)?.checked_mul(bpt)?;
        let requested_tokens = positions.checked_add(n(d.max_new_tokens)?)?;
        // A request for 0 new tokens (prefill only) needs exactly its positions.
        let minimum_tokens = positions.checked_add(n(d.max_new_tokens.min(1))?)?;
        let never_tokens = all.checked_add(n(d.max_new_tokens.min(1))?)?;
        Some(Sizes {
            positions,
            never_bytes: never_tokens.checked_mul(bytes_per_position)?,
            bytes_per_position,
            requested_bytes: requested_tokens.checked_mul(bytes_per_position)?,
            minimum_bytes: minimum_tokens.checked_mul(bytes_per_position)?,
        })
    }
}

impl Scheduler {
    /// A scheduler with an empty budget of `config.budget_bytes` bytes.
    ///
    /// # Errors
    /// [`ConfigError::ZeroMaxRunning`], [`ConfigError::ZeroBytesPerToken`].
    pub fn new(config: SchedulerConfig) -> Result<Scheduler, ConfigError> {
        if config.max_running == 0 {
            return Err(ConfigError::ZeroMaxRunning);
        }
        if config.bytes_per_token == Some(0) {
            return Err(ConfigError::ZeroBytesPerToken);
        }
        Ok(Scheduler {
            inner: Arc::new(Mutex::new(State {
                config,
                tag: NEXT_SCHEDULER_TAG.fetch_add(1, Ordering::Relaxed),
                next_seq: 0,
                used_bytes: 0,
                cached_bytes: 0,
                running: HashMap::new(),
                queue: VecDeque::new(),
            })),
        })
    }

    /// A scheduler priced by `geometry` (`None`: pass-through byte admission).
    ///
    /// # Errors
    /// As [`KvGeometry::bytes_per_token`] and [`Scheduler::new`].
    pub fn with_geometry(
        budget_bytes: u64,
        geometry: Option<KvGeometry>,
        max_running: usize,
    ) -> Result<Scheduler, ConfigError> {
        let bytes_per_token = geometry.map(|g| g.bytes_per_token()).transpose()?;
        Scheduler::new(SchedulerConfig {
            budget_bytes,
            bytes_per_token,
            max_running,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is updated only after every check has passed, so a panic
        // while holding the lock cannot leave it half-updated.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Bytes one token position costs, `None` for a pass-through budget.
    pub fn bytes_per_token(&self) -> Option<u64> {
        self.lock().config.bytes_per_token
    }

    /// Admits `demand` now, reserving its bytes, or refuses it.
    ///
    /// A partial fit is clamped (see [`Admission::budget_cap`]). Requests
    /// already waiting in the queue are not jumped: while any wait, this
    /// refuses with [`AdmissionError::QueuedAhead`].
    ///
    /// # Errors
    /// Any [`AdmissionError`]; [`AdmissionError::is_not_now`] tells a
    /// refusal that may pass later from one that never will.
    pub fn admit(&self, demand: &Demand) -> Result<Admission, AdmissionError> {
        let mut state = self.lock();
        let decision = state.decide(demand)?;
        if !state.queue.is_empty() {
            return Err(AdmissionError::QueuedAhead {
                queued: state.queue.len(),
            });
        }
        let seq = state.issue_seq();
        Ok(state.reserve(seq, decision))
    }

    /// Puts `demand` at the back of the FIFO wait queue, whatever is free now.
    ///
    /// # Errors
    /// [`AdmissionError::NeverFits`], [`AdmissionError::ZeroRows`] and
    /// [`AdmissionError::DemandOverflow`]: a request that could never be
    /// admitted is refused at once rather than queued.
    pub fn enqueue(&self, demand: &Demand) -> Result<ReservationId, AdmissionError> {
        let mut state = self.lock();
        Self::enqueue_locked(&mut state, demand)
    }

    fn enqueue_locked(state: &mut State, demand: &Demand) -> Result<ReservationId, AdmissionError> {
        match state.decide(demand) {
            Ok(_) => {}
            Err(e) if e.is_not_now() => {}
            Err(e) => return Err(e),
        }
        let seq = state.issue_seq();
        state.queue.push_back((seq, *demand));
        Ok(state.id(seq))
    }

    /// Admits `demand` now if nothing is queued and it fits, queues it if it
    /// may fit later, and refuses it if it never can. One atomic step.
    ///
    /// # Errors
    /// As [`Scheduler::enqueue`].
    pub fn submit(&self, demand: &Demand) -> Result<Submitted, AdmissionError> {
        let mut state = self.lock();
        if state.queue.is_empty() {
            match state.decide(demand) {
                Ok(decision) => {
                    let seq = state.issue_seq();
                    return Ok(Submitted::Admitted(state.reserve(seq, decision)));
                }
                Err(e) if e.is_not_now() => {}
                Err(e) => return Err(e),
            }
        }
        Self::enqueue_locked(&mut state, demand).map(Submitted::Queued)
    }

    /// Admits queued requests in FIFO order while the head of the queue fits
    /// (clamping as [`Scheduler::admit`] does), and returns their admissions
    /// in that order. Stops at the first that does not fit: a later request
    /// never jumps an earlier one.
    pub fn admit_ready(&self) -> Vec<Admission> {
        let mut state = self.lock();
        let mut admitted = Vec::new();
        while let Some(&(seq, demand)) = state.queue.front() {
            let Ok(decision) = state.decide(&demand) else {
                // Only "not now" refusals reach the queue (checked at enqueue,
                // and the limit never changes): the head waits.
                break;
            };
            state.queue.pop_front();
            admitted.push(state.reserve(seq, decision));
        }
        admitted
    }

    /// How many of the running reservations must be released, in the order of `order`,
    /// before the head of the wait queue (or `demand` when nothing waits) is admissible:
    /// `Some(0)` if it is admissible now, `Some(k)` if releasing `order[..k]` admits it
    /// and `order[..k - 1]` does not, `None` if releasing all of `order` still does not
    /// (or the head can never be admitted). Reserves and releases nothing.
    ///
    /// `Retry-After` uses it with `order` sorted by the running requests' remaining steps:
    /// the `k`-th release is the one the queue waits for. Ids in `order` that are not
    /// running on this scheduler are skipped (they release nothing).
    pub fn releases_before_admission(
        &self,
        demand: &Demand,
        order: &[ReservationId],
    ) -> Option<usize> {
        let state = self.lock();
        let head = state.queue.front().map_or(*demand, |&(_, d)| d);
        let mut sim = State {
            config: state.config,
            tag: state.tag,
            next_seq: state.next_seq,
            // The prefix cache's pages are evicted before anyone waits for bytes.
            used_bytes: state.used_bytes - state.cached_bytes,
            cached_bytes: 0,
            running: state.running.clone(),
            queue: VecDeque::new(),
        };
        drop(state);
        let admissible = |s: &State| s.decide(&head).is_ok();
        if admissible(&sim) {
            return Some(0);
        }
        for (k, id) in order.iter().enumerate() {
            if id.scheduler == sim.tag {
                sim.release_running(id.seq);
            }
            if admissible(&sim) {
                return Some(k + 1);
            }
        }
        None
    }

    /// Releases an admitted request's reservation; call it after success and after failure.
    ///
    /// # Errors
    /// [`ReleaseError::AlreadyReleased`] on a second release (nothing is
    /// credited twice), [`ReleaseError::NotAdmitted`] for a queued request,
    /// [`ReleaseError::Foreign`] for another scheduler's id.
    pub fn complete(&self, id: ReservationId) -> Result<(), ReleaseError> {
        let mut state = self.lock();
        state.check_own(id)?;
        if state.release_running(id.seq) {
            return Ok(());
        }
        if state.queue.iter().any(|&(seq, _)| seq == id.seq) {
            return Err(ReleaseError::NotAdmitted(id));
        }
        Err(ReleaseError::AlreadyReleased(id))
    }

    /// [`Scheduler::complete`], keeping `keep_bytes` of the reservation (at most all of it)
    /// as the prefix cache's: the pages the request filled that the cache keeps.
    ///
    /// # Errors
    /// As [`Scheduler::complete`].
    pub fn complete_keeping(&self, id: ReservationId, keep_bytes: u64) -> Result<(), ReleaseError> {
        let mut state = self.lock();
        state.check_own(id)?;
        if let Some(&reserved) = state.running.get(&id.seq) {
            state.release_running(id.seq);
            let kept = keep_bytes.min(reserved);
            state.used_bytes += kept;
            state.cached_bytes += kept;
            return Ok(());
        }
        if state.queue.iter().any(|&(seq, _)| seq == id.seq) {
            return Err(ReleaseError::NotAdmitted(id));
        }
        Err(ReleaseError::AlreadyReleased(id))
    }

    /// The prefix cache gave up `bytes` of its pages (evicted): they are free again.
    pub fn release_cached(&self, bytes: u64) {
        let mut state = self.lock();
        let bytes = bytes.min(state.cached_bytes);
        state.cached_bytes -= bytes;
        state.used_bytes -= bytes;
    }

    /// Bytes the prefix cache holds (part of [`Usage::used_bytes`]).
    pub fn cached_bytes(&self) -> u64 {
        self.lock().cached_bytes
    }

    /// Whether `demand` (or, with requests waiting, the queue's head) is short of bytes now
    /// in a way evicting cached pages could help: it would be clamped or wait for bytes,
    /// though it fits the limit.
    pub fn short_of_bytes(&self, demand: &Demand) -> bool {
        let state = self.lock();
        if state.cached_bytes == 0 {
            return false;
        }
        let d = state.queue.front().map_or(*demand, |&(_, d)| d);
        match state.decide(&d) {
            Ok(decision) => decision.budget_cap.is_some(),
            Err(e) => matches!(e, AdmissionError::OverBudget(_)),
        }
    }

    /// Withdraws a queued request or releases a running one.
    ///
    /// # Errors
    /// [`ReleaseError::AlreadyReleased`] if it was already completed or
    /// cancelled, [`ReleaseError::Foreign`] for another scheduler's id.
    pub fn cancel(&self, id: ReservationId) -> Result<(), ReleaseError> {
        let mut state = self.lock();
        state.check_own(id)?;
        if state.release_running(id.seq) {
            return Ok(());
        }
        if let Some(pos) = state.queue.iter().position(|&(seq, _)| seq == id.seq) {
            state.queue.remove(pos);
            return Ok(());
        }
        Err(ReleaseError::AlreadyReleased(id))
    }

    /// A snapshot of used bytes, limit, running and queued counts.
    pub fn usage(&self) -> Usage {
        let state = self.lock();
        Usage {
            used_bytes: state.used_bytes,
            limit_bytes: state.config.budget_bytes,
            bytes_per_token: state.config.bytes_per_token,
            running: state.running.len(),
            max_running: state.config.max_running,
            queued: state.queue.len(),
        }
    }
}
