//! Kernel benchmarks: matvec weight bandwidth at the SmolLM2-135M shapes per SIMD path and thread count, beside plain memory-read bandwidth.
//!
//! Run with `cargo bench -p engine --bench kernels`. Every figure is a median over
//! repeated timed samples (a hand-rolled timer; each sample repeats the call until it
//! lasts at least 200 µs). "GB/s" is weight bytes read per second (10^9 bytes).
//!
//! Sections:
//! 1. memory read: summing a buffer of u64 with 1 and 2 threads, at 512 MiB (DRAM) and at
//!    96 MiB (about one decode step's weights; may sit in a large L3).
//! 2. matvec `[out, in]` for Q4_1, Q8_0, F32 at 576x576, 192x576, 1536x576, 576x1536,
//!    49152x576, per available path, 1 and 2 threads. Small matrices stay in cache when
//!    repeated, so their figures are cache bandwidth.
//! 3. decode sweep: one pass over the matrices of a 30-layer SmolLM2-135M (Q4_1 blocks,
//!    Q8_0 output head, ~96 MB, distinct buffers so nothing stays in L2), 1 and 2
//!    threads: the matvec-only time of one decoded token.
//! 4. batch sweep: the same matrices as one batched decode step's products
//!    ([`matmul`] over 1, 2, 4 and 8 activation rows), best path, 1 and 2 threads, with
//!    the Q4_1 matrices row-major and (on the paths that have the kernels) packed 16 rows
//!    to a block: time per step, rows per second, and the ratio to one row.
//! 5. quantize: activation rows of 576 and 1536 quantized to Q8_0 and Q8_1 blocks
//!    ([`Q8Activation::quantize_on`], what every quantized product does first) on the
//!    portable and the best path, 1 and 8 rows,
//!    beside a baseline in this file that rounds with `f32::round` (`roundf`, as ggml's
//!    reference quantizer does): thread CPU time per row and the ratio.
//! 6. attention: one decode row's attention over every layer of a SmolLM2-135M KV cache
//!    (30 layers, 9 query heads over 3 KV heads of 64) at 512 and 2048 positions, f32 and
//!    f16 storage, per available path, on one thread: unsplit ([`gqa_attention`]) and split
//!    into segments ([`decode_attention`]): thread CPU time per token and KV GB/s.

use engine::gguf::GgmlType;
use engine::kernels::attention::{decode_attention, gqa_attention};
use engine::kernels::matmul::packed::PackedWeights;
use engine::kernels::matmul::{Cpu, WeightMatrix, matmul, matvec, uses_packed};
use engine::kernels::{Isa, VecOps};
use engine::kv::{KvCache, KvConfig, KvDtype};
use engine::quant;
use engine::quant::Q8Activation;
use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

const SHAPES: [(usize, usize); 5] = [
    (576, 576),
    (192, 576),
    (1536, 576),
    (576, 1536),
    (49152, 576),
];
const TYPES: [GgmlType; 3] = [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F32];

/// CPU time consumed by the calling thread, in seconds (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Median wall-clock seconds and median calling-thread CPU seconds per call of `f`.
/// On a loaded machine the CPU-time figure of single-threaded work shows the kernel's
/// own speed, the wall-clock figure what the caller saw.
fn median_wall_cpu(mut f: impl FnMut(), budget: Duration) -> (f64, f64) {
    f();
    let t = Instant::now();
    f();
    let one = t.elapsed().as_secs_f64().max(1e-9);
    let reps = ((200e-6 / one).ceil() as usize).max(1);
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while wall.len() < 5 || (start.elapsed() < budget && wall.len() < 500) {
        let (t, c) = (Instant::now(), thread_cpu_secs());
        for _ in 0..reps {
            f();
        }
        cpu.push((thread_cpu_secs() - c) / reps as f64);
        wall.push(t.elapsed().as_secs_f64() / reps as f64);
    }
    wall.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    (wall[wall.len() / 2], cpu[cpu.len() / 2])
}

/// Deterministic pseudo-random floats in [-1, 1) (SplitMix64).
fn random_floats(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn sum_u64(v: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    for c in v.chunks_exact(8) {
        for k in 0..8 {
            acc[k] = acc[k].wrapping_add(c[k]);
        }
    }
    acc.iter().fold(0, |a, b| a.wrapping_add(*b))
}

/// For single-threaded work, the bandwidth per second of the thread's own CPU time.
fn cpu_note(threads: usize, bytes: f64, cpu_secs: f64) -> String {
    if threads == 1 && cpu_secs > 0.0 {
        format!("  [{:>7.2} GB/s per CPU-second]", bytes / cpu_secs / 1e9)
    } else {
        String::new()
    }
}

fn memory_read(cpus: &[Cpu]) {
    println!("== memory read (sum of u64), median");
    for mib in [512usize, 96] {
        let buf: Vec<u64> = (0..mib * 1024 * 1024 / 8).map(|i| i as u64).collect();
        let bytes = (buf.len() * 8) as f64;
        for cpu in cpus {
            let (t, c) = median_wall_cpu(
                || {
                    let s = if cpu.threads() == 1 {
                        sum_u64(&buf)
                    } else {
                        cpu.pool().install(|| {
                            buf.par_chunks(buf.len().div_ceil(cpu.threads()))
                                .map(sum_u64)
                                .reduce(|| 0, u64::wrapping_add)
                        })
                    };
                    black_box(s);
                },
                Duration::from_millis(600),
            );
            println!(
                "memread  {mib:>4} MiB  threads={}  {:>7.2} GB/s{}",
                cpu.threads(),
                bytes / t / 1e9,
                cpu_note(cpu.threads(), bytes, c)
            );
        }
    }
}

fn matvec_shapes() {
    println!("== matvec weight bandwidth, median GB/s (time per call)");
    let mats: Vec<(GgmlType, (usize, usize), Vec<u8>)> = TYPES
        .iter()
        .flat_map(|&ty| {
            SHAPES.iter().map(move |&(rows, cols)| {
                let w = random_floats(rows * cols, (rows * 31 + cols) as u64);
                (
                    ty,
                    (rows, cols),
                    quant::quantize(ty, &w).expect("supported type"),
                )
            })
        })
        .collect();
    for isa in Isa::available() {
        for threads in [1usize, 2] {
            let cpu = Cpu::new(threads, isa);
            for (ty, (rows, cols), data) in &mats {
                let m = WeightMatrix::new(*ty, *rows, *cols, data).expect("valid shape");
                let x = random_floats(*cols, 1);
                let mut y = vec![0.0f32; *rows];
                let (t, c) = median_wall_cpu(
                    || {
                        matvec(&cpu, &m, black_box(&x), &mut y);
                        black_box(&y);
                    },
                    Duration::from_millis(120),
                );
                println!(
                    "matvec {:<10} threads={threads} {:<4} {:>5}x{:<4} {:>7.2} GB/s  ({:>8.1} us){}",
                    isa.name(),
                    ty.name(),
                    rows,
                    cols,
                    data.len() as f64 / t / 1e9,
                    t * 1e6,
                    cpu_note(threads, data.len() as f64, c)
                );
            }
        }
    }
}

/// The weight matrices of a 30-layer SmolLM2-135M (Q4_1 blocks, Q8_0 output head),
/// each its own buffer.
fn model_matrices() -> Vec<(GgmlType, usize, usize, Vec<u8>)> {
    let layer: [(usize, usize); 7] = [
        (576, 576),
        (192, 576),
        (192, 576),
        (576, 576),
        (1536, 576),
        (1536, 576),
        (576, 1536),
    ];
    let mut mats: Vec<(GgmlType, usize, usize, Vec<u8>)> = Vec::new();
    for l in 0..30u64 {
        for (k, &(rows, cols)) in layer.iter().enumerate() {
            let w = random_floats(rows * cols, l * 7 + k as u64);
            let data = quant::quantize(GgmlType::Q4_1, &w).expect("Q4_1");
            mats.push((GgmlType::Q4_1, rows, cols, data));
        }
    }
    let head = random_floats(49152 * 576, 12345);
    mats.push((
        GgmlType::Q8_0,
        49152,
        576,
        quant::quantize(GgmlType::Q8_0, &head).expect("Q8_0"),
    ));
    mats
}

fn decode_sweep() {
    println!(
        "== decode sweep: 30 layers (Q4_1 q,k,v,o,gate,up,down) + Q8_0 head 49152x576, median"
    );
    let mats = model_matrices();
    let total: usize = mats.iter().map(|m| m.3.len()).sum();
    let views: Vec<WeightMatrix> = mats
        .iter()
        .map(|(ty, r, c, d)| WeightMatrix::new(*ty, *r, *c, d).expect("valid shape"))
        .collect();
    let x576 = random_floats(576, 2);
    let x1536 = random_floats(1536, 3);
    let mut y = vec![0.0f32; 49152];
    for isa in Isa::available() {
        for threads in [1usize, 2] {
            let cpu = Cpu::new(threads, isa);
            let (t, c) = median_wall_cpu(
                || {
                    for m in &views {
                        let x = if m.cols() == 576 { &x576 } else { &x1536 };
                        matvec(&cpu, m, x, &mut y[..m.rows()]);
                    }
                    black_box(&y);
                },
                Duration::from_millis(1500),
            );
            let per_cpu = if threads == 1 {
                format!("  [{:.1} ms CPU per token]", c * 1e3)
            } else {
                String::new()
            };
            println!(
                "sweep  {:<10} threads={threads}  {:.1} MB  {:>7.2} GB/s  {:>6.2} ms/token  ({:.0} tokens/s matvec-only){}{}",
                isa.name(),
                total as f64 / 1e6,
                total as f64 / t / 1e9,
                t * 1e3,
                1.0 / t,
                per_cpu,
                cpu_note(threads, total as f64, c)
            );
        }
    }
}

fn batch_sweep() {
    println!("== batch sweep: one batched decode step's products over n rows, best path, median");
    let mats = model_matrices();
    let views: Vec<WeightMatrix> = mats
        .iter()
        .map(|(ty, r, c, d)| WeightMatrix::new(*ty, *r, *c, d).expect("valid shape"))
        .collect();
    let isa = Isa::best();
    let packs: Vec<Option<PackedWeights>> = views
        .iter()
        .map(|w| {
            uses_packed(isa, w.ty())
                .then(|| PackedWeights::pack(w))
                .flatten()
        })
        .collect();
    let packed: Vec<WeightMatrix> = views
        .iter()
        .zip(&packs)
        .map(|(w, p)| p.as_ref().map_or(*w, |p| w.with_packed(p)))
        .collect();
    let x576 = random_floats(8 * 576, 2);
    let x1536 = random_floats(8 * 1536, 3);
    let mut y = vec![0.0f32; 8 * 49152];
    let layouts: &[(&str, &[WeightMatrix])] = if packs.iter().any(Option::is_some) {
        &[("row-major", &views), ("packed", &packed)]
    } else {
        &[("row-major", &views)]
    };
    for &(layout, mats) in layouts {
        for threads in [1usize, 2] {
            let cpu = Cpu::new(threads, isa);
            let mut one = None;
            for n in [1usize, 2, 4, 8] {
                let (t, c) = median_wall_cpu(
                    || {
                        for m in mats {
                            let x = if m.cols() == 576 { &x576 } else { &x1536 };
                            matmul(&cpu, m, &x[..n * m.cols()], n, &mut y[..n * m.rows()]);
                        }
                        black_box(&y);
                    },
                    Duration::from_millis(1500),
                );
                let head = mats.last().expect("the head is the last matrix");
                let (th, ch) = median_wall_cpu(
                    || {
                        matmul(&cpu, head, &x576[..n * 576], n, &mut y[..n * head.rows()]);
                        black_box(&y);
                    },
                    Duration::from_millis(500),
                );
                // One thread: times from the thread's CPU time (steady on a loaded machine).
                let (t, th) = if threads == 1 { (c, ch) } else { (t, th) };
                let rate = n as f64 / t;
                let one = *one.get_or_insert(rate);
                println!(
                    "batch  {:<10} {layout:<9} threads={threads}  n={n}  {:>6.2} ms/step{} (head {:>5.2})  {:>6.0} rows/s  ({:.2}x one row)",
                    isa.name(),
                    t * 1e3,
                    if threads == 1 { " CPU" } else { "" },
                    th * 1e3,
                    rate,
                    rate / one
                );
            }
        }
    }
}

/// ggml's `quantize_row_q8_0_ref` rounding with `roundf`, the scales left unrounded: the
/// baseline of the quantize section (the scalar loop the engine used before).
fn quantize_roundf(x: &[f32], q: &mut [i8], d: &mut [f32]) {
    for ((xb, qb), db) in x.chunks_exact(32).zip(q.chunks_exact_mut(32)).zip(d) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        *db = amax / 127.0;
        let id = if *db != 0.0 { 1.0 / *db } else { 0.0 };
        for (qi, &xi) in qb.iter_mut().zip(xb) {
            *qi = (xi * id).round() as i8;
        }
    }
}

fn quantize_sweep() {
    println!(
        "== quantize: activation rows to 8-bit blocks, 1 thread, median thread CPU time per row"
    );
    for cols in [576usize, 1536] {
        for rows in [1usize, 8] {
            let x = random_floats(rows * cols, 7);
            let (mut q, mut d) = (vec![0i8; rows * cols], vec![0.0f32; rows * cols / 32]);
            let (_, base) = median_wall_cpu(
                || {
                    quantize_roundf(&x, &mut q, &mut d);
                    black_box((&q, &d));
                },
                Duration::from_millis(500),
            );
            let mut paths = vec![Isa::Portable];
            if Isa::best() != Isa::Portable {
                paths.push(Isa::best());
            }
            for (ty, isa) in [GgmlType::Q8_0, GgmlType::Q8_1]
                .into_iter()
                .flat_map(|t| paths.iter().map(move |&i| (t, i)))
            {
                let mut act = Q8Activation::new();
                let (_, c) = median_wall_cpu(
                    || {
                        act.quantize_on(isa, ty, &x, rows, cols);
                        black_box(&act);
                    },
                    Duration::from_millis(500),
                );
                println!(
                    "quantize {ty:<5} {:<10} cols={cols:<5} rows={rows}  {:>7.0} ns/row  (roundf baseline {:>7.0} ns/row, {:.2}x faster)",
                    isa.name(),
                    c / rows as f64 * 1e9,
                    base / rows as f64 * 1e9,
                    base / c
                );
            }
        }
    }
}

fn attention_sweep() {
    println!(
        "== decode attention: one row over 30 layers (9 heads / 3 KV heads of 64), 1 thread, median"
    );
    let (layers, n_kv, d, n_heads) = (30usize, 3usize, 64usize, 9usize);
    let q = random_floats(n_heads * d, 11);
    let mut out = vec![0.0f32; n_heads * d];
    let mut scratch = Vec::new();
    for len in [512usize, 2048] {
        for dtype in [KvDtype::F32, KvDtype::F16] {
            let mut cache = KvCache::new(KvConfig {
                n_layers: layers,
                n_kv_heads: n_kv,
                head_dim: d,
                page_tokens: 16,
                max_pages: len.div_ceil(16),
                dtype,
            })
            .expect("valid config");
            let seq = cache.create_sequence();
            cache.grow(seq, len).expect("room");
            for l in 0..layers {
                let k = random_floats(len * n_kv * d, 100 + l as u64);
                let v = random_floats(len * n_kv * d, 200 + l as u64);
                for p in 0..len {
                    let r = p * n_kv * d..(p + 1) * n_kv * d;
                    cache
                        .write(seq, l, p, &k[r.clone()], &v[r])
                        .expect("in range");
                }
            }
            let bytes = (cache.bytes_per_token() * len) as f64;
            for ops in VecOps::available() {
                cache.set_ops(ops);
                for split in [false, true] {
                    let (_, c) = median_wall_cpu(
                        || {
                            for l in 0..layers {
                                let view = cache.layer(seq, l);
                                let f = if split {
                                    decode_attention
                                } else {
                                    gqa_attention
                                };
                                f(
                                    &q,
                                    &view,
                                    0,
                                    len,
                                    n_heads,
                                    0.125,
                                    None,
                                    &mut out,
                                    &mut scratch,
                                );
                            }
                            black_box(&out);
                        },
                        Duration::from_millis(800),
                    );
                    println!(
                        "attention  {len:>5} positions  {:<4} {:<10} {:<8}  {:>6.3} ms CPU per token  {:>6.2} GB/s of KV per CPU-second",
                        format!("{dtype:?}").to_lowercase(),
                        ops.isa().name(),
                        if split { "split" } else { "unsplit" },
                        c * 1e3,
                        bytes / c / 1e9
                    );
                }
            }
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument selects sections by name.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |s: &str| args.is_empty() || args.iter().any(|a| a == s);
    println!(
        "paths available: {:?}",
        Isa::available()
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
    );
    if want("memread") {
        memory_read(&[Cpu::new(1, Isa::best()), Cpu::new(2, Isa::best())]);
    }
    if want("matvec") {
        matvec_shapes();
    }
    if want("sweep") {
        decode_sweep();
    }
    if want("batch") {
        batch_sweep();
    }
    if want("quantize") {
        quantize_sweep();
    }
    if want("attention") {
        attention_sweep();
    }
}
