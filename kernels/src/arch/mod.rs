//! Instruction-set levels: detected once, then passed to the kernels.
//!
//! Every kernel exists in up to three builds of the same generic Rust code:
//! the portable one (baseline target features: SSE2 on x86-64), one compiled
//! with AVX2 + FMA and one with AVX-512 (F, DQ, BW, VL) + AVX2 + FMA, where
//! LLVM vectorises the loops 8 and 16 lanes wide. [`Level::detected`] picks
//! the best one the CPU has, on the first call only (the answer is cached in
//! an atomic, so later calls cost one relaxed load). `Exp`, `Sigmoid`, `Erf`,
//! `Gelu` and `GeluTanh` have hand-written AVX2 and AVX-512 kernels instead
//! (module `simd`).
//!
//! The environment variable `RIVET_KERNELS_LEVEL` (`generic`, `avx2` or
//! `avx512`), read at that first call, can lower the level (never raise it
//! above what the CPU has): for benchmarks and debugging.

use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) mod amx;
#[allow(unsafe_code)]
mod dispatch;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub(crate) mod mem;
#[allow(unsafe_code)]
pub(crate) mod rows;
#[cfg(target_arch = "x86_64")]
mod simd;

#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) use dispatch::depthwise_channels_last;
#[cfg(test)]
pub(crate) use dispatch::STREAM_MIN;
pub(crate) use dispatch::{
    binary, depthwise_2d, direct, direct_bf16, gemm, gemm_bf16, gemm_bf16_a, gemm_pack_a, gemm_pack_b, instance_plane,
    max_pool_bytes, min_max, pad_rows, pair_bf16, pair_bf16_halves, pool, qconv_taps, qdw_planes, qgemm_portable,
    qgemm_vnni, silu_inplace, softmax_cols, softmax_rows, transpose_2d, transpose_block, transpose_bytes, unary,
    widest, winograd_input, winograd_output,
};
#[cfg(target_arch = "x86_64")]
pub(crate) use dispatch::{depthwise_from_nhwc, depthwise_rows_nhwc};

/// A kernel build; ordered from the most portable to the widest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Baseline target features (SSE2 on x86-64), scalar-written Rust that
    /// LLVM vectorises 4 lanes wide.
    Generic,
    /// x86-64 with AVX2 and FMA: 8 lanes, fused multiply-adds.
    Avx2,
    /// x86-64 with AVX-512 F/DQ/BW/VL (plus AVX2 and FMA): 16 lanes.
    Avx512,
}

const UNKNOWN: u8 = u8::MAX;
static DETECTED: AtomicU8 = AtomicU8::new(UNKNOWN);

impl Level {
    const ALL: [Level; 3] = [Level::Generic, Level::Avx2, Level::Avx512];

    /// The best level this CPU supports (lowered by `RIVET_KERNELS_LEVEL`),
    /// detected on the first call and cached.
    #[inline]
    pub fn detected() -> Level {
        match DETECTED.load(Ordering::Relaxed) {
            0 => Level::Generic,
            1 => Level::Avx2,
            2 => Level::Avx512,
            _ => Level::detect_once(),
        }
    }

    #[cold]
    #[inline(never)]
    fn detect_once() -> Level {
        let level = detect().min(cap(std::env::var("RIVET_KERNELS_LEVEL").ok().as_deref()));
        DETECTED.store(level as u8, Ordering::Relaxed);
        level
    }

    /// Every level this CPU supports, from `Generic` up to [`Level::detected`].
    pub fn supported() -> Vec<Level> {
        let top = Level::detected();
        Level::ALL.into_iter().filter(|&l| l <= top).collect()
    }

    /// Short lower-case name (`generic`, `avx2`, `avx512`).
    pub fn name(self) -> &'static str {
        match self {
            Level::Generic => "generic",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

/// Whether this CPU runs AVX-512 on 256-bit halves: AMD's Zen 4 (family 0x19 with
/// AVX-512), whose 512-bit multiply-adds take both of its 256-bit pipes, one a cycle
/// where Intel's AVX-512 cores make two. Kernels that trade multiply-adds for loads and
/// shuffles (Winograd's) pay off on shallower products there. Asked once.
pub fn avx512_in_halves() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HALVES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HALVES.get_or_init(|| {
            if Level::detected() != Level::Avx512 {
                return false;
            }
            // "AuthenticAMD" in ebx, edx, ecx of leaf 0; the family in leaf 1's eax.
            let vendor = std::arch::x86_64::__cpuid(0);
            let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
            let eax = std::arch::x86_64::__cpuid(1).eax;
            let base = (eax >> 8) & 0xf;
            let family = if base == 0xf { base + ((eax >> 20) & 0xff) } else { base };
            amd && family == 0x19
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Proof that the CPU supports a level: only [`isa`] and [`isa_at`] build one,
/// and neither exceeds [`Level::detected`]. The dispatch relies on it to call
/// `#[target_feature]` code soundly.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Isa(Level);

impl Isa {
    /// The level this proves.
    pub(crate) fn level(self) -> Level {
        self.0
    }
}

/// The detected level.
#[inline]
pub(crate) fn isa() -> Isa {
    Isa(Level::detected())
}

/// `level`, lowered to the detected one if the CPU lacks it.
#[inline]
pub(crate) fn isa_at(level: Level) -> Isa {
    Isa(level.min(Level::detected()))
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::arch::is_x86_feature_detected as has;
    if has!("avx512f") && has!("avx512dq") && has!("avx512bw") && has!("avx512vl") && has!("avx2") && has!("fma") {
        Level::Avx512
    } else if has!("avx2") && has!("fma") {
        Level::Avx2
    } else {
        Level::Generic
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Generic
}

/// The cap set by `RIVET_KERNELS_LEVEL` (none if unset or unknown).
fn cap(var: Option<&str>) -> Level {
    match var {
        Some("generic") => Level::Generic,
        Some("avx2") => Level::Avx2,
        _ => Level::Avx512,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_consistent() {
        let top = Level::detected();
        assert_eq!(Level::detected(), top, "cached");
        let all = Level::supported();
        assert_eq!(all.first(), Some(&Level::Generic));
        assert_eq!(all.last(), Some(&top));
        for l in Level::ALL {
            assert!(isa_at(l).0 <= top);
            assert_eq!(Level::ALL[l as usize], l);
        }
        assert_eq!(isa().0, top);
        assert_eq!(Level::Avx512.name(), "avx512");
        for l in Level::ALL {
            assert_eq!(cap(Some(l.name())), l);
        }
        assert_eq!(cap(None), Level::Avx512);
        assert_eq!(cap(Some("sse9")), Level::Avx512);
    }
}
