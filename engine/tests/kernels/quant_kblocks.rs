//! Q5_0, Q5_1 and the K-quants (Q4_K, Q5_K, Q6_K with Q8_K) against test-local GGML references, on every SIMD path.

use crate::kquant_reference;

use engine::gguf::GgmlType;
use engine::kernels::Isa;
use engine::kernels::matmul::packed::PackedWeights;
use engine::kernels::matmul::{Cpu, WeightMatrix, matmul, matmul_many, matvec, uses_packed};
use engine::quant::{self, Q8Activation, QuantError};
use kquant_reference as r;
use kquant_reference::Ty;
use proptest::prelude::*;

fn ggml(ty: Ty) -> GgmlType {
    match ty {
        Ty::Q5_0 => GgmlType::Q5_0,
        Ty::Q5_1 => GgmlType::Q5_1,
        Ty::Q4K => GgmlType::Q4K,
        Ty::Q5K => GgmlType::Q5K,
        Ty::Q6K => GgmlType::Q6K,
    }
}

fn any_ty() -> impl Strategy<Value = Ty> {
    prop::sample::select(r::ALL.to_vec())
}

/// The reference product of one weight row with `x` quantized as ggml does for it (Q8_K
/// for the K-quants, Q8_0 / Q8_1 for Q5_0 / Q5_1): value and `Σ |terms|`.
fn reference_row(ty: Ty, row: &[u8], x: &[f32]) -> (f64, f64) {
    if ty.is_k() {
        r::vec_dot_q8k(ty, row, &r::quantize_q8k(x))
    } else {
        r::vec_dot_q5(ty, row, &r::quantize_q8(x))
    }
}

/// Float summation order only: 2e-5 of the terms' magnitudes.
fn close(got: f32, want: f64, mag: f64) -> bool {
    (got as f64 - want).abs() <= 2e-5 * mag + 1e-6
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `quant::dequantize` equals ggml's `dequantize_row_*` loops (test-local) exactly.
    #[test]
    fn kquant_dequantize_matches_reference_decoder(ty in any_ty(), blocks in 1usize..7, seed in any::<u64>()) {
        let (bl, _) = ty.geometry();
        let bytes = r::raw_blocks(ty, blocks, seed);
        let mut out = vec![f32::NAN; blocks * bl];
        quant::dequantize(ggml(ty), &bytes, &mut out).unwrap();
        prop_assert_eq!(out, r::decode(ty, &bytes));
    }

    /// The Q8_K activation equals `quantize_row_q8_K_ref` (quants, f32 scale, 16-quant
    /// sums) on every SIMD path, all-zero blocks included.
    #[test]
    fn q8k_activation_matches_reference(blocks in 1usize..5, rows in 1usize..4, scale in 0.001f32..50.0, zero in any::<bool>(), seed in any::<u64>()) {
        let cols = blocks * 256;
        let mut x = r::Rng(seed).vec(rows * cols, scale);
        if zero {
            x[..256].fill(0.0);
        }
        for isa in Isa::available() {
            let mut act = Q8Activation::new();
            act.quantize_on(isa, GgmlType::Q8K, &x, rows, cols);
            prop_assert_eq!(act.ty(), GgmlType::Q8K);
            for i in 0..rows {
                let want = r::quantize_q8k(&x[i * cols..(i + 1) * cols]);
                let row = act.row(i);
                prop_assert_eq!(row.qs, &want.qs[..], "{}", isa);
                prop_assert_eq!(row.d, &want.d[..], "{}", isa);
                prop_assert_eq!(row.bsums, &want.bsums[..], "{}", isa);
                prop_assert!(row.s.is_empty());
            }
        }
    }

    /// Values that scale to exact halves (the block's largest magnitude is −127, so the
    /// scale is 1): Q8_K rounds them to even as ggml's `nearest_int` does, not away from zero.
    #[test]
    fn q8k_activation_rounds_halves_to_even_as_reference(halves in prop::collection::vec(-126i32..126, 255)) {
        let mut x: Vec<f32> = halves.iter().map(|&k| k as f32 + 0.5).collect();
        x.push(-127.0);
        let want = r::quantize_q8k(&x);
        for isa in Isa::available() {
            let mut act = Q8Activation::new();
            act.quantize_on(isa, GgmlType::Q8K, &x, 1, 256);
            prop_assert_eq!(act.row(0).qs, &want.qs[..], "{}", isa);
        }
    }

    /// `dot_q8` equals ggml's reference `vec_dot` (Q5_0·Q8_0, Q5_1·Q8_1, Q4_K·Q8_K,
    /// Q5_K·Q8_K, Q6_K·Q8_K) within 1e-5 relative to the sum of its terms' magnitudes.
    #[test]
    fn kquant_dot_q8_matches_reference_vec_dot(ty in any_ty(), blocks in 1usize..7, seed in any::<u64>()) {
        let (bl, _) = ty.geometry();
        let bytes = r::raw_blocks(ty, blocks, seed);
        let x = r::Rng(seed ^ 0x5555).vec(blocks * bl, 3.0);
        let act_ty = quant::activation_type(ggml(ty)).unwrap();
        let want_act = match ty {
            Ty::Q5_0 => GgmlType::Q8_0,
            Ty::Q5_1 => GgmlType::Q8_1,
            _ => GgmlType::Q8K,
        };
        prop_assert_eq!(act_ty, want_act);
        let mut act = Q8Activation::new();
        act.quantize(act_ty, &x, 1, x.len());
        let got = quant::dot_q8(ggml(ty), &bytes, act.row(0)).unwrap() as f64;
        let (want, mag) = reference_row(ty, &bytes, &x);
        prop_assert!((got - want).abs() <= 1e-5 * mag + 1e-7, "{ty:?}: {got} vs {want} (Σ|t| {mag})");
    }

    /// `dot_f32` equals the f64 dot of the reference-decoded row with x, within 1e-5 · Σ|w·x|.
    #[test]
    fn kquant_dot_f32_matches_reference(ty in any_ty(), blocks in 1usize..7, seed in any::<u64>()) {
        let (bl, _) = ty.geometry();
        let bytes = r::raw_blocks(ty, blocks, seed);
        let x = r::Rng(seed ^ 0xABCD).vec(blocks * bl, 2.0);
        let got = quant::dot_f32(ggml(ty), &bytes, &x).unwrap() as f64;
        let (want, mag) = r::dot_f64(&r::decode(ty, &bytes), &x);
        prop_assert!((got - want).abs() <= 1e-5 * mag + 1e-7, "{ty:?}: {got} vs {want}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// matvec and matmul of the new types equal the reference on every SIMD path this
    /// CPU has (odd row counts, odd block counts, n not a multiple of the 4-row group),
    /// and every path's result is the portable path's bit for bit: each block's integer
    /// sums are exact and every path scales and adds them in the same order.
    #[test]
    fn kquant_products_match_reference_on_every_path_and_portable_bit_for_bit(
        ty in any_ty(), rows in 1usize..40, blocks in 1usize..7, n in 1usize..7, seed in any::<u64>()) {
        let (bl, bb) = ty.geometry();
        let cols = blocks * bl;
        let w = r::raw_blocks(ty, rows * blocks, seed);
        let x = r::Rng(seed ^ 1).vec(n * cols, 2.0);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let rb = blocks * bb;
        let mut portable = vec![f32::NAN; n * rows];
        matmul(&Cpu::new(1, Isa::Portable), &m, &x, n, &mut portable);
        for isa in Isa::available() {
            let cpu = Cpu::new(2, isa);
            let mut y = vec![f32::NAN; n * rows];
            matmul(&cpu, &m, &x, n, &mut y);
            let mut yv = vec![f32::NAN; rows];
            matvec(&cpu, &m, &x[..cols], &mut yv);
            for i in 0..n {
                for rr in 0..rows {
                    let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], &x[i * cols..(i + 1) * cols]);
                    let got = y[i * rows + rr];
                    prop_assert!(close(got, want, mag), "{isa} {ty:?} {rows}x{cols} n={n} y[{i},{rr}] = {got}, want {want}");
                    prop_assert_eq!(got.to_bits(), portable[i * rows + rr].to_bits(), "{} {:?} y[{},{}] vs portable", isa, ty, i, rr);
                    if i == 0 {
                        prop_assert_eq!(yv[rr].to_bits(), got.to_bits(), "{} {:?} matvec y[{}]", isa, ty, rr);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Q5_0 matrices packed 16 rows to a block (fifth bits re-laid, quants taken unsigned
    /// and `16 · Σ a` taken off), on every path with the packed Q5_0 kernels: each output
    /// equals the reference; each token's row is bit for bit its matvec alone whatever the
    /// batch (register tiles of 8, 4, 2, 1; cache blocks of 64 tokens), on 1 and 2 threads,
    /// and inside a fused product with a second packed matrix; every such path gives the
    /// same bits. Only Q5_0 matrices of whole 16-row groups are packed.
    #[test]
    fn packed_q5_0_products_match_reference_and_each_row_alone(
        groups in 1usize..6, blocks in 1usize..7,
        n in prop::sample::select(vec![1usize, 2, 3, 5, 8, 9, 13, 64, 65, 77]),
        seed in any::<u64>()) {
        let (rows, cols) = (16 * groups, 32 * blocks);
        let w = r::raw_blocks(Ty::Q5_0, rows * blocks, seed);
        let m = WeightMatrix::new(GgmlType::Q5_0, rows, cols, &w).unwrap();
        let p = PackedWeights::pack(&m).expect("whole 16-row groups pack");
        let pm = m.with_packed(&p);
        let other = r::raw_blocks(Ty::Q5_0, 16 * blocks, seed ^ 7);
        let om = WeightMatrix::new(GgmlType::Q5_0, 16, cols, &other).unwrap();
        let op = PackedWeights::pack(&om).unwrap();
        let om = om.with_packed(&op);
        let short = WeightMatrix::new(GgmlType::Q5_0, 15, cols, &w[..15 * blocks * 22]).unwrap();
        prop_assert!(PackedWeights::pack(&short).is_none(), "15 rows are not a whole group");
        let x = r::Rng(seed ^ 3).vec(n * cols, 2.0);
        let rb = blocks * 22;
        let paths: Vec<Isa> = Isa::available()
            .into_iter()
            .filter(|&i| uses_packed(i, GgmlType::Q5_0))
            .collect();
        #[cfg(target_arch = "x86_64")]
        prop_assert!(!is_x86_feature_detected!("avx2") || !paths.is_empty(), "no packed Q5_0 path on an AVX2 CPU");
        let mut first: Option<(Isa, Vec<f32>)> = None;
        for isa in paths {
            let (one, two) = (Cpu::new(1, isa), Cpu::new(2, isa));
            let (mut y1, mut y2) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * rows]);
            matmul(&one, &pm, &x, n, &mut y1);
            matmul(&two, &pm, &x, n, &mut y2);
            prop_assert_eq!(&y1, &y2, "{} 1 vs 2 threads, n = {}", isa, n);
            let (mut ya, mut yb, mut yo) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * 16], vec![f32::NAN; n * 16]);
            matmul_many(&two, &[&pm, &om], &x, n, &mut [&mut ya, &mut yb]);
            matmul(&two, &om, &x, n, &mut yo);
            prop_assert_eq!(&ya, &y1, "{} fused vs matmul, n = {}", isa, n);
            prop_assert_eq!(&yb, &yo, "{} fused (second) vs matmul, n = {}", isa, n);
            for i in 0..n {
                let xi = &x[i * cols..(i + 1) * cols];
                let mut yv = vec![f32::NAN; rows];
                matvec(&one, &pm, xi, &mut yv);
                prop_assert_eq!(&y1[i * rows..(i + 1) * rows], &yv[..], "{} token {} of {}: batch vs alone", isa, i, n);
                for rr in (i % 3..rows).step_by(3) {
                    let (want, mag) = reference_row(Ty::Q5_0, &w[rr * rb..(rr + 1) * rb], xi);
                    let got = y1[i * rows + rr];
                    prop_assert!(close(got, want, mag), "{} {}x{} n {} y[{},{}] = {}, want {}", isa, rows, cols, n, i, rr, got, want);
                }
            }
            match &first {
                None => first = Some((isa, y1)),
                Some((i0, y0)) => prop_assert_eq!(&y1, y0, "{} vs {} packed", isa, i0),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Q4_K, Q5_K and Q6_K matrices packed 16 rows to a super-block (scales unpacked, each
    /// sub-block's nibbles laid as a Q4_1 block, Q5_K's fifth bits re-laid as Q5_0's,
    /// Q6_K's top bits re-laid), on every path
    /// with the packed K-quant kernels: every output is the portable path's bit for bit
    /// (the same exact integer sums, scaled and added in the same order), whatever the
    /// batch (register tiles of 8, 4, 2, 1; cache blocks of 64 tokens), on 1 and 2
    /// threads, alone (matvec) and inside a fused product with a second packed matrix;
    /// each output equals the reference. Only whole 16-row groups are packed.
    #[test]
    fn packed_kquant_products_match_reference_and_portable_bit_for_bit(
        ty in prop::sample::select(vec![Ty::Q4K, Ty::Q5K, Ty::Q6K]),
        groups in 1usize..5, blocks in 1usize..4,
        n in prop::sample::select(vec![1usize, 2, 3, 5, 8, 9, 13, 64, 65, 77]),
        seed in any::<u64>()) {
        let (_, bb) = ty.geometry();
        let (rows, cols) = (16 * groups, 256 * blocks);
        let w = r::raw_blocks(ty, rows * blocks, seed);
        let m = WeightMatrix::new(ggml(ty), rows, cols, &w).unwrap();
        let p = PackedWeights::pack(&m).expect("whole 16-row groups pack");
        let pm = m.with_packed(&p);
        let other = r::raw_blocks(ty, 16 * blocks, seed ^ 7);
        let om = WeightMatrix::new(ggml(ty), 16, cols, &other).unwrap();
        let op = PackedWeights::pack(&om).unwrap();
        let om = om.with_packed(&op);
        let short = WeightMatrix::new(ggml(ty), 15, cols, &w[..15 * blocks * bb]).unwrap();
        prop_assert!(PackedWeights::pack(&short).is_none(), "15 rows are not a whole group");
        let x = r::Rng(seed ^ 3).vec(n * cols, 2.0);
        let rb = blocks * bb;
        let mut portable = vec![f32::NAN; n * rows];
        matmul(&Cpu::new(1, Isa::Portable), &m, &x, n, &mut portable);
        let mut portable_o = vec![f32::NAN; n * 16];
        let unpacked_o = WeightMatrix::new(ggml(ty), 16, cols, &other).unwrap();
        matmul(&Cpu::new(1, Isa::Portable), &unpacked_o, &x, n, &mut portable_o);
        let paths: Vec<Isa> = Isa::available()
            .into_iter()
            .filter(|&i| uses_packed(i, ggml(ty)))
            .collect();
        #[cfg(target_arch = "x86_64")]
        prop_assert!(!is_x86_feature_detected!("avx2") || !paths.is_empty(), "no packed {:?} path on an AVX2 CPU", ty);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
        for isa in paths {
            let (one, two) = (Cpu::new(1, isa), Cpu::new(2, isa));
            let (mut y1, mut y2) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * rows]);
            matmul(&one, &pm, &x, n, &mut y1);
            matmul(&two, &pm, &x, n, &mut y2);
            prop_assert_eq!(bits(&y1), bits(&portable), "{} {:?} vs portable, n = {}", isa, ty, n);
            prop_assert_eq!(bits(&y2), bits(&portable), "{} {:?} 2 threads vs portable, n = {}", isa, ty, n);
            let (mut ya, mut yb) = (vec![f32::NAN; n * rows], vec![f32::NAN; n * 16]);
            matmul_many(&two, &[&pm, &om], &x, n, &mut [&mut ya, &mut yb]);
            prop_assert_eq!(bits(&ya), bits(&portable), "{} {:?} fused vs portable, n = {}", isa, ty, n);
            prop_assert_eq!(bits(&yb), bits(&portable_o), "{} {:?} fused (second) vs portable, n = {}", isa, ty, n);
            for i in 0..n {
                let xi = &x[i * cols..(i + 1) * cols];
                let mut yv = vec![f32::NAN; rows];
                matvec(&one, &pm, xi, &mut yv);
                prop_assert_eq!(bits(&yv), bits(&portable[i * rows..(i + 1) * rows]), "{} {:?} token {} of {}: alone vs portable", isa, ty, i, n);
                for rr in (i % 3..rows).step_by(3) {
                    let (want, mag) = reference_row(ty, &w[rr * rb..(rr + 1) * rb], xi);
                    let got = y1[i * rows + rr];
                    prop_assert!(close(got, want, mag), "{} {:?} {}x{} n {} y[{},{}] = {}, want {}", isa, ty, rows, cols, n, i, rr, got, want);
                }
            }
        }
    }
}

/// Packed Q5_K at the extremes of its integer dot: every quant 31 (nibbles 15, fifth bits
/// set) or 0, scales and minimums at 63, against activations whose every byte is −128
/// (a constant block) or alternates ±127: the largest byte-dot sums the kernels hold in
/// 16 bits give the portable path's bits on every packed path (no saturation).
#[test]
fn packed_q5_k_extreme_blocks_match_portable() {
    let (rows, blocks) = (32, 2);
    let cols = 256 * blocks;
    let mut w = Vec::new();
    for r in 0..rows {
        for b in 0..blocks {
            let mut blk = [0u8; 176];
            r::put_h(&mut blk, 0, 0.25 + r as f32 / 64.0);
            r::put_h(&mut blk, 2, 0.125);
            // 6-bit scales and minimums all 63 (`get_scale_min_k4`'s packing).
            blk[4..16].fill(0xFF);
            let q = if (r + b) % 4 == 3 { 0x00 } else { 0xFF };
            blk[16..176].fill(q);
            w.extend_from_slice(&blk);
        }
    }
    let m = WeightMatrix::new(GgmlType::Q5K, rows, cols, &w).unwrap();
    let p = PackedWeights::pack(&m).expect("whole 16-row groups pack");
    let pm = m.with_packed(&p);
    let n = 9;
    for x in [
        vec![-1.0f32; n * cols],
        (0..n * cols)
            .map(|e| if e % 2 == 0 { 1.0 } else { -1.0 })
            .collect(),
    ] {
        let mut portable = vec![f32::NAN; n * rows];
        matmul(&Cpu::new(1, Isa::Portable), &m, &x, n, &mut portable);
        for isa in Isa::available()
            .into_iter()
            .filter(|&i| uses_packed(i, GgmlType::Q5K))
        {
            let mut y = vec![f32::NAN; n * rows];
            matmul(&Cpu::new(2, isa), &pm, &x, n, &mut y);
            let mut yv = vec![f32::NAN; rows];
            matvec(&Cpu::new(1, isa), &pm, &x[..cols], &mut yv);
            for (i, (got, want)) in y.iter().zip(&portable).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{isa} y[{i}]: {got} vs portable {want}"
                );
            }
            for (rr, (got, want)) in yv.iter().zip(&portable).enumerate() {
                assert_eq!(got.to_bits(), want.to_bits(), "{isa} matvec y[{rr}]");
            }
        }
    }
}

#[test]
fn kquant_types_are_supported_but_not_quantized_here() {
    for ty in [
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
    ] {
        assert!(quant::supported(ty), "{ty}");
        assert_eq!(
            quant::quantize(ty, &[0.5; 256]),
            Err(QuantError::NoQuantizer { ty })
        );
    }
    for ty in [GgmlType::Q2K, GgmlType::Q3K, GgmlType::Q8K, GgmlType::IQ4NL] {
        assert!(!quant::supported(ty), "{ty}");
    }
}

#[test]
fn kquant_rows_must_be_whole_superblocks() {
    // SmolLM2's 576-wide rows are 2.25 super-blocks: a K-quant matrix of them is refused.
    let data = vec![0u8; 144 * 9];
    assert_eq!(
        WeightMatrix::new(GgmlType::Q4K, 4, 576, &data).unwrap_err(),
        QuantError::NotBlockMultiple {
            ty: GgmlType::Q4K,
            what: "columns",
            len: 576,
            block: 256
        }
    );
    let mut out = vec![0.0f32; 256];
    assert_eq!(
        quant::dequantize(GgmlType::Q6K, &[0u8; 209], &mut out),
        Err(QuantError::ByteLength {
            ty: GgmlType::Q6K,
            elements: 256,
            expected: 210,
            actual: 209
        })
    );
}

#[derive(serde::Deserialize)]
struct GgmlRows {
    rows: Vec<GgmlRow>,
}

#[derive(serde::Deserialize)]
struct GgmlRow {
    #[serde(rename = "type")]
    ty: String,
    tensor: String,
    cols: usize,
    act_type: String,
    row_hex: String,
    dequantized: Vec<f32>,
    x: Vec<f32>,
    act_hex: String,
    vec_dot: f32,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// ggml's bytes of a quantized activation row (`block_q8_K`: f32 d, 256 qs, 16 i16
/// bsums; `block_q8_0`: f16 d, 32 qs; `block_q8_1`: f16 d, f16 s, 32 qs).
fn ggml_act_bytes(ty: GgmlType, row: quant::Q8Row<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let h = |v: f32| half::f16::from_f32(v).to_bits().to_le_bytes();
    match ty {
        GgmlType::Q8K => {
            for (b, q) in row.qs.chunks(256).enumerate() {
                out.extend(row.d[b].to_le_bytes());
                out.extend(q.iter().map(|&v| v as u8));
                for s in &row.bsums[b * 16..(b + 1) * 16] {
                    out.extend(s.to_le_bytes());
                }
            }
        }
        _ => {
            for (b, q) in row.qs.chunks(32).enumerate() {
                out.extend(h(row.d[b]));
                if ty == GgmlType::Q8_1 {
                    out.extend(h(row.s[b]));
                }
                out.extend(q.iter().map(|&v| v as u8));
            }
        }
    }
    out
}

/// Real rows of the llama.cpp-quantized SmolLM2 files (one tensor per type), decoded and
/// multiplied by ggml itself (`fixtures/reference/kquant-blocks-ggml.json`, captured by
/// scripts/capture-kquant-blocks): the engine decodes them to the same f32 values, quantizes
/// the activation to ggml's bytes, and its product on every path equals ggml's `vec_dot`
/// within float summation order.
#[test]
fn kquant_real_rows_match_ggml_reference() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/reference/kquant-blocks-ggml.json");
    let g: GgmlRows = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut seen = Vec::new();
    for r in &g.rows {
        let ty = GgmlType::ALL
            .into_iter()
            .find(|t| t.name() == r.ty)
            .unwrap();
        let act_ty = GgmlType::ALL
            .into_iter()
            .find(|t| t.name() == r.act_type)
            .unwrap();
        assert_eq!(quant::activation_type(ty), Some(act_ty), "{}", r.ty);
        let row = unhex(&r.row_hex);
        let mut dec = vec![f32::NAN; r.cols];
        quant::dequantize(ty, &row, &mut dec).unwrap();
        for (j, (a, b)) in dec.iter().zip(&r.dequantized).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1e-3),
                "{} {} element {j}: {a} vs ggml {b}",
                r.ty,
                r.tensor
            );
        }
        let mut act = Q8Activation::new();
        act.quantize(act_ty, &r.x, 1, r.cols);
        assert_eq!(
            ggml_act_bytes(act_ty, act.row(0)),
            unhex(&r.act_hex),
            "{}: activation bytes differ from ggml's {}",
            r.ty,
            r.act_type
        );
        let (_, mag) = r::dot_f64(&r.dequantized, &r.x);
        let m = WeightMatrix::new(ty, 1, r.cols, &row).unwrap();
        for isa in Isa::available() {
            let mut y = [f32::NAN];
            matvec(&Cpu::new(1, isa), &m, &r.x, &mut y);
            assert!(
                ((y[0] - r.vec_dot) as f64).abs() <= 2e-5 * mag,
                "{isa} {} {}: {} vs ggml vec_dot {}",
                r.ty,
                r.tensor,
                y[0],
                r.vec_dot
            );
            println!(
                "{isa} {}: engine {} ggml {} (Σ|w·x| {mag:.3})",
                r.ty, y[0], r.vec_dot
            );
        }
        seen.push(r.ty.as_str());
    }
    assert_eq!(seen, ["Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]);
}
