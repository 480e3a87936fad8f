//! Poisoned output buffers: a kernel under test must overwrite every element, and an element it
//! skipped keeps a value that no comparison accepts.

/// The byte every byte of a poisoned buffer holds: NaN for floats, -1 for signed integers and
/// an invalid value for bools.
pub const POISON_BYTE: u8 = 0xFF;

/// `n` float32 NaNs: the contents of a poisoned float output.
pub fn nan_vec(n: usize) -> Vec<f32> {
    vec![f32::NAN; n]
}

/// `n` bytes of [`POISON_BYTE`]: the contents of a poisoned output of any dtype.
pub fn poison_bytes(n: usize) -> Vec<u8> {
    vec![POISON_BYTE; n]
}
