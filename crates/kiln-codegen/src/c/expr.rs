//! Expressions to C expressions.
//!
//! Scalars are plain C expressions. Operations that would evaluate an operand twice (`min`,
//! `max`, float `floormod`) and `Let` use GCC statement expressions (`({ ... })`, which GCC and
//! Clang accept). Vector values are lane-array structs made by [`CodeGenC::lanewise`]: operands
//! are evaluated once into temporaries, then a fixed-trip loop computes each lane with the
//! scalar rule. Integer `floordiv` / `floormod` round toward negative infinity (helpers in the
//! prelude); `Div` / `Mod` truncate as in C.

use super::{c_string, scalar_ctype, CodeGenC, Dialect};
use crate::lower_common::{contiguous_base, libm_name};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::op::{self, builtin};
use kiln_tir::{BinOp, DataTypeExt, ExprKind, PrimExpr};

/// The C literal of an integer (or bool) constant of type `t`.
pub fn int_literal(t: DataType, v: i64) -> Result<String> {
    Dialect::C.int_literal(t, v)
}

/// The C literal of a float constant of type `t`.
pub fn float_literal(t: DataType, v: f64) -> Result<String> {
    Dialect::C.float_literal(t, v)
}

/// `name` for double, `namef` for float and float16 (the float16 result is converted back by
/// the caller's type).
fn libm_for(name: &str, t: DataType) -> String {
    if t.bits() == 64 {
        name.to_string()
    } else {
        format!("{name}f")
    }
}

impl CodeGenC {
    /// The C expression of `e`.
    pub fn expr(&mut self, e: &PrimExpr) -> Result<String> {
        let t = e.dtype();
        match e.kind() {
            ExprKind::IntImm(v) => self.dialect.int_literal(t, v),
            ExprKind::FloatImm(v) => self.dialect.float_literal(t, v),
            ExprKind::StringImm(s) if self.dialect.is_device() => Err(Error::value_error(format!(
                "{} code generation of `{}`: string {s:?} cannot be a value in a kernel",
                self.dialect.name(),
                self.func_name
            ))),
            ExprKind::StringImm(s) => Ok(format!("((void*){})", c_string(s))),
            ExprKind::Var(v) => self.var_name(&v),
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                let at = a.dtype();
                if t.lanes() > 1 || at.lanes() > 1 {
                    let ops = [(x, at), (y, b.dtype())];
                    let et = at.element_of();
                    return self.lanewise(t, &ops, |l, _| scalar_binary(op, et, &l[0], &l[1]));
                }
                Ok(self.dialect.binary(op, at, &x, &y))
            }
            ExprKind::Not(a) => {
                let x = self.expr(a)?;
                if t.lanes() > 1 {
                    return self.lanewise(t, &[(x, a.dtype())], |l, _| format!("(!{})", l[0]));
                }
                Ok(format!("(!{x})"))
            }
            ExprKind::Cast(a) => {
                let x = self.expr(a)?;
                let (from, to) = (a.dtype().element_of(), t.element_of());
                if t.lanes() > 1 {
                    scalar_cast(from, to, "x")?;
                    return self.lanewise(t, &[(x, a.dtype())], |l, _| {
                        scalar_cast(from, to, &l[0]).unwrap_or_default()
                    });
                }
                self.dialect.cast(from, to, &x)
            }
            ExprKind::Select { cond, t: tv, f: fv } => {
                let c = self.expr(cond)?;
                let (x, y) = (self.expr(tv)?, self.expr(fv)?);
                if t.lanes() > 1 {
                    let ops = [(c, cond.dtype()), (x, tv.dtype()), (y, fv.dtype())];
                    return self
                        .lanewise(t, &ops, |l, _| format!("({} ? {} : {})", l[0], l[1], l[2]));
                }
                Ok(format!("({c} ? {x} : {y})"))
            }
            ExprKind::Let { var, value, body } => {
                let v = self.expr(value)?;
                let vt = self.ctype(var.dtype())?;
                let (name, prev) = self.bind(var);
                let b = self.expr(body);
                self.unbind(var, prev);
                Ok(format!("({{ {vt} {name} = {v}; {}; }})", b?))
            }
            ExprKind::BufferLoad { buffer, indices } => {
                if indices.len() != 1 {
                    return Err(Error::value_error(format!(
                        "c codegen: load of `{}` has {} indices; run StorageFlatten first",
                        buffer.name(),
                        indices.len()
                    )));
                }
                let idx = &indices[0];
                let ptr = self.buffer_ptr(buffer)?;
                let scalar_buffer = !buffer.dtype().is_vector();
                if idx.dtype().lanes() <= 1 && (t.lanes() <= 1 || !scalar_buffer) {
                    let i = self.expr(idx)?;
                    return Ok(format!("{ptr}[{i}]"));
                }
                // Contiguous lanes: a ramp of stride 1, or a scalar index of a vector load.
                let contiguous = contiguous_base(idx);
                if let Some(base) = contiguous {
                    if scalar_buffer {
                        let b = self.expr(&base)?;
                        let vt = self.ctype(t)?;
                        let r = self.temp("r");
                        return Ok(format!(
                            "({{ {vt} {r}; memcpy(&{r}, &{ptr}[{b}], sizeof({r})); {r}; }})"
                        ));
                    }
                }
                let i = self.expr(idx)?;
                self.lanewise(t, &[(i, idx.dtype())], |l, _| format!("{ptr}[{}]", l[0]))
            }
            ExprKind::Ramp { base, stride, .. } => {
                let (b, s) = (self.expr(base)?, self.expr(stride)?);
                let ct = scalar_ctype(base.dtype())?;
                let ops = [(b, base.dtype()), (s, stride.dtype())];
                self.lanewise(t, &ops, |l, k| {
                    format!("({ct})({} + ({ct}){k} * {})", l[0], l[1])
                })
            }
            ExprKind::Broadcast { value, .. } => {
                let v = self.expr(value)?;
                self.lanewise(t, &[(v, value.dtype())], |l, _| l[0].clone())
            }
            ExprKind::Call { op, args } => self.call(t, op, args),
        }
    }

    /// A pointer to the elements of `buffer` (`((float*)A_data)`, offset by `elem_offset`;
    /// a pointer declared with the buffer's element type is used as it is).
    pub(crate) fn buffer_ptr(&mut self, buffer: &kiln_tir::Buffer) -> Result<String> {
        let et = self.ctype(buffer.dtype())?;
        let data = self.var_name(buffer.data())?;
        let base = match self.typed_ptrs.get(buffer.data()) {
            Some((t, _)) if *t == buffer.dtype() => data,
            Some((_, space)) => format!("(({space} {et}*){data})"),
            None if self.dialect.is_device() => {
                return Err(Error::value_error(format!(
                    "{} code generation of `{}`: buffer `{}` has no declared memory",
                    self.dialect.name(),
                    self.func_name,
                    buffer.name()
                )))
            }
            None => format!("(({et}*){data})"),
        };
        let off = buffer.elem_offset();
        if off.is_const_int(0) {
            Ok(base)
        } else {
            let o = self.expr(off)?;
            Ok(format!("({base} + {o})"))
        }
    }

    /// A value of vector type `t` computed lane by lane: each operand (a C expression of the
    /// given type, scalar or vector) is evaluated once; `lane(operands at lane k, k)` gives
    /// lane `k`.
    pub fn lanewise(
        &mut self,
        t: DataType,
        ops: &[(String, DataType)],
        lane: impl Fn(&[String], &str) -> String,
    ) -> Result<String> {
        let vt = self.ctype(t)?;
        let (r, k) = (self.temp("r"), self.temp("k"));
        let mut s = format!("({{ {vt} {r}; ");
        let mut lanes = Vec::with_capacity(ops.len());
        for (e, dt) in ops {
            let o = self.temp("o");
            let ct = self.ctype(*dt)?;
            s.push_str(&format!("{ct} {o} = {e}; "));
            lanes.push(if dt.lanes() > 1 {
                format!("{o}.v[{k}]")
            } else {
                o
            });
        }
        let n = t.lanes();
        s.push_str(&format!(
            "for (int {k} = 0; {k} < {n}; ++{k}) {r}.v[{k}] = {}; {r}; }})",
            lane(&lanes, &k)
        ));
        Ok(s)
    }

    /// A call by name: intrinsics here, runtime builtins in [`super::packed`].
    fn call(&mut self, t: DataType, op: &str, args: &[PrimExpr]) -> Result<String> {
        let argc = |n: usize| -> Result<()> {
            if args.len() != n {
                return Err(Error::value_error(format!(
                    "c codegen: {op} takes {n} arguments, got {}",
                    args.len()
                )));
            }
            Ok(())
        };
        if libm_name(op).is_some() || matches!(op, "tir.exp10" | "tir.rsqrt" | "tir.sigmoid") {
            let mut ops = Vec::with_capacity(args.len());
            for a in args {
                ops.push((self.expr(a)?, a.dtype()));
            }
            let et = t.element_of();
            if !et.is_float() {
                return Err(Error::type_error(format!(
                    "c codegen: {op} of {t} is not supported (float16/32/64 only)"
                )));
            }
            if t.lanes() > 1 {
                return self.lanewise(t, &ops, |l, _| scalar_math(op, et, l));
            }
            let l: Vec<String> = ops.into_iter().map(|(e, _)| e).collect();
            return Ok(self.dialect.math(op, et, &l));
        }
        match op {
            op::LIKELY => {
                argc(1)?;
                self.expr(&args[0])
            }
            // A hint only: C and device source go without it.
            op::PREFETCH => {
                argc(1)?;
                Ok("0".to_string())
            }
            op::DOT4_U8S8 => {
                argc(2)?;
                self.expr(&op::dot4_u8s8_expanded(&args[0], &args[1]))
            }
            op::IF_THEN_ELSE if args.len() == 3 && args[0].dtype().lanes() > 1 => {
                // Per lane, only the chosen side evaluated (its loads at that lane's index).
                let k = kiln_tir::Var::int32("lane");
                let (name, prev) = self.bind(&k);
                let lane = |e: &PrimExpr| super::stmt::lane_of(e, &k);
                let parts: Result<Vec<String>> = args
                    .iter()
                    .map(|a| lane(a).and_then(|x| self.expr(&x)))
                    .collect();
                self.unbind(&k, prev);
                let parts = parts?;
                let (vt, r) = (self.ctype(t)?, self.temp("r"));
                Ok(format!(
                    "({{ {vt} {r}; for (int32_t {name} = 0; {name} < {}; ++{name}) {r}.v[{name}] = ({}) ? ({}) : ({}); {r}; }})",
                    t.lanes(),
                    parts[0],
                    parts[1],
                    parts[2]
                ))
            }
            op::IF_THEN_ELSE => {
                argc(3)?;
                let c = self.expr(&args[0])?;
                let (x, y) = (self.expr(&args[1])?, self.expr(&args[2])?);
                if t.lanes() > 1 {
                    let ops = [
                        (c, args[0].dtype()),
                        (x, args[1].dtype()),
                        (y, args[2].dtype()),
                    ];
                    return self
                        .lanewise(t, &ops, |l, _| format!("({} ? {} : {})", l[0], l[1], l[2]));
                }
                Ok(format!("({c} ? {x} : {y})"))
            }
            op::BITWISE_AND
            | op::BITWISE_OR
            | op::BITWISE_XOR
            | op::SHIFT_LEFT
            | op::SHIFT_RIGHT => {
                argc(2)?;
                let sym = match op {
                    op::BITWISE_AND => "&",
                    op::BITWISE_OR => "|",
                    op::BITWISE_XOR => "^",
                    op::SHIFT_LEFT => "<<",
                    _ => ">>",
                };
                let ct = self.dialect.scalar_type(t)?;
                let ops = [
                    (self.expr(&args[0])?, args[0].dtype()),
                    (self.expr(&args[1])?, args[1].dtype()),
                ];
                let f = |l: &[String], _: &str| format!("(({ct})({} {sym} {}))", l[0], l[1]);
                if t.lanes() > 1 {
                    return self.lanewise(t, &ops, f);
                }
                Ok(f(&[ops[0].0.clone(), ops[1].0.clone()], ""))
            }
            op::BITWISE_NOT => {
                argc(1)?;
                let ct = self.dialect.scalar_type(t)?;
                let x = self.expr(&args[0])?;
                if t.lanes() > 1 {
                    return self.lanewise(t, &[(x, args[0].dtype())], |l, _| {
                        format!("(({ct})~{})", l[0])
                    });
                }
                Ok(format!("(({ct})~{x})"))
            }
            op::REINTERPRET if self.dialect.is_device() => Err(Error::value_error(format!(
                "{} code generation of `{}`: tir.reinterpret is not supported in kernels",
                self.dialect.name(),
                self.func_name
            ))),
            op::REINTERPRET => {
                argc(1)?;
                let x = self.expr(&args[0])?;
                let (from, to) = (self.ctype(args[0].dtype())?, self.ctype(t)?);
                let (s, d) = (self.temp("s"), self.temp("d"));
                Ok(format!(
                    "({{ {from} {s} = {x}; {to} {d}; memcpy(&{d}, &{s}, sizeof({d})); {d}; }})"
                ))
            }
            builtin::RET => Err(Error::value_error(
                "c codegen: tir.ret may only appear as a statement (Evaluate)",
            )),
            _ if self.dialect.is_device() => self.device_call(t, op, args),
            _ => self.builtin_call(t, op, args),
        }
    }
}

/// A scalar binary operation on C expressions `a`, `b` of operand type `t`.
pub fn scalar_binary(op: BinOp, t: DataType, a: &str, b: &str) -> String {
    let ct = scalar_ctype(t).unwrap_or("int");
    let small_int = t.is_integer() && t.bits() < 32;
    let wrap = |s: String| {
        if small_int {
            format!("(({ct}){s})")
        } else {
            s
        }
    };
    let float = t.is_floating();
    let twice = |body: &str| format!("({{ {ct} _a = {a}; {ct} _b = {b}; {body}; }})");
    match op {
        BinOp::Add => wrap(format!("({a} + {b})")),
        BinOp::Sub => wrap(format!("({a} - {b})")),
        BinOp::Mul => wrap(format!("({a} * {b})")),
        BinOp::Div => wrap(format!("({a} / {b})")),
        BinOp::Mod if float => format!("(({ct}){}({a}, {b}))", libm_for("fmod", t)),
        BinOp::Mod => wrap(format!("({a} % {b})")),
        BinOp::FloorDiv if float => format!("(({ct}){}({a} / {b}))", libm_for("floor", t)),
        BinOp::FloorMod if float => twice(&format!(
            "_a - ({ct}){}(_a / _b) * _b",
            libm_for("floor", t)
        )),
        BinOp::FloorDiv if t.is_int() => format!("kiln_floordiv_{ct}({a}, {b})"),
        BinOp::FloorMod if t.is_int() => format!("kiln_floormod_{ct}({a}, {b})"),
        BinOp::FloorDiv => wrap(format!("({a} / {b})")),
        BinOp::FloorMod => wrap(format!("({a} % {b})")),
        BinOp::Min => twice("_a < _b ? _a : _b"),
        BinOp::Max => twice("_a > _b ? _a : _b"),
        BinOp::Eq => format!("({a} == {b})"),
        BinOp::Ne => format!("({a} != {b})"),
        BinOp::Lt => format!("({a} < {b})"),
        BinOp::Le => format!("({a} <= {b})"),
        BinOp::Gt => format!("({a} > {b})"),
        BinOp::Ge => format!("({a} >= {b})"),
        BinOp::And => format!("({a} && {b})"),
        BinOp::Or => format!("({a} || {b})"),
    }
}

/// The conversion of a scalar C expression from `from` to `to`.
pub fn scalar_cast(from: DataType, to: DataType, x: &str) -> Result<String> {
    if from == to {
        return Ok(x.to_string());
    }
    let ct = scalar_ctype(to)?;
    if to.is_handle() && !from.is_handle() {
        return Ok(format!("((void*)(intptr_t)({x}))"));
    }
    if from.is_handle() && !to.is_handle() {
        return Ok(format!("(({ct})(intptr_t)({x}))"));
    }
    Ok(format!("(({ct})({x}))"))
}

/// A float math intrinsic of scalar C expressions of float type `t`.
pub fn scalar_math(op: &str, t: DataType, args: &[String]) -> String {
    let ct = scalar_ctype(t).unwrap_or("double");
    // float16 computes in float.
    let arg = |i: usize| {
        if t.bits() == 16 {
            format!("(float)({})", args[i])
        } else {
            args[i].clone()
        }
    };
    let one = if t.bits() == 64 { "1.0" } else { "1.0f" };
    let body = match op {
        "tir.exp10" => format!(
            "{}({}, {})",
            libm_for("pow", t),
            if t.bits() == 64 { "10.0" } else { "10.0f" },
            arg(0)
        ),
        "tir.rsqrt" => format!("{one} / {}({})", libm_for("sqrt", t), arg(0)),
        "tir.sigmoid" => format!("{one} / ({one} + {}(-{}))", libm_for("exp", t), arg(0)),
        _ => {
            let name = libm_for(libm_name(op).expect("checked by the caller"), t);
            let a: Vec<String> = (0..args.len()).map(arg).collect();
            format!("{name}({})", a.join(", "))
        }
    };
    format!("(({ct})({body}))")
}
