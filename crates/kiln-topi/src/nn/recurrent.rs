//! Recurrent layers (ONNX `LSTM`, `GRU` and `RNN`, one direction): the whole sequence in one
//! kernel, a TIR statement (an extern operation) whose time loop runs one fused cell per step.
//!
//! The input projection `X W^T + b` of every step is not part of it: the graph computes it for
//! the whole sequence with one matrix product before the layer (`xw`, `[T, B, G*H]` for `G`
//! gates), so the layer only does what must be sequential. Per step and batch row it computes
//! the recurrent product `h R^T` (a register-tiled vector-matrix product over the transposed
//! weights `rt`, `[H, G*H]`, tiles sized from the target's vector width and register count),
//! then the gates, the new state and the output row, all in one pass.
//!
//! `seq_lens` (`[B]`, int32, clamped to `[0, T]`) gives each batch row its length: steps at and
//! past it output zeros and leave the state as it is; a reverse layer runs each row from its
//! own last step down to 0 (ONNX's semantics). Gate pre-activations are clipped to
//! `[-clip, clip]` when `clip` is set.

use crate::transform::util::{constant, for_extent, for_kind, for_n, index_dtype, value_error};
use kiln_ffi::{DataType, Result};
use kiln_te::{extern_op, ExternOutput, Tensor};
use kiln_tir::{cast, max, min, op, select, Buffer, CpuDesc, ForKind, PrimExpr, Stmt, Var};

/// An activation function of a recurrent cell (ONNX's list), with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Activation {
    /// The function.
    pub kind: ActivationKind,
    /// Its first parameter (ignored by functions without one).
    pub alpha: f64,
    /// Its second parameter (ignored by functions without one).
    pub beta: f64,
}

/// The activation functions ONNX's recurrent operators accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationKind {
    /// `max(x, 0)`.
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `alpha * x + beta`.
    Affine,
    /// `x` if `x >= 0` else `alpha * x`.
    LeakyRelu,
    /// `x` if `x > alpha` else 0.
    ThresholdedRelu,
    /// `alpha * tanh(beta * x)`.
    ScaledTanh,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid,
    /// `x` if `x >= 0` else `alpha * (e^x - 1)`.
    Elu,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `ln(1 + e^x)`.
    Softplus,
}

impl ActivationKind {
    /// The function named `name` (ONNX spelling, any case), and how many parameters it takes.
    pub fn parse(name: &str) -> Option<(ActivationKind, usize)> {
        use ActivationKind::*;
        Some(match name.to_ascii_lowercase().as_str() {
            "relu" => (Relu, 0),
            "tanh" => (Tanh, 0),
            "sigmoid" => (Sigmoid, 0),
            "affine" => (Affine, 2),
            "leakyrelu" => (LeakyRelu, 1),
            "thresholdedrelu" => (ThresholdedRelu, 1),
            "scaledtanh" => (ScaledTanh, 2),
            "hardsigmoid" => (HardSigmoid, 2),
            "elu" => (Elu, 1),
            "softsign" => (Softsign, 0),
            "softplus" => (Softplus, 0),
            _ => return None,
        })
    }

    /// The ONNX operator defaults of `alpha` and `beta`.
    pub fn defaults(self) -> (f64, f64) {
        use ActivationKind::*;
        match self {
            Affine => (1.0, 0.0),
            LeakyRelu => (0.01, 0.0),
            ThresholdedRelu | Elu => (1.0, 0.0),
            ScaledTanh => (1.0, 1.0),
            HardSigmoid => (0.2, 0.5),
            _ => (0.0, 0.0),
        }
    }

    /// The ONNX name.
    pub fn name(self) -> &'static str {
        use ActivationKind::*;
        match self {
            Relu => "Relu",
            Tanh => "Tanh",
            Sigmoid => "Sigmoid",
            Affine => "Affine",
            LeakyRelu => "LeakyRelu",
            ThresholdedRelu => "ThresholdedRelu",
            ScaledTanh => "ScaledTanh",
            HardSigmoid => "HardSigmoid",
            Elu => "Elu",
            Softsign => "Softsign",
            Softplus => "Softplus",
        }
    }
}

impl Activation {
    /// The activation named `name` with its parameters.
    ///
    /// # Errors
    /// A `ValueError` for a name ONNX does not define.
    pub fn new(name: &str, alpha: f64, beta: f64) -> Result<Activation> {
        let (kind, _) = ActivationKind::parse(name).ok_or_else(|| {
            value_error(
                "recurrent",
                format!(
                    "unknown activation `{name}` (known: Relu, Tanh, Sigmoid, Affine, LeakyRelu, \
                     ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"
                ),
            )
        })?;
        Ok(Activation { kind, alpha, beta })
    }

    /// The function applied to `x`.
    pub fn apply(&self, x: PrimExpr) -> PrimExpr {
        use ActivationKind::*;
        let t = x.dtype();
        let k = |v: f64| constant(t, v);
        let (a, b) = (self.alpha, self.beta);
        match self.kind {
            Relu => max(x, k(0.0)),
            Tanh => op::tanh(x),
            Sigmoid => crate::elemwise::sigmoid_expr(x),
            Affine => x * k(a) + k(b),
            LeakyRelu => select(x.ge(k(0.0)), x.clone(), x * k(a)),
            ThresholdedRelu => select(x.gt(k(a)), x, k(0.0)),
            ScaledTanh => op::tanh(x * k(b)) * k(a),
            HardSigmoid => max(k(0.0), min(k(1.0), x * k(a) + k(b))),
            Elu => select(x.ge(k(0.0)), x.clone(), (op::exp(x) - k(1.0)) * k(a)),
            Softsign => x.clone() / (op::abs(x) + k(1.0)),
            Softplus => op::log(op::exp(x) + k(1.0)),
        }
    }
}

/// What cell a recurrent layer runs, with its cell-specific options.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// LSTM (gates `i, o, f, c`): activations `f, g, h`; `input_forget` couples the forget
    /// gate to the input gate (`f = 1 - i`); peepholes `p` (`[3H]`: `i, o, f`) are an input.
    Lstm {
        /// The three activations.
        acts: [Activation; 3],
        /// `f = 1 - i`.
        input_forget: bool,
    },
    /// GRU (gates `z, r, h`): activations `f, g`; `linear_before_reset` applies the reset gate
    /// after the recurrent product of the hidden gate; its recurrent bias is an input.
    Gru {
        /// The two activations.
        acts: [Activation; 2],
        /// ONNX's `linear_before_reset`.
        linear_before_reset: bool,
    },
    /// A plain recurrent cell: `h = f(xw + h R^T)`.
    Rnn {
        /// The activation.
        act: Activation,
    },
}

impl Cell {
    /// The number of gates.
    pub fn gates(&self) -> i64 {
        match self {
            Cell::Lstm { .. } => 4,
            Cell::Gru { .. } => 3,
            Cell::Rnn { .. } => 1,
        }
    }
}

/// The inputs of a recurrent layer (see the module documentation for the shapes).
pub struct RecurrentInputs<'a> {
    /// The input projection of every step, `[T, B, G*H]`, biases included (for GRU, the
    /// hidden gate's recurrent bias excluded).
    pub xw: &'a Tensor,
    /// The recurrent weights transposed, `[H, G*H]`.
    pub rt: &'a Tensor,
    /// The initial hidden state, `[B, H]`.
    pub h0: &'a Tensor,
    /// LSTM: the initial cell state, `[B, H]`.
    pub c0: Option<&'a Tensor>,
    /// LSTM: the peepholes, `[3H]`.
    pub p: Option<&'a Tensor>,
    /// GRU: the hidden gate's recurrent bias, `[H]`.
    pub rb: Option<&'a Tensor>,
    /// The length of each batch row, `[B]`, int32.
    pub seq_lens: &'a Tensor,
}

/// A recurrent layer over the whole sequence: returns `y` (`[T, B, H]`), the last hidden state
/// (`[B, H]`) and, for LSTM, the last cell state (`[B, H]`).
///
/// # Errors
/// A `ValueError` for shapes that do not fit together or are not static, a missing
/// cell-specific input, or a non-float `xw`.
pub fn recurrent(
    inp: &RecurrentInputs<'_>,
    cell: &Cell,
    reverse: bool,
    clip: Option<f64>,
    cpu: &CpuDesc,
) -> Result<Vec<Tensor>> {
    let name = "recurrent";
    crate::transform::util::require_float(inp.xw, name)?;
    let dims = |t: &Tensor| crate::transform::util::const_shape(t, name);
    let rs = dims(inp.rt)?;
    if inp.xw.ndim() != 3 || rs.len() != 2 {
        return Err(value_error(name, "xw must be [T, B, G*H] and rt [H, G*H]"));
    }
    // The sequence length may be known only at run time; the rest is static.
    let t_dim = inp.xw.shape()[0].clone();
    let xs: Vec<i64> = match inp.xw.shape()[1..]
        .iter()
        .map(|d| d.as_int())
        .collect::<Option<Vec<i64>>>()
    {
        Some(rest) => [vec![t_dim.as_int().unwrap_or(-1)], rest].concat(),
        None => {
            return Err(value_error(
                name,
                "xw's batch and gate dimensions must be known at compile time",
            ))
        }
    };
    let (batch, h) = (xs[1], rs[0]);
    let g = cell.gates();
    if xs[2] != g * h || rs[1] != g * h {
        return Err(value_error(
            name,
            format!(
                "xw {xs:?} and rt {rs:?} do not fit {g} gates of hidden size {h} \
                 (want [T, B, {}] and [{h}, {}])",
                g * h,
                g * h
            ),
        ));
    }
    let want = |t: Option<&Tensor>, what: &str, shape: &[i64]| -> Result<Tensor> {
        let t = t.ok_or_else(|| value_error(name, format!("missing input `{what}`")))?;
        if dims(t)? != shape {
            return Err(value_error(
                name,
                format!("`{what}` must be {shape:?}, got {:?}", dims(t)?),
            ));
        }
        Ok(t.clone())
    };
    let h0 = want(Some(inp.h0), "initial_h", &[batch, h])?;
    let lens = want(Some(inp.seq_lens), "sequence_lens", &[batch])?;
    let (c0, p, rb) = match cell {
        Cell::Lstm { .. } => (
            Some(want(inp.c0, "initial_c", &[batch, h])?),
            Some(want(inp.p, "P", &[3 * h])?),
            None,
        ),
        Cell::Gru { .. } => (None, None, Some(want(inp.rb, "Rb", &[h])?)),
        Cell::Rnn { .. } => (None, None, None),
    };
    let dt = inp.xw.dtype();
    let it = index_dtype(inp.xw);
    let t_len = kiln_tir::cast(it, t_dim);
    let lanes = cpu.lanes(dt).max(1);
    // The weights packed by vector columns, `[ceil(GH / lanes), H, lanes]` (zeros past GH).
    let blocks = (g * h + lanes - 1) / lanes;
    let rt = inp.rt.clone();
    let rtp = crate::transform::util::compute_tagged(
        &[ci(it, blocks), ci(it, h), ci(it, lanes)],
        |v| {
            let col = v[0].to_expr() * ci(it, lanes) + v[2].to_expr();
            let safe = min(col.clone(), ci(it, g * h - 1));
            select(
                col.lt(ci(it, g * h)),
                rt.at(&[v[1].to_expr(), safe]),
                constant(dt, 0.0),
            )
        },
        "recurrent_weights_packed",
        crate::tag::INJECTIVE,
    )?;
    let mut ins = vec![inp.xw.clone(), inp.rt.clone(), h0, lens];
    ins.extend(c0.iter().chain(p.iter()).chain(rb.iter()).cloned());
    ins.push(rtp);
    let mut outs = vec![
        ExternOutput::new(vec![t_len.clone(), ci(it, batch), ci(it, h)], dt),
        ExternOutput::new(vec![ci(it, batch), ci(it, h)], dt),
    ];
    if c0.is_some() {
        outs.push(ExternOutput::new(vec![ci(it, batch), ci(it, h)], dt));
    }
    let tile_vectors = (cpu.vector_registers as i64 / 4).clamp(1, 4);
    let layer = Layer {
        cell: cell.clone(),
        reverse,
        clip,
        t_len,
        batch,
        h,
        dt,
        it,
        lanes,
        tile_vectors,
        rows: (cpu.accumulators() / tile_vectors).clamp(1, batch.max(1)),
    };
    extern_op(
        match cell {
            Cell::Lstm { .. } => "lstm",
            Cell::Gru { .. } => "gru",
            Cell::Rnn { .. } => "rnn",
        },
        "recurrent",
        &ins,
        &outs,
        |ins, outs| Ok(layer.body(ins, outs)),
    )
}

fn ci(t: DataType, v: i64) -> PrimExpr {
    PrimExpr::const_int(t, v)
}

/// The statement builder of one layer.
struct Layer {
    cell: Cell,
    reverse: bool,
    clip: Option<f64>,
    /// The sequence length (an expression when known only at run time).
    t_len: PrimExpr,
    batch: i64,
    h: i64,
    dt: DataType,
    it: DataType,
    /// Vector lanes of `dt` on the target.
    lanes: i64,
    /// Vectors per register tile of the recurrent product.
    tile_vectors: i64,
    /// Batch rows per register tile of the recurrent product.
    rows: i64,
}

impl Layer {
    fn k(&self, v: f64) -> PrimExpr {
        constant(self.dt, v)
    }

    fn i(&self, v: i64) -> PrimExpr {
        ci(self.it, v)
    }

    fn clipped(&self, x: PrimExpr) -> PrimExpr {
        match self.clip {
            Some(c) => max(min(x, self.k(c)), self.k(-c)),
            None => x,
        }
    }

    /// `dst[b, k] = init(b, k) + sum_j src(b, j) * rt[j, k]` for every batch row `b` and `k` in
    /// `[k0, k1)`: register tiles of `rows` batch rows by `tile_vectors` vectors accumulated
    /// over `j` (each weight vector loaded once for all the rows), then single vectors, then
    /// scalars. Vector columns read the packed weights `rtp` (`[GH / lanes, H, lanes]`: each
    /// vector column contiguous over `j`, so a tile streams a few sequential runs) when the
    /// range starts on a vector boundary, `rt` otherwise.
    fn gemv(
        &self,
        dst: &Buffer,
        src: &dyn Fn(PrimExpr, PrimExpr) -> PrimExpr,
        (rt, rtp): (&Buffer, &Buffer),
        range: (i64, i64),
        init: &dyn Fn(PrimExpr, PrimExpr) -> PrimExpr,
    ) -> Stmt {
        let (k0, k1) = range;
        let mut parts = Vec::new();
        let mut at = k0;
        let full = self.batch / self.rows;
        let rem = self.batch % self.rows;
        for width in [self.lanes * self.tile_vectors, self.lanes, 1] {
            let n = (k1 - at) / width;
            if n == 0 {
                continue;
            }
            let start = at;
            let (vl, kind) = if width == 1 {
                (1, ForKind::Serial)
            } else {
                (self.lanes, ForKind::Vectorized)
            };
            let packed = width > 1 && start % self.lanes == 0;
            for (chunks, nrows, first) in [
                (full, self.rows, 0),
                (i64::from(rem > 0), rem, full * self.rows),
            ] {
                if chunks == 0 {
                    continue;
                }
                let acc = Buffer::decl_in("acc", self.dt, vec![self.i(nrows * width)], "local");
                // One (rows x width) block at row `b0`, columns from `base`, tile `kt`.
                let block = |kt: PrimExpr, b0: PrimExpr| {
                    let base = kt.clone() * self.i(width) + self.i(start);
                    // `body(bi, u, v)` for each row, vector and lane of the block.
                    let each = |body: &dyn Fn(PrimExpr, PrimExpr, PrimExpr) -> Stmt| {
                        for_kind("bi", self.it, nrows, ForKind::Unrolled, |bi| {
                            for_kind("u", self.it, width / vl, ForKind::Unrolled, |u| {
                                for_kind("v", self.it, vl, kind, |v| body(bi.clone(), u, v))
                            })
                        })
                    };
                    let slot = |u: PrimExpr, v: PrimExpr| u * self.i(vl) + v;
                    let at_acc = |bi: PrimExpr, slot: PrimExpr| bi * self.i(width) + slot;
                    let fill = each(&|bi, u, v| {
                        let slot = slot(u, v);
                        acc.store(
                            init(b0.clone() + bi.clone(), base.clone() + slot.clone()),
                            vec![at_acc(bi, slot)],
                        )
                    });
                    let accumulate = for_n("j", self.it, self.h, |j| {
                        each(&|bi, u, v| {
                            let slot = slot(u.clone(), v.clone());
                            let w = if packed {
                                let blk = kt.clone() * self.i(width / self.lanes)
                                    + self.i(start / self.lanes)
                                    + u;
                                rtp.load(vec![blk, j.clone(), v])
                            } else {
                                rt.load(vec![j.clone(), base.clone() + slot.clone()])
                            };
                            let cur = acc.load(vec![at_acc(bi.clone(), slot.clone())]);
                            acc.store(
                                cur + src(b0.clone() + bi.clone(), j.clone()) * w,
                                vec![at_acc(bi, slot)],
                            )
                        })
                    });
                    let store = each(&|bi, u, v| {
                        let slot = slot(u, v);
                        dst.store(
                            acc.load(vec![at_acc(bi.clone(), slot.clone())]),
                            vec![b0.clone() + bi, base.clone() + slot],
                        )
                    });
                    Stmt::allocate_buffer(&acc, Stmt::seq(vec![fill, accumulate, store]))
                };
                parts.push(for_n("kt", self.it, n, |kt| {
                    for_n("bc", self.it, chunks, |bc| {
                        block(kt, bc * self.i(nrows) + self.i(first))
                    })
                }));
            }
            at += n * width;
        }
        Stmt::seq(parts)
    }

    /// The whole layer. `ins`: xw, rt, h0, seq_lens, then c0 and p (LSTM) or rb (GRU), then
    /// the packed weights; `outs`: y, y_h, then y_c (LSTM). Per time step: the recurrent
    /// products of every batch row, then each row's cell (or, past its length, zeros).
    fn body(&self, ins: &[Buffer], outs: &[Buffer]) -> Stmt {
        let (h0, lens) = (&ins[2], &ins[3]);
        let (y, yh) = (&outs[0], &outs[1]);
        let hh = self.h;
        let gh = self.cell.gates() * hh;
        let rows = vec![self.i(self.batch), self.i(hh)];
        let hs = Buffer::decl("h_state", self.dt, rows.clone());
        let cs = Buffer::decl("c_state", self.dt, rows.clone());
        let gates = Buffer::decl("gates", self.dt, vec![self.i(self.batch), self.i(gh)]);
        let reset_h = Buffer::decl("reset_h", self.dt, rows);
        let is_lstm = matches!(self.cell, Cell::Lstm { .. });
        let it = self.it;

        let init = for_n("b", it, self.batch, |b| {
            for_n("j", it, hh, |j| {
                let at = vec![b.clone(), j.clone()];
                let mut s = vec![hs.store(h0.load(at.clone()), at.clone())];
                if is_lstm {
                    s.push(cs.store(ins[4].load(at.clone()), at));
                }
                Stmt::seq(s)
            })
        });
        let len_of = |b: PrimExpr| {
            let raw = cast(it, lens.load(vec![b]));
            max(min(raw, self.t_len.clone()), self.i(0))
        };
        let steps = for_extent("t", it, self.t_len.clone(), ForKind::Serial, |t| {
            // The step each row reads: its own for reverse layers (clamped for rows already
            // past their length, whose products are computed but not used).
            let tt = |b: PrimExpr| {
                if self.reverse {
                    len_of(b) - self.i(1) - t.clone()
                } else {
                    t.clone()
                }
            };
            let tt_read = |b: PrimExpr| max(min(tt(b), self.t_len.clone() - self.i(1)), self.i(0));
            let products = self.products(ins, &hs, &gates, &reset_h, &tt_read);
            let cells = for_n("b", it, self.batch, |b| {
                let cell = self.cell_row(ins, y, &hs, &cs, &gates, &b, &tt(b.clone()));
                let pad = for_n("j", it, hh, |j| {
                    y.store(self.k(0.0), vec![t.clone(), b.clone(), j])
                });
                Stmt::if_then_else(t.lt(len_of(b.clone())), cell, Some(pad))
            });
            Stmt::seq(vec![products, cells])
        });
        // A row of length 0 has zero final states (as onnxruntime), not its initial ones.
        let copy_out = for_n("b", it, self.batch, |b| {
            let ran = cast(it, lens.load(vec![b.clone()])).gt(self.i(0));
            for_n("j", it, hh, |j| {
                let at = vec![b.clone(), j.clone()];
                let last = |buf: &Buffer| select(ran.clone(), buf.load(at.clone()), self.k(0.0));
                let mut s = vec![yh.store(last(&hs), at.clone())];
                if is_lstm {
                    s.push(outs[2].store(last(&cs), at.clone()));
                }
                Stmt::seq(s)
            })
        });
        let mut body = Stmt::seq(vec![init, steps, copy_out]);
        for buf in [&reset_h, &gates, &cs, &hs] {
            body = Stmt::allocate_buffer(buf, body);
        }
        body
    }

    /// The recurrent products of one step for every batch row, into `gates[b, :]` (for GRU
    /// without `linear_before_reset`, the reset gate is applied to the state between its two
    /// products).
    fn products(
        &self,
        ins: &[Buffer],
        hs: &Buffer,
        gates: &Buffer,
        reset_h: &Buffer,
        tt: &dyn Fn(PrimExpr) -> PrimExpr,
    ) -> Stmt {
        let (xw, rt, rtp) = (&ins[0], &ins[1], &ins[ins.len() - 1]);
        let hh = self.h;
        let x = |b: PrimExpr, k: PrimExpr| xw.load(vec![tt(b.clone()), b, k]);
        let h_prev = |b: PrimExpr, j: PrimExpr| hs.load(vec![b, j]);
        let w = (rt, rtp);
        match &self.cell {
            Cell::Lstm { .. } => self.gemv(gates, &h_prev, w, (0, 4 * hh), &x),
            Cell::Rnn { .. } => self.gemv(gates, &h_prev, w, (0, hh), &x),
            Cell::Gru {
                acts,
                linear_before_reset,
            } => {
                let rb = &ins[4];
                let zr = self.gemv(gates, &h_prev, w, (0, 2 * hh), &x);
                let bias = |k: PrimExpr| rb.load(vec![k - self.i(2 * hh)]);
                let hidden = if *linear_before_reset {
                    // gates[b, 2H + j] = rb[j] + h R_h^T; the reset gate scales it in the cell.
                    self.gemv(gates, &h_prev, w, (2 * hh, 3 * hh), &|_, k| bias(k))
                } else {
                    // gates[b, 2H + j] = xw_h + rb[j] + (r * h) R_h^T.
                    let reset = for_n("b", self.it, self.batch, |b| {
                        for_n("j", self.it, hh, |j| {
                            let r = acts[0].apply(
                                self.clipped(gates.load(vec![b.clone(), j.clone() + self.i(hh)])),
                            );
                            reset_h.store(r * h_prev(b.clone(), j.clone()), vec![b, j])
                        })
                    });
                    let rh = |b: PrimExpr, j: PrimExpr| reset_h.load(vec![b, j]);
                    let init = |b: PrimExpr, k: PrimExpr| x(b, k.clone()) + bias(k);
                    Stmt::seq(vec![
                        reset,
                        self.gemv(gates, &rh, w, (2 * hh, 3 * hh), &init),
                    ])
                };
                Stmt::seq(vec![zr, hidden])
            }
        }
    }

    /// The cell of batch row `b` at time `tt` from its products in `gates[b, :]`: the new state
    /// and `y[tt, b]`.
    #[allow(clippy::too_many_arguments)]
    fn cell_row(
        &self,
        ins: &[Buffer],
        y: &Buffer,
        hs: &Buffer,
        cs: &Buffer,
        gates: &Buffer,
        b: &PrimExpr,
        tt: &PrimExpr,
    ) -> Stmt {
        let xw = &ins[0];
        let it = self.it;
        let hh = self.h;
        let x = |k: PrimExpr| xw.load(vec![tt.clone(), b.clone(), k]);
        let h_prev = |j: PrimExpr| hs.load(vec![b.clone(), j]);
        let g = |k: PrimExpr| gates.load(vec![b.clone(), k]);
        let off = |k: PrimExpr, gate: i64| k + self.i(gate * hh);
        let write = |j: &PrimExpr, h_var: &Var, c_var: Option<&Var>| {
            let mut s = Vec::new();
            if let Some(c) = c_var {
                s.push(cs.store(c.to_expr(), vec![b.clone(), j.clone()]));
            }
            s.push(hs.store(h_var.to_expr(), vec![b.clone(), j.clone()]));
            s.push(y.store(h_var.to_expr(), vec![tt.clone(), b.clone(), j.clone()]));
            Stmt::seq(s)
        };
        match &self.cell {
            Cell::Lstm { acts, input_forget } => {
                let p = &ins[5];
                for_n("j", it, hh, |j| {
                    let c_prev = cs.load(vec![b.clone(), j.clone()]);
                    let peep = |gate: i64| p.load(vec![off(j.clone(), gate)]);
                    let i_g = acts[0].apply(self.clipped(g(j.clone()) + peep(0) * c_prev.clone()));
                    let f_g = if *input_forget {
                        self.k(1.0) - i_g.clone()
                    } else {
                        acts[0].apply(self.clipped(g(off(j.clone(), 2)) + peep(2) * c_prev.clone()))
                    };
                    let c_g = acts[1].apply(self.clipped(g(off(j.clone(), 3))));
                    let c_var = Var::new("c_new", self.dt);
                    let o_g = acts[0]
                        .apply(self.clipped(g(off(j.clone(), 1)) + peep(1) * c_var.to_expr()));
                    let h_var = Var::new("h_new", self.dt);
                    let h_new = o_g * acts[2].apply(c_var.to_expr());
                    let body = Stmt::let_stmt(&h_var, h_new, write(&j, &h_var, Some(&c_var)));
                    Stmt::let_stmt(&c_var, f_g * c_prev + i_g * c_g, body)
                })
            }
            Cell::Gru {
                acts,
                linear_before_reset,
            } => for_n("j", it, hh, |j| {
                let z = acts[0].apply(self.clipped(g(j.clone())));
                let pre = if *linear_before_reset {
                    let r = acts[0].apply(self.clipped(g(off(j.clone(), 1))));
                    x(off(j.clone(), 2)) + r * g(off(j.clone(), 2))
                } else {
                    g(off(j.clone(), 2))
                };
                let ht = acts[1].apply(self.clipped(pre));
                let h_var = Var::new("h_new", self.dt);
                let h_new = (self.k(1.0) - z.clone()) * ht + z * h_prev(j.clone());
                Stmt::let_stmt(&h_var, h_new, write(&j, &h_var, None))
            }),
            Cell::Rnn { act } => for_n("j", it, hh, |j| {
                let h_var = Var::new("h_new", self.dt);
                let h_new = act.apply(self.clipped(g(j.clone())));
                Stmt::let_stmt(&h_var, h_new, write(&j, &h_var, None))
            }),
        }
    }
}
