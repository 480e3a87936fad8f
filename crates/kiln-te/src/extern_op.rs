//! Operations written as a TIR statement (`te.ExternOp`, what TVM's `te.extern` builds): for
//! computations that are not a point-by-point expression, such as a recurrence whose every
//! step reads the step before (recurrent network cells, scans, sorts).
//!
//! The body reads its inputs through the input tensors themselves (a `te.Tensor` is a
//! `tir.Buffer`, so `input.load(..)` on the buffer view is a tensor read that lowering maps to
//! the input's real buffer) and writes (and may read back) its outputs through one placeholder
//! buffer per output, which lowering maps to the output's buffer. Scratch memory is allocated
//! inside the body with `Allocate`. The stage of an extern operation has no loops a schedule
//! could change: it is emitted as written, once, covering its whole outputs.

use crate::tensor::{upcast_op, OperationObj, Tensor};
use kiln_ffi::{DataType, Error, Map, Object, ObjectRef, Result};
use kiln_tir::node::NodeList;
use kiln_tir::{Buffer, PrimExpr, Stmt};

/// A tensor computed by a TIR statement (`te.ExternOp`).
#[derive(Object)]
#[object(type_key = "te.ExternOp", parent = OperationObj)]
#[repr(C)]
pub struct ExternOpObj {
    /// Name, tag, attributes.
    #[object(base)]
    pub parent: OperationObj,
    /// The tensors the body reads, in order.
    pub inputs: NodeList<Tensor>,
    /// One buffer per output, through which the body writes (and reads back) that output.
    pub output_placeholders: NodeList<Buffer>,
    /// The statement that computes every output.
    pub body: Stmt,
}

/// One output of [`extern_op`]: its shape and element type.
#[derive(Clone, Debug)]
pub struct ExternOutput {
    /// The shape (entries may be symbolic).
    pub shape: Vec<PrimExpr>,
    /// The element type.
    pub dtype: DataType,
}

impl ExternOutput {
    /// An output of `shape` and `dtype`.
    pub fn new(shape: Vec<PrimExpr>, dtype: DataType) -> ExternOutput {
        ExternOutput { shape, dtype }
    }
}

/// Tensors computed by a statement (TVM's `te.extern`): `body` gets the inputs seen as buffers
/// (their loads are reads of the input tensors) and one fresh buffer per output, and returns
/// the statement that fills every output. Returns one tensor per output.
///
/// ```
/// use kiln_te::*;
/// use kiln_tir::{DataType, ForKind, PrimExpr, Stmt, Var};
/// let f32 = DataType::float(32);
/// let a = placeholder(&[PrimExpr::i32(8)], f32, "A");
/// // A running sum: each element reads the one written before it.
/// let out = extern_op("prefix", "", &[a.clone()], &[ExternOutput::new(vec![PrimExpr::i32(8)], f32)], |ins, outs| {
///     let i = Var::new("i", DataType::int(32));
///     let prev = kiln_te::if_then_else(i.to_expr().gt(0), outs[0].load(vec![i.to_expr() - 1]), PrimExpr::f32(0.0));
///     let step = outs[0].store(prev + ins[0].load(vec![i.to_expr()]), vec![i.to_expr()]);
///     Ok(Stmt::for_loop(&i, PrimExpr::i32(0), PrimExpr::i32(8), ForKind::Serial, step))
/// }).unwrap();
/// let s = create_schedule(&[out[0].op().clone()]);
/// let f = lower(&s, &[a, out[0].clone()], "prefix").unwrap();
/// assert!(f.to_string().contains("prefix[i] ="));
/// ```
///
/// # Errors
/// What `body` returns, or a `ValueError` for an operation without outputs.
pub fn extern_op(
    name: &str,
    tag: &str,
    inputs: &[Tensor],
    outputs: &[ExternOutput],
    body: impl FnOnce(&[Buffer], &[Buffer]) -> Result<Stmt>,
) -> Result<Vec<Tensor>> {
    if outputs.is_empty() {
        return Err(Error::value_error(format!("te.extern `{name}`: no output")));
    }
    let ins: Vec<Buffer> = inputs.iter().map(Tensor::as_buffer).collect();
    let outs: Vec<Buffer> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let n = if i == 0 {
                name.to_string()
            } else {
                format!("{name}.v{i}")
            };
            Buffer::decl(&n, o.dtype, o.shape.clone())
        })
        .collect();
    let stmt = body(&ins, &outs)?;
    let op = upcast_op(ObjectRef::new(ExternOpObj {
        parent: OperationObj {
            name: name.into(),
            tag: tag.into(),
            attrs: Map::new(Vec::new()),
        },
        inputs: inputs.to_vec().into(),
        output_placeholders: outs.into(),
        body: stmt,
    }));
    Ok((0..op.num_outputs()).map(|i| op.output(i)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compute, create_schedule, lower, placeholder};
    use kiln_tir::{ForKind, Var};

    /// `out[i] = out[i - 1] + a[i]` over 8 elements, reading its own output back.
    fn prefix_sum(a: &Tensor) -> Tensor {
        let f32 = DataType::float(32);
        extern_op(
            "prefix",
            "scan",
            std::slice::from_ref(a),
            &[ExternOutput::new(vec![PrimExpr::i32(8)], f32)],
            |ins, outs| {
                let i = Var::new("i", DataType::int(32));
                let prev = crate::if_then_else(
                    i.to_expr().gt(0),
                    outs[0].load(vec![i.to_expr() - 1]),
                    PrimExpr::f32(0.0),
                );
                let step = outs[0].store(prev + ins[0].load(vec![i.to_expr()]), vec![i.to_expr()]);
                Ok(Stmt::for_loop(
                    &i,
                    PrimExpr::i32(0),
                    PrimExpr::i32(8),
                    ForKind::Serial,
                    step,
                ))
            },
        )
        .unwrap()
        .remove(0)
    }

    #[test]
    fn lowering_maps_placeholders_and_inputs_to_real_buffers() {
        let a = placeholder(&[PrimExpr::i32(8)], DataType::float(32), "A");
        let doubled = compute(&[PrimExpr::i32(8)], |i| a.at_vars(i) * 2.0, "D");
        let p = prefix_sum(&doubled);
        assert_eq!(p.op().input_tensors(), vec![doubled.clone()]);
        assert_eq!(p.op().tag(), "scan");
        let s = create_schedule(&[p.op().clone()]);
        let f = lower(&s, &[a, p], "f").unwrap();
        let text = f.to_string();
        // The intermediate compute is realized (allocated and filled) before the extern body,
        // which reads it and its own output by their real buffers.
        let d_at = text.find("D[i] = A[i]").expect(&text);
        let body_at = text.find("prefix[i_1] =").expect(&text);
        assert!(d_at < body_at, "{text}");
        assert!(
            text.contains("prefix[i_1 - 1], T.float32(0.0)) + D[i_1]"),
            "{text}"
        );
    }

    #[test]
    fn extern_stages_refuse_compute_at_and_inline() {
        let a = placeholder(&[PrimExpr::i32(8)], DataType::float(32), "A");
        let p = prefix_sum(&a);
        let c = compute(&[PrimExpr::i32(8)], |i| p.at_vars(i) + 1.0, "C");
        let s = create_schedule(&[c.op().clone()]);
        let e = s
            .stage(&p)
            .compute_at(&s.stage(&c), &c.axis(0))
            .unwrap_err();
        assert!(e.to_string().contains("not a compute stage"), "{e}");
        let e = s.stage(&p).compute_inline().unwrap_err();
        assert!(e.to_string().contains("prefix"), "{e}");
        // At the root it lowers, before its consumer.
        let f = lower(&s, &[a, c], "g").unwrap().to_string();
        let (body_at, c_at) = (f.find("prefix[").expect(&f), f.find("C[").expect(&f));
        assert!(body_at < c_at, "{f}");
    }

    #[test]
    fn no_outputs_is_an_error() {
        let e = extern_op("none", "", &[], &[], |_, _| Ok(Stmt::no_op())).unwrap_err();
        assert!(e.to_string().contains("no output"), "{e}");
    }
}
