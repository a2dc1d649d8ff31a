//! Grouped-query attention over a KV window against an f64 reference written here, on every
//! SIMD path the CPU supports.

use engine::kernels::VecOps;
use engine::kernels::attention::{ContiguousKv, gqa_attention};
use proptest::prelude::*;

/// Plain attention in f64: `out_h = Σ_p softmax_p(cap(q_h·K[p, h/g] * scale)) V[p, h/g]`.
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    n_heads: usize,
    n_kv: usize,
    d: usize,
    lo: usize,
    hi: usize,
    scale: f32,
    cap: Option<f32>,
) -> Vec<f64> {
    let group = n_heads / n_kv;
    let mut out = vec![0.0f64; n_heads * d];
    for h in 0..n_heads {
        let kvh = h / group;
        let row = |p: usize| (p * n_kv + kvh) * d;
        let scores: Vec<f64> = (lo..hi)
            .map(|p| {
                let dot: f64 = (0..d)
                    .map(|i| q[h * d + i] as f64 * k[row(p) + i] as f64)
                    .sum();
                let s = dot * scale as f64;
                match cap {
                    Some(c) => c as f64 * (s / c as f64).tanh(),
                    None => s,
                }
            })
            .collect();
        let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
        let z: f64 = e.iter().sum();
        for (j, p) in (lo..hi).enumerate() {
            for i in 0..d {
                out[h * d + i] += e[j] / z * v[row(p) + i] as f64;
            }
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Case {
    n_kv: usize,
    group: usize,
    d: usize,
    lo: usize,
    hi: usize,
    scale: f32,
    cap: Option<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn case() -> impl Strategy<Value = Case> {
    // Groups above 8 heads take the kernel's heap-allocated path for the heads' slices.
    let group = prop_oneof![3 => 1usize..=4, 1 => 9usize..=10];
    (1usize..=4, group, 1usize..=80, 1usize..=40)
        .prop_flat_map(|(n_kv, group, d, len)| {
            let n_heads = n_kv * group;
            (
                Just((n_kv, group, d, len)),
                (0..len).prop_flat_map(move |lo| (Just(lo), lo + 1..=len)),
                0.05f32..2.0,
                prop::option::of(0.5f32..10.0),
                prop::collection::vec(-1.0f32..1.0, n_heads * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
            )
        })
        .prop_map(
            |((n_kv, group, d, _len), (lo, hi), scale, cap, q, k, v)| Case {
                n_kv,
                group,
                d,
                lo,
                hi,
                scale,
                cap,
                q,
                k,
                v,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every supported path against the f64 reference, and every SIMD path against the
    /// portable one. Tolerance: 2e-5 absolute (|q|, |k|, |v| ≤ 1, so the outputs are ≤ 1).
    #[test]
    fn gqa_attention_matches_reference_on_every_path(c in case()) {
        let n_heads = c.n_kv * c.group;
        let want = reference(&c.q, &c.k, &c.v, n_heads, c.n_kv, c.d, c.lo, c.hi, c.scale, c.cap);
        let mut portable = vec![0.0f32; n_heads * c.d];
        let mut scratch = Vec::new();
        let kv = ContiguousKv::new(&c.k, &c.v, c.n_kv, c.d).with_ops(VecOps::portable());
        gqa_attention(&c.q, &kv, c.lo, c.hi, n_heads, c.scale, c.cap, &mut portable, &mut scratch);
        for ops in VecOps::available() {
            let kv = ContiguousKv::new(&c.k, &c.v, c.n_kv, c.d).with_ops(ops);
            let mut out = vec![f32::NAN; n_heads * c.d];
            gqa_attention(&c.q, &kv, c.lo, c.hi, n_heads, c.scale, c.cap, &mut out, &mut scratch);
            for i in 0..out.len() {
                prop_assert!((out[i] as f64 - want[i]).abs() <= 2e-5,
                    "{}: i={i} got {} want {}", ops.isa(), out[i], want[i]);
                prop_assert!((out[i] - portable[i]).abs() <= 2e-5,
                    "{} vs portable: i={i}", ops.isa());
            }
        }
    }
}

#[test]
fn names_the_simd_paths_it_compares() {
    let names: Vec<&str> = VecOps::available().iter().map(|o| o.isa().name()).collect();
    println!("attention SIMD paths run: {}", names.join(", "));
    assert_eq!(names[0], "portable");
}

#[test]
fn single_position_window_returns_that_value_row_exactly() {
    // One position: its weight is exactly 1, so each head's output is its KV head's V row.
    let (n_kv, group, d) = (3, 3, 64);
    let n_heads = n_kv * group;
    let k: Vec<f32> = (0..2 * n_kv * d).map(|i| (i as f32 * 0.1).sin()).collect();
    let v: Vec<f32> = (0..2 * n_kv * d).map(|i| (i as f32 * 0.7).cos()).collect();
    let q: Vec<f32> = (0..n_heads * d).map(|i| (i as f32 * 0.3).sin()).collect();
    for ops in VecOps::available() {
        let kv = ContiguousKv::new(&k, &v, n_kv, d).with_ops(ops);
        let mut out = vec![f32::NAN; n_heads * d];
        gqa_attention(
            &q,
            &kv,
            1,
            2,
            n_heads,
            0.125,
            Some(30.0),
            &mut out,
            &mut Vec::new(),
        );
        for h in 0..n_heads {
            let kvh = h / group;
            let row = &v[(n_kv + kvh) * d..(n_kv + kvh + 1) * d];
            assert_eq!(&out[h * d..(h + 1) * d], row, "{} head {h}", ops.isa());
        }
    }
}

#[test]
fn empty_window_writes_zeros_and_scratch_is_reused() {
    let (k, v) = (vec![1.0f32; 8], vec![1.0f32; 8]);
    let kv = ContiguousKv::new(&k, &v, 1, 4);
    let mut out = vec![f32::NAN; 4];
    let mut scratch = Vec::new();
    gqa_attention(&[1.0; 4], &kv, 1, 1, 1, 1.0, None, &mut out, &mut scratch);
    assert_eq!(out, [0.0; 4]);
    gqa_attention(&[1.0; 4], &kv, 0, 2, 1, 1.0, None, &mut out, &mut scratch);
    let cap = scratch.capacity();
    gqa_attention(&[1.0; 4], &kv, 0, 1, 1, 1.0, None, &mut out, &mut scratch);
    assert_eq!(
        scratch.capacity(),
        cap,
        "a shorter window must not reallocate"
    );
}

#[test]
fn softcap_bounds_the_scores() {
    // Two positions whose raw scores are 100 and 0: uncapped, position 0 takes all the weight;
    // capped at 1, the scores become tanh(100) ≈ 1 and 0, so the weights are
    // e/(e+1) and 1/(e+1).
    let k = [1.0f32, 0.0];
    let v = [1.0f32, 0.0];
    let kv = ContiguousKv::new(&k, &v, 1, 1);
    let mut out = [0.0f32];
    gqa_attention(&[100.0], &kv, 0, 2, 1, 1.0, None, &mut out, &mut Vec::new());
    assert!((out[0] - 1.0).abs() < 1e-6, "{out:?}");
    gqa_attention(
        &[100.0],
        &kv,
        0,
        2,
        1,
        1.0,
        Some(1.0),
        &mut out,
        &mut Vec::new(),
    );
    let e = std::f32::consts::E;
    assert!((out[0] - e / (e + 1.0)).abs() < 1e-6, "{out:?}");
}

/// A causal prefill case: `rows` query rows at positions `first..first + rows` over a cache
/// of `first + rows` positions, stored in pages of `page` positions.
#[derive(Debug, Clone)]
struct CausalCase {
    n_kv: usize,
    group: usize,
    d: usize,
    first: usize,
    rows: usize,
    page: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn causal_case() -> impl Strategy<Value = CausalCase> {
    // Lengths up to 150 cross several attention tiles (32) and many pages (1..=20).
    (
        1usize..=3,
        1usize..=3,
        1usize..=40,
        0usize..=110,
        1usize..=40,
        1usize..=20,
    )
        .prop_flat_map(|(n_kv, group, d, first, rows, page)| {
            let n_heads = n_kv * group;
            let len = first + rows;
            (
                Just((n_kv, group, d, first, rows, page)),
                prop::collection::vec(-1.0f32..1.0, rows * n_heads * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
            )
        })
        .prop_map(
            |((n_kv, group, d, first, rows, page), q, k, v)| CausalCase {
                n_kv,
                group,
                d,
                first,
                rows,
                page,
                q,
                k,
                v,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The tiled prefill path against the f64 reference, row by row over its causal window,
    /// with the keys and values held in a paged cache of random page size; and each row
    /// within 2e-5 of the one-row (decode) path over the same window.
    #[test]
    fn causal_attention_matches_reference_across_pages(c in causal_case()) {
        use engine::kernels::attention::causal_attention;
        use engine::kv::{KvCache, KvConfig, KvDtype};
        let n_heads = c.n_kv * c.group;
        let len = c.first + c.rows;
        let row = c.n_kv * c.d;
        let mut cache = KvCache::new(KvConfig {
            n_layers: 1,
            n_kv_heads: c.n_kv,
            head_dim: c.d,
            page_tokens: c.page,
            max_pages: len.div_ceil(c.page),
            dtype: KvDtype::F32,
        })
        .unwrap();
        let seq = cache.create_sequence();
        cache.grow(seq, len).unwrap();
        for p in 0..len {
            cache.write(seq, 0, p, &c.k[p * row..(p + 1) * row], &c.v[p * row..(p + 1) * row]).unwrap();
        }
        let scale = 1.0 / (c.d as f32).sqrt();
        for ops in VecOps::available() {
            cache.set_ops(ops);
            let view = cache.layer(seq, 0);
            let mut out = vec![f32::NAN; c.rows * n_heads * c.d];
            causal_attention(&c.q, &view, c.first, n_heads, scale, None, &mut out, &mut Vec::new());
            for i in 0..c.rows {
                let qi = &c.q[i * n_heads * c.d..(i + 1) * n_heads * c.d];
                let oi = &out[i * n_heads * c.d..(i + 1) * n_heads * c.d];
                let hi = c.first + i + 1;
                let want = reference(qi, &c.k, &c.v, n_heads, c.n_kv, c.d, 0, hi, scale, None);
                for j in 0..oi.len() {
                    prop_assert!((oi[j] as f64 - want[j]).abs() <= 2e-5,
                        "{}: row {i} j={j} got {} want {}", ops.isa(), oi[j], want[j]);
                }
                let mut one = vec![f32::NAN; n_heads * c.d];
                gqa_attention(qi, &view, 0, hi, n_heads, scale, None, &mut one, &mut Vec::new());
                for j in 0..oi.len() {
                    prop_assert!((oi[j] - one[j]).abs() <= 2e-5,
                        "{}: row {i} j={j}: tiled {} one-row {}", ops.isa(), oi[j], one[j]);
                }
            }
        }
    }

    /// `exp_shifted_sum` against f64 `exp` of the f32 difference: relative error within 1e-6 on each element,
    /// and the sum within 1e-6 relative of the f64 sum, over lengths that leave tails.
    #[test]
    fn exp_shifted_sum_matches_f64_reference(
        x in prop::collection::vec(-100.0f32..0.0, 0..70),
        shift in -5.0f32..5.0,
    ) {
        use engine::kernels::attention::exp_shifted_sum;
        let xs: Vec<f32> = x.iter().map(|v| v + shift).collect();
        let mut got = xs.clone();
        let sum = exp_shifted_sum(&mut got, shift);
        let mut want_sum = 0.0f64;
        for (g, v) in got.iter().zip(&xs) {
            // The difference is taken in f32, as attention takes it; the exponential is checked.
            let want = ((*v - shift) as f64).exp();
            want_sum += want;
            prop_assert!((*g as f64 - want).abs() <= 1e-6 * want + 1e-37, "e^({v} - {shift}) = {g}, want {want}");
        }
        prop_assert!((sum as f64 - want_sum).abs() <= 1e-6 * want_sum + 1e-37, "sum {sum} want {want_sum}");
    }
}

/// A decode window long enough to be split: `len` positions of `n_kv` heads of `d`, the
/// window `[lo, hi)` inside them.
#[derive(Debug, Clone)]
struct SplitCase {
    n_kv: usize,
    group: usize,
    d: usize,
    lo: usize,
    hi: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn split_case() -> impl Strategy<Value = SplitCase> {
    use engine::kernels::attention::SEGMENT;
    // Windows from one position to past three segments, starting anywhere in the first
    // segment (a sliding-window start) or at 0.
    (
        1usize..=3,
        1usize..=3,
        1usize..=20,
        1usize..=3 * SEGMENT + 40,
    )
        .prop_flat_map(|(n_kv, group, d, n)| {
            let n_heads = n_kv * group;
            (
                Just((n_kv, group, d, n)),
                prop_oneof![Just(0usize), 0usize..SEGMENT + 20],
                prop::collection::vec(-1.0f32..1.0, n_heads * d),
            )
        })
        .prop_flat_map(|((n_kv, group, d, n), lo, q)| {
            let len = lo + n;
            (
                Just((n_kv, group, d, lo, lo + n, q)),
                prop::collection::vec(-3.0f32..3.0, len * n_kv * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
            )
        })
        .prop_map(|((n_kv, group, d, lo, hi, q), k, v)| SplitCase {
            n_kv,
            group,
            d,
            lo,
            hi,
            q,
            k,
            v,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Split-K decode attention (`decode_attention`: `gqa_attention_part` per segment, then
    /// `merge_parts`) against the f64 reference and within 2e-5 of the unsplit
    /// `gqa_attention` over the same window, on every SIMD path; the segments tile the
    /// window at absolute multiples of `SEGMENT`.
    #[test]
    fn split_decode_attention_matches_reference_and_unsplit(c in split_case()) {
        use engine::kernels::attention::{SEGMENT, decode_attention, split_segments};
        let n_heads = c.n_kv * c.group;
        let segs = split_segments(c.lo, c.hi);
        prop_assert_eq!(segs.first().map(|s| s.0), Some(c.lo));
        prop_assert_eq!(segs.last().map(|s| s.1), Some(c.hi));
        for w in segs.windows(2) {
            prop_assert_eq!(w[0].1, w[1].0);
            prop_assert!(w[0].1 % SEGMENT == 0, "inner boundary {} not aligned", w[0].1);
        }
        prop_assert_eq!(segs.len() == 1, c.hi - c.lo <= SEGMENT);
        let scale = 1.0 / (c.d as f32).sqrt();
        let want = reference(&c.q, &c.k, &c.v, n_heads, c.n_kv, c.d, c.lo, c.hi, scale, None);
        let mut scratch = Vec::new();
        for ops in VecOps::available() {
            let kv = ContiguousKv::new(&c.k, &c.v, c.n_kv, c.d).with_ops(ops);
            let mut split = vec![f32::NAN; n_heads * c.d];
            decode_attention(&c.q, &kv, c.lo, c.hi, n_heads, scale, None, &mut split, &mut scratch);
            let mut whole = vec![f32::NAN; n_heads * c.d];
            gqa_attention(&c.q, &kv, c.lo, c.hi, n_heads, scale, None, &mut whole, &mut scratch);
            for i in 0..split.len() {
                prop_assert!((split[i] as f64 - want[i]).abs() <= 2e-5,
                    "{}: i={i} split {} want {}", ops.isa(), split[i], want[i]);
                prop_assert!((split[i] - whole[i]).abs() <= 2e-5,
                    "{}: i={i} split {} unsplit {}", ops.isa(), split[i], whole[i]);
            }
        }
    }
}

#[test]
fn merging_one_part_is_its_normalised_accumulator() {
    use engine::kernels::attention::{gqa_attention_part, merge_parts, part_len};
    // Two heads of one KV head over three positions: the part's statistics are the
    // softmax's max and sum, and merging the part alone divides by the sum.
    let (k, v) = (
        [1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0],
        [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    let kv = ContiguousKv::new(&k, &v, 1, 2);
    let q = [1.0f32, 0.0, 0.0, 2.0];
    let mut part = vec![f32::NAN; part_len(2, 2)];
    gqa_attention_part(&q, &kv, 0, 3, 2, 1.0, None, &mut part, &mut Vec::new());
    // Head 0 scores 1, 0, 1; head 1 scores 0, 2, 2.
    let (max, sum) = (&part[4..6], &part[6..8]);
    assert_eq!(max, [1.0, 2.0]);
    let e = std::f32::consts::E;
    assert!((sum[0] - (2.0 + 1.0 / e)).abs() < 1e-6, "{sum:?}");
    assert!((sum[1] - (2.0 + 1.0 / (e * e))).abs() < 1e-6, "{sum:?}");
    let mut out = vec![f32::NAN; 4];
    merge_parts(&part, 2, 2, &mut out);
    for (j, (o, a)) in out.iter().zip(&part[..4]).enumerate() {
        assert!((o - a / sum[j / 2]).abs() < 1e-6, "{out:?} vs {part:?}");
    }
    let mut want = vec![f32::NAN; 4];
    gqa_attention(&q, &kv, 0, 3, 2, 1.0, None, &mut want, &mut Vec::new());
    for (o, w) in out.iter().zip(&want) {
        assert!((o - w).abs() < 1e-6, "{out:?} vs {want:?}");
    }
}

/// A causal prefill case for the flash kernel: `rows` query rows at positions
/// `first..first + rows` of `n_kv × group` heads of `d`, over a paged cache (pages of
/// `page`, f16 or f32 elements), with soft-capping or not; `cuts` split the rows into
/// chunks.
#[derive(Debug, Clone)]
struct FlashCase {
    n_kv: usize,
    group: usize,
    d: usize,
    first: usize,
    rows: usize,
    page: usize,
    f16: bool,
    cap: Option<f32>,
    cuts: Vec<usize>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn flash_case() -> impl Strategy<Value = FlashCase> {
    // GQA ratios 1 (MHA) to 10, head sizes that are and are not multiples of the register
    // tiles (4 coordinates, 8 or 16 lanes), windows across several tiles (32) and pages.
    (
        1usize..=3,
        prop_oneof![3 => 1usize..=4, 1 => 5usize..=10],
        prop_oneof![1 => 1usize..=15, 3 => 16usize..=72],
        prop_oneof![1 => Just(0usize), 3 => 0usize..=100],
        1usize..=70,
        1usize..=20,
        any::<bool>(),
        prop::option::of(2.0f32..30.0),
    )
        .prop_flat_map(|(n_kv, group, d, first, rows, page, f16, cap)| {
            let n_heads = n_kv * group;
            let len = first + rows;
            (
                Just((n_kv, group, d, first, rows, page, f16, cap)),
                prop::collection::vec(1usize..rows.max(2), 0..4),
                prop::collection::vec(-1.0f32..1.0, rows * n_heads * d),
                prop::collection::vec(-2.0f32..2.0, len * n_kv * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
            )
        })
        .prop_map(
            |((n_kv, group, d, first, rows, page, f16, cap), mut cuts, q, k, v)| {
                cuts.retain(|&c| c < rows);
                cuts.sort_unstable();
                cuts.dedup();
                FlashCase {
                    n_kv,
                    group,
                    d,
                    first,
                    rows,
                    page,
                    f16,
                    cap,
                    cuts,
                    q,
                    k,
                    v,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The flash prefill kernel on every SIMD path: each row within 2e-5 of the f64
    /// reference over its causal window (on the keys and values as the cache stores
    /// them), each row bit for bit the same when the rows are computed in chunks
    /// (`cuts`) instead of all at once (a row's result depends only on its position), and
    /// every path bit for bit the portable one.
    #[test]
    fn flash_prefill_matches_reference_and_does_not_depend_on_the_chunks(c in flash_case()) {
        use engine::kernels::attention::causal_attention;
        use engine::kv::{KvCache, KvConfig, KvDtype};
        let n_heads = c.n_kv * c.group;
        let len = c.first + c.rows;
        let row = c.n_kv * c.d;
        let width = n_heads * c.d;
        let dtype = if c.f16 { KvDtype::F16 } else { KvDtype::F32 };
        let mut cache = KvCache::new(KvConfig {
            n_layers: 1,
            n_kv_heads: c.n_kv,
            head_dim: c.d,
            page_tokens: c.page,
            max_pages: len.div_ceil(c.page),
            dtype,
        })
        .unwrap();
        let seq = cache.create_sequence();
        cache.grow(seq, len).unwrap();
        for p in 0..len {
            cache.write(seq, 0, p, &c.k[p * row..(p + 1) * row], &c.v[p * row..(p + 1) * row]).unwrap();
        }
        let stored = |x: &[f32]| -> Vec<f32> {
            if c.f16 {
                x.iter().map(|v| half::f16::from_f32(*v).to_f32()).collect()
            } else {
                x.to_vec()
            }
        };
        let (k, v) = (stored(&c.k), stored(&c.v));
        let scale = 1.0 / (c.d as f32).sqrt();
        let want: Vec<Vec<f64>> = (0..c.rows)
            .map(|i| {
                let qi = &c.q[i * width..(i + 1) * width];
                reference(qi, &k, &v, n_heads, c.n_kv, c.d, 0, c.first + i + 1, scale, c.cap)
            })
            .collect();
        let mut bounds = vec![0];
        bounds.extend(&c.cuts);
        bounds.push(c.rows);
        let mut scratch = Vec::new();
        let mut first_path: Option<Vec<f32>> = None;
        for ops in VecOps::available() {
            cache.set_ops(ops);
            let view = cache.layer(seq, 0);
            let mut whole = vec![f32::NAN; c.rows * width];
            causal_attention(&c.q, &view, c.first, n_heads, scale, c.cap, &mut whole, &mut scratch);
            // Every path takes the same operations per query: the same bits as the portable one.
            match &first_path {
                None => first_path = Some(whole.clone()),
                Some(p) => for j in 0..whole.len() {
                    prop_assert_eq!(whole[j].to_bits(), p[j].to_bits(),
                        "{} differs from the portable path at {}", ops.isa(), j);
                },
            }
            for (i, w) in want.iter().enumerate() {
                for j in 0..width {
                    let got = whole[i * width + j];
                    prop_assert!((got as f64 - w[j]).abs() <= 2e-5,
                        "{}: row {i} j={j} got {got} want {}", ops.isa(), w[j]);
                }
            }
            let mut chunked = vec![f32::NAN; c.rows * width];
            for b in bounds.windows(2) {
                let (r0, r1) = (b[0], b[1]);
                causal_attention(
                    &c.q[r0 * width..r1 * width],
                    &view,
                    c.first + r0,
                    n_heads,
                    scale,
                    c.cap,
                    &mut chunked[r0 * width..r1 * width],
                    &mut scratch,
                );
            }
            for j in 0..whole.len() {
                prop_assert_eq!(whole[j].to_bits(), chunked[j].to_bits(),
                    "{}: row {} coordinate {} differs between the whole block and chunks {:?}",
                    ops.isa(), j / width, j % width, &bounds);
            }
        }
    }
}
