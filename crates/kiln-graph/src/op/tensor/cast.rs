//! `cast(data, dtype="float32", saturate=true, round_mode="up")`: elementwise conversion.
//! `saturate` and `round_mode` are ONNX's, for conversions to the narrow floats (float8,
//! float4; see `kiln_ffi::narrow`).

use crate::ir::attrs::Attrs;
use crate::ir::Type;
use crate::op::{eval, AttrKind, AttrSpec, OpDef, OpPattern, RelCtx};
use crate::op::{input, one};
use kiln_ffi::narrow::{e8m0_from_f32, E8m0Round, NarrowFloat};
use kiln_ffi::{DataType, Device, Error, Result};
use kiln_runtime::tensor::Tensor;
use kiln_te::Tensor as TeTensor;
use kiln_tir::CpuDesc;
use kiln_topi::elemwise::narrow_cast::NarrowMode;

/// Parses a dtype name (`float32`, `int64`, `bool`, ...).
pub fn parse_dtype(s: &str) -> Result<DataType> {
    s.parse::<DataType>()
        .map_err(|_| Error::value_error(format!("unknown dtype `{s}`")))
}

fn rel(ctx: &RelCtx<'_>) -> Result<Type> {
    let (s, _) = ctx.tensor(0)?;
    let d = parse_dtype(&ctx.attrs.str("dtype")?).map_err(|e| ctx.err(e.message()))?;
    mode(&ctx.attrs).map_err(|e| ctx.err(e.message()))?;
    Ok(Type::tensor(s, d))
}

/// The narrow-float conversion mode of the attributes.
fn mode(a: &Attrs<'_>) -> Result<NarrowMode> {
    let r = a.str("round_mode")?;
    let round = E8m0Round::parse(&r).ok_or_else(|| {
        Error::value_error(format!(
            "cast: round_mode must be up, down or nearest, got `{r}`"
        ))
    })?;
    Ok(NarrowMode {
        saturate: a.bool("saturate")?,
        round,
    })
}

/// The lowering (TOPI compute).
fn lower(i: &[TeTensor], a: &Attrs<'_>, _: &CpuDesc) -> Result<Vec<TeTensor>> {
    let d: DataType = a
        .str("dtype")?
        .parse()
        .map_err(|_| Error::value_error("cast: bad dtype"))?;
    one(kiln_topi::elemwise::cast_with(
        input("cast", i, 0)?,
        d,
        mode(a)?,
    ))
}

/// The reference: through `f64` (exact for the narrow types' sources), with the narrow
/// conversions of `kiln_ffi::narrow` where the result is a narrow float.
fn evaluate(args: &[Tensor], a: Attrs<'_>, ty: &Type) -> Result<Tensor> {
    let dtype = parse_dtype(&a.str("dtype")?)?;
    let Some(f) = NarrowFloat::of(dtype) else {
        return eval::same_data(args, ty);
    };
    let m = mode(&a)?;
    let codes: Vec<u8> = eval::values(&args[0])?
        .into_iter()
        .map(|v| match f {
            NarrowFloat::E8M0FNU => e8m0_from_f32(v as f32, m.saturate, m.round),
            _ => f.from_f32(v as f32, m.saturate),
        })
        .collect();
    let out = Tensor::empty(ty.shape(), dtype, Device::cpu(0))?;
    out.copy_from_bytes(&codes)?;
    Ok(out)
}

/// The definitions of this file.
pub(crate) fn defs(v: &mut Vec<OpDef>) {
    v.push(
        OpDef::new("cast", &["data"], OpPattern::ElemWise, rel)
            .attrs(vec![
                AttrSpec::new("dtype", AttrKind::Str, "float32"),
                AttrSpec::new("saturate", AttrKind::Bool, true),
                AttrSpec::new("round_mode", AttrKind::Str, "up"),
            ])
            .eval(evaluate)
            .compute(lower),
    );
}
