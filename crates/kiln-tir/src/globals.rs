//! The global functions that let C and Python build, inspect, print, compare and simplify IR
//! (what a Python `kiln.tir` binds to, as TVM's `_ffi_api`). The list, with arguments, is in the
//! crate documentation.
//!
//! Node constructors (`tir.Add`, ...) build exactly the node asked for, with dtype checks; the
//! `tir._Op*` builders are TVM's operator functions (literal adaptation and constant folding).
//! Where Python passes a plain `int`/`float`/`bool` for an expression it becomes a constant
//! (`int32`, `float32`, `bool`).

use crate::arith::Analyzer;
use crate::buffer::Buffer;
use crate::expr::{try_build_binary, BinOp, PrimExpr, Var};
use crate::function::{IRModule, PrimFunc, Range};
use crate::mutator::{substitute, substitute_stmt};
use crate::node::{NodeList, NodeMap};
use crate::stmt::{ForKind, Stmt};
use crate::structural::{structural_equal_with, structural_hash_with};
use kiln_ffi::{
    register_global, register_global_packed, Any, AnyView, Array, DataType, Error, Map, Result,
};
use std::collections::HashMap;

/// Makes sure the registrations of this crate are linked into a library that depends on it
/// (call it from the library's `link_all`).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    // The pass globals (`transform.*`) live in another module: keep it linked too.
    std::hint::black_box(crate::transform::link_transform_globals());
    link_globals as *const ()
}

register_global!("tir.Var", |name: String, dtype: DataType| Var::new(
    &name, dtype
));
register_global!(
    "tir.SizeVar",
    |name: String, dtype: DataType| Var::size_var(&name, dtype)
);
register_global!("tir.IntImm", |dtype: DataType, value: i64| {
    PrimExpr::int_imm(dtype, value)
});
register_global!("tir.FloatImm", |dtype: DataType, value: f64| {
    PrimExpr::float_imm(dtype, value)
});
register_global!("tir.StringImm", |value: String| PrimExpr::string(&value));

macro_rules! binary_globals {
    ($($key:literal, $op_key:literal => $op:ident;)*) => {$(
        register_global!($key, |a: PrimExpr, b: PrimExpr| PrimExpr::try_binary(BinOp::$op, a, b));
        register_global!($op_key, |a: PrimExpr, b: PrimExpr| try_build_binary(BinOp::$op, a, b));
    )*};
}

binary_globals! {
    "tir.Add", "tir._OpAdd" => Add;
    "tir.Sub", "tir._OpSub" => Sub;
    "tir.Mul", "tir._OpMul" => Mul;
    "tir.Div", "tir._OpDiv" => Div;
    "tir.Mod", "tir._OpMod" => Mod;
    "tir.FloorDiv", "tir._OpFloorDiv" => FloorDiv;
    "tir.FloorMod", "tir._OpFloorMod" => FloorMod;
    "tir.Min", "tir._OpMin" => Min;
    "tir.Max", "tir._OpMax" => Max;
    "tir.EQ", "tir._OpEQ" => Eq;
    "tir.NE", "tir._OpNE" => Ne;
    "tir.LT", "tir._OpLT" => Lt;
    "tir.LE", "tir._OpLE" => Le;
    "tir.GT", "tir._OpGT" => Gt;
    "tir.GE", "tir._OpGE" => Ge;
    "tir.And", "tir._OpAnd" => And;
    "tir.Or", "tir._OpOr" => Or;
}

register_global!("tir.Not", |a: PrimExpr| PrimExpr::try_not(a));
register_global!("tir.Cast", |dtype: DataType, value: PrimExpr| {
    PrimExpr::try_cast(dtype, value)
});
register_global!("tir.Select", |c: PrimExpr, t: PrimExpr, f: PrimExpr| {
    PrimExpr::try_select(c, t, f)
});
register_global!("tir.Let", |var: Var, value: PrimExpr, body: PrimExpr| {
    PrimExpr::try_let(var, value, body)
});
register_global!(
    "tir.BufferLoad",
    |buffer: Buffer, indices: NodeList<PrimExpr>| {
        PrimExpr::try_buffer_load(buffer, indices.to_vec())
    }
);
register_global!("tir.Ramp", |base: PrimExpr,
                              stride: PrimExpr,
                              lanes: i64| {
    PrimExpr::try_ramp(base, stride, lanes)
});
register_global!("tir.Broadcast", |value: PrimExpr, lanes: i64| {
    PrimExpr::try_broadcast(value, lanes)
});
register_global!(
    "tir.Call",
    |dtype: DataType, op: String, args: NodeList<PrimExpr>| {
        PrimExpr::call(dtype, &op, args.to_vec())
    }
);

fn for_kind(k: i64) -> Result<ForKind> {
    ForKind::from_i64(k).ok_or_else(|| Error::value_error(format!("unknown ForKind {k}")))
}

fn map_or_empty(m: Option<Map>) -> Map {
    m.unwrap_or_else(|| Map::new(Vec::new()))
}

register_global!("tir.For", |loop_var: Var,
                             min: PrimExpr,
                             extent: PrimExpr,
                             kind: i64,
                             body: Stmt,
                             annotations: Option<Map>|
 -> Result<Stmt> {
    Stmt::try_for(
        loop_var,
        min,
        extent,
        for_kind(kind)?,
        body,
        map_or_empty(annotations),
    )
});
register_global!(
    "tir.BufferStore",
    |buffer: Buffer, value: PrimExpr, indices: NodeList<PrimExpr>| {
        Stmt::try_buffer_store(buffer, value, indices.to_vec())
    }
);
register_global!(
    "tir.Allocate",
    |buffer_var: Var,
     dtype: DataType,
     extents: NodeList<PrimExpr>,
     condition: PrimExpr,
     body: Stmt,
     annotations: Option<Map>,
     scope: Option<String>| {
        Stmt::try_allocate(
            buffer_var,
            dtype,
            extents.to_vec(),
            condition,
            body,
            map_or_empty(annotations),
            scope.as_deref().unwrap_or("global"),
        )
    }
);
register_global!("tir.DeclBuffer", |buffer: Buffer, body: Stmt| {
    Stmt::decl_buffer(buffer, body)
});
register_global!("tir.IfThenElse", |c: PrimExpr, t: Stmt, e: Option<Stmt>| {
    Stmt::try_if_then_else(c, t, e)
});
register_global!("tir.LetStmt", |var: Var, value: PrimExpr, body: Stmt| {
    Stmt::try_let(var, value, body)
});
register_global!("tir.SeqStmt", |seq: NodeList<Stmt>| Stmt::seq_raw(
    seq.to_vec()
));
register_global!(
    "tir.AttrStmt",
    |node: Any, key: String, value: PrimExpr, body: Stmt| { Stmt::attr(node, &key, value, body) }
);
register_global!(
    "tir.AssertStmt",
    |c: PrimExpr, message: PrimExpr, body: Stmt| { Stmt::try_assert(c, message, body) }
);
register_global!("tir.Evaluate", |value: PrimExpr| Stmt::evaluate(value));

fn arg<T: kiln_ffi::TryFromAny>(args: &[AnyView<'_>], i: usize, name: &str) -> Result<T> {
    args.get(i)
        .ok_or_else(|| Error::type_error(format!("tir.Buffer: missing argument #{i} ({name})")))?
        .try_as::<T>()
        .map_err(|e| e.context(format!("tir.Buffer argument #{i} ({name})")))
}

// Nine arguments: one more than typed functions take, so unpacked by hand.
register_global_packed!("tir.Buffer", |args: &[AnyView<'_>]| {
    if args.len() != 9 {
        return Err(Error::type_error(format!(
            "tir.Buffer(data, dtype, shape, strides, elem_offset, name, scope, data_alignment, \
             offset_factor) takes 9 arguments, got {}",
            args.len()
        )));
    }
    let b = Buffer::new(
        arg(args, 0, "data")?,
        arg(args, 1, "dtype")?,
        arg::<NodeList<PrimExpr>>(args, 2, "shape")?.to_vec(),
        arg::<NodeList<PrimExpr>>(args, 3, "strides")?.to_vec(),
        arg(args, 4, "elem_offset")?,
        &arg::<String>(args, 5, "name")?,
        &arg::<String>(args, 6, "scope")?,
        arg(args, 7, "data_alignment")?,
        arg(args, 8, "offset_factor")?,
    )?;
    Ok(b.into())
});
register_global!(
    "tir.decl_buffer",
    |shape: NodeList<PrimExpr>, dtype: DataType, name: String, scope: Option<String>| {
        Buffer::decl_in(
            &name,
            dtype,
            shape.to_vec(),
            scope.as_deref().unwrap_or("global"),
        )
    }
);
register_global!(
    "tir.PrimFunc",
    |params: NodeList<Var>,
     body: Stmt,
     ret_type: Option<DataType>,
     buffer_map: Option<NodeMap<Var, Buffer>>,
     attrs: Option<Map>| {
        PrimFunc::new(
            params.to_vec(),
            body,
            ret_type.unwrap_or(DataType::void()),
            buffer_map.map(|m| m.entries().to_vec()).unwrap_or_default(),
            map_or_empty(attrs),
        )
    }
);
register_global!("ir.IRModule", |functions: NodeMap<String, PrimFunc>| {
    IRModule::new(functions.entries().to_vec())
});
register_global!("ir.Range", |begin: PrimExpr,
                              end: PrimExpr|
 -> Result<Range> {
    let (b, e) = crate::expr::operands(begin, end)?;
    Ok(Range::new(b, e))
});
register_global!("ir.Range_from_min_extent", |min: PrimExpr,
                                              extent: PrimExpr|
 -> Result<Range> {
    let (m, e) = crate::expr::operands(min, extent)?;
    Ok(Range::from_min_extent(m, e))
});

register_global!("tir.AsText", |node: Any| crate::printer::any_to_text(
    &node.view()
));

register_global!("node.StructuralEqual", |a: Any,
                                          b: Any,
                                          assert_mode: bool,
                                          map_free_vars: bool|
 -> Result<bool> {
    let eq = structural_equal_with(&a, &b, map_free_vars);
    if !eq && assert_mode {
        return Err(Error::value_error(format!(
            "StructuralEqual check failed.\n--- lhs:\n{}\n--- rhs:\n{}",
            crate::printer::any_to_text(&a.view()),
            crate::printer::any_to_text(&b.view())
        )));
    }
    Ok(eq)
});
register_global!("node.StructuralHash", |a: Any, map_free_vars: bool| {
    structural_hash_with(&a, map_free_vars) as i64
});

fn analyzer(ranges: Option<NodeMap<Var, Range>>) -> Analyzer {
    let mut an = Analyzer::new();
    for (v, r) in ranges.iter().flat_map(|m| m.iter()) {
        an.bind(v, r);
    }
    an
}

register_global!(
    "arith.Simplify",
    |e: PrimExpr, ranges: Option<NodeMap<Var, Range>>| { analyzer(ranges).simplify(&e) }
);
register_global!(
    "arith.CanProve",
    |e: PrimExpr, ranges: Option<NodeMap<Var, Range>>| { analyzer(ranges).can_prove(&e) }
);
register_global!("arith.ConstIntBound", |e: PrimExpr,
                                         ranges: Option<
    NodeMap<Var, Range>,
>| {
    let b = analyzer(ranges).const_int_bound(&e);
    Array::new(vec![Any::from(b.min), Any::from(b.max)])
});
register_global!("tir.Simplify", |s: Stmt| Analyzer::new().simplify_stmt(&s));
register_global!("tir.Substitute", |node: Any,
                                    map: NodeMap<Var, PrimExpr>|
 -> Result<Any> {
    let m: HashMap<Var, PrimExpr> = map.entries().iter().cloned().collect();
    if let Some(e) = PrimExpr::from_any_strict(&node.view()) {
        return Ok(substitute(&e, &m).into());
    }
    match node.try_as::<Stmt>() {
        Ok(s) => Ok(substitute_stmt(&s, &m).into()),
        Err(_) => Err(Error::type_error(format!(
            "tir.Substitute needs a PrimExpr or Stmt, got `{}`",
            node.view().type_name()
        ))),
    }
});
register_global!("tir.analysis.UndefinedVars", |s: Stmt| {
    Array::new(
        crate::visitor::undefined_vars(&s)
            .into_iter()
            .map(Any::from)
            .collect(),
    )
});

#[cfg(test)]
mod tests {
    use kiln_ffi::{call, registry, Any, DataType};

    #[test]
    fn globals_build_and_check_ir() {
        let var = registry::get_required("tir.Var").unwrap();
        let x = call!(var, "x", DataType::int(32)).unwrap();
        let add = registry::get_required("tir.Add").unwrap();
        let e = call!(add, x.clone(), 1i64).unwrap();
        let text = registry::get_required("tir.AsText").unwrap();
        assert_eq!(
            call!(text, e.clone()).unwrap().try_as::<String>().unwrap(),
            "x + 1"
        );
        let f = call!(var, "f", DataType::float(32)).unwrap();
        let err = call!(add, x.clone(), f).unwrap_err();
        assert_eq!(err.kind(), "TypeError");
        let op_add = registry::get_required("tir._OpAdd").unwrap();
        let folded = call!(op_add, 2i64, 3i64).unwrap();
        assert_eq!(
            call!(text, folded).unwrap().try_as::<String>().unwrap(),
            "5"
        );
        let simplify = registry::get_required("arith.Simplify").unwrap();
        let sub = registry::get_required("tir.Sub").unwrap();
        let zero = call!(sub, e.clone(), e.clone()).unwrap();
        let s = call!(simplify, zero, Any::none()).unwrap();
        assert_eq!(call!(text, s).unwrap().try_as::<String>().unwrap(), "0");
        let eq = registry::get_required("node.StructuralEqual").unwrap();
        let y = call!(var, "y", DataType::int(32)).unwrap();
        let e2 = call!(add, y, 1i64).unwrap();
        assert!(!call!(eq, e.clone(), e2.clone(), false, false)
            .unwrap()
            .try_as::<bool>()
            .unwrap());
        assert!(call!(eq, e.clone(), e2, false, true)
            .unwrap()
            .try_as::<bool>()
            .unwrap());
    }
}
