//! The library blob (`__tvm_ffi__library_bin`, seeds 000/001's `ProcessLibraryBin`): the
//! serialized modules of a shared library and the import tree that links them.
//!
//! Two layouts are read, both little-endian and unaligned, strings and byte arrays as a `u64`
//! length then the bytes, vectors as a `u64` count then `u64` items:
//!
//! - **TVM 0.27** (what Kiln writes): `u64 nbytes`, `vec indptr`, `vec children`, then for every
//!   module `str kind` and, unless the kind is `_lib`, `bytes payload`. The import tree is in CSR
//!   form: module `i` imports `children[indptr[i]..indptr[i + 1]]`; module 0 is the root.
//! - **Older** (seed 000, symbol `__tvm_dev_mblob` or `__tvm_ffi__library_bin`): `u64 nbytes`,
//!   `u64 count`, then `count` entries `str key` with `_lib` (no payload), `_import_tree` (`vec
//!   indptr`, `vec children`) or a module kind followed by its payload. Kiln reads the payload as
//!   `bytes`; without `_import_tree` the library module is the root and imports every other entry.
//!
//! The two are told apart by the word after the count: an indptr starts with 0, a key length
//! never is 0. Every length and count is checked against the bytes present before it is used,
//! and errors name the byte offset (counted from the start of the blob, `nbytes` included).

use kiln_ffi::{Error, Result};

/// The kind that marks the shared library itself in a blob (no payload).
pub const LIB_KIND: &str = "_lib";
/// The key of the import tree entry in the older layout.
pub const IMPORT_TREE_KEY: &str = "_import_tree";

/// Which layout a blob was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// TVM 0.27: import tree first, then `kind [payload]` per module.
    Tvm027,
    /// Seed 000: entry count first, `_import_tree` among the keys.
    Legacy,
}

/// One module recorded in a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobModule {
    /// The shared library that holds the blob (`_lib`).
    Lib,
    /// A module of another kind, restored by `ffi.Module.load_from_bytes.<kind>`.
    Serialized {
        /// The module kind, e.g. `relax.VMExecutable`.
        kind: String,
        /// What the module's `save_to_bytes` wrote.
        payload: Vec<u8>,
    },
}

impl BlobModule {
    /// The kind as written in the blob (`_lib` for the library).
    pub fn kind(&self) -> &str {
        match self {
            BlobModule::Lib => LIB_KIND,
            BlobModule::Serialized { kind, .. } => kind,
        }
    }
}

/// A parsed (or to-be-written) blob: modules in index order and the import tree over them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryBin {
    /// Module 0 is the root.
    pub modules: Vec<BlobModule>,
    /// CSR row pointers: `modules.len() + 1` entries, the first 0, non-decreasing.
    pub import_indptr: Vec<u64>,
    /// Child indices, each below `modules.len()`.
    pub import_children: Vec<u64>,
}

impl LibraryBin {
    /// The indices of the modules that module `i` imports.
    pub fn children_of(&self, i: usize) -> &[u64] {
        let (lo, hi) = (
            self.import_indptr[i] as usize,
            self.import_indptr[i + 1] as usize,
        );
        &self.import_children[lo..hi]
    }

    /// Builds the CSR tree from per-module child lists.
    pub fn from_children(modules: Vec<BlobModule>, children: &[Vec<usize>]) -> LibraryBin {
        let mut indptr = vec![0u64];
        let mut flat = Vec::new();
        for c in children {
            flat.extend(c.iter().map(|&x| x as u64));
            indptr.push(flat.len() as u64);
        }
        LibraryBin {
            modules,
            import_indptr: indptr,
            import_children: flat,
        }
    }
}

/// The label of the blob's errors.
const BLOB: &str = "library blob";

fn blob_error(offset: usize, what: impl std::fmt::Display) -> Error {
    Error::value_error(format!("{BLOB}: {what} at byte offset {offset}"))
}

/// A bounds-checked little-endian reader over serialized bytes (the library blob, device
/// modules' `save_to_bytes`): every error names what was read and its byte offset, prefixed by
/// the reader's label.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    label: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader of `data` from `pos`, whose errors start with `label`.
    pub(crate) fn new(data: &'a [u8], pos: usize, label: &'static str) -> Reader<'a> {
        Reader { data, pos, label }
    }

    /// An error at byte `offset`.
    pub(crate) fn error(&self, offset: usize, what: impl std::fmt::Display) -> Error {
        Error::value_error(format!("{}: {what} at byte offset {offset}", self.label))
    }

    /// The current byte offset.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(
                self.pos,
                format!(
                    "{what} needs {n} bytes but only {} remain",
                    self.remaining()
                ),
            ));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// A little-endian u64.
    pub(crate) fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    fn peek_u64(&self, at: usize) -> Option<u64> {
        let b = self.data.get(self.pos + at..self.pos + at + 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// A length or count, checked against the bytes that remain (`unit` bytes per item).
    pub(crate) fn len(&mut self, what: &str, unit: usize) -> Result<usize> {
        let at = self.pos;
        let n = self.u64(what)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .is_some_and(|bytes| bytes <= self.remaining());
        if !fits {
            return Err(self.error(
                at,
                format!("{what} is {n} but only {} bytes follow", self.remaining()),
            ));
        }
        Ok(n as usize)
    }

    /// A u64 length, then that many bytes.
    pub(crate) fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.len(&format!("length of {what}"), 1)?;
        self.take(n, what)
    }

    /// A u64 length, then that many bytes of UTF-8.
    pub(crate) fn string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| self.error(at, format!("{what} is not valid UTF-8")))
    }

    fn vec_u64(&mut self, what: &str) -> Result<Vec<u64>> {
        let n = self.len(&format!("item count of {what}"), 8)?;
        (0..n).map(|_| self.u64(what)).collect()
    }
}

/// Parses a blob: `data` starts with the `u64 nbytes` prefix and may extend past its end (only
/// `8 + nbytes` bytes are read; fewer present is an error).
pub fn parse(data: &[u8]) -> Result<LibraryBin> {
    let mut outer = Reader::new(data, 0, BLOB);
    let nbytes = outer.len("blob size (nbytes)", 1)?;
    let body = &data[..8 + nbytes];
    let mut r = Reader::new(body, 8, BLOB);
    let bin = match detect(&r)? {
        Layout::Tvm027 => parse_tvm027(&mut r)?,
        Layout::Legacy => parse_legacy(&mut r)?,
    };
    if r.remaining() != 0 {
        return Err(blob_error(
            r.pos,
            format!("{} unread bytes after the last module", r.remaining()),
        ));
    }
    Ok(bin)
}

/// Tells which layout the body (after `nbytes`) is in.
fn detect(r: &Reader<'_>) -> Result<Layout> {
    match (r.peek_u64(0), r.peek_u64(8)) {
        (None, _) => Err(blob_error(
            r.pos,
            "blob is too short to hold its first count",
        )),
        (Some(0), _) => Ok(Layout::Legacy), // an empty legacy blob; a 0.27 indptr has >= 1 item
        (Some(_), Some(0)) => Ok(Layout::Tvm027),
        (Some(_), Some(_)) => Ok(Layout::Legacy),
        (Some(_), None) => Err(blob_error(r.pos + 8, "blob ends after its first count")),
    }
}

fn parse_tvm027(r: &mut Reader<'_>) -> Result<LibraryBin> {
    let tree_at = r.pos;
    let indptr = r.vec_u64("import tree indptr")?;
    let children = r.vec_u64("import tree children")?;
    if indptr.is_empty() {
        return Err(blob_error(tree_at, "import tree indptr is empty"));
    }
    let mut modules = Vec::with_capacity(indptr.len() - 1);
    for i in 0..indptr.len() - 1 {
        let at = r.pos;
        let kind = r.string(&format!("kind of module {i}"))?;
        if kind.is_empty() || kind == IMPORT_TREE_KEY {
            return Err(blob_error(
                at,
                format!("module {i} has the invalid kind {kind:?}"),
            ));
        }
        if kind == LIB_KIND {
            modules.push(BlobModule::Lib);
        } else {
            let payload = r
                .bytes(&format!("payload of module {i} ({kind})"))?
                .to_vec();
            modules.push(BlobModule::Serialized { kind, payload });
        }
    }
    let bin = LibraryBin {
        modules,
        import_indptr: indptr,
        import_children: children,
    };
    validate_tree(&bin, tree_at)?;
    Ok(bin)
}

fn parse_legacy(r: &mut Reader<'_>) -> Result<LibraryBin> {
    // Each entry needs at least its 8-byte key length.
    let count = r.len("entry count", 8)?;
    let mut modules = Vec::new();
    let mut tree: Option<(usize, Vec<u64>, Vec<u64>)> = None;
    for i in 0..count {
        let at = r.pos;
        let key = r.string(&format!("key of entry {i}"))?;
        if key.is_empty() {
            return Err(blob_error(at, format!("entry {i} has an empty key")));
        }
        match key.as_str() {
            LIB_KIND => modules.push(BlobModule::Lib),
            IMPORT_TREE_KEY => {
                if tree.is_some() {
                    return Err(blob_error(at, "second _import_tree entry"));
                }
                let tree_at = r.pos;
                let indptr = r.vec_u64("import tree indptr")?;
                let children = r.vec_u64("import tree children")?;
                tree = Some((tree_at, indptr, children));
            }
            _ => {
                let payload = r.bytes(&format!("payload of entry {i} ({key})"))?.to_vec();
                modules.push(BlobModule::Serialized { kind: key, payload });
            }
        }
    }
    match tree {
        Some((tree_at, indptr, children)) => {
            if indptr.len() != modules.len() + 1 {
                return Err(blob_error(
                    tree_at,
                    format!(
                        "import tree has {} rows but the blob holds {} modules",
                        indptr.len().saturating_sub(1),
                        modules.len()
                    ),
                ));
            }
            let bin = LibraryBin {
                modules,
                import_indptr: indptr,
                import_children: children,
            };
            validate_tree(&bin, tree_at)?;
            Ok(bin)
        }
        None => {
            // Seed 001: without a tree the library module is the root and imports the others.
            let others: Vec<BlobModule> = modules
                .into_iter()
                .filter(|m| *m != BlobModule::Lib)
                .collect();
            let n = others.len();
            let mut all = vec![BlobModule::Lib];
            all.extend(others);
            let mut children = vec![(1..=n).collect::<Vec<_>>()];
            children.extend((0..n).map(|_| Vec::new()));
            Ok(LibraryBin::from_children(all, &children))
        }
    }
}

/// Checks the CSR tree against the module count and rejects cycles (which would make module
/// references and import searches loop forever).
fn validate_tree(bin: &LibraryBin, at: usize) -> Result<()> {
    let n = bin.modules.len();
    let indptr = &bin.import_indptr;
    if indptr.len() != n + 1 {
        return Err(blob_error(
            at,
            format!("import tree has {} rows for {n} modules", indptr.len() - 1),
        ));
    }
    if n == 0 {
        return Err(blob_error(at, "blob holds no module"));
    }
    if indptr[0] != 0 {
        return Err(blob_error(
            at,
            format!("import tree indptr starts with {}", indptr[0]),
        ));
    }
    for i in 0..n {
        if indptr[i + 1] < indptr[i] {
            return Err(blob_error(
                at,
                format!("import tree indptr decreases at row {i}"),
            ));
        }
    }
    if indptr[n] != bin.import_children.len() as u64 {
        return Err(blob_error(
            at,
            format!(
                "import tree indptr ends at {} but there are {} children",
                indptr[n],
                bin.import_children.len()
            ),
        ));
    }
    if let Some((j, c)) = bin
        .import_children
        .iter()
        .enumerate()
        .find(|(_, &c)| c >= n as u64)
    {
        return Err(blob_error(
            at,
            format!("import tree child #{j} is module {c} but there are only {n} modules"),
        ));
    }
    // Iterative three-colour DFS from every node.
    let mut state = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let kids = bin.children_of(node);
            if *next < kids.len() {
                let child = kids[*next] as usize;
                *next += 1;
                match state[child] {
                    0 => {
                        state[child] = 1;
                        stack.push((child, 0));
                    }
                    1 => {
                        return Err(blob_error(
                            at,
                            format!("import tree has a cycle through module {child}"),
                        ))
                    }
                    _ => {}
                }
            } else {
                state[node] = 2;
                stack.pop();
            }
        }
    }
    Ok(())
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_vec(out: &mut Vec<u8>, v: &[u64]) {
    put_u64(out, v.len() as u64);
    for &x in v {
        put_u64(out, x);
    }
}

fn with_size_prefix(body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    put_u64(&mut out, body.len() as u64);
    out.extend(body);
    out
}

/// Writes a blob in the TVM 0.27 layout (with its `nbytes` prefix).
pub fn write(bin: &LibraryBin) -> Vec<u8> {
    let mut body = Vec::new();
    put_vec(&mut body, &bin.import_indptr);
    put_vec(&mut body, &bin.import_children);
    for m in &bin.modules {
        put_bytes(&mut body, m.kind().as_bytes());
        if let BlobModule::Serialized { payload, .. } = m {
            put_bytes(&mut body, payload);
        }
    }
    with_size_prefix(body)
}

/// Writes a blob in the older (seed 000) layout, with `_import_tree` last. Kiln never exports
/// this layout; it exists to test the reader and for tools that target older runtimes.
pub fn write_legacy(bin: &LibraryBin) -> Vec<u8> {
    let mut body = Vec::new();
    put_u64(&mut body, bin.modules.len() as u64 + 1);
    for m in &bin.modules {
        put_bytes(&mut body, m.kind().as_bytes());
        if let BlobModule::Serialized { payload, .. } = m {
            put_bytes(&mut body, payload);
        }
    }
    put_bytes(&mut body, IMPORT_TREE_KEY.as_bytes());
    put_vec(&mut body, &bin.import_indptr);
    put_vec(&mut body, &bin.import_children);
    with_size_prefix(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LibraryBin {
        LibraryBin::from_children(
            vec![
                BlobModule::Lib,
                BlobModule::Serialized {
                    kind: "test.kind".into(),
                    payload: b"first payload".to_vec(),
                },
                BlobModule::Serialized {
                    kind: "test.kind".into(),
                    payload: vec![],
                },
            ],
            &[vec![1, 2], vec![2], vec![]],
        )
    }

    #[test]
    fn round_trips_both_layouts() {
        let bin = sample();
        assert_eq!(parse(&write(&bin)).unwrap(), bin);
        assert_eq!(parse(&write_legacy(&bin)).unwrap(), bin);
        // Trailing bytes after nbytes (the rest of a symbol) are ignored.
        let mut padded = write(&bin);
        padded.extend_from_slice(&[0xff; 13]);
        assert_eq!(parse(&padded).unwrap(), bin);
    }

    #[test]
    fn legacy_without_tree_roots_at_the_library() {
        let mut body = Vec::new();
        put_u64(&mut body, 2);
        put_bytes(&mut body, b"cuda");
        put_bytes(&mut body, b"ptx");
        put_bytes(&mut body, b"_lib");
        let bin = parse(&with_size_prefix(body)).unwrap();
        assert_eq!(bin.modules[0], BlobModule::Lib);
        assert_eq!(bin.modules[1].kind(), "cuda");
        assert_eq!(bin.children_of(0), &[1]);
    }

    #[test]
    fn every_truncation_is_an_error_with_an_offset() {
        for blob in [write(&sample()), write_legacy(&sample())] {
            for cut in 0..blob.len() {
                let mut t = blob[..cut].to_vec();
                if cut >= 8 {
                    // keep nbytes consistent with what is there, so the body itself is short
                    let n = (cut - 8) as u64;
                    t[..8].copy_from_slice(&n.to_le_bytes());
                }
                let e = parse(&t).unwrap_err();
                assert!(e.message().contains("byte offset"), "{}", e.message());
            }
        }
    }

    #[test]
    fn nbytes_past_the_end_is_refused() {
        let mut blob = write(&sample());
        blob[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = parse(&blob).unwrap_err();
        assert!(e.message().contains("blob size"), "{}", e.message());
        assert!(e.message().contains("byte offset 0"), "{}", e.message());
    }

    #[test]
    fn huge_counts_do_not_allocate() {
        let mut body = Vec::new();
        put_u64(&mut body, u64::MAX / 2);
        put_u64(&mut body, 0);
        let e = parse(&with_size_prefix(body)).unwrap_err();
        assert!(e.message().contains("item count"), "{}", e.message());
    }

    #[test]
    fn bad_trees_are_refused() {
        let mut bin = sample();
        bin.import_children[0] = 7;
        assert!(parse(&write(&bin))
            .unwrap_err()
            .message()
            .contains("only 3 modules"));
        let mut bin = sample();
        bin.import_children = vec![1, 2, 0];
        assert!(parse(&write(&bin)).unwrap_err().message().contains("cycle"));
        let mut bin = sample();
        bin.import_indptr = vec![0, 2, 1, 3];
        assert!(parse(&write(&bin))
            .unwrap_err()
            .message()
            .contains("decreases"));
    }

    #[test]
    fn empty_and_reserved_kinds_are_refused() {
        for kind in ["", IMPORT_TREE_KEY] {
            let bin = LibraryBin::from_children(
                vec![BlobModule::Serialized {
                    kind: kind.into(),
                    payload: vec![],
                }],
                &[vec![]],
            );
            let e = parse(&write(&bin)).unwrap_err();
            assert!(e.message().contains("invalid kind"), "{}", e.message());
        }
    }

    #[test]
    fn bad_utf8_kind_is_refused() {
        let bin = LibraryBin::from_children(
            vec![BlobModule::Serialized {
                kind: "\u{1F600}".into(),
                payload: vec![],
            }],
            &[vec![]],
        );
        let mut blob = write(&bin);
        let pos = blob.len() - 8 - 4; // inside the 4-byte emoji
        blob[pos] = 0xff;
        assert!(parse(&blob).unwrap_err().message().contains("UTF-8"));
    }
}
