//! Tensor data of any element type Rivet runs: owned buffers ([`Buf`]) and borrowed views
//! ([`Data`], [`DataMut`]). bool is kept as bytes (0 / 1 when Rivet writes them), float16,
//! bfloat16 and the 8-bit floats as their bits.

use rivet_kernels::float8::F8;

/// ONNX element type codes (TensorProto.DataType).
pub mod dtype {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;
    pub const FLOAT8E4M3FN: i32 = 17;
    pub const FLOAT8E4M3FNUZ: i32 = 18;
    pub const FLOAT8E5M2: i32 = 19;
    pub const FLOAT8E5M2FNUZ: i32 = 20;
    pub const UINT4: i32 = 21;
    pub const INT4: i32 = 22;
    pub const FLOAT4E2M1: i32 = 23;
    /// ORT's numbering from here on (its C API's, which is what ORT hands Rivet): ONNX's
    /// TensorProto puts FLOAT8E8M0 at 24 before UINT2 (25) and INT2 (26). A type code in
    /// an attribute (Cast's `to`) is ONNX's: see [`from_onnx`].
    pub const UINT2: i32 = 24;
    pub const INT2: i32 = 25;
    pub const FLOAT8E8M0: i32 = 26;

    /// An attribute's ONNX TensorProto type code as ORT's element type.
    pub fn from_onnx(code: i64) -> i32 {
        match code {
            24 => FLOAT8E8M0,
            25 => UINT2,
            26 => INT2,
            c => c as i32,
        }
    }

    /// Name of an ONNX element type, for messages.
    pub fn name(code: i32) -> &'static str {
        match code {
            1 => "float32",
            2 => "uint8",
            3 => "int8",
            4 => "uint16",
            5 => "int16",
            6 => "int32",
            7 => "int64",
            8 => "string",
            9 => "bool",
            10 => "float16",
            11 => "float64",
            12 => "uint32",
            13 => "uint64",
            16 => "bfloat16",
            17 => "float8e4m3fn",
            18 => "float8e4m3fnuz",
            19 => "float8e5m2",
            20 => "float8e5m2fnuz",
            21 => "uint4",
            22 => "int4",
            23 => "float4e2m1",
            24 => "uint2",
            25 => "int2",
            26 => "float8e8m0",
            _ => "other",
        }
    }
}

/// Calls `$m!` with every element type: variant, Rust storage type, ONNX code.
macro_rules! elem_types {
    ($m:ident) => {
        $m! {
            F32: f32 = 1,
            F64: f64 = 11,
            I8: i8 = 3,
            I16: i16 = 5,
            I32: i32 = 6,
            I64: i64 = 7,
            U8: u8 = 2,
            U16: u16 = 4,
            U32: u32 = 12,
            U64: u64 = 13,
            Bool: u8 = 9,
            F16: u16 = 10,
            BF16: u16 = 16,
            F8E4M3FN: u8 = 17,
            F8E4M3FNUZ: u8 = 18,
            F8E5M2: u8 = 19,
            F8E5M2FNUZ: u8 = 20,
            U4: u8 = 21,
            I4: i8 = 22,
            F4E2M1: u8 = 23,
            U2: u8 = 24,
            I2: i8 = 25,
            E8M0: u8 = 26
        }
    };
}

macro_rules! define {
    ($($v:ident: $t:ty = $code:literal),*) => {
        /// An owned tensor buffer.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Buf { $($v(Vec<$t>)),* }

        /// A borrowed tensor.
        #[derive(Clone, Copy, Debug)]
        pub enum Data<'a> { $($v(&'a [$t])),* }

        /// A borrowed tensor being written.
        #[derive(Debug)]
        pub enum DataMut<'a> { $($v(&'a mut [$t])),* }

        /// Bytes per element in ORT's tensors, for the element types Rivet runs (none for
        /// the packed types: see [`packed`]).
        pub fn elem_size(elem_type: i32) -> Option<usize> {
            if packed(elem_type) {
                return None;
            }
            match elem_type { $($code => Some(std::mem::size_of::<$t>()),)* _ => None }
        }

        impl Buf {
            /// An empty buffer of `elem_type`, if Rivet runs that type.
            pub fn new(elem_type: i32) -> Option<Buf> {
                match elem_type { $($code => Some(Buf::$v(Vec::new())),)* _ => None }
            }
            /// A buffer of `elem_type` from native-endian bytes (a whole number of elements).
            pub fn from_bytes(elem_type: i32, bytes: &[u8]) -> Option<Buf> {
                match elem_type {
                    $($code => {
                        const N: usize = std::mem::size_of::<$t>();
                        Some(Buf::$v(bytes.chunks_exact(N)
                            .map(|c| <$t>::from_ne_bytes(c.try_into().expect("N bytes")))
                            .collect()))
                    })*
                    _ => None,
                }
            }
            pub fn elem_type(&self) -> i32 {
                match self { $(Buf::$v(_) => $code),* }
            }
            pub fn len(&self) -> usize {
                match self { $(Buf::$v(b) => b.len()),* }
            }
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
            /// Grows or shrinks to `len` elements (new ones are zero); keeps the capacity.
            #[inline]
            pub fn resize(&mut self, len: usize) {
                match self { $(Buf::$v(b) => if b.len() != len { b.resize(len, Default::default()) }),* }
            }
            pub fn view(&self) -> Data<'_> {
                match self { $(Buf::$v(b) => Data::$v(b)),* }
            }
            /// Grows the buffer to at least `len` elements (zero-filled past its old
            /// length); never shrinks it, so a buffer shared by values of different sizes
            /// fills nothing once it has held the largest.
            pub fn grow(&mut self, len: usize) {
                match self { $(Buf::$v(b) => if b.len() < len { b.resize(len, Default::default()) }),* }
            }
            /// The first `len` elements (at most the buffer's length).
            pub fn view_prefix(&self, len: usize) -> Data<'_> {
                match self { $(Buf::$v(b) => Data::$v(&b[..len.min(b.len())])),* }
            }
            /// The first `len` elements, to write (at most the buffer's length).
            pub fn view_mut_prefix(&mut self, len: usize) -> DataMut<'_> {
                match self { $(Buf::$v(b) => { let n = len.min(b.len()); DataMut::$v(&mut b[..n]) }),* }
            }
            /// Elements `at..at + len` (a value that is a part of a larger one; panics past
            /// the buffer's length).
            pub fn view_range(&self, at: usize, len: usize) -> Data<'_> {
                match self { $(Buf::$v(b) => Data::$v(&b[at..at + len])),* }
            }
            /// Elements `at..at + len`, to write (panics past the buffer's length).
            pub fn view_mut_range(&mut self, at: usize, len: usize) -> DataMut<'_> {
                match self { $(Buf::$v(b) => DataMut::$v(&mut b[at..at + len])),* }
            }
            /// The elements' native-endian bytes.
            pub fn to_ne_bytes(&self) -> Vec<u8> {
                match self { $(Buf::$v(b) => b.iter().flat_map(|v| v.to_ne_bytes()).collect()),* }
            }
            pub fn view_mut(&mut self) -> DataMut<'_> {
                match self { $(Buf::$v(b) => DataMut::$v(b)),* }
            }
        }

        impl<'a> Data<'a> {
            /// No elements, of `elem_type`.
            pub fn empty(elem_type: i32) -> Option<Data<'a>> {
                match elem_type { $($code => Some(Data::$v(&[])),)* _ => None }
            }
            pub fn elem_type(&self) -> i32 {
                match self { $(Data::$v(_) => $code),* }
            }
            pub fn len(&self) -> usize {
                match self { $(Data::$v(b) => b.len()),* }
            }
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }

        impl<'a> DataMut<'a> {
            pub fn elem_type(&self) -> i32 {
                match self { $(DataMut::$v(_) => $code),* }
            }
            pub fn len(&self) -> usize {
                match self { $(DataMut::$v(b) => b.len()),* }
            }
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
            /// Reads what has been written.
            pub fn view(&self) -> Data<'_> {
                match self { $(DataMut::$v(b) => Data::$v(b)),* }
            }
        }
    };
}
elem_types!(define);

impl<'a> Data<'a> {
    /// The elements, when they are float32.
    pub fn f32(self) -> Option<&'a [f32]> {
        match self {
            Data::F32(x) => Some(x),
            _ => None,
        }
    }
    /// The elements, when they are int64.
    pub fn i64(self) -> Option<&'a [i64]> {
        match self {
            Data::I64(x) => Some(x),
            _ => None,
        }
    }
}

impl<'a> DataMut<'a> {
    /// The elements, when they are float32.
    pub fn f32(&mut self) -> Option<&mut [f32]> {
        match self {
            DataMut::F32(x) => Some(x),
            _ => None,
        }
    }
}

impl Default for Buf {
    fn default() -> Self {
        Buf::F32(Vec::new())
    }
}

/// Whether Rivet can hold tensors of this ONNX element type.
pub fn supported(elem_type: i32) -> bool {
    Buf::new(elem_type).is_some()
}

/// Bytes of an ORT tensor of `len` elements of `elem_type`, for a type Rivet holds.
pub fn ort_bytes(elem_type: i32, len: usize) -> Option<usize> {
    match packed_width(elem_type) {
        Some(width) => Some(rivet_kernels::nibbles::packed_len(len, width)),
        None => Some(elem_size(elem_type)? * len),
    }
}

/// Bits an element of a packed type (4 or 2; none for the others).
pub fn packed_width(elem_type: i32) -> Option<u32> {
    if packed4(elem_type) {
        Some(4)
    } else if packed2(elem_type) {
        Some(2)
    } else {
        None
    }
}

impl Buf {
    /// A buffer of `len` elements of `elem_type` from the bytes of an ORT tensor
    /// (`ort_bytes(elem_type, len)` of them): the packed types unpacked.
    pub fn from_ort_bytes(elem_type: i32, bytes: &[u8], len: usize) -> Option<Buf> {
        let mut b = Buf::new(elem_type)?;
        if !b.unpack(bytes, len) {
            return Buf::from_bytes(elem_type, bytes);
        }
        Some(b)
    }

    /// For a packed type: holds the `len` values packed in `bytes` (false for the others).
    pub fn unpack(&mut self, bytes: &[u8], len: usize) -> bool {
        use rivet_kernels::nibbles::{unpack_signed, unpack_unsigned};
        let width = packed_width(self.elem_type()).unwrap_or(0);
        match self {
            Buf::U4(y) | Buf::F4E2M1(y) | Buf::U2(y) => {
                y.resize(len, 0);
                unpack_unsigned(bytes, width, y);
            }
            Buf::I4(y) | Buf::I2(y) => {
                y.resize(len, 0);
                unpack_signed(bytes, width, y);
            }
            _ => return false,
        }
        true
    }
}

impl Data<'_> {
    /// For a packed type: packs the values into `bytes` (`ort_bytes` of them; false for
    /// the others).
    pub fn pack(&self, bytes: &mut [u8]) -> bool {
        use rivet_kernels::nibbles::pack;
        let width = packed_width(self.elem_type()).unwrap_or(0);
        match *self {
            Data::U4(v) | Data::F4E2M1(v) | Data::U2(v) => pack(v.iter().copied(), width, bytes),
            Data::I4(v) | Data::I2(v) => pack(v.iter().map(|&x| x as u8), width, bytes),
            _ => return false,
        }
        true
    }
}

/// The 4-bit types (uint4, int4, float4e2m1): two a byte in ORT's tensors, one a byte in
/// Rivet's buffers (int4 sign-extended, float4e2m1 as its four bits); unpacked where ORT
/// hands them in, packed where Rivet hands them out.
pub fn packed4(elem_type: i32) -> bool {
    matches!(elem_type, dtype::UINT4 | dtype::INT4 | dtype::FLOAT4E2M1)
}

/// The 2-bit integers (uint2, int2): four a byte in ORT's tensors, held as the 4-bit ones.
pub fn packed2(elem_type: i32) -> bool {
    matches!(elem_type, dtype::UINT2 | dtype::INT2)
}

/// A type ORT packs below a byte an element.
pub fn packed(elem_type: i32) -> bool {
    packed4(elem_type) || packed2(elem_type)
}

/// float32, float64 and the integers: the types arithmetic and comparisons run on.
pub fn is_number(elem_type: i32) -> bool {
    use dtype::*;
    matches!(elem_type, FLOAT | DOUBLE | INT8 | INT16 | INT32 | INT64 | UINT8 | UINT16 | UINT32 | UINT64)
}

/// The 8-bit float format of an element type.
pub fn float8(elem_type: i32) -> Option<F8> {
    match elem_type {
        dtype::FLOAT8E4M3FN => Some(F8::E4M3FN),
        dtype::FLOAT8E4M3FNUZ => Some(F8::E4M3FNUZ),
        dtype::FLOAT8E5M2 => Some(F8::E5M2),
        dtype::FLOAT8E5M2FNUZ => Some(F8::E5M2FNUZ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_onnx_type_rivet_holds_round_trips_through_bytes() {
        for code in [21, 22, 23, 24, 25] {
            assert!(supported(code) && packed(code) && elem_size(code).is_none(), "{code}");
        }
        assert_eq!(
            [dtype::from_onnx(24), dtype::from_onnx(25), dtype::from_onnx(26), dtype::from_onnx(7)],
            [26, 24, 25, 7]
        );
        for code in [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 26] {
            let size = elem_size(code).expect("supported");
            let bytes: Vec<u8> = (0..size as u8 * 3).collect();
            let b = Buf::from_bytes(code, &bytes).unwrap();
            assert_eq!((b.elem_type(), b.len()), (code, 3), "{}", dtype::name(code));
        }
        for code in [0, 8, 14, 15, 27] {
            assert!(Buf::new(code).is_none() && !supported(code), "{code}");
        }
        assert_eq!(Buf::from_bytes(dtype::INT64, &7i64.to_ne_bytes()), Some(Buf::I64(vec![7])));
    }
}

/// Element storage: a typed slice out of a [`Data`]. bool and the 8-bit floats share `u8`
/// and the half floats share `u16`, which is all data movement needs.
pub trait Storage: Copy + Default + 'static {
    fn get(d: Data<'_>) -> Option<&[Self]>;
    fn get_mut<'a>(d: &'a mut DataMut<'_>) -> Option<&'a mut [Self]>;
}

macro_rules! storage {
    ($t:ty: $($v:ident),+) => {
        impl Storage for $t {
            fn get(d: Data<'_>) -> Option<&[$t]> {
                match d {
                    $(Data::$v(x) => Some(x),)+
                    _ => None,
                }
            }
            fn get_mut<'a>(d: &'a mut DataMut<'_>) -> Option<&'a mut [$t]> {
                match d {
                    $(DataMut::$v(x) => Some(x),)+
                    _ => None,
                }
            }
        }
    };
}
storage!(f32: F32);
storage!(f64: F64);
storage!(i8: I8, I4, I2);
storage!(i16: I16);
storage!(i32: I32);
storage!(i64: I64);
storage!(u8: U8, Bool, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, U4, F4E2M1, U2, E8M0);
storage!(u16: U16, F16, BF16);
storage!(u32: U32);
storage!(u64: U64);

/// Calls `$f::<T>(args.., y)` with the output's storage type.
macro_rules! by_storage {
    ($dst:expr, $f:ident($($arg:expr),*)) => {
        match $dst {
            DataMut::F32(y) => $f::<f32>($($arg,)* y),
            DataMut::F64(y) => $f::<f64>($($arg,)* y),
            DataMut::I8(y) | DataMut::I4(y) | DataMut::I2(y) => $f::<i8>($($arg,)* y),
            DataMut::I16(y) => $f::<i16>($($arg,)* y),
            DataMut::I32(y) => $f::<i32>($($arg,)* y),
            DataMut::I64(y) => $f::<i64>($($arg,)* y),
            DataMut::U8(y) | DataMut::Bool(y) | DataMut::F8E4M3FN(y) | DataMut::F8E4M3FNUZ(y) | DataMut::F8E5M2(y) | DataMut::F8E5M2FNUZ(y)
            | DataMut::U4(y)
            | DataMut::F4E2M1(y)
            | DataMut::U2(y)
            | DataMut::E8M0(y) => {
                $f::<u8>($($arg,)* y)
            }
            DataMut::U16(y) | DataMut::F16(y) | DataMut::BF16(y) => $f::<u16>($($arg,)* y),
            DataMut::U32(y) => $f::<u32>($($arg,)* y),
            DataMut::U64(y) => $f::<u64>($($arg,)* y),
        }
    };
}
pub(crate) use by_storage;

/// Calls `$f::<T>(args..)` with the numeric type of `$data` (`$other` for other types).
macro_rules! by_number {
    ($data:expr, $other:expr, $f:ident($($arg:expr),*)) => {
        match $data {
            Data::F32(_) => $f::<f32>($($arg),*),
            Data::F64(_) => $f::<f64>($($arg),*),
            Data::I8(_) => $f::<i8>($($arg),*),
            Data::I16(_) => $f::<i16>($($arg),*),
            Data::I32(_) => $f::<i32>($($arg),*),
            Data::I64(_) => $f::<i64>($($arg),*),
            Data::U8(_) => $f::<u8>($($arg),*),
            Data::U16(_) => $f::<u16>($($arg),*),
            Data::U32(_) => $f::<u32>($($arg),*),
            Data::U64(_) => $f::<u64>($($arg),*),
            Data::Bool(_)
            | Data::F16(_)
            | Data::BF16(_)
            | Data::F8E4M3FN(_)
            | Data::F8E4M3FNUZ(_)
            | Data::F8E5M2(_)
            | Data::F8E5M2FNUZ(_)
            | Data::U4(_)
            | Data::I4(_)
            | Data::F4E2M1(_)
            | Data::U2(_)
            | Data::I2(_)
            | Data::E8M0(_) => $other,
        }
    };
}
pub(crate) use by_number;

/// Calls `$m!(y, one)` with the output's elements and its type's 1 (the bits of 1.0 for
/// the halves, true for bool).
macro_rules! with_one {
    ($dst:expr, $m:ident) => {
        match $dst {
            DataMut::F32(y) => $m!(y, 1.0),
            DataMut::F64(y) => $m!(y, 1.0),
            DataMut::F16(y) => $m!(y, 0x3c00),
            DataMut::BF16(y) => $m!(y, 0x3f80),
            DataMut::F8E4M3FN(y) => $m!(y, 0x38),
            DataMut::F8E4M3FNUZ(y) | DataMut::F8E5M2FNUZ(y) => $m!(y, 0x40),
            DataMut::F8E5M2(y) => $m!(y, 0x3c),
            DataMut::U4(y) => $m!(y, 1),
            DataMut::I4(y) => $m!(y, 1),
            DataMut::F4E2M1(y) => $m!(y, 0x2),
            DataMut::U2(y) => $m!(y, 1),
            DataMut::I2(y) => $m!(y, 1),
            DataMut::E8M0(y) => $m!(y, 127),
            DataMut::I8(y) => $m!(y, 1),
            DataMut::I16(y) => $m!(y, 1),
            DataMut::I32(y) => $m!(y, 1),
            DataMut::I64(y) => $m!(y, 1),
            DataMut::U8(y) | DataMut::Bool(y) => $m!(y, 1),
            DataMut::U16(y) => $m!(y, 1),
            DataMut::U32(y) => $m!(y, 1),
            DataMut::U64(y) => $m!(y, 1),
        }
    };
}
pub(crate) use with_one;

/// An element of any numeric tensor, as f64.
pub fn number_at(d: Data<'_>, k: usize) -> f64 {
    match d {
        Data::F32(v) => v[k] as f64,
        Data::F64(v) => v[k],
        Data::I8(v) => v[k] as f64,
        Data::I16(v) => v[k] as f64,
        Data::I32(v) => v[k] as f64,
        Data::I64(v) => v[k] as f64,
        Data::U8(v) => v[k] as f64,
        Data::U16(v) => v[k] as f64,
        Data::U32(v) => v[k] as f64,
        Data::U64(v) => v[k] as f64,
        Data::F16(v) => rivet_kernels::typed::f16_to_f32(v[k]) as f64,
        Data::BF16(v) => rivet_kernels::typed::bf16_to_f32(v[k]) as f64,
        Data::F8E4M3FN(v) => F8::E4M3FN.to_f32(v[k]) as f64,
        Data::F8E4M3FNUZ(v) => F8::E4M3FNUZ.to_f32(v[k]) as f64,
        Data::F8E5M2(v) => F8::E5M2.to_f32(v[k]) as f64,
        Data::F8E5M2FNUZ(v) => F8::E5M2FNUZ.to_f32(v[k]) as f64,
        Data::U4(v) => v[k] as f64,
        Data::I4(v) => v[k] as f64,
        Data::F4E2M1(v) => rivet_kernels::float8::e2m1::to_f32(v[k]) as f64,
        Data::U2(v) => v[k] as f64,
        Data::I2(v) => v[k] as f64,
        Data::E8M0(v) => rivet_kernels::float8::e8m0::to_f32(v[k]) as f64,
        Data::Bool(_) => f64::NAN,
    }
}
