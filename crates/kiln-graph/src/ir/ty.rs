//! Types of graph expressions: tensors with a static shape and a dtype, and tuples of types.

use kiln_ffi::{DataType, Object, ObjectRef};
use kiln_tir::NodeList;
use std::fmt;

/// A tensor type (`graph.TensorType`): a static shape and an element type.
#[derive(Object)]
#[object(type_key = "graph.TensorType")]
#[repr(C)]
pub struct TensorTypeObj {
    /// The extents, outermost first (empty for a scalar).
    pub shape: NodeList<i64>,
    /// The element type.
    pub dtype: DataType,
}

/// A tuple type (`graph.TupleType`): what `split`, `batch_norm` and `Tuple` produce.
#[derive(Object)]
#[object(type_key = "graph.TupleType")]
#[repr(C)]
pub struct TupleTypeObj {
    /// The field types.
    pub fields: NodeList<Type>,
}

/// The type of a graph expression. Cheap to clone.
#[derive(Clone, ObjectRef)]
#[object_ref(type_name = "graph.Type")]
pub enum Type {
    /// A tensor.
    Tensor(ObjectRef<TensorTypeObj>),
    /// A tuple.
    Tuple(ObjectRef<TupleTypeObj>),
}

impl Type {
    /// A tensor type.
    pub fn tensor(shape: &[i64], dtype: DataType) -> Type {
        Type::Tensor(ObjectRef::new(TensorTypeObj {
            shape: shape.to_vec().into(),
            dtype,
        }))
    }

    /// A `float32` tensor type.
    pub fn f32(shape: &[i64]) -> Type {
        Type::tensor(shape, DataType::float(32))
    }

    /// A tuple type.
    pub fn tuple(fields: Vec<Type>) -> Type {
        Type::Tuple(ObjectRef::new(TupleTypeObj {
            fields: fields.into(),
        }))
    }

    /// The shape and dtype of a tensor type.
    pub fn as_tensor(&self) -> Option<(&[i64], DataType)> {
        match self {
            Type::Tensor(t) => Some((t.shape.as_slice(), t.dtype)),
            Type::Tuple(_) => None,
        }
    }

    /// The fields of a tuple type.
    pub fn as_tuple(&self) -> Option<&[Type]> {
        match self {
            Type::Tuple(t) => Some(t.fields.as_slice()),
            Type::Tensor(_) => None,
        }
    }

    /// The shape of a tensor type (empty for tuples).
    pub fn shape(&self) -> &[i64] {
        self.as_tensor().map(|t| t.0).unwrap_or(&[])
    }

    /// The dtype of a tensor type (`void` for tuples).
    pub fn dtype(&self) -> DataType {
        self.as_tensor().map(|t| t.1).unwrap_or(DataType::void())
    }
}

impl PartialEq for Type {
    fn eq(&self, other: &Type) -> bool {
        match (self, other) {
            (Type::Tensor(a), Type::Tensor(b)) => {
                a.shape.as_slice() == b.shape.as_slice() && a.dtype == b.dtype
            }
            (Type::Tuple(a), Type::Tuple(b)) => a.fields.as_slice() == b.fields.as_slice(),
            _ => false,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(t) => {
                let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
                let comma = if dims.len() == 1 { "," } else { "" };
                write!(f, "Tensor[({}{comma}), {}]", dims.join(", "), t.dtype)
            }
            Type::Tuple(t) => {
                let fields: Vec<String> = t.fields.iter().map(|x| x.to_string()).collect();
                write!(f, "({})", fields.join(", "))
            }
        }
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_relay() {
        assert_eq!(
            Type::f32(&[1, 64, 56, 56]).to_string(),
            "Tensor[(1, 64, 56, 56), float32]"
        );
        assert_eq!(Type::f32(&[3]).to_string(), "Tensor[(3,), float32]");
        let t = Type::tuple(vec![Type::f32(&[2]), Type::tensor(&[], DataType::int(64))]);
        assert_eq!(t.to_string(), "(Tensor[(2,), float32], Tensor[(), int64])");
    }
}
