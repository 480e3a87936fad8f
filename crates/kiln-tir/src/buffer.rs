//! `tir.Buffer`: a typed, shaped view of memory that loads and stores go through.
//!
//! A buffer names its memory by a `handle` variable (`data`); two buffers can view the same
//! memory. Indices are multi-dimensional until a flattening pass turns them into one offset
//! ([`Buffer::offset_of`]).

use crate::dtype::DataTypeExt;
use crate::expr::{PrimExpr, Var};
use crate::node::{ptr_key, IrString, NodeList};
use crate::stmt::Stmt;
use kiln_ffi::{DataType, Error, Object, ObjectRef, Result};
use std::fmt;
use std::hash::{Hash, Hasher};

/// Default alignment of buffer data, in bytes (TVM's `kAllocAlignment`).
pub const DEFAULT_ALIGNMENT: i64 = 64;

/// The buffer node (`tir.Buffer`).
#[derive(Object)]
#[object(type_key = "tir.Buffer")]
#[repr(C)]
pub struct BufferObj {
    /// The pointer to the memory (a `handle` variable).
    pub data: Var,
    /// The element type.
    pub dtype: DataType,
    /// The extent of each dimension.
    pub shape: NodeList<PrimExpr>,
    /// Element strides per dimension; empty means compact row-major.
    pub strides: NodeList<PrimExpr>,
    /// Offset of the first element from `data`, in elements.
    pub elem_offset: PrimExpr,
    /// The name used when printing.
    pub name: IrString,
    /// The storage scope: `"global"`, `"local"`, `"shared"`, ...
    pub scope: IrString,
    /// Alignment of `data` in bytes.
    pub data_alignment: i64,
    /// `elem_offset` is a multiple of this (1 when nothing is known).
    pub offset_factor: i64,
}

/// A buffer handle. Equality and hashing are by identity.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display)]
pub struct Buffer(ObjectRef<BufferObj>);

impl Buffer {
    /// A buffer with every field given; checks that `data` is a handle, that `shape`, `strides`
    /// and `elem_offset` are integers, and that `strides` is empty or has one entry per
    /// dimension.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        data: Var,
        dtype: DataType,
        shape: Vec<PrimExpr>,
        strides: Vec<PrimExpr>,
        elem_offset: PrimExpr,
        name: &str,
        scope: &str,
        data_alignment: i64,
        offset_factor: i64,
    ) -> Result<Buffer> {
        if !data.dtype().is_handle() {
            return Err(Error::type_error(format!(
                "tir.Buffer `{name}`: data must be a handle variable, got {}",
                data.dtype()
            )));
        }
        for (what, list) in [("shape", &shape), ("strides", &strides)] {
            if let Some(bad) = list
                .iter()
                .find(|e| !e.dtype().is_integer() || e.dtype().is_vector())
            {
                return Err(Error::type_error(format!(
                    "tir.Buffer `{name}`: {what} entries must be scalar integers, got {bad} of type {}",
                    bad.dtype()
                )));
            }
        }
        if !strides.is_empty() && strides.len() != shape.len() {
            return Err(Error::value_error(format!(
                "tir.Buffer `{name}`: {} strides for {} dimensions",
                strides.len(),
                shape.len()
            )));
        }
        if !elem_offset.dtype().is_integer() {
            return Err(Error::type_error(format!(
                "tir.Buffer `{name}`: elem_offset must be an integer, got {}",
                elem_offset.dtype()
            )));
        }
        Ok(Buffer(ObjectRef::new(BufferObj {
            data,
            dtype,
            shape: shape.into(),
            strides: strides.into(),
            elem_offset,
            name: name.into(),
            scope: scope.into(),
            data_alignment: if data_alignment <= 0 {
                DEFAULT_ALIGNMENT
            } else {
                data_alignment
            },
            offset_factor: offset_factor.max(1),
        })))
    }

    /// A compact row-major buffer in global memory with a fresh data variable named `name`
    /// (TVM's `decl_buffer`).
    ///
    /// # Panics
    /// When a shape entry is not an integer.
    pub fn decl(name: &str, dtype: DataType, shape: Vec<PrimExpr>) -> Buffer {
        Buffer::decl_in(name, dtype, shape, "global")
    }

    /// As [`Buffer::decl`], in storage scope `scope`.
    ///
    /// # Panics
    /// When a shape entry is not an integer.
    pub fn decl_in(name: &str, dtype: DataType, shape: Vec<PrimExpr>, scope: &str) -> Buffer {
        let index_t = shape
            .first()
            .map(|s| s.dtype())
            .unwrap_or(DataType::int(32));
        Buffer::new(
            Var::handle(name),
            dtype,
            shape,
            Vec::new(),
            PrimExpr::const_int(index_t, 0),
            name,
            scope,
            DEFAULT_ALIGNMENT,
            1,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The data pointer variable.
    pub fn data(&self) -> &Var {
        &self.0.data
    }
    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.0.dtype
    }
    /// The dimensions.
    pub fn shape(&self) -> &[PrimExpr] {
        &self.0.shape
    }
    /// The strides (empty: compact row-major).
    pub fn strides(&self) -> &[PrimExpr] {
        &self.0.strides
    }
    /// The element offset.
    pub fn elem_offset(&self) -> &PrimExpr {
        &self.0.elem_offset
    }
    /// The name.
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// The storage scope.
    pub fn scope(&self) -> &str {
        &self.0.scope
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    /// A copy with other fields (for passes that rewrite buffers); unchanged fields are shared.
    pub fn with_shape(&self, shape: Vec<PrimExpr>, strides: Vec<PrimExpr>) -> Result<Buffer> {
        Buffer::new(
            self.data().clone(),
            self.dtype(),
            shape,
            strides,
            self.elem_offset().clone(),
            self.name(),
            self.scope(),
            self.0.data_alignment,
            self.0.offset_factor,
        )
    }

    /// A copy that views the memory of `data` instead (for passes that merge or rebind memory).
    pub fn with_data(&self, data: &Var) -> Buffer {
        Buffer(ObjectRef::new(BufferObj {
            data: data.clone(),
            dtype: self.0.dtype,
            shape: self.0.shape.clone(),
            strides: self.0.strides.clone(),
            elem_offset: self.0.elem_offset.clone(),
            name: self.0.name.clone(),
            scope: self.0.scope.clone(),
            data_alignment: self.0.data_alignment,
            offset_factor: self.0.offset_factor,
        }))
    }

    /// Checks the indices of a load or store: one integer index per dimension.
    pub(crate) fn check_indices(&self, what: &str, indices: &[PrimExpr]) -> Result<()> {
        if indices.len() != self.ndim() {
            return Err(Error::value_error(format!(
                "{what} of `{}`: {} indices for {} dimensions",
                self.name(),
                indices.len(),
                self.ndim()
            )));
        }
        if let Some(bad) = indices.iter().find(|i| !i.dtype().is_integer()) {
            return Err(Error::type_error(format!(
                "{what} of `{}`: indices must be integers, got {bad} of type {}",
                self.name(),
                bad.dtype()
            )));
        }
        Ok(())
    }

    /// `self[indices]`.
    ///
    /// # Panics
    /// On a wrong number of indices or non-integer indices.
    pub fn load(&self, indices: Vec<PrimExpr>) -> PrimExpr {
        PrimExpr::try_buffer_load(self.clone(), indices).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `self[indices] = value`.
    ///
    /// # Panics
    /// On wrong indices or a value whose type is not the buffer's.
    pub fn store(&self, value: impl Into<crate::expr::Operand>, indices: Vec<PrimExpr>) -> Stmt {
        Stmt::try_buffer_store(self.clone(), value, indices).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The flat element offset of `indices`: `elem_offset + sum(index_k * stride_k)`, with
    /// row-major strides from the shape when `strides` is empty. Constants fold; call the
    /// simplifier for more.
    ///
    /// # Panics
    /// When the indices' integer type differs from the shape's (cast them first).
    pub fn offset_of(&self, indices: &[PrimExpr]) -> PrimExpr {
        let mut offset: Option<PrimExpr> = None;
        if self.strides().is_empty() {
            for (k, idx) in indices.iter().enumerate() {
                offset = Some(match offset {
                    None => idx.clone(),
                    Some(acc) => acc * &self.shape()[k] + idx,
                });
            }
        } else {
            for (idx, stride) in indices.iter().zip(self.strides()) {
                let term = idx * stride;
                offset = Some(match offset {
                    None => term,
                    Some(acc) => acc + term,
                });
            }
        }
        match offset {
            None => self.elem_offset().clone(),
            Some(o) => o + self.elem_offset(),
        }
    }
}

impl PartialEq for Buffer {
    fn eq(&self, other: &Buffer) -> bool {
        self.same_as(other)
    }
}
impl Eq for Buffer {}
impl Hash for Buffer {
    fn hash<H: Hasher>(&self, state: &mut H) {
        ptr_key(&self.0).hash(state)
    }
}

impl fmt::Display for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::printer::buffer_decl_text(self))
    }
}
