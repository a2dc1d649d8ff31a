//! Test-local reference code for the GGML block types, written from the block layouts in
//! ggml-common.h and the reference loops of ggml-quants.c. It calls no engine function.
#![allow(dead_code)]

use half::{bf16, f16};

pub const QK: usize = 32;

/// Type names used by the tests (independent of the engine's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    F32,
    F16,
    BF16,
    Q8_0,
    Q8_1,
    Q4_0,
    Q4_1,
}

pub const ALL: [Ty; 7] = [
    Ty::F32,
    Ty::F16,
    Ty::BF16,
    Ty::Q8_0,
    Ty::Q8_1,
    Ty::Q4_0,
    Ty::Q4_1,
];

impl Ty {
    /// (elements per block, bytes per block) from ggml-common.h.
    pub fn geometry(self) -> (usize, usize) {
        match self {
            Ty::F32 => (1, 4),
            Ty::F16 | Ty::BF16 => (1, 2),
            Ty::Q8_0 => (32, 2 + 32),
            Ty::Q8_1 => (32, 2 + 2 + 32),
            Ty::Q4_0 => (32, 2 + 16),
            Ty::Q4_1 => (32, 2 + 2 + 16),
        }
    }
    pub fn is_quantized(self) -> bool {
        self.geometry().0 == 32
    }
}

pub fn h(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

pub fn put_h(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// Decode bytes of type `ty` into f32, element by element from the block layout.
pub fn decode(ty: Ty, bytes: &[u8]) -> Vec<f32> {
    let (bl, bb) = ty.geometry();
    assert_eq!(bytes.len() % bb, 0);
    let mut out = Vec::with_capacity(bytes.len() / bb * bl);
    for blk in bytes.chunks(bb) {
        match ty {
            Ty::F32 => out.push(f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]])),
            Ty::F16 => out.push(h(blk, 0)),
            Ty::BF16 => out.push(bf16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32()),
            Ty::Q8_0 | Ty::Q8_1 => {
                let d = h(blk, 0);
                let qs = if ty == Ty::Q8_0 { &blk[2..] } else { &blk[4..] };
                out.extend(qs.iter().map(|&q| (q as i8) as f32 * d));
            }
            Ty::Q4_0 => {
                let d = h(blk, 0);
                let mut v = [0.0f32; 32];
                for j in 0..16 {
                    v[j] = ((blk[2 + j] & 15) as f32 - 8.0) * d;
                    v[j + 16] = ((blk[2 + j] >> 4) as f32 - 8.0) * d;
                }
                out.extend(v);
            }
            Ty::Q4_1 => {
                let (d, m) = (h(blk, 0), h(blk, 2));
                let mut v = [0.0f32; 32];
                for j in 0..16 {
                    v[j] = (blk[4 + j] & 15) as f32 * d + m;
                    v[j + 16] = (blk[4 + j] >> 4) as f32 * d + m;
                }
                out.extend(v);
            }
        }
    }
    out
}

/// ggml's reference quantizers (`quantize_row_*_ref`), written out per type.
pub fn encode(ty: Ty, x: &[f32]) -> Vec<u8> {
    let (bl, bb) = ty.geometry();
    assert_eq!(x.len() % bl, 0);
    let mut out = vec![0u8; x.len() / bl * bb];
    for (xb, blk) in x.chunks(bl).zip(out.chunks_mut(bb)) {
        match ty {
            Ty::F32 => blk.copy_from_slice(&xb[0].to_le_bytes()),
            Ty::F16 => blk.copy_from_slice(&f16::from_f32(xb[0]).to_bits().to_le_bytes()),
            Ty::BF16 => blk.copy_from_slice(&bf16::from_f32(xb[0]).to_bits().to_le_bytes()),
            Ty::Q8_0 | Ty::Q8_1 => {
                let (d, q) = q8_block(xb);
                put_h(blk, 0, d);
                let off = if ty == Ty::Q8_0 { 2 } else { 4 };
                if ty == Ty::Q8_1 {
                    let sum: i32 = q.iter().map(|&v| v as i32).sum();
                    put_h(blk, 2, sum as f32 * d);
                }
                for j in 0..32 {
                    blk[off + j] = q[j] as u8;
                }
            }
            Ty::Q4_0 => {
                let mut amax = 0.0f32;
                let mut max = 0.0f32;
                for &v in xb {
                    if v.abs() > amax {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d == 0.0 { 0.0 } else { 1.0 / d };
                put_h(blk, 0, d);
                for j in 0..16 {
                    let lo = (xb[j] * id + 8.5).trunc().clamp(0.0, 15.0) as u8;
                    let hi = (xb[j + 16] * id + 8.5).trunc().clamp(0.0, 15.0) as u8;
                    blk[2 + j] = lo | hi << 4;
                }
            }
            Ty::Q4_1 => {
                let min = xb.iter().cloned().fold(f32::INFINITY, f32::min);
                let max = xb.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let d = (max - min) / 15.0;
                let id = if d == 0.0 { 0.0 } else { 1.0 / d };
                put_h(blk, 0, d);
                put_h(blk, 2, min);
                for j in 0..16 {
                    let lo = ((xb[j] - min) * id + 0.5).trunc().clamp(0.0, 15.0) as u8;
                    let hi = ((xb[j + 16] - min) * id + 0.5).trunc().clamp(0.0, 15.0) as u8;
                    blk[4 + j] = lo | hi << 4;
                }
            }
        }
    }
    out
}

/// One 8-bit block: unrounded scale `amax / 127` and `round(x / d)` (half away from zero).
pub fn q8_block(x: &[f32]) -> (f32, [i8; 32]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
    let mut q = [0i8; 32];
    for j in 0..32 {
        q[j] = (x[j] * id).round() as i8;
    }
    (d, q)
}

/// An activation quantized as ggml does for the integer dot: per block the f16-rounded
/// scale, the quants, and the f16-rounded `s = d · Σq` (Q8_1).
pub struct RefAct {
    pub d: Vec<f32>,
    pub s: Vec<f32>,
    pub qs: Vec<i8>,
}

pub fn quantize_act(x: &[f32]) -> RefAct {
    let mut a = RefAct {
        d: vec![],
        s: vec![],
        qs: vec![],
    };
    for xb in x.chunks(32) {
        let (d, q) = q8_block(xb);
        let sum: i32 = q.iter().map(|&v| v as i32).sum();
        a.d.push(f16::from_f32(d).to_f32());
        a.s.push(f16::from_f32(sum as f32 * d).to_f32());
        a.qs.extend(q);
    }
    a
}

/// ggml's reference `vec_dot` of one weight row with a quantized activation
/// (Q4_0·Q8_0, Q4_1·Q8_1, Q8_0·Q8_0, and Q8_1·Q8_0); returns the value and the sum of
/// the magnitudes of its terms (for tolerances).
pub fn vec_dot_q8(ty: Ty, row: &[u8], a: &RefAct) -> (f64, f64) {
    let (_, bb) = ty.geometry();
    let (mut sum, mut mag) = (0.0f64, 0.0f64);
    for (b, blk) in row.chunks(bb).enumerate() {
        let qa = &a.qs[b * 32..b * 32 + 32];
        let (sumi, dw, extra): (i64, f32, f64) = match ty {
            Ty::Q8_0 | Ty::Q8_1 => {
                let off = if ty == Ty::Q8_0 { 2 } else { 4 };
                let s = (0..32)
                    .map(|j| (blk[off + j] as i8) as i64 * qa[j] as i64)
                    .sum();
                (s, h(blk, 0), 0.0)
            }
            Ty::Q4_0 => {
                let s = (0..16)
                    .map(|j| {
                        ((blk[2 + j] & 15) as i64 - 8) * qa[j] as i64
                            + ((blk[2 + j] >> 4) as i64 - 8) * qa[j + 16] as i64
                    })
                    .sum();
                (s, h(blk, 0), 0.0)
            }
            Ty::Q4_1 => {
                let s = (0..16)
                    .map(|j| {
                        (blk[4 + j] & 15) as i64 * qa[j] as i64
                            + (blk[4 + j] >> 4) as i64 * qa[j + 16] as i64
                    })
                    .sum();
                (s, h(blk, 0), h(blk, 2) as f64 * a.s[b] as f64)
            }
            _ => panic!("{ty:?} is not a quantized type"),
        };
        let main = sumi as f64 * dw as f64 * a.d[b] as f64;
        sum += main + extra;
        mag += main.abs() + extra.abs();
    }
    (sum, mag)
}

/// Exact (f64) dot of decoded weights with `x`; returns the value and `Σ |w·x|`.
pub fn dot_f64(w: &[f32], x: &[f32]) -> (f64, f64) {
    let mut s = 0.0f64;
    let mut m = 0.0f64;
    for (a, b) in w.iter().zip(x) {
        let p = *a as f64 * *b as f64;
        s += p;
        m += p.abs();
    }
    (s, m)
}

/// A deterministic pseudo-random generator (SplitMix64) for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.unit() * scale).collect()
    }
}
