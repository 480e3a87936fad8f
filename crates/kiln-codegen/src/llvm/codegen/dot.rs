//! Integer dot products: `tir.dot4_u8s8` (four `uint8 x int8` products summed per int32 lane)
//! as VNNI's `vpdpbusd` where the CPU description has it for the vector's width, the plain
//! arithmetic of [`kiln_tir::op::dot4_u8s8_expanded`] elsewhere; and `acc + dot4_u8s8(a, b)`
//! as one `vpdpbusd` with `acc` as its accumulator.

use super::CodeGen;
use inkwell::values::BasicValueEnum;
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::expr::ExprKind;
use kiln_tir::{op, DataTypeExt, PrimExpr};

/// The LLVM intrinsic for `vpdpbusd` on vectors of `bits` bits.
fn vpdpbusd(bits: u32) -> Option<&'static str> {
    Some(match bits {
        512 => "llvm.x86.avx512.vpdpbusd.512",
        256 => "llvm.x86.avx512.vpdpbusd.256",
        128 => "llvm.x86.avx512.vpdpbusd.128",
        _ => return None,
    })
}

/// `(a, b)` when `e` is `tir.dot4_u8s8(a, b)`.
fn as_dot4(e: &PrimExpr) -> Option<(&PrimExpr, &PrimExpr)> {
    match e.kind() {
        ExprKind::Call { op: name, args } if name == op::DOT4_U8S8 => Some((&args[0], &args[1])),
        _ => None,
    }
}

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// `tir.dot4_u8s8(a, b)` of dtype `t`.
    pub(crate) fn dot4_u8s8(
        &mut self,
        t: DataType,
        a: &PrimExpr,
        b: &PrimExpr,
    ) -> Result<BasicValueEnum<'ctx>> {
        if self.has_vpdpbusd(t) {
            let zero = self.const_int(t, 0)?;
            return self.vpdpbusd_call(t, zero, a, b);
        }
        let e = op::dot4_u8s8_expanded(a, b);
        self.expr(&e)
    }

    /// `x + y` as one `vpdpbusd` when one side is a `tir.dot4_u8s8` the CPU has an
    /// instruction for; `None` otherwise (the caller adds as usual).
    pub(crate) fn fused_dot4_add(
        &mut self,
        t: DataType,
        x: &PrimExpr,
        y: &PrimExpr,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        if !self.has_vpdpbusd(t) {
            return Ok(None);
        }
        let (acc, (a, b)) = match (as_dot4(x), as_dot4(y)) {
            (_, Some(d)) => (x, d),
            (Some(d), None) => (y, d),
            (None, None) => return Ok(None),
        };
        let acc = self.expr(acc)?;
        self.vpdpbusd_call(t, acc, a, b).map(Some)
    }

    /// The width in bits of the `vpdpbusd` pieces for int32 vectors of dtype `t`: the widest
    /// the CPU has that divides the vector (a vector of two blocks is two instructions);
    /// `None` when there is none.
    fn vpdpbusd_bits(&self, t: DataType) -> Option<u32> {
        if t.element_of() != DataType::int(32) || t.lanes() < 4 {
            return None;
        }
        let bits = 32 * t.lanes() as u32;
        let cpu = self.target.cpu_desc();
        [512, 256, 128]
            .into_iter()
            .find(|&w| bits.is_multiple_of(w) && cpu.has_dot4_u8s8(w))
    }

    /// Whether int32 vectors of dtype `t` have `vpdpbusd` on this CPU.
    fn has_vpdpbusd(&self, t: DataType) -> bool {
        self.vpdpbusd_bits(t).is_some()
    }

    /// `vpdpbusd(acc, a, b)` on int32 vectors of dtype `t`, in pieces of the widest width the
    /// CPU has.
    fn vpdpbusd_call(
        &mut self,
        t: DataType,
        acc: BasicValueEnum<'ctx>,
        a: &PrimExpr,
        b: &PrimExpr,
    ) -> Result<BasicValueEnum<'ctx>> {
        let piece = self.vpdpbusd_bits(t).expect("checked by has_vpdpbusd");
        let name = vpdpbusd(piece).expect("a vpdpbusd width");
        let lanes = t.lanes() as u32;
        if a.dtype().lanes() as u32 != lanes || b.dtype().lanes() as u32 != lanes {
            return Err(Error::type_error(format!(
                "{}: operands {} and {} do not have the result's {lanes} lanes",
                op::DOT4_U8S8,
                a.dtype(),
                b.dtype()
            )));
        }
        let (va, vb) = (self.expr(a)?, self.expr(b)?);
        self.in_pieces(lanes, piece / 32, &[acc, va, vb], |cg, p| {
            cg.call_vector_intrinsic(name, p)
        })
    }
}
