//! Half floats (float16, bfloat16) computed in float32, as the plan's casts around a
//! float32 kernel do: each half input widened exactly into the step's scratch, the result
//! rounded once at the end.

use smallvec::SmallVec;

use rivet_kernels::typed::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

use crate::data::{Data, DataMut};
use crate::graph::dtype;

pub fn is_half(t: i32) -> bool {
    matches!(t, dtype::FLOAT16 | dtype::BFLOAT16)
}

/// The type a kernel computes element type `t` in: float32 for the halves.
pub fn computed(t: i32) -> i32 {
    if is_half(t) {
        dtype::FLOAT
    } else {
        t
    }
}

/// The inputs, each half one widened to float32 in `buf` (grown once, then reused), and
/// a float32 region of `out_len` after them for the result.
pub fn widen_all<'s>(
    ins: &[Data<'s>],
    buf: &'s mut Vec<f32>,
    out_len: usize,
) -> (SmallVec<[Data<'s>; 4]>, &'s mut [f32]) {
    let halves: usize = ins.iter().filter(|d| is_half(d.elem_type())).map(|d| d.len()).sum();
    let total = halves + out_len;
    if buf.len() < total {
        buf.resize(total, 0.0);
    }
    let mut rest = &mut buf[..total];
    let mut list = SmallVec::new();
    for &d in ins {
        let (head, tail) = match d {
            Data::F16(_) | Data::BF16(_) => std::mem::take(&mut rest).split_at_mut(d.len()),
            _ => {
                list.push(d);
                continue;
            }
        };
        match d {
            Data::F16(v) => head.iter_mut().zip(v).for_each(|(o, &h)| *o = f16_to_f32(h)),
            Data::BF16(v) => head.iter_mut().zip(v).for_each(|(o, &h)| *o = bf16_to_f32(h)),
            _ => {}
        }
        list.push(Data::F32(head));
        rest = tail;
    }
    (list, rest)
}

/// Rounds a float32 result into a half output.
pub fn narrow(src: &[f32], out: &mut DataMut<'_>) -> Result<(), String> {
    match out {
        DataMut::F16(y) => y.iter_mut().zip(src).for_each(|(o, &v)| *o = f32_to_f16(v)),
        DataMut::BF16(y) => y.iter_mut().zip(src).for_each(|(o, &v)| *o = f32_to_bf16(v)),
        _ => return Err("element types differ from the plan's".into()),
    }
    Ok(())
}
