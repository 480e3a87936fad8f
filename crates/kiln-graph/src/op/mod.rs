//! The operator registry: what each graph operator declares (TVM's `OpRegistry` +
//! `TOpPattern` + type relations).
//!
//! An operator is one [`OpDef`]: its name, its argument names, its attribute schema
//! ([`AttrSpec`]: names, kinds and defaults), its type relation (argument types + attributes
//! -> result type; error messages name the argument and the mismatch, and
//! [`InferType`](crate::transform::infer_type) prefixes the op name), its fusion pattern
//! ([`OpPattern`]), its lowering ([`ComputeFn`]: the TOPI compute the graph build runs, TVM's
//! `FTVMCompute`), the x86 schedule of the fused function it leads when it is the heaviest op
//! there ([`ScheduleFn`], TVM's strategy), and optionally a reference evaluator that
//! [`FoldConstant`](crate::transform::fold_constant) uses.
//!
//! One operator (or one family of same-shaped operators, made by a macro) per file under
//! `nn/`, `ml/`, `tensor/`, `reduce/` and `transform/`; each file has a `defs()` function listed in
//! [`all_defs`], which builds the registry on first use. Adding an operator is one file and one
//! line in its folder's `defs()`.

pub mod eval;
pub mod ml;
pub mod nn;
pub mod reduce;
pub mod tensor;
pub mod transform;

use crate::ir::attrs::{make_map, AttrValue, Attrs};
use crate::ir::{Expr, Type};
use kiln_ffi::{DataType, Error, Map, Result};
use kiln_runtime::tensor::Tensor;
use std::collections::HashMap;
use std::sync::OnceLock;

/// How an operator fuses (TVM's `OpPatternKind`, same numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum OpPattern {
    /// Output element i depends on input element i only.
    ElemWise = 0,
    /// Elementwise with numpy broadcasting.
    Broadcast = 1,
    /// Each output element depends on one input element through an index map.
    Injective = 2,
    /// A commutative reduction.
    CommReduce = 3,
    /// A heavy op (conv2d, dense) that can take an elementwise epilogue.
    OutEWiseFusable = 4,
    /// A tuple node.
    Tuple = 7,
    /// Never fused.
    Opaque = 8,
}

/// The kind of an attribute value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// An integer.
    Int,
    /// A float.
    Float,
    /// A bool.
    Bool,
    /// A string.
    Str,
    /// A list of integers.
    Ints,
}

/// One declared attribute: name, kind and default (`None`: optional, unset by default).
#[derive(Clone, Debug)]
pub struct AttrSpec {
    /// The name.
    pub name: &'static str,
    /// The kind.
    pub kind: AttrKind,
    /// The default (`AttrValue::None` for an optional attribute).
    pub default: AttrValue,
}

impl AttrSpec {
    /// An attribute with a default.
    pub fn new(name: &'static str, kind: AttrKind, default: impl Into<AttrValue>) -> Self {
        AttrSpec {
            name,
            kind,
            default: default.into(),
        }
    }

    /// An optional attribute (unset unless given).
    pub fn optional(name: &'static str, kind: AttrKind) -> Self {
        AttrSpec {
            name,
            kind,
            default: AttrValue::None,
        }
    }
}

/// What a type relation sees: the op, the argument types and the attributes.
pub struct RelCtx<'a> {
    /// The operator.
    pub op: &'a OpDef,
    /// The argument types.
    pub args: &'a [Type],
    /// The attributes (completed with defaults).
    pub attrs: Attrs<'a>,
}

impl RelCtx<'_> {
    /// The name of argument `i`.
    pub fn arg_name(&self, i: usize) -> String {
        match self.op.inputs.get(i) {
            Some(n) if !self.op.variadic => n.to_string(),
            _ => format!("#{i}"),
        }
    }

    /// Argument `i` as a tensor type, or an error naming the argument.
    pub fn tensor(&self, i: usize) -> Result<(&[i64], DataType)> {
        self.args[i].as_tensor().ok_or_else(|| {
            self.err(format!(
                "argument `{}` must be a tensor, got {}",
                self.arg_name(i),
                self.args[i]
            ))
        })
    }

    /// Argument `i` as a tensor of rank `rank`.
    pub fn tensor_rank(&self, i: usize, rank: usize) -> Result<(&[i64], DataType)> {
        let (s, d) = self.tensor(i)?;
        if s.len() != rank {
            return Err(self.err(format!(
                "argument `{}` must be {rank}-D, got {}",
                self.arg_name(i),
                self.args[i]
            )));
        }
        Ok((s, d))
    }

    /// An error about this op (the op name is added by `InferType`).
    pub fn err(&self, msg: impl Into<String>) -> Error {
        Error::type_error(msg.into())
    }

    /// The dtype of a matrix product of arguments `i` (data) and `j` (weight):
    /// [`kiln_topi::nn::product_dtype`] (one dtype, or float data and an integer weight).
    pub fn product_dtype(&self, i: usize, j: usize) -> Result<DataType> {
        let (a, b) = (self.tensor(i)?.1, self.tensor(j)?.1);
        kiln_topi::nn::product_dtype(a, b).ok_or_else(|| {
            self.err(format!(
                "argument `{}` has dtype {b} but `{}` has {a}: a product needs one dtype, or float data and an integer weight",
                self.arg_name(j),
                self.arg_name(i)
            ))
        })
    }

    /// Checks that arguments `i` and `j` have one dtype.
    pub fn same_dtype(&self, i: usize, j: usize) -> Result<DataType> {
        let (a, b) = (self.tensor(i)?.1, self.tensor(j)?.1);
        if a != b {
            return Err(self.err(format!(
                "argument `{}` has dtype {b} but `{}` has {a}",
                self.arg_name(j),
                self.arg_name(i)
            )));
        }
        Ok(a)
    }
}

/// A type relation.
pub type TypeRel = fn(&RelCtx<'_>) -> Result<Type>;

/// A reference evaluator: constant arguments and attributes -> value of the result type.
pub type EvalFn = fn(&[Tensor], Attrs<'_>, &Type) -> Result<Tensor>;

/// A lowering: the op's TOPI compute over its argument tensors (tuple fields flattened, in
/// order), with its attributes, for code that runs on the given CPU (which may pick between
/// computes of the op, as TVM's strategies do); one tensor per result.
pub type ComputeFn =
    fn(&[kiln_te::Tensor], &Attrs<'_>, &kiln_tir::CpuDesc) -> Result<Vec<kiln_te::Tensor>>;

pub use kiln_topi::schedule::ScheduleFn;

/// Everything the compiler knows about an operator.
#[derive(Clone)]
pub struct OpDef {
    /// The registered name.
    pub name: &'static str,
    /// Argument names (the last one repeats when `variadic`).
    pub inputs: Vec<&'static str>,
    /// Takes any number (>= 1) of arguments.
    pub variadic: bool,
    /// The attribute schema.
    pub attrs: Vec<AttrSpec>,
    /// The fusion pattern.
    pub pattern: OpPattern,
    /// The type relation.
    pub rel: TypeRel,
    /// The reference evaluator, if any.
    pub eval: Option<EvalFn>,
    /// The lowering (none for ops that a pass rewrites away before the build, see
    /// `rewritten_by`).
    pub compute: Option<ComputeFn>,
    /// The pass that replaces every call of this op before the build, for ops without a
    /// lowering (`nn.batch_norm` and `nn.dropout`: SimplifyInference).
    pub rewritten_by: Option<&'static str>,
    /// The x86 schedule of a fused function whose heaviest op this is (none: the injective or
    /// reduction schedule its pattern implies).
    pub schedule: Option<ScheduleFn>,
    /// The output holds the input's elements in the same order (reshape, squeeze,
    /// expand_dims, flatten): a function of such ops alone needs no kernel, its output is a
    /// view of its input's storage (the graph codegen's `__nop` nodes).
    pub view: bool,
}

impl OpDef {
    /// An op with these argument names, no attributes, relation `rel` and `pattern`.
    pub fn new(
        name: &'static str,
        inputs: &[&'static str],
        pattern: OpPattern,
        rel: TypeRel,
    ) -> Self {
        OpDef {
            name,
            inputs: inputs.to_vec(),
            variadic: false,
            attrs: Vec::new(),
            pattern,
            rel,
            eval: None,
            compute: None,
            schedule: None,
            rewritten_by: None,
            view: false,
        }
    }

    /// Marks the op a view: its output is its input's elements in the same order.
    pub fn view(mut self) -> Self {
        self.view = true;
        self
    }

    /// Declares that `pass` replaces every call of this op before the build (so it needs no
    /// lowering).
    pub fn rewritten_by(mut self, pass: &'static str) -> Self {
        self.rewritten_by = Some(pass);
        self
    }

    /// Sets the lowering.
    pub fn compute(mut self, f: ComputeFn) -> Self {
        self.compute = Some(f);
        self
    }

    /// Sets the x86 schedule of fused functions this op leads.
    pub fn schedule(mut self, f: ScheduleFn) -> Self {
        self.schedule = Some(f);
        self
    }

    /// Adds attributes.
    pub fn attrs(mut self, attrs: Vec<AttrSpec>) -> Self {
        self.attrs = attrs;
        self
    }

    /// Marks the op variadic.
    pub fn variadic(mut self) -> Self {
        self.variadic = true;
        self
    }

    /// Adds a reference evaluator.
    pub fn eval(mut self, f: EvalFn) -> Self {
        self.eval = Some(f);
        self
    }

    /// Checks the arity and completes/validates `given` attributes against the schema.
    pub fn normalize(&self, nargs: usize, given: &[(&str, AttrValue)]) -> Result<Map> {
        let arity_ok = if self.variadic {
            nargs >= 1
        } else {
            nargs == self.inputs.len()
        };
        if !arity_ok {
            return Err(Error::type_error(format!(
                "{}: expects {} argument(s) ({}), got {nargs}",
                self.name,
                if self.variadic {
                    "1 or more".to_string()
                } else {
                    self.inputs.len().to_string()
                },
                self.inputs.join(", ")
            )));
        }
        for (k, _) in given {
            if !self.attrs.iter().any(|s| s.name == *k) {
                let known: Vec<&str> = self.attrs.iter().map(|s| s.name).collect();
                return Err(Error::value_error(format!(
                    "{}: unknown attribute `{k}` (known: {})",
                    self.name,
                    known.join(", ")
                )));
            }
        }
        let mut out: Vec<(&str, AttrValue)> = Vec::new();
        for spec in &self.attrs {
            let v = given
                .iter()
                .rev()
                .find(|(k, _)| *k == spec.name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| spec.default.clone());
            let ok = matches!(
                (&v, spec.kind),
                (AttrValue::None, _)
                    | (AttrValue::Int(_), AttrKind::Int)
                    | (AttrValue::Int(_) | AttrValue::Float(_), AttrKind::Float)
                    | (AttrValue::Bool(_) | AttrValue::Int(_), AttrKind::Bool)
                    | (AttrValue::Str(_), AttrKind::Str)
                    | (AttrValue::Ints(_) | AttrValue::Int(_), AttrKind::Ints)
            );
            if !ok {
                return Err(Error::type_error(format!(
                    "{}: attribute `{}` must be {:?}, got {v:?}",
                    self.name, spec.name, spec.kind
                )));
            }
            let v = match (v, spec.kind) {
                (AttrValue::Int(i), AttrKind::Float) => AttrValue::Float(i as f64),
                (AttrValue::Int(i), AttrKind::Bool) => AttrValue::Bool(i != 0),
                (AttrValue::Int(i), AttrKind::Ints) => AttrValue::Ints(vec![i]),
                (v, _) => v,
            };
            out.push((spec.name, v));
        }
        Ok(make_map(&out))
    }
}

/// All op definitions, from every op file.
fn all_defs() -> Vec<OpDef> {
    let mut v = Vec::new();
    nn::defs(&mut v);
    ml::defs(&mut v);
    tensor::defs(&mut v);
    reduce::defs(&mut v);
    transform::defs(&mut v);
    v
}

fn registry() -> &'static HashMap<&'static str, OpDef> {
    static REG: OnceLock<HashMap<&'static str, OpDef>> = OnceLock::new();
    REG.get_or_init(|| all_defs().into_iter().map(|d| (d.name, d)).collect())
}

/// The definition of operator `name`, or a `ValueError`.
pub fn get(name: &str) -> Result<&'static OpDef> {
    registry()
        .get(name)
        .ok_or_else(|| Error::value_error(format!("unknown operator `{name}`")))
}

/// The names of all registered operators, sorted.
pub fn list() -> Vec<&'static str> {
    let mut v: Vec<&str> = registry().keys().copied().collect();
    v.sort();
    v
}

/// A call of operator `name` with attributes completed with defaults and validated.
pub fn call(name: &str, args: Vec<Expr>, attrs: &[(&str, AttrValue)]) -> Result<Expr> {
    let def = get(name)?;
    let map = def.normalize(args.len(), attrs)?;
    Ok(Expr::call_raw(Expr::op(name), args, map))
}

/// [`call`] that panics on misuse (for tests and passes building known-good calls).
pub fn mk(name: &str, args: Vec<Expr>, attrs: &[(&str, AttrValue)]) -> Expr {
    call(name, args, attrs).unwrap_or_else(|e| panic!("{e}"))
}

/// Numpy broadcasting of two shapes; the error names both. A dimension known only at run
/// time (-1) meets a known one as that one (it must be equal at run time), another -1 or 1 as
/// -1.
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> std::result::Result<Vec<i64>, String> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 || da == -1 {
            db
        } else if db == -1 {
            da
        } else {
            return Err(format!(
                "shapes {a:?} and {b:?} do not broadcast (dimension {i}: {da} vs {db})"
            ));
        };
    }
    Ok(out)
}

/// `axis` in `[-ndim, ndim)` as a non-negative index, or an error.
pub fn normalize_axis(axis: i64, ndim: usize) -> std::result::Result<usize, String> {
    let n = ndim as i64;
    if axis < -n || axis >= n {
        return Err(format!("axis {axis} is out of range for rank {ndim}"));
    }
    Ok(if axis < 0 { axis + n } else { axis } as usize)
}

/// One lowered tensor as a [`ComputeFn`] result.
pub fn one(t: Result<kiln_te::Tensor>) -> Result<Vec<kiln_te::Tensor>> {
    t.map(|t| vec![t])
}

/// Argument `k` of a [`ComputeFn`] call of `op`, or an error naming both.
pub fn input<'a>(op: &str, inputs: &'a [kiln_te::Tensor], k: usize) -> Result<&'a kiln_te::Tensor> {
    inputs
        .get(k)
        .ok_or_else(|| Error::value_error(format!("{op}: missing argument {k}")))
}

/// A shorthand: an attribute value from a literal.
pub fn attr(v: impl Into<AttrValue>) -> AttrValue {
    v.into()
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_operator_lowers_or_is_rewritten_before_the_build() {
        // The ONNX converter emits registered operators only (`call` checks), so this covers
        // everything it can produce.
        for name in list() {
            let def = get(name).unwrap();
            assert!(
                def.compute.is_some() || def.rewritten_by.is_some(),
                "operator `{name}` has a type relation but no lowering"
            );
            assert!(
                def.compute.is_none() || def.rewritten_by.is_none(),
                "operator `{name}` is lowered and said to be rewritten away"
            );
            if def.schedule.is_some() {
                assert!(
                    def.pattern >= OpPattern::CommReduce,
                    "operator `{name}` names a schedule but is {:?}",
                    def.pattern
                );
            }
        }
        let passes = ["SimplifyInference"];
        for name in list() {
            if let Some(p) = get(name).unwrap().rewritten_by {
                assert!(passes.contains(&p), "{name}: unknown pass {p}");
            }
        }
    }
}
