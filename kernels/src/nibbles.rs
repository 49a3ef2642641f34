//! The 4-bit integers (ONNX's INT4 and UINT4) as ORT stores them, two a byte (element
//! `2k` in the low four bits of byte `k`, `2k + 1` in the high four), and as Rivet holds
//! them inside a plan, one a byte (int4 sign-extended into an i8). The 2-bit integers
//! likewise, four a byte (element `4k + j` in bits `2j..2j + 2` of byte `k`).

/// Bytes holding `n` packed 4-bit values.
pub fn packed_len(n: usize) -> usize {
    n.div_ceil(2)
}

/// The `y.len()` uint4 values packed in `bytes`, one a byte.
pub fn unpack_u4(bytes: &[u8], y: &mut [u8]) {
    for (k, o) in y.iter_mut().enumerate() {
        *o = (bytes[k / 2] >> (4 * (k % 2))) & 0xf;
    }
}

/// The `y.len()` int4 values packed in `bytes`, sign-extended.
pub fn unpack_i4(bytes: &[u8], y: &mut [i8]) {
    for (k, o) in y.iter_mut().enumerate() {
        let nibble = (bytes[k / 2] >> (4 * (k % 2))) & 0xf;
        *o = ((nibble << 4) as i8) >> 4;
    }
}

/// Packs the low four bits of each of `x` (uint4 or int4 held a byte) into `bytes`
/// (`packed_len(x.len())` of them; an odd count leaves the last high half zero).
pub fn pack4(x: impl ExactSizeIterator<Item = u8>, bytes: &mut [u8]) {
    let n = x.len();
    bytes[..packed_len(n)].fill(0);
    for (k, v) in x.enumerate() {
        bytes[k / 2] |= (v & 0xf) << (4 * (k % 2));
    }
}

/// A 64-bit integer wrapped to 4 bits (two's complement), as a cast to int4 does.
pub fn wrap_i4(v: i64) -> i8 {
    (((v & 0xf) as u8) << 4) as i8 >> 4
}

/// A 64-bit integer wrapped to 4 bits, as a cast to uint4 does.
pub fn wrap_u4(v: i64) -> u8 {
    (v & 0xf) as u8
}

/// Bytes holding `n` packed 2-bit values.
pub fn packed2_len(n: usize) -> usize {
    n.div_ceil(4)
}

/// The `y.len()` uint2 values packed in `bytes`, one a byte.
pub fn unpack_u2(bytes: &[u8], y: &mut [u8]) {
    for (k, o) in y.iter_mut().enumerate() {
        *o = (bytes[k / 4] >> (2 * (k % 4))) & 0x3;
    }
}

/// The `y.len()` int2 values packed in `bytes`, sign-extended.
pub fn unpack_i2(bytes: &[u8], y: &mut [i8]) {
    for (k, o) in y.iter_mut().enumerate() {
        let bits = (bytes[k / 4] >> (2 * (k % 4))) & 0x3;
        *o = ((bits << 6) as i8) >> 6;
    }
}

/// Packs the low two bits of each of `x` into `bytes` (`packed2_len(x.len())` of them;
/// the unused high bits of the last byte zero).
pub fn pack2(x: impl ExactSizeIterator<Item = u8>, bytes: &mut [u8]) {
    let n = x.len();
    bytes[..packed2_len(n)].fill(0);
    for (k, v) in x.enumerate() {
        bytes[k / 4] |= (v & 0x3) << (2 * (k % 4));
    }
}

/// A 64-bit integer wrapped to 2 bits (two's complement), as a cast to int2 does.
pub fn wrap_i2(v: i64) -> i8 {
    (((v & 0x3) as u8) << 6) as i8 >> 6
}

/// A 64-bit integer wrapped to 2 bits, as a cast to uint2 does.
pub fn wrap_u2(v: i64) -> u8 {
    (v & 0x3) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_and_orders_nibbles_low_first() {
        let u: Vec<u8> = (0..7).map(|k| (k * 5 % 16) as u8).collect();
        let mut bytes = [0xffu8; 4];
        pack4(u.iter().copied(), &mut bytes);
        assert_eq!(bytes, [0x50, 0xfa, 0x94, 0x0e]);
        let mut back = [0u8; 7];
        unpack_u4(&bytes, &mut back);
        assert_eq!(back.to_vec(), u);
        let i: Vec<i8> = vec![-8, 7, -1, 0, 3];
        pack4(i.iter().map(|&v| v as u8), &mut bytes);
        let mut back = [0i8; 5];
        unpack_i4(&bytes, &mut back);
        assert_eq!(back.to_vec(), i);
    }

    #[test]
    fn two_bit_packing_round_trips() {
        let u: Vec<u8> = (0..7).map(|k| (k * 3 % 4) as u8).collect();
        let mut bytes = [0xffu8; 2];
        pack2(u.iter().copied(), &mut bytes);
        // 0, 3, 2, 1 | 0, 3, 2: low bits first.
        assert_eq!(bytes, [0b01_10_11_00, 0b00_10_11_00]);
        let mut back = [0u8; 7];
        unpack_u2(&bytes, &mut back);
        assert_eq!(back.to_vec(), u);
        let i: Vec<i8> = vec![-2, 1, -1, 0, 1];
        pack2(i.iter().map(|&v| v as u8), &mut bytes);
        let mut back = [0i8; 5];
        unpack_i2(&bytes, &mut back);
        assert_eq!(back.to_vec(), i);
        assert_eq!([wrap_i2(2), wrap_i2(-3), wrap_i2(5)], [-2, 1, 1]);
        assert_eq!([wrap_u2(-1), wrap_u2(4)], [3, 0]);
    }

    #[test]
    fn wrapping_keeps_the_low_four_bits() {
        assert_eq!([wrap_i4(-9), wrap_i4(8), wrap_i4(100), wrap_i4(-8), wrap_i4(15)], [7, -8, 4, -8, -1]);
        assert_eq!([wrap_u4(-1), wrap_u4(16), wrap_u4(100)], [15, 0, 4]);
    }
}
