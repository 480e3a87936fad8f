//! Typed host tensors decoded from ONNX `TensorProto`s (initializers, `Constant` values).

use crate::error::{OnnxError, Result};
use crate::proto::{tensor_proto, TensorProto};
use kiln_ffi::narrow::{int_to_f32, narrow_int};

/// An element type that Kiln reads from ONNX tensors.
///
/// The discriminants are ONNX's `TensorProto.DataType` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataType {
    /// IEEE 754 binary32 (`FLOAT`).
    Float32 = 1,
    /// Unsigned 8-bit integer.
    UInt8 = 2,
    /// Signed 8-bit integer.
    Int8 = 3,
    /// Unsigned 16-bit integer.
    UInt16 = 4,
    /// Signed 16-bit integer.
    Int16 = 5,
    /// Signed 32-bit integer.
    Int32 = 6,
    /// Signed 64-bit integer.
    Int64 = 7,
    /// Boolean, one byte per element.
    Bool = 9,
    /// IEEE 754 binary16 (`FLOAT16`).
    Float16 = 10,
    /// IEEE 754 binary64 (`DOUBLE`).
    Float64 = 11,
    /// Unsigned 32-bit integer.
    UInt32 = 12,
    /// Unsigned 64-bit integer.
    UInt64 = 13,
    /// bfloat16 (`BFLOAT16`).
    BFloat16 = 16,
    /// float8 E4M3FN (`FLOAT8E4M3FN`).
    Float8E4M3FN = 17,
    /// float8 E4M3FNUZ (`FLOAT8E4M3FNUZ`).
    Float8E4M3FNUZ = 18,
    /// float8 E5M2 (`FLOAT8E5M2`).
    Float8E5M2 = 19,
    /// float8 E5M2FNUZ (`FLOAT8E5M2FNUZ`).
    Float8E5M2FNUZ = 20,
    /// Unsigned 4-bit integer (`UINT4`).
    UInt4 = 21,
    /// Signed 4-bit integer (`INT4`).
    Int4 = 22,
    /// float4 E2M1 (`FLOAT4E2M1`).
    Float4E2M1 = 23,
    /// float8 E8M0 (`FLOAT8E8M0`), an unsigned power of two.
    Float8E8M0 = 24,
    /// Unsigned 2-bit integer (`UINT2`).
    UInt2 = 25,
    /// Signed 2-bit integer (`INT2`).
    Int2 = 26,
}

impl DataType {
    /// Every supported type.
    pub const ALL: [DataType; 23] = [
        DataType::Float32,
        DataType::UInt8,
        DataType::Int8,
        DataType::UInt16,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Bool,
        DataType::Float16,
        DataType::Float64,
        DataType::UInt32,
        DataType::UInt64,
        DataType::BFloat16,
        DataType::Float8E4M3FN,
        DataType::Float8E4M3FNUZ,
        DataType::Float8E5M2,
        DataType::Float8E5M2FNUZ,
        DataType::UInt4,
        DataType::Int4,
        DataType::Float4E2M1,
        DataType::Float8E8M0,
        DataType::UInt2,
        DataType::Int2,
    ];

    /// The type with ONNX code `code`, if Kiln supports it.
    pub fn from_onnx(code: i32) -> Option<DataType> {
        DataType::ALL.into_iter().find(|d| *d as i32 == code)
    }

    /// ONNX's code for this type.
    pub fn onnx_code(self) -> i32 {
        self as i32
    }

    /// The dtype string used by Kiln and TVM (`float32`, `int64`, `bool`...).
    pub fn as_str(self) -> &'static str {
        match self {
            DataType::Float32 => "float32",
            DataType::UInt8 => "uint8",
            DataType::Int8 => "int8",
            DataType::UInt16 => "uint16",
            DataType::Int16 => "int16",
            DataType::Int32 => "int32",
            DataType::Int64 => "int64",
            DataType::Bool => "bool",
            DataType::Float16 => "float16",
            DataType::Float64 => "float64",
            DataType::UInt32 => "uint32",
            DataType::UInt64 => "uint64",
            DataType::BFloat16 => "bfloat16",
            DataType::Float8E4M3FN => "float8_e4m3fn",
            DataType::Float8E4M3FNUZ => "float8_e4m3fnuz",
            DataType::Float8E5M2 => "float8_e5m2",
            DataType::Float8E5M2FNUZ => "float8_e5m2fnuz",
            DataType::UInt4 => "uint4",
            DataType::Int4 => "int4",
            DataType::Float4E2M1 => "float4_e2m1fn",
            DataType::Float8E8M0 => "float8_e8m0fnu",
            DataType::UInt2 => "uint2",
            DataType::Int2 => "int2",
        }
    }

    /// Elements per byte in ONNX's packed `raw_data` (2 for 4-bit types, 4 for 2-bit ones, 1
    /// otherwise); Kiln's tensors keep one element per byte.
    pub fn per_byte(self) -> usize {
        match self {
            DataType::UInt4 | DataType::Int4 | DataType::Float4E2M1 => 2,
            DataType::UInt2 | DataType::Int2 => 4,
            _ => 1,
        }
    }

    /// Kiln's element type (the same name).
    pub fn kiln_dtype(self) -> kiln_ffi::DataType {
        self.as_str()
            .parse()
            .expect("every ONNX type Kiln reads has a Kiln dtype name")
    }

    /// Whether elements are narrow codes, one byte each in [`TensorData::Code`].
    pub fn is_code(self) -> bool {
        (self as i32) >= 17
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DataType::UInt8 | DataType::Int8 | DataType::Bool => 1,
            DataType::UInt16 | DataType::Int16 | DataType::Float16 | DataType::BFloat16 => 2,
            DataType::Float32 | DataType::Int32 | DataType::UInt32 => 4,
            DataType::Int64 | DataType::Float64 | DataType::UInt64 => 8,
            // One code per byte (the runtime layout).
            _ => 1,
        }
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ONNX's name for a data type code (`FLOAT`, `STRING`, `FLOAT8E4M3FN`...), for messages.
pub fn onnx_type_name(code: i32) -> String {
    match tensor_proto::DataType::try_from(code) {
        Ok(t) => t.as_str_name().to_string(),
        Err(_) => format!("unknown type code {code}"),
    }
}

/// The elements of a [`Tensor`], one variant per [`DataType`].
///
/// `Float16` and `BFloat16` keep their raw bit patterns; [`f16_to_f32`] and [`bf16_to_f32`]
/// convert them. The narrow types (float8, float4, int4, int2) are [`TensorData::Code`]: one
/// code per byte, low bits, as in Kiln's runtime tensors (`kiln_ffi::narrow` decodes them).
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// `float32` elements.
    F32(Vec<f32>),
    /// `uint8` elements.
    U8(Vec<u8>),
    /// `int8` elements.
    I8(Vec<i8>),
    /// `uint16` elements.
    U16(Vec<u16>),
    /// `int16` elements.
    I16(Vec<i16>),
    /// `int32` elements.
    I32(Vec<i32>),
    /// `int64` elements.
    I64(Vec<i64>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// `float16` elements as raw bit patterns.
    F16(Vec<u16>),
    /// `float64` elements.
    F64(Vec<f64>),
    /// `uint32` elements.
    U32(Vec<u32>),
    /// `uint64` elements.
    U64(Vec<u64>),
    /// `bfloat16` elements as raw bit patterns.
    BF16(Vec<u16>),
    /// A narrow type (float8, float4, int4, int2): its dtype and one code per byte, low bits.
    Code(DataType, Vec<u8>),
}

/// Applies `$body` to the vector inside any [`TensorData`] variant.
macro_rules! each_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F32($v) => $body,
            TensorData::U8($v) => $body,
            TensorData::I8($v) => $body,
            TensorData::U16($v) => $body,
            TensorData::I16($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::Bool($v) => $body,
            TensorData::F16($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::U32($v) => $body,
            TensorData::U64($v) => $body,
            TensorData::BF16($v) => $body,
            TensorData::Code(_, $v) => $body,
        }
    };
}

impl TensorData {
    /// The element type.
    pub fn dtype(&self) -> DataType {
        match self {
            TensorData::F32(_) => DataType::Float32,
            TensorData::U8(_) => DataType::UInt8,
            TensorData::I8(_) => DataType::Int8,
            TensorData::U16(_) => DataType::UInt16,
            TensorData::I16(_) => DataType::Int16,
            TensorData::I32(_) => DataType::Int32,
            TensorData::I64(_) => DataType::Int64,
            TensorData::Bool(_) => DataType::Bool,
            TensorData::F16(_) => DataType::Float16,
            TensorData::F64(_) => DataType::Float64,
            TensorData::U32(_) => DataType::UInt32,
            TensorData::U64(_) => DataType::UInt64,
            TensorData::BF16(_) => DataType::BFloat16,
            TensorData::Code(d, _) => *d,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each_variant!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Converts IEEE binary16 bits to `f32` (exact).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits as u32) & 0x8000) << 16;
    let exp = ((bits >> 10) & 0x1f) as u32;
    let man = (bits & 0x3ff) as u32;
    let out = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: value = man * 2^-24.
            let v = man as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(out)
}

/// Converts bfloat16 bits to `f32` (exact).
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// A named host tensor: shape plus typed elements in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The tensor's name (the initializer name, or the output name of a `Constant` node).
    pub name: String,
    /// The shape; empty for a scalar.
    pub dims: Vec<usize>,
    /// The elements.
    pub data: TensorData,
}

impl Tensor {
    /// Makes a tensor, checking that the element count matches the shape.
    pub fn new(name: impl Into<String>, dims: Vec<usize>, data: TensorData) -> Result<Tensor> {
        let name = name.into();
        let numel: usize = dims.iter().product();
        if numel != data.len() {
            return Err(OnnxError::Tensor {
                tensor: name,
                message: format!("shape {dims:?} needs {numel} elements, got {}", data.len()),
            });
        }
        Ok(Tensor { name, dims, data })
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.data.dtype()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// Whether this is a rank-0 tensor.
    pub fn is_scalar(&self) -> bool {
        self.dims.is_empty()
    }

    /// The `f32` elements, if the type is `float32`.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The `i64` elements, if the type is `int64`.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The elements as `i64`, for integer and bool tensors (shape computations); `None` for
    /// floating-point tensors and for `uint64` values above `i64::MAX`.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        fn conv<T: Copy + TryInto<i64>>(v: &[T]) -> Option<Vec<i64>> {
            v.iter().map(|x| (*x).try_into().ok()).collect()
        }
        match &self.data {
            TensorData::U8(v) => conv(v),
            TensorData::I8(v) => conv(v),
            TensorData::U16(v) => conv(v),
            TensorData::I16(v) => conv(v),
            TensorData::I32(v) => conv(v),
            TensorData::I64(v) => Some(v.clone()),
            TensorData::U32(v) => conv(v),
            TensorData::U64(v) => conv(v),
            TensorData::Bool(v) => Some(v.iter().map(|b| *b as i64).collect()),
            TensorData::Code(d, v) => narrow_int(d.kiln_dtype()).map(|(bits, signed)| {
                v.iter()
                    .map(|c| int_to_f32(*c, bits, signed) as i64)
                    .collect()
            }),
            TensorData::F32(_) | TensorData::F16(_) | TensorData::F64(_) | TensorData::BF16(_) => {
                None
            }
        }
    }

    /// The elements converted to `f64` (exact for every type but 64-bit integers beyond 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            TensorData::F32(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::I8(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::U16(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::I16(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::I64(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|x| *x as u8 as f64).collect(),
            TensorData::F16(v) => v.iter().map(|x| f16_to_f32(*x) as f64).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::U32(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::U64(v) => v.iter().map(|x| *x as f64).collect(),
            TensorData::BF16(v) => v.iter().map(|x| bf16_to_f32(*x) as f64).collect(),
            TensorData::Code(d, v) => {
                kiln_runtime::tensor::element::to_f64(v, d.kiln_dtype()).unwrap_or_default()
            }
        }
    }

    /// The elements as little-endian bytes (the layout of ONNX `raw_data` and of DLPack).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.numel() * self.dtype().size_bytes());
        each_variant!(&self.data, v => {
            for x in v.iter() {
                out.extend_from_slice(&LeBytes::to_le_vec(*x));
            }
        });
        out
    }

    /// Decodes an ONNX `TensorProto`; `fallback_name` names it if the proto has no name.
    ///
    /// Reads `raw_data` (little-endian) or the typed fields (`float_data`, `int32_data`,
    /// `int64_data`, `double_data`, `uint64_data`) as ONNX specifies for each type; 4- and
    /// 2-bit types are unpacked to one element per byte. External data, segments, and types
    /// Kiln does not support (strings, complex, float6) are errors that name the tensor.
    pub fn from_proto(p: &TensorProto, fallback_name: &str) -> Result<Tensor> {
        let name = match p.name() {
            "" => fallback_name.to_string(),
            n => n.to_string(),
        };
        let err = |message: String| OnnxError::Tensor {
            tensor: name.clone(),
            message,
        };
        if p.data_location() == tensor_proto::DataLocation::External || !p.external_data.is_empty()
        {
            let location = p
                .external_data
                .iter()
                .find(|e| e.key() == "location")
                .map(|e| e.value().to_string())
                .unwrap_or_default();
            return Err(OnnxError::ExternalData {
                tensor: name,
                location,
            });
        }
        if p.segment.is_some() {
            return Err(err("segmented tensors are not supported".into()));
        }
        let dtype = DataType::from_onnx(p.data_type()).ok_or_else(|| {
            err(format!(
                "data type {} is not supported (Kiln reads {})",
                onnx_type_name(p.data_type()),
                DataType::ALL.map(DataType::as_str).join(", ")
            ))
        })?;
        let mut dims = Vec::with_capacity(p.dims.len());
        let mut numel: usize = 1;
        for &d in &p.dims {
            let d = usize::try_from(d)
                .map_err(|_| err(format!("negative dimension in {:?}", p.dims)))?;
            numel = numel
                .checked_mul(d)
                .ok_or_else(|| err(format!("shape {:?} overflows", p.dims)))?;
            dims.push(d);
        }
        let data = match &p.raw_data {
            Some(raw) if dtype.is_code() => {
                let want = numel.div_ceil(dtype.per_byte());
                if raw.len() != want {
                    return Err(err(format!(
                        "raw_data has {} bytes, but shape {dims:?} of {dtype} needs {want}",
                        raw.len()
                    )));
                }
                TensorData::Code(dtype, unpack(dtype, raw, numel))
            }
            Some(raw) => {
                let want = numel * dtype.size_bytes();
                if raw.len() != want {
                    return Err(err(format!(
                        "raw_data has {} bytes, but shape {dims:?} of {dtype} needs {want}",
                        raw.len()
                    )));
                }
                decode_raw(dtype, raw)
            }
            None => decode_typed(dtype, p, numel).map_err(err)?,
        };
        Ok(Tensor { name, dims, data })
    }
}

/// Little-endian bytes of one element.
trait LeBytes: Copy {
    /// The bytes.
    fn to_le_vec(self) -> Vec<u8>;
}

macro_rules! impl_le {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            fn to_le_vec(self) -> Vec<u8> {
                self.to_le_bytes().to_vec()
            }
        }
    )*};
}
impl_le!(f32, f64, u8, i8, u16, i16, i32, i64, u32, u64);

impl LeBytes for bool {
    fn to_le_vec(self) -> Vec<u8> {
        vec![self as u8]
    }
}

/// One code per byte from ONNX's packing: 4-bit types two per byte and 2-bit types four per
/// byte, the first element in the lowest bits.
fn unpack(dtype: DataType, bytes: &[u8], numel: usize) -> Vec<u8> {
    let per = dtype.per_byte();
    let bits = 8 / per;
    let mask = ((1u16 << bits) - 1) as u8;
    (0..numel)
        .map(|i| (bytes[i / per] >> (bits * (i % per))) & mask)
        .collect()
}

/// Decodes little-endian `raw_data` whose length was already checked.
fn decode_raw(dtype: DataType, raw: &[u8]) -> TensorData {
    macro_rules! le {
        ($t:ty, $n:expr) => {
            raw.chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
    }
    match dtype {
        DataType::Float32 => TensorData::F32(le!(f32, 4)),
        DataType::UInt8 => TensorData::U8(raw.to_vec()),
        DataType::Int8 => TensorData::I8(raw.iter().map(|b| *b as i8).collect()),
        DataType::UInt16 => TensorData::U16(le!(u16, 2)),
        DataType::Int16 => TensorData::I16(le!(i16, 2)),
        DataType::Int32 => TensorData::I32(le!(i32, 4)),
        DataType::Int64 => TensorData::I64(le!(i64, 8)),
        DataType::Bool => TensorData::Bool(raw.iter().map(|b| *b != 0).collect()),
        DataType::Float16 => TensorData::F16(le!(u16, 2)),
        DataType::Float64 => TensorData::F64(le!(f64, 8)),
        DataType::UInt32 => TensorData::U32(le!(u32, 4)),
        DataType::UInt64 => TensorData::U64(le!(u64, 8)),
        DataType::BFloat16 => TensorData::BF16(le!(u16, 2)),
        d => TensorData::Code(d, raw.to_vec()),
    }
}

/// Decodes the typed repeated field that ONNX assigns to `dtype`.
fn decode_typed(dtype: DataType, p: &TensorProto, numel: usize) -> Result<TensorData, String> {
    let check = |field: &str, len: usize| {
        if len == numel {
            Ok(())
        } else {
            Err(format!(
                "{field} holds {len} values, but shape {:?} of {dtype} needs {numel}",
                p.dims
            ))
        }
    };
    // Narrow types travel in int32_data; every value must fit the element type.
    fn narrow<T: TryFrom<i32>>(v: &[i32], dtype: DataType) -> Result<Vec<T>, String> {
        v.iter()
            .map(|x| {
                T::try_from(*x).map_err(|_| format!("int32_data value {x} does not fit {dtype}"))
            })
            .collect()
    }
    Ok(match dtype {
        DataType::Float32 => {
            check("float_data", p.float_data.len())?;
            TensorData::F32(p.float_data.clone())
        }
        DataType::Float64 => {
            check("double_data", p.double_data.len())?;
            TensorData::F64(p.double_data.clone())
        }
        DataType::Int64 => {
            check("int64_data", p.int64_data.len())?;
            TensorData::I64(p.int64_data.clone())
        }
        DataType::UInt32 | DataType::UInt64 => {
            check("uint64_data", p.uint64_data.len())?;
            if dtype == DataType::UInt64 {
                TensorData::U64(p.uint64_data.clone())
            } else {
                let v: Result<Vec<u32>, String> = p
                    .uint64_data
                    .iter()
                    .map(|x| {
                        u32::try_from(*x)
                            .map_err(|_| format!("uint64_data value {x} does not fit uint32"))
                    })
                    .collect();
                TensorData::U32(v?)
            }
        }
        d if d.is_code() => {
            // One value per element for 8-bit types, packed bytes for 4- and 2-bit ones.
            let v = &p.int32_data;
            let want = numel.div_ceil(d.per_byte());
            if v.len() != want {
                return Err(format!(
                    "int32_data holds {} values, but shape {:?} of {d} needs {want}",
                    v.len(),
                    p.dims
                ));
            }
            let bytes: Vec<u8> = v.iter().map(|x| *x as u8).collect();
            TensorData::Code(d, unpack(d, &bytes, numel))
        }
        _ => {
            let v = &p.int32_data;
            check("int32_data", v.len())?;
            match dtype {
                DataType::Int32 => TensorData::I32(v.clone()),
                DataType::Int16 => TensorData::I16(narrow(v, dtype)?),
                DataType::Int8 => TensorData::I8(narrow(v, dtype)?),
                DataType::UInt8 => TensorData::U8(narrow(v, dtype)?),
                DataType::UInt16 => TensorData::U16(narrow(v, dtype)?),
                DataType::Float16 => TensorData::F16(narrow(v, dtype)?),
                DataType::BFloat16 => TensorData::BF16(narrow(v, dtype)?),
                DataType::Bool => TensorData::Bool(v.iter().map(|x| *x != 0).collect()),
                _ => unreachable!("handled above"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: Some("t".into()),
            data_type: Some(dtype.onnx_code()),
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn raw_and_typed_agree() {
        let vals = [1.5f32, -2.0, 3.25, 0.0, 7.0, -1e-3];
        let mut raw = proto(DataType::Float32, &[2, 3]);
        raw.raw_data = Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect());
        let mut typed = proto(DataType::Float32, &[2, 3]);
        typed.float_data = vals.to_vec();
        let a = Tensor::from_proto(&raw, "x").unwrap();
        let b = Tensor::from_proto(&typed, "x").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.as_f32().unwrap(), &vals);
        assert_eq!(a.to_le_bytes(), raw.raw_data.unwrap());
    }

    #[test]
    fn narrow_types_in_int32_data() {
        let mut p = proto(DataType::Int8, &[3]);
        p.int32_data = vec![-128, 0, 127];
        assert_eq!(
            Tensor::from_proto(&p, "").unwrap().data,
            TensorData::I8(vec![-128, 0, 127])
        );
        p.int32_data = vec![-129, 0, 1];
        let e = Tensor::from_proto(&p, "").unwrap_err().to_string();
        assert!(e.contains("'t'") && e.contains("-129"), "{e}");
        let mut b = proto(DataType::Bool, &[2]);
        b.int32_data = vec![1, 0];
        assert_eq!(
            Tensor::from_proto(&b, "").unwrap().data,
            TensorData::Bool(vec![true, false])
        );
    }

    #[test]
    fn narrow_types_unpack_one_code_per_byte() {
        // INT4, three elements packed low nibble first: 1, 2, -1 (0xf); the pad nibble is 0.
        let mut p = proto(DataType::Int4, &[3]);
        p.raw_data = Some(vec![0x21, 0x0f]);
        let t = Tensor::from_proto(&p, "").unwrap();
        assert_eq!(t.data, TensorData::Code(DataType::Int4, vec![1, 2, 15]));
        assert_eq!(t.to_i64_vec(), Some(vec![1, 2, -1]));
        // UINT2 in int32_data: one packed byte holds four elements.
        let mut u = proto(DataType::UInt2, &[5]);
        u.int32_data = vec![0b1110_0100, 0b11];
        let t = Tensor::from_proto(&u, "").unwrap();
        assert_eq!(t.to_i64_vec(), Some(vec![0, 1, 2, 3, 3]));
        // FLOAT8E4M3FN: one code per int32 value; 0x7e is 448, 0xff NaN.
        let mut f = proto(DataType::Float8E4M3FN, &[2]);
        f.int32_data = vec![0x7e, 0xff];
        let v = Tensor::from_proto(&f, "").unwrap().to_f64_vec();
        assert_eq!(v[0], 448.0);
        assert!(v[1].is_nan());
        let mut bad = proto(DataType::Float4E2M1, &[5]);
        bad.raw_data = Some(vec![0; 2]);
        let e = Tensor::from_proto(&bad, "").unwrap_err().to_string();
        assert!(e.contains("2 bytes") && e.contains("needs 3"), "{e}");
        assert_eq!(
            DataType::Float8E8M0.kiln_dtype().to_string(),
            "float8_e8m0fnu"
        );
    }

    #[test]
    fn half_conversions() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7c00).is_infinite());
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
    }

    #[test]
    fn length_mismatch_and_bad_types() {
        let mut p = proto(DataType::Float32, &[4]);
        p.raw_data = Some(vec![0; 15]);
        let e = Tensor::from_proto(&p, "").unwrap_err().to_string();
        assert!(e.contains("15 bytes") && e.contains("16"), "{e}");
        let mut s = proto(DataType::Float32, &[1]);
        s.data_type = Some(8); // STRING
        let e = Tensor::from_proto(&s, "").unwrap_err().to_string();
        assert!(e.contains("STRING"), "{e}");
        let mut x = proto(DataType::Float32, &[1]);
        x.data_location = Some(tensor_proto::DataLocation::External as i32);
        x.external_data.push(crate::proto::StringStringEntryProto {
            key: Some("location".into()),
            value: Some("weights.bin".into()),
        });
        let e = Tensor::from_proto(&x, "").unwrap_err().to_string();
        assert!(
            e.contains("external data") && e.contains("weights.bin"),
            "{e}"
        );
    }

    #[test]
    fn empty_and_scalar() {
        let p = proto(DataType::Int64, &[0, 3]);
        let t = Tensor::from_proto(&p, "").unwrap();
        assert_eq!(t.numel(), 0);
        let mut s = proto(DataType::Int64, &[]);
        s.int64_data = vec![42];
        let t = Tensor::from_proto(&s, "").unwrap();
        assert!(t.is_scalar());
        assert_eq!(t.to_i64_vec(), Some(vec![42]));
    }
}
