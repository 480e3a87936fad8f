//! Modules (seeds 000-002): a compiled artifact that hands out functions by name, imports other
//! modules, and serializes into one shared library.
//!
//! - [`ModuleNode`]: what a kind of module implements (a loaded shared library, a device module,
//!   a test kind...).
//! - [`ModuleObj`] / [`Module`]: the `ffi.Module` object (type index 73) that wraps a node with its
//!   imports and a cache of looked-up functions. Its layout after the object header is Kiln's own:
//!   code compiled by Apache TVM only hands the pointer back to Kiln (as its library context).
//! - [`blob`]: the `__tvm_ffi__library_bin` format; [`library`]: `dlopen`ed libraries;
//!   [`elf`]: a library file's check before `dlopen` (truncated or corrupt files are errors, not
//!   SIGBUS) and its symbol table; [`target_record`]: what a library's code needs of the CPU,
//!   checked before `dlopen`; [`loader`]: `load_module` and the loader registry;
//!   [`export`]: `export_library`.
//!
//! Global functions use TVM-FFI's names (`ffi.ModuleGetFunction`, `ffi.ModuleLoadFromFile`, ...),
//! see the private `globals` module.

pub mod blob;
mod context;
pub mod elf;
#[cfg(feature = "compiler")]
pub mod export;
mod globals;
pub mod library;
pub mod loader;
pub mod target_record;

pub use context::context_slot_names;
#[cfg(feature = "compiler")]
pub use export::{export_library, ExportOptions};
pub use library::{
    library_target_records, LibraryModule, LibraryTarget, TVMFFIEnvModLookupFromImports,
};
pub use loader::{load_from_bytes, load_module};

use kiln_ffi::abi::{type_index, Deleter};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{AnyView, Error, Function, ObjectRef, ObjectType, Result};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Property bit: the module can be serialized with [`ModuleNode::save_to_bytes`].
pub const PROPERTY_BINARY_SERIALIZABLE: i64 = 0b001;
/// Property bit: the module's functions can be run.
pub const PROPERTY_RUNNABLE: i64 = 0b010;
/// Property bit: the module writes an object or source file that `export_library` links.
pub const PROPERTY_COMPILATION_EXPORTABLE: i64 = 0b100;

/// What one kind of module implements. Everything but [`kind`](ModuleNode::kind) and
/// [`get_function`](ModuleNode::get_function) has a default.
pub trait ModuleNode: Send + Sync + 'static {
    /// The module kind, e.g. `"library"`; serialized modules are restored by the loader
    /// registered as `ffi.Module.load_from_bytes.<kind>`.
    fn kind(&self) -> &str;

    /// The function `name` that this module itself defines (not its imports), or `None`.
    fn get_function(&self, name: &str) -> Result<Option<Function>>;

    /// The names of the functions this module itself defines, when it can list them (a
    /// library's exported functions, a device module's kernels); empty by default.
    fn function_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// True when this module defines `name` (default: asks [`get_function`](Self::get_function)).
    fn implements_function(&self, name: &str) -> bool {
        matches!(self.get_function(name), Ok(Some(_)))
    }

    /// Bits of `PROPERTY_*`. The default is runnable, plus serializable when
    /// [`is_binary_serializable`](Self::is_binary_serializable) says so.
    fn property_mask(&self) -> i64 {
        let mut mask = PROPERTY_RUNNABLE;
        if self.is_binary_serializable() {
            mask |= PROPERTY_BINARY_SERIALIZABLE;
        }
        if !self.write_formats().is_empty() {
            mask |= PROPERTY_COMPILATION_EXPORTABLE;
        }
        mask
    }

    /// True when [`save_to_bytes`](Self::save_to_bytes) works.
    fn is_binary_serializable(&self) -> bool {
        false
    }

    /// Serializes the module for the library blob.
    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Err(Error::runtime_error(format!(
            "module of kind `{}` cannot be saved to bytes",
            self.kind()
        )))
    }

    /// File formats [`write_to_file`](Self::write_to_file) supports (`"o"`, `"c"`, `"ll"`...).
    /// A module with an object or C format is linked into the library by `export_library`.
    fn write_formats(&self) -> Vec<String> {
        Vec::new()
    }

    /// Writes the module to a file in `format` (empty: deduce it from the suffix).
    fn write_to_file(&self, path: &Path, format: &str) -> Result<()> {
        Err(Error::runtime_error(format!(
            "module of kind `{}` cannot be written to a file (asked for {} in format `{format}`)",
            self.kind(),
            path.display()
        )))
    }

    /// Source code of the module in `format`, when it has any (empty string otherwise).
    fn inspect_source(&self, _format: &str) -> Result<String> {
        Ok(String::new())
    }

    /// The node as `std::any::Any`, to downcast to the concrete kind.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The payload of an `ffi.Module` object.
#[repr(C)]
pub struct ModuleObj {
    node: Box<dyn ModuleNode>,
    imports: RwLock<Vec<Module>>,
    /// The node's own functions by name (misses too: a node's set of functions is fixed).
    cache: Mutex<HashMap<String, Option<Function>>>,
    /// Functions resolved for compiled code through `TVMFFIEnvModLookupFromImports`. Compiled
    /// code keeps the borrowed pointers in its own statics, so a library module shares this
    /// cache with its loaded library (it lives as long as the code does).
    import_cache: Arc<Mutex<HashMap<String, Function>>>,
}

// SAFETY: ModuleObj is the payload of Kiln's ffi.Module objects; a module made by another
// runtime (same type index, another layout) is refused by Module::from_borrowed_ptr, which checks
// the deleter before viewing an object as a ModuleObj.
unsafe impl ObjectType for ModuleObj {
    const TYPE_KEY: &'static str = "ffi.Module";
    fn type_index() -> i32 {
        type_index::MODULE
    }
}

/// The deleter Kiln installs on its module objects: tells Kiln's modules from other runtimes'
/// objects of the same type index (whose layout is not ours).
static KILN_MODULE_DELETER: AtomicUsize = AtomicUsize::new(0);

/// A reference to a module.
#[derive(Clone, ObjectRef)]
#[object_ref(try_from_view = Module::from_view)]
pub struct Module(pub ObjectRef<ModuleObj>);

impl Module {
    /// Wraps a node in a new module object without imports.
    pub fn new(node: impl ModuleNode) -> Module {
        Module::from_boxed(Box::new(node), Arc::default())
    }

    pub(crate) fn from_boxed(
        node: Box<dyn ModuleNode>,
        import_cache: Arc<Mutex<HashMap<String, Function>>>,
    ) -> Module {
        let obj = ObjectRef::new(ModuleObj {
            node,
            imports: RwLock::new(Vec::new()),
            cache: Mutex::new(HashMap::new()),
            import_cache,
        });
        // SAFETY: the object was just allocated and is live.
        let deleter: Option<Deleter> = unsafe { (*obj.as_ptr().as_ptr()).deleter };
        KILN_MODULE_DELETER.store(deleter.map_or(0, |d| d as usize), Ordering::Relaxed);
        Module(obj)
    }

    /// Views a raw object pointer as a Kiln module (a new reference), or says why not.
    ///
    /// # Safety
    /// `ptr` must be NULL or point to a live object.
    pub unsafe fn from_borrowed_ptr(ptr: *mut std::ffi::c_void) -> Result<Module> {
        let ptr = std::ptr::NonNull::new(ptr as *mut kiln_ffi::abi::ObjectHeader)
            .ok_or_else(|| Error::value_error("module handle is NULL"))?;
        // SAFETY: the caller guarantees a live object, which starts with its header.
        let header = unsafe { &*ptr.as_ptr() };
        if header.type_index != type_index::MODULE {
            return Err(Error::type_error(format!(
                "expected an ffi.Module but got an object of type {}",
                kiln_ffi::type_registry::type_key_of(header.type_index)
            )));
        }
        if !is_kiln_deleter(header.deleter) {
            return Err(Error::type_error(
                "this ffi.Module was made by another runtime; Kiln cannot use it",
            ));
        }
        // SAFETY: a live Kiln module object (checked above); from_borrowed takes a new reference.
        Ok(Module(unsafe { ObjectRef::from_borrowed(ptr) }))
    }

    /// The module kind.
    pub fn kind(&self) -> String {
        self.0.node.kind().to_string()
    }

    /// The node.
    pub fn node(&self) -> &dyn ModuleNode {
        &*self.0.node
    }

    /// The node as its concrete type.
    pub fn downcast_node<T: ModuleNode>(&self) -> Option<&T> {
        self.0.node.as_any().downcast_ref::<T>()
    }

    /// Looks up `name` in this module (cached), then when `query_imports` is set in its imports,
    /// depth first in import order.
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        if let Some(f) = self.own_function(name)? {
            return Ok(Some(self.kept_alive_by(f)));
        }
        if query_imports {
            for m in self.imports() {
                if let Some(f) = m.get_function(name, true)? {
                    return Ok(Some(f));
                }
            }
        }
        Ok(None)
    }

    /// Like [`get_function`](Self::get_function) with imports, but a missing function is an
    /// `AttributeError` that names it and the module kind.
    pub fn function(&self, name: &str) -> Result<Function> {
        self.get_function(name, true)?.ok_or_else(|| {
            Error::attribute_error(format!(
                "module of kind `{}` has no function `{name}`",
                self.kind()
            ))
        })
    }

    /// `f` holding this module alive, as TVM's functions hold their module: compiled code
    /// finds its imports (device kernels, ...) through the module it was loaded into, so a
    /// function must keep working after the caller drops the module. The module caches `f`
    /// itself, not this wrapper, so no reference cycle forms.
    fn kept_alive_by(&self, f: Function) -> Function {
        Function::with_owner(f, self.clone())
    }

    fn own_function(&self, name: &str) -> Result<Option<Function>> {
        let cached = self.0.cache.lock().recover().get(name).cloned();
        if let Some(hit) = cached {
            return Ok(hit);
        }
        // The lock is not held while the node looks up (a node may call back into modules).
        let found = self.0.node.get_function(name)?;
        let mut cache = self.0.cache.lock().recover();
        Ok(cache.entry(name.to_string()).or_insert(found).clone())
    }

    /// True when this module (or, with `query_imports`, one of its imports) defines `name`.
    pub fn implements_function(&self, name: &str, query_imports: bool) -> bool {
        self.0.node.implements_function(name)
            || (query_imports
                && self
                    .imports()
                    .iter()
                    .any(|m| m.implements_function(name, true)))
    }

    /// The imported modules, in import order.
    pub fn imports(&self) -> Vec<Module> {
        self.0.imports.read().recover().clone()
    }

    /// Adds `other` to this module's imports; refuses an import that would make a cycle.
    pub fn import(&self, other: &Module) -> Result<()> {
        let mut stack = vec![other.clone()];
        let mut seen = std::collections::HashSet::new();
        while let Some(m) = stack.pop() {
            if m.0.same_as(&self.0) {
                return Err(Error::runtime_error(format!(
                    "importing a module of kind `{}` into one of kind `{}` would make a cycle",
                    other.kind(),
                    self.kind()
                )));
            }
            if seen.insert(m.0.as_ptr()) {
                stack.extend(m.imports());
            }
        }
        self.0.imports.write().recover().push(other.clone());
        Ok(())
    }

    /// Removes every import.
    pub fn clear_imports(&self) {
        self.0.imports.write().recover().clear();
    }

    /// See [`ModuleNode::property_mask`].
    pub fn property_mask(&self) -> i64 {
        self.0.node.property_mask()
    }

    /// See [`ModuleNode::save_to_bytes`].
    pub fn save_to_bytes(&self) -> Result<Vec<u8>> {
        self.0.node.save_to_bytes()
    }

    /// See [`ModuleNode::write_to_file`].
    pub fn write_to_file(&self, path: &Path, format: &str) -> Result<()> {
        self.0.node.write_to_file(path, format)
    }

    /// See [`ModuleNode::write_formats`].
    pub fn write_formats(&self) -> Vec<String> {
        self.0.node.write_formats()
    }

    /// See [`ModuleNode::function_names`].
    pub fn function_names(&self) -> Vec<String> {
        self.0.node.function_names()
    }

    /// See [`ModuleNode::inspect_source`].
    pub fn inspect_source(&self, format: &str) -> Result<String> {
        self.0.node.inspect_source(format)
    }

    /// The raw object pointer (borrowed): what compiled code receives as its library context.
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.0.as_ptr().as_ptr() as *mut std::ffi::c_void
    }

    /// Resolves `name` for compiled code of this module: its imports (depth first, each with its
    /// own imports), then the global registry. Results are cached for the life of the code.
    pub fn lookup_from_imports(&self, name: &str) -> Result<Function> {
        let cached = self.0.import_cache.lock().recover().get(name).cloned();
        if let Some(f) = cached {
            return Ok(f);
        }
        let mut found = None;
        for m in self.imports() {
            if let Some(f) = m.get_function(name, true)? {
                found = Some(f);
                break;
            }
        }
        let f = found
            .or_else(|| kiln_ffi::registry::get(name))
            .ok_or_else(|| {
                Error::runtime_error(format!(
                    "Cannot find function {name} in the imported modules or global registry."
                ))
            })?;
        // Two threads may race here; both get the first function stored.
        let mut cache = self.0.import_cache.lock().recover();
        Ok(cache.entry(name.to_string()).or_insert(f).clone())
    }
}

fn is_kiln_deleter(deleter: Option<Deleter>) -> bool {
    let ours = KILN_MODULE_DELETER.load(Ordering::Relaxed);
    ours != 0 && deleter.is_some_and(|d| d as usize == ours)
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({}@{:p})", self.kind(), self.0.as_ptr())
    }
}

impl Module {
    /// The `TryFromAny` downcast: a module object of Kiln's layout.
    fn from_view(v: &AnyView<'_>) -> Option<Module> {
        if v.type_index() != type_index::MODULE {
            return None;
        }
        // SAFETY: the view keeps the object alive; the deleter check refuses foreign layouts.
        unsafe { Module::from_borrowed_ptr(v.object_ptr()?.as_ptr() as *mut _).ok() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ffi::Any;

    struct Echo(&'static str);
    impl ModuleNode for Echo {
        fn kind(&self) -> &str {
            self.0
        }
        fn get_function(&self, name: &str) -> Result<Option<Function>> {
            let tag = format!("{}:{name}", self.0);
            Ok((name.starts_with(self.0) || name == "shared")
                .then(|| Function::from_typed(move || tag.clone())))
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    #[test]
    fn lookup_searches_imports_depth_first_and_caches() {
        let (a, b, c) = (
            Module::new(Echo("a")),
            Module::new(Echo("b")),
            Module::new(Echo("c")),
        );
        a.import(&b).unwrap();
        b.import(&c).unwrap();
        assert!(a.get_function("c1", false).unwrap().is_none());
        let f = a.get_function("c1", true).unwrap().unwrap();
        assert_eq!(f.invoke::<String>(()).unwrap(), "c:c1");
        assert_eq!(
            a.function("shared").unwrap().invoke::<String>(()).unwrap(),
            "a:shared"
        );
        let g1 = a.get_function("a1", false).unwrap().unwrap();
        assert_eq!(
            a.0.cache.lock().recover().len(),
            3,
            "own functions are cached"
        );
        assert!(a.implements_function("c9", true));
        assert!(!a.implements_function("c9", false));
        let e = a.function("zzz").unwrap_err();
        assert_eq!(e.kind(), "AttributeError");
        // A function keeps its module (and so the module's imports) alive.
        let weak_probe = a.0.clone();
        drop((a, b, c));
        assert_eq!(g1.invoke::<String>(()).unwrap(), "a:a1");
        assert!(weak_probe.imports.read().recover().len() == 1);
    }

    #[test]
    fn import_cycles_are_refused() {
        let (a, b) = (Module::new(Echo("a")), Module::new(Echo("b")));
        a.import(&b).unwrap();
        assert!(b.import(&a).unwrap_err().message().contains("cycle"));
        assert!(a.import(&a).is_err());
    }

    #[test]
    fn module_round_trips_through_any() {
        let m = Module::new(Echo("a"));
        let any: Any = m.clone().into();
        assert_eq!(any.type_index(), 73);
        let back: Module = any.try_as().unwrap();
        assert!(back.0.same_as(&m.0));
        assert_eq!(back.kind(), "a");
    }

    #[test]
    fn lookup_from_imports_falls_back_to_globals() {
        let a = Module::new(Echo("a"));
        a.import(&Module::new(Echo("b"))).unwrap();
        let f = a.lookup_from_imports("b7").unwrap();
        assert_eq!(f.invoke::<String>(()).unwrap(), "b:b7");
        let g = a.lookup_from_imports("runtime.DeviceGetAttr").unwrap();
        let exists: i64 = g.invoke((kiln_ffi::Device::cpu(0), 0i32)).unwrap();
        assert_eq!(exists, 1);
        let e = a.lookup_from_imports("no.such.function").unwrap_err();
        assert!(e.message().contains("no.such.function"));
    }
}
