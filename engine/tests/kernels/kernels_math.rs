//! Element-wise and row kernels (SIMD dot/axpy, RMSNorm, RoPE, SwiGLU, softmax) against
//! f64 references written here, on every SIMD path the CPU supports.

use engine::kernels::activation::{softmax_in_place, swiglu};
use engine::kernels::norm::{rms_norm, rms_norm_with};
use engine::kernels::rope::{Rope, RopeStyle};
use engine::kernels::{Isa, VecOps};
use proptest::prelude::*;

/// f32 unit roundoff.
const U: f64 = f32::EPSILON as f64 / 2.0;

/// Two rows of one length; lengths 0..=max_len cover every residue modulo the 8- and
/// 16-lane SIMD widths.
/// Values in [-4, 4) from a fixed xorshift recurrence on `seed`: many rows of data without
/// a huge proptest strategy.
fn values(seed: u64) -> impl FnMut() -> f32 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
    }
}

fn pair(max_len: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0..=max_len).prop_flat_map(|n| {
        (
            prop::collection::vec(-4.0f32..4.0, n),
            prop::collection::vec(-4.0f32..4.0, n),
        )
    })
}

fn paths() -> Vec<VecOps> {
    let ops = VecOps::available();
    let names: Vec<&str> = ops.iter().map(|o| o.isa().name()).collect();
    println!("SIMD paths run: {}", names.join(", "));
    ops
}

#[test]
fn available_paths_start_with_portable_and_match_cpu_detection() {
    let ops = paths();
    assert_eq!(ops[0].isa(), Isa::Portable);
    let isas: Vec<Isa> = ops.iter().map(|o| o.isa()).collect();
    assert_eq!(isas, Isa::available());
    for isa in Isa::ALL {
        assert_eq!(VecOps::new(isa).is_some(), isa.supported(), "{isa}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Tolerance: the standard bound for recursive f32 summation, `n·u·Σ|a_i b_i|` (plus one
    /// rounding for FMA), against an f64 sum.
    #[test]
    fn dot_matches_f64_reference_on_every_path((a, b) in pair(130)) {
        let reference: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        let abs: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64 * *y as f64).abs()).sum();
        let tol = (a.len() as f64 + 2.0) * U * abs + 1e-30;
        for ops in VecOps::available() {
            let got = ops.dot(&a, &b) as f64;
            prop_assert!((got - reference).abs() <= tol,
                "{}: n={} got {got} want {reference} tol {tol}", ops.isa(), a.len());
        }
    }

    /// Tolerance: two roundings per element, `2u·(|out| + |w·x|)`.
    #[test]
    fn axpy_matches_f64_reference_on_every_path((x, o) in pair(130), w in -3.0f32..3.0) {
        for ops in VecOps::available() {
            let mut out = o.clone();
            ops.axpy(w, &x, &mut out);
            for i in 0..x.len() {
                let r = o[i] as f64 + w as f64 * x[i] as f64;
                let tol = 2.0 * U * (o[i].abs() as f64 + (w * x[i]).abs() as f64) + 1e-30;
                prop_assert!((out[i] as f64 - r).abs() <= tol, "{} i={i}", ops.isa());
            }
        }
    }

    /// `dot_rows` is `dot` per row and `axpy_rows` is `axpy` row after row, bit for bit, on
    /// every path: attention over runs of KV rows relies on it. Row lengths cover every
    /// residue of the 8/16-lane widths and the 32/64-column register blocks; strides exceed
    /// the row length (other heads between rows) or equal it.
    #[test]
    fn row_runs_match_per_row_reference_bit_for_bit(
        (d, n, gap) in (0usize..150, 0usize..20, 0usize..40),
        seed in any::<u64>(),
        w0 in -2.0f32..2.0,
    ) {
        let stride = d + gap;
        let len = if n == 0 { 0 } else { (n - 1) * stride + d };
        let mut next = values(seed);
        let rows: Vec<f32> = (0..len).map(|_| next()).collect();
        let q: Vec<f32> = (0..d).map(|_| next()).collect();
        let w: Vec<f32> = (0..n).map(|i| w0 + i as f32 * 0.125).collect();
        let out0: Vec<f32> = (0..d).map(|_| next()).collect();
        for ops in VecOps::available() {
            let mut scores = vec![f32::NAN; n];
            ops.dot_rows(&q, &rows, stride, &mut scores);
            for i in 0..n {
                let want = ops.dot(&q, &rows[i * stride..i * stride + d]);
                prop_assert_eq!(scores[i].to_bits(), want.to_bits(), "{} dot row {}", ops.isa(), i);
            }
            let mut got = out0.clone();
            ops.axpy_rows(&w, &rows, stride, &mut got);
            let mut want = out0.clone();
            for (i, &wi) in w.iter().enumerate() {
                ops.axpy(wi, &rows[i * stride..i * stride + d], &mut want);
            }
            let (g, e): (Vec<u32>, Vec<u32>) =
                (got.iter().map(|x| x.to_bits()).collect(), want.iter().map(|x| x.to_bits()).collect());
            prop_assert_eq!(g, e, "{} axpy rows d={} n={}", ops.isa(), d, n);
        }
    }

    /// The blocked path of `dot_rows` and `dot_rows_f16` (rows of whole 16-lane vectors,
    /// taken sixteen at a time and reduced together, as attention's head_dim of 64 is) gives
    /// every row the bits of `dot` (`dot_f16`), whatever the run length (whole blocks and a
    /// remainder) and stride.
    #[test]
    fn blocked_row_runs_match_per_row_reference_bit_for_bit(
        d in prop_oneof![Just(16usize), Just(32), Just(64), Just(128)],
        n in 0usize..70,
        gap in 0usize..20,
        seed in any::<u64>(),
    ) {
        let stride = d + gap;
        let len = if n == 0 { 0 } else { (n - 1) * stride + d };
        let mut next = values(seed);
        let rows: Vec<f32> = (0..len).map(|_| next()).collect();
        let halves: Vec<half::f16> = rows.iter().map(|&x| half::f16::from_f32(x)).collect();
        let q: Vec<f32> = (0..d).map(|_| next()).collect();
        for ops in VecOps::available() {
            let mut scores = vec![f32::NAN; n];
            ops.dot_rows(&q, &rows, stride, &mut scores);
            let mut scores16 = vec![f32::NAN; n];
            ops.dot_rows_f16(&q, &halves, stride, &mut scores16);
            for i in 0..n {
                let want = ops.dot(&q, &rows[i * stride..i * stride + d]);
                prop_assert_eq!(scores[i].to_bits(), want.to_bits(), "{} d={} row {} of {}", ops.isa(), d, i, n);
                let want16 = ops.dot_f16(&q, &halves[i * stride..i * stride + d]);
                prop_assert_eq!(scores16[i].to_bits(), want16.to_bits(), "{} f16 d={} row {} of {}", ops.isa(), d, i, n);
            }
        }
    }

    /// The f16 row primitives (the f16 KV cache's reads) on every path: each equals that
    /// path's f32 primitive on the widened rows bit for bit (`dot_f16`, `axpy_f16`,
    /// `dot_rows_f16`, `axpy_rows_f16`), and the f16 dot and axpy agree with the f64
    /// reference over the widened values. Lengths and strides as above.
    #[test]
    fn f16_row_runs_match_widened_f32_bit_for_bit_and_the_reference(
        (d, n, gap) in (0usize..150, 0usize..20, 0usize..40),
        seed in any::<u64>(),
        w0 in -2.0f32..2.0,
    ) {
        use half::f16;
        let stride = d + gap;
        let len = if n == 0 { 0 } else { (n - 1) * stride + d };
        let mut next = values(seed);
        let rows: Vec<f16> = (0..len).map(|_| f16::from_f32(next())).collect();
        let wide: Vec<f32> = rows.iter().map(|h| h.to_f32()).collect();
        let q: Vec<f32> = (0..d).map(|_| next()).collect();
        let w: Vec<f32> = (0..n).map(|i| w0 + i as f32 * 0.125).collect();
        let out0: Vec<f32> = (0..d).map(|_| next()).collect();
        for ops in VecOps::available() {
            for i in 0..n {
                let (r, rw) = (&rows[i * stride..i * stride + d], &wide[i * stride..i * stride + d]);
                let got = ops.dot_f16(&q, r);
                prop_assert_eq!(got.to_bits(), ops.dot(&q, rw).to_bits(), "{} dot_f16 row {}", ops.isa(), i);
                let exact: f64 = q.iter().zip(rw).map(|(a, b)| *a as f64 * *b as f64).sum();
                let mag: f64 = q.iter().zip(rw).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
                prop_assert!((got as f64 - exact).abs() <= 2.0 * d as f64 * U * mag + 1e-30,
                    "{} dot_f16 row {}: {} vs {}", ops.isa(), i, got, exact);
                let (mut a, mut b) = (out0.clone(), out0.clone());
                ops.axpy_f16(w0, r, &mut a);
                ops.axpy(w0, rw, &mut b);
                prop_assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    b.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "{} axpy_f16 row {}", ops.isa(), i);
                for j in 0..d {
                    let r = out0[j] as f64 + w0 as f64 * rw[j] as f64;
                    let tol = 2.0 * U * (out0[j].abs() as f64 + (w0 * rw[j]).abs() as f64) + 1e-30;
                    prop_assert!((a[j] as f64 - r).abs() <= tol, "{} axpy_f16 j={}", ops.isa(), j);
                }
            }
            let mut scores = vec![f32::NAN; n];
            ops.dot_rows_f16(&q, &rows, stride, &mut scores);
            let mut want = vec![f32::NAN; n];
            ops.dot_rows(&q, &wide, stride, &mut want);
            prop_assert_eq!(scores.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "{} dot_rows_f16", ops.isa());
            let (mut got, mut want) = (out0.clone(), out0.clone());
            ops.axpy_rows_f16(&w, &rows, stride, &mut got);
            ops.axpy_rows(&w, &wide, stride, &mut want);
            prop_assert_eq!(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "{} axpy_rows_f16 d={} n={}", ops.isa(), d, n);
        }
    }

    /// `dot_rows_heads` (each key row loaded once for a GQA group's heads) gives each head
    /// the bits of its own `dot_rows`, over f32 and f16 rows, on every path: up to 6 heads
    /// (more than the 4 of one register pass), row lengths that take the blocked path
    /// (multiples of 16) and others, row counts across blocks of 16, strides above the row
    /// length.
    #[test]
    fn heads_dot_rows_match_per_head_reference_bit_for_bit(
        d in prop_oneof![Just(64usize), Just(16), Just(128), Just(48), 1usize..150],
        heads in 0usize..7,
        n in 0usize..53,
        gap in 0usize..20,
        seed in any::<u64>(),
    ) {
        let stride = d + gap;
        let len = if n == 0 { 0 } else { (n - 1) * stride + d };
        let mut next = values(seed);
        let rows: Vec<f32> = (0..len).map(|_| next()).collect();
        let halves: Vec<half::f16> = rows.iter().map(|&x| half::f16::from_f32(x)).collect();
        let qs: Vec<Vec<f32>> = (0..heads).map(|_| (0..d).map(|_| next()).collect()).collect();
        let qr: Vec<&[f32]> = qs.iter().map(|q| &q[..]).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for ops in VecOps::available() {
            let (mut got, mut got16) = (vec![vec![f32::NAN; n]; heads], vec![vec![f32::NAN; n]; heads]);
            {
                let mut outs: Vec<&mut [f32]> = got.iter_mut().map(|o| &mut o[..]).collect();
                ops.dot_rows_heads(&qr, &rows, stride, &mut outs);
                let mut outs16: Vec<&mut [f32]> = got16.iter_mut().map(|o| &mut o[..]).collect();
                ops.dot_rows_heads_f16(&qr, &halves, stride, &mut outs16);
            }
            for h in 0..heads {
                let mut want = vec![f32::NAN; n];
                ops.dot_rows(&qs[h], &rows, stride, &mut want);
                prop_assert_eq!(bits(&got[h]), bits(&want), "{} head {} of {}, d={} n={}", ops.isa(), h, heads, d, n);
                let mut want16 = vec![f32::NAN; n];
                ops.dot_rows_f16(&qs[h], &halves, stride, &mut want16);
                prop_assert_eq!(bits(&got16[h]), bits(&want16), "{} f16 head {} of {}, d={} n={}", ops.isa(), h, heads, d, n);
            }
        }
    }

    /// `axpy_rows_heads` (one pass over the value rows for a GQA group's heads) gives each
    /// head the bits of its own `axpy_rows`, over f32 and f16 rows, on every path: up to 6
    /// heads (more than the 4 of one register pass), row lengths that take the one-pass
    /// path (multiples of 64) and others, strides above the row length.
    #[test]
    fn heads_axpy_rows_match_per_head_reference_bit_for_bit(
        d in prop_oneof![Just(64usize), Just(128), Just(192), Just(48), 1usize..150],
        heads in 0usize..7,
        n in 0usize..40,
        gap in 0usize..20,
        seed in any::<u64>(),
    ) {
        let stride = d + gap;
        let len = if n == 0 { 0 } else { (n - 1) * stride + d };
        let mut next = values(seed);
        let rows: Vec<f32> = (0..len).map(|_| next()).collect();
        let halves: Vec<half::f16> = rows.iter().map(|&x| half::f16::from_f32(x)).collect();
        let ws: Vec<Vec<f32>> = (0..heads).map(|_| (0..n).map(|_| next()).collect()).collect();
        let out0: Vec<Vec<f32>> = (0..heads).map(|_| (0..d).map(|_| next()).collect()).collect();
        let wr: Vec<&[f32]> = ws.iter().map(|w| &w[..]).collect();
        for ops in VecOps::available() {
            let (mut got, mut got16) = (out0.clone(), out0.clone());
            {
                let mut outs: Vec<&mut [f32]> = got.iter_mut().map(|o| &mut o[..]).collect();
                ops.axpy_rows_heads(&wr, &rows, stride, &mut outs);
                let mut outs16: Vec<&mut [f32]> = got16.iter_mut().map(|o| &mut o[..]).collect();
                ops.axpy_rows_heads_f16(&wr, &halves, stride, &mut outs16);
            }
            for h in 0..heads {
                let mut want = out0[h].clone();
                ops.axpy_rows(&ws[h], &rows, stride, &mut want);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&got[h]), bits(&want), "{} head {} of {}, d={} n={}", ops.isa(), h, heads, d, n);
                let mut want16 = out0[h].clone();
                ops.axpy_rows_f16(&ws[h], &halves, stride, &mut want16);
                prop_assert_eq!(bits(&got16[h]), bits(&want16), "{} f16 head {} of {}, d={} n={}", ops.isa(), h, heads, d, n);
            }
        }
    }

    /// Tolerance: relative 1e-5 of each output's magnitude (plus 1e-6 absolute for outputs
    /// near zero); the f32 kernel has a sum of `n ≤ 300` squares, a sqrt and two products.
    #[test]
    fn rms_norm_matches_f64_reference_on_every_path(
        (x, w) in pair(300), eps in prop_oneof![Just(1e-5f32), Just(1e-6f32), 0.0f32..1.0]
    ) {
        let n = x.len();
        let ms: f64 = x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / n.max(1) as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for ops in VecOps::available() {
            let mut out = vec![f32::NAN; n];
            rms_norm_with(ops, &x, &w, eps, &mut out);
            for i in 0..n {
                let r = x[i] as f64 * inv * w[i] as f64;
                prop_assert!((out[i] as f64 - r).abs() <= 1e-5 * r.abs() + 1e-6,
                    "{} i={i} got {} want {r}", ops.isa(), out[i]);
            }
        }
    }

    #[test]
    fn swiglu_matches_f64_reference((g, u) in pair(200)) {
        let mut out = vec![f32::NAN; g.len()];
        swiglu(&g, &u, &mut out);
        for i in 0..g.len() {
            let gi = g[i] as f64;
            let r = gi / (1.0 + (-gi).exp()) * u[i] as f64;
            // Tolerance: relative 1e-5 (an exp, a division and two products in f32).
            prop_assert!((out[i] as f64 - r).abs() <= 1e-5 * r.abs() + 1e-7, "i={i}");
        }
    }

    #[test]
    fn softmax_matches_f64_reference_and_survives_large_offsets(
        x in prop::collection::vec(-30.0f32..30.0, 1..200),
        offset in prop_oneof![Just(0.0f32), Just(1e4f32), Just(-1e4f32), Just(3e38f32)]
    ) {
        // A huge common offset must not overflow: the kernel subtracts the max.
        let shifted: Vec<f32> = x.iter().map(|v| v + offset).collect();
        let m = shifted.iter().fold(f64::NEG_INFINITY, |a, b| a.max(*b as f64));
        let e: Vec<f64> = shifted.iter().map(|v| (*v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        let mut got = shifted.clone();
        softmax_in_place(&mut got);
        for i in 0..x.len() {
            let r = e[i] / s;
            // Tolerance: relative 1e-5 plus 1e-7 absolute for the tiny probabilities.
            prop_assert!((got[i] as f64 - r).abs() <= 1e-5 * r + 1e-7,
                "i={i} got {} want {r}", got[i]);
        }
    }

    /// RoPE against an f64 rotation written from the definition, both pairings, awkward head
    /// sizes, large positions and several bases. Tolerance: 2e-5 of the pair's norm (f32
    /// sin/cos and two products) plus 1e-6.
    #[test]
    fn rope_matches_f64_reference_in_both_pairings(
        half in 1usize..=80, n_heads in 1usize..=5, pos in 0usize..200_000,
        base in prop_oneof![Just(10_000.0f32), Just(100_000.0f32), 2.0f32..1e6],
        seed in prop::collection::vec(-2.0f32..2.0, 5 * 160)
    ) {
        let d = 2 * half;
        let x: Vec<f32> = seed[..n_heads * d].to_vec();
        for style in [RopeStyle::Adjacent, RopeStyle::RotateHalf] {
            let mut got = x.clone();
            let rope = Rope::new(d, base, style);
            rope.apply(&mut got, n_heads, pos);
            // The angles computed once for a position rotate to the same bits.
            let mut pre = x.clone();
            rope.apply_angles(&mut pre, n_heads, &rope.angles(pos));
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&pre), bits(&got), "{:?}: apply_angles differs from apply", style);
            // Every output is the f32 formula on its pair, two rounded products and one
            // rounded sum (no fused multiply-add, no other order), whatever the loop order.
            let angles = rope.angles(pos);
            let mut exact = x.clone();
            for head in exact.chunks_exact_mut(d) {
                for (i, &(s, c)) in angles.iter().enumerate() {
                    let (a, b) = match style {
                        RopeStyle::Adjacent => (2 * i, 2 * i + 1),
                        RopeStyle::RotateHalf => (i, i + half),
                    };
                    let (x0, x1) = (head[a], head[b]);
                    head[a] = x0 * c - x1 * s;
                    head[b] = x0 * s + x1 * c;
                }
            }
            prop_assert_eq!(bits(&exact), bits(&got), "{:?}: not the per-pair f32 formula", style);
            for h in 0..n_heads {
                let xh = &x[h * d..(h + 1) * d];
                let gh = &got[h * d..(h + 1) * d];
                for i in 0..half {
                    let theta = pos as f64 * (base as f64).powf(-(2.0 * i as f64) / d as f64);
                    let (a, b) = match style {
                        RopeStyle::Adjacent => (2 * i, 2 * i + 1),
                        RopeStyle::RotateHalf => (i, i + half),
                    };
                    let (x0, x1) = (xh[a] as f64, xh[b] as f64);
                    let r0 = x0 * theta.cos() - x1 * theta.sin();
                    let r1 = x0 * theta.sin() + x1 * theta.cos();
                    let tol = 2e-5 * (x0.hypot(x1)) + 1e-6;
                    prop_assert!((gh[a] as f64 - r0).abs() <= tol, "{style:?} h={h} i={i}");
                    prop_assert!((gh[b] as f64 - r1).abs() <= tol, "{style:?} h={h} i={i}");
                }
            }
        }
    }

    /// The defining property of RoPE: `<R(m)q, R(n)k>` depends only on `m - n`.
    #[test]
    fn rope_scores_depend_only_on_relative_position(
        half in 1usize..=40, m in 0usize..5000, n in 0usize..5000, shift in 0usize..5000,
        q in prop::collection::vec(-1.0f32..1.0, 80), k in prop::collection::vec(-1.0f32..1.0, 80)
    ) {
        let d = 2 * half;
        for style in [RopeStyle::Adjacent, RopeStyle::RotateHalf] {
            let rope = Rope::new(d, 10_000.0, style);
            let score = |pq: usize, pk: usize| {
                let (mut a, mut b) = (q[..d].to_vec(), k[..d].to_vec());
                rope.apply(&mut a, 1, pq);
                rope.apply(&mut b, 1, pk);
                a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum::<f64>()
            };
            let (s0, s1) = (score(m, n), score(m + shift, n + shift));
            // Tolerance: 1e-4 absolute for |q|,|k| <= sqrt(80).
            prop_assert!((s0 - s1).abs() <= 1e-4, "{style:?}: {s0} vs {s1}");
        }
    }

    /// Rotate-half is adjacent pairing under the permutation that interleaves the two halves
    /// (the permutation llama.cpp's converter applies to Q/K rows).
    #[test]
    fn rotate_half_is_adjacent_under_interleaving_permutation(
        half in 1usize..=64, pos in 0usize..100_000, x in prop::collection::vec(-3.0f32..3.0, 128)
    ) {
        let d = 2 * half;
        let x = &x[..d];
        // perm[j]: adjacent coordinate j takes rotate-half coordinate perm[j].
        let perm: Vec<usize> = (0..d).map(|j| if j % 2 == 0 { j / 2 } else { half + j / 2 }).collect();
        let mut rh = x.to_vec();
        Rope::new(d, 10_000.0, RopeStyle::RotateHalf).apply(&mut rh, 1, pos);
        let mut adj: Vec<f32> = perm.iter().map(|&p| x[p]).collect();
        Rope::new(d, 10_000.0, RopeStyle::Adjacent).apply(&mut adj, 1, pos);
        for j in 0..d {
            prop_assert_eq!(adj[j].to_bits(), rh[perm[j]].to_bits(), "j={}", j);
        }
    }
}

#[test]
fn rms_norm_default_path_matches_known_value() {
    // x = [3, 4]: mean(x²) = 12.5, rms = sqrt(12.5) = 3.5355339; weight [1, 2].
    let mut out = [0.0f32; 2];
    rms_norm(&[3.0, 4.0], &[1.0, 2.0], 0.0, &mut out);
    assert!((out[0] - 0.848_528_1).abs() < 1e-6, "{out:?}");
    assert!((out[1] - 2.262_741_7).abs() < 1e-6, "{out:?}");
    let mut empty: [f32; 0] = [];
    rms_norm(&[], &[], 1e-5, &mut empty);
}

#[test]
fn rope_known_angles_for_each_pairing() {
    // head_dim 4, base 10000: inv_freq = [1, 10000^(-1/2) = 0.01]; at pos 1 the pairs turn
    // by 1 rad and 0.01 rad.
    let (c1, s1, c2, s2) = (1f32.cos(), 1f32.sin(), 0.01f32.cos(), 0.01f32.sin());
    let mut adj = [1.0, 0.0, 1.0, 0.0];
    Rope::new(4, 10_000.0, RopeStyle::Adjacent).apply(&mut adj, 1, 1);
    let mut rh = [1.0, 1.0, 0.0, 0.0];
    Rope::new(4, 10_000.0, RopeStyle::RotateHalf).apply(&mut rh, 1, 1);
    for (got, want) in adj.iter().zip([c1, s1, c2, s2]) {
        assert!((got - want).abs() < 1e-6, "adjacent {adj:?}");
    }
    for (got, want) in rh.iter().zip([c1, c2, s1, s2]) {
        assert!((got - want).abs() < 1e-6, "rotate-half {rh:?}");
    }
}

#[test]
fn rope_position_zero_is_identity_and_batch_uses_consecutive_positions() {
    let x: Vec<f32> = (0..3 * 2 * 8).map(|i| (i as f32 * 0.37).sin()).collect();
    for style in [RopeStyle::Adjacent, RopeStyle::RotateHalf] {
        let rope = Rope::new(8, 100_000.0, style);
        let mut y = x[..16].to_vec();
        rope.apply(&mut y, 2, 0);
        assert_eq!(y, x[..16], "{style:?}: position 0 must not rotate");

        let mut batch = x.clone();
        rope.apply_batch(&mut batch, 2, 41);
        for t in 0..3 {
            let mut one = x[t * 16..(t + 1) * 16].to_vec();
            rope.apply(&mut one, 2, 41 + t);
            assert_eq!(one, batch[t * 16..(t + 1) * 16], "{style:?} token {t}");
        }
    }
}

#[test]
fn softmax_edge_cases_do_not_panic() {
    let mut empty: [f32; 0] = [];
    softmax_in_place(&mut empty);
    let mut all_neg_inf = [f32::NEG_INFINITY; 4];
    softmax_in_place(&mut all_neg_inf);
    assert_eq!(all_neg_inf, [0.25; 4]);
    let mut some_neg_inf = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0];
    softmax_in_place(&mut some_neg_inf);
    assert_eq!(some_neg_inf, [0.0, 0.5, 0.0, 0.5]);
}

#[test]
fn swiglu_is_finite_for_extreme_gates() {
    let g = [-1e4f32, -100.0, 0.0, 100.0, 1e4];
    let u = [1.0f32; 5];
    let mut out = [f32::NAN; 5];
    swiglu(&g, &u, &mut out);
    assert!(out.iter().all(|v| v.is_finite()), "{out:?}");
    assert_eq!(out[0], 0.0);
    assert_eq!(out[4], 1e4);
}
