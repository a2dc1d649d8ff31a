//! Test-local reference code for the GGML 5-bit and K-quant block types (Q5_0, Q5_1, Q4_K,
//! Q5_K, Q6_K) and the Q8_K activation, written from the block layouts in ggml-common.h and
//! the reference loops of ggml-quants.c (`dequantize_row_*`, `quantize_row_q8_K_ref`) and
//! ggml-cpu's generic `ggml_vec_dot_*_q8_K`. It calls no engine function.
#![allow(dead_code)]

use half::f16;

pub const QK_K: usize = 256;

/// Type names used by the tests (independent of the engine's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Q5_0,
    Q5_1,
    Q4K,
    Q5K,
    Q6K,
}

pub const ALL: [Ty; 5] = [Ty::Q5_0, Ty::Q5_1, Ty::Q4K, Ty::Q5K, Ty::Q6K];

impl Ty {
    /// (elements per block, bytes per block) from ggml-common.h:
    /// `block_q5_0 { d; qh[4]; qs[16] }`, `block_q5_1 { d; m; qh[4]; qs[16] }`,
    /// `block_q4_K { d; dmin; scales[12]; qs[128] }`,
    /// `block_q5_K { d; dmin; scales[12]; qh[32]; qs[128] }`,
    /// `block_q6_K { ql[128]; qh[64]; scales[16]; d }`.
    pub fn geometry(self) -> (usize, usize) {
        match self {
            Ty::Q5_0 => (32, 2 + 4 + 16),
            Ty::Q5_1 => (32, 2 + 2 + 4 + 16),
            Ty::Q4K => (256, 2 + 2 + 12 + 128),
            Ty::Q5K => (256, 2 + 2 + 12 + 32 + 128),
            Ty::Q6K => (256, 128 + 64 + 16 + 2),
        }
    }
    pub fn is_k(self) -> bool {
        self.geometry().0 == QK_K
    }
}

pub fn h(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

pub fn put_h(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// ggml's `get_scale_min_k4(j, q, &d, &m)`.
pub fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Decode bytes of `ty`, following the `dequantize_row_*` loops of ggml-quants.c.
pub fn decode(ty: Ty, bytes: &[u8]) -> Vec<f32> {
    let (bl, bb) = ty.geometry();
    assert_eq!(bytes.len() % bb, 0);
    let mut y = vec![0.0f32; bytes.len() / bb * bl];
    for (x, y) in bytes.chunks(bb).zip(y.chunks_mut(bl)) {
        match ty {
            Ty::Q5_0 | Ty::Q5_1 => {
                let (d, m, qo) = if ty == Ty::Q5_0 {
                    (h(x, 0), 0.0, 2)
                } else {
                    (h(x, 0), h(x, 2), 4)
                };
                let qh = u32::from_le_bytes([x[qo], x[qo + 1], x[qo + 2], x[qo + 3]]);
                let qs = &x[qo + 4..];
                for j in 0..16 {
                    let xh_0 = (((qh >> j) << 4) & 0x10) as u8;
                    let xh_1 = ((qh >> (j + 12)) & 0x10) as u8;
                    let (x0, x1) = ((qs[j] & 0x0F) | xh_0, (qs[j] >> 4) | xh_1);
                    if ty == Ty::Q5_0 {
                        y[j] = (x0 as i32 - 16) as f32 * d;
                        y[j + 16] = (x1 as i32 - 16) as f32 * d;
                    } else {
                        y[j] = x0 as f32 * d + m;
                        y[j + 16] = x1 as f32 * d + m;
                    }
                }
            }
            Ty::Q4K | Ty::Q5K => {
                let (d, min) = (h(x, 0), h(x, 2));
                let scales = &x[4..16];
                let (qh, mut ql) = if ty == Ty::Q5K {
                    (&x[16..48], 48)
                } else {
                    (&x[0..0], 16)
                };
                let (mut is, mut u1, mut u2) = (0usize, 1u8, 2u8);
                let mut o = 0;
                for _ in (0..QK_K).step_by(64) {
                    let (sc, m) = get_scale_min_k4(is, scales);
                    let (d1, m1) = (d * sc as f32, min * m as f32);
                    let (sc, m) = get_scale_min_k4(is + 1, scales);
                    let (d2, m2) = (d * sc as f32, min * m as f32);
                    for l in 0..32 {
                        let hb = if ty == Ty::Q5K && qh[l] & u1 != 0 {
                            16
                        } else {
                            0
                        };
                        y[o] = d1 * ((x[ql + l] & 0xF) + hb) as f32 - m1;
                        o += 1;
                    }
                    for l in 0..32 {
                        let hb = if ty == Ty::Q5K && qh[l] & u2 != 0 {
                            16
                        } else {
                            0
                        };
                        y[o] = d2 * ((x[ql + l] >> 4) + hb) as f32 - m2;
                        o += 1;
                    }
                    ql += 32;
                    is += 2;
                    u1 <<= 2;
                    u2 <<= 2;
                }
            }
            Ty::Q6K => {
                let d = h(x, 208);
                let (mut ql, mut qh, mut sc) = (0usize, 128usize, 192usize);
                for n in (0..QK_K).step_by(128) {
                    for l in 0..32 {
                        let is = l / 16;
                        let q1 = ((x[ql + l] & 0xF) | ((x[qh + l] & 3) << 4)) as i8 - 32;
                        let q2 =
                            ((x[ql + l + 32] & 0xF) | (((x[qh + l] >> 2) & 3) << 4)) as i8 - 32;
                        let q3 = ((x[ql + l] >> 4) | (((x[qh + l] >> 4) & 3) << 4)) as i8 - 32;
                        let q4 = ((x[ql + l + 32] >> 4) | (((x[qh + l] >> 6) & 3) << 4)) as i8 - 32;
                        let s = |k: usize| x[sc + is + k] as i8 as f32;
                        y[n + l] = d * s(0) * q1 as f32;
                        y[n + l + 32] = d * s(2) * q2 as f32;
                        y[n + l + 64] = d * s(4) * q3 as f32;
                        y[n + l + 96] = d * s(6) * q4 as f32;
                    }
                    ql += 64;
                    qh += 32;
                    sc += 8;
                }
            }
        }
    }
    y
}

/// A Q8_K activation row (`block_q8_K { float d; int8_t qs[256]; int16_t bsums[16]; }`).
pub struct RefQ8K {
    pub d: Vec<f32>,
    pub qs: Vec<i8>,
    pub bsums: Vec<i16>,
}

/// ggml's `nearest_int`: the `fval + 12582912.f` bit trick (round half to even).
pub fn nearest_int(fval: f32) -> i32 {
    assert!(fval.abs() <= 4194303.0);
    let val = fval + 12582912.0;
    let i = val.to_bits() as i32;
    (i & 0x007fffff) - 0x00400000
}

/// `quantize_row_q8_K_ref`.
pub fn quantize_q8k(x: &[f32]) -> RefQ8K {
    assert_eq!(x.len() % QK_K, 0);
    let mut a = RefQ8K {
        d: vec![],
        qs: vec![],
        bsums: vec![],
    };
    for xb in x.chunks(QK_K) {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            a.d.push(0.0);
            a.qs.extend([0i8; QK_K]);
            a.bsums.extend([0i16; 16]);
            continue;
        }
        let iscale = -127.0f32 / max;
        let q: Vec<i8> = xb
            .iter()
            .map(|&v| nearest_int(iscale * v).min(127) as i8)
            .collect();
        for j in 0..16 {
            a.bsums
                .push(q[j * 16..j * 16 + 16].iter().map(|&v| v as i16).sum());
        }
        a.qs.extend(q);
        a.d.push(1.0 / iscale);
    }
    a
}

/// A Q8_0 / Q8_1 activation (`quantize_row_q8_1_ref`: `d = amax / 127`, `roundf`); the
/// scale and `s = d · Σq` f16-rounded as stored.
pub struct RefQ8 {
    pub d: Vec<f32>,
    pub s: Vec<f32>,
    pub qs: Vec<i8>,
}

pub fn quantize_q8(x: &[f32]) -> RefQ8 {
    let mut a = RefQ8 {
        d: vec![],
        s: vec![],
        qs: vec![],
    };
    for xb in x.chunks(32) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        let q: Vec<i8> = xb.iter().map(|&v| (v * id).round() as i8).collect();
        let sum: i32 = q.iter().map(|&v| v as i32).sum();
        a.d.push(f16::from_f32(d).to_f32());
        a.s.push(f16::from_f32(sum as f32 * d).to_f32());
        a.qs.extend(q);
    }
    a
}

/// ggml's generic `vec_dot` of a K-quant row with a Q8_K activation, the integer parts
/// taken from the decoded quants: returns the value (f64) and `Σ |terms|` for tolerances.
/// Per block: `d·da · Σ_sub scale·Σ q·a − dmin·da · Σ bsums·min` (Q4_K, Q5_K) or
/// `d·da · Σ_sub scale·Σ (q−32)·a` (Q6_K).
pub fn vec_dot_q8k(ty: Ty, row: &[u8], a: &RefQ8K) -> (f64, f64) {
    let (_, bb) = ty.geometry();
    let (mut sum, mut mag) = (0.0f64, 0.0f64);
    for (b, x) in row.chunks(bb).enumerate() {
        let qa = &a.qs[b * QK_K..(b + 1) * QK_K];
        let bs = &a.bsums[b * 16..(b + 1) * 16];
        let da = a.d[b] as f64;
        match ty {
            Ty::Q4K | Ty::Q5K => {
                // Unsigned quants, element by element, from the decode loop's structure.
                let mut q = [0i64; QK_K];
                let (ql0, qh) = if ty == Ty::Q5K { (48, 16) } else { (16, 0) };
                for c in 0..4 {
                    for l in 0..32 {
                        let byte = x[ql0 + 32 * c + l];
                        let (b1, b2) = if ty == Ty::Q5K {
                            ((x[qh + l] >> (2 * c)) & 1, (x[qh + l] >> (2 * c + 1)) & 1)
                        } else {
                            (0, 0)
                        };
                        q[64 * c + l] = ((byte & 0xF) + 16 * b1) as i64;
                        q[64 * c + 32 + l] = ((byte >> 4) + 16 * b2) as i64;
                    }
                }
                let mut sumi = 0i64;
                let mut summ = 0i64;
                for s in 0..8 {
                    let (sc, m) = get_scale_min_k4(s, &x[4..16]);
                    let p: i64 = (0..32).map(|j| q[32 * s + j] * qa[32 * s + j] as i64).sum();
                    sumi += sc as i64 * p;
                    summ += m as i64 * (bs[2 * s] as i64 + bs[2 * s + 1] as i64);
                }
                let main = h(x, 0) as f64 * da * sumi as f64;
                let mins = h(x, 2) as f64 * da * summ as f64;
                sum += main - mins;
                mag += main.abs() + mins.abs();
            }
            Ty::Q6K => {
                let mut sumi = 0i64;
                let dec = decode_q6_ints(x);
                for s in 0..16 {
                    let p: i64 = (0..16)
                        .map(|j| dec[16 * s + j] as i64 * qa[16 * s + j] as i64)
                        .sum();
                    sumi += x[192 + s] as i8 as i64 * p;
                }
                let main = h(x, 208) as f64 * da * sumi as f64;
                sum += main;
                mag += main.abs();
            }
            _ => panic!("{ty:?} is not a K-quant"),
        }
    }
    (sum, mag)
}

/// The signed 6-bit quants `q − 32` of one Q6_K block, in element order.
fn decode_q6_ints(x: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for n in 0..2 {
        let (ql, qh) = (64 * n, 128 + 32 * n);
        for l in 0..32 {
            q[128 * n + l] = ((x[ql + l] & 0xF) | ((x[qh + l] & 3) << 4)) as i8 - 32;
            q[128 * n + l + 32] =
                ((x[ql + l + 32] & 0xF) | (((x[qh + l] >> 2) & 3) << 4)) as i8 - 32;
            q[128 * n + l + 64] = ((x[ql + l] >> 4) | (((x[qh + l] >> 4) & 3) << 4)) as i8 - 32;
            q[128 * n + l + 96] =
                ((x[ql + l + 32] >> 4) | (((x[qh + l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    q
}

/// ggml's reference `vec_dot_q5_0_q8_0` / `vec_dot_q5_1_q8_1`: value and `Σ |terms|`.
pub fn vec_dot_q5(ty: Ty, row: &[u8], a: &RefQ8) -> (f64, f64) {
    let (_, bb) = ty.geometry();
    let w = decode_q5_ints(ty, row);
    let (mut sum, mut mag) = (0.0f64, 0.0f64);
    for (b, x) in row.chunks(bb).enumerate() {
        let sumi: i64 = (0..32)
            .map(|j| w[32 * b + j] as i64 * a.qs[32 * b + j] as i64)
            .sum();
        let main = h(x, 0) as f64 * a.d[b] as f64 * sumi as f64;
        let extra = if ty == Ty::Q5_1 {
            h(x, 2) as f64 * a.s[b] as f64
        } else {
            0.0
        };
        sum += main + extra;
        mag += main.abs() + extra.abs();
    }
    (sum, mag)
}

/// The integer quants of a Q5_0 (`q − 16`) or Q5_1 (`q`) row.
fn decode_q5_ints(ty: Ty, row: &[u8]) -> Vec<i32> {
    let (_, bb) = ty.geometry();
    let qo = if ty == Ty::Q5_0 { 2 } else { 4 };
    let mut out = vec![];
    for x in row.chunks(bb) {
        let mut v = [0i32; 32];
        for j in 0..32 {
            let byte = x[qo + 4 + j % 16];
            let nib = if j < 16 { byte & 0xF } else { byte >> 4 };
            let bit = (x[qo + j / 8] >> (j % 8)) & 1;
            v[j] = (nib | bit << 4) as i32 - if ty == Ty::Q5_0 { 16 } else { 0 };
        }
        out.extend(v);
    }
    out
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

/// Random raw blocks of `ty`: random bytes for the quants and the 6-/8-bit scales, finite
/// f16 super-block scales (and minimums) in a sane range.
pub fn raw_blocks(ty: Ty, blocks: usize, seed: u64) -> Vec<u8> {
    let (_, bb) = ty.geometry();
    let mut rng = Rng(seed);
    let mut bytes: Vec<u8> = (0..blocks * bb).map(|_| rng.next_u64() as u8).collect();
    for blk in bytes.chunks_mut(bb) {
        match ty {
            Ty::Q5_0 => put_h(blk, 0, rng.unit() * 0.1),
            Ty::Q5_1 => {
                put_h(blk, 0, rng.unit() * 0.1);
                put_h(blk, 2, rng.unit());
            }
            Ty::Q4K | Ty::Q5K => {
                put_h(blk, 0, rng.unit() * 0.01);
                put_h(blk, 2, rng.unit() * 0.01);
            }
            Ty::Q6K => put_h(blk, 208, rng.unit() * 0.01),
        }
    }
    bytes
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
