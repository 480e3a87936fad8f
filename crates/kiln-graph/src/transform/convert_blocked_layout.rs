//! `ConvertBlockedLayout`: activations stay in channel blocks (`NCHW{b}c`, `[N, C/b, H, W,
//! b]`) from one convolution to the next, `b` being the float32 lanes of the pass context's
//! CPU (16 with AVX-512, 8 with AVX2), as TVM's `AlterOpLayout` does with `conv2d_NCHWc`.
//! Runs after `AlterOpLayout`, whose packed `OIHW{b}o` kernels compute in such blocks:
//!
//! - a float32 `nn.conv2d` of one group with an `OIHW{b}o` kernel and whole blocks of output
//!   channels gives its output in blocks (`out_layout`), and reads blocked data directly
//!   (`data_layout`); one whose output channels are not whole blocks (a 1000-class or 255
//!   channel head) reads blocked data and writes NCHW; a 1x1 convolution kept `OIHW` (the
//!   flattened-row kernel, for NCHW rows) whose data arrives blocked gets its kernel packed too
//!   when its output channels are whole blocks or fewer than one block (a head, writing NCHW),
//!   and NCHW data otherwise; a depthwise convolution whose data arrives blocked computes in
//!   blocks too (its kernel packed, a block's lanes `b` channels' filters);
//! - a Winograd convolution (`kernel_layout` `WINOGRAD_F2x2_3x3`) reads and writes blocks,
//!   its data transformed to blocks where it comes NCHW;
//! - elementwise and broadcast operators (`add`, `relu`, `clip`, ...) with a blocked operand
//!   and a 4-D result whose channels are whole blocks compute in blocks: a full operand is
//!   transformed, a per-channel one (`[C, 1, 1]`, a bias) becomes `[1, C/b, 1, 1, b]`, one
//!   constant along channels gets a trailing axis of 1 (constants fold at compile time);
//! - `concatenate` along channels of whole blocks joins the blocks, and `split` into pieces
//!   of whole blocks gives blocks;
//! - `nn.max_pool2d`, `nn.avg_pool2d`, the global poolings and `image.resize2d` work on
//!   blocks, and so does `take` of rows or columns by a vector of indices (the taps of a
//!   linear Resize), `nn.depth_to_space` in mode DCR (whole blocks move into pixels) and a
//!   `strided_slice` of rows and columns;
//! - any other operator, a tuple and the function's result get NCHW back through
//!   `layout_transform`, which `FuseOps` fuses into the convolution that produces the blocks
//!   (so a convolution followed by an NCHW consumer costs what it did before).

use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::attrs::{with_attr, AttrValue};
use crate::ir::visit::rewrite_post_orig;
use crate::ir::Expr;
use crate::op::{self, attr, broadcast_shapes, mk, normalize_axis, OpPattern};
use kiln_ffi::DataType;
use kiln_ffi::Result;
use std::collections::HashMap;

/// The rewrite's state: which rewritten nodes hold blocks, and the transforms made so far
/// (one per value and direction). Nodes are known by their addresses; the sets keep the
/// nodes themselves, so that no address is freed and reused by a node made later.
struct Blocking {
    b: i64,
    blocked: HashMap<usize, Expr>,
    /// Calls giving tuples of blocks (`split` along channels): their fields are blocked.
    blocked_tuples: HashMap<usize, Expr>,
    to_nchw: HashMap<usize, Expr>,
    to_blocks: HashMap<usize, Expr>,
}

/// The 4-D shape of a node's (original) type, if it is a 4-D tensor.
fn shape4(e: &Expr) -> Option<Vec<i64>> {
    let t = e.ty().ok()?;
    let (s, _) = t.as_tensor()?;
    (s.len() == 4).then(|| s.to_vec())
}

fn is_f32(e: &Expr) -> bool {
    e.ty()
        .ok()
        .and_then(|t| t.as_tensor().map(|(_, d)| d == DataType::float(32)))
        .unwrap_or(false)
}

/// Whether the 4-D convolution `orig` of `groups` groups is depthwise
/// ([`crate::op::nn::conv2d::is_depthwise`]).
fn depthwise(orig: &Expr, groups: i64) -> bool {
    match (shape4(&orig.args()[0]), shape4(&orig.args()[1])) {
        (Some(d), Some(w)) => crate::op::nn::conv2d::is_depthwise(groups, d[1], &w),
        _ => false,
    }
}

impl Blocking {
    fn nchw_layout(&self) -> String {
        format!("NCHW{}c", self.b)
    }

    fn is_blocked(&self, e: &Expr) -> bool {
        self.blocked.contains_key(&e.key())
    }

    fn mark(&mut self, e: Expr) -> Expr {
        self.blocked.insert(e.key(), e.clone());
        e
    }

    /// `e` in NCHW: itself, or its blocks transformed back.
    fn nchw(&mut self, e: &Expr) -> Expr {
        if !self.is_blocked(e) {
            return e.clone();
        }
        self.transform(e, false)
    }

    /// A 4-D NCHW value `e` in blocks.
    fn blocks(&mut self, e: &Expr) -> Expr {
        if self.is_blocked(e) {
            return e.clone();
        }
        self.transform(e, true)
    }

    /// The `layout_transform` of `e` into blocks (`to_blocks`) or back to NCHW, made once per
    /// value and direction.
    fn transform(&mut self, e: &Expr, to_blocks: bool) -> Expr {
        let (blocked, nchw) = (AttrValue::Str(self.nchw_layout()), attr("NCHW"));
        let (memo, src, dst) = if to_blocks {
            (&mut self.to_blocks, nchw, blocked)
        } else {
            (&mut self.to_nchw, blocked, nchw)
        };
        memo.entry(e.key())
            .or_insert_with(|| {
                mk(
                    "layout_transform",
                    vec![e.clone()],
                    &[("src_layout", src), ("dst_layout", dst)],
                )
            })
            .clone()
    }

    /// Operand `e` (original type `orig`) of a broadcast whose 4-D result has `c` channels, as
    /// an operand of the same broadcast in blocks; `None` when its shape does not allow it.
    fn operand(&mut self, e: &Expr, orig: &Expr, c: i64) -> Option<Expr> {
        if self.is_blocked(e) {
            return Some(e.clone());
        }
        let t = orig.ty().ok()?;
        let (s, _) = t.as_tensor()?;
        if s.is_empty() {
            return Some(e.clone()); // a scalar broadcasts over blocks as it is
        }
        if s.len() > 4 {
            return None;
        }
        let mut s4 = vec![1i64; 4 - s.len()];
        s4.extend_from_slice(s);
        if s4[1] == 1 {
            let mut s5 = s4.clone();
            s5.push(1);
            return Some(mk("reshape", vec![e.clone()], &[("newshape", attr(s5))]));
        }
        if s4[1] != c {
            return None;
        }
        let e4 = if s.len() == 4 {
            e.clone()
        } else {
            mk("reshape", vec![e.clone()], &[("newshape", attr(s4))])
        };
        Some(self.blocks(&e4))
    }

    /// The rewrite of one node (`orig` typed, `e` rebuilt over rewritten inputs).
    fn rewrite(&mut self, orig: &Expr, e: &Expr) -> Result<Expr> {
        let Some(name) = e.op_name() else {
            match e {
                Expr::Tuple(t) if t.fields.iter().any(|f| self.is_blocked(f)) => {
                    let fields = t.fields.iter().map(|f| self.nchw(f)).collect();
                    return Ok(Expr::tuple(fields));
                }
                Expr::TupleGetItem(g) if self.blocked_tuples.contains_key(&g.tuple.key()) => {
                    return Ok(self.mark(e.clone()));
                }
                _ => {}
            }
            return Ok(e.clone());
        };
        if name == "nn.conv2d" {
            if let Some(new) = self.conv2d(orig, e)? {
                return Ok(new);
            }
        }
        if name == "split" && self.is_blocked(&e.args()[0]) {
            if let Some(new) = self.split(orig, e)? {
                self.blocked_tuples.insert(new.key(), new.clone());
                return Ok(new);
            }
        }
        if e.args().iter().any(|a| self.is_blocked(a)) {
            if let Some(new) = self.in_blocks(name, orig, e)? {
                return Ok(self.mark(new));
            }
            let args: Vec<Expr> = e.args().iter().map(|a| self.nchw(a)).collect();
            let call = e.as_call().expect("an op call");
            return Ok(Expr::call_raw(call.op.clone(), args, call.attrs.clone()));
        }
        Ok(e.clone())
    }

    /// A `split` of blocks along channels into pieces of whole blocks (a tuple of blocks), if
    /// `orig` is one.
    fn split(&mut self, orig: &Expr, e: &Expr) -> Result<Option<Expr>> {
        let Some(data) = shape4(&orig.args()[0]) else {
            return Ok(None);
        };
        let a = orig.attrs();
        if normalize_axis(a.int("axis")?, 4).ok() != Some(1) {
            return Ok(None);
        }
        let b = self.b;
        let call = e.as_call().expect("a call");
        let mut attrs = with_attr(&call.attrs, "axis", AttrValue::Int(1));
        if let Some(k) = a.opt_int("sections")? {
            if k < 1 || data[1] % k != 0 || (data[1] / k) % b != 0 {
                return Ok(None);
            }
        } else if let Some(ix) = a.opt_ints("indices")? {
            if ix.iter().any(|i| i % b != 0) {
                return Ok(None);
            }
            let blocks: Vec<i64> = ix.iter().map(|i| i / b).collect();
            attrs = with_attr(&attrs, "indices", AttrValue::Ints(blocks));
        } else {
            return Ok(None);
        }
        Ok(Some(Expr::call_raw(
            call.op.clone(),
            e.args().to_vec(),
            attrs,
        )))
    }

    /// A convolution computing in blocks (marked blocked when its output is), if `orig` can.
    fn conv2d(&mut self, orig: &Expr, e: &Expr) -> Result<Option<Expr>> {
        let a = orig.attrs();
        let Some(out) = shape4(orig) else {
            return Ok(None);
        };
        let b = self.b;
        let packed = format!("OIHW{b}o");
        let kernel = a.str("kernel_layout")?;
        let groups = a.int("groups")?;
        // A depthwise convolution computes in blocks when its data arrives in them and its
        // channels are whole blocks, its kernel packed `[C/b, 1, KH, KW, b]` (a block's lanes
        // the filters of b channels) like a 1x1 kernel left for NCHW rows.
        let depthwise = groups > 1 && depthwise(orig, groups);
        let plain = (groups == 1 || depthwise)
            && a.str("data_layout")? == "NCHW"
            && a.str("out_layout")?.is_empty()
            && a.str("out_dtype")?.is_empty()
            && is_f32(orig);
        let data = &e.args()[0];
        let data_blocked = self.is_blocked(data);
        // Output channels that are not whole blocks: blocks in, NCHW out (the padded last
        // block is dropped by the unpack).
        let whole = out[1] % b == 0;
        if kernel == kiln_topi::nn::conv2d_winograd::KERNEL_LAYOUT && plain && whole {
            // Winograd computes in blocks: blocked data in (transformed if it comes NCHW),
            // blocks out.
            let blocks = self.blocks(data);
            let call = e.as_call().expect("a call");
            let attrs = with_attr(
                &call.attrs,
                "data_layout",
                AttrValue::Str(self.nchw_layout()),
            );
            let attrs = with_attr(&attrs, "out_layout", AttrValue::Str(self.nchw_layout()));
            let new = Expr::call_raw(call.op.clone(), vec![blocks, e.args()[1].clone()], attrs);
            return Ok(Some(self.mark(new)));
        }
        if !plain || !(whole || data_blocked) || (depthwise && !(whole && data_blocked)) {
            return Ok(None);
        }
        let mut weight = e.args()[1].clone();
        let mut attrs = e.as_call().expect("a call").attrs.clone();
        if kernel == "OIHW" && data_blocked && (depthwise || weight.as_constant().is_some()) {
            if !whole && out[1] > b {
                // Its output would be unpacked to NCHW from padded blocks in every tile: the
                // NCHW-row kernel AlterOpLayout chose, on NCHW data, costs less even with its
                // producer unpacking instead (a detector's 64 -> 255 head at 40x40 on
                // AVX-512: 651 -> 494-543 us, its producer 216 -> 300-312 us). A head of less
                // than one block reads the blocks: unpacked, a DBNet-style detector's pixel
                // shuffle before its 24 -> 4 head took 300 us instead of 122 (AVX2).
                return Ok(None);
            }
            // A 1x1 convolution AlterOpLayout left for NCHW rows, or a depthwise one: blocks
            // in, so pack it.
            weight = mk(
                "layout_transform",
                vec![weight],
                &[
                    ("src_layout", attr("OIHW")),
                    ("dst_layout", AttrValue::Str(packed.clone())),
                ],
            );
            attrs = with_attr(&attrs, "kernel_layout", AttrValue::Str(packed.clone()));
            attrs = with_attr(&attrs, "channels", AttrValue::Int(out[1]));
        } else if kernel != packed {
            return Ok(None);
        }
        if data_blocked {
            attrs = with_attr(&attrs, "data_layout", AttrValue::Str(self.nchw_layout()));
        }
        if whole {
            attrs = with_attr(&attrs, "out_layout", AttrValue::Str(self.nchw_layout()));
        }
        let call = e.as_call().expect("a call");
        let new = Expr::call_raw(call.op.clone(), vec![data.clone(), weight], attrs);
        Ok(Some(if whole { self.mark(new) } else { new }))
    }

    /// Whether the operands of `e` (`orig` before the rewrite) that carry channels (4-D, more
    /// than one channel) hold at least as many elements in blocks as in NCHW, so that computing
    /// in blocks transforms no more data than computing in NCHW. A concat of a pooled 24-channel
    /// shortcut in blocks with a 112-channel NCHW convolution output computes in NCHW: in blocks
    /// it spread blocks along a shufflenet's residual path, whose grouped convolutions read
    /// NCHW, and a transform each way around every unit took 14% of the network on AVX2.
    fn mostly_blocked(&self, orig: &Expr, e: &Expr) -> bool {
        let (mut blocked, mut nchw) = (0i64, 0i64);
        for (a, o) in e.args().iter().zip(orig.args()) {
            let Some(s) = shape4(o).filter(|s| s[1] > 1) else {
                continue;
            };
            let n: i64 = s.iter().product();
            if self.is_blocked(a) {
                blocked += n;
            } else {
                nchw += n;
            }
        }
        blocked >= nchw
    }

    /// Operator `name` computing in blocks when some operand is blocked, if it can.
    fn in_blocks(&mut self, name: &str, orig: &Expr, e: &Expr) -> Result<Option<Expr>> {
        let Some(out) = shape4(orig) else {
            return Ok(None);
        };
        if out[1] % self.b != 0 {
            return Ok(None);
        }
        let call = e.as_call().expect("an op call");
        let layout = AttrValue::Str(self.nchw_layout());
        let args: Option<Vec<Expr>> = match name {
            "nn.max_pool2d"
            | "nn.avg_pool2d"
            | "nn.global_avg_pool2d"
            | "nn.global_max_pool2d"
            | "image.resize2d" => {
                let attrs = with_attr(&call.attrs, "layout", layout);
                let data = e.args()[0].clone();
                return Ok(Some(Expr::call_raw(call.op.clone(), vec![data], attrs)));
            }
            "concatenate" => {
                let axis = normalize_axis(orig.attrs().int("axis")?, 4).ok();
                let whole = orig
                    .args()
                    .iter()
                    .all(|a| shape4(a).is_some_and(|s| s[1] % self.b == 0));
                if axis != Some(1) || !whole || !self.mostly_blocked(orig, e) {
                    return Ok(None);
                }
                let args: Vec<Expr> = e.args().iter().map(|a| self.blocks(a)).collect();
                let attrs = with_attr(&call.attrs, "axis", AttrValue::Int(1));
                return Ok(Some(Expr::call_raw(call.op.clone(), args, attrs)));
            }
            "take" => {
                // Rows or columns gathered by a vector of indices (a linear resize, one tap
                // per take): the same axis of the blocks.
                let axis = orig.attrs().opt_int("axis")?;
                let Some(axis @ (2 | 3)) = axis.and_then(|a| normalize_axis(a, 4).ok()) else {
                    return Ok(None);
                };
                let vector = orig.args()[1]
                    .ty()
                    .ok()
                    .and_then(|t| t.as_tensor().map(|(s, _)| s.len() == 1))
                    .unwrap_or(false);
                if !vector || !self.is_blocked(&e.args()[0]) {
                    return Ok(None);
                }
                let attrs = with_attr(&call.attrs, "axis", AttrValue::Int(axis as i64));
                return Ok(Some(Expr::call_raw(
                    call.op.clone(),
                    e.args().to_vec(),
                    attrs,
                )));
            }
            "strided_slice" => {
                // A crop of rows and columns (a transposed convolution's padding): the same
                // axes of the blocks.
                let axes: Option<Vec<i64>> = orig.attrs().opt_ints("axes")?.and_then(|axes| {
                    axes.iter()
                        .map(|&a| {
                            normalize_axis(a, 4)
                                .ok()
                                .filter(|&a| a >= 2)
                                .map(|a| a as i64)
                        })
                        .collect()
                });
                let Some(axes) = axes else {
                    return Ok(None);
                };
                let attrs = with_attr(&call.attrs, "axes", AttrValue::Ints(axes));
                return Ok(Some(Expr::call_raw(
                    call.op.clone(),
                    e.args().to_vec(),
                    attrs,
                )));
            }
            "nn.depth_to_space" => {
                // DCR moves whole blocks (each pixel offset's channels adjacent); CRD would
                // split them. (Its one operand is the blocked one.)
                if orig.attrs().str("mode")? != "DCR" {
                    return Ok(None);
                }
                let attrs = with_attr(&call.attrs, "layout", layout);
                return Ok(Some(Expr::call_raw(
                    call.op.clone(),
                    e.args().to_vec(),
                    attrs,
                )));
            }
            "nn.bias_add" | "broadcast_to" => None, // axes or shapes in attributes
            _ if op::get(name)?.pattern <= OpPattern::Broadcast => {
                // Only operators whose result is the broadcast of their operands.
                let mut shape: Vec<i64> = Vec::new();
                for a in orig.args() {
                    let Some((s, _)) = a
                        .ty()
                        .ok()
                        .and_then(|t| t.as_tensor().map(|(s, d)| (s.to_vec(), d)))
                    else {
                        return Ok(None);
                    };
                    shape = match broadcast_shapes(&shape, &s) {
                        Ok(v) => v,
                        Err(_) => return Ok(None),
                    };
                }
                if shape != out || !self.mostly_blocked(orig, e) {
                    return Ok(None);
                }
                e.args()
                    .iter()
                    .zip(orig.args())
                    .map(|(a, o)| self.operand(a, o, out[1]))
                    .collect()
            }
            _ => None,
        };
        Ok(args.map(|args| Expr::call_raw(call.op.clone(), args, call.attrs.clone())))
    }
}

/// The pass (opt level 3, with AlterOpLayout); blocks follow the pass context's CPU.
pub fn convert_blocked_layout() -> Pass {
    function_pass("ConvertBlockedLayout", 3, |f, ctx| {
        let f = infer_function(&f)?;
        let chosen = f.attrs().get(super::alter_op_layout::CHANNEL_BLOCK_ATTR);
        let mut st = Blocking {
            b: chosen
                .and_then(|v| v.try_as::<i64>().ok())
                .unwrap_or_else(|| ctx.cpu.f32_lanes()),
            blocked: HashMap::new(),
            blocked_tuples: HashMap::new(),
            to_nchw: HashMap::new(),
            to_blocks: HashMap::new(),
        };
        if st.b < 2 {
            return Ok(f);
        }
        let body = rewrite_post_orig(f.body(), |orig, e| st.rewrite(orig, e))?;
        let body = match f.body().ty()? {
            // A split of blocks returned as it is: its pieces in NCHW.
            crate::ir::Type::Tuple(t) if st.blocked_tuples.contains_key(&body.key()) => {
                let fields = (0..t.fields.len())
                    .map(|i| {
                        let piece = st.mark(Expr::get_item(body.clone(), i));
                        st.nchw(&piece)
                    })
                    .collect();
                Expr::tuple(fields)
            }
            _ => st.nchw(&body),
        };
        if body.same_as(f.body()) {
            return Ok(f);
        }
        infer_function(&f.with_body(f.params().to_vec(), body))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::visit::post_order;
    use crate::ir::{Function, IRModule, Type, Var};
    use crate::transform::{alter_op_layout, fold_constant, PassContext};
    use kiln_tir::CpuDesc;

    /// Constant OIHW weights of `o` filters over `c` channels, `k` x `k`.
    fn weights(o: i64, c: i64, k: i64) -> Expr {
        let n = (o * c * k * k) as usize;
        Expr::const_f32(&vec![0.5; n], &[o, c, k, k])
    }

    /// The ops of `m`'s main in post order, with the layouts of layout transforms.
    fn ops(m: &IRModule) -> Vec<String> {
        post_order(m.main().unwrap().body())
            .iter()
            .filter_map(|e| {
                let name = e.op_name()?;
                Some(if name == "layout_transform" {
                    let a = e.attrs();
                    format!(
                        "{name}({}->{})",
                        a.str("src_layout").unwrap(),
                        a.str("dst_layout").unwrap()
                    )
                } else {
                    name.to_string()
                })
            })
            .collect()
    }

    #[test]
    fn activations_stay_in_blocks_between_convolutions() {
        for lanes in [8u32, 16] {
            let x = Var::new("x", Type::f32(&[1, 3, 8, 8]));
            let pad1 = [("padding", attr(vec![1i64, 1, 1, 1]))];
            let stem = mk("nn.conv2d", vec![x.expr(), weights(32, 3, 3)], &pad1);
            let bias = Expr::const_f32(&[0.25; 32], &[32, 1, 1]);
            let stem = mk("nn.relu", vec![mk("add", vec![stem, bias], &[])], &[]);
            let second = mk("nn.conv2d", vec![stem.clone(), weights(32, 32, 3)], &pad1);
            let res = mk("add", vec![second, stem], &[]);
            let pooled = mk("nn.global_avg_pool2d", vec![res], &[]);
            let m = IRModule::from_main(Function::new(vec![x], pooled));
            let cpu = CpuDesc::custom(lanes * 32, if lanes >= 16 { 32 } else { 16 });
            let ctx = PassContext::with_opt_level(3).with_cpu(cpu);
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let m = convert_blocked_layout().run(m, &ctx).unwrap();
            let m = fold_constant().run(m, &ctx).unwrap();
            // Blocks from the stem's output to the pooled result; NCHW back once, at the end.
            assert_eq!(
                ops(&m),
                [
                    "nn.conv2d".to_string(),
                    "add".into(),
                    "nn.relu".into(),
                    "nn.conv2d".into(),
                    "add".into(),
                    "nn.global_avg_pool2d".into(),
                    format!("layout_transform(NCHW{lanes}c->NCHW)"),
                ],
                "{m}"
            );
            let body = m.main().unwrap().body().clone();
            assert_eq!(body.ty().unwrap(), Type::f32(&[1, 32, 1, 1]));
            let pool = &body.args()[0];
            let b = lanes as i64;
            assert_eq!(pool.ty().unwrap(), Type::f32(&[1, 32 / b, 1, 1, b]));
            let conv = &pool.args()[0].args()[0];
            assert_eq!(
                conv.attrs().str("data_layout").unwrap(),
                format!("NCHW{b}c")
            );
            assert_eq!(conv.attrs().str("out_layout").unwrap(), format!("NCHW{b}c"));
        }
    }

    #[test]
    fn joins_take_the_layout_holding_most_of_their_data() {
        // A stem in blocks of 8, pooled, joined with the NCHW output of a grouped convolution
        // (which never computes in blocks): with 48 grouped channels beside the stem's 16 the
        // join and the ReLU after it stay NCHW, the stem's pooled blocks go back to NCHW; with
        // 8 grouped channels the join is in blocks.
        for (grouped, in_blocks) in [(48i64, false), (8, true)] {
            let x = Var::new("x", Type::f32(&[1, 3, 8, 8]));
            let pad1 = [("padding", attr(vec![1i64, 1, 1, 1]))];
            let stem = mk("nn.conv2d", vec![x.expr(), weights(16, 3, 3)], &pad1);
            let pooled = mk(
                "nn.max_pool2d",
                vec![stem.clone()],
                &[("pool_size", attr(vec![1i64, 1]))],
            );
            let group = mk(
                "nn.conv2d",
                vec![stem, weights(grouped, 4, 1)],
                &[("groups", attr(4i64))],
            );
            let joined = mk("concatenate", vec![pooled, group], &[("axis", attr(1i64))]);
            let out = mk("nn.relu", vec![joined], &[]);
            let m = IRModule::from_main(Function::new(vec![x], out));
            let ctx = PassContext::with_opt_level(3).with_cpu(CpuDesc::custom(256, 16));
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let m = convert_blocked_layout().run(m, &ctx).unwrap();
            let m = fold_constant().run(m, &ctx).unwrap();
            let ops = ops(&m);
            let at = |name: &str| ops.iter().position(|o| o == name).unwrap();
            let (join, relu) = (at("concatenate"), at("nn.relu"));
            let last = ops.last().unwrap().clone();
            if in_blocks {
                assert!(
                    ops[..join].contains(&"layout_transform(NCHW->NCHW8c)".to_string()),
                    "{m}"
                );
                assert_eq!(last, "layout_transform(NCHW8c->NCHW)", "{m}");
            } else {
                assert!(
                    !ops.contains(&"layout_transform(NCHW->NCHW8c)".to_string()),
                    "{m}"
                );
                // The pooled stem and the grouped convolution's input.
                let back = ops
                    .iter()
                    .filter(|o| *o == "layout_transform(NCHW8c->NCHW)");
                assert_eq!(back.count(), 2, "{m}");
                assert_eq!(last, "nn.relu", "{m}");
            }
            assert!(relu > join, "{m}");
        }
    }

    #[test]
    fn upsampling_stays_in_blocks_down_to_a_head_of_less_than_a_block() {
        // Two upsampling transposed convolutions (kernel = stride = 2) after a blocked
        // convolution: the first one's 1x1 convolution and its pixel shuffle stay in blocks;
        // the second, to 4 channels (less than a block), reads the blocks and writes NCHW.
        let x = Var::new("x", Type::f32(&[1, 3, 4, 4]));
        let pad1 = [("padding", attr(vec![1i64, 1, 1, 1]))];
        let conv = mk("nn.conv2d", vec![x.expr(), weights(16, 3, 3)], &pad1);
        let up = |data: Expr, o: i64| {
            let w = Expr::const_f32(&vec![0.25; (16 * o * 4) as usize], &[16, o, 2, 2]);
            mk(
                "nn.conv2d_transpose",
                vec![data, w],
                &[("strides", attr(vec![2i64, 2]))],
            )
        };
        let first = mk("nn.relu", vec![up(conv, 16)], &[]);
        let out = mk("sigmoid", vec![up(first, 1)], &[]);
        let m = IRModule::from_main(Function::new(vec![x], out));
        let ctx = PassContext::with_opt_level(3).with_cpu(CpuDesc::custom(256, 16));
        let m = alter_op_layout().run(m, &ctx).unwrap();
        let m = convert_blocked_layout().run(m, &ctx).unwrap();
        let ops = ops(&m);
        assert!(
            !ops.iter().any(|o| o.starts_with("layout_transform(NCHW")),
            "{m}"
        );
        let body = m.main().unwrap().body().clone();
        assert_eq!(body.ty().unwrap(), Type::f32(&[1, 1, 16, 16]), "{m}");
        let last = &body.args()[0];
        assert_eq!(last.op_name(), Some("nn.depth_to_space"), "{m}");
        assert_eq!(last.attrs().str("layout").unwrap(), "NCHW", "{m}");
        let head = &last.args()[0];
        assert_eq!(head.op_name(), Some("nn.conv2d"), "{m}");
        assert_eq!(head.attrs().str("data_layout").unwrap(), "NCHW8c", "{m}");
        let shuffled = &head.args()[0].args()[0];
        assert_eq!(shuffled.op_name(), Some("nn.depth_to_space"), "{m}");
        assert_eq!(shuffled.ty().unwrap(), Type::f32(&[1, 2, 8, 8, 8]), "{m}");
    }

    #[test]
    fn linear_resize_taps_gather_blocks() {
        // A tap of a linear 2x resize along the columns (`take` by a vector of indices, then
        // its weights) after a blocked convolution stays in blocks; a take along channels,
        // or by a matrix of indices, gets NCHW.
        for (axis, indices, blocked) in [
            (3i64, vec![8i64], true),
            (-2, vec![8], true),
            (1, vec![8], false),
            (3, vec![4, 2], false),
        ] {
            let x = Var::new("x", Type::f32(&[1, 3, 4, 4]));
            let pad1 = [("padding", attr(vec![1i64, 1, 1, 1]))];
            let conv = mk("nn.conv2d", vec![x.expr(), weights(16, 3, 3)], &pad1);
            let n: i64 = indices.iter().product();
            let ix: Vec<i64> = (0..n).map(|i| i / 2).collect();
            let ix =
                Expr::constant(kiln_runtime::tensor::Tensor::from_slice(&ix, &indices).unwrap());
            let taken = mk(
                "take",
                vec![conv, ix],
                &[("axis", attr(axis)), ("mode", attr("clip"))],
            );
            let out = mk("nn.relu", vec![taken], &[]);
            let m = IRModule::from_main(Function::new(vec![x], out));
            let ctx = PassContext::with_opt_level(3).with_cpu(CpuDesc::custom(256, 16));
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let m = convert_blocked_layout().run(m, &ctx).unwrap();
            let ops = ops(&m);
            let take = ops.iter().position(|o| o == "take").unwrap();
            let before = ops[..take]
                .iter()
                .any(|o| o.starts_with("layout_transform(NCHW8c"));
            assert_eq!(before, !blocked, "{m}");
            if blocked {
                assert_eq!(ops.last().unwrap(), "layout_transform(NCHW8c->NCHW)", "{m}");
                let body = m.main().unwrap().body().clone();
                let t = &body.args()[0].args()[0];
                assert_eq!(t.op_name(), Some("take"), "{m}");
                let shape: [i64; 5] = if axis == 3 {
                    [1, 2, 4, 8, 8]
                } else {
                    [1, 2, 8, 4, 8]
                };
                assert_eq!(t.ty().unwrap(), Type::f32(&shape), "{m}");
            }
        }
    }

    #[test]
    fn other_operators_get_nchw_back() {
        let x = Var::new("x", Type::f32(&[1, 16, 4, 4]));
        let w = Expr::const_f32(&[0.5; 16 * 16], &[16, 16, 1, 1]);
        let conv = mk("nn.conv2d", vec![x.expr(), w], &[]);
        let soft = mk("nn.softmax", vec![conv], &[("axis", attr(1i64))]);
        let m = IRModule::from_main(Function::new(vec![x], soft));
        let ctx = PassContext::with_opt_level(3).with_cpu(CpuDesc::custom(512, 32));
        let m = alter_op_layout().run(m, &ctx).unwrap();
        let m = convert_blocked_layout().run(m, &ctx).unwrap();
        assert_eq!(
            ops(&m),
            [
                "layout_transform(OIHW->OIHW16o)",
                "nn.conv2d",
                "layout_transform(NCHW16c->NCHW)",
                "nn.softmax"
            ],
            "{m}"
        );
    }

    #[test]
    fn row_kernel_heads_of_partial_blocks_read_nchw() {
        // A 3x3 convolution in blocks feeding a 1x1 head over a plane of 400 positions (the
        // NCHW-row kernel): with whole blocks of outputs the head reads blocks, with 20
        // outputs (not whole blocks of 16) it reads NCHW and keeps its OIHW kernel.
        for (heads, blocked) in [(32i64, true), (20, false)] {
            let x = Var::new("x", Type::f32(&[1, 16, 20, 20]));
            let pad1 = [("padding", attr(vec![1i64, 1, 1, 1]))];
            let body = mk("nn.conv2d", vec![x.expr(), weights(32, 16, 3)], &pad1);
            let head = mk("nn.conv2d", vec![body, weights(heads, 32, 1)], &[]);
            let m = IRModule::from_main(Function::new(vec![x], head));
            let ctx = PassContext::with_opt_level(3).with_cpu(CpuDesc::custom(512, 32));
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let m = convert_blocked_layout().run(m, &ctx).unwrap();
            let m = fold_constant().run(m, &ctx).unwrap();
            let head = m.main().unwrap().body().clone();
            let head = if head.op_name() == Some("layout_transform") {
                head.args()[0].clone()
            } else {
                head
            };
            assert_eq!(head.op_name(), Some("nn.conv2d"), "{m}");
            let a = head.attrs();
            let want = if blocked { "NCHW16c" } else { "NCHW" };
            assert_eq!(a.str("data_layout").unwrap(), want, "{m}");
            let kernel = if blocked { "OIHW16o" } else { "OIHW" };
            assert_eq!(a.str("kernel_layout").unwrap(), kernel, "{m}");
        }
    }
}
