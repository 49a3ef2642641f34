//! The sub-byte integers as ORT stores them, `8 / width` a byte, element `k` in bits
//! `width · (k mod per) ..` of byte `k / per` (4-bit: INT4, UINT4 and FLOAT4E2M1's codes;
//! 2-bit: INT2, UINT2), and as Rivet holds them inside a plan, one a byte (the signed ones
//! sign-extended into an i8).

/// Bytes holding `n` packed values of `width` bits (2 or 4).
pub fn packed_len(n: usize, width: u32) -> usize {
    n.div_ceil((8 / width) as usize)
}

/// The `width`-bit field of element `k`.
fn field(bytes: &[u8], width: u32, k: usize) -> u8 {
    let per = (8 / width) as usize;
    (bytes[k / per] >> (width as usize * (k % per))) & ((1 << width) - 1)
}

/// The `y.len()` unsigned values packed in `bytes`, one a byte.
pub fn unpack_unsigned(bytes: &[u8], width: u32, y: &mut [u8]) {
    for (k, o) in y.iter_mut().enumerate() {
        *o = field(bytes, width, k);
    }
}

/// The `y.len()` signed values packed in `bytes`, sign-extended.
pub fn unpack_signed(bytes: &[u8], width: u32, y: &mut [i8]) {
    let shift = 8 - width;
    for (k, o) in y.iter_mut().enumerate() {
        *o = ((field(bytes, width, k) << shift) as i8) >> shift;
    }
}

/// Packs the low `width` bits of each of `x` into `bytes` (`packed_len` of them; the
/// unused high bits of the last byte zero).
pub fn pack(x: impl ExactSizeIterator<Item = u8>, width: u32, bytes: &mut [u8]) {
    let per = (8 / width) as usize;
    bytes[..packed_len(x.len(), width)].fill(0);
    for (k, v) in x.enumerate() {
        bytes[k / per] |= (v & ((1 << width) - 1)) << (width as usize * (k % per));
    }
}

/// A 64-bit integer wrapped to `width` bits, two's complement (a cast to int4 or int2).
pub fn wrap_signed(v: i64, width: u32) -> i8 {
    let shift = 8 - width;
    ((wrap_unsigned(v, width) << shift) as i8) >> shift
}

/// A 64-bit integer wrapped to `width` bits (a cast to uint4 or uint2).
pub fn wrap_unsigned(v: i64, width: u32) -> u8 {
    (v & ((1 << width) - 1)) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bit_packing_round_trips_and_orders_nibbles_low_first() {
        let u: Vec<u8> = (0..7).map(|k| (k * 5 % 16) as u8).collect();
        let mut bytes = [0xffu8; 4];
        pack(u.iter().copied(), 4, &mut bytes);
        assert_eq!(bytes, [0x50, 0xfa, 0x94, 0x0e]);
        let mut back = [0u8; 7];
        unpack_unsigned(&bytes, 4, &mut back);
        assert_eq!(back.to_vec(), u);
        let i: Vec<i8> = vec![-8, 7, -1, 0, 3];
        pack(i.iter().map(|&v| v as u8), 4, &mut bytes);
        let mut back = [0i8; 5];
        unpack_signed(&bytes, 4, &mut back);
        assert_eq!(back.to_vec(), i);
    }

    #[test]
    fn two_bit_packing_round_trips() {
        let u: Vec<u8> = (0..7).map(|k| (k * 3 % 4) as u8).collect();
        let mut bytes = [0xffu8; 2];
        pack(u.iter().copied(), 2, &mut bytes);
        // 0, 3, 2, 1 | 0, 3, 2: low bits first.
        assert_eq!(bytes, [0b01_10_11_00, 0b00_10_11_00]);
        let mut back = [0u8; 7];
        unpack_unsigned(&bytes, 2, &mut back);
        assert_eq!(back.to_vec(), u);
        let i: Vec<i8> = vec![-2, 1, -1, 0, 1];
        pack(i.iter().map(|&v| v as u8), 2, &mut bytes);
        let mut back = [0i8; 5];
        unpack_signed(&bytes, 2, &mut back);
        assert_eq!(back.to_vec(), i);
    }

    #[test]
    fn wrapping_keeps_the_low_bits() {
        assert_eq!([-9, 8, 100, -8, 15].map(|v| wrap_signed(v, 4)), [7, -8, 4, -8, -1]);
        assert_eq!([-1, 16, 100].map(|v| wrap_unsigned(v, 4)), [15, 0, 4]);
        assert_eq!([2, -3, 5].map(|v| wrap_signed(v, 2)), [-2, 1, 1]);
        assert_eq!([-1, 4].map(|v| wrap_unsigned(v, 2)), [3, 0]);
    }
}
