//! Vector instructions of one width applied to longer vectors: each operand split into pieces
//! of the instruction's lanes, one call per piece, the results concatenated back (VNNI's
//! `vpdpbusd`, AVX-512's `vscalefps` on the 32-lane vectors of a two-register tile).

use super::CodeGen;
use crate::llvm::llvm_error;
use inkwell::types::VectorType;
use inkwell::values::{BasicValueEnum, VectorValue};
use kiln_ffi::Result;

impl<'a, 'ctx> CodeGen<'a, 'ctx> {
    /// `f` on the `piece`-lane pieces of `args` (vectors of `lanes` lanes, `piece` dividing
    /// it), the results concatenated in order; one call of `f` on `args` themselves when
    /// `piece == lanes`.
    pub(crate) fn in_pieces(
        &mut self,
        lanes: u32,
        piece: u32,
        args: &[BasicValueEnum<'ctx>],
        mut f: impl FnMut(&mut Self, &[BasicValueEnum<'ctx>]) -> Result<VectorValue<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let mut parts = Vec::new();
        for start in (0..lanes).step_by(piece as usize) {
            let mut cut = Vec::with_capacity(args.len());
            for &a in args {
                cut.push(self.lanes_of(a, start, piece, lanes)?);
            }
            parts.push(f(self, &cut)?);
        }
        // Pairwise concatenation back to the whole vector.
        while parts.len() > 1 {
            let mut next = Vec::with_capacity(parts.len() / 2);
            for pair in parts.chunks(2) {
                let w = pair[0].get_type().get_size() * 2;
                let mask: Vec<_> = (0..w)
                    .map(|i| self.abi.i32.const_int(i as u64, false))
                    .collect();
                let v = self
                    .b
                    .build_shuffle_vector(pair[0], pair[1], VectorType::const_vector(&mask), "cat")
                    .map_err(llvm_error)?;
                next.push(v);
            }
            parts = next;
        }
        Ok(parts.remove(0).into())
    }

    /// Lanes `start..start + n` of vector `v` (of `lanes` lanes); `v` itself when it is all.
    fn lanes_of(
        &mut self,
        v: BasicValueEnum<'ctx>,
        start: u32,
        n: u32,
        lanes: u32,
    ) -> Result<BasicValueEnum<'ctx>> {
        if n == lanes {
            return Ok(v);
        }
        let v = v.into_vector_value();
        let mask: Vec<_> = (start..start + n)
            .map(|i| self.abi.i32.const_int(i as u64, false))
            .collect();
        Ok(self
            .b
            .build_shuffle_vector(
                v,
                v.get_type().get_poison(),
                VectorType::const_vector(&mask),
                "part",
            )
            .map_err(llvm_error)?
            .into())
    }
}
