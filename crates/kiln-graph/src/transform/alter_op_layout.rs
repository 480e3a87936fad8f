//! `AlterOpLayout`: operators whose schedules want another layout get it. On CPUs a
//! convolution loads a vector of output channels per weight read, so `nn.conv2d` with an `OIHW`
//! kernel gets `layout_transform(weight, "OIHW", "OIHW{b}o")` and `kernel_layout="OIHW{b}o"`,
//! `b` being the float32 lanes `L` of the pass context's CPU (16 with AVX-512, 8 with AVX2) or
//! `L/2` when that divides the output channels per group; otherwise each group's last block is
//! padded with zero filters (1000 classes: 63 blocks of 16), `channels` keeping the true count.
//! With groups that padding is no layout, so constant weights are packed by this pass itself.
//! Constant weights are packed at compile time by the `FoldConstant` that follows; depthwise
//! convolutions (one output channel per group) and 1x1 convolutions that
//! `kiln_topi::nn::conv2d_1x1` computes over flattened rows keep `OIHW`. Likewise `nn.dense`
//! weights `[N, K]` become `NK{b}n` (`[ceil(N/b), K, b]`, zeros past `N`), `b` being the
//! matrix kernel's column tile ([`column_block`]), and `nn.matmul` by a constant 2-D matrix
//! becomes `nn.dense` on such a packed constant (its data flattened to 2-D and the result
//! reshaped back when it has batch axes). `nn.conv2d_transpose` with a constant kernel and one
//! group becomes direct `nn.conv2d`s ([`super::alter_conv_transpose`]: one per output phase,
//! interleaved by `nn.depth_to_space`), which the pass's second round packs. Integer matrix products and convolutions by constant
//! 8-bit weights become `nn.dense_dot4` where the CPU has a four-byte dot product
//! ([`super::alter_integer_matmul`]).

use super::alter_conv_transpose::alter_conv_transpose;
use super::alter_integer_matmul::{alter_integer_conv, alter_integer_matmul};
use super::infer_type::infer_function;
use super::{function_pass, Pass};
use crate::ir::attrs::with_attr;
use crate::ir::visit::{post_order, rewrite_function_orig};
use crate::ir::{AttrValue, Expr, Function, Type};
use crate::op::{attr, eval, mk};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;
use kiln_tir::CpuDesc;
use kiln_topi::schedule::x86::dense::column_block;

/// The block for a convolution with `opg` output channels per group on a CPU of `lanes`
/// float32 lanes, if any: `lanes` or half of it when it divides them (the half only up to
/// `lanes` channels), else `lanes` (the half below `3/4 lanes` channels) with each group's
/// last block padded; none below 4 channels per group (depthwise convolutions). Full vectors
/// with a padded last block beat half vectors: a DBNet-style detector's 24-channel layers on
/// AVX-512 (two blocks of 16, a third of the last one padding, against three of 8) ran
/// 1.6-2.9x faster, the network 6.4 -> 5.4 ms (Intel Xeon).
fn block(opg: i64, lanes: i64) -> Option<i64> {
    let half = (lanes / 2).max(4).min(lanes);
    match [lanes, half].into_iter().find(|b| opg % b == 0) {
        Some(b) if b == lanes || opg <= lanes => Some(b),
        _ if opg >= lanes * 3 / 4 => Some(lanes),
        _ if opg >= 4 => Some(half),
        _ => None,
    }
}

/// The function attribute that records the channel block AlterOpLayout chose
/// ([`channel_block`]), which ConvertBlockedLayout then keeps the activations in.
pub const CHANNEL_BLOCK_ATTR: &str = "channel_block";

/// The channel block of `f`'s convolutions and of the activations between them: the CPU's
/// float32 lanes, or half of them where the CPU's multiply-add units are no wider than half
/// a vector ([`CpuDesc::fma_bits`], so half vectors do as many multiply-adds a cycle) and the
/// half saves at least a twentieth of the work: the layers' multiply-adds, each weighted by the
/// share its padded filters add ([`block`]), summed for both and compared. On AMD Zen 4
/// (AVX-512 on 256-bit units), AVX-512 code: a DBNet-style detector's 24-channel layers padded
/// a third of their filters in blocks of 16 and left their activations in NCHW, 5.70 -> 4.67
/// ms in blocks of 8 (an eighth less work; onnxruntime 5.86); a shufflenet's 136-channel
/// groups, 4.29 -> 4.03 ms (a ninth). Squeezenet and inception v1 (a 1000-class head, a
/// 24-channel reduction: a thousandth) ran 5-8% slower in blocks of 8 and keep 16.
pub fn channel_block(f: &Function, cpu: &CpuDesc) -> i64 {
    let lanes = cpu.f32_lanes();
    let half = lanes / 2;
    if half < 4 || i64::from(cpu.fma_bits) > half * 32 {
        return lanes;
    }
    let (mut whole, mut halves) = (0.0f64, 0.0f64);
    for e in post_order(f.body()) {
        if e.op_name() != Some("nn.conv2d") {
            continue;
        }
        let (Ok(out), Ok(w)) = (e.ty(), e.args()[1].ty()) else {
            continue;
        };
        let (Some((o, _)), Some((w, _))) = (out.as_tensor(), w.as_tensor()) else {
            continue;
        };
        let groups = e.attrs().int("groups").unwrap_or(1).max(1);
        if o.len() != 4 || w.len() != 4 || o[1] % groups != 0 {
            continue;
        }
        let opg = o[1] / groups;
        let macs = (o.iter().product::<i64>() * w[1] * w[2] * w[3]) as f64;
        let padded =
            |b: Option<i64>| b.map_or(1.0, |b| ((opg + b - 1) / b * b) as f64 / opg as f64);
        whole += macs * padded(block(opg, lanes));
        halves += macs * padded(block(opg, half));
    }
    // Half vectors load and broadcast twice as often per multiply-add: they must save a
    // twentieth of the work.
    if halves < 0.95 * whole {
        half
    } else {
        lanes
    }
}

/// Constant OIHW weights packed in blocks of `b` filters with each group padded to whole
/// blocks (the layout of `kiln_topi::nn::conv2d_packed`).
fn pack_grouped(w: &Tensor, groups: i64, b: i64) -> Result<Tensor> {
    let s = w.shape();
    let (o, inner) = (s[0], s[1] * s[2] * s[3]);
    let opg = o / groups;
    let bpg = (opg + b - 1) / b;
    let vals = eval::values(w)?;
    let mut out = vec![0.0; (groups * bpg * inner * b) as usize];
    for f in 0..o {
        let (g, r) = (f / opg, f % opg);
        let ob = g * bpg + r / b;
        for k in 0..inner {
            out[((ob * inner + k) * b + r % b) as usize] = vals[(f * inner + k) as usize];
        }
    }
    eval::make(
        &out,
        &Type::tensor(&[groups * bpg, s[1], s[2], s[3], b], w.dtype()),
    )
}

/// `nn.dense` with a `[N, K]` weight (2-D data, N with a matrix-kernel column block,
/// [`column_block`]): the weight as `NK{b}n`, zeros past `N` when the block does not divide
/// it. The product still has `N` columns: its last column tile is a shorter one (masked
/// vectors), so that a bias or an activation after it fuses into its output loop. (Computing
/// the padded columns and slicing them off cost a copy of the output: an SVTR-style
/// recognizer's `[80, 64] x [64, 6625]` classifier and its bias took 545 us that way, 513 us
/// with the shorter tile, on an Intel Xeon.)
fn alter_dense(orig: &Expr, e: &Expr, lanes: i64) -> Result<Option<Expr>> {
    let (d_ty, w_ty) = (orig.args()[0].ty()?, orig.args()[1].ty()?);
    let w = w_ty.shape();
    if d_ty.shape().len() != 2 || w.len() != 2 {
        return Ok(None);
    }
    let Some(b) = column_block(w[0], lanes) else {
        return Ok(None);
    };
    let layout = format!("NK{b}n");
    let packed = mk(
        "layout_transform",
        vec![e.args()[1].clone()],
        &[
            ("src_layout", attr("NK")),
            ("dst_layout", attr(layout.as_str())),
        ],
    );
    let attrs = with_attr(
        &e.as_call().expect("a call").attrs,
        "units",
        AttrValue::Int(w[0]),
    );
    Ok(Some(Expr::call_raw(
        Expr::op("nn.dense"),
        vec![e.args()[0].clone(), packed],
        attrs,
    )))
}

/// `nn.matmul(A, B)` with float32 `A` and `B` a constant float32 (or 8-bit integer,
/// `KeepQuantizedWeights`) matrix (its N columns with a column block,
/// [`column_block`]) and `A` not transposed: `nn.dense` on `B` as `[N, K]` (transposed when
/// stored `[K, N]`; folded), which the pass's second round packs as `NK{b}n`, `A` flattened to
/// `[-1, K]` and the result reshaped back when `A` has batch axes.
fn alter_matmul(orig: &Expr, e: &Expr, lanes: i64) -> Result<Option<Expr>> {
    let attrs = e.attrs();
    let Some(w) = e.args()[1].as_constant() else {
        return Ok(None);
    };
    let d_ty = orig.args()[0].ty()?;
    let d = d_ty.shape();
    let s = w.shape();
    let transposed = attrs.bool("transpose_b")?;
    let f32 = kiln_ffi::DataType::float(32);
    if attrs.bool("transpose_a")?
        || s.len() != 2
        || d.len() < 2
        || d_ty.dtype() != f32
        || kiln_topi::nn::product_dtype(f32, w.dtype()) != Some(f32)
    {
        return Ok(None);
    }
    let (k, n) = if transposed {
        (s[1], s[0])
    } else {
        (s[0], s[1])
    };
    if column_block(n, lanes).is_none() || d[d.len() - 1] != k {
        return Ok(None);
    }
    let nk = if transposed {
        e.args()[1].clone()
    } else {
        mk("transpose", vec![e.args()[1].clone()], &[])
    };
    let data = if d.len() == 2 {
        e.args()[0].clone()
    } else {
        mk(
            "reshape",
            vec![e.args()[0].clone()],
            &[("newshape", attr(vec![-1, k]))],
        )
    };
    let dense = mk("nn.dense", vec![data, nk], &[("units", attr(n))]);
    if d.len() == 2 {
        return Ok(Some(dense));
    }
    let mut shape = d[..d.len() - 1].to_vec();
    shape.push(n);
    Ok(Some(mk(
        "reshape",
        vec![dense],
        &[("newshape", attr(shape))],
    )))
}

/// A float32 3x3 convolution that computes as Winograd's F(2x2, 3x3) on `cpu`
/// (`kiln_topi::nn::conv2d_winograd::applies`) with constant weights: the weights transformed
/// here (`[16, C, K]`, kernel layout `WINOGRAD_F2x2_3x3`).
fn alter_winograd(orig: &Expr, e: &Expr, cpu: &CpuDesc) -> Result<Option<Expr>> {
    use kiln_topi::nn::conv2d_winograd as winograd;
    let a = e.attrs();
    let plain = a.str("data_layout")? == "NCHW"
        && a.str("out_layout")?.is_empty()
        && a.str("out_dtype")?.is_empty();
    let (d_ty, w_ty) = (orig.args()[0].ty()?, orig.args()[1].ty()?);
    let (Some((d, dt)), Some((w, _))) = (d_ty.as_tensor(), w_ty.as_tensor()) else {
        return Ok(None);
    };
    if !plain || dt != kiln_ffi::DataType::float(32) {
        return Ok(None);
    }
    let ta = crate::op::nn::conv2d::topi_attrs(&a)?;
    if !winograd::applies(d, w, &ta, cpu) {
        return Ok(None);
    }
    let Some(wt) = e.args()[1].as_constant() else {
        return Ok(None);
    };
    let (k, c) = (w[0], w[1]);
    let vals: Vec<f32> = eval::values(wt)?.into_iter().map(|v| v as f32).collect();
    let u: Vec<f64> = winograd::transform_weights(&vals, k as usize, c as usize)
        .into_iter()
        .map(f64::from)
        .collect();
    let u = eval::make(&u, &Type::tensor(&[16, c, k], dt))?;
    let call_attrs = &e.as_call().expect("a call").attrs;
    let attrs = with_attr(
        call_attrs,
        "kernel_layout",
        AttrValue::Str(winograd::KERNEL_LAYOUT.to_string()),
    );
    let attrs = with_attr(&attrs, "channels", AttrValue::Int(k));
    Ok(Some(Expr::call_raw(
        Expr::op("nn.conv2d"),
        vec![e.args()[0].clone(), Expr::constant(u)],
        attrs,
    )))
}

fn alter(orig: &Expr, e: &Expr, cpu: &CpuDesc, b: i64) -> Result<Option<Expr>> {
    let lanes = cpu.f32_lanes();
    if e.op_name() == Some("nn.conv2d_transpose") {
        return alter_conv_transpose(orig, e);
    }
    if e.op_name() == Some("nn.dense") {
        return alter_dense(orig, e, lanes);
    }
    if e.op_name() == Some("nn.matmul") {
        if let Some(x) = alter_integer_matmul(orig, e, cpu)? {
            return Ok(Some(x));
        }
        return alter_matmul(orig, e, lanes);
    }
    if e.op_name() != Some("nn.conv2d") || e.attrs().str("kernel_layout")? != "OIHW" {
        return Ok(None);
    }
    if let Some(x) = alter_integer_conv(orig, e, cpu)? {
        return Ok(Some(x));
    }
    if let Some(x) = alter_winograd(orig, e, cpu)? {
        return Ok(Some(x));
    }
    let w_ty = orig.args()[1].ty()?;
    let w = w_ty.shape();
    let groups = e.attrs().int("groups")?;
    if w.len() != 4 || groups < 1 || w[0] % groups != 0 {
        return Ok(None);
    }
    // 1x1 convolutions over whole vector rows compute over flattened positions instead.
    let d_ty = orig.args()[0].ty()?;
    let a = crate::op::nn::conv2d::topi_attrs(&e.attrs())?;
    if kiln_topi::nn::conv2d_1x1::applies(d_ty.shape(), w, &a, cpu) {
        return Ok(None);
    }
    let opg = w[0] / groups;
    let Some(b) = block(opg, b) else {
        return Ok(None);
    };
    let layout = format!("OIHW{b}o");
    let packed = if groups > 1 && opg % b != 0 {
        // Per-group padding is not a layout: pack constant weights here, leave others alone.
        let Some(wt) = e.args()[1].as_constant() else {
            return Ok(None);
        };
        Expr::constant(pack_grouped(wt, groups, b)?)
    } else {
        mk(
            "layout_transform",
            vec![e.args()[1].clone()],
            &[
                ("src_layout", attr("OIHW")),
                ("dst_layout", attr(layout.as_str())),
            ],
        )
    };
    let call_attrs = &e.as_call().expect("a call").attrs;
    let attrs = with_attr(call_attrs, "kernel_layout", AttrValue::Str(layout));
    let attrs = with_attr(&attrs, "channels", AttrValue::Int(w[0]));
    Ok(Some(Expr::call_raw(
        Expr::op("nn.conv2d"),
        vec![e.args()[0].clone(), packed],
        attrs,
    )))
}

/// The pass (opt level 3, as in TVM); blocks follow the pass context's CPU.
pub fn alter_op_layout() -> Pass {
    function_pass("AlterOpLayout", 3, |f, ctx| {
        // Twice: a transposed convolution becomes a direct one, which the second round packs
        // (what one round altered, the next leaves alone).
        let mut f = infer_function(&f)?;
        let b = channel_block(&f, &ctx.cpu);
        for _ in 0..2 {
            let out = rewrite_function_orig(&f, |orig, e| {
                Ok(alter(orig, e, &ctx.cpu, b)?.unwrap_or_else(|| e.clone()))
            })?;
            f = infer_function(&out)?;
        }
        if b == ctx.cpu.f32_lanes() {
            return Ok(f);
        }
        let attrs = with_attr(f.attrs(), CHANNEL_BLOCK_ATTR, AttrValue::Int(b));
        Ok(Function::with_attrs(
            f.params().to_vec(),
            f.body().clone(),
            attrs,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, IRModule, Type, Var};
    use crate::transform::{fold_constant, PassContext};

    /// A CPU description with `lanes` float32 lanes (AVX2's 8, AVX-512's 16).
    fn cpu_with_lanes(lanes: u32) -> CpuDesc {
        CpuDesc::custom(lanes * 32, if lanes >= 16 { 32 } else { 16 })
    }

    /// The function of one 3x3 convolution with `o` filters and `groups` groups, made typed.
    fn conv_of(o: i64, groups: i64) -> Function {
        let c = 24;
        let x = Var::new("x", Type::f32(&[1, c, 10, 10]));
        let w = Expr::const_f32(
            &vec![0.5; (o * c / groups * 9) as usize],
            &[o, c / groups, 3, 3],
        );
        let conv = mk("nn.conv2d", vec![x.expr(), w], &[("groups", attr(groups))]);
        infer_function(&Function::new(vec![x], conv)).unwrap()
    }

    #[test]
    fn half_blocks_only_where_units_are_half_a_vector_and_they_pad_less() {
        let mut zen4 = cpu_with_lanes(16);
        zen4.fma_bits = 256;
        let mut whole = cpu_with_lanes(16);
        whole.fma_bits = 512;
        // 24 filters: blocks of 16 pad a third of them.
        assert_eq!(channel_block(&conv_of(24, 1), &zen4), 8);
        assert_eq!(channel_block(&conv_of(24, 1), &whole), 16);
        // Whole blocks of 16, or padding below a twentieth (1000 = 62.5 x 16): 16.
        assert_eq!(channel_block(&conv_of(32, 1), &zen4), 16);
        assert_eq!(channel_block(&conv_of(1000, 1), &zen4), 16);
        // Depthwise layers (one filter a group) have no block.
        assert_eq!(channel_block(&conv_of(24, 24), &zen4), 16);
        // 3 groups of 8 filters: each group one half block either way.
        assert_eq!(channel_block(&conv_of(24, 3), &zen4), 16);
        // AVX2 on 128-bit units (Zen 1): blocks of 4 for 12 filters.
        let mut zen1 = cpu_with_lanes(8);
        zen1.fma_bits = 128;
        assert_eq!(channel_block(&conv_of(12, 1), &zen1), 4);
        assert_eq!(channel_block(&conv_of(12, 1), &cpu_with_lanes(8)), 8);
        assert_eq!(kiln_tir::cpu::fma_datapath_bits("znver4"), Some(256));
        assert_eq!(kiln_tir::cpu::fma_datapath_bits("znver5"), None);
    }

    #[test]
    fn packs_conv_kernels_in_the_cpus_lanes_and_folds_them() {
        // 6 input channels: not whole vectors for Winograd at any of these widths.
        for lanes in [16i64, 8, 4] {
            let x = Var::new("x", Type::f32(&[1, 6, 8, 8]));
            let vals: Vec<f32> = (0..32 * 6 * 9).map(|v| v as f32).collect();
            let w = Expr::const_f32(&vals, &[32, 6, 3, 3]);
            let dw = Expr::const_f32(&vals[..54], &[6, 1, 3, 3]);
            let conv = mk("nn.conv2d", vec![x.expr(), w], &[]);
            let depthwise = mk("nn.conv2d", vec![x.expr(), dw], &[("groups", attr(6))]);
            let body = Expr::tuple(vec![conv, depthwise]);
            let m = IRModule::from_main(Function::new(vec![x], body));
            let ctx = PassContext::with_opt_level(3).with_cpu(cpu_with_lanes(lanes as u32));
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let m = fold_constant().run(m, &ctx).unwrap();
            let main = m.main().unwrap();
            let fields = crate::ir::visit::children(main.body());
            let packed = &fields[0];
            assert_eq!(
                packed.attrs().str("kernel_layout").unwrap(),
                format!("OIHW{lanes}o")
            );
            let pw = packed.args()[1].as_constant().expect("folded weight");
            assert_eq!(pw.shape(), &[32 / lanes, 6, 3, 3, lanes]);
            // Packing kept every filter value in its place.
            let got = eval::values(pw).unwrap();
            for (k, v) in got.iter().enumerate() {
                let k = k as i64;
                let (ob, inner, oi) = (k / (54 * lanes), (k / lanes) % 54, k % lanes);
                assert_eq!(*v, vals[((ob * lanes + oi) * 54 + inner) as usize] as f64);
            }
            assert_eq!(packed.ty().unwrap(), Type::f32(&[1, 32, 6, 6]));
            assert_eq!(fields[1].attrs().str("kernel_layout").unwrap(), "OIHW");
        }
    }

    #[test]
    fn winograd_takes_3x3_layers_of_whole_vectors() {
        use kiln_topi::nn::conv2d_winograd as winograd;
        for lanes in [16i64, 8] {
            let x = Var::new("x", Type::f32(&[1, 32, 12, 12]));
            let vals: Vec<f32> = (0..32 * 32 * 9).map(|v| (v % 7) as f32 - 3.0).collect();
            let w = Expr::const_f32(&vals, &[32, 32, 3, 3]);
            let pad = [("padding", attr(vec![1i64, 1, 1, 1]))];
            let conv = mk("nn.conv2d", vec![x.expr(), w.clone()], &pad);
            let strided = mk(
                "nn.conv2d",
                vec![x.expr(), w],
                &[
                    ("padding", attr(vec![1i64, 1, 1, 1])),
                    ("strides", attr(vec![2i64, 2])),
                ],
            );
            let body = Expr::tuple(vec![conv, strided]);
            let m = IRModule::from_main(Function::new(vec![x], body));
            let ctx = PassContext::with_opt_level(3).with_cpu(cpu_with_lanes(lanes as u32));
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let main = m.main().unwrap();
            let fields = crate::ir::visit::children(main.body());
            let a = fields[0].attrs();
            assert_eq!(a.str("kernel_layout").unwrap(), winograd::KERNEL_LAYOUT);
            let u = fields[0].args()[1]
                .as_constant()
                .expect("transformed weight");
            assert_eq!(u.shape(), &[16, 32, 32]);
            let want = winograd::transform_weights(&vals, 32, 32);
            let got = eval::values(u).unwrap();
            assert!(got.iter().zip(&want).all(|(g, w)| *g == *w as f64));
            assert_eq!(fields[0].ty().unwrap(), Type::f32(&[1, 32, 12, 12]));
            // Stride 2 keeps the packed direct kernel, and so do narrow layers (16 -> 16)
            // and planes of fewer than MIN_TILES tiles (8x8: 16 tiles).
            let b = fields[1].attrs().str("kernel_layout").unwrap();
            assert_eq!(b, format!("OIHW{lanes}o"));
            for (c, hw) in [(16, 12), (32, 8)] {
                let x = Var::new("x", Type::f32(&[1, c, hw, hw]));
                let n = (c * c * 9) as usize;
                let w = Expr::const_f32(&vals[..n], &[c, c, 3, 3]);
                let conv = mk("nn.conv2d", vec![x.expr(), w], &pad);
                let m = IRModule::from_main(Function::new(vec![x], conv));
                let m = alter_op_layout().run(m, &ctx).unwrap();
                let direct = m
                    .main()
                    .unwrap()
                    .body()
                    .attrs()
                    .str("kernel_layout")
                    .unwrap();
                assert_eq!(direct, format!("OIHW{lanes}o"), "{c} channels, {hw}x{hw}");
            }
        }
    }

    #[test]
    fn blocks_follow_the_lanes() {
        assert_eq!(block(64, 16), Some(16));
        assert_eq!(block(24, 16), Some(16));
        assert_eq!(block(8, 16), Some(8));
        assert_eq!(block(1000, 16), Some(16));
        assert_eq!(block(3, 16), None);
        assert_eq!(block(64, 8), Some(8));
        assert_eq!(block(12, 8), Some(8));
        assert_eq!(block(4, 8), Some(4));
        assert_eq!(block(1000, 8), Some(8));
        assert_eq!(block(3, 8), None);
    }

    #[test]
    fn matmul_by_a_constant_becomes_packed_dense() {
        for (lanes, transpose_b) in [(8i64, false), (16, true)] {
            let (k, n) = (3i64, 37i64);
            let x = Var::new("x", Type::f32(&[2, 5, k]));
            let vals: Vec<f32> = (0..k * n).map(|v| v as f32).collect();
            let shape = if transpose_b { [n, k] } else { [k, n] };
            let w = Expr::const_f32(&vals, &shape);
            let mm = mk(
                "nn.matmul",
                vec![x.expr(), w],
                &[("transpose_b", attr(transpose_b))],
            );
            let m = IRModule::from_main(Function::new(vec![x], mm));
            let ctx = PassContext::with_opt_level(3).with_cpu(cpu_with_lanes(lanes as u32));
            let m = alter_op_layout().run(m, &ctx).unwrap();
            let m = fold_constant().run(m, &ctx).unwrap();
            let body = m.main().unwrap().body().clone();
            assert_eq!(body.op_name(), Some("reshape"));
            assert_eq!(body.ty().unwrap(), Type::f32(&[2, 5, n]));
            // 37 columns are not whole blocks: the packed weight has zeros past them, the
            // product keeps 37 columns.
            let dense = &body.args()[0];
            assert_eq!(dense.op_name(), Some("nn.dense"));
            let b = column_block(n, lanes).expect("a block");
            assert_eq!(b, 2 * lanes);
            assert_eq!(dense.ty().unwrap(), Type::f32(&[10, n]));
            let pw = dense.args()[1].as_constant().expect("packed constant");
            let nb = (n + b - 1) / b;
            assert_eq!(pw.shape(), &[nb, k, b]);
            let got = eval::values(pw).unwrap();
            for (i, v) in got.iter().enumerate() {
                let i = i as i64;
                let (blk, r, c) = (i / (k * b), (i / b) % k, i % b);
                let j = blk * b + c;
                let want = match (j < n, transpose_b) {
                    (false, _) => 0.0,
                    (true, false) => vals[(r * n + j) as usize],
                    (true, true) => vals[(j * k + r) as usize],
                };
                assert_eq!(*v, want as f64, "element {i}");
            }
        }
    }
}
