//! Reads an ELF shared library file before and after the system loader sees it.
//!
//! - [`check_file`] validates a file before `dlopen`: a truncated or corrupt ELF file whose
//!   segments reach past its end is mapped anyway, and touching the missing pages kills the
//!   process with SIGBUS. The header, the program headers (every segment's bytes inside the
//!   file, the segments the loader reads from memory inside a loaded one), the dynamic section's
//!   tables and the section headers are checked, every read bounds-checked.
//! - [`dynamic_symbols_of_file`] reads the dynamic symbol table: which symbols a library defines
//!   and how large each is. The loader uses it to tell "not a Kiln/TVM library" apart from a
//!   library whose functions have other names, to list a library's functions, and to bound the
//!   blob symbol by its recorded size before reading it from memory.
//! - [`needed_libraries_of_file`] lists the libraries it depends on (`DT_NEEDED`).
//!
//! Only 64-bit little-endian ELF is understood (every target Kiln runs on); other files pass
//! [`check_file`] (the system loader refuses them before mapping anything) and yield `None`
//! from the readers, and the loader falls back to what `dlsym` alone can tell.

use std::collections::HashMap;
use std::path::Path;

const SHT_DYNSYM: u32 = 11;
const SHT_NOBITS: u32 = 8;
const SHN_UNDEF: u16 = 0;

const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;

const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_NOTE: u32 = 4;
const PT_TLS: u32 = 7;
const PT_GNU_PROPERTY: u32 = 0x6474_e553;

const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;

/// Size of the ELF64 file header, of a program header and of a section header.
const EHDR_SIZE: u64 = 64;
const PHDR_SIZE: u64 = 56;
const SHDR_SIZE: u64 = 64;

/// Symbols that a shared library defines, with their sizes and types.
#[derive(Debug, Default, Clone)]
pub struct DynamicSymbols {
    symbols: HashMap<String, SymbolInfo>,
}

/// One defined symbol: its size in bytes and whether it is code.
#[derive(Debug, Clone, Copy)]
struct SymbolInfo {
    size: u64,
    is_function: bool,
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

/// Byte ranges of an ELF file, on disk or in memory. Every read is bounds-checked against the
/// file's size and yields `None` past it.
trait Source {
    fn size(&self) -> u64;
    fn read(&self, off: u64, n: u64) -> Option<Vec<u8>>;
}

impl Source for &[u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read(&self, off: u64, n: u64) -> Option<Vec<u8>> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(n).ok()?)?;
        self.get(start..end).map(<[u8]>::to_vec)
    }
}

/// A file read piece by piece: a library with large weights is never read whole.
struct FileSource {
    file: std::fs::File,
    size: u64,
}

impl FileSource {
    fn open(path: &Path) -> std::io::Result<FileSource> {
        let file = std::fs::File::open(path)?;
        let size = file.metadata()?.len();
        Ok(FileSource { file, size })
    }
}

impl Source for FileSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, off: u64, n: u64) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        if off.checked_add(n)? > self.size {
            return None;
        }
        let mut buf = vec![0u8; usize::try_from(n).ok()?];
        self.file.read_exact_at(&mut buf, off).ok()?;
        Some(buf)
    }
}

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        d.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        d.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        d.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The fields of the ELF header that the checks and readers use.
struct Header {
    e_type: u16,
    phoff: u64,
    phentsize: u64,
    phnum: u64,
    shoff: u64,
    shentsize: u64,
    shnum: u64,
    shstrndx: u64,
}

/// A program header.
#[derive(Clone, Copy)]
struct Segment {
    p_type: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
}

/// A section header (the fields used here).
struct Section {
    name: u32,
    sh_type: u32,
    offset: u64,
    size: u64,
    link: u64,
    entsize: u64,
}

/// The ELF header of a 64-bit little-endian ELF file; `None` for any other file.
fn header(src: &dyn Source) -> Result<Option<Header>, String> {
    let size = src.size();
    let head = src
        .read(0, size.min(EHDR_SIZE))
        .ok_or("its first bytes cannot be read")?;
    if head.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Ok(None);
    }
    let field = |at: usize, width: usize| -> Result<u64, String> {
        let v = match width {
            2 => u16_at(&head, at).map(u64::from),
            _ => u64_at(&head, at),
        };
        v.ok_or_else(|| format!("the ELF header needs {EHDR_SIZE} bytes but the file has {size}"))
    };
    Ok(Some(Header {
        e_type: field(0x10, 2)? as u16,
        phoff: field(0x20, 8)?,
        shoff: field(0x28, 8)?,
        phentsize: field(0x36, 2)?,
        phnum: field(0x38, 2)?,
        shentsize: field(0x3a, 2)?,
        shnum: field(0x3c, 2)?,
        shstrndx: field(0x3e, 2)?,
    }))
}

/// Reads a table of `num` entries of `entsize` bytes at `off`, or says where it ends.
fn table(
    src: &dyn Source,
    what: &str,
    off: u64,
    entsize: u64,
    num: u64,
) -> Result<Vec<u8>, String> {
    let bytes = entsize * num; // both at most 65535
    src.read(off, bytes).ok_or_else(|| {
        format!(
            "its {what} end at byte {} but the file has {} bytes",
            off.saturating_add(bytes),
            src.size()
        )
    })
}

/// The program headers.
fn segments(src: &dyn Source, h: &Header) -> Result<Vec<Segment>, String> {
    if h.phnum > 0 && h.phentsize < PHDR_SIZE {
        return Err(format!(
            "its program headers are {} bytes each, less than {PHDR_SIZE}",
            h.phentsize
        ));
    }
    let bytes = table(src, "program headers", h.phoff, h.phentsize, h.phnum)?;
    let mut out = Vec::with_capacity(h.phnum as usize);
    for i in 0..h.phnum as usize {
        let at = i * h.phentsize as usize;
        let field = |off: usize| u64_at(&bytes, at + off).unwrap_or(u64::MAX);
        out.push(Segment {
            p_type: u32_at(&bytes, at).unwrap_or(0),
            offset: field(8),
            vaddr: field(16),
            filesz: field(32),
            memsz: field(40),
        });
    }
    Ok(out)
}

/// The section headers (none when the file has no table).
fn sections(src: &dyn Source, h: &Header) -> Result<Vec<Section>, String> {
    if h.shoff == 0 || h.shnum == 0 {
        return Ok(Vec::new());
    }
    if h.shentsize < SHDR_SIZE {
        return Err(format!(
            "its section headers are {} bytes each, less than {SHDR_SIZE}",
            h.shentsize
        ));
    }
    let bytes = table(src, "section headers", h.shoff, h.shentsize, h.shnum)?;
    let mut out = Vec::with_capacity(h.shnum as usize);
    for i in 0..h.shnum as usize {
        let at = i * h.shentsize as usize;
        let field = |off: usize| u64_at(&bytes, at + off).unwrap_or(u64::MAX);
        out.push(Section {
            name: u32_at(&bytes, at).unwrap_or(0),
            sh_type: u32_at(&bytes, at + 4).unwrap_or(0),
            offset: field(0x18),
            size: field(0x20),
            link: u64::from(u32_at(&bytes, at + 0x28).unwrap_or(u32::MAX)),
            entsize: field(0x38),
        });
    }
    Ok(out)
}

fn segment_name(p_type: u32) -> String {
    match p_type {
        PT_LOAD => "loadable segment".into(),
        PT_DYNAMIC => "dynamic segment".into(),
        PT_NOTE => "note segment".into(),
        PT_TLS => "TLS segment".into(),
        PT_GNU_PROPERTY => "GNU property segment".into(),
        t => format!("segment (type {t:#x})"),
    }
}

/// The file offset of the `n` bytes at address `addr`, when they lie in the part of one loadable
/// segment that comes from the file.
fn file_offset(loads: &[Segment], addr: u64, n: u64) -> Option<u64> {
    loads.iter().find_map(|s| {
        let rel = addr.checked_sub(s.vaddr)?;
        (rel.checked_add(n)? <= s.filesz).then_some(s.offset.checked_add(rel)?)
    })
}

/// True when the `n` bytes at address `addr` lie in the memory of one loadable segment.
fn mapped(loads: &[Segment], addr: u64, n: u64) -> bool {
    loads.iter().any(|s| {
        addr.checked_sub(s.vaddr)
            .and_then(|rel| rel.checked_add(n))
            .is_some_and(|end| end <= s.memsz)
    })
}

/// The dynamic section's entries (tag, value) before its `DT_NULL`, read where the loader reads
/// them: at the dynamic segment's address. `None` when there is no dynamic segment.
fn dynamic_entries(
    src: &dyn Source,
    loads: &[Segment],
    dynamic: Option<&Segment>,
) -> Result<Option<Vec<(u64, u64)>>, String> {
    let Some(d) = dynamic else {
        return Ok(None);
    };
    let bytes = file_offset(loads, d.vaddr, d.filesz)
        .and_then(|off| src.read(off, d.filesz))
        .ok_or_else(|| {
            format!(
                "its dynamic segment (address {:#x}, {} bytes) is not inside the file part of a \
                 loadable segment",
                d.vaddr, d.filesz
            )
        })?;
    let mut out = Vec::new();
    for e in bytes.chunks_exact(16) {
        let (tag, value) = (u64_at(e, 0).unwrap_or(0), u64_at(e, 8).unwrap_or(0));
        if tag == DT_NULL {
            return Ok(Some(out));
        }
        out.push((tag, value));
    }
    Err("its dynamic section has no DT_NULL end marker".into())
}

/// Dynamic tags holding an address the loader reads or runs, each with the tag of its size in
/// bytes (0 when the size is implied).
const DYNAMIC_ADDRESSES: [(u64, u64, &str); 16] = [
    (3, 0, "DT_PLTGOT"),
    (4, 0, "DT_HASH"),
    (5, 10, "DT_STRTAB"),
    (6, 0, "DT_SYMTAB"),
    (7, 8, "DT_RELA"),
    (12, 0, "DT_INIT"),
    (13, 0, "DT_FINI"),
    (17, 18, "DT_REL"),
    (23, 2, "DT_JMPREL"),
    (25, 27, "DT_INIT_ARRAY"),
    (26, 28, "DT_FINI_ARRAY"),
    (36, 35, "DT_RELR"),
    (0x6fff_fef5, 0, "DT_GNU_HASH"),
    (0x6fff_fff0, 0, "DT_VERSYM"),
    (0x6fff_fffc, 0, "DT_VERDEF"),
    (0x6fff_fffe, 0, "DT_VERNEED"),
];

/// Checks what the system loader would read from a 64-bit little-endian ELF library; other files
/// pass. The error says which part reaches past the end of the file, or where it points.
fn check(src: &dyn Source) -> Result<(), String> {
    let Some(h) = header(src)? else {
        return Ok(());
    };
    if h.e_type != ET_DYN && h.e_type != ET_EXEC {
        return Ok(()); // the loader refuses it before mapping anything
    }
    let size = src.size();
    let segs = segments(src, &h)?;
    for (i, s) in segs.iter().enumerate() {
        let end = s.offset.saturating_add(s.filesz);
        if s.p_type != 0 && s.filesz > 0 && end > size {
            return Err(format!(
                "its {} #{i} ends at byte {end} but the file has {size} bytes",
                segment_name(s.p_type)
            ));
        }
    }
    let loads: Vec<Segment> = segs
        .iter()
        .copied()
        .filter(|s| s.p_type == PT_LOAD)
        .collect();
    for (i, s) in segs.iter().enumerate() {
        let read_in_memory = matches!(s.p_type, PT_DYNAMIC | PT_NOTE | PT_TLS | PT_GNU_PROPERTY);
        if read_in_memory && s.filesz > 0 && file_offset(&loads, s.vaddr, s.filesz).is_none() {
            return Err(format!(
                "its {} #{i} (address {:#x}, {} bytes) is not inside the file part of a loadable \
                 segment",
                segment_name(s.p_type),
                s.vaddr,
                s.filesz
            ));
        }
    }
    let dynamic = segs.iter().find(|s| s.p_type == PT_DYNAMIC);
    if let Some(entries) = dynamic_entries(src, &loads, dynamic)? {
        let value = |tag: u64| entries.iter().find(|e| e.0 == tag).map(|e| e.1);
        for &(tag, size_tag, name) in &DYNAMIC_ADDRESSES {
            let Some(addr) = value(tag) else { continue };
            let n = if size_tag == 0 {
                1
            } else {
                value(size_tag).unwrap_or(1).max(1)
            };
            if !mapped(&loads, addr, n) {
                return Err(format!(
                    "its dynamic entry {name} ({n} bytes at address {addr:#x}) is outside its \
                     loadable segments"
                ));
            }
        }
    }
    let secs = sections(src, &h)?;
    for (i, s) in secs.iter().enumerate() {
        let end = s.offset.saturating_add(s.size);
        if s.sh_type != SHT_NOBITS && s.sh_type != 0 && end > size {
            return Err(format!(
                "its section #{i} ends at byte {end} but the file has {size} bytes"
            ));
        }
        if s.sh_type == SHT_DYNSYM && s.link >= secs.len() as u64 {
            return Err(format!(
                "its dynamic symbol table (section #{i}) names string table section #{} of {}",
                s.link,
                secs.len()
            ));
        }
    }
    Ok(())
}

/// Checks, before `dlopen`, that the file at `path` holds everything the system loader will map
/// or read from it (see the module docs): a truncated or corrupt library is an error naming the
/// file and the byte offsets instead of a SIGBUS. Files that are not 64-bit little-endian ELF
/// pass; the loader reports what it makes of them.
pub fn check_file(path: &Path) -> kiln_ffi::Result<()> {
    let src = FileSource::open(path).map_err(|e| {
        kiln_ffi::Error::value_error(format!("cannot read {}: {e}", path.display()))
    })?;
    check(&src).map_err(|e| {
        kiln_ffi::Error::value_error(format!(
            "cannot load {}: it is truncated or corrupt: {e}",
            path.display()
        ))
    })
}

/// [`check_file`] on an image held in memory; the error does not name a file.
pub fn check_image(image: &[u8]) -> Result<(), String> {
    check(&image)
}

/// The largest section [`section_of_file`] reads.
pub const MAX_SECTION_READ: u64 = 1 << 20;

/// The contents of the section called `name` of an ELF64 little-endian file: `Ok(None)` when
/// the file is not such a file or has no such section; an error (naming the byte offsets) when
/// its tables or the section lie outside the file, the section is larger than
/// [`MAX_SECTION_READ`], or it occupies no bytes in the file.
pub fn section_of_file(path: &Path, name: &str) -> Result<Option<Vec<u8>>, String> {
    let src = FileSource::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    section(&src, name)
}

/// [`section_of_file`] on an image held in memory.
pub fn section_of_image(image: &[u8], name: &str) -> Result<Option<Vec<u8>>, String> {
    section(&image, name)
}

fn section(src: &dyn Source, name: &str) -> Result<Option<Vec<u8>>, String> {
    let Some(h) = header(src)? else {
        return Ok(None);
    };
    let secs = sections(src, &h)?;
    let Some(names) = secs.get(h.shstrndx as usize) else {
        return Ok(None);
    };
    if names.size > MAX_SECTION_READ * 16 {
        return Err(format!(
            "its section-name table is {} bytes at byte {}, too large",
            names.size, names.offset
        ));
    }
    let strings = src.read(names.offset, names.size).ok_or_else(|| {
        format!(
            "its section-name table (bytes {}..{}) lies outside the file of {} bytes",
            names.offset,
            names.offset.saturating_add(names.size),
            src.size()
        )
    })?;
    for sh in &secs {
        let found = strings
            .get(sh.name as usize..)
            .and_then(|rest| rest.iter().position(|&b| b == 0).map(|end| &rest[..end]))
            .is_some_and(|n| n == name.as_bytes());
        if !found {
            continue;
        }
        if sh.sh_type == SHT_NOBITS {
            return Err(format!("its section {name} occupies no bytes in the file"));
        }
        if sh.size > MAX_SECTION_READ {
            return Err(format!(
                "its section {name} is {} bytes at byte {}, more than the {MAX_SECTION_READ} \
                 allowed",
                sh.size, sh.offset
            ));
        }
        return src.read(sh.offset, sh.size).map(Some).ok_or_else(|| {
            format!(
                "its section {name} (bytes {}..{}) lies outside the file of {} bytes",
                sh.offset,
                sh.offset.saturating_add(sh.size),
                src.size()
            )
        });
    }
    Ok(None)
}

/// Reads the defined dynamic symbols of an ELF64 little-endian file; `None` when the file is
/// not one (or its tables are out of bounds). Only the headers and the two tables are read.
pub fn dynamic_symbols_of_file(path: &Path) -> Option<DynamicSymbols> {
    parse_symbols(&FileSource::open(path).ok()?)
}

/// Reads the defined dynamic symbols of an ELF64 little-endian image held in memory.
pub fn dynamic_symbols(image: &[u8]) -> Option<DynamicSymbols> {
    parse_symbols(&image)
}

fn parse_symbols(src: &dyn Source) -> Option<DynamicSymbols> {
    let h = header(src).ok()??;
    let secs = sections(src, &h).ok()?;
    let mut out = DynamicSymbols::default();
    for sh in secs.iter().filter(|s| s.sh_type == SHT_DYNSYM) {
        let entsize = sh.entsize.max(24) as usize;
        let strtab = secs.get(usize::try_from(sh.link).ok()?)?;
        let strings = src.read(strtab.offset, strtab.size)?;
        let table = src.read(sh.offset, sh.size)?;
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

/// The libraries an ELF64 little-endian shared library depends on (its `DT_NEEDED` entries, in
/// order); `None` when the file is not one or its dynamic section cannot be read.
pub fn needed_libraries_of_file(path: &Path) -> Option<Vec<String>> {
    needed_libraries(&FileSource::open(path).ok()?)
}

fn needed_libraries(src: &dyn Source) -> Option<Vec<String>> {
    let h = header(src).ok()??;
    let segs = segments(src, &h).ok()?;
    let loads: Vec<Segment> = segs
        .iter()
        .copied()
        .filter(|s| s.p_type == PT_LOAD)
        .collect();
    let dynamic = segs.iter().find(|s| s.p_type == PT_DYNAMIC);
    let entries = dynamic_entries(src, &loads, dynamic).ok()??;
    let value = |tag: u64| entries.iter().find(|e| e.0 == tag).map(|e| e.1);
    let (strtab, strsz) = (value(DT_STRTAB)?, value(DT_STRSZ)?);
    let strings = src.read(file_offset(&loads, strtab, strsz)?, strsz)?;
    entries
        .iter()
        .filter(|e| e.0 == DT_NEEDED)
        .map(|e| {
            let rest = strings.get(usize::try_from(e.1).ok()?..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            Some(String::from_utf8_lossy(&rest[..end]).into_owned())
        })
        .collect()
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
                let from_file = dynamic_symbols_of_file(Path::new(path)).unwrap();
                assert_eq!(from_file.size_of("malloc"), syms.size_of("malloc"));
                assert!(syms.defines("malloc"));
                assert!(syms.is_function("malloc"));
                assert!(syms.size_of("malloc").unwrap() > 0);
                assert!(check_image(&image).is_ok());
                return;
            }
        }
    }

    #[test]
    fn every_prefix_of_this_test_binary_is_checked() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(check_image(&exe).is_ok());
        assert!(check_image(b"not a library").is_ok());
        let mut object = exe[..64].to_vec();
        object[0x10] = 1; // ET_REL: the loader refuses it itself
        assert!(check_image(&object).is_ok());
        assert!(check_image(&exe[..40]).unwrap_err().contains("ELF header"));
        let e = check_image(&exe[..1000]).unwrap_err();
        assert!(
            e.contains("segment #") && e.contains("but the file has 1000 bytes"),
            "{e}"
        );
        // Every prefix short of the whole file fails (the section headers come last).
        let step = (exe.len() / 97).max(1);
        for cut in (0..exe.len()).step_by(step).chain([exe.len() - 1]) {
            if cut >= 6 {
                assert!(
                    check_image(&exe[..cut]).is_err(),
                    "prefix of {cut} bytes passed"
                );
            }
        }
    }

    #[test]
    fn corrupt_headers_give_errors_not_panics() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // A small deterministic generator (xorshift) overwrites header bytes.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let phoff = u64_at(&exe, 0x20).unwrap() as usize;
        for _ in 0..2000 {
            let mut image = exe[..exe.len().min(1 << 16)].to_vec();
            for _ in 0..1 + next() % 8 {
                let region = if next() % 2 == 0 {
                    0..64
                } else {
                    phoff..phoff + 56 * 8
                };
                let at = region.start + (next() as usize) % region.len();
                image[at] = next() as u8;
            }
            let _ = check_image(&image);
            let _ = dynamic_symbols(&image);
            let _ = needed_libraries(&image.as_slice());
        }
    }
}
