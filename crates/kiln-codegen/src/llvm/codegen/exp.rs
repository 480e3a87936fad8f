//! float32 `exp` where the CPU scales by a power of two in one instruction: AVX-512's
//! `vscalefps` computes `poly * 2^n` from [`kiln_tir::fast_math::exp_parts`] in place of the
//! shift that builds `2^n` in the exponent bits and the product (two vector operations of
//! about 18). Vectors whose width has no `vscalefps` (scalars, AVX2) keep
//! [`kiln_tir::fast_math::exp_with`]; both clamp the argument alike, so the results agree to
//! the rounding of the product. Both take `n` by a float subtraction unless the target allows
//! reassociation (`-fast-math`), which could fold it away.

use super::CodeGen;
use inkwell::values::BasicValueEnum;
use kiln_ffi::{DataType, Result};
use kiln_tir::{fast_math, PrimExpr};

/// The `vscalefps` intrinsic for vectors of `bits` bits, and whether it takes a rounding mode.
fn scalef(bits: u32) -> Option<(&'static str, bool)> {
    Some(match bits {
        512 => ("llvm.x86.avx512.mask.scalef.ps.512", true),
        256 => ("llvm.x86.avx512.mask.scalef.ps.256", false),
        128 => ("llvm.x86.avx512.mask.scalef.ps.128", false),
        _ => return None,
    })
}

/// `_MM_FROUND_CUR_DIRECTION`: the rounding mode of MXCSR.
const CURRENT_ROUNDING: u64 = 4;

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// The width in bits of the `vscalefps` pieces for float32 vectors of dtype `t`: the
    /// widest the CPU has that divides the vector; `None` when there is none or `t` is a
    /// scalar.
    fn scalef_bits(&self, t: DataType) -> Option<u32> {
        if !fast_math::is_f32(t) || t.lanes() < 4 {
            return None;
        }
        let bits = 32 * t.lanes() as u32;
        let cpu = self.target.cpu_desc();
        [512, 256, 128]
            .into_iter()
            .find(|&w| w <= cpu.vector_bits && bits.is_multiple_of(w) && cpu.has_scalef(w))
    }

    /// `e^x` for float32 `x` of dtype `t`: `vscalefps` on [`fast_math::exp_parts`] where the
    /// CPU has it for `t`'s vectors, [`fast_math::exp`] otherwise.
    pub(crate) fn fast_exp(&mut self, t: DataType, x: &PrimExpr) -> Result<BasicValueEnum<'ctx>> {
        // `n` by a float subtraction unless reassociation may fold it away.
        let float_n = !self.target.target.fast_math;
        let Some(piece) = self.scalef_bits(t) else {
            return self.expr(&fast_math::exp_with(x.clone(), float_n));
        };
        let (name, rounding) = scalef(piece).expect("a vscalefps width");
        let parts = fast_math::exp_parts(x.clone(), float_n);
        // Both parts share the clamped argument and `n`: LLVM's common subexpression
        // elimination keeps one of each.
        let poly = self.expr(&parts.poly)?;
        let n = self.expr(&parts.n)?;
        let piece_lanes = piece / 32;
        let mask = if piece_lanes == 16 {
            self.ctx.i16_type().const_all_ones()
        } else {
            self.ctx.i8_type().const_all_ones()
        };
        let round = self.ctx.i32_type().const_int(CURRENT_ROUNDING, false);
        self.in_pieces(t.lanes() as u32, piece_lanes, &[poly, n], |cg, p| {
            // All lanes selected: the pass-through operand is never read.
            let mut args = vec![p[0], p[1], p[0], mask.into()];
            if rounding {
                args.push(round.into());
            }
            cg.call_vector_intrinsic(name, &args)
        })
    }
}
