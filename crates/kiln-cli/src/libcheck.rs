//! A check of a shared library file before `dlopen`: a truncated ELF file whose loadable
//! segments reach past its end is mapped anyway, and touching the missing pages kills the
//! process with SIGBUS. Reading the program headers first turns that into an error that names
//! the file and says what is missing.

use std::path::Path;

const PT_LOAD: u32 = 1;

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Checks that a 64-bit little-endian ELF image holds every byte its program headers say is
/// loaded. Other files pass (the loader reports what it makes of them).
pub fn check_elf(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 4 || &bytes[..4] != b"\x7fELF" {
        return Ok(());
    }
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Ok(()); // not ELF64 little-endian: leave it to the loader
    }
    let len = bytes.len() as u64;
    let short = || format!("it is truncated: the ELF header needs 64 bytes, the file has {len}");
    const ET_EXEC: u64 = 2;
    const ET_DYN: u64 = 3;
    let e_type = u16_at(bytes, 0x10).ok_or_else(short)?;
    if e_type != ET_EXEC && e_type != ET_DYN {
        return Ok(()); // an object file has no segments; the loader links it first
    }
    let phoff = u64_at(bytes, 0x20).ok_or_else(short)?;
    let phentsize = u16_at(bytes, 0x36).ok_or_else(short)?;
    let phnum = u16_at(bytes, 0x38).ok_or_else(short)?;
    let table_end = phoff.saturating_add(phentsize.saturating_mul(phnum));
    if phentsize < 56 || table_end > len {
        return Err(format!(
            "it is truncated or corrupt: its program headers end at byte {table_end} but the \
             file has {len} bytes"
        ));
    }
    for i in 0..phnum {
        let at = (phoff + i * phentsize) as usize;
        if u32_at(bytes, at) != Some(PT_LOAD) {
            continue;
        }
        let offset = u64_at(bytes, at + 8).unwrap_or(u64::MAX);
        let filesz = u64_at(bytes, at + 32).unwrap_or(u64::MAX);
        let end = offset.saturating_add(filesz);
        if end > len {
            return Err(format!(
                "it is truncated: its loadable segment #{i} ends at byte {end} but the file \
                 has {len} bytes"
            ));
        }
    }
    Ok(())
}

/// [`check_elf`] on the file at `path`, with an error naming it.
pub fn check_library(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    check_elf(&bytes).map_err(|e| format!("cannot load {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_elf_is_an_error() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(check_elf(&exe).is_ok());
        assert!(check_elf(b"not a library").is_ok());
        let mut object = exe[..64].to_vec();
        object[0x10] = 1; // ET_REL
        assert!(check_elf(&object).is_ok());
        assert!(check_elf(&exe[..40]).unwrap_err().contains("ELF header"));
        assert!(check_elf(&exe[..1000]).unwrap_err().contains("truncated"));
        // The shortest prefix that passes holds every loaded byte; one byte less does not.
        let (mut lo, mut hi) = (1000, exe.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if check_elf(&exe[..mid]).is_ok() {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        assert!(lo > 1000);
        assert!(check_elf(&exe[..lo - 1]).unwrap_err().contains("segment"));
    }
}
