//! Global functions that every Kiln library registers: containers (`ffi.Array`, `ffi.Map`,
//! `ffi.Shape`, with TVM-FFI's names), registry listing, and reflection (`kiln.ffi.*`) for C and
//! Python.

use crate::any::{Any, AnyView};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::map::Map;
use crate::object::{Object, ObjectRef};
use crate::shape::Shape;
use crate::{reflection, register_global, register_global_packed, registry};

fn owned_args(args: &[AnyView<'_>]) -> Vec<Any> {
    args.iter().map(|a| a.to_owned()).collect()
}

register_global_packed!("ffi.Array", |args: &[AnyView<'_>]| Ok(Array::new(
    owned_args(args)
)
.into()));
register_global!("ffi.ArraySize", |a: Array| a.len() as i64);
register_global!("ffi.ArrayGetItem", |a: Array, i: i64| -> Result<Any> {
    let n = a.len() as i64;
    let j = if i < 0 { i + n } else { i };
    if j < 0 || j >= n {
        return Err(Error::index_error(format!(
            "array index {i} out of range for length {n}"
        )));
    }
    Ok(a.get(j as usize)?.to_owned())
});

register_global_packed!("ffi.Map", |args: &[AnyView<'_>]| {
    if !args.len().is_multiple_of(2) {
        return Err(Error::value_error(format!(
            "ffi.Map takes key, value pairs but got {} arguments",
            args.len()
        )));
    }
    Ok(Map::new(
        args.chunks(2)
            .map(|kv| (kv[0].to_owned(), kv[1].to_owned())),
    )
    .into())
});
register_global!("ffi.MapSize", |m: Map| m.len() as i64);
register_global!("ffi.MapGetItem", |m: Map, k: Any| -> Result<Any> {
    Ok(m.at(k)?.to_owned())
});
register_global!("ffi.MapCount", |m: Map, k: Any| m.get(k).is_some() as i64);
register_global!("ffi.MapItems", |m: Map| -> Array {
    m.iter()
        .flat_map(|(k, v)| [k.to_owned(), v.to_owned()])
        .collect()
});

register_global_packed!("ffi.Shape", |args: &[AnyView<'_>]| {
    let dims = args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            a.try_as::<i64>()
                .map_err(|e| e.context(format!("ffi.Shape argument #{i}")))
        })
        .collect::<Result<Vec<i64>>>()?;
    Ok(Shape::new(&dims).into())
});

register_global!("ffi.FunctionListGlobalNamesFunctor", || {
    let names = registry::names();
    Function::from_typed(move |i: i64| -> Any {
        if i < 0 {
            Any::from(names.len() as i64)
        } else {
            names
                .get(i as usize)
                .map(|s| Any::from(s.as_str()))
                .unwrap_or_default()
        }
    })
});
register_global!("ffi.FunctionRemoveGlobal", |name: String| registry::remove(
    &name
));

register_global!("kiln.ffi.TypeIndexToKey", |index: i64| -> Result<String> {
    crate::type_registry::entry(index as i32)
        .map(|e| e.key.to_string())
        .ok_or_else(|| Error::value_error(format!("no type has index {index}")))
});
register_global!(
    "kiln.ffi.ObjectFieldNames",
    |obj: ObjectRef<Object>| -> Array { reflection::field_names(&obj).into_iter().collect() }
);
register_global!(
    "kiln.ffi.ObjectGetField",
    |obj: ObjectRef<Object>, name: String| { reflection::get_field_by_name(&obj, &name) }
);
register_global!("kiln.ffi.ObjectRepr", |v: Any| reflection::repr_value(
    &v.view()
));
#[cfg(feature = "json")]
register_global!("kiln.ffi.ToJSON", |v: Any| crate::json::to_json(&v.view()));
#[cfg(feature = "json")]
register_global!("kiln.ffi.FromJSON", |text: String| crate::json::from_json(
    &text
));
register_global!("kiln.ffi.StructuralEqual", |a: Any, b: Any| {
    reflection::structural_equal(&a.view(), &b.view())
});
register_global_packed!("kiln.ffi.MakeObject", |args: &[AnyView<'_>]| {
    // (type_key, name0, value0, name1, value1, ...)
    let key: String = args
        .first()
        .ok_or_else(|| Error::type_error("kiln.ffi.MakeObject needs a type key"))?
        .try_as()?;
    if args.len().is_multiple_of(2) {
        return Err(Error::value_error(
            "kiln.ffi.MakeObject takes a type key then name, value pairs",
        ));
    }
    let values = args[1..]
        .chunks(2)
        .map(|kv| Ok((kv[0].try_as::<String>()?, kv[1].to_owned())))
        .collect::<Result<Vec<_>>>()?;
    reflection::create_object(&key, values)
});
register_global!("kiln.ffi.LiveObjectCount", crate::object::live_object_count);
