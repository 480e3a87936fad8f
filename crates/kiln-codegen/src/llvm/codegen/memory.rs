//! Memory accesses of expressions: element addresses, their alignment, and buffer loads
//! (vector loads for unit-stride ramps, one span and a shuffle for small strides, gathers
//! otherwise; under a mask, masked loads, or whole vectors inside stack arrays).

use super::{pow2_align, CodeGen};
use crate::llvm::llvm_error;
use crate::lower_common::unit_stride_base;
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValue, BasicValueEnum, PointerValue, VectorValue};
use inkwell::IntPredicate;
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::{BinOp, Buffer, DataTypeExt, ExprKind, PrimExpr};

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// The address of element `index` (a scalar) of `buffer`.
    pub(crate) fn element_ptr(
        &mut self,
        buffer: &Buffer,
        index: BasicValueEnum<'ctx>,
        index_t: DataType,
    ) -> Result<PointerValue<'ctx>> {
        self.element_address(buffer, index, index_t, true)
    }

    /// [`Self::element_ptr`] without LLVM's in-bounds promise: a masked access may start
    /// before the buffer (its first lanes masked off), where an in-bounds address would be
    /// poison.
    pub(crate) fn unchecked_element_ptr(
        &mut self,
        buffer: &Buffer,
        index: BasicValueEnum<'ctx>,
        index_t: DataType,
    ) -> Result<PointerValue<'ctx>> {
        self.element_address(buffer, index, index_t, false)
    }

    fn element_address(
        &mut self,
        buffer: &Buffer,
        index: BasicValueEnum<'ctx>,
        index_t: DataType,
        in_bounds: bool,
    ) -> Result<PointerValue<'ctx>> {
        let data = self.var_value(buffer.data())?;
        let BasicValueEnum::PointerValue(data) = data else {
            return Err(Error::type_error(format!(
                "buffer `{}`: its data `{}` is not a pointer",
                buffer.name(),
                buffer.data().name()
            )));
        };
        let mut off = self.cast(index_t, DataType::int(64), index)?;
        let eo = buffer.elem_offset();
        if !eo.is_const_int(0) {
            let eov = self.expr(eo)?;
            let eov = self.cast(eo.dtype(), DataType::int(64), eov)?;
            off = if in_bounds {
                on_int!(off, eov, |x, y| self.b.build_int_nsw_add(x, y, "off"))?
            } else {
                on_int!(off, eov, |x, y| self.b.build_int_add(x, y, "off"))?
            };
        }
        let elem = self.memory_type(buffer.dtype())?;
        let off = [off.into_int_value()];
        // SAFETY: with `in_bounds`, a promise to LLVM that this is an element of the buffer;
        // without, plain address arithmetic (only masked lanes read it).
        unsafe {
            if in_bounds {
                self.b.build_in_bounds_gep(elem, data, &off, "elem")
            } else {
                self.b.build_gep(elem, data, &off, "elem")
            }
        }
        .map_err(llvm_error)
    }

    /// The alignment of an access of `bytes` bytes at `index` of `buffer`.
    pub(crate) fn access_align(&self, buffer: &Buffer, index: &PrimExpr, elem_bytes: i64) -> u32 {
        let cap = buffer_alignment(buffer);
        let mut factor = known_factor(index);
        if !buffer.elem_offset().is_const_int(0) {
            factor = 1;
        }
        pow2_align(factor.saturating_mul(elem_bytes), cap).max(1)
    }

    /// The plain load of `mem_t` (one element or a whole vector) from scalar index `base` of
    /// `buffer`, aligned as the index allows; also its address and alignment.
    pub(crate) fn load_at(
        &mut self,
        buffer: &Buffer,
        base: &PrimExpr,
        mem_t: DataType,
    ) -> Result<(BasicValueEnum<'ctx>, PointerValue<'ctx>, u32)> {
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 * elem_t.lanes() as i64 + 7) / 8;
        let i = self.expr(base)?;
        let p = self.element_ptr(buffer, i, base.dtype())?;
        let align = self.access_align(buffer, base, elem_bytes);
        Ok((self.load(mem_t, p, align)?, p, align))
    }

    pub(crate) fn buffer_load(
        &mut self,
        buffer: &Buffer,
        indices: &[PrimExpr],
        t: DataType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let [index] = indices else {
            return Err(Error::value_error(format!(
                "buffer `{}` is loaded with {} indices: code generation needs flat (1-D) \
                 accesses (run StorageFlatten first)",
                buffer.name(),
                indices.len()
            )));
        };
        let elem_t = buffer.dtype();
        let lanes = index.dtype().lanes();
        let mem_t = buffer.dtype().with_lanes(elem_t.lanes() * lanes);
        let value_t = t;
        let stack_base = unit_stride_base(index)
            .filter(|b| self.mask.is_some() && self.within_stack_array(buffer, b, lanes as i64));
        let raw = if let (Some(mask), Some(base)) = (self.mask, stack_base) {
            // Inside a stack array: the whole vector, the lanes not chosen zeroed.
            let (v, _, _) = self.load_at(buffer, base, mem_t)?;
            let zero = const_zero(v.get_type());
            self.b
                .build_select(mask, v, zero, "lanes")
                .map_err(llvm_error)?
        } else if let (Some(mask), true) = (self.mask, lanes > 1) {
            self.masked_load(buffer, index, mem_t, mask)?
        } else if let Some(base) = (lanes == 1).then_some(index).or(unit_stride_base(index)) {
            let (v, _, _) = self.load_at(buffer, base, mem_t)?;
            self.tag_access(v.as_instruction_value(), buffer);
            v
        } else if let Some((base, stride)) = small_stride(index, elem_t) {
            self.span_load(buffer, base, stride, mem_t, None)?
        } else {
            self.gather(buffer, index, mem_t)?
        };
        if value_t.element_of().is_bool() {
            let zero = self.const_int(DataType::int(8).with_lanes(mem_t.lanes()), 0)?;
            return on_int!(raw, zero, |x, y| self.b.build_int_compare(
                IntPredicate::NE,
                x,
                y,
                "b"
            ));
        }
        Ok(raw)
    }

    pub(crate) fn load(
        &mut self,
        mem_t: DataType,
        p: PointerValue<'ctx>,
        align: u32,
    ) -> Result<BasicValueEnum<'ctx>> {
        let ty = self.memory_type(mem_t)?;
        let v = self.b.build_load(ty, p, "ld").map_err(llvm_error)?;
        if let Some(i) = v.as_instruction_value() {
            let _ = i.set_alignment(align);
        }
        Ok(v)
    }

    /// The load of a ramp with a small constant stride `s` (`ramp(base, s, n)`): one contiguous
    /// load of the `(n - 1) * s + 1` elements it spans, then a shuffle picking every `s`-th
    /// (vector code for stride-2 pooling and convolution windows, where loads of single
    /// lanes were several times slower). Nothing past the last element addressed is read.
    /// With `mask`, only the elements of its lanes are read (a masked load of the span, the
    /// mask spread to the elements picked); the other lanes are zero.
    fn span_load(
        &mut self,
        buffer: &Buffer,
        base: &PrimExpr,
        stride: u32,
        mem_t: DataType,
        mask: Option<VectorValue<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let lanes = mem_t.lanes() as u32;
        let span = (lanes - 1) * stride + 1;
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 + 7) / 8;
        let i = self.expr(base)?;
        let align = self.access_align(buffer, base, elem_bytes);
        let wide_t = elem_t.with_lanes(span as u16);
        let wide = match mask {
            None => {
                let p = self.element_ptr(buffer, i, base.dtype())?;
                let v = self.load(wide_t, p, align)?;
                self.tag_access(v.as_instruction_value(), buffer);
                v
            }
            Some(mask) => {
                let p = self.unchecked_element_ptr(buffer, i, base.dtype())?;
                let span_mask = if stride == 1 {
                    mask
                } else {
                    // Element k of the span is read when it is some kept lane's (k = j * s).
                    let spread: Vec<_> = (0..span)
                        .map(|k| {
                            let j = if k % stride == 0 { k / stride } else { lanes };
                            self.abi.i32.const_int(u64::from(j), false)
                        })
                        .collect();
                    let off = self.ctx.bool_type().vec_type(lanes).const_zero();
                    self.b
                        .build_shuffle_vector(
                            mask,
                            off,
                            VectorType::const_vector(&spread),
                            "spread",
                        )
                        .map_err(llvm_error)?
                };
                let vt = self.memory_type(wide_t)?;
                let a = self.abi.i32.const_int(u64::from(align), false);
                let args = [p.into(), a.into(), span_mask.into(), const_zero(vt)];
                self.masked_intrinsic("llvm.masked.load", &[vt, p.get_type().into()], &args)?
            }
        };
        if stride == 1 {
            return Ok(wide);
        }
        let wide = wide.into_vector_value();
        let pick: Vec<_> = (0..lanes)
            .map(|k| self.abi.i32.const_int(u64::from(k * stride), false))
            .collect();
        let v = self
            .b
            .build_shuffle_vector(
                wide,
                wide.get_type().get_poison(),
                VectorType::const_vector(&pick),
                "strided",
            )
            .map_err(llvm_error)?;
        Ok(v.into())
    }

    /// The load of vector index `index` for the lanes of `mask` only (the others are zero and
    /// their addresses are not touched): one masked contiguous load for a unit-stride ramp, a
    /// masked load of the span of a small-stride ramp (its mask spread to the lanes read),
    /// else a masked gather.
    fn masked_load(
        &mut self,
        buffer: &Buffer,
        index: &PrimExpr,
        mem_t: DataType,
        mask: VectorValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 + 7) / 8;
        let lanes = mem_t.lanes() as u32;
        let (base, stride) = match (unit_stride_base(index), small_stride(index, elem_t)) {
            (Some(b), _) if elem_t.lanes() == 1 => (b, 1),
            (_, Some((b, s))) => (b, s),
            _ => {
                let iv = self.expr(index)?.into_vector_value();
                let it = index.dtype();
                let mut ptrs = self.abi.ptr.vec_type(lanes).get_poison();
                for k in 0..lanes {
                    let kk = self.abi.i32.const_int(u64::from(k), false);
                    let i = self
                        .b
                        .build_extract_element(iv, kk, "idx")
                        .map_err(llvm_error)?;
                    let p = self.unchecked_element_ptr(buffer, i, it.element_of())?;
                    ptrs = self
                        .b
                        .build_insert_element(ptrs, p, kk, "ptrs")
                        .map_err(llvm_error)?;
                }
                let align = pow2_align(elem_bytes, buffer_alignment(buffer));
                let vt = self.memory_type(mem_t)?;
                let a = self.abi.i32.const_int(u64::from(align), false);
                return self.masked_intrinsic(
                    "llvm.masked.gather",
                    &[vt, ptrs.get_type().into()],
                    &[ptrs.into(), a.into(), mask.into(), const_zero(vt)],
                );
            }
        };
        self.span_load(buffer, base, stride, mem_t, Some(mask))
    }

    /// A call of the masked memory intrinsic `name` declared for `types`, returning its value.
    fn masked_intrinsic(
        &mut self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        self.call_intrinsic(name, types, args)?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::runtime_error(format!("`{name}` returned no value")))
    }

    /// The scalar index of each lane of vector index `index`. A ramp's are its base plus a
    /// multiple of its stride, in scalar arithmetic that address modes absorb (a constant
    /// stride becomes each load's displacement); any other vector index is computed whole and
    /// its lanes extracted. A transpose's strided reads took four instructions a lane through
    /// the vector index (broadcast, add, extract, sign-extend) before their loads.
    pub(crate) fn lane_indices(&mut self, index: &PrimExpr) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let lanes = index.dtype().lanes() as u64;
        if let ExprKind::Ramp { base, stride, .. } = index.kind() {
            let b = self.expr(base)?.into_int_value();
            let st = self.expr(stride)?.into_int_value();
            let mut out = Vec::with_capacity(lanes as usize);
            for k in 0..lanes {
                let kk = st.get_type().const_int(k, false);
                let off = self
                    .b
                    .build_int_nsw_mul(st, kk, "lane")
                    .map_err(llvm_error)?;
                let i = self
                    .b
                    .build_int_nsw_add(b, off, "idx")
                    .map_err(llvm_error)?;
                out.push(i.into());
            }
            return Ok(out);
        }
        let iv = self.expr(index)?.into_vector_value();
        (0..lanes)
            .map(|k| {
                let kk = self.abi.i32.const_int(k, false);
                self.b
                    .build_extract_element(iv, kk, "idx")
                    .map_err(llvm_error)
            })
            .collect()
    }

    /// A load of each lane of a vector index.
    fn gather(
        &mut self,
        buffer: &Buffer,
        index: &PrimExpr,
        mem_t: DataType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let it = index.dtype();
        let elem_t = buffer.dtype();
        let elem_bytes = (elem_t.bits() as i64 + 7) / 8;
        let mut acc = self.memory_type(mem_t)?.into_vector_type().get_poison();
        for (k, i) in self.lane_indices(index)?.into_iter().enumerate() {
            let kk = self.abi.i32.const_int(k as u64, false);
            let p = self.element_ptr(buffer, i, it.element_of())?;
            let align = pow2_align(elem_bytes, buffer_alignment(buffer));
            let v = self.load(elem_t, p, align)?;
            self.tag_access(v.as_instruction_value(), buffer);
            acc = self
                .b
                .build_insert_element(acc, v, kk, "gather")
                .map_err(llvm_error)?;
        }
        Ok(acc.into())
    }
}

/// The alignment the buffer's data is known to have (64 bytes unless the buffer says less).
pub(crate) fn buffer_alignment(buffer: &Buffer) -> i64 {
    let a = buffer.object().data_alignment;
    if a <= 0 {
        64
    } else {
        a.min(64)
    }
}

/// The base and stride of a ramp index with a constant stride from 2 to [`MAX_LOAD_STRIDE`]
/// over scalar elements, whose span is loaded whole by [`CodeGen::span_load`].
fn small_stride(index: &PrimExpr, elem_t: DataType) -> Option<(&PrimExpr, u32)> {
    let ExprKind::Ramp { base, stride, .. } = index.kind() else {
        return None;
    };
    let s = stride.as_int()?;
    (elem_t.lanes() == 1 && (2..=MAX_LOAD_STRIDE).contains(&s)).then_some((base, s as u32))
}

/// The largest ramp stride loaded as one span and a shuffle (VectorizeLoop masks loads up to
/// it); wider strides load each lane (a span of more than four times the vector costs more
/// than the single loads save).
const MAX_LOAD_STRIDE: i64 = kiln_tir::transform::vectorize_loop::MAX_MASKED_STRIDE;

/// The zero of vector type `t` (a masked load's value in the lanes it does not read).
fn const_zero(t: BasicTypeEnum<'_>) -> BasicValueEnum<'_> {
    t.into_vector_type().const_zero().into()
}

/// The multiple an integer expression is known to be (0: it is zero, any multiple).
pub fn known_factor(e: &PrimExpr) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a.abs()
        } else {
            gcd(b, a % b)
        }
    }
    match e.kind() {
        ExprKind::IntImm(v) => v.saturating_abs(),
        ExprKind::Binary(BinOp::Mul, a, b) => known_factor(a).saturating_mul(known_factor(b)),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => gcd(known_factor(a), known_factor(b)),
        ExprKind::Cast(v) if v.dtype().is_integer() => known_factor(v),
        ExprKind::Ramp { base, .. } => known_factor(base),
        _ => 1,
    }
}
