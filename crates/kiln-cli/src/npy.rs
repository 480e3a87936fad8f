//! A small, fully checked `.npy` reader and writer (NumPy format versions 1.0, 2.0 and 3.0).
//!
//! Supported: little-endian, C-order arrays of float32, float16, int64, int32, int8, uint8 and
//! bool. Everything else (big-endian data, Fortran order, object arrays, a truncated or
//! oversized body) is an error that names the file and says what is wrong.

use kiln_ffi::{DataType, Device};
use kiln_runtime::tensor::Tensor;
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

/// The NumPy `descr` of a supported dtype, and back.
const DESCRS: [(&str, DataType); 7] = [
    ("<f4", DataType::float(32)),
    ("<f2", DataType::float(16)),
    ("<i8", DataType::int(64)),
    ("<i4", DataType::int(32)),
    ("|i1", DataType::int(8)),
    ("|u1", DataType::uint(8)),
    ("|b1", DataType::bool()),
];

/// The supported dtypes, for error messages.
fn supported() -> String {
    DESCRS
        .iter()
        .map(|(d, t)| format!("{t} ({d})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `descr` for `dtype`, or an error naming what is supported.
fn descr_of(dtype: DataType) -> Result<&'static str, String> {
    DESCRS
        .iter()
        .find(|(_, t)| *t == dtype)
        .map(|(d, _)| *d)
        .ok_or_else(|| {
            format!(
                "dtype {dtype} cannot be written to .npy (supported: {})",
                supported()
            )
        })
}

/// The dtype of a `descr` (`<` or `|` byte order; `=` is little-endian on the hosts Kiln runs on).
fn dtype_of(descr: &str) -> Result<DataType, String> {
    if descr.starts_with('>') {
        return Err(format!(
            "the data is big-endian ({descr:?}); only little-endian arrays are supported"
        ));
    }
    let (order, kind) = descr.split_at(descr.len().min(1));
    if !matches!(order, "<" | "|" | "=") {
        return Err(format!("unknown dtype descriptor {descr:?}"));
    }
    DESCRS
        .iter()
        .find(|(d, _)| d[1..] == *kind)
        .map(|(_, t)| *t)
        .ok_or_else(|| format!("unsupported dtype {descr:?} (supported: {})", supported()))
}

/// The `.npy` bytes of a CPU tensor.
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>, String> {
    let descr = descr_of(t.dtype())?;
    let shape = match t.shape() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        s => format!(
            "({})",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let body = t.to_bytes().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(10 + header.len() + body.len());
    out.extend_from_slice(MAGIC);
    if header.len() <= u16::MAX as usize {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Writes `t` to `path` as `.npy`.
pub fn write(path: &Path, t: &Tensor) -> Result<(), String> {
    let bytes = to_bytes(t).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Reads the `.npy` file at `path` into a CPU tensor.
pub fn read(path: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    from_bytes(&bytes).map_err(|e| format!("{} is not a valid .npy file: {e}", path.display()))
}

/// Parses `.npy` bytes into a CPU tensor.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("it does not start with the .npy magic \\x93NUMPY".into());
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("the header length is truncated".into());
            }
            let n = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (n as usize, 12)
        }
        _ => return Err(format!("unsupported format version {major}.{minor}")),
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            format!(
                "the header says it is {header_len} bytes but the file has only {} after it",
                bytes.len() - start
            )
        })?;
    let header = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| "the header is not valid text".to_string())?;
    let (dtype, shape) = parse_header(header)?;
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
        .ok_or_else(|| format!("the shape {shape:?} is too large"))?;
    let want = numel
        .checked_mul(dtype.bytes())
        .ok_or_else(|| format!("the shape {shape:?} is too large"))?;
    let body = &bytes[end..];
    if body.len() != want {
        return Err(format!(
            "a {dtype} array of shape {shape:?} needs {want} data bytes but the file has {}",
            body.len()
        ));
    }
    if dtype == DataType::bool() && body.iter().any(|&b| b > 1) {
        return Err("a bool array holds a byte other than 0 or 1".into());
    }
    let t = Tensor::empty(&shape, dtype, Device::cpu(0)).map_err(|e| e.to_string())?;
    t.copy_from_bytes(body).map_err(|e| e.to_string())?;
    Ok(t)
}

/// The value after `'key':` in a header dict, up to the next top-level comma or brace.
fn dict_value<'a>(header: &'a str, key: &str) -> Result<&'a str, String> {
    let pat = format!("'{key}':");
    let at = header
        .find(&pat)
        .or_else(|| header.find(&format!("\"{key}\":")))
        .ok_or_else(|| format!("the header has no {key:?} entry: {}", header.trim()))?;
    let rest = header[at + pat.len()..].trim_start();
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(&rest[..=i]);
                }
            }
            ',' | '}' if depth == 0 => return Ok(rest[..i].trim()),
            _ => {}
        }
    }
    Err(format!("the header's {key:?} entry is not terminated"))
}

/// The dtype and shape of a header (C order only).
fn parse_header(header: &str) -> Result<(DataType, Vec<i64>), String> {
    let h = header.trim();
    if !h.starts_with('{') || !h.ends_with('}') {
        return Err(format!("the header is not a dict: {h}"));
    }
    let descr = dict_value(h, "descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.strip_suffix('\''))
        .ok_or_else(|| format!("the descr {descr} is not a simple dtype string"))?;
    let dtype = dtype_of(descr)?;
    match dict_value(h, "fortran_order")? {
        "False" => {}
        "True" => return Err("the array is in Fortran order; only C order is supported".into()),
        v => return Err(format!("fortran_order is {v}, not True or False")),
    }
    let shape = dict_value(h, "shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("the shape {shape} is not a tuple"))?;
    let dims = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .ok()
                .filter(|&d| d >= 0)
                .ok_or_else(|| format!("the shape {shape} has a bad dimension {s:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((dtype, dims))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: &Tensor) -> Tensor {
        from_bytes(&to_bytes(t).unwrap()).unwrap()
    }

    #[test]
    fn round_trips_every_dtype() {
        let f = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0], &[2, 3]).unwrap();
        let r = round_trip(&f);
        assert_eq!(r.shape(), &[2, 3]);
        assert_eq!(r.to_vec::<f32>().unwrap(), f.to_vec::<f32>().unwrap());
        for (_, dtype) in DESCRS {
            let t = Tensor::empty(&[3], dtype, Device::cpu(0)).unwrap();
            t.copy_from_bytes(&vec![1u8; t.nbytes()]).unwrap();
            let r = round_trip(&t);
            assert_eq!(r.dtype(), dtype);
            assert_eq!(r.to_bytes().unwrap(), t.to_bytes().unwrap());
        }
        let s = Tensor::from_slice(&[42i64], &[]).unwrap();
        assert_eq!(round_trip(&s).shape(), &[] as &[i64]);
    }

    #[test]
    fn header_is_aligned() {
        let t = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
        let b = to_bytes(&t).unwrap();
        assert_eq!((10 + u16::from_le_bytes([b[8], b[9]]) as usize) % 64, 0);
    }

    #[test]
    fn rejects_bad_files() {
        assert!(from_bytes(b"hello").unwrap_err().contains("magic"));
        let t = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
        let mut b = to_bytes(&t).unwrap();
        b.pop();
        assert!(from_bytes(&b).unwrap_err().contains("needs 8 data bytes"));
        let fortran = String::from_utf8(to_bytes(&t).unwrap()[10..74].to_vec())
            .unwrap()
            .replace("False", "True ");
        let mut b = to_bytes(&t).unwrap();
        b[10..74].copy_from_slice(fortran.as_bytes());
        assert!(from_bytes(&b).unwrap_err().contains("Fortran"));
        assert!(dtype_of(">f4").unwrap_err().contains("big-endian"));
        assert!(dtype_of("<c8").unwrap_err().contains("unsupported"));
    }
}
