//! NumPy `.npy` files (format 1.0, little-endian, C order), as `kiln run` reads and writes them.

/// The first eight bytes of a format 1.0 `.npy` file.
pub const MAGIC: &[u8; 8] = b"\x93NUMPY\x01\x00";

/// The magic, the header length and the header of a `.npy` file of dtype `descr` (`"<f4"`,
/// `"|i1"`, ...) and `shape`, padded so the data starts at a multiple of 64 bytes.
pub fn header(descr: &str, shape: &[i64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    let tuple = if shape.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut text = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + text.len() + 1) % 64 != 0 {
        text.push(' ');
    }
    text.push('\n');
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// A float32 array of `shape` holding `values`, as `.npy` bytes.
pub fn f32_bytes(values: &[f32], shape: &[i64]) -> Vec<u8> {
    let mut out = header("<f4", shape);
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    out
}

/// A zero-filled array of dtype `descr` and `shape` whose elements are `elem` bytes each, as
/// `.npy` bytes.
pub fn zeros(descr: &str, shape: &[i64], elem: usize) -> Vec<u8> {
    let mut out = header(descr, shape);
    let n: i64 = shape.iter().product();
    out.resize(out.len() + n as usize * elem, 0);
    out
}

/// The float32 values of the `.npy` bytes `bytes`; panics unless they are a format 1.0 file of
/// dtype `<f4`.
pub fn read_f32(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(&bytes[..8], MAGIC, "not a format 1.0 .npy file");
    let start = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let text = String::from_utf8_lossy(&bytes[10..start]);
    assert!(text.contains("'<f4'"), "{text}");
    bytes[start..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The float32 values of the `.npy` file at `path` (see [`read_f32`]).
pub fn read_f32_file(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_f32(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_alignment() {
        let v = [1.5f32, -2.0, 3.25];
        let b = f32_bytes(&v, &[3]);
        assert_eq!((b.len() - 12) % 64, 0);
        assert_eq!(read_f32(&b), v);
        assert_eq!(zeros("|i1", &[2, 3], 1).len() % 64, 6);
    }
}
