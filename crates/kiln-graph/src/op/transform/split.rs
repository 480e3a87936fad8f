//! `split(data, sections | indices, axis=0)`: a tuple of pieces along `axis`, either
//! `sections` equal parts or cut at `indices` (exactly one of them set).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::input;
use crate::op::{normalize_axis, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use kiln_ffi::Result;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::transform as tf;

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, d) = ctx.tensor(0)?;
    let axis = normalize_axis(ctx.attrs.int("axis")?, s.len()).map_err(|m| ctx.err(m))?;
    let n = s[axis];
    let bounds: Vec<i64> = match (
        ctx.attrs.opt_int("sections")?,
        ctx.attrs.opt_ints("indices")?,
    ) {
        (Some(k), None) => {
            if k < 1 || n % k != 0 {
                return Err(ctx.err(format!(
                    "axis {axis} of extent {n} cannot be split into {k} equal sections"
                )));
            }
            (1..k).map(|i| i * n / k).collect()
        }
        (None, Some(ix)) => {
            if ix.windows(2).any(|w| w[0] > w[1]) || ix.iter().any(|&i| i < 0 || i > n) {
                return Err(ctx.err(format!(
                    "attribute `indices` {ix:?} must be ascending within [0, {n}]"
                )));
            }
            ix
        }
        _ => {
            return Err(
                ctx.err("exactly one of the attributes `sections` and `indices` must be set")
            )
        }
    };
    let mut prev = 0;
    let mut fields = Vec::new();
    for b in bounds.into_iter().chain(std::iter::once(n)) {
        let mut o = s.to_vec();
        o[axis] = b - prev;
        fields.push(Type::tensor(&o, d));
        prev = b;
    }
    Ok(Type::tuple(fields))
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let spec = match (a.opt_int("sections")?, a.opt_ints("indices")?) {
        (Some(n), _) => tf::SplitSpec::Sections(n as usize),
        (None, Some(ix)) => tf::SplitSpec::Indices(ix),
        (None, None) => {
            return Err(kiln_ffi::Error::value_error(
                "split: needs `sections` or `indices`",
            ))
        }
    };
    tf::split(input("split", i, 0)?, &spec, a.int("axis")?)
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("split", &["data"], OpPattern::Injective, rel)
            .attrs(vec![
                AttrSpec::optional("sections", AttrKind::Int),
                AttrSpec::optional("indices", AttrKind::Ints),
                AttrSpec::new("axis", AttrKind::Int, 0),
            ])
            .compute(lower),
    );
}
