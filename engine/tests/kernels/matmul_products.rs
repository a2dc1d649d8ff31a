//! Matrix-vector and matrix-matrix products against test-local references, on every SIMD path.

use crate::quant_reference;

use engine::gguf::GgmlType;
use engine::kernels::Isa;
use engine::kernels::matmul::packed::PackedWeights;
use engine::kernels::matmul::{
    Cpu, WeightMatrix, matmul, matmul_many, matvec, matvec_multi, uses_packed,
};
use engine::quant::{self, QuantError};
use proptest::prelude::*;
use quant_reference as r;
use quant_reference::Ty;

fn ggml(ty: Ty) -> GgmlType {
    match ty {
        Ty::F32 => GgmlType::F32,
        Ty::F16 => GgmlType::F16,
        Ty::BF16 => GgmlType::BF16,
        Ty::Q8_0 => GgmlType::Q8_0,
        Ty::Q8_1 => GgmlType::Q8_1,
        Ty::Q4_0 => GgmlType::Q4_0,
        Ty::Q4_1 => GgmlType::Q4_1,
    }
}

/// Weights for a `[rows, cols]` matrix of `ty`, encoded by the test-local quantizer.
fn weights(ty: Ty, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    r::encode(ty, &r::Rng(seed).vec(rows * cols, 1.5))
}

/// Reference `y[r]` and the magnitude its tolerance scales with. Quantized types: ggml's
/// reference `vec_dot` with the activation quantized by the test-local Q8 quantizer;
/// float types: the f64 dot with the f32 activation.
fn reference_row(ty: Ty, row: &[u8], x: &[f32]) -> (f64, f64) {
    if ty.is_quantized() {
        r::vec_dot_q8(ty, row, &r::quantize_act(x))
    } else {
        r::dot_f64(&r::decode(ty, row), x)
    }
}

/// Every path in capability order, as this CPU reports its features (test-local detection).
fn paths_this_cpu_has() -> Vec<Isa> {
    let mut v = vec![Isa::Portable];
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c");
        let avx512 = avx2
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl");
        if avx2 {
            v.push(Isa::Avx2);
        }
        if avx512 {
            v.push(Isa::Avx512);
        }
        if avx512 && is_x86_feature_detected!("avx512vnni") {
            v.push(Isa::Avx512Vnni);
        }
    }
    v
}

/// Tolerance: float summation order only, 2e-5 of the terms' magnitudes.
fn close(got: f32, want: f64, mag: f64) -> bool {
    (got as f64 - want).abs() <= 2e-5 * mag + 1e-6
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// matvec and matmul equal the reference on awkward shapes (odd row counts, lengths
    /// not a multiple of the SIMD width, odd block counts, n = 1 and n not a multiple of
    /// the 4-row group), on the best path with 2 threads.
    #[test]
    fn products_match_reference(ty in prop::sample::select(r::ALL.to_vec()), rows in 1usize..70,
                                units in 1usize..80, n in 1usize..10, seed in any::<u64>()) {
        let cols = if ty.is_quantized() { 32 * (1 + units % 7) } else { units };
        let w = weights(ty, rows, cols, seed);
        let x = r::Rng(seed ^ 1).vec(n * cols, 2.0);
        let cpu = Cpu::new(2, Isa::best());
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let rb = w.len() / rows;
        let mut y = vec![f32::NAN; n * rows];
        matmul(&cpu, &m, &x, n, &mut y);
        let mut yv = vec![f32::NAN; rows];
        matvec(&cpu, &m, &x[..cols], &mut yv);
        for i in 0..n {
            for rr in 0..rows {
                let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], &x[i * cols..(i + 1) * cols]);
                let got = y[i * rows + rr];
                prop_assert!(close(got, want, mag), "{ty:?} {rows}x{cols} n={n} y[{i},{rr}] = {got}, want {want}");
                if i == 0 {
                    prop_assert!(close(yv[rr], want, mag), "{ty:?} matvec y[{rr}] = {}, want {want}", yv[rr]);
                }
            }
        }
    }
}

/// The paths of this CPU that have kernels for 16-row packed matrices of `ty`.
fn packed_paths(ty: Ty) -> Vec<Isa> {
    paths_this_cpu_has()
        .into_iter()
        .filter(|&i| uses_packed(i, ggml(ty)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Packed Q4_1 and Q8_0 matrices on every path that has the packed kernels: matmul and matvec
    /// equal the reference and are bit for bit the same on every such path (AVX2 and
    /// AVX-512), and a row's result is bit for bit the same whether it runs
    /// alone (matvec), in a batch of `n` (matmul: groups of four and a remainder), on 1 or
    /// 2 threads, or as part of a fused product with other matrices (matvec_multi, and
    /// matmul_many for the batch, with a packed or an unpacked partner).
    #[test]
    fn packed_products_match_reference_and_do_not_depend_on_the_batch(
        ty in prop::sample::select(vec![Ty::Q4_1, Ty::Q8_0]),
        groups in 1usize..5, blocks in 1usize..8, n in 1usize..10, seed in any::<u64>()) {
        let (rows, cols) = (16 * groups, 32 * blocks);
        let w = weights(ty, rows, cols, seed);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let p = PackedWeights::pack(&m).expect("whole 16-row groups pack");
        let pm = m.with_packed(&p);
        let other = weights(ty, 16, cols, seed ^ 7);
        let om = WeightMatrix::new(ggml(ty), 16, cols, &other).unwrap();
        let op = PackedWeights::pack(&om).unwrap();
        let om = om.with_packed(&op);
        let x = r::Rng(seed ^ 1).vec(n * cols, 2.0);
        let rb = w.len() / rows;
        let mut first: Option<(Isa, Vec<f32>)> = None;
        for isa in packed_paths(ty) {
            let one = Cpu::new(1, isa);
            let two = Cpu::new(2, isa);
            let (mut y1, mut y2) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * rows]);
            matmul(&one, &pm, &x, n, &mut y1);
            matmul(&two, &pm, &x, n, &mut y2);
            prop_assert_eq!(&y1, &y2, "{} 1 vs 2 threads", isa);
            // Every packed path does the same float operations per lane on an exact
            // integer block dot: AVX2 (two halves of eight lanes) equals AVX-512.
            match &first {
                None => first = Some((isa, y1.clone())),
                Some((i0, y0)) => prop_assert_eq!(&y1, y0, "{} vs {} packed, n = {}", isa, i0, n),
            }
            // The fused batch product of both matrices (one quantization, one dispatch)
            // and the same with an unpacked matrix in the set (one product each).
            let unpacked = WeightMatrix::new(ggml(ty), 16, cols, &other).unwrap();
            for (cpu, second) in [(&one, &om), (&two, &om), (&two, &unpacked)] {
                let mut yo = vec![f32::NAN; n * 16];
                matmul(&two, second, &x, n, &mut yo);
                let (mut ya, mut yb) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * 16]);
                matmul_many(cpu, &[&pm, second], &x, n, &mut [&mut ya, &mut yb]);
                prop_assert_eq!(&ya, &y1, "{} fused batch vs matmul, n = {}", isa, n);
                prop_assert_eq!(&yb, &yo, "{} fused batch (second) vs matmul, n = {}", isa, n);
            }
            for i in 0..n {
                let xi = &x[i * cols..(i + 1) * cols];
                let mut yv = vec![f32::NAN; rows];
                matvec(&two, &pm, xi, &mut yv);
                prop_assert_eq!(&y1[i * rows..(i + 1) * rows], &yv[..], "{} row {} of {}: batch vs alone", isa, i, n);
                let (mut ym, mut yo) = (vec![f32::NAN; rows], vec![f32::NAN; 16]);
                matvec_multi(&two, &[&pm, &om], xi, &mut [&mut ym, &mut yo]);
                prop_assert_eq!(&ym, &yv, "{} fused vs matvec", isa);
                for rr in 0..rows {
                    let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], xi);
                    let got = yv[rr];
                    prop_assert!(close(got, want, mag), "{} {:?} {}x{} y[{},{}] = {}, want {}", isa, ty, rows, cols, i, rr, got, want);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The tiled prefill product of packed matrices (register tiles of 8, then 4, then 1
    /// tokens, cache blocks of 64 tokens, tasks of whole 16-row groups written straight
    /// into the output): on every path with packed kernels, with prompt-sized batches that
    /// cross every tile and block boundary, each output equals the reference and each
    /// token's row is bit for bit its matvec alone, on 1 and 2 threads.
    #[test]
    fn packed_prefill_tiles_match_reference_and_each_row_alone(
        ty in prop::sample::select(vec![Ty::Q4_1, Ty::Q8_0]),
        groups in 1usize..8, blocks in 1usize..6,
        n in prop::sample::select(vec![2usize, 5, 8, 9, 12, 13, 16, 23, 63, 64, 65, 77, 136]),
        seed in any::<u64>()) {
        let (rows, cols) = (16 * groups, 32 * blocks);
        let w = weights(ty, rows, cols, seed);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let p = PackedWeights::pack(&m).expect("whole 16-row groups pack");
        let pm = m.with_packed(&p);
        let x = r::Rng(seed ^ 3).vec(n * cols, 2.0);
        let rb = w.len() / rows;
        for isa in packed_paths(ty) {
            let (one, two) = (Cpu::new(1, isa), Cpu::new(2, isa));
            let (mut y1, mut y2) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * rows]);
            matmul(&one, &pm, &x, n, &mut y1);
            matmul(&two, &pm, &x, n, &mut y2);
            prop_assert_eq!(&y1, &y2, "{} 1 vs 2 threads, n = {}", isa, n);
            for i in 0..n {
                let xi = &x[i * cols..(i + 1) * cols];
                let mut yv = vec![f32::NAN; rows];
                matvec(&one, &pm, xi, &mut yv);
                prop_assert_eq!(&y2[i * rows..(i + 1) * rows], &yv[..], "{} token {} of {}: tile vs alone", isa, i, n);
                for rr in (i % 5..rows).step_by(5) {
                    let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], xi);
                    let got = y2[i * rows + rr];
                    prop_assert!(close(got, want, mag), "{} {:?} {}x{} n {} y[{},{}] = {}, want {}", isa, ty, rows, cols, n, i, rr, got, want);
                }
            }
        }
    }
}

/// The bits of `v`, for comparisons that tell -0.0 from 0.0 and compare NaNs.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Q4_0 `[rows, cols]` matrices of whole 16-row groups, packed, on every path with the
/// packed Q4_0 kernels against the portable path (unpacked row kernel): every output is
/// its bits (`rows` outputs of `n` activation rows of `x`), in matmul on 1 and 2 threads,
/// alone (matvec), and in the fused products with a second packed matrix and with an
/// unpacked one (`matmul_many`, `matvec_multi`); each output also equals the reference.
/// Returns the paths checked.
fn check_packed_q4_0(w: &[u8], rows: usize, cols: usize, x: &[f32], n: usize) -> Vec<Isa> {
    let m = WeightMatrix::new(GgmlType::Q4_0, rows, cols, w).unwrap();
    let p = PackedWeights::pack(&m).expect("whole 16-row groups pack");
    let pm = m.with_packed(&p);
    let other = weights(Ty::Q4_0, 16, cols, w.len() as u64);
    let om = WeightMatrix::new(GgmlType::Q4_0, 16, cols, &other).unwrap();
    let op = PackedWeights::pack(&om).unwrap();
    let om = om.with_packed(&op);
    let unpacked_o = WeightMatrix::new(GgmlType::Q4_0, 16, cols, &other).unwrap();
    let portable_cpu = Cpu::new(1, Isa::Portable);
    let (mut portable, mut portable_o) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * 16]);
    matmul(&portable_cpu, &m, x, n, &mut portable);
    matmul(&portable_cpu, &unpacked_o, x, n, &mut portable_o);
    let rb = w.len() / rows;
    for i in 0..n {
        let xi = &x[i * cols..(i + 1) * cols];
        for rr in 0..rows {
            let (want, mag) = reference_row(Ty::Q4_0, &w[rr * rb..(rr + 1) * rb], xi);
            let got = portable[i * rows + rr];
            assert!(
                close(got, want, mag),
                "portable Q4_0 {rows}x{cols} n {n} y[{i},{rr}] = {got}, want {want}"
            );
        }
    }
    let paths = packed_paths(Ty::Q4_0);
    for &isa in &paths {
        let (one, two) = (Cpu::new(1, isa), Cpu::new(2, isa));
        for cpu in [&one, &two] {
            let mut y = vec![f32::NAN; n * rows];
            matmul(cpu, &pm, x, n, &mut y);
            assert_eq!(
                bits(&y),
                bits(&portable),
                "{isa} x{} packed Q4_0 {rows}x{cols} vs portable, n = {n}",
                cpu.threads()
            );
            // The unpacked partner takes this path's row kernels (the portable answer
            // within float summation order only): its output is its own product's.
            let mut unpacked_alone = vec![f32::NAN; n * 16];
            matmul(cpu, &unpacked_o, x, n, &mut unpacked_alone);
            for (second, want_o) in [(&om, &portable_o), (&unpacked_o, &unpacked_alone)] {
                let (mut ya, mut yb) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * 16]);
                matmul_many(cpu, &[&pm, second], x, n, &mut [&mut ya, &mut yb]);
                let packed = second.packed().is_some();
                assert_eq!(
                    bits(&ya),
                    bits(&portable),
                    "{isa} fused (partner packed: {packed}) vs portable, n = {n}"
                );
                assert_eq!(
                    bits(&yb),
                    bits(want_o),
                    "{isa} fused partner (packed: {packed}), n = {n}"
                );
            }
        }
        for i in 0..n {
            let xi = &x[i * cols..(i + 1) * cols];
            let want = &portable[i * rows..(i + 1) * rows];
            let mut yv = vec![f32::NAN; rows];
            matvec(&two, &pm, xi, &mut yv);
            assert_eq!(
                bits(&yv),
                bits(want),
                "{isa} token {i} of {n} alone vs portable"
            );
            let (mut ym, mut yo) = (vec![f32::NAN; rows], vec![f32::NAN; 16]);
            matvec_multi(&two, &[&pm, &om], xi, &mut [&mut ym, &mut yo]);
            assert_eq!(
                bits(&ym),
                bits(want),
                "{isa} token {i} fused matvec vs portable"
            );
            assert_eq!(
                bits(&yo),
                bits(&portable_o[i * 16..(i + 1) * 16]),
                "{isa} token {i} fused matvec partner vs portable"
            );
        }
    }
    paths
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Packed Q4_0 matrices (nibbles taken unsigned, `8 · Σ a` taken off the exact integer
    /// dot, the portable kernel's float steps) on every path with the packed Q4_0 kernels
    /// (AVX2, AVX-512, AVX-512 VNNI) give the portable path's bits: over 1–7 groups and
    /// 1–7 blocks, batches that fill every register tile (8, 4, 2, 1 tokens) and cross the
    /// 64-token cache blocks, 1 and 2 threads, alone and in fused products; and each
    /// output equals the reference.
    #[test]
    fn packed_q4_0_products_match_reference_and_portable_bit_for_bit(
        groups in 1usize..8, blocks in 1usize..8,
        n in prop::sample::select(vec![1usize, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 23, 64, 65, 77]),
        seed in any::<u64>()) {
        let (rows, cols) = (16 * groups, 32 * blocks);
        let w = weights(Ty::Q4_0, rows, cols, seed);
        let x = r::Rng(seed ^ 3).vec(n * cols, 2.0);
        let paths = check_packed_q4_0(&w, rows, cols, &x, n);
        #[cfg(target_arch = "x86_64")]
        prop_assert!(!is_x86_feature_detected!("avx2") || !paths.is_empty(), "no packed Q4_0 path on an AVX2 CPU");
        let _ = paths;
    }
}

/// Packed Q4_0 at the extremes of its integer dot: every nibble 15 (or 0) against every
/// activation byte at ±127, the largest pair sums the kernels add in 16 bits, still give
/// the portable path's bits (no saturation) on every packed path.
#[test]
fn packed_q4_0_extreme_blocks_match_portable() {
    let (rows, cols) = (32, 32 * 5);
    let mut w = Vec::with_capacity(rows * cols / 32 * 18);
    for r in 0..rows {
        for b in 0..cols / 32 {
            w.extend_from_slice(
                &half::f16::from_f32(0.5 + r as f32 / 8.0)
                    .to_bits()
                    .to_le_bytes(),
            );
            let q = if (r + b) % 3 == 0 { 0x00 } else { 0xFF };
            w.extend_from_slice(&[q; 16]);
        }
    }
    for sign in [1.0f32, -1.0] {
        let n = 9;
        let x: Vec<f32> = (0..n * cols)
            .map(|e| if (e / 32) % 2 == 0 { sign } else { -sign * 3.0 })
            .collect();
        let paths = check_packed_q4_0(&w, rows, cols, &x, n);
        println!("packed Q4_0 extremes checked on {paths:?}");
    }
}

/// Only Q4_0, Q4_1 and Q8_0 matrices of whole 16-row groups are packed here (of this
/// file's types); a packing of another shape or type is refused as a caller bug.
#[test]
fn packing_takes_whole_groups_of_the_packed_types_only() {
    let w = weights(Ty::Q4_1, 40, 64, 1);
    let m = WeightMatrix::new(GgmlType::Q4_1, 40, 64, &w).unwrap();
    assert!(
        PackedWeights::pack(&m).is_none(),
        "40 rows: not whole groups"
    );
    let w = weights(Ty::Q8_1, 32, 64, 1);
    let m = WeightMatrix::new(GgmlType::Q8_1, 32, 64, &w).unwrap();
    assert!(PackedWeights::pack(&m).is_none(), "Q8_1 is not packed");
    let w4 = weights(Ty::Q4_0, 32, 64, 1);
    let m4 = WeightMatrix::new(GgmlType::Q4_0, 32, 64, &w4).unwrap();
    let p4 = PackedWeights::pack(&m4).expect("Q4_0 packs");
    assert_eq!((p4.ty(), p4.bytes()), (GgmlType::Q4_0, w4.len()));
    let w4 = weights(Ty::Q4_0, 24, 64, 1);
    let m4 = WeightMatrix::new(GgmlType::Q4_0, 24, 64, &w4).unwrap();
    assert!(
        PackedWeights::pack(&m4).is_none(),
        "24 Q4_0 rows: not whole groups"
    );
    let w8 = weights(Ty::Q8_0, 32, 64, 1);
    let m8 = WeightMatrix::new(GgmlType::Q8_0, 32, 64, &w8).unwrap();
    let p8 = PackedWeights::pack(&m8).expect("Q8_0 packs");
    assert_eq!((p8.ty(), p8.bytes()), (GgmlType::Q8_0, w8.len()));
    let w = weights(Ty::Q4_1, 32, 64, 1);
    let m = WeightMatrix::new(GgmlType::Q4_1, 32, 64, &w).unwrap();
    let p = PackedWeights::pack(&m).unwrap();
    assert_eq!((p.rows(), p.cols(), p.bytes()), (32, 64, w.len()));
    let r = std::panic::catch_unwind(|| {
        let w16 = weights(Ty::Q4_1, 16, 64, 2);
        let m16 = WeightMatrix::new(GgmlType::Q4_1, 16, 64, &w16).unwrap();
        let _ = m16.with_packed(&p);
    });
    assert!(
        r.is_err(),
        "a packing of 32 rows refused for a 16-row matrix"
    );
    let r = std::panic::catch_unwind(|| {
        let _ = m.with_packed(&p8);
    });
    assert!(r.is_err(), "a Q8_0 packing refused for a Q4_1 matrix");
}

/// Every SIMD path this CPU supports gives the portable path's answer (within float
/// summation order: 2e-5 of Σ|terms|) for every weight type, matvec and matmul, 1 and
/// 2 threads; names the paths it ran.
#[test]
fn every_simd_path_matches_portable() {
    let expected = paths_this_cpu_has();
    assert_eq!(
        Isa::available(),
        expected,
        "Isa::available disagrees with the CPU's feature flags"
    );
    let portable = Cpu::new(1, Isa::Portable);
    assert_eq!(portable.isa(), Isa::Portable);
    let mut ran = Vec::new();
    for &isa in &expected {
        for threads in [1, 2] {
            let cpu = Cpu::new(threads, isa);
            assert_eq!(cpu.isa(), isa, "Cpu::new must keep a supported path");
            assert_eq!(cpu.threads(), threads);
            for ty in r::ALL {
                // 45 blocks: odd (AVX-512 tail); 1437 floats: not a multiple of 8/16/32.
                let (rows, cols) = if ty.is_quantized() {
                    (67, 32 * 45)
                } else {
                    (67, 1437)
                };
                let w = weights(ty, rows, cols, 7 + ty as u64);
                let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
                for n in [1usize, 3, 6] {
                    let x = r::Rng(99).vec(n * cols, 1.0);
                    let (mut a, mut b) = (vec![0.0; n * rows], vec![0.0; n * rows]);
                    matmul(&portable, &m, &x, n, &mut a);
                    matmul(&cpu, &m, &x, n, &mut b);
                    let rb = w.len() / rows;
                    for i in 0..n {
                        for rr in 0..rows {
                            let (_, mag) = reference_row(
                                ty,
                                &w[rr * rb..(rr + 1) * rb],
                                &x[i * cols..(i + 1) * cols],
                            );
                            let (pa, pb) = (a[i * rows + rr], b[i * rows + rr]);
                            assert!(
                                close(pb, pa as f64, mag),
                                "{isa} x{threads} {ty:?} n={n} [{i},{rr}]: {pb} vs portable {pa}"
                            );
                        }
                    }
                }
            }
            ran.push(format!("{isa}x{threads}"));
        }
    }
    println!("matmul paths run against portable: {}", ran.join(", "));
    assert_eq!(ran.len(), expected.len() * 2);
}

/// Each output row is computed by the same kernel whatever the thread split or batch
/// grouping, so 1 vs 2 threads and matmul vs per-row matvec are bit-identical.
#[test]
fn thread_count_and_batching_do_not_change_results() {
    for ty in [Ty::Q4_1, Ty::Q8_0, Ty::F32, Ty::Q4_0] {
        let (rows, cols) = (300, 576);
        let w = weights(ty, rows, cols, 3);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let n = 7;
        let x = r::Rng(5).vec(n * cols, 1.0);
        let one = Cpu::new(1, Isa::best());
        let two = Cpu::new(2, Isa::best());
        let (mut a, mut b) = (vec![0.0; n * rows], vec![0.0; n * rows]);
        matmul(&one, &m, &x, n, &mut a);
        matmul(&two, &m, &x, n, &mut b);
        assert_eq!(a, b, "{ty:?}: 1 vs 2 threads");
        for i in 0..n {
            let mut y = vec![0.0; rows];
            matvec(&two, &m, &x[i * cols..(i + 1) * cols], &mut y);
            assert_eq!(
                &a[i * rows..(i + 1) * rows],
                &y[..],
                "{ty:?}: matmul row {i} vs matvec"
            );
        }
    }
}

/// The fused decode product (Q/K/V or gate/up sharing one input): every output equals
/// the test-local reference within tolerance and [`matvec`]'s output bit for bit, on every
/// path, with 1 and 2 threads, for matrices of one type (fused pass) and of mixed types
/// (different activation pairings: one product each).
#[test]
fn matvec_multi_equals_reference_and_matvec() {
    let cols = 576;
    let x = r::Rng(21).vec(cols, 1.0);
    let sets: [&[(Ty, usize)]; 4] = [
        &[(Ty::Q4_1, 300), (Ty::Q4_1, 100), (Ty::Q4_1, 37)],
        &[(Ty::Q8_0, 64), (Ty::Q8_0, 129)],
        &[(Ty::F32, 70), (Ty::F16, 33)],
        &[(Ty::Q4_1, 90), (Ty::Q8_0, 45), (Ty::F32, 20)],
    ];
    for isa in paths_this_cpu_has() {
        for threads in [1, 2] {
            let cpu = Cpu::new(threads, isa);
            for set in sets {
                let data: Vec<Vec<u8>> = set
                    .iter()
                    .enumerate()
                    .map(|(i, &(ty, rows))| weights(ty, rows, cols, 40 + i as u64))
                    .collect();
                let ms: Vec<WeightMatrix> = set
                    .iter()
                    .zip(&data)
                    .map(|(&(ty, rows), w)| WeightMatrix::new(ggml(ty), rows, cols, w).unwrap())
                    .collect();
                let mut ys: Vec<Vec<f32>> =
                    set.iter().map(|&(_, rows)| vec![f32::NAN; rows]).collect();
                {
                    let refs: Vec<&WeightMatrix> = ms.iter().collect();
                    let mut outs: Vec<&mut [f32]> = ys.iter_mut().map(|y| &mut y[..]).collect();
                    matvec_multi(&cpu, &refs, &x, &mut outs);
                }
                for (((&(ty, rows), w), m), y) in set.iter().zip(&data).zip(&ms).zip(&ys) {
                    let rb = w.len() / rows;
                    for (rr, &got) in y.iter().enumerate() {
                        let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], &x);
                        assert!(
                            close(got, want, mag),
                            "{isa} {threads}t {ty:?} row {rr}: {got} vs {want}"
                        );
                    }
                    let mut single = vec![0.0; rows];
                    matvec(&cpu, m, &x, &mut single);
                    assert_eq!(y, &single, "{isa} {threads}t {ty:?}: fused vs matvec");
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "matvec_multi: y[1] has 5 elements, W[1] has 4 rows")]
fn matvec_multi_shape_bug_panics_with_message() {
    let w = weights(Ty::F32, 4, 32, 1);
    let m = WeightMatrix::new(GgmlType::F32, 4, 32, &w).unwrap();
    let (mut a, mut b) = (vec![0.0; 4], vec![0.0; 5]);
    matvec_multi(
        &Cpu::new(1, Isa::Portable),
        &[&m, &m],
        &[0.0; 32],
        &mut [&mut a, &mut b],
    );
}

#[test]
fn dequantize_row_matches_reference_decoder() {
    for ty in r::ALL {
        let (rows, cols) = (5, 96);
        let w = weights(ty, rows, cols, 11);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        assert_eq!((m.rows(), m.cols(), m.ty()), (rows, cols, ggml(ty)));
        let rb = w.len() / rows;
        let mut out = vec![0.0; cols];
        m.dequantize_row(3, &mut out);
        assert_eq!(out, r::decode(ty, &w[3 * rb..4 * rb]), "{ty:?}");
    }
}

#[test]
fn weight_matrix_rejects_bad_shapes_with_typed_errors() {
    let data = vec![0u8; 40];
    assert_eq!(
        WeightMatrix::new(GgmlType::Q4_1, 2, 32, &data[..39]).unwrap_err(),
        QuantError::ByteLength {
            ty: GgmlType::Q4_1,
            elements: 64,
            expected: 40,
            actual: 39
        }
    );
    assert_eq!(
        WeightMatrix::new(GgmlType::Q4_1, 1, 48, &data).unwrap_err(),
        QuantError::NotBlockMultiple {
            ty: GgmlType::Q4_1,
            what: "columns",
            len: 48,
            block: 32
        }
    );
    assert_eq!(
        WeightMatrix::new(GgmlType::Q3K, 1, 256, &data).unwrap_err(),
        QuantError::Unsupported { ty: GgmlType::Q3K }
    );
    assert_eq!(
        WeightMatrix::new(GgmlType::F32, usize::MAX / 2, 3, &data).unwrap_err(),
        QuantError::Overflow {
            ty: GgmlType::F32,
            rows: usize::MAX / 2,
            cols: 3
        }
    );
    assert!(quant::supported(GgmlType::Q4_1));
}

#[test]
#[should_panic(expected = "matvec: x has 31 elements, W has 32 cols")]
fn matvec_shape_bug_panics_with_message() {
    let w = vec![0u8; 20];
    let m = WeightMatrix::new(GgmlType::Q4_1, 1, 32, &w).unwrap();
    matvec(&Cpu::new(1, Isa::Portable), &m, &[0.0; 31], &mut [0.0]);
}

/// The largest SmolLM2-135M shape (the 49152x576 output head) on synthetic weights,
/// checked on sampled rows including the last one of the last task.
#[test]
fn lm_head_shape_matches_reference_on_sampled_rows() {
    let (rows, cols) = (49152, 576);
    for ty in [Ty::Q8_0, Ty::Q4_1] {
        let w = weights(ty, rows, cols, 21);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let x = r::Rng(4).vec(cols, 1.0);
        let mut y = vec![0.0; rows];
        matvec(&Cpu::new(2, Isa::best()), &m, &x, &mut y);
        let rb = w.len() / rows;
        for rr in (0..rows).step_by(997).chain([rows - 1]) {
            let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], &x);
            assert!(
                close(y[rr], want, mag),
                "{ty:?} row {rr}: {} vs {want}",
                y[rr]
            );
        }
    }
}
