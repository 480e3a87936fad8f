//! `InferType`: fills `checked_type` on every node from the parameters' annotations, the
//! constants' values and each operator's type relation. Errors name the operator, the argument
//! and the mismatch (`nn.conv2d: argument `weight` has 4 input channels per group but ...`).

use super::{function_pass, Pass};
use crate::ir::visit::rewrite_post;
use crate::ir::{Expr, Function, Type};
use crate::op::{self, RelCtx};
use kiln_ffi::{Error, Result};

/// The most elements a tensor may have: its size in bytes (at most 8 per element) and every
/// flat index into it must fit in an `i64`.
pub const MAX_ELEMENTS: i64 = i64::MAX / 8;

/// Checks that every tensor of `ty` has non-negative extents (or -1: known at run time) and
/// at most [`MAX_ELEMENTS`] elements in its known extents (so that no later shape computation
/// overflows).
pub fn check_size(ty: &Type) -> Result<()> {
    if let Some((shape, _)) = ty.as_tensor() {
        let n = shape.iter().try_fold(1i64, |acc, &d| {
            if d == -1 {
                Some(acc)
            } else if d < 0 {
                None
            } else {
                acc.checked_mul(d).filter(|&n| n <= MAX_ELEMENTS)
            }
        });
        if n.is_none() {
            return Err(Error::value_error(format!(
                "tensor shape {shape:?} has a negative extent or more than {MAX_ELEMENTS} elements"
            )));
        }
    }
    for f in ty.as_tuple().unwrap_or_default() {
        check_size(f)?;
    }
    Ok(())
}

/// The type of a node whose inputs are typed, its tensor sizes checked.
fn node_type(e: &Expr) -> Result<Type> {
    let ty = node_type_unchecked(e)?;
    check_size(&ty).map_err(|err| match e {
        Expr::Call(c) => match &c.op {
            Expr::Op(o) => Error::value_error(format!("{}: output {}", o.name, err.message())),
            _ => err,
        },
        Expr::Var(v) => Error::value_error(format!("variable %{}: {}", v.name(), err.message())),
        _ => err,
    })?;
    Ok(ty)
}

fn node_type_unchecked(e: &Expr) -> Result<Type> {
    match e {
        Expr::Var(v) => v.ty().cloned().ok_or_else(|| {
            Error::type_error(format!("variable %{} has no type annotation", v.name()))
        }),
        Expr::Constant(c) => Ok(Type::tensor(c.data.shape(), c.data.dtype())),
        Expr::Op(o) => Err(Error::type_error(format!(
            "operator {} used as a value",
            o.name
        ))),
        Expr::Call(c) => {
            let args: Vec<Type> = c.args.iter().map(|a| a.ty()).collect::<Result<_>>()?;
            match &c.op {
                Expr::Op(o) => {
                    let def = op::get(&o.name)?;
                    let ctx = RelCtx {
                        op: def,
                        args: &args,
                        attrs: e.attrs(),
                    };
                    if !def.variadic && args.len() != def.inputs.len() {
                        return Err(Error::type_error(format!(
                            "{}: expects {} argument(s) ({}), got {}",
                            def.name,
                            def.inputs.len(),
                            def.inputs.join(", "),
                            args.len()
                        )));
                    }
                    refuse_narrow_arithmetic(def, &args)?;
                    (def.rel)(&ctx).map_err(|err| {
                        Error::new(&err.kind(), format!("{}: {}", def.name, err.message()))
                    })
                }
                Expr::Function(f) => {
                    let params = f.params();
                    if params.len() != args.len() {
                        return Err(Error::type_error(format!(
                            "a function of {} parameters is called with {} arguments",
                            params.len(),
                            args.len()
                        )));
                    }
                    for (i, (p, a)) in params.iter().zip(&args).enumerate() {
                        if p.ty() != Some(a) {
                            return Err(Error::type_error(format!(
                                "argument #{i} of a function call has type {a}, parameter %{} expects {}",
                                p.name(),
                                p.ty().map(|t| t.to_string()).unwrap_or("?".into())
                            )));
                        }
                    }
                    c.op.ty()
                }
                other => Err(Error::type_error(format!(
                    "cannot call {}",
                    crate::ir::printer::short(other)
                ))),
            }
        }
        Expr::Tuple(t) => Ok(Type::tuple(
            t.fields.iter().map(|f| f.ty()).collect::<Result<_>>()?,
        )),
        Expr::TupleGetItem(g) => {
            let t = g.tuple.ty()?;
            let fields = t.as_tuple().ok_or_else(|| {
                Error::type_error(format!(
                    "TupleGetItem.{} of a non-tuple of type {t}",
                    g.index
                ))
            })?;
            fields.get(g.index as usize).cloned().ok_or_else(|| {
                Error::index_error(format!(
                    "TupleGetItem index {} is out of range for {t}",
                    g.index
                ))
            })
        }
        Expr::Function(f) => infer_function(f).and_then(|f| Expr::Function(f).ty()),
    }
}

/// Types a function: every node of its body gets a checked type, the function its result
/// type.
pub fn infer_function(f: &Function) -> Result<Function> {
    for p in f.params() {
        if p.ty().is_none() {
            return Err(Error::type_error(format!(
                "parameter %{} has no type annotation",
                p.name()
            )));
        }
    }
    let body = rewrite_post(f.body(), |e| match e {
        Expr::Var(_) | Expr::Op(_) => Ok(e.clone()),
        Expr::Function(inner) => Ok(Expr::Function(infer_function(inner)?)),
        _ if e.checked_type().is_some() => Ok(e.clone()),
        _ => Ok(e.with_type(node_type(e)?)),
    })?;
    let ret = body.ty()?;
    let typed = f.with_body(f.params().to_vec(), body);
    match Expr::Function(typed).with_type(ret) {
        Expr::Function(f) => Ok(f),
        _ => unreachable!(),
    }
}

/// Types an expression outside a function (free variables must be annotated).
pub fn infer_expr(e: &Expr) -> Result<Expr> {
    rewrite_post(e, |n| match n {
        Expr::Var(_) | Expr::Op(_) => Ok(n.clone()),
        Expr::Function(inner) => Ok(Expr::Function(infer_function(inner)?)),
        _ if n.checked_type().is_some() => Ok(n.clone()),
        _ => Ok(n.with_type(node_type(n)?)),
    })
}

/// `e` typed when its arguments already are, without rebuilding them (so that nodes shared
/// with other users stay one node); `None` when some argument is untyped.
pub fn infer_node(e: &Expr) -> Option<Expr> {
    if e.checked_type().is_some() {
        return Some(e.clone());
    }
    if e.args().iter().any(|a| a.checked_type().is_none()) {
        return None;
    }
    node_type(e).ok().map(|t| e.with_type(t))
}

/// The pass (opt level 0).
pub fn infer_type() -> Pass {
    function_pass("InferType", 0, |f, _| infer_function(&f))
}

/// The narrow types (float8, float4, int4, int2; stored as codes) are only moved and converted:
/// an operator that computes on element values (elementwise, broadcast, reduction, heavy ops)
/// other than `cast` is a type error naming the dtype, instead of arithmetic on the codes.
fn refuse_narrow_arithmetic(def: &op::OpDef, args: &[Type]) -> Result<()> {
    use kiln_tir::DataTypeExt;
    let computes = matches!(
        def.pattern,
        op::OpPattern::ElemWise
            | op::OpPattern::Broadcast
            | op::OpPattern::CommReduce
            | op::OpPattern::OutEWiseFusable
    );
    if !computes || def.name == "cast" {
        return Ok(());
    }
    for (i, a) in args.iter().enumerate() {
        if let Some((_, d)) = a.as_tensor() {
            if d.is_byte_code() {
                return Err(Error::type_error(format!(
                    "{}: argument {} ({}) has type {d}, which Kiln only casts and moves; cast it to float32 first",
                    def.name,
                    i,
                    def.inputs.get(i).copied().unwrap_or("?")
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::mk;

    fn err_of(e: Expr) -> String {
        infer_expr(&e).expect_err("expected a type error").message()
    }

    #[test]
    fn conv_pool_dense_softmax_types() {
        let x = Expr::var("x", Type::f32(&[1, 3, 224, 224]));
        let w = Expr::var("w", Type::f32(&[64, 3, 7, 7]));
        let c = mk(
            "nn.conv2d",
            vec![x, w],
            &[("strides", [2, 2].into()), ("padding", [3, 3, 3, 3].into())],
        );
        let p = mk(
            "nn.max_pool2d",
            vec![c],
            &[
                ("pool_size", [3, 3].into()),
                ("strides", [2, 2].into()),
                ("padding", [1, 1, 1, 1].into()),
            ],
        );
        let g = mk("nn.global_avg_pool2d", vec![p.clone()], &[]);
        let f = mk("nn.batch_flatten", vec![g], &[]);
        let d = mk(
            "nn.dense",
            vec![f, Expr::var("fc", Type::f32(&[10, 64]))],
            &[],
        );
        let s = mk("nn.softmax", vec![d], &[]);
        let t = infer_expr(&s).unwrap();
        assert_eq!(t.ty().unwrap(), Type::f32(&[1, 10]));
        let tp = infer_expr(&p).unwrap();
        assert_eq!(tp.ty().unwrap(), Type::f32(&[1, 64, 56, 56]));
    }

    #[test]
    fn depthwise_and_grouped_conv() {
        let x = Expr::var("x", Type::f32(&[1, 32, 14, 14]));
        let w = Expr::var("w", Type::f32(&[32, 1, 3, 3]));
        let c = mk(
            "nn.conv2d",
            vec![x.clone(), w],
            &[
                ("groups", 32.into()),
                ("padding", [1, 1].into()),
                ("dilation", [2, 2].into()),
            ],
        );
        assert_eq!(
            infer_expr(&c).unwrap().ty().unwrap(),
            Type::f32(&[1, 32, 12, 12])
        );
        let bad = mk(
            "nn.conv2d",
            vec![x, Expr::var("w", Type::f32(&[8, 3, 3, 3]))],
            &[("groups", 4.into())],
        );
        let m = err_of(bad);
        assert!(
            m.starts_with("nn.conv2d: argument `weight` has 3 input channels per group"),
            "{m}"
        );
    }

    #[test]
    fn conv_transpose_and_matmuls() {
        let x = Expr::var("x", Type::f32(&[1, 8, 4, 4]));
        let w = Expr::var("w", Type::f32(&[8, 3, 3, 3]));
        let c = mk(
            "nn.conv2d_transpose",
            vec![x, w],
            &[
                ("strides", [2, 2].into()),
                ("padding", [1, 1, 1, 1].into()),
                ("output_padding", [1, 1].into()),
            ],
        );
        assert_eq!(
            infer_expr(&c).unwrap().ty().unwrap(),
            Type::f32(&[1, 3, 8, 8])
        );
        let a = Expr::var("a", Type::f32(&[2, 1, 5, 4]));
        let b = Expr::var("b", Type::f32(&[3, 4, 6]));
        let mm = mk("nn.matmul", vec![a.clone(), b], &[]);
        assert_eq!(
            infer_expr(&mm).unwrap().ty().unwrap(),
            Type::f32(&[2, 3, 5, 6])
        );
        let bad = mk(
            "nn.matmul",
            vec![a, Expr::var("c", Type::f32(&[5, 6]))],
            &[],
        );
        assert!(err_of(bad).contains("reduction dimensions differ: `a` has 4, `b` has 5"));
        let bm = mk(
            "nn.batch_matmul",
            vec![
                Expr::var("x", Type::f32(&[4, 5, 8])),
                Expr::var("y", Type::f32(&[1, 6, 8])),
            ],
            &[],
        );
        assert_eq!(
            infer_expr(&bm).unwrap().ty().unwrap(),
            Type::f32(&[4, 5, 6])
        );
        let d = mk(
            "nn.dense",
            vec![
                Expr::var("x", Type::f32(&[2, 7])),
                Expr::var("w", Type::f32(&[3, 8])),
            ],
            &[],
        );
        assert!(err_of(d)
            .starts_with("nn.dense: argument `weight` has reduction dimension 8 but `data` has 7"));
    }

    #[test]
    fn broadcast_and_dtype_errors() {
        let a = Expr::var("a", Type::f32(&[4, 1, 3]));
        let b = Expr::var("b", Type::f32(&[5, 1]));
        assert_eq!(
            infer_expr(&mk("add", vec![a.clone(), b.clone()], &[]))
                .unwrap()
                .ty()
                .unwrap(),
            Type::f32(&[4, 5, 3])
        );
        let lt = infer_expr(&mk("less", vec![a.clone(), b], &[])).unwrap();
        assert_eq!(lt.ty().unwrap().dtype(), kiln_ffi::DataType::bool());
        let c = Expr::var("c", Type::f32(&[2, 4]));
        let m = err_of(mk("multiply", vec![a.clone(), c], &[]));
        assert_eq!(
            m,
            "multiply: shapes [4, 1, 3] and [2, 4] do not broadcast (dimension 2: 3 vs 4)"
        );
        let i = Expr::var("i", Type::tensor(&[3], kiln_ffi::DataType::int(64)));
        let m = err_of(mk("add", vec![a.clone(), i], &[]));
        assert_eq!(
            m,
            "add: argument `rhs` has dtype int64 but `lhs` has float32"
        );
        let w = mk(
            "where",
            vec![
                Expr::var("m", Type::tensor(&[3], kiln_ffi::DataType::bool())),
                a.clone(),
                Expr::scalar_f32(0.0),
            ],
            &[],
        );
        assert_eq!(infer_expr(&w).unwrap().ty().unwrap(), Type::f32(&[4, 1, 3]));
        let cast = mk("cast", vec![a], &[("dtype", "int32".into())]);
        assert_eq!(
            infer_expr(&cast).unwrap().ty().unwrap().dtype(),
            kiln_ffi::DataType::int(32)
        );
    }

    #[test]
    fn narrow_types_are_cast_and_moved_but_not_computed_on() {
        let e4m3: kiln_ffi::DataType = "float8_e4m3fn".parse().unwrap();
        let x = Expr::var("x", Type::tensor(&[2, 3], e4m3));
        let msg = err_of(mk("add", vec![x.clone(), x.clone()], &[]));
        assert!(
            msg.contains("float8_e4m3fn") && msg.contains("cast it to float32"),
            "{msg}"
        );
        let i4 = Expr::var("q", Type::tensor(&[4], "int4".parse().unwrap()));
        assert!(err_of(mk("sum", vec![i4], &[])).contains("int4"));
        let c = mk("cast", vec![x.clone()], &[("dtype", "float32".into())]);
        assert_eq!(infer_expr(&c).unwrap().ty().unwrap(), Type::f32(&[2, 3]));
        let t = mk("transpose", vec![x], &[]);
        assert_eq!(
            infer_expr(&t).unwrap().ty().unwrap(),
            Type::tensor(&[3, 2], e4m3)
        );
    }

    #[test]
    fn reductions() {
        let a = Expr::var("a", Type::f32(&[2, 3, 4]));
        let s = mk(
            "sum",
            vec![a.clone()],
            &[("axis", [1].into()), ("keepdims", true.into())],
        );
        assert_eq!(infer_expr(&s).unwrap().ty().unwrap(), Type::f32(&[2, 1, 4]));
        let m = mk("mean", vec![a.clone()], &[("axis", [-1, 0].into())]);
        assert_eq!(infer_expr(&m).unwrap().ty().unwrap(), Type::f32(&[3]));
        let all = mk("max", vec![a.clone()], &[]);
        assert_eq!(infer_expr(&all).unwrap().ty().unwrap(), Type::f32(&[]));
        let am = mk("argmax", vec![a.clone()], &[("axis", [1].into())]);
        assert_eq!(
            infer_expr(&am).unwrap().ty().unwrap(),
            Type::tensor(&[2, 4], kiln_ffi::DataType::int(64))
        );
        let bad = mk("min", vec![a], &[("axis", [3].into())]);
        assert_eq!(err_of(bad), "min: axis 3 is out of range for rank 3");
    }

    #[test]
    fn layout_ops() {
        let a = Expr::var("a", Type::f32(&[2, 3, 4]));
        let t = |e: Expr| infer_expr(&e).unwrap().ty().unwrap();
        assert_eq!(
            t(mk(
                "reshape",
                vec![a.clone()],
                &[("newshape", [0, -1].into())]
            )),
            Type::f32(&[2, 12])
        );
        assert_eq!(
            t(mk(
                "transpose",
                vec![a.clone()],
                &[("axes", [2, 0, 1].into())]
            )),
            Type::f32(&[4, 2, 3])
        );
        assert_eq!(
            t(mk("transpose", vec![a.clone()], &[])),
            Type::f32(&[4, 3, 2])
        );
        assert_eq!(
            t(mk("expand_dims", vec![a.clone()], &[("axis", (-1).into())])),
            Type::f32(&[2, 3, 4, 1])
        );
        assert_eq!(
            t(mk(
                "squeeze",
                vec![Expr::var("s", Type::f32(&[1, 3, 1]))],
                &[]
            )),
            Type::f32(&[3])
        );
        assert_eq!(
            t(mk("flatten", vec![a.clone()], &[("axis", 2.into())])),
            Type::f32(&[6, 4])
        );
        assert_eq!(
            t(mk(
                "concatenate",
                vec![a.clone(), a.clone()],
                &[("axis", 1.into())]
            )),
            Type::f32(&[2, 6, 4])
        );
        assert_eq!(
            t(mk(
                "strided_slice",
                vec![a.clone()],
                &[
                    ("begin", [3].into()),
                    ("end", [0].into()),
                    ("strides", [-2].into()),
                    ("axes", [2].into())
                ]
            )),
            Type::f32(&[2, 3, 2])
        );
        assert_eq!(
            t(mk(
                "nn.pad",
                vec![a.clone()],
                &[("pad_width", [0, 0, 1, 1, 2, 0].into())]
            )),
            Type::f32(&[2, 5, 6])
        );
        assert_eq!(
            t(mk(
                "broadcast_to",
                vec![a.clone()],
                &[("shape", [5, 2, 3, 4].into())]
            )),
            Type::f32(&[5, 2, 3, 4])
        );
        let idx = Expr::var("i", Type::tensor(&[7], kiln_ffi::DataType::int(64)));
        assert_eq!(
            t(mk("take", vec![a.clone(), idx], &[("axis", 1.into())])),
            Type::f32(&[2, 7, 4])
        );
        let sp = mk(
            "split",
            vec![a.clone()],
            &[("indices", [1, 3].into()), ("axis", 2.into())],
        );
        assert_eq!(t(Expr::get_item(sp, 1)), Type::f32(&[2, 3, 2]));
        let img = Expr::var("img", Type::f32(&[1, 3, 8, 8]));
        assert_eq!(
            t(mk(
                "image.resize2d",
                vec![img],
                &[
                    ("size", [16, 12].into()),
                    ("method", "nearest_neighbor".into())
                ]
            )),
            Type::f32(&[1, 3, 16, 12])
        );
        let m = err_of(mk("reshape", vec![a], &[("newshape", [5, -1].into())]));
        assert_eq!(
            m,
            "reshape: cannot infer the -1 of [5, -1] for input shape [2, 3, 4] (24 elements)"
        );
    }

    #[test]
    fn norms_and_activations() {
        let x = Expr::var("x", Type::f32(&[1, 4, 2, 2]));
        let p = |n| Expr::var(n, Type::f32(&[4]));
        let bn = mk(
            "nn.batch_norm",
            vec![x.clone(), p("g"), p("b"), p("m"), p("v")],
            &[],
        );
        let t = infer_expr(&bn).unwrap().ty().unwrap();
        assert_eq!(t.as_tuple().unwrap().len(), 3);
        let bad = mk(
            "nn.batch_norm",
            vec![
                x.clone(),
                p("g"),
                Expr::var("b", Type::f32(&[3])),
                p("m"),
                p("v"),
            ],
            &[],
        );
        assert_eq!(err_of(bad), "nn.batch_norm: argument `beta` must have shape [4] (data axis 1), got Tensor[(3,), float32]");
        for name in [
            "nn.relu",
            "sigmoid",
            "tanh",
            "erf",
            "nn.gelu",
            "hard_sigmoid",
            "hard_swish",
            "silu",
            "exp",
            "rsqrt",
        ] {
            assert_eq!(
                infer_expr(&mk(name, vec![x.clone()], &[]))
                    .unwrap()
                    .ty()
                    .unwrap(),
                Type::f32(&[1, 4, 2, 2])
            );
        }
        let clip = crate::op::call(
            "clip",
            vec![x.clone()],
            &[("a_min", 1.0.into()), ("a_max", 0.0.into())],
        )
        .unwrap();
        assert_eq!(err_of(clip), "clip: a_min (1) is greater than a_max (0)");
        let ln = mk(
            "nn.layer_norm",
            vec![
                Expr::var("h", Type::f32(&[2, 8])),
                Expr::var("g", Type::f32(&[8])),
                Expr::var("b", Type::f32(&[8])),
            ],
            &[],
        );
        assert_eq!(infer_expr(&ln).unwrap().ty().unwrap(), Type::f32(&[2, 8]));
    }

    #[test]
    fn attribute_validation() {
        let x = Expr::var("x", Type::f32(&[1, 4, 2, 2]));
        let e = crate::op::call("nn.relu", vec![x.clone()], &[("alpha", 1.0.into())]).unwrap_err();
        assert_eq!(e.message(), "nn.relu: unknown attribute `alpha` (known: )");
        let e = crate::op::call("nn.conv2d", vec![x.clone()], &[]).unwrap_err();
        assert_eq!(
            e.message(),
            "nn.conv2d: expects 2 argument(s) (data, weight), got 1"
        );
        let e = crate::op::call("nn.softmax", vec![x], &[("axis", "x".into())]).unwrap_err();
        assert!(e
            .message()
            .starts_with("nn.softmax: attribute `axis` must be Int"));
    }
}
