//! `bind_params` (TVM's `bind_params_by_name`): weights given by name become constants of
//! `main`, so that the optimizer can fold them (scale folding into convolution weights, packed
//! kernel layouts) before anything is compiled.

use crate::ir::visit::rewrite_function;
use crate::ir::{Expr, IRModule};
use kiln_ffi::{Error, Result};
use kiln_runtime::tensor::Tensor;
use std::collections::HashMap;

/// Replaces every parameter of `main` named in `params` by a constant of that value; returns
/// the new module and the params that name no parameter of `main` (left for the executor).
/// A value whose shape or dtype differs from the parameter's type is an error naming both.
pub fn bind_params(
    module: &IRModule,
    params: Vec<(String, Tensor)>,
) -> Result<(IRModule, Vec<(String, Tensor)>)> {
    let main = module.main()?;
    let mut by_name: HashMap<String, Tensor> = HashMap::new();
    let mut rest = Vec::new();
    for (name, t) in params {
        if main.params().iter().any(|v| v.name() == name) {
            by_name.insert(name, t);
        } else {
            rest.push((name, t));
        }
    }
    if by_name.is_empty() {
        return Ok((module.clone(), rest));
    }
    for v in main.params() {
        let (Some(t), Some(ty)) = (by_name.get(v.name()), v.ty()) else {
            continue;
        };
        if let Some((shape, dtype)) = ty.as_tensor() {
            if t.shape() != shape || t.dtype() != dtype {
                return Err(Error::value_error(format!(
                    "bind_params: param {:?} is {:?} {}, but `main` declares it {shape:?} {dtype}",
                    v.name(),
                    t.shape(),
                    t.dtype()
                )));
            }
        }
    }
    let bound = rewrite_function(&main, |e| {
        if let Expr::Var(v) = e {
            if let Some(t) = by_name.get(v.name()) {
                return Ok(Expr::constant(t.clone()));
            }
        }
        Ok(e.clone())
    })?;
    let kept: Vec<_> = main
        .params()
        .iter()
        .filter(|v| !by_name.contains_key(v.name()))
        .cloned()
        .collect();
    let f = bound.with_body(kept, bound.body().clone());
    Ok((module.with_function("main", f), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, Type, Var};
    use crate::op::mk;
    use kiln_ffi::{DataType, Device};

    #[test]
    fn binds_named_params_and_keeps_the_rest() {
        let x = Var::new("x", Type::f32(&[2]));
        let w = Var::new("w", Type::f32(&[2]));
        let body = mk("add", vec![x.expr(), w.expr()], &[]);
        let m = IRModule::from_main(Function::new(vec![x, w], body));
        let t = Tensor::from_f64s(&[1.0, 2.0], &[2], DataType::float(32), Device::cpu(0)).unwrap();
        let extra = t.clone();
        let (out, rest) = bind_params(&m, vec![("w".into(), t), ("other".into(), extra)]).unwrap();
        let main = out.main().unwrap();
        assert_eq!(main.params().len(), 1);
        assert_eq!(main.params()[0].name(), "x");
        assert!(main.body().args()[1].as_constant().is_some());
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].0, "other");
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let w = Var::new("w", Type::f32(&[3]));
        let m = IRModule::from_main(Function::new(vec![w.clone()], w.expr()));
        let t = Tensor::from_f64s(&[1.0, 2.0], &[2], DataType::float(32), Device::cpu(0)).unwrap();
        let Err(e) = bind_params(&m, vec![("w".into(), t)]) else {
            panic!("a mismatched shape binds")
        };
        assert!(e.message().contains("\"w\""), "{e}");
    }
}
