//! Reads the dynamic symbol table of an ELF shared library file: which symbols it defines and
//! how large each is. The loader uses it to tell "not a Kiln/TVM library" apart from a library
//! whose functions have other names, to list a library's functions, and to bound the blob
//! symbol by its recorded size before reading it from memory.
//!
//! Only 64-bit little-endian ELF is understood (every target Kiln runs on); anything else
//! yields `None` and the loader falls back to what `dlsym` alone can tell.

use std::collections::HashMap;

const SHT_DYNSYM: u32 = 11;
const SHN_UNDEF: u16 = 0;

const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;

/// One defined symbol: its size in bytes and whether it is code.
#[derive(Debug, Clone, Copy)]
struct SymbolInfo {
    size: u64,
    is_function: bool,
}

/// Symbols that a shared library defines, with their sizes and types.
#[derive(Debug, Default, Clone)]
pub struct DynamicSymbols {
    symbols: HashMap<String, SymbolInfo>,
}

impl DynamicSymbols {
    /// The recorded size of a defined symbol.
    pub fn size_of(&self, name: &str) -> Option<u64> {
        self.symbols.get(name).map(|s| s.size)
    }

    /// True when the library defines `name`.
    pub fn defines(&self, name: &str) -> bool {
        self.symbols.contains_key(name)
    }

    /// True when the library defines `name` as a function.
    pub fn is_function(&self, name: &str) -> bool {
        self.symbols.get(name).is_some_and(|s| s.is_function)
    }

    /// Every defined symbol name, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.symbols.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// Every defined function name, sorted.
    pub fn function_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .symbols
            .iter()
            .filter(|(_, s)| s.is_function)
            .map(|(n, _)| n.as_str())
            .collect();
        v.sort_unstable();
        v
    }
}

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
}

fn usize_at(d: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64_at(d, at)?).ok()
}

/// Reads the defined dynamic symbols of an ELF64 little-endian file; `None` when the file is
/// not one (or its tables are out of bounds). Only the headers and the two tables are read.
pub fn dynamic_symbols_of_file(path: &std::path::Path) -> Option<DynamicSymbols> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    parse(&mut |off: usize, n: usize| {
        if (off as u64).checked_add(n as u64)? > len {
            return None;
        }
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, off as u64).ok()?;
        Some(buf)
    })
}

/// Reads the defined dynamic symbols of an ELF64 little-endian image held in memory.
pub fn dynamic_symbols(image: &[u8]) -> Option<DynamicSymbols> {
    parse(&mut |off: usize, n: usize| image.get(off..off.checked_add(n)?).map(<[u8]>::to_vec))
}

fn parse(read: &mut dyn FnMut(usize, usize) -> Option<Vec<u8>>) -> Option<DynamicSymbols> {
    let header = read(0, 64)?;
    // e_ident: magic, class 2 (64-bit), data 1 (little-endian).
    if header.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = usize_at(&header, 0x28)?;
    let shentsize = u16_at(&header, 0x3a)? as usize;
    let shnum = u16_at(&header, 0x3c)? as usize;
    if shentsize < 64 {
        return None;
    }
    let sections = read(shoff, shnum.checked_mul(shentsize)?)?;
    let section = |i: usize| -> Option<&[u8]> {
        let at = i.checked_mul(shentsize)?;
        sections.get(at..at + 64)
    };
    let mut out = DynamicSymbols::default();
    for i in 0..shnum {
        let sh = section(i)?;
        if u32_at(sh, 4)? != SHT_DYNSYM {
            continue;
        }
        let (off, size) = (usize_at(sh, 0x18)?, usize_at(sh, 0x20)?);
        let entsize = usize_at(sh, 0x38)?.max(24);
        let strtab = section(u32_at(sh, 0x28)? as usize)?;
        let strings = read(usize_at(strtab, 0x18)?, usize_at(strtab, 0x20)?)?;
        let table = read(off, size)?;
        for sym in table.chunks_exact(entsize) {
            let name_off = u32_at(sym, 0)? as usize;
            if u16_at(sym, 6)? == SHN_UNDEF || name_off == 0 {
                continue;
            }
            let rest = strings.get(name_off..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            let name = String::from_utf8_lossy(&rest[..end]).into_owned();
            let kind = sym[4] & 0xf;
            out.symbols.insert(
                name,
                SymbolInfo {
                    size: u64_at(sym, 16)?,
                    is_function: kind == STT_FUNC || kind == STT_GNU_IFUNC,
                },
            );
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_elf_and_truncated_images_give_none() {
        assert!(dynamic_symbols(b"").is_none());
        assert!(dynamic_symbols(b"not an elf file at all").is_none());
        let mut fake = b"\x7fELF\x02\x01".to_vec();
        fake.resize(70, 0);
        fake[0x28] = 0xff; // section headers past the end
        fake[0x3a] = 64;
        fake[0x3c] = 3;
        assert!(dynamic_symbols(&fake).is_none());
    }

    #[test]
    fn reads_this_test_binary_or_a_system_library() {
        // Any ELF shared library on the machine will do; libc is always there on Linux.
        for path in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
        ] {
            if let Ok(image) = std::fs::read(path) {
                let syms = dynamic_symbols(&image).expect("libc is ELF64");
                let from_file = dynamic_symbols_of_file(std::path::Path::new(path)).unwrap();
                assert_eq!(from_file.size_of("malloc"), syms.size_of("malloc"));
                assert!(syms.defines("malloc"));
                assert!(syms.is_function("malloc"));
                assert!(syms.size_of("malloc").unwrap() > 0);
                return;
            }
        }
    }
}
