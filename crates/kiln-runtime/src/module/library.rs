//! Library modules: a shared library compiled by Kiln or Apache TVM, `dlopen`ed, its context
//! slots filled, its blob of imported modules restored, its functions (`__tvm_ffi_<name>`) handed
//! out as [`Function`]s (seed 001's `CreateModuleFromLibrary`).
//!
//! Lifetimes: every function taken from a library holds the loaded library ([`DsoLibrary`]), so
//! the code stays mapped while any function is alive. The library's context variable
//! (`__tvm_ffi__library_ctx`) points at its module object while that object lives and is reset to
//! NULL when it dies (later lookups from the code then see only the global registry). Functions
//! that the code resolved by name are cached with the library, since the code keeps their
//! pointers in its own statics.
//!
//! The library is opened with `RTLD_NOW | RTLD_LOCAL`. The one symbol TVM-compiled code imports,
//! `TVMFFIErrorSetRaisedFromCStrParts`, must then be visible in the global scope: Python loads
//! Kiln with `RTLD_GLOBAL`; a Rust executable must be linked with `-rdynamic` (Kiln's test
//! binaries are, see `build.rs`), or load `libkiln_runtime.so` globally itself.

use super::blob::{self, BlobModule};
use super::elf::{self, DynamicSymbols};
use super::target_record::{
    parse_section, select, variant_symbol_prefix, TargetRecord, TARGET_RECORD_SECTION,
};
use super::{loader, Module, ModuleNode};
use kiln_ffi::abi::{RawAny, SafeCall};
use kiln_ffi::error::ffi_guard;
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Error, Function, Result};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Prefix of every function a library exports.
pub const SYMBOL_PREFIX: &str = "__tvm_ffi_";
/// The library context variable.
pub const LIBRARY_CTX_SYMBOL: &str = "__tvm_ffi__library_ctx";
/// The blob of serialized modules (TVM 0.27 name).
pub const LIBRARY_BIN_SYMBOL: &str = "__tvm_ffi__library_bin";
/// The blob under its older name (seed 001).
pub const LEGACY_BLOB_SYMBOL: &str = "__tvm_dev_mblob";
/// The library context variable under its older name.
pub const LEGACY_CTX_SYMBOL: &str = "__tvm_module_ctx";

/// A `dlopen`ed shared library, shared by every module and function that comes from it.
pub struct DsoLibrary {
    handle: *mut c_void,
    /// An address inside the library (its lookup slot), to tell after `dlclose` whether the
    /// code is really gone; 0 when the library never resolves functions by name.
    probe: usize,
    path: PathBuf,
    /// The file's identity when it was opened ([`FileIdentity::of`]).
    identity: Option<FileIdentity>,
    symbols: Option<DynamicSymbols>,
    /// The library's target records and the variant chosen for this host (none for libraries
    /// without records, such as Apache TVM's).
    target: Option<LibraryTarget>,
    /// Functions resolved for the library's code by name (see the module docs).
    pub(crate) import_cache: Arc<Mutex<HashMap<String, Function>>>,
}

// SAFETY: a dlopen handle may be used from any thread; the cache is behind a mutex.
unsafe impl Send for DsoLibrary {}
// SAFETY: as for Send.
unsafe impl Sync for DsoLibrary {}

/// What tells two versions of a library file apart: device, inode, size and modification
/// time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileIdentity {
    /// The identity of the file at `path` now (`None` when it cannot be read).
    fn of(path: &Path) -> Option<FileIdentity> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

/// `dlopen` of `path` (RTLD_NOW | RTLD_LOCAL): the handle, or the loader's reason.
fn dlopen_path(path: &Path) -> Result<*mut c_void> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        Error::value_error(format!(
            "library path {} contains a NUL byte",
            path.display()
        ))
    })?;
    // SAFETY: dlopen with a valid C string; library initialisers run here, as in any loader.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(Error::runtime_error(dlerror_text()));
    }
    Ok(handle)
}

/// `dlopen` of a private copy of `path` (removed once loaded): the dynamic loader keys the
/// libraries it has open by path, so a file rewritten while its earlier version is still
/// loaded would otherwise give the earlier code.
fn dlopen_copy(path: &Path) -> Result<*mut c_void> {
    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
    let copy = std::env::temp_dir().join(format!(
        "kiln-{}-{n}-{}",
        std::process::id(),
        name.unwrap_or_else(|| "library.so".into())
    ));
    std::fs::copy(path, &copy).map_err(|e| {
        Error::runtime_error(format!(
            "cannot load {}: an earlier version of it is loaded and copying the new one to {} \
             failed: {e}",
            path.display(),
            copy.display()
        ))
    })?;
    let handle = dlopen_path(&copy);
    let _ = std::fs::remove_file(&copy);
    handle
}

/// Libraries currently open, by dlopen handle: opening one file twice gives one handle (and one
/// set of statics in the code), so it must give one `DsoLibrary` too.
fn open_libraries() -> &'static Mutex<HashMap<usize, Weak<DsoLibrary>>> {
    static OPEN: OnceLock<Mutex<HashMap<usize, Weak<DsoLibrary>>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a thread-local C string.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".to_string()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

impl DsoLibrary {
    /// Opens `path` (RTLD_NOW | RTLD_LOCAL), or returns the library already open for it. The
    /// file is checked first ([`elf::check_file`]): a truncated or corrupt library is an error.
    pub fn open(path: &Path) -> Result<Arc<DsoLibrary>> {
        // A truncated file would be mapped anyway and fault (SIGBUS) when touched.
        elf::check_file(path)?;
        // Before dlopen: no code of a library this CPU cannot run may execute, not even its
        // initialisers.
        let target = LibraryTarget::read(path)?;
        let symbols = elf::dynamic_symbols_of_file(path);
        let identity = FileIdentity::of(path);
        let loaded = |handle: Result<*mut c_void>| {
            handle.map_err(|e| {
                let reason = e.message().to_string();
                let hint = if reason.contains("TVMFFI") {
                    " (the process must export Kiln's TVMFFI* functions globally: load \
                     libkiln_runtime.so with RTLD_GLOBAL, or link the executable with -rdynamic)"
                } else {
                    ""
                };
                Error::runtime_error(format!(
                    "cannot load {} as a shared library: {reason}{hint}",
                    path.display()
                ))
            })
        };
        let mut handle = loaded(dlopen_path(path))?;
        let mut open = open_libraries().lock().recover();
        if let Some(existing) = open.get(&(handle as usize)).and_then(Weak::upgrade) {
            // SAFETY: drops the extra reference this dlopen took; `existing` keeps its own.
            unsafe { libc::dlclose(handle) };
            if existing.identity == identity {
                return Ok(existing);
            }
            // The file was replaced since `existing` was loaded from it: its new version, once
            // loaded apart from the old one (which the old modules keep using).
            let copy = open
                .values()
                .filter_map(Weak::upgrade)
                .find(|l| l.path == path && l.identity == identity);
            if let Some(lib) = copy {
                return Ok(lib);
            }
            handle = loaded(dlopen_copy(path))?;
        }
        let probe_name = c"__TVMFFIEnvModLookupFromImports";
        // SAFETY: a live handle and a valid C string.
        let probe = unsafe { libc::dlsym(handle, probe_name.as_ptr()) } as usize;
        let lib = Arc::new(DsoLibrary {
            handle,
            probe,
            path: path.to_path_buf(),
            identity,
            symbols,
            target,
            import_cache: Arc::default(),
        });
        open.insert(handle as usize, Arc::downgrade(&lib));
        Ok(lib)
    }

    /// The library's target records and the chosen variant, when it has records.
    pub fn target(&self) -> Option<&LibraryTarget> {
        self.target.as_ref()
    }

    /// The symbol prefix of the functions of the variant that runs here (`__tvm_ffi_` for the
    /// default variant and for libraries without records).
    fn function_prefix(&self) -> String {
        match &self.target {
            Some(t) => variant_symbol_prefix(&t.records[t.chosen].variant),
            None => SYMBOL_PREFIX.to_string(),
        }
    }

    /// The file the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The address of a symbol, or NULL.
    pub fn symbol(&self, name: &str) -> *mut c_void {
        let Ok(c) = CString::new(name) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a live handle and a valid C string.
        unsafe { libc::dlsym(self.handle, c.as_ptr()) }
    }

    /// The dynamic symbols read from the file, when it is an ELF file.
    pub fn symbols(&self) -> Option<&DynamicSymbols> {
        self.symbols.as_ref()
    }

    /// True when the file has a symbol Kiln or TVM would put in a library. Unknown (non-ELF)
    /// files are given the benefit of the doubt.
    fn looks_like_a_module_library(&self) -> bool {
        match &self.symbols {
            Some(s) => s.names().iter().any(|n| {
                n.starts_with(SYMBOL_PREFIX) || *n == LEGACY_BLOB_SYMBOL || *n == LEGACY_CTX_SYMBOL
            }),
            None => true,
        }
    }
}

impl Drop for DsoLibrary {
    fn drop(&mut self) {
        let mut open = open_libraries().lock().recover();
        if open
            .get(&(self.handle as usize))
            .is_some_and(|w| w.strong_count() == 0)
        {
            open.remove(&(self.handle as usize));
        }
        drop(open);
        let resolved = std::mem::take(&mut *self.import_cache.lock().recover());
        // SAFETY: the handle came from dlopen and nothing from the library is alive any more.
        unsafe { libc::dlclose(self.handle) };
        // The code keeps borrowed pointers to the functions it resolved in its statics. If the
        // library stays mapped (another loader holds it, or it cannot be unloaded), a later load
        // reuses those statics, so the functions must stay alive: leak them.
        // SAFETY: Dl_info is plain data (all-zero is valid); dladdr only reads the loader's
        // tables.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: as above; dladdr accepts any address and writes only to `info`.
        if self.probe != 0 && unsafe { libc::dladdr(self.probe as *const c_void, &mut info) } != 0 {
            std::mem::forget(resolved);
        }
    }
}

/// The context a library function is created with: its entry point and its library.
struct LibraryFunction {
    entry: SafeCall,
    _library: Arc<DsoLibrary>,
}

unsafe extern "C" fn call_library_function(
    ctx: *mut c_void,
    args: *const RawAny,
    num_args: i32,
    result: *mut RawAny,
) -> i32 {
    // SAFETY: the context is the LibraryFunction this function object was created with; compiled
    // entry points expect `self = NULL`.
    unsafe {
        let f = &*(ctx as *const LibraryFunction);
        (f.entry)(std::ptr::null_mut(), args, num_args, result)
    }
}

unsafe extern "C" fn drop_library_function(ctx: *mut c_void) {
    // SAFETY: the context was boxed when the function object was made, and is dropped once, with
    // the object.
    drop(unsafe { Box::from_raw(ctx as *mut LibraryFunction) });
}

/// The module node of a loaded shared library (kind `library`).
pub struct LibraryModule {
    lib: Arc<DsoLibrary>,
    /// The module object that the library's context variable points to, when it is this one.
    ctx_owner: AtomicPtr<c_void>,
}

impl LibraryModule {
    /// The loaded library.
    pub fn library(&self) -> &Arc<DsoLibrary> {
        &self.lib
    }

    /// Names of the functions the library exports (`__tvm_ffi_<name>` function symbols), sorted;
    /// empty when the file's symbol table could not be read.
    pub fn function_names(&self) -> Vec<String> {
        let Some(symbols) = self.lib.symbols() else {
            return Vec::new();
        };
        symbols
            .function_names()
            .into_iter()
            .filter_map(|n| n.strip_prefix(SYMBOL_PREFIX))
            .filter(|n| !n.starts_with('_'))
            .map(str::to_string)
            .collect()
    }

    /// The library's target records (what each code variant needs of the CPU), in the file's
    /// order; empty for libraries without a `.kiln_target` section.
    pub fn target_records(&self) -> &[TargetRecord] {
        self.lib.target().map_or(&[], |t| &t.records)
    }

    /// The index in [`target_records`](Self::target_records) of the code variant that runs on
    /// this host, `None` for libraries without records (their `__tvm_ffi_<name>` functions run).
    pub fn chosen_variant(&self) -> Option<usize> {
        self.lib.target().map(|t| t.chosen)
    }

    fn entry_point(&self, name: &str) -> Option<SafeCall> {
        let symbol = format!("{}{name}", self.lib.function_prefix());
        // Data symbols with the prefix (`__tvm_ffi__library_bin`, `__tvm_ffi__library_ctx`) must
        // never be called.
        if name.starts_with("_library_") {
            return None;
        }
        if let Some(s) = self.lib.symbols() {
            if !s.is_function(&symbol) {
                return None;
            }
        }
        let addr = self.lib.symbol(&symbol);
        // SAFETY: a function symbol with the prefix follows the safe-call convention (ABI).
        (!addr.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, SafeCall>(addr) })
    }
}

impl Drop for LibraryModule {
    fn drop(&mut self) {
        let owner = self.ctx_owner.load(Ordering::Acquire);
        if owner.is_null() {
            return;
        }
        for name in [LIBRARY_CTX_SYMBOL, LEGACY_CTX_SYMBOL] {
            let slot = self.lib.symbol(name) as *const AtomicPtr<c_void>;
            if !slot.is_null() {
                // SAFETY: the context variable is a pointer-sized global in the loaded library.
                let _ = unsafe { &*slot }.compare_exchange(
                    owner,
                    std::ptr::null_mut(),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
            }
        }
    }
}

impl ModuleNode for LibraryModule {
    fn function_names(&self) -> Vec<String> {
        LibraryModule::function_names(self)
    }

    fn kind(&self) -> &str {
        "library"
    }

    fn get_function(&self, name: &str) -> Result<Option<Function>> {
        Ok(self.entry_point(name).map(|entry| {
            let ctx = Box::into_raw(Box::new(LibraryFunction {
                entry,
                _library: self.lib.clone(),
            }));
            // SAFETY: the trampoline follows the safe-call convention; the deleter frees `ctx`.
            unsafe {
                Function::from_c(
                    ctx as *mut c_void,
                    call_library_function,
                    Some(drop_library_function),
                )
            }
        }))
    }

    fn implements_function(&self, name: &str) -> bool {
        self.entry_point(name).is_some()
    }

    fn inspect_source(&self, _format: &str) -> Result<String> {
        Ok(String::new())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Makes a library module over `lib` (sharing the library's lookup cache).
fn library_module(lib: &Arc<DsoLibrary>) -> Module {
    Module::from_boxed(
        Box::new(LibraryModule {
            lib: lib.clone(),
            ctx_owner: AtomicPtr::new(std::ptr::null_mut()),
        }),
        lib.import_cache.clone(),
    )
}

/// Points the library's context variables at `module` (a library module over it).
fn set_context(lib: &DsoLibrary, module: &Module) {
    let node = module
        .downcast_node::<LibraryModule>()
        .expect("a library module");
    node.ctx_owner.store(module.as_raw(), Ordering::Release);
    for name in [LIBRARY_CTX_SYMBOL, LEGACY_CTX_SYMBOL] {
        let slot = lib.symbol(name) as *const AtomicPtr<c_void>;
        if !slot.is_null() {
            // SAFETY: a pointer-sized global in the loaded library.
            unsafe { &*slot }.store(module.as_raw(), Ordering::Release);
        }
    }
}

/// A library's target records (`super::target_record`) and the index of the code variant
/// chosen for this host.
#[derive(Clone, Debug)]
pub struct LibraryTarget {
    /// Every record, in the library's order.
    pub records: Vec<TargetRecord>,
    /// The index of the variant that runs here.
    pub chosen: usize,
}

impl LibraryTarget {
    /// Reads the records of the library file at `path` and chooses the variant to run: `None`
    /// when it has none; an error naming the file when they are malformed or when this CPU can
    /// run none of its variants.
    pub fn read(path: &Path) -> Result<Option<LibraryTarget>> {
        let bytes = elf::section_of_file(path, TARGET_RECORD_SECTION)
            .map_err(|e| Error::value_error(format!("cannot load {}: {e}", path.display())))?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let records = parse_section(&bytes).map_err(|e| {
            Error::value_error(format!(
                "cannot load {}: section {TARGET_RECORD_SECTION}: {e}",
                path.display()
            ))
        })?;
        if records.is_empty() {
            return Ok(None);
        }
        let chosen = select(&records)
            .map_err(|e| Error::runtime_error(format!("cannot load {}: {e}", path.display())))?;
        if std::env::var("KILN_LOG").is_ok_and(|v| v.contains("debug")) {
            let r = &records[chosen];
            let tag = if r.variant.is_empty() {
                "default"
            } else {
                &r.variant
            };
            eprintln!(
                "kiln: {}: running code variant `{tag}` ({}, CPU {}) of {}",
                path.display(),
                r.target,
                r.cpu,
                records.len()
            );
        }
        Ok(Some(LibraryTarget { records, chosen }))
    }
}

/// The target records of every library module in `module`'s tree (itself and its imports),
/// each with whether it is the variant that runs here.
pub fn library_target_records(module: &Module) -> Vec<(TargetRecord, bool)> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![module.clone()];
    while let Some(m) = stack.pop() {
        if !seen.insert(m.as_raw() as usize) {
            continue;
        }
        if let Some(t) = m
            .downcast_node::<LibraryModule>()
            .and_then(|l| l.lib.target())
        {
            for (i, r) in t.records.iter().enumerate() {
                out.push((r.clone(), i == t.chosen));
            }
        }
        stack.extend(m.imports());
    }
    out
}

/// Loads a shared library as a module tree: the root module of its blob, or the library module
/// itself when it has no blob. Errors name the path.
pub fn load_library(path: &Path) -> Result<Module> {
    let lib = DsoLibrary::open(path)?;
    if !lib.looks_like_a_module_library() {
        return Err(Error::runtime_error(format!(
            "{} is a shared library but not a Kiln/TVM module: it defines no `{SYMBOL_PREFIX}<name>` \
             function and no library blob",
            path.display()
        )));
    }
    super::context::fill_context_slots(&lib);
    let blob_bytes =
        read_blob(&lib).map_err(|e| e.context(format!("loading {}", path.display())))?;
    let Some(bytes) = blob_bytes else {
        let module = library_module(&lib);
        set_context(&lib, &module);
        return Ok(module);
    };
    let bin = blob::parse(bytes).map_err(|e| e.context(format!("loading {}", path.display())))?;
    let mut modules = Vec::with_capacity(bin.modules.len());
    let mut ctx_module = None;
    for (i, entry) in bin.modules.iter().enumerate() {
        match entry {
            BlobModule::Lib => {
                let m = library_module(&lib);
                ctx_module = Some(m.clone());
                modules.push(m);
            }
            BlobModule::Serialized { kind, payload } => {
                let m = loader::load_from_bytes(kind, payload).map_err(|e| {
                    e.context(format!(
                        "loading {}: module #{i} of its library blob",
                        path.display()
                    ))
                })?;
                modules.push(m);
            }
        }
    }
    for (i, m) in modules.iter().enumerate() {
        for &child in bin.children_of(i) {
            m.import(&modules[child as usize])?;
        }
    }
    if let Some(m) = ctx_module {
        set_context(&lib, &m);
    }
    Ok(modules.swap_remove(0))
}

/// The blob of a library (new symbol first, then the older one), bounded by the symbol's
/// recorded size when the file's symbol table gives it.
fn read_blob(lib: &DsoLibrary) -> Result<Option<&[u8]>> {
    for name in [LIBRARY_BIN_SYMBOL, LEGACY_BLOB_SYMBOL] {
        let addr = lib.symbol(name) as *const u8;
        if addr.is_null() {
            continue;
        }
        let recorded = lib.symbols().and_then(|s| s.size_of(name)).unwrap_or(0);
        let len = if recorded > 0 {
            usize::try_from(recorded).map_err(|_| Error::value_error("blob symbol too large"))?
        } else {
            // No recorded size: trust the blob's own length prefix, as TVM does.
            // SAFETY: the symbol holds at least its 8-byte length prefix.
            let n = unsafe { std::ptr::read_unaligned(addr as *const u64) };
            usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_add(8))
                .ok_or_else(|| Error::value_error(format!("`{name}` declares {n} bytes")))?
        };
        if len < 8 {
            return Err(Error::value_error(format!(
                "`{name}` is {len} bytes, too small for the blob size prefix (byte offset 0)"
            )));
        }
        // SAFETY: the symbol is `len` bytes of read-only data in a library that outlives `lib`'s
        // borrow.
        return Ok(Some(unsafe { std::slice::from_raw_parts(addr, len) }));
    }
    Ok(None)
}

/// `TVMFFIEnvModLookupFromImports`: resolves `func_name` for the library whose context is
/// `library_ctx` (its imports, then the global registry) and stores a borrowed function handle
/// in `*out` (kept alive as long as the library's code is loaded). A NULL context searches the
/// global registry only. Returns 0, or -1 with the error raised.
///
/// # Safety
/// `library_ctx` must be NULL or a live object; `func_name` a C string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModLookupFromImports(
    library_ctx: *mut c_void,
    func_name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    ffi_guard(|| {
        if func_name.is_null() || out.is_null() {
            return Err(Error::value_error(
                "TVMFFIEnvModLookupFromImports: func_name and out must not be NULL",
            ));
        }
        // SAFETY: the caller passes a NUL-terminated name (checked non-NULL above).
        let name = unsafe { CStr::from_ptr(func_name) }.to_string_lossy();
        let f = if library_ctx.is_null() {
            global_lookup(&name)?
        } else {
            // SAFETY: a non-NULL library context is the module object the library was loaded
            // into; from_borrowed_ptr checks that it is a Kiln module.
            unsafe { Module::from_borrowed_ptr(library_ctx) }?.lookup_from_imports(&name)?
        };
        // SAFETY: `out` is non-NULL (checked above) and the caller's to write.
        unsafe { *out = f.0.as_ptr().as_ptr() as *mut c_void };
        Ok(())
    })
}

/// Lookups with no module context: the functions stay cached for the life of the process, since
/// the code that asked keeps their pointers.
fn global_lookup(name: &str) -> Result<Function> {
    static CACHE: OnceLock<Mutex<HashMap<String, Function>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().recover();
    if let Some(f) = cache.get(name) {
        return Ok(f.clone());
    }
    let f = kiln_ffi::registry::get(name).ok_or_else(|| {
        Error::runtime_error(format!(
            "Cannot find function {name} in the global registry (the library's module is gone)"
        ))
    })?;
    cache.insert(name.to_string(), f.clone());
    Ok(f)
}
