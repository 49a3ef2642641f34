//! The portable build of the driver (any CPU): a 4x8 microkernel in plain Rust, and its
//! packings.

use super::{pack_a_whole, pack_whole, run, APanel, BPanel, GemmScratch, Job, Out, SHORT_MR};

/// Portable microkernel: 4×8 in plain Rust (LLVM keeps it in SSE registers).
#[inline(always)]
fn micro_portable(a: APanel<'_, 4>, b: BPanel<'_, 8>, out: Out<'_, 4, 8>) {
    let mut acc = [[0.0f32; 8]; 4];
    a.each_depth::<4, 8>(b, |br, ar| {
        for (r, row) in acc.iter_mut().enumerate() {
            let av = ar(r);
            for (x, &bv) in row.iter_mut().zip(br) {
                *x += av * bv;
            }
        }
    });
    out.merge(&acc);
}

/// The portable build (any CPU).
pub(crate) fn portable(scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    // 4 rows: the tile is the short kernel's height, so neither is ever taken.
    run::<PORTABLE_MR, 8, SHORT_MR>(
        scratch,
        job,
        c,
        PORTABLE_KC,
        PORTABLE_NC,
        false,
        false,
        false,
        micro_portable,
        micro_portable,
        micro_portable,
        // (Its tile's own rows, the first two kept: only the x86 tiles gain from fewer.)
        |a, b, out| {
            let mut tile = [[0.0f32; 8]; PORTABLE_MR];
            micro_portable(a, b, Out::Tile(&mut tile));
            match out {
                Out::Tile(t) | Out::Part(t, _) => t.copy_from_slice(&tile[..super::TINY_MR]),
                Out::C { .. } => unreachable!("the driver computes a tiny strip into a tile"),
            }
        },
    );
}

/// The portable build's A packing, for [`super::pack_a`]: floats written and the tile's rows.
pub(crate) fn portable_pack_a(job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    (pack_a_whole::<PORTABLE_MR>(job, dst, PORTABLE_KC), PORTABLE_MR)
}

/// The portable build's B packing, for [`super::pack_b`].
pub(crate) fn portable_pack_b(job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    (pack_whole::<8>(job, dst, PORTABLE_KC, PORTABLE_NC), 8)
}

pub(crate) const PORTABLE_MR: usize = 4;
const PORTABLE_KC: usize = 256;
const PORTABLE_NC: usize = 1024;
