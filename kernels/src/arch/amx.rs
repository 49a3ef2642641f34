//! Intel AMX tiles for the bfloat16 products (`gemm::bf16`): eight 1 KiB tile
//! registers, and `tdpbf16ps`, which adds a tile of 16 × 16 float sums the product of a
//! tile of A (rows of 16 bfloat16 pairs) by a tile of B (16 rows of pairs, 16 columns):
//! 8,192 multiply-adds in one instruction, where AVX-512 BF16's `vdpbf16ps` makes 32.
//!
//! The tiles read the layouts `gemm::bf16` already packs: a strip of A (14 rows, 16
//! pairs a row per chunk, 64 bytes a row) is one A tile per chunk, and a 32-column panel
//! of B (a pair of depths a row, 128 bytes) is two B tiles per chunk (its columns 0..16
//! and 16..32, rows 128 bytes apart), once its pairs are padded with zeros to whole
//! chunks.
//!
//! The same layouts hold 8-bit products (`qgemm::packed`): a strip's chunk is 14 rows of
//! 16 quads of unsigned bytes, a panel's chunk 16 quads of 32 columns of signed bytes,
//! and `tdpbusd` adds 16 × 16 i32 sums of 16,384 byte products, where AVX-512 VNNI's
//! `vpdpbusd` makes 64. Every tile row must start on a 64-byte boundary to be one load
//! (`lines::Lines`): misaligned, the tiles ran 2.5x slower.
//!
//! Linux keeps a process from the tiles' 8 KiB register state until it asks
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`); [`bf16_tiles`] asks once, for
//! the whole process. Each call of [`bf16_panel`] or [`int8_panel`] loads its own tile
//! configuration and releases the tiles when it returns, so no state outlives it.

use std::arch::asm;
use std::sync::OnceLock;

/// Rows of a strip of A (and of each A and C tile): `gemm::bf16::MR`.
const ROWS: usize = 14;
/// Words (bfloat16 pairs) of a chunk of a strip's row: `gemm::bf16::CHUNK`.
const PAIRS: usize = 16;

/// Whether this process may run AMX-BF16 tiles: the CPU has AMX-TILE and AMX-BF16
/// (CPUID leaf 7), Linux granted the tile state, and `RIVET_AMX` is not `off` (for
/// benchmarks and debugging: the products then run on AVX-512 BF16). Asked once.
pub(crate) fn bf16_tiles() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        if std::env::var("RIVET_AMX").is_ok_and(|v| v == "off" || v == "0") {
            return false;
        }
        // CPUID leaf 7 sub-leaf 0 is defined on any CPU with AVX-512.
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        let (amx_bf16, amx_tile) = (leaf7.edx & (1 << 22) != 0, leaf7.edx & (1 << 24) != 0);
        amx_bf16 && amx_tile && crate::gemm::bf16_supported() && permitted()
    })
}

/// Whether this process may run AMX-INT8 tiles (for `qgemm`): the CPU has AMX-TILE and
/// AMX-INT8 (CPUID leaf 7), AVX-512 VNNI for the stores, Linux granted the tile state,
/// and `RIVET_AMX` is not `off`. Asked once.
pub(crate) fn int8_tiles() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        if std::env::var("RIVET_AMX").is_ok_and(|v| v == "off" || v == "0") {
            return false;
        }
        // (VNNI implies AVX-512, on which CPUID leaf 7 sub-leaf 0 is defined.)
        if !crate::qgemm::vnni_supported() {
            return false;
        }
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        let (amx_int8, amx_tile) = (leaf7.edx & (1 << 25) != 0, leaf7.edx & (1 << 24) != 0);
        amx_int8 && amx_tile && permitted()
    })
}

/// Asks Linux for the tile data state (`ARCH_REQ_XCOMP_PERM` = 0x1023 for state
/// component 18, XTILEDATA); true when granted.
#[cfg(target_os = "linux")]
fn permitted() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: the arch_prctl system call only reads its two integer arguments here and
    // changes no memory of the process; `syscall` clobbers rcx and r11, declared so.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret == 0
}

#[cfg(not(target_os = "linux"))]
fn permitted() -> bool {
    false
}

/// The tile configuration (palette 1): tiles 0-3 the sums (14 rows of 16 floats), 4-5
/// strips of A (14 rows of 16 pairs), 6-7 halves of a panel of B (16 rows of 16 pairs).
#[repr(C, align(64))]
struct Config {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

const CONFIG: Config = {
    let mut colsb = [0u16; 16];
    let mut rows = [0u8; 16];
    let mut t = 0;
    while t < 8 {
        colsb[t] = 64;
        rows[t] = if t < 6 { ROWS as u8 } else { PAIRS as u8 };
        t += 1;
    }
    Config { palette: 1, start_row: 0, reserved: [0; 14], colsb, rows }
};

/// Defines a product of `S` (1 or 2) strips of A by a 32-column panel of B on the tiles,
/// for one dot-product instruction (`$dp`, four tile lines: tiles 0-3 the sums of strip
/// 0 by halves 0 and 1 of the panel, then strip 1's) and element type `$t`.
macro_rules! panel_product {
    ($(#[$doc:meta])* $name:ident, $t:ty, $tiles:path, $what:literal, $dp0:literal, $dp1:literal, $dp2:literal, $dp3:literal) => {
        $(#[$doc])*
        pub(crate) fn $name<const S: usize>(
            strips: [&[[$t; 16]]; S],
            (panels, panel_len): (&[[$t; 16]], usize),
            chunks: usize,
            out: &mut [[[$t; 32]; 2 * ROWS]],
        ) {
            assert!(S == 1 || S == 2, "amx: one or two strips");
            assert!($tiles(), concat!("amx: tiles used where ", $what, " is false"));
            assert!(strips.iter().all(|s| s.len() >= chunks * ROWS), "amx: a strip is too short");
            let count = out.len();
            let reach = (count.max(1) - 1) * panel_len + chunks * 2 * PAIRS;
            assert!(count == 0 || panels.len() >= reach, "amx: the panels are too short");
            let (s64, s128) = (64usize, 128usize);
            // SAFETY: the tiles function above says the CPU has AMX-TILE and the
            // instruction's AMX feature and Linux granted the tile state. The
            // configuration is loaded first, so every tile below has the shape the loads
            // assume: an A tile reads 14 rows of 64 bytes 64 bytes apart, chunk `ch` of a
            // strip (`strips[s][14 ch ..][..14]`, in bounds by the assert above); a B tile
            // of panel `p` reads 16 rows of 64 bytes 128 bytes apart from
            // `panels[p · panel_len + 32 ch + h]` (rows up to line `p · panel_len + 32 ch
            // + 31`, inside `reach`); the stores of panel `p` write 14 rows of 64 bytes,
            // 128 bytes apart, from `out[p][14 s][16 h]`, inside `out`. Tiles 0-7 are no
            // register the compiler allocates; `tilerelease` returns them to their
            // initial state.
            unsafe {
                asm!("ldtilecfg [{cfg}]", cfg = in(reg) &CONFIG, options(nostack, readonly));
                for (p, out) in out.iter_mut().enumerate() {
                    asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
                    let b = panels.as_ptr().add(p * panel_len);
                    for ch in 0..chunks {
                        let pb = b.add(2 * PAIRS * ch);
                        let pa0 = strips[0].as_ptr().add(ROWS * ch);
                        asm!(
                            "tileloadd tmm6, [{b} + {s128} * 1]",
                            "tileloadd tmm7, [{b2} + {s128} * 1]",
                            "tileloadd tmm4, [{a} + {s64} * 1]",
                            $dp0,
                            $dp1,
                            b = in(reg) pb,
                            b2 = in(reg) pb.add(1),
                            a = in(reg) pa0,
                            s64 = in(reg) s64,
                            s128 = in(reg) s128,
                            options(nostack, readonly),
                        );
                        if S == 2 {
                            let pa1 = strips[S - 1].as_ptr().add(ROWS * ch);
                            asm!(
                                "tileloadd tmm5, [{a} + {s64} * 1]",
                                $dp2,
                                $dp3,
                                a = in(reg) pa1,
                                s64 = in(reg) s64,
                                options(nostack, readonly),
                            );
                        }
                    }
                    let c = out.as_mut_ptr().cast::<$t>();
                    asm!(
                        "tilestored [{c} + {s128} * 1], tmm0",
                        "tilestored [{c1} + {s128} * 1], tmm1",
                        c = in(reg) c,
                        c1 = in(reg) c.add(16),
                        s128 = in(reg) s128,
                        options(nostack),
                    );
                    if S == 2 {
                        asm!(
                            "tilestored [{c} + {s128} * 1], tmm2",
                            "tilestored [{c1} + {s128} * 1], tmm3",
                            c = in(reg) c.add(32 * ROWS),
                            c1 = in(reg) c.add(32 * ROWS + 16),
                            s128 = in(reg) s128,
                            options(nostack),
                        );
                    }
                }
                asm!("tilerelease", options(nostack, nomem));
            }
        }
    };
}

panel_product!(
    /// The float sums of `S` (1 or 2) strips of A by `out.len()` 32-column panels of B
    /// (`panel_len` lines apart from the first of `panels`) over `chunks` chunks of depth:
    /// `out[p][14 s + r][j]` is row `r` of strip `s` times column `j` of panel `p`.
    /// `strips[s]` holds `chunks` chunks of 14 rows of 16 pairs; a panel holds `16 ·
    /// chunks` rows of 32 pairs (two lines a row). Panics if they are shorter, if `S` is
    /// not 1 or 2, or if [`bf16_tiles`] is false.
    bf16_panel,
    f32,
    bf16_tiles,
    "bf16_tiles()",
    "tdpbf16ps tmm0, tmm4, tmm6",
    "tdpbf16ps tmm1, tmm4, tmm7",
    "tdpbf16ps tmm2, tmm5, tmm6",
    "tdpbf16ps tmm3, tmm5, tmm7"
);

panel_product!(
    /// The i32 sums of `S` (1 or 2) strips of A (unsigned bytes) by `out.len()` 32-column
    /// panels of B (signed bytes; `panel_len` lines apart from the first of `panels`) over
    /// `chunks` chunks of 64 depths, in `qgemm::packed`'s layouts: `out[p][14 s + r][j]`
    /// is row `r` of strip `s` times column `j` of panel `p`, added in wrapping i32 as
    /// `vpdpbusd` adds. `strips[s]` holds `chunks` chunks of 14 rows of 16 quads; a panel
    /// holds `16 · chunks` quads of 32 columns (two lines each). Panics if they are
    /// shorter, if `S` is not 1 or 2, or if [`int8_tiles`] is false.
    int8_panel,
    i32,
    int8_tiles,
    "int8_tiles()",
    "tdpbusd tmm0, tmm4, tmm6",
    "tdpbusd tmm1, tmm4, tmm7",
    "tdpbusd tmm2, tmm5, tmm6",
    "tdpbusd tmm3, tmm5, tmm7"
);

/// The tile configuration of [`bf16_conv`]: every tile 16 rows of 64 bytes (tiles 0-3
/// the sums, 4-5 filters, 6-7 input pairs). Palette 1 has 8 tiles; the fields of tiles
/// 8-15 must be zero (`ldtilecfg` faults otherwise).
const CONV_CONFIG: Config = {
    let (mut colsb, mut rows) = ([0u16; 16], [0u8; 16]);
    let mut t = 0;
    while t < 8 {
        (colsb[t], rows[t]) = (64, 16);
        t += 1;
    }
    Config { palette: 1, start_row: 0, reserved: [0; 14], colsb, rows }
};

/// The float sums of `16 · NA` output channels (NA = 1 or 2) of a convolution at
/// `tiles` runs of 32 consecutive positions, run `t` from position `q + 32 t`, of its
/// padded input planes, as the steps of `offsets` take them: step `s` multiplies tile `s`
/// of each `filters[i]` (16 rows of 16 pairs: 16 channels by 16 pairs of input channels
/// at one tap) by the 16 input rows whose row 0 starts at word `offsets[s] + q + 32 t` of
/// `planes` (16 words a row, `plane` words apart), as two tiles of 16 positions. Channel
/// `r` of filter block `i`, position `q + 32 t + j` goes to
/// `out[(16 i + r) · ldo + at + 32 t + j]`, added to what is there with `accumulate`
/// (the same sums, in the same order, as one call over all the steps). Panics if a read
/// or write would leave its slice, if `NA` is not 1 or 2, or if [`bf16_tiles`] is false.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bf16_conv<const NA: usize>(
    filters: [&[[f32; 16]]; NA],
    planes: &[f32],
    plane: usize,
    offsets: &[usize],
    (q, tiles): (usize, usize),
    out: &mut [f32],
    (ldo, at): (usize, usize),
    accumulate: bool,
) {
    assert!(NA == 1 || NA == 2, "amx: one or two filter blocks");
    assert!(bf16_tiles(), "amx: tiles used where bf16_tiles() is false");
    let steps = offsets.len();
    assert!(filters.iter().all(|f| f.len() >= steps * 16), "amx: the filters are too short");
    let last = 32 * tiles.saturating_sub(1);
    let reach = offsets.iter().max().map_or(0, |&o| o + q + last + 15 * plane + 32);
    assert!(tiles == 0 || reach <= planes.len(), "amx: the input planes are too short");
    assert!(tiles == 0 || (16 * NA - 1) * ldo + at + last + 32 <= out.len(), "amx: the output is too short");
    let (sb, s64, so) = (4 * plane, 64usize, 4 * ldo);
    let x = planes.as_ptr();
    // SAFETY: `bf16_tiles` says the CPU has AMX-TILE and AMX-BF16 and Linux granted the
    // tile state. The configuration is loaded first, so every tile below is 16 rows of 64
    // bytes: a filter tile reads `filters[i][16 s ..][..16]` (in bounds by the assert on
    // their length); an input tile of run `t` reads 16 rows of 16 words from
    // `offsets[s] + q + 32 t` (+16 for the second), `plane` words apart, ending before
    // word `offsets[s] + q + 32 t + 15 · plane + 32`, in bounds by the assert on `reach`;
    // the stores of run `t` write 16 rows of 16 floats from `out[16 i · ldo + at + 32 t]`
    // (+16), `ldo` apart, in bounds by the assert on `out`, and the loads of `accumulate`
    // read the same places. Tiles 0-7 are no register the compiler allocates;
    // `tilerelease` returns them to their initial state.
    unsafe {
        asm!("ldtilecfg [{cfg}]", cfg = in(reg) &CONV_CONFIG, options(nostack, readonly));
        for t in 0..tiles {
            let c = out.as_mut_ptr().add(at + 32 * t);
            if accumulate {
                asm!(
                    "tileloadd tmm0, [{c} + {so} * 1]",
                    "tileloadd tmm1, [{c1} + {so} * 1]",
                    "tileloadd tmm2, [{c2} + {so} * 1]",
                    "tileloadd tmm3, [{c3} + {so} * 1]",
                    c = in(reg) c,
                    c1 = in(reg) c.add(16),
                    c2 = in(reg) c.add(16 * (NA - 1) * ldo),
                    c3 = in(reg) c.add(16 * (NA - 1) * ldo + 16),
                    so = in(reg) so,
                    options(nostack, readonly),
                );
            } else {
                asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
            }
            let xq = x.add(q + 32 * t);
            for (s, &off) in offsets.iter().enumerate() {
                let pb = xq.add(off);
                asm!(
                    "tileloadd tmm6, [{b} + {sb} * 1]",
                    "tileloadd tmm7, [{b2} + {sb} * 1]",
                    "tileloadd tmm4, [{a} + {s64} * 1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    b = in(reg) pb,
                    b2 = in(reg) pb.add(16),
                    a = in(reg) filters[0].as_ptr().add(16 * s),
                    sb = in(reg) sb,
                    s64 = in(reg) s64,
                    options(nostack, readonly),
                );
                if NA == 2 {
                    asm!(
                        "tileloadd tmm5, [{a} + {s64} * 1]",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        a = in(reg) filters[NA - 1].as_ptr().add(16 * s),
                        s64 = in(reg) s64,
                        options(nostack, readonly),
                    );
                }
            }
            asm!(
                "tilestored [{c} + {so} * 1], tmm0",
                "tilestored [{c1} + {so} * 1], tmm1",
                c = in(reg) c,
                c1 = in(reg) c.add(16),
                so = in(reg) so,
                options(nostack),
            );
            if NA == 2 {
                asm!(
                    "tilestored [{c} + {so} * 1], tmm2",
                    "tilestored [{c1} + {so} * 1], tmm3",
                    c = in(reg) c.add(16 * ldo),
                    c1 = in(reg) c.add(16 * ldo + 16),
                    so = in(reg) so,
                    options(nostack),
                );
            }
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}
