//! Functions and modules: `ir.Range`, `tir.PrimFunc` (parameters, buffer map, body, attributes)
//! and `ir.IRModule` (functions by name), the unit that passes transform and codegen compiles.

use crate::buffer::Buffer;
use crate::dtype::DataTypeExt;
use crate::expr::{Operand, PrimExpr, Var};
use crate::node::{NodeList, NodeMap};
use crate::stmt::Stmt;
use kiln_ffi::{Any, AnyView, DataType, Error, Map, Object, ObjectRef, Result};
use std::fmt;

/// The half-open integer range `[min, min + extent)` (`ir.Range`).
#[derive(Object)]
#[object(type_key = "ir.Range")]
#[repr(C)]
pub struct RangeObj {
    /// The first value.
    pub min: PrimExpr,
    /// The number of values.
    pub extent: PrimExpr,
}

/// A range handle.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display)]
pub struct Range(ObjectRef<RangeObj>);

impl Range {
    /// `[min, min + extent)`; literals adapt to the other bound's type.
    ///
    /// # Panics
    /// When the two types differ.
    pub fn from_min_extent(min: impl Into<Operand>, extent: impl Into<Operand>) -> Range {
        let (min, extent) = crate::expr::operands(min, extent).unwrap_or_else(|e| panic!("{e}"));
        Range(ObjectRef::new(RangeObj { min, extent }))
    }

    /// `[begin, end)`.
    ///
    /// # Panics
    /// When the two types differ.
    pub fn new(begin: impl Into<Operand>, end: impl Into<Operand>) -> Range {
        let (begin, end) = crate::expr::operands(begin, end).unwrap_or_else(|e| panic!("{e}"));
        let extent = &end - &begin;
        Range(ObjectRef::new(RangeObj { min: begin, extent }))
    }

    /// The first value.
    pub fn min(&self) -> &PrimExpr {
        &self.0.min
    }

    /// The number of values.
    pub fn extent(&self) -> &PrimExpr {
        &self.0.extent
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match crate::expr::try_build_binary(crate::expr::BinOp::Add, self.min(), self.extent()) {
            Ok(end) => write!(f, "range({}, {end})", self.min()),
            Err(_) => write!(
                f,
                "range({}, {} + {})",
                self.min(),
                self.min(),
                self.extent()
            ),
        }
    }
}

/// A tensor-level function (`tir.PrimFunc`).
#[derive(Object)]
#[object(type_key = "tir.PrimFunc")]
#[repr(C)]
pub struct PrimFuncObj {
    /// The parameters: scalars, and `handle`s for tensors (see `buffer_map`).
    pub params: NodeList<Var>,
    /// The body.
    pub body: Stmt,
    /// The return type (`void` for none).
    pub ret_type: DataType,
    /// The buffer behind each tensor parameter.
    pub buffer_map: NodeMap<Var, Buffer>,
    /// Function attributes (`global_symbol`, `tir.noalias`, `target`, ...).
    pub attrs: Map,
}

/// A function handle.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display)]
pub struct PrimFunc(ObjectRef<PrimFuncObj>);

/// A copy of `map` with `key` set to `value`.
pub fn map_with(map: &Map, key: &str, value: impl Into<Any>) -> Map {
    let mut pairs: Vec<(Any, Any)> = map
        .iter()
        .filter(|(k, _)| k.try_as::<String>().ok().as_deref() != Some(key))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    pairs.push((key.into(), value.into()));
    Map::new(pairs)
}

impl PrimFunc {
    /// A function; every `buffer_map` key must be a handle parameter.
    pub fn new(
        params: Vec<Var>,
        body: Stmt,
        ret_type: DataType,
        buffer_map: Vec<(Var, Buffer)>,
        attrs: Map,
    ) -> Result<PrimFunc> {
        for (p, b) in &buffer_map {
            if !params.contains(p) {
                return Err(Error::value_error(format!(
                    "tir.PrimFunc: buffer `{}` is mapped from `{}`, which is not a parameter",
                    b.name(),
                    p.name()
                )));
            }
            if !p.dtype().is_handle() {
                return Err(Error::type_error(format!(
                    "tir.PrimFunc: parameter `{}` of buffer `{}` must be a handle, got {}",
                    p.name(),
                    b.name(),
                    p.dtype()
                )));
            }
        }
        Ok(PrimFunc(ObjectRef::new(PrimFuncObj {
            params: params.into(),
            body,
            ret_type,
            buffer_map: NodeMap::new(buffer_map),
            attrs,
        })))
    }

    /// A function over tensors `buffers` (one handle parameter each, named after the buffer),
    /// returning nothing, with `global_symbol = name` (what TE lowering produces).
    pub fn from_buffers(name: &str, buffers: &[Buffer], body: Stmt) -> PrimFunc {
        let pairs: Vec<(Var, Buffer)> = buffers
            .iter()
            .map(|b| (Var::handle(b.name()), b.clone()))
            .collect();
        let params = pairs.iter().map(|(v, _)| v.clone()).collect();
        let attrs = Map::new(vec![(Any::from("global_symbol"), Any::from(name))]);
        PrimFunc::new(params, body, DataType::void(), pairs, attrs)
            .expect("fresh handle parameters make a valid function")
    }

    /// The parameters.
    pub fn params(&self) -> &[Var] {
        &self.0.params
    }
    /// The body.
    pub fn body(&self) -> &Stmt {
        &self.0.body
    }
    /// The return type.
    pub fn ret_type(&self) -> DataType {
        self.0.ret_type
    }
    /// The buffers of tensor parameters.
    pub fn buffer_map(&self) -> &NodeMap<Var, Buffer> {
        &self.0.buffer_map
    }
    /// The attributes.
    pub fn attrs(&self) -> &Map {
        &self.0.attrs
    }
    /// Attribute `key`.
    pub fn get_attr(&self, key: &str) -> Option<AnyView<'_>> {
        self.0.attrs.get(key)
    }
    /// The `global_symbol` attribute: the exported name.
    pub fn global_symbol(&self) -> Option<String> {
        self.get_attr("global_symbol")?.try_as::<String>().ok()
    }

    /// A copy with another body (everything else shared).
    pub fn with_body(&self, body: Stmt) -> PrimFunc {
        PrimFunc(ObjectRef::new(PrimFuncObj {
            params: self.0.params.clone(),
            body,
            ret_type: self.0.ret_type,
            buffer_map: self.0.buffer_map.clone(),
            attrs: self.0.attrs.clone(),
        }))
    }

    /// A copy with attribute `key` set.
    pub fn with_attr(&self, key: &str, value: impl Into<Any>) -> PrimFunc {
        PrimFunc(ObjectRef::new(PrimFuncObj {
            params: self.0.params.clone(),
            body: self.0.body.clone(),
            ret_type: self.0.ret_type,
            buffer_map: self.0.buffer_map.clone(),
            attrs: map_with(&self.0.attrs, key, value),
        }))
    }
}

impl fmt::Display for PrimFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::printer::func_to_text(self, "main"))
    }
}

/// A module: functions by name (`ir.IRModule`).
#[derive(Object)]
#[object(type_key = "ir.IRModule")]
#[repr(C)]
pub struct IRModuleObj {
    /// The functions, by global name.
    pub functions: NodeMap<String, PrimFunc>,
    /// Module attributes.
    pub attrs: Map,
}

/// A module handle.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display)]
pub struct IRModule(ObjectRef<IRModuleObj>);

impl IRModule {
    /// A module of `functions`; names must be unique.
    pub fn new(functions: Vec<(String, PrimFunc)>) -> Result<IRModule> {
        for (i, (n, _)) in functions.iter().enumerate() {
            if functions[..i].iter().any(|(m, _)| m == n) {
                return Err(Error::value_error(format!(
                    "ir.IRModule: function `{n}` appears twice"
                )));
            }
        }
        Ok(IRModule(ObjectRef::new(IRModuleObj {
            functions: NodeMap::new(functions),
            attrs: Map::new(Vec::new()),
        })))
    }

    /// A module with one function.
    pub fn from_func(name: &str, func: PrimFunc) -> IRModule {
        IRModule::new(vec![(name.to_string(), func)]).expect("one function has a unique name")
    }

    /// The functions in insertion order.
    pub fn functions(&self) -> &NodeMap<String, PrimFunc> {
        &self.0.functions
    }

    /// The function called `name`.
    pub fn lookup(&self, name: &str) -> Option<&PrimFunc> {
        self.0.functions.get(name)
    }

    /// The module attributes.
    pub fn attrs(&self) -> &Map {
        &self.0.attrs
    }

    /// A copy with function `name` added or replaced.
    pub fn with_function(&self, name: &str, func: PrimFunc) -> IRModule {
        IRModule(ObjectRef::new(IRModuleObj {
            functions: self.0.functions.insert(name.to_string(), func),
            attrs: self.0.attrs.clone(),
        }))
    }

    /// A copy with attribute `key` set.
    pub fn with_attr(&self, key: &str, value: impl Into<Any>) -> IRModule {
        IRModule(ObjectRef::new(IRModuleObj {
            functions: self.0.functions.clone(),
            attrs: map_with(&self.0.attrs, key, value),
        }))
    }
}

impl fmt::Display for IRModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::printer::module_to_text(self))
    }
}
