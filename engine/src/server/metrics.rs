//! The server's Prometheus metrics (OpenMetrics text at `GET /metrics`), kept with `prometheus-client`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::service::Usage;

/// Every metric the server exports. Counters only grow; gauges are set from the
/// engine's KV budget state when scraped.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    queue_depth: Gauge,
    running: Gauge,
    kv_reserved: Gauge,
    kv_cached: Gauge,
    kv_budget: Gauge,
    /// Requests admitted (at once or from the queue).
    pub admissions: Counter,
    /// Requests refused, by kind (`never_fits`, `queue_full`, `bad_request`, `shutting_down`).
    pub refusals: Family<Vec<(String, String)>, Counter>,
    /// Requests whose new tokens were clamped to fit the KV budget.
    pub clamps: Counter,
    /// Requests cancelled because their client went away.
    pub cancellations: Counter,
    /// Tokens generated.
    pub tokens: Counter,
    /// Seconds from a request's arrival to its first token.
    pub ttft: Histogram,
    /// Seconds between consecutive tokens of one request.
    pub token_latency: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            queue_depth: Gauge::default(),
            running: Gauge::default(),
            kv_reserved: Gauge::default(),
            kv_cached: Gauge::default(),
            kv_budget: Gauge::default(),
            admissions: Counter::default(),
            refusals: Family::default(),
            clamps: Counter::default(),
            cancellations: Counter::default(),
            tokens: Counter::default(),
            ttft: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            token_latency: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            registry: Registry::default(),
        };
        registry.register(
            "genai_queue_depth",
            "Requests waiting in the FIFO queue for KV budget",
            m.queue_depth.clone(),
        );
        registry.register(
            "genai_running_requests",
            "Admitted requests running in the continuous batch",
            m.running.clone(),
        );
        registry.register(
            "genai_kv_reserved_bytes",
            "KV cache bytes reserved by admitted requests",
            m.kv_reserved.clone(),
        );
        registry.register(
            "genai_kv_cached_bytes",
            "KV cache bytes the prefix cache holds (evicted before anyone waits for bytes)",
            m.kv_cached.clone(),
        );
        registry.register(
            "genai_kv_budget_bytes",
            "The KV byte budget (limit)",
            m.kv_budget.clone(),
        );
        registry.register(
            "genai_admissions",
            "Requests admitted",
            m.admissions.clone(),
        );
        registry.register(
            "genai_refusals",
            "Requests refused, by kind",
            m.refusals.clone(),
        );
        registry.register(
            "genai_clamps",
            "Requests admitted with max_tokens clamped to the KV budget",
            m.clamps.clone(),
        );
        registry.register(
            "genai_cancellations",
            "Requests cancelled because the client disconnected",
            m.cancellations.clone(),
        );
        registry.register(
            "genai_tokens_generated",
            "Tokens generated",
            m.tokens.clone(),
        );
        registry.register(
            "genai_time_to_first_token_seconds",
            "Seconds from a request's arrival to its first token",
            m.ttft.clone(),
        );
        registry.register(
            "genai_time_per_output_token_seconds",
            "Seconds between consecutive tokens of a request",
            m.token_latency.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Count a refusal of `kind`.
    pub fn refused(&self, kind: &str) {
        self.refusals
            .get_or_create(&vec![("kind".to_string(), kind.to_string())])
            .inc();
    }

    /// The OpenMetrics text, with the gauges set from `usage` and the prefix cache's
    /// `cached_bytes` (part of `usage.used_bytes`; the reserved gauge leaves them out).
    pub fn render(&self, usage: &Usage, cached_bytes: u64) -> String {
        self.queue_depth.set(usage.queued as i64);
        self.running.set(usage.running as i64);
        self.kv_reserved
            .set(usage.used_bytes.saturating_sub(cached_bytes) as i64);
        self.kv_cached.set(cached_bytes as i64);
        self.kv_budget.set(usage.limit_bytes as i64);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}
