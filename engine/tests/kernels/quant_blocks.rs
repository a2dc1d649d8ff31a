//! Block types against test-local GGML references: decode, reference quantizer, dots, round trips.

use crate::quant_reference;

use engine::gguf::GgmlType;
use engine::kernels::Isa;
use engine::quant::{self, Q8Activation, QuantError};
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

fn any_ty() -> impl Strategy<Value = Ty> {
    prop::sample::select(r::ALL.to_vec())
}

/// Random raw blocks of `ty` with finite f16 scales in a sane range (random bytes elsewhere).
fn raw_blocks(ty: Ty, blocks: usize, seed: u64) -> Vec<u8> {
    let (_, bb) = ty.geometry();
    let mut rng = r::Rng(seed);
    let mut bytes: Vec<u8> = (0..blocks * bb).map(|_| rng.next_u64() as u8).collect();
    for blk in bytes.chunks_mut(bb) {
        match ty {
            Ty::F32 => blk.copy_from_slice(&(rng.unit() * 3.0).to_le_bytes()),
            Ty::F16 => r::put_h(blk, 0, rng.unit() * 3.0),
            Ty::BF16 => {
                let v = half::bf16::from_f32(rng.unit() * 3.0);
                blk.copy_from_slice(&v.to_bits().to_le_bytes());
            }
            Ty::Q8_0 | Ty::Q4_0 => r::put_h(blk, 0, rng.unit() * 0.1),
            Ty::Q8_1 | Ty::Q4_1 => {
                r::put_h(blk, 0, rng.unit() * 0.1);
                r::put_h(blk, 2, rng.unit());
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `quant::dequantize` equals the test-local block decoder exactly.
    #[test]
    fn dequantize_matches_reference_decoder(ty in any_ty(), blocks in 1usize..9, seed in any::<u64>()) {
        let (bl, _) = ty.geometry();
        let bytes = raw_blocks(ty, blocks, seed);
        let mut out = vec![f32::NAN; blocks * bl];
        quant::dequantize(ggml(ty), &bytes, &mut out).unwrap();
        let want = r::decode(ty, &bytes);
        prop_assert_eq!(out, want);
    }

    /// `quant::quantize` produces the bytes of ggml's reference quantizer, bit for bit.
    #[test]
    fn quantize_matches_reference_quantizer(ty in any_ty(), blocks in 1usize..7, scale in 0.01f32..100.0, seed in any::<u64>()) {
        let (bl, _) = ty.geometry();
        let n = blocks * bl.max(32) + if bl == 1 { 3 } else { 0 };
        let mut x = r::Rng(seed).vec(n, scale);
        // A constant block and an all-zero block exercise d == 0.
        if n >= 64 && bl == 32 {
            for v in &mut x[..32] { *v = 0.0; }
            for v in &mut x[32..64] { *v = scale * 0.5; }
        }
        let got = quant::quantize(ggml(ty), &x).unwrap();
        prop_assert_eq!(got, r::encode(ty, &x));
    }

    /// Quantize then dequantize stays within the format's error bound, per element:
    /// F32 exact; F16 relative 2^-11 (|x| ≥ 2^-14 here); BF16 relative 2^-8;
    /// Q8_0/Q8_1 `d/2 + 127·|d − f16(d)|`; Q4_0 `|d| + 8·|d − f16(d)|` (the top value
    /// clamps to 15, so a full step); Q4_1 `d/2 + 15·|d − f16(d)| + |m − f16(m)|`,
    /// with `d`, `m` the unrounded block scale and minimum (plus 1e-6 relative slack).
    #[test]
    fn round_trip_within_format_bound(ty in any_ty(), blocks in 1usize..6, scale in 0.01f32..100.0, seed in any::<u64>()) {
        let n = blocks * 32;
        let x: Vec<f32> = r::Rng(seed).vec(n, scale).into_iter().map(|v| if v.abs() < 1e-3 { 1e-3 } else { v }).collect();
        let bytes = quant::quantize(ggml(ty), &x).unwrap();
        let mut y = vec![0.0f32; n];
        quant::dequantize(ggml(ty), &bytes, &mut y).unwrap();
        let f16r = |v: f32| (v - half::f16::from_f32(v).to_f32()).abs();
        for (b, (xb, yb)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let min = xb.iter().cloned().fold(f32::INFINITY, f32::min);
            let max = xb.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            for (j, (&a, &e)) in xb.iter().zip(yb).enumerate() {
                let bound = match ty {
                    Ty::F32 => 0.0,
                    Ty::F16 => a.abs() * 2f32.powi(-11),
                    Ty::BF16 => a.abs() * 2f32.powi(-8),
                    Ty::Q8_0 | Ty::Q8_1 => { let d = amax / 127.0; d / 2.0 + 127.0 * f16r(d) }
                    Ty::Q4_0 => { let d = amax / 8.0; d + 8.0 * f16r(d) }
                    Ty::Q4_1 => { let d = (max - min) / 15.0; d / 2.0 + 15.0 * f16r(d) + f16r(min) }
                } * (1.0 + 1e-6) + amax * 1e-6;
                prop_assert!((a - e).abs() <= bound, "{ty:?} block {b} elem {j}: {a} -> {e}, bound {bound}");
            }
        }
    }

    /// `dot_f32` equals the f64 dot of the reference-decoded row with x, within
    /// 1e-5 · Σ|w·x| (f32 accumulation), for lengths not a multiple of 8 or 16 too.
    #[test]
    fn dot_f32_matches_reference(ty in any_ty(), len_units in 1usize..70, seed in any::<u64>()) {
        let (bl, _) = ty.geometry();
        let blocks = if bl == 1 { len_units } else { len_units.div_ceil(10) };
        let bytes = raw_blocks(ty, blocks, seed);
        let x = r::Rng(seed ^ 0xABCD).vec(blocks * bl, 2.0);
        let got = quant::dot_f32(ggml(ty), &bytes, &x).unwrap() as f64;
        let (want, mag) = r::dot_f64(&r::decode(ty, &bytes), &x);
        prop_assert!((got - want).abs() <= 1e-5 * mag + 1e-7, "{ty:?}: {got} vs {want} (Σ|wx| {mag})");
    }

    /// The activation quantizer equals ggml's `quantize_row_q8_1_ref` (f16-rounded d, s) on
    /// every SIMD path.
    #[test]
    fn activation_quantizer_matches_reference(blocks in 1usize..9, rows in 1usize..4, scale in 0.001f32..50.0, seed in any::<u64>()) {
        let cols = blocks * 32;
        let x = r::Rng(seed).vec(rows * cols, scale);
        for (ty, isa) in [GgmlType::Q8_0, GgmlType::Q8_1].into_iter().flat_map(|t| Isa::available().into_iter().map(move |i| (t, i))) {
            let mut act = Q8Activation::new();
            act.quantize_on(isa, ty, &x, rows, cols);
            prop_assert_eq!(act.rows(), rows);
            for i in 0..rows {
                let want = r::quantize_act(&x[i * cols..(i + 1) * cols]);
                let row = act.row(i);
                prop_assert_eq!(row.qs, &want.qs[..]);
                prop_assert_eq!(row.d, &want.d[..]);
                if ty == GgmlType::Q8_1 {
                    prop_assert_eq!(row.s, &want.s[..]);
                } else {
                    prop_assert!(row.s.is_empty());
                }
            }
        }
    }

    /// The quantizers' rounding equals `roundf` (Rust's `f32::round`) bit for bit on every
    /// f32: any bit pattern, exact halves `k + 0.5` and their two float neighbours.
    #[test]
    fn round_half_away_equals_reference_roundf(bits in any::<u32>(), k in -(1i32 << 24)..(1i32 << 24), side in 0usize..3) {
        let v = f32::from_bits(bits);
        let (got, want) = (quant::round_half_away(v), v.round());
        prop_assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{v:e}: {got:e} vs {want:e}");
        let half = k as f32 + 0.5;
        let v = [half, half.next_down(), half.next_up()][side];
        let (got, want) = (quant::round_half_away(v), v.round());
        prop_assert_eq!(got.to_bits(), want.to_bits(), "{:e}: {:e} vs {:e}", v, got, want);
    }

    /// Blocks whose scaled values fall exactly halfway between two quants (the block's
    /// largest magnitude is 127, so the scale is 1): the activation quantizer rounds them
    /// away from zero, as ggml's reference does, on every SIMD path.
    #[test]
    fn activation_quantizer_rounds_halves_as_reference(halves in prop::collection::vec(-126i32..126, 31), sign in any::<bool>()) {
        let mut x: Vec<f32> = halves.iter().map(|&k| k as f32 + 0.5).collect();
        x.push(if sign { 127.0 } else { -127.0 });
        for (ty, isa) in [GgmlType::Q8_0, GgmlType::Q8_1].into_iter().flat_map(|t| Isa::available().into_iter().map(move |i| (t, i))) {
            let mut act = Q8Activation::new();
            act.quantize_on(isa, ty, &x, 1, 32);
            let want = r::quantize_act(&x);
            prop_assert_eq!(act.row(0).qs, &want.qs[..], "{:?}", isa);
        }
    }

    /// `dot_q8` equals ggml's reference `vec_dot` (Q4_0·Q8_0, Q4_1·Q8_1, Q8_0·Q8_0,
    /// Q8_1·Q8_0) within 1e-5 relative to the sum of its terms' magnitudes.
    #[test]
    fn dot_q8_matches_reference_vec_dot(ty in prop::sample::select(vec![Ty::Q8_0, Ty::Q8_1, Ty::Q4_0, Ty::Q4_1]),
                                        blocks in 1usize..9, seed in any::<u64>()) {
        let bytes = raw_blocks(ty, blocks, seed);
        let x = r::Rng(seed ^ 0x5555).vec(blocks * 32, 3.0);
        let act_ty = quant::activation_type(ggml(ty)).unwrap();
        prop_assert_eq!(act_ty, if ty == Ty::Q4_1 { GgmlType::Q8_1 } else { GgmlType::Q8_0 });
        let mut act = Q8Activation::new();
        act.quantize(act_ty, &x, 1, x.len());
        let got = quant::dot_q8(ggml(ty), &bytes, act.row(0)).unwrap() as f64;
        let (want, mag) = r::vec_dot_q8(ty, &bytes, &r::quantize_act(&x));
        prop_assert!((got - want).abs() <= 1e-5 * mag + 1e-7, "{ty:?}: {got} vs {want}");
    }
}

#[test]
fn supported_types_are_exactly_the_twelve() {
    let got: Vec<&str> = GgmlType::ALL
        .iter()
        .filter(|t| quant::supported(**t))
        .map(|t| t.name())
        .collect();
    assert_eq!(
        got,
        [
            "F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q4_K", "Q5_K", "Q6_K",
            "BF16"
        ]
    );
    assert_eq!(quant::activation_type(GgmlType::F32), None);
    assert_eq!(quant::activation_type(GgmlType::Q4_0), Some(GgmlType::Q8_0));
}

#[test]
fn bad_lengths_and_types_are_typed_errors() {
    let mut out = vec![0.0f32; 32];
    assert_eq!(
        quant::dequantize(GgmlType::Q4_1, &[0u8; 19], &mut out),
        Err(QuantError::ByteLength {
            ty: GgmlType::Q4_1,
            elements: 32,
            expected: 20,
            actual: 19
        })
    );
    let mut odd = vec![0.0f32; 33];
    assert_eq!(
        quant::dequantize(GgmlType::Q8_0, &[0u8; 34], &mut odd),
        Err(QuantError::NotBlockMultiple {
            ty: GgmlType::Q8_0,
            what: "destination",
            len: 33,
            block: 32
        })
    );
    assert_eq!(
        quant::dequantize(GgmlType::Q2K, &[0u8; 84], &mut vec![0.0; 256]),
        Err(QuantError::Unsupported { ty: GgmlType::Q2K })
    );
    assert_eq!(
        quant::quantize(GgmlType::Q4_0, &[1.0; 31]),
        Err(QuantError::NotBlockMultiple {
            ty: GgmlType::Q4_0,
            what: "source",
            len: 31,
            block: 32
        })
    );
    let msg = quant::quantize(GgmlType::I8, &[1.0])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("I8") && msg.contains("not supported"), "{msg}");
}
