//! Randomized check of the simplifier: random integer expressions over variables with small
//! ranges are evaluated by a naive interpreter before and after simplification, at every point
//! of the ranges; the values must agree wherever the original is defined (no division by zero,
//! no int32 overflow).

use kiln_testing::rng::Lcg;
use kiln_tir::*;

/// The generator of the random expressions.
struct Rng(Lcg);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

struct Gen<'a> {
    rng: &'a mut Rng,
    vars: Vec<Var>,
}

impl Gen<'_> {
    fn leaf(&mut self) -> PrimExpr {
        if self.rng.below(3) == 0 {
            PrimExpr::i32(self.rng.range(-9, 9))
        } else {
            let i = self.rng.below(self.vars.len() as u64) as usize;
            self.vars[i].to_expr()
        }
    }

    fn nonzero_const(&mut self) -> PrimExpr {
        let mut c = self.rng.range(-4, 9);
        if c == 0 {
            c = 8;
        }
        PrimExpr::i32(c)
    }

    fn int(&mut self, depth: u32) -> PrimExpr {
        if depth == 0 || self.rng.below(5) == 0 {
            return self.leaf();
        }
        let d = depth - 1;
        // Nodes are built raw (no folding at construction) so the simplifier sees everything.
        let bin = |op, a, b| PrimExpr::binary_raw(op, a, b);
        match self.rng.below(14) {
            0 | 1 => bin(BinOp::Add, self.int(d), self.int(d)),
            2 => bin(BinOp::Sub, self.int(d), self.int(d)),
            3 => bin(BinOp::Mul, self.int(d), self.leaf()),
            4 => bin(BinOp::Mul, self.int(d), self.nonzero_const()),
            5 => bin(BinOp::FloorDiv, self.int(d), self.nonzero_const()),
            6 => bin(BinOp::FloorMod, self.int(d), self.nonzero_const()),
            7 => bin(BinOp::Div, self.int(d), self.nonzero_const()),
            8 => bin(BinOp::Mod, self.int(d), self.nonzero_const()),
            9 => bin(BinOp::Min, self.int(d), self.int(d)),
            10 => bin(BinOp::Max, self.int(d), self.int(d)),
            11 => PrimExpr::select_raw(self.cond(d), self.int(d), self.int(d)),
            12 => bin(BinOp::FloorDiv, self.int(d), self.int(d)),
            13 if self.rng.below(2) == 0 => {
                // let t = value in body (body may use t).
                let t = Var::int32("t");
                let value = self.int(d);
                self.vars.push(t.clone());
                let body = self.int(d);
                self.vars.pop();
                PrimExpr::let_raw(t, value, body)
            }
            _ => bin(BinOp::FloorMod, self.int(d), self.leaf()),
        }
    }

    fn cond(&mut self, depth: u32) -> PrimExpr {
        let d = depth.saturating_sub(1);
        let ops = [
            BinOp::Lt,
            BinOp::Le,
            BinOp::Gt,
            BinOp::Ge,
            BinOp::Eq,
            BinOp::Ne,
        ];
        match self.rng.below(8) {
            0 if depth > 0 => PrimExpr::binary_raw(BinOp::And, self.cond(d), self.cond(d)),
            1 if depth > 0 => PrimExpr::binary_raw(BinOp::Or, self.cond(d), self.cond(d)),
            2 if depth > 0 => PrimExpr::not_raw(self.cond(d)),
            _ => {
                let op = ops[self.rng.below(6) as usize];
                PrimExpr::binary_raw(op, self.int(d), self.int(d))
            }
        }
    }
}

/// Why evaluation stopped.
#[derive(Debug)]
enum Undefined {
    DivByZero,
    Overflow,
}

fn fit(v: i64) -> Result<i64, Undefined> {
    if v < i32::MIN as i64 || v > i32::MAX as i64 {
        Err(Undefined::Overflow)
    } else {
        Ok(v)
    }
}

fn eval(e: &PrimExpr, env: &[(Var, i64)]) -> Result<i64, Undefined> {
    Ok(match e.kind() {
        ExprKind::IntImm(v) => v,
        ExprKind::Var(v) => env.iter().find(|(w, _)| *w == v).expect("bound variable").1,
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (eval(a, env)?, eval(b, env)?);
            let floordiv = |x: i64, y: i64| {
                let q = x / y;
                if x % y != 0 && ((x < 0) != (y < 0)) {
                    q - 1
                } else {
                    q
                }
            };
            match op {
                BinOp::Add => fit(x + y)?,
                BinOp::Sub => fit(x - y)?,
                BinOp::Mul => fit(x * y)?,
                BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod if y == 0 => {
                    return Err(Undefined::DivByZero)
                }
                BinOp::Div => x / y,
                BinOp::Mod => x % y,
                BinOp::FloorDiv => floordiv(x, y),
                BinOp::FloorMod => x - y * floordiv(x, y),
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                BinOp::Eq => (x == y) as i64,
                BinOp::Ne => (x != y) as i64,
                BinOp::Lt => (x < y) as i64,
                BinOp::Le => (x <= y) as i64,
                BinOp::Gt => (x > y) as i64,
                BinOp::Ge => (x >= y) as i64,
                BinOp::And => (x != 0 && y != 0) as i64,
                BinOp::Or => (x != 0 || y != 0) as i64,
            }
        }
        ExprKind::Not(a) => (eval(a, env)? == 0) as i64,
        ExprKind::Select { cond, t, f } => {
            // Both sides are evaluated, as Select does.
            let (c, x, y) = (eval(cond, env)?, eval(t, env)?, eval(f, env)?);
            if c != 0 {
                x
            } else {
                y
            }
        }
        ExprKind::Let { var, value, body } => {
            let v = eval(value, env)?;
            let mut env2 = env.to_vec();
            env2.push((var.clone(), v));
            eval(body, &env2)?
        }
        k => panic!("the interpreter does not handle {k:?}"),
    })
}

fn points(ranges: &[(Var, i64, i64)]) -> Vec<Vec<(Var, i64)>> {
    let mut out = vec![Vec::new()];
    for (v, lo, hi) in ranges {
        out = out
            .into_iter()
            .flat_map(|p| {
                (*lo..=*hi).map(move |x| {
                    let mut q = p.clone();
                    q.push((v.clone(), x));
                    q
                })
            })
            .collect();
    }
    out
}

fn check(seed: u64, count: usize, use_ranges: bool) -> (usize, usize) {
    let (x, y, z) = (Var::int32("x"), Var::int32("y"), Var::int32("z"));
    let ranges = [(x.clone(), 0, 7), (y.clone(), -5, 5), (z.clone(), 0, 3)];
    let pts = points(&ranges);
    let vars = [x, y, z];
    let mut rng = Rng(Lcg::new(seed));
    let (mut changed, mut compared) = (0, 0);
    for n in 0..count {
        let mut g = Gen {
            rng: &mut rng,
            vars: vars.to_vec(),
        };
        let mut e = g.int(4);
        while e.as_int().is_some() || e.as_var().is_some() {
            e = g.int(4);
        }
        let mut an = Analyzer::new();
        if use_ranges {
            for (v, lo, hi) in &ranges {
                an.bind(v, &Range::new(*lo, *hi + 1));
            }
        }
        let s = an.simplify(&e);
        if !s.same_as(&e) {
            changed += 1;
        }
        if std::env::var("KILN_SHOW_SIMPLIFY").is_ok() && n < 40 {
            println!("{e}\n    => {s}");
        }
        for p in &pts {
            let Ok(want) = eval(&e, p) else { continue };
            compared += 1;
            match eval(&s, p) {
                Ok(got) if got == want => {}
                got => panic!(
                    "expression #{n} (seed {seed}, ranges {use_ranges}) differs at {:?}:\n  \
                     original   {e} = {want}\n  simplified {s} = {got:?}",
                    p.iter()
                        .map(|(v, x)| format!("{}={x}", v.name()))
                        .collect::<Vec<_>>()
                ),
            }
        }
    }
    (changed, compared)
}

#[test]
fn simplified_expressions_evaluate_like_the_originals_in_range() {
    let (changed, compared) = check(0x9e37_79b9_7f4a_7c15, 3000, true);
    assert!(
        changed > 2000,
        "most random expressions simplify ({changed})"
    );
    assert!(compared > 600_000, "{compared} points compared");
}

#[test]
fn simplified_expressions_evaluate_like_the_originals_without_ranges() {
    let (changed, _) = check(0x2545_f491_4f6c_dd1d, 3000, false);
    assert!(
        changed > 2000,
        "most random expressions simplify ({changed})"
    );
}

#[test]
fn let_bindings_evaluate_like_the_originals() {
    let (x, t) = (Var::int32("x"), Var::int32("t"));
    let body = floordiv(&t * 4 + &x, 4) + floormod(&t, 3);
    let e = PrimExpr::let_raw(t.clone(), &x * 2 + 1, body);
    let mut an = Analyzer::new();
    an.bind(&x, &Range::new(0, 10));
    let s = an.simplify(&e);
    for v in 0..10 {
        let env = [(x.clone(), v)];
        assert_eq!(
            eval(&e, &env).unwrap(),
            eval(&s, &env).unwrap(),
            "{e} vs {s}"
        );
    }
}

#[test]
fn divisions_by_a_multiple_of_every_coefficient_drop_the_factor() {
    // `(f*x + k*y + c) / d` and `% d` with `f` dividing every coefficient and `d`: the
    // constant's part below `f` cannot carry, so the factor goes (`(4x + 1) / 68` is `x / 17`).
    let (x, y) = (Var::int32("x"), Var::int32("y"));
    let raw = |op, a: PrimExpr, b: i64| PrimExpr::binary_raw(op, a, PrimExpr::i32(b));
    for (f, d) in [(4, 68), (2, 34), (3, 12), (8, 16)] {
        for c in -9..=9 {
            let sum = &x * f + &y * (2 * f) + c;
            for op in [BinOp::FloorDiv, BinOp::FloorMod] {
                let e = raw(op, sum.clone(), d);
                let s = Analyzer::new().simplify(&e);
                for xv in -40..40 {
                    for yv in -5..5 {
                        let env = [(x.clone(), xv), (y.clone(), yv)];
                        assert_eq!(
                            eval(&e, &env).unwrap(),
                            eval(&s, &env).unwrap(),
                            "{e} vs {s}"
                        );
                    }
                }
            }
        }
    }
    let e = PrimExpr::binary_raw(BinOp::FloorDiv, &x * 4 + 1, PrimExpr::i32(68));
    let rows = PrimExpr::binary_raw(BinOp::FloorDiv, &x * 2 + 1, PrimExpr::i32(34));
    let mut an = Analyzer::new();
    let (a, b) = (an.simplify(&e), an.simplify(&rows));
    assert!(structural_equal(&a, &b), "{a} vs {b}");
    assert_eq!(a.to_string(), "x // 17");
}
