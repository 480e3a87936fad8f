//! Testing globals with the names and behaviour of TVM-FFI's (`testing.nop`, `testing.echo`,
//! `testing.add_one`, `testing.apply`, `testing.test_raise_error`), plus a reflected object type
//! (`kiln.testing.Node`) for reflection and serialization tests.

use crate::any::AnyView;
use crate::array::Array;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::{register_global, register_global_packed};
use kiln_macros::Object;

// As in TVM-FFI: `nop` ignores any arguments; `echo` returns its first one.
register_global_packed!(
    "testing.nop",
    |_args: &[AnyView<'_>]| Ok(crate::Any::none())
);
register_global_packed!("testing.echo", |args: &[AnyView<'_>]| {
    match args.first() {
        Some(a) => Ok(a.to_owned()),
        None => Err(crate::function::arity_error(
            "testing.echo",
            &["Any".into()],
            0,
        )),
    }
});
register_global!("testing.add_one", |x: i64| x + 1);
register_global_packed!("testing.apply", |args: &[AnyView<'_>]| {
    let f: Function = args
        .first()
        .ok_or_else(|| Error::type_error("testing.apply needs a function as its first argument"))?
        .try_as()
        .map_err(|e| e.context("testing.apply argument #0"))?;
    f.call(&args[1..])
});
register_global!("testing.test_raise_error", |kind: String,
                                              message: String|
 -> Result<()> {
    Err(Error::new(&kind, message))
});

/// A reflected test object: a named node with a value, a scale and children.
#[derive(Object)]
#[object(type_key = "kiln.testing.Node")]
#[repr(C)]
pub struct NodeObj {
    /// A name.
    pub name: String,
    /// An integer value.
    pub value: i64,
    /// A float value.
    pub scale: f64,
    /// Child nodes.
    pub children: Array,
}

register_global!(
    "kiln.testing.make_node",
    |name: String, value: i64, scale: f64, children: Array| {
        crate::ObjectRef::new(NodeObj {
            name,
            value,
            scale,
            children,
        })
    }
);

/// A reflected test object that extends `kiln.testing.Node` (for parent/child reflection).
#[derive(Object)]
#[object(type_key = "kiln.testing.TaggedNode", parent = NodeObj)]
#[repr(C)]
pub struct TaggedNodeObj {
    #[object(base)]
    /// The parent part.
    pub base: NodeObj,
    /// An optional tag.
    pub tag: Option<String>,
}

register_global!(
    "kiln.testing.make_tagged_node",
    |name: String, value: i64, tag: Option<String>| {
        crate::ObjectRef::new(TaggedNodeObj {
            base: NodeObj {
                name,
                value,
                scale: 1.0,
                children: Array::empty(),
            },
            tag,
        })
    }
);
