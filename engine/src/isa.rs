//! Instruction-set selection: which SIMD path a kernel runs, detected at run time.

use std::fmt;

/// A SIMD path a kernel may take. The portable path is always compiled and always available.
///
/// Ordered from least to most capable; [`Isa::best`] picks the last one the CPU supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Plain Rust, no target-specific intrinsics.
    Portable,
    /// x86-64 AVX2 + FMA (+ F16C).
    Avx2,
    /// x86-64 AVX-512 F/BW/VL.
    Avx512,
    /// x86-64 AVX-512 with VNNI integer dot products.
    Avx512Vnni,
}

impl Isa {
    /// Every path in capability order.
    pub const ALL: [Isa; 4] = [Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni];

    /// Whether this CPU can run the path.
    pub fn supported(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.supported()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => Isa::Avx512.supported() && is_x86_feature_detected!("avx512vnni"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Every path this CPU supports, portable first.
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.supported()).collect()
    }

    /// The most capable supported path, unless the environment variable `GENAI_ISA`
    /// forces one (`portable`, `avx2`, `avx512`, `avx512vnni`); a forced path the CPU
    /// lacks falls back to the best supported one below it.
    pub fn best() -> Isa {
        let forced = std::env::var("GENAI_ISA").ok().and_then(|v| Isa::parse(&v));
        let best = *Isa::available().last().unwrap_or(&Isa::Portable);
        match forced {
            Some(f) => Isa::available()
                .into_iter()
                .rev()
                .find(|i| *i <= f)
                .unwrap_or(Isa::Portable),
            None => best,
        }
    }

    /// Parse a path name as written by [`fmt::Display`] (case-insensitive).
    pub fn parse(s: &str) -> Option<Isa> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" => Some(Isa::Portable),
            "avx2" => Some(Isa::Avx2),
            "avx512" => Some(Isa::Avx512),
            "avx512vnni" | "avx512-vnni" | "vnni" => Some(Isa::Avx512Vnni),
            _ => None,
        }
    }

    /// The path's name.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512vnni",
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
