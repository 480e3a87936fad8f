//! `DivToMul` (after TVM's pass of that name): `divide(x, c)` of a product `x` (a matrix
//! product or a convolution) by a floating-point constant `c` becomes `multiply(x, 1 / c)`.
//! Such a division fuses into the product's epilogue and runs once per output element inside
//! the product's loops, where a vector division costs several multiplications (a float32
//! `vdivps` of 16 lanes issues once every 10-16 cycles): attention scores scaled by
//! `1 / sqrt(d)` spent more time dividing than multiplying. The reciprocal is rounded once, so
//! a quotient may differ from the division's by one unit in the last place; other divisions
//! (a quantization scale `(max - min) / 255`, which must match onnxruntime's exactly) stay.
//! Constants with a zero, an infinite or NaN element, or a reciprocal outside the normal
//! range of their type are left alone (there the two differ by more).

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::visit::rewrite_function_orig;
use crate::ir::Expr;
use crate::op::{eval, mk};
use kiln_ffi::{DataType, Result};

/// The ops whose quotients by a constant become products.
const PRODUCTS: [&str; 4] = ["nn.matmul", "nn.dense", "nn.batch_matmul", "nn.conv2d"];

/// The pass (opt level 3).
pub fn div_to_mul() -> Pass {
    function_pass("DivToMul", 3, |f, _| {
        let f = infer_function(&f)?;
        let out = rewrite_function_orig(&f, |orig, e| {
            let of_product = e.op_name() == Some("divide")
                && e.args()[0]
                    .op_name()
                    .is_some_and(|op| PRODUCTS.contains(&op));
            if !of_product {
                return Ok(e.clone());
            }
            match reciprocal(&orig.args()[1])? {
                Some(r) => Ok(mk("multiply", vec![e.args()[0].clone(), r], &[])),
                None => Ok(e.clone()),
            }
        })?;
        infer_function(&out)
    })
}

/// `1 / c` as a constant of `c`'s type, when `c` is a float32 or float64 constant whose every
/// element has a normal reciprocal.
fn reciprocal(c: &Expr) -> Result<Option<Expr>> {
    let Some(t) = c.as_constant() else {
        return Ok(None);
    };
    let dt = t.dtype();
    let (min, max) = if dt == DataType::float(32) {
        (f32::MIN_POSITIVE as f64, f32::MAX as f64)
    } else if dt == DataType::float(64) {
        (f64::MIN_POSITIVE, f64::MAX)
    } else {
        return Ok(None);
    };
    let recip: Vec<f64> = eval::values(t)?.iter().map(|v| 1.0 / v).collect();
    if !recip
        .iter()
        .all(|r| r.is_finite() && (min..=max).contains(&r.abs()))
    {
        return Ok(None);
    }
    Ok(Some(Expr::constant(eval::make(&recip, &c.ty()?)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, IRModule, Type, Var};
    use crate::transform::PassContext;

    /// `divide(matmul(x, w), divisor)` through the pass.
    fn run(divisor: Expr) -> Expr {
        let x = Var::new("x", Type::f32(&[2, 4]));
        let w = Var::new("w", Type::f32(&[4, 3]));
        let product = mk("nn.matmul", vec![x.expr(), w.expr()], &[]);
        let body = mk("divide", vec![product, divisor], &[]);
        let m = IRModule::from_main(Function::new(vec![x, w], body));
        let ctx = PassContext::with_opt_level(3);
        div_to_mul()
            .run(m, &ctx)
            .unwrap()
            .main()
            .unwrap()
            .body()
            .clone()
    }

    #[test]
    fn division_by_a_constant_becomes_a_product_by_its_reciprocal() {
        let out = run(Expr::const_f32(&[8.0, -0.25, 3.0], &[3]));
        assert_eq!(out.op_name(), Some("multiply"));
        let r = eval::values(out.args()[1].as_constant().unwrap()).unwrap();
        assert_eq!(r, vec![0.125, -4.0, (1.0f32 / 3.0) as f64]);
        assert_eq!(out.ty().unwrap(), Type::f32(&[2, 3]));
    }

    #[test]
    fn zeros_infinities_and_huge_divisors_stay_divisions() {
        for d in [0.0f32, f32::INFINITY, f32::NAN, f32::MAX] {
            let out = run(Expr::const_f32(&[2.0, d, 1.0], &[3]));
            assert_eq!(out.op_name(), Some("divide"), "divisor {d}");
        }
        // A divisor that is not a constant stays, and so does a quotient of other values.
        let y = Var::new("y", Type::f32(&[3]));
        let x = Var::new("x", Type::f32(&[2, 3]));
        let c = Expr::const_f32(&[255.0], &[]);
        let body = Expr::tuple(vec![
            mk("divide", vec![x.expr(), y.expr()], &[]),
            mk("divide", vec![x.expr(), c], &[]),
        ]);
        let m = IRModule::from_main(Function::new(vec![x, y], body));
        let out = div_to_mul()
            .run(m, &PassContext::with_opt_level(3))
            .unwrap();
        let fields = crate::ir::visit::children(out.main().unwrap().body());
        assert!(fields.iter().all(|f| f.op_name() == Some("divide")));
    }
}
