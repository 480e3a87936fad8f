//! A structural hash of primitive functions (TVM's `StructuralHash`), the key of the build's
//! function cache: functions that are structurally equal
//! ([`crate::ir::structural_equal`]: same ops, attributes, parameter types, constant values,
//! same dataflow up to variable renaming) hash equal, so identical fused groups compile once.
//! Hash equality is confirmed with `structural_equal` before sharing.

use crate::ir::attrs::{fmt_value, Attrs};
use crate::ir::visit::post_order;
use crate::ir::{Expr, Function};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Hashes an attribute map independently of entry order.
fn hash_attrs(h: &mut DefaultHasher, attrs: &Attrs<'_>) {
    let mut items: Vec<(String, String)> = attrs
        .entries()
        .into_iter()
        .map(|(k, v)| (k, fmt_value(&v)))
        .collect();
    items.sort();
    items.hash(h);
}

/// The structural hash of `f`: parameters by position and type, nodes by kind, operator
/// name, attributes, constant bytes and the positions of their inputs in post order.
pub fn structural_hash(f: &Function) -> u64 {
    let mut h = DefaultHasher::new();
    let mut index: HashMap<usize, usize> = HashMap::new();
    for (i, p) in f.params().iter().enumerate() {
        index.insert(p.expr().key(), i);
        p.ty().map(|t| t.to_string()).hash(&mut h);
    }
    hash_attrs(&mut h, &Attrs::new(f.attrs()));
    let base = f.params().len();
    let order = post_order(f.body());
    for (k, e) in order.iter().enumerate() {
        index.entry(e.key()).or_insert(base + k);
        let refs = |xs: &[Expr]| -> Vec<usize> {
            xs.iter()
                .map(|x| index.get(&x.key()).copied().unwrap_or(usize::MAX))
                .collect()
        };
        match e {
            Expr::Var(_) => ("var", index.get(&e.key()).copied()).hash(&mut h),
            Expr::Op(o) => ("op", o.name.as_str()).hash(&mut h),
            Expr::Constant(c) => {
                ("const", c.data.shape(), c.data.dtype().to_string()).hash(&mut h);
                c.data.to_bytes().ok().hash(&mut h);
            }
            Expr::Call(c) => {
                ("call", e.op_name().unwrap_or("<function>")).hash(&mut h);
                hash_attrs(&mut h, &Attrs::new(&c.attrs));
                refs(&c.args).hash(&mut h);
            }
            Expr::Tuple(t) => ("tuple", refs(&t.fields)).hash(&mut h),
            Expr::TupleGetItem(g) => {
                ("get", g.index, refs(std::slice::from_ref(&g.tuple))).hash(&mut h)
            }
            Expr::Function(g) => ("fn", structural_hash(g)).hash(&mut h),
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Type, Var};
    use crate::op::mk;

    fn relu_add(shape: &[i64], name: &str) -> Function {
        let a = Var::new(name, Type::f32(shape));
        let b = Var::new("b", Type::f32(shape));
        let body = mk(
            "nn.relu",
            vec![mk("add", vec![a.expr(), b.expr()], &[])],
            &[],
        );
        Function::new(vec![a, b], body)
    }

    #[test]
    fn renamed_copies_hash_equal_and_other_shapes_do_not() {
        let f = relu_add(&[2, 3], "x");
        let g = relu_add(&[2, 3], "y");
        let other = relu_add(&[3, 2], "x");
        assert_eq!(structural_hash(&f), structural_hash(&g));
        assert_ne!(structural_hash(&f), structural_hash(&other));
    }
}
