//! Buffers whose first element starts on a 64-byte boundary, for the AMX tiles: a tile
//! loads 16 rows of 64 bytes, and a row that straddles two cache lines is two loads. On
//! the Xeon measured (KVM, family 6 model 167) a misaligned tile load made the tiles
//! 2.5x slower: `tdpbusd` on 9 chunks of 2 strips took 308 ns aligned and 760 ns off by
//! 4 bytes; the bf16 convolution of 64 -> 64 channels 3x3 on 56x56 375 -> 263 us with its
//! filters aligned. A `Vec<f32>` is only as aligned as the allocator makes it (16 bytes).

use std::ops::{Deref, DerefMut};

/// `len` elements of `buf` from its first 64-byte boundary: `buf` grows to hold them
/// (what it held is kept, but where the boundary falls may move when it grows).
pub fn aligned_in<T: Copy + Default>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
    const { assert!(std::mem::size_of::<T>() == 4, "4-byte elements") };
    if buf.len() < len + 15 {
        buf.resize(len + 15, T::default());
    }
    let off = first_line(buf);
    &mut buf[off..off + len]
}

/// The elements of `buf` before its first 64-byte boundary (fewer than 16: the allocator
/// aligns to at least the element's 4 bytes).
fn first_line<T>(buf: &[T]) -> usize {
    let off = buf.as_ptr().align_offset(64);
    if off < 16 {
        off
    } else {
        0
    }
}

/// Elements of a 4-byte type, the first on a 64-byte boundary: `Deref` to `[T]`. Made or
/// refilled by [`reset`](Aligned::reset) or [`assign`](Aligned::assign); what they
/// discard is not kept. A clone is aligned too.
#[derive(Debug, Default)]
pub struct Aligned<T> {
    buf: Vec<T>,
    /// Elements of `buf` before the first one.
    off: usize,
    len: usize,
}

impl<T: Copy + Default> Aligned<T> {
    /// `len` elements of `fill`, in this buffer's memory when it has room.
    pub fn reset(&mut self, len: usize, fill: T) {
        const { assert!(std::mem::size_of::<T>() == 4, "4-byte elements") };
        // 15 elements of room to move the first to a 64-byte boundary (the allocator
        // aligns to at least the element's 4 bytes).
        let need = len + 15;
        if self.buf.len() < need {
            self.buf.resize(need, T::default());
        }
        self.off = first_line(&self.buf);
        self.len = len;
        self.deref_mut().fill(fill);
    }

    /// A copy of `src`.
    pub fn assign(&mut self, src: &[T]) {
        self.reset(src.len(), T::default());
        self.copy_from_slice(src);
    }
}

impl<T: Copy + Default> Clone for Aligned<T> {
    /// In memory of its own, from its first 64-byte boundary (a derived clone would keep
    /// the offset of the original's memory).
    fn clone(&self) -> Self {
        let mut copy = Aligned { buf: Vec::new(), off: 0, len: 0 };
        copy.assign(self);
        copy
    }
}

impl<T> Deref for Aligned<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl<T> DerefMut for Aligned<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// Lines of 16 elements of a 4-byte type (64 bytes), the first on a 64-byte boundary:
/// `Deref` to `[[T; 16]]`. A clone is aligned too.
#[derive(Debug, Default)]
pub struct Lines<T>(Aligned<T>);

impl<T: Copy + Default> Clone for Lines<T> {
    fn clone(&self) -> Self {
        Lines(self.0.clone())
    }
}

impl<T: Copy + Default> Lines<T> {
    /// `len` lines of `fill`, in this buffer's memory when it has room.
    pub fn reset(&mut self, len: usize, fill: [T; 16]) {
        self.0.reset(16 * len, T::default());
        for line in self.deref_mut() {
            *line = fill;
        }
    }

    /// `len` lines whose contents are unspecified (what this buffer held, moved or not,
    /// and zeros where it grew): for a caller that writes every line it reads.
    pub fn resize_any(&mut self, len: usize) {
        let need = 16 * len + 15;
        let buf = &mut self.0.buf;
        if buf.len() < need {
            buf.resize(need, T::default());
        }
        self.0.off = first_line(buf);
        self.0.len = 16 * len;
    }
}

impl<T> Deref for Lines<T> {
    type Target = [[T; 16]];
    fn deref(&self) -> &[[T; 16]] {
        self.0.as_chunks::<16>().0
    }
}

impl<T> DerefMut for Lines<T> {
    fn deref_mut(&mut self) -> &mut [[T; 16]] {
        self.0.as_chunks_mut::<16>().0
    }
}

#[cfg(test)]
mod tests {
    use super::{Aligned, Lines};

    #[test]
    fn lines_start_on_64_bytes_and_hold_their_fill() {
        let mut l = Lines::<i32>::default();
        assert!(l.is_empty());
        for len in [1, 3, 100, 2, 0, 500] {
            l.reset(len, [len as i32; 16]);
            assert_eq!(l.len(), len);
            assert!(len == 0 || (l.as_ptr() as usize).is_multiple_of(64), "len {len}");
            assert!(l.iter().all(|x| *x == [len as i32; 16]));
            if let Some(last) = l.last_mut() {
                last[15] = -1;
            }
            let copy = l.clone();
            assert!(len == 0 || (copy.as_ptr() as usize).is_multiple_of(64), "clone of {len}");
            assert_eq!(copy[..], l[..]);
        }
        let mut v = vec![1.5f32; 3];
        let part = super::aligned_in(&mut v, 40);
        assert!(part.len() == 40 && (part.as_ptr() as usize).is_multiple_of(64));
        let mut f = Aligned::<f32>::default();
        for len in [7, 1000, 33] {
            let src: Vec<f32> = (0..len).map(|i| i as f32).collect();
            f.assign(&src);
            assert!((f.as_ptr() as usize).is_multiple_of(64) && f[..] == src[..]);
        }
    }
}
