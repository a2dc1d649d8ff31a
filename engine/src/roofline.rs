//! The roofline of `genai bench`: achieved weight bandwidth and arithmetic rate beside this machine's measured limits.
//!
//! Decode reads every weight once per token, so its ceiling is memory read bandwidth;
//! prefill reuses each weight across the prompt's rows, so its ceiling is the multiply-add
//! rate of the SIMD path the matrix products take. [`measure_memory_read`] and
//! [`measure_peak`] measure both limits on the bench's own thread pool;
//! [`decode_weight_bytes`] and [`prefill_flops`] give the work from the model's shapes;
//! [`Roofline::lines`] formats the two lines `genai bench` prints.

use std::hint::black_box;
use std::time::Instant;

use crate::isa::Isa;
use crate::kernels::matmul::Cpu;
use crate::model::{LlamaConfig, MatrixRef, Weights};

/// Gigabytes (10^9 bytes) per second moved by `bytes` in `secs` seconds.
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

/// Bytes of one stored weight matrix: `rows × cols / block_len × block_bytes` of its GGML type.
pub fn matrix_bytes(m: &MatrixRef) -> u64 {
    (m.rows * m.cols / m.ty.block_len() * m.ty.block_bytes()) as u64
}

/// Weight bytes one decode step reads: every block's projections (Q, K, V, output,
/// gate, up, down; fused or not) and its norm and bias vectors (f32), the final norm, the whole LM head, and
/// one row of the token embedding. KV cache reads are not counted (they grow with the
/// context; this is the weights' share of the memory traffic).
pub fn decode_weight_bytes(w: &Weights) -> u64 {
    let layers: u64 = w
        .layers
        .iter()
        .map(|l| {
            l.matrices().into_iter().map(matrix_bytes).sum::<u64>()
                + l.norms().iter().map(|n| n.len() as u64 * 4).sum::<u64>()
        })
        .sum();
    let embd_row = matrix_bytes(&w.token_embd) / w.token_embd.rows.max(1) as u64;
    layers + matrix_bytes(&w.lm_head) + (w.output_norm.len() * 4) as u64 + embd_row
}

/// Floating-point operations (2 per multiply-add) of a prefill of `n` prompt tokens from
/// position 0 that returns the last position's logits, counted from the shapes of `cfg`:
///
/// ```text
/// per token and layer, projections: 2·hidden·(q_width + 2·kv_width)   Q, K, V
///                                   + 2·q_width·hidden                 output
///                                   + 2·3·hidden·ffn                   gate, up, down
/// per layer, attention:             4·n_heads·head_dim · n(n+1)/2      q·k and p·v over
///                                                                      the causal window
/// once, LM head of the last row:    2·hidden·vocab
/// ```
///
/// Norms, RoPE, softmax and SwiGLU (a few operations per element) are left out: at these
/// shapes they are well under 1% of the total.
pub fn prefill_flops(cfg: &LlamaConfig, n: usize) -> u64 {
    let (h, q, kv, f) = (
        cfg.hidden as u64,
        cfg.q_width() as u64,
        cfg.kv_width() as u64,
        cfg.ffn as u64,
    );
    let n = n as u64;
    let proj = 2 * h * (q + 2 * kv) + 2 * q * h + 2 * 3 * h * f;
    let attn = 4 * cfg.n_heads as u64 * cfg.head_dim as u64 * (n * (n + 1) / 2);
    cfg.n_layers as u64 * (n * proj + attn) + 2 * h * cfg.vocab as u64
}

/// The median of `v` (mean of the middle two for an even count); `NaN` when empty.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// This CPU's last-level cache in bytes, from `/sys/devices/system/cpu/cpu0/cache` (the
/// highest `level`), or `None` where the kernel does not say.
pub fn last_level_cache_bytes() -> Option<u64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let mut best: Option<(u32, u64)> = None;
    for e in dir.flatten() {
        let p = e.path();
        // Entries other than `index*` (e.g. `uevent`) have no level: skip them.
        let (Ok(level), Ok(size)) = (
            std::fs::read_to_string(p.join("level")),
            std::fs::read_to_string(p.join("size")),
        ) else {
            continue;
        };
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_cache_size(size.trim()))
        else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, s)| s)
}

/// `"307200K"` → 314572800; `"4M"`, `"512"` (bytes) likewise; `None` for anything else.
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let (num, mul) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1024),
        b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mul)
}

/// A measured memory read bandwidth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryRead {
    /// Median bytes per second over the repetitions.
    pub bytes_per_sec: f64,
    /// Size of the buffer read, bytes.
    pub buffer_bytes: u64,
    /// Threads that read it (each a contiguous share).
    pub threads: usize,
    /// Timed repetitions.
    pub reps: usize,
}

/// The buffer [`measure_memory_read`] streams: 4 × the last-level cache, at least 256 MiB
/// and at most 2 GiB (64 MiB of LLC assumed when the kernel does not report it).
pub fn read_buffer_bytes(llc: Option<u64>) -> u64 {
    const MIB: u64 = 1024 * 1024;
    (4 * llc.unwrap_or(64 * MIB)).clamp(256 * MIB, 2048 * MIB)
}

fn sum_u64(v: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = v.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            acc[k] = acc[k].wrapping_add(c[k]);
        }
    }
    tail.iter()
        .chain(acc.iter())
        .fold(0, |a, b| a.wrapping_add(*b))
}

/// Stream-read a buffer of `buffer_bytes` (see [`read_buffer_bytes`]) with every thread of
/// `cpu`'s pool, each summing its own contiguous share, `reps` times after one untimed
/// pass; the median of the timed passes.
pub fn measure_memory_read(cpu: &Cpu, buffer_bytes: u64, reps: usize) -> MemoryRead {
    let buf = vec![1u64; (buffer_bytes / 8) as usize];
    let threads = cpu.threads();
    let share = buf.len().div_ceil(threads);
    let pass = || {
        cpu.pool().broadcast(|ctx| {
            let lo = (ctx.index() * share).min(buf.len());
            let hi = (lo + share).min(buf.len());
            black_box(sum_u64(black_box(&buf[lo..hi])));
        });
    };
    pass();
    let times: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            pass();
            t.elapsed().as_secs_f64()
        })
        .collect();
    MemoryRead {
        bytes_per_sec: (buf.len() * 8) as f64 / median(times),
        buffer_bytes: (buf.len() * 8) as u64,
        threads,
        reps: reps.max(1),
    }
}

/// A measured multiply-add peak of one SIMD path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    /// The path measured.
    pub isa: Isa,
    /// The instruction sequence of the loop (the one the path's quantized dot products use).
    pub instruction: &'static str,
    /// Median operations per second (2 per multiply-add), all threads together.
    pub ops_per_sec: f64,
    /// Threads that ran the loop at once.
    pub threads: usize,
}

/// Multiply-adds of one call of the peak loop for `isa`, per thread.
fn peak_loop(isa: Isa, iters: u64) -> u64 {
    match isa {
        // SAFETY: `Cpu::new` only keeps a path `Isa::supported` confirmed.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => unsafe { x86::vnni(iters) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::avx512bw(iters) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::avx2(iters) },
        _ => portable(iters),
    }
}

/// The instruction sequence [`peak_loop`] runs for `isa`.
pub fn peak_instruction(isa: Isa) -> &'static str {
    match isa {
        Isa::Avx512Vnni => "int8 vpdpbusd zmm",
        Isa::Avx512 => "int8 vpmaddubsw+vpmaddwd zmm",
        Isa::Avx2 => "int8 vpmaddubsw+vpmaddwd ymm",
        Isa::Portable => "i32 multiply-add in plain Rust",
    }
}

/// The portable path's loop: 8 independent i32 multiply-add chains in plain Rust.
fn portable(iters: u64) -> u64 {
    let a: [i32; 8] = black_box([3, -5, 7, 11, -13, 17, 19, -23]);
    let mut acc = [0i32; 8];
    for _ in 0..iters {
        for k in 0..8 {
            acc[k] = acc[k].wrapping_add(a[k].wrapping_mul(a[(k + 1) & 7]));
        }
        black_box(&mut acc);
    }
    black_box(acc);
    iters * 8
}

/// Run the peak loop of `cpu`'s path on every thread of its pool at once for about 20 ms,
/// `reps` times after one untimed run; the median rate.
pub fn measure_peak(cpu: &Cpu, reps: usize) -> Peak {
    let isa = cpu.isa();
    // Calibrate: iterations for about 20 ms on one thread.
    let mut iters = 1u64 << 12;
    loop {
        let t = Instant::now();
        peak_loop(isa, iters);
        let s = t.elapsed().as_secs_f64();
        if s > 0.005 || iters >= 1 << 40 {
            iters = ((iters as f64) * 0.02 / s.max(1e-9)).max(1.0) as u64;
            break;
        }
        iters *= 4;
    }
    let threads = cpu.threads();
    let run = || {
        let t = Instant::now();
        let macs: u64 = cpu
            .pool()
            .broadcast(|_| peak_loop(isa, iters))
            .into_iter()
            .sum();
        2.0 * macs as f64 / t.elapsed().as_secs_f64()
    };
    run();
    let rates: Vec<f64> = (0..reps.max(1)).map(|_| run()).collect();
    Peak {
        isa,
        instruction: peak_instruction(isa),
        ops_per_sec: median(rates),
        threads,
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::incompatible_msrv)]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// 12 independent accumulators: enough to cover the latency of two ports.
    const CHAINS: usize = 12;

    /// # Safety
    /// The CPU must support AVX-512 VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn vnni(iters: u64) -> u64 {
        let u = _mm512_set1_epi8(black_box(3));
        let s = _mm512_set1_epi8(black_box(-2));
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_dpbusd_epi32(*a, u, s);
            }
        }
        black_box(acc);
        iters * (CHAINS as u64) * 64
    }

    /// # Safety
    /// The CPU must support AVX-512 F and BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn avx512bw(iters: u64) -> u64 {
        let u = _mm512_set1_epi8(black_box(3));
        let s = _mm512_set1_epi8(black_box(-2));
        let ones = _mm512_set1_epi16(1);
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_add_epi32(*a, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), ones));
            }
        }
        black_box(acc);
        iters * (CHAINS as u64) * 64
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn avx2(iters: u64) -> u64 {
        let u = _mm256_set1_epi8(black_box(3));
        let s = _mm256_set1_epi8(black_box(-2));
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
            }
        }
        black_box(acc);
        iters * (CHAINS as u64) * 32
    }
}

/// Everything the two roofline lines of `genai bench` report.
#[derive(Debug, Clone, PartialEq)]
pub struct Roofline {
    /// Weight bytes read per decode step ([`decode_weight_bytes`]).
    pub weight_bytes: u64,
    /// Median decode tokens per second.
    pub decode_tokens_per_sec: f64,
    /// The measured memory read.
    pub memory: MemoryRead,
    /// Prompt tokens of the prefill.
    pub prompt_tokens: usize,
    /// Operations of that prefill ([`prefill_flops`]).
    pub prefill_flops: u64,
    /// Median prefill tokens per second.
    pub prefill_tokens_per_sec: f64,
    /// The measured peak of the chosen path.
    pub peak: Peak,
}

impl Roofline {
    /// Achieved weight bandwidth of decode, bytes per second.
    pub fn decode_bytes_per_sec(&self) -> f64 {
        self.weight_bytes as f64 * self.decode_tokens_per_sec
    }

    /// Achieved prefill rate, operations per second: the prefill's operations over its time
    /// (`prompt_tokens / tokens_per_sec` seconds).
    pub fn prefill_ops_per_sec(&self) -> f64 {
        self.prefill_flops as f64 * self.prefill_tokens_per_sec / self.prompt_tokens as f64
    }

    /// The two lines `genai bench` prints (no trailing newline).
    pub fn lines(&self) -> String {
        let d = self.decode_bytes_per_sec();
        let p = self.prefill_ops_per_sec();
        format!(
            "roofline decode   {:7.2} GB/s of weights ({:.1} MB x {:.1} tok/s) = {:5.1}% of the measured memory read {:.2} GB/s ({} threads, {} MiB buffer, median of {})\n\
             roofline prefill  {:7.2} GFLOP/s ({:.1} MFLOP per token at {} tokens) = {:5.1}% of the measured {} peak {:.1} GFLOP/s ({} loop, {} threads)",
            d / 1e9,
            self.weight_bytes as f64 / 1e6,
            self.decode_tokens_per_sec,
            100.0 * d / self.memory.bytes_per_sec,
            self.memory.bytes_per_sec / 1e9,
            self.memory.threads,
            self.memory.buffer_bytes / (1024 * 1024),
            self.memory.reps,
            p / 1e9,
            self.prefill_flops as f64 / self.prompt_tokens as f64 / 1e6,
            self.prompt_tokens,
            100.0 * p / self.peak.ops_per_sec,
            self.peak.isa,
            self.peak.ops_per_sec / 1e9,
            self.peak.instruction,
            self.peak.threads,
        )
    }

    /// The figures as JSON (for `genai bench --json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "weight_bytes_per_token": self.weight_bytes,
            "decode_weight_gb_per_sec": self.decode_bytes_per_sec() / 1e9,
            "memory_read_gb_per_sec": self.memory.bytes_per_sec / 1e9,
            "memory_read_buffer_bytes": self.memory.buffer_bytes,
            "prefill_flops": self.prefill_flops,
            "prefill_gflop_per_sec": self.prefill_ops_per_sec() / 1e9,
            "peak_isa": self.peak.isa.name(),
            "peak_instruction": self.peak.instruction,
            "peak_gflop_per_sec": self.peak.ops_per_sec / 1e9,
        })
    }
}
