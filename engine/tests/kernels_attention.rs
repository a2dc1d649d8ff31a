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
    (1usize..=4, 1usize..=4, 1usize..=80, 1usize..=40)
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
