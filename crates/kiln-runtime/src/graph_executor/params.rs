//! TVM's params format (`relay.save_param_dict`, `runtime.SaveParams`): named tensors in one
//! byte string. Little-endian, unaligned:
//!
//! ```text
//! u64 0xF7E58D4F05049CB7 (list magic)   u64 reserved (0)
//! u64 count, then count names: u64 length + UTF-8 bytes
//! u64 count (again), then count tensors:
//!   u64 0xDD5E40F096B4A13F (tensor magic)   u64 reserved (0)
//!   i32 device_type, i32 device_id (written as CPU 1, 0)
//!   i32 ndim   u8 code, u8 bits, u16 lanes   i64 shape[ndim]
//!   i64 data byte size (= elements * bytes per element), then the data, row-major
//! ```
//!
//! Every count and length is checked against the bytes present before anything is allocated,
//! and errors (`ValueError`) give the byte offset. Tensors load into CPU memory. A 1-bit
//! boolean (`uint1`, as older TVM wrote `bool`) loads as Kiln's `bool` (one byte per element).

use crate::tensor::layout::{checked_numel, MAX_NDIM};
use crate::tensor::Tensor;
use kiln_ffi::dtype::code;
use kiln_ffi::{DataType, Device, Error, Result};

/// Magic number at the start of a params file.
pub const NDARRAY_LIST_MAGIC: u64 = 0xF7E5_8D4F_0504_9CB7;
/// Magic number at the start of every tensor.
pub const NDARRAY_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;

/// A bounds-checked little-endian reader whose errors name `what` and the byte offset.
pub(crate) struct ByteReader<'a> {
    data: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// Reads `data`; errors start with `what` (e.g. `params`).
    pub(crate) fn new(data: &'a [u8], what: &'static str) -> Self {
        ByteReader { data, pos: 0, what }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The offset of the next byte.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// An error at byte offset `at`.
    pub(crate) fn error_at(&self, at: usize, msg: impl std::fmt::Display) -> Error {
        Error::value_error(format!("{}: {msg} at byte offset {at}", self.what))
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error_at(
                self.pos,
                format!(
                    "{field} needs {n} bytes but only {} remain",
                    self.remaining()
                ),
            ));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(crate) fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8, field)?.try_into().expect("8 bytes"),
        ))
    }

    pub(crate) fn i64(&mut self, field: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(
            self.take(8, field)?.try_into().expect("8 bytes"),
        ))
    }

    fn i32(&mut self, field: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(
            self.take(4, field)?.try_into().expect("4 bytes"),
        ))
    }

    /// A count of items of at least `unit` bytes each, checked against what remains.
    pub(crate) fn count(&mut self, field: &str, unit: usize) -> Result<usize> {
        let at = self.pos;
        let n = self.u64(field)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .is_some_and(|b| b <= self.remaining());
        if !fits {
            return Err(self.error_at(
                at,
                format!("{field} is {n} but only {} bytes follow", self.remaining()),
            ));
        }
        Ok(n as usize)
    }

    /// A string: u64 length and UTF-8 bytes.
    pub(crate) fn string(&mut self, field: &str) -> Result<String> {
        let at = self.pos;
        let n = self.count(&format!("length of {field}"), 1)?;
        let bytes = self.take(n, field)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| self.error_at(at, format!("{field} is not valid UTF-8")))
    }

    /// A list of strings: u64 count, then the strings.
    pub(crate) fn strings(&mut self, field: &str) -> Result<Vec<String>> {
        let n = self.count(&format!("number of {field}"), 8)?;
        (0..n)
            .map(|i| self.string(&format!("{field}[{i}]")))
            .collect()
    }

    /// One tensor in TVM's format, into CPU memory.
    pub(crate) fn tensor(&mut self, field: &str) -> Result<Tensor> {
        let start = self.pos;
        let magic = self.u64(&format!("magic of {field}"))?;
        if magic != NDARRAY_MAGIC {
            return Err(self.error_at(
                start,
                format!("{field} does not start with the tensor magic number (found {magic:#x})"),
            ));
        }
        self.u64(&format!("reserved word of {field}"))?;
        self.i32(&format!("device type of {field}"))?;
        self.i32(&format!("device id of {field}"))?;
        let ndim_at = self.pos;
        let ndim = self.i32(&format!("ndim of {field}"))?;
        let ndim = usize::try_from(ndim)
            .ok()
            .filter(|&n| n <= MAX_NDIM)
            .ok_or_else(|| self.error_at(ndim_at, format!("{field} has an invalid ndim {ndim}")))?;
        let dtype_at = self.pos;
        let d = self.take(4, &format!("dtype of {field}"))?;
        let mut dtype = DataType::new(d[0], d[1], u16::from_le_bytes([d[2], d[3]]));
        if dtype.bits() == 1 && matches!(dtype.code(), code::UINT | code::BOOL) {
            dtype = DataType::new(code::BOOL, 8, dtype.lanes());
        }
        if dtype.bits() == 0 || dtype.lanes() == 0 || !dtype.bits().is_multiple_of(8) {
            return Err(self.error_at(
                dtype_at,
                format!(
                    "{field} has the unsupported dtype (code {}, bits {}, lanes {})",
                    d[0],
                    d[1],
                    dtype.lanes()
                ),
            ));
        }
        if ndim * 8 > self.remaining() {
            return Err(self.error_at(
                self.pos,
                format!(
                    "the shape of {field} needs {} bytes but only {} remain",
                    ndim * 8,
                    self.remaining()
                ),
            ));
        }
        let shape_at = self.pos;
        let shape = (0..ndim)
            .map(|k| self.i64(&format!("shape[{k}] of {field}")))
            .collect::<Result<Vec<i64>>>()?;
        let numel = checked_numel(&shape)
            .map_err(|e| self.error_at(shape_at, format!("{field}: {}", e.message())))?;
        let expected = numel.checked_mul(dtype.bytes());
        let size_at = self.pos;
        let size = self.i64(&format!("data size of {field}"))?;
        if expected.and_then(|e| i64::try_from(e).ok()) != Some(size) {
            return Err(self.error_at(
                size_at,
                format!(
                    "{field} of shape {shape:?} and dtype {dtype} holds {} bytes but its data \
                     size says {size}",
                    expected.map_or("too many".to_string(), |e| e.to_string())
                ),
            ));
        }
        let data = self.take(size as usize, &format!("data of {field}"))?;
        let t = Tensor::empty(&shape, dtype, Device::cpu(0))?;
        t.copy_from_bytes(data)?;
        Ok(t)
    }
}

/// Appends `v` little-endian.
#[cfg(feature = "compiler")]
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a string: u64 length and the bytes.
#[cfg(feature = "compiler")]
pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Appends one tensor in TVM's format (copied to the host; written as a CPU tensor).
/// (Feature `compiler`.)
#[cfg(feature = "compiler")]
pub fn write_tensor(out: &mut Vec<u8>, t: &Tensor) -> Result<()> {
    let dtype = t.dtype();
    if !dtype.bits().is_multiple_of(8) || dtype.lanes() == 0 {
        return Err(Error::value_error(format!(
            "cannot save tensor {}: only whole-byte element types can be saved",
            t.describe()
        )));
    }
    let data = t.to_bytes()?;
    put_u64(out, NDARRAY_MAGIC);
    put_u64(out, 0);
    out.extend_from_slice(&1i32.to_le_bytes()); // kDLCPU
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&(t.ndim() as i32).to_le_bytes());
    out.extend_from_slice(&[dtype.code(), dtype.bits()]);
    out.extend_from_slice(&dtype.lanes().to_le_bytes());
    for &d in t.shape() {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&(data.len() as i64).to_le_bytes());
    out.extend_from_slice(&data);
    Ok(())
}

/// Serializes named tensors in TVM's params format. (Feature `compiler`.)
#[cfg(feature = "compiler")]
pub fn save_params<'a>(params: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<Vec<u8>> {
    let params: Vec<(&str, &Tensor)> = params.into_iter().collect();
    let mut out = Vec::new();
    put_u64(&mut out, NDARRAY_LIST_MAGIC);
    put_u64(&mut out, 0);
    put_u64(&mut out, params.len() as u64);
    for (name, _) in &params {
        put_string(&mut out, name);
    }
    put_u64(&mut out, params.len() as u64);
    for (name, t) in &params {
        write_tensor(&mut out, t).map_err(|e| e.context(format!("saving param `{name}`")))?;
    }
    Ok(out)
}

/// Reads the names and tensors of a params file (into CPU memory), in file order.
pub fn load_params(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let mut r = ByteReader::new(bytes, "params");
    let names = read_names(&mut r)?;
    let params = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let t = r.tensor(&format!("tensor #{i} ({name:?})"))?;
            Ok((name, t))
        })
        .collect::<Result<Vec<_>>>()?;
    if r.remaining() != 0 {
        return Err(r.error_at(
            r.pos(),
            format!("{} unread bytes after the last tensor", r.remaining()),
        ));
    }
    Ok(params)
}

/// Reads only the names of a params file (the header, names and tensor count are checked; the
/// tensors are not read).
pub fn load_param_names(bytes: &[u8]) -> Result<Vec<String>> {
    read_names(&mut ByteReader::new(bytes, "params"))
}

fn read_names(r: &mut ByteReader<'_>) -> Result<Vec<String>> {
    let magic = r.u64("list magic")?;
    if magic != NDARRAY_LIST_MAGIC {
        return Err(r.error_at(
            0,
            format!(
                "not a params file: it starts with {magic:#018x}, not the magic number \
                 {NDARRAY_LIST_MAGIC:#018x}"
            ),
        ));
    }
    r.u64("reserved word")?;
    let names = r.strings("names")?;
    let at = r.pos();
    let count = r.u64("tensor count")?;
    if count != names.len() as u64 {
        return Err(r.error_at(
            at,
            format!("the file has {} names but {count} tensors", names.len()),
        ));
    }
    Ok(names)
}

// The samples are written with save_params, which needs the `compiler` feature.
#[cfg(all(test, feature = "compiler"))]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let b = Tensor::from_slice(&[7i64], &[]).unwrap();
        let c = Tensor::from_slice::<u8>(&[], &[0, 4]).unwrap();
        save_params([("weight", &a), ("scalar", &b), ("empty", &c)]).unwrap()
    }

    #[test]
    fn round_trips() {
        let params = load_params(&sample()).unwrap();
        let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["weight", "scalar", "empty"]);
        assert_eq!(params[0].1.shape(), &[2, 3]);
        assert_eq!(
            params[0].1.to_vec::<f32>().unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(params[1].1.to_vec::<i64>().unwrap(), [7]);
        assert_eq!(params[2].1.shape(), &[0, 4]);
        assert_eq!(
            load_param_names(&sample()).unwrap(),
            ["weight", "scalar", "empty"]
        );
    }

    #[test]
    fn layout_is_tvms() {
        let t = Tensor::from_slice(&[1.5f32], &[1]).unwrap();
        let bytes = save_params([("w", &t)]).unwrap();
        let mut expected = Vec::new();
        expected.extend_from_slice(&0xF7E58D4F05049CB7u64.to_le_bytes());
        expected.extend_from_slice(&0u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.push(b'w');
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&0xDD5E40F096B4A13Fu64.to_le_bytes());
        expected.extend_from_slice(&0u64.to_le_bytes());
        expected.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]); // cpu:0
        expected.extend_from_slice(&1i32.to_le_bytes());
        expected.extend_from_slice(&[2, 32, 1, 0]); // float32
        expected.extend_from_slice(&1i64.to_le_bytes());
        expected.extend_from_slice(&4i64.to_le_bytes());
        expected.extend_from_slice(&1.5f32.to_le_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn every_truncation_is_an_error_with_an_offset() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            let e = load_params(&bytes[..cut]).unwrap_err();
            assert_eq!(e.kind(), "ValueError");
            assert!(e.message().contains("byte offset"), "{}", e.message());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(load_params(&long)
            .unwrap_err()
            .message()
            .contains("unread bytes"));
    }

    #[test]
    fn corrupt_fields_are_named() {
        let bytes = sample();
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        assert!(load_params(&bad)
            .unwrap_err()
            .message()
            .contains("not a params file"));
        // A huge name count allocates nothing.
        let mut bad = bytes.clone();
        bad[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let m = load_params(&bad).unwrap_err().message();
        assert!(
            m.contains("number of names") && m.contains("byte offset 16"),
            "{m}"
        );
        // Name/tensor count mismatch.
        let names_end = 24 + (8 + 6) + (8 + 6) + (8 + 5);
        let mut bad = bytes.clone();
        bad[names_end..names_end + 8].copy_from_slice(&2u64.to_le_bytes());
        let m = load_params(&bad).unwrap_err().message();
        assert!(m.contains("3 names but 2 tensors"), "{m}");
        // A wrong data size.
        let first = names_end + 8;
        let size_at = first + 16 + 8 + 4 + 4 + 16;
        let mut bad = bytes.clone();
        bad[size_at..size_at + 8].copy_from_slice(&25i64.to_le_bytes());
        let m = load_params(&bad).unwrap_err().message();
        assert!(
            m.contains("holds 24 bytes but its data size says 25"),
            "{m}"
        );
        assert!(m.contains(&format!("byte offset {size_at}")), "{m}");
        // A negative dimension.
        let mut bad = bytes.clone();
        bad[first + 32..first + 40].copy_from_slice(&(-2i64).to_le_bytes());
        let m = load_params(&bad).unwrap_err().message();
        assert!(m.contains("negative"), "{m}");
        // A wrong tensor magic.
        let mut bad = bytes;
        bad[first] ^= 0xff;
        let m = load_params(&bad).unwrap_err().message();
        assert!(
            m.contains("tensor magic") && m.contains("\"weight\""),
            "{m}"
        );
    }

    #[test]
    fn one_bit_booleans_load_as_bytes() {
        let mut bytes = Vec::new();
        put_u64(&mut bytes, NDARRAY_LIST_MAGIC);
        put_u64(&mut bytes, 0);
        put_u64(&mut bytes, 1);
        put_string(&mut bytes, "mask");
        put_u64(&mut bytes, 1);
        put_u64(&mut bytes, NDARRAY_MAGIC);
        put_u64(&mut bytes, 0);
        bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&1i32.to_le_bytes());
        bytes.extend_from_slice(&[1, 1, 1, 0]); // uint1
        bytes.extend_from_slice(&3i64.to_le_bytes());
        bytes.extend_from_slice(&3i64.to_le_bytes());
        bytes.extend_from_slice(&[1, 0, 1]);
        let p = load_params(&bytes).unwrap();
        assert_eq!(p[0].1.dtype(), DataType::bool());
        assert_eq!(p[0].1.to_bytes().unwrap(), [1, 0, 1]);
    }
}
