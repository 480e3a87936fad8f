//! AlterOpLayout's rule for transposed convolutions: `nn.conv2d_transpose` with a constant
//! float32 kernel becomes direct `nn.conv2d`s (of as many groups), which get the packed kernels,
//! register tiles and fused epilogues of every other convolution.
//!
//! Without dilation it splits into its output phases (the sub-pixel convolution): output row
//! `Y = q*s + r` of the full (uncropped) output sums `x[q - j] * w[r + j*s]` over the taps `j`
//! of phase `r`, a direct convolution with a kernel of `ceil((K - r)/s)` taps. The `sh x sw`
//! phases give `sh*sw*O` channels (channel `(i*sw + j)*O + o` holding phase `(i, j)` of output
//! channel `o`, so that in channel blocks each phase's channels are whole blocks): one
//! convolution of `ceil(K/s)` taps when the phases' taps are even (a 4x4 kernel of stride 2),
//! else one convolution per phase joined along the channels (a 3x3 kernel of stride 2, and any
//! grouped one). `nn.depth_to_space` (DCR) interleaves them into pixels and a `strided_slice`
//! crops the padding. No multiply-add meets an inserted zero: a kernel that equals its stride
//! (the upsampling kind) is one 1x1 convolution.
//!
//! With dilation the phases do not split evenly; the input is dilated by the strides (zeros
//! between its pixels), padded, and convolved at stride 1 by the flipped kernel, which
//! multiplies the zeros too (`sh*sw` times the work) at the packed kernel's speed.

use crate::ir::{Expr, Type};
use crate::op::nn::{attr_padding, attr_pair};
use crate::op::{attr, eval, mk};
use kiln_ffi::Result;
use kiln_runtime::tensor::Tensor;

/// `nn.conv2d_transpose` `e` (with `orig` its typed original) as direct convolutions, when its
/// kernel is a float32 constant (see the module docs); `None` otherwise, and for a grouped one
/// with dilation.
pub fn alter_conv_transpose(orig: &Expr, e: &Expr) -> Result<Option<Expr>> {
    let a = e.attrs();
    let Some(w) = e.args()[1].as_constant() else {
        return Ok(None);
    };
    let d_ty = orig.args()[0].ty()?;
    let d = d_ty.shape();
    let ws = w.shape();
    let groups = a.int("groups")?;
    if groups < 1
        || d.len() != 4
        || ws.len() != 4
        || w.dtype() != kiln_ffi::DataType::float(32)
        || d_ty.dtype() != w.dtype()
        || ws[0] % groups != 0
    {
        return Ok(None);
    }
    let g = Geometry {
        groups,
        strides: attr_pair(&a, "strides")?,
        dilation: attr_pair(&a, "dilation")?,
        output_padding: attr_pair(&a, "output_padding")?,
        pads: {
            let p = attr_padding(&a)?;
            [p.top, p.left, p.bottom, p.right]
        },
        input: (d[2], d[3]),
    };
    let x = e.args()[0].clone();
    if g.dilation == (1, 1) {
        phases(x, w, &g).map(Some)
    } else if groups == 1 {
        dilated_input(x, w, &g, d[0], d[1]).map(Some)
    } else {
        Ok(None)
    }
}

/// The geometry of a transposed convolution.
struct Geometry {
    groups: i64,
    strides: (i64, i64),
    dilation: (i64, i64),
    output_padding: (i64, i64),
    /// `[top, left, bottom, right]`, cropped from the full output.
    pads: [i64; 4],
    /// The input's `(rows, columns)`.
    input: (i64, i64),
}

/// One spatial axis of the phase split: input extent `n`, kernel `k`, stride `s`, output
/// padding `op`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AxisSplit {
    stride: i64,
    kernel: i64,
    /// Taps of phase `r`'s kernel: `ceil((k - r) / s)`, 0 for a phase past a kernel shorter
    /// than the stride.
    taps: Vec<i64>,
    /// Positions of each phase in the full output: `ceil(full / s)`.
    positions: i64,
    /// The full output's extent before cropping: `(n - 1)*s + k + op`.
    full: i64,
    /// Rows of zero padding after the input: `positions - n`.
    after: i64,
}

impl AxisSplit {
    fn new(n: i64, k: i64, s: i64, op: i64) -> AxisSplit {
        let full = (n - 1) * s + k + op;
        let positions = (full + s - 1) / s;
        AxisSplit {
            stride: s,
            kernel: k,
            taps: (0..s).map(|r| (k - r + s - 1).max(0) / s).collect(),
            positions,
            full,
            after: positions - n,
        }
    }

    /// The most taps of a phase: `ceil(k / s)`.
    fn most(&self) -> i64 {
        self.taps[0]
    }

    /// Kernel position of tap `t` of phase `r` in a kernel of `taps` taps (none past the
    /// kernel: a zero tap). Tap `t` reads input position `q - (taps - 1 - t)` for output
    /// position `q*s + r`.
    fn kernel_index(&self, r: i64, t: i64, taps: i64) -> Option<i64> {
        Some(r + (taps - 1 - t) * self.stride).filter(|&k| k < self.kernel)
    }
}

/// Whether the phases compute as separate convolutions of their own taps rather than one of
/// `most` taps on every axis: when every phase has a tap and that leaves out a quarter of the
/// multiply-adds (a 3x3 kernel of stride 2: phases of 2x2, 2x1, 1x2 and 1x1 taps, 9 of 16), and
/// always with groups (one grouped convolution would order its output channels by group, not
/// by phase; a phase past a kernel shorter than the stride then gets one zero tap).
fn separate_phases(rows: &AxisSplit, cols: &AxisSplit, groups: i64) -> bool {
    let padded = rows.stride * cols.stride * rows.most() * cols.most();
    let own = rows.kernel * cols.kernel; // the phases' taps sum to the kernel's
    let every = rows.taps.iter().chain(&cols.taps).all(|&t| t > 0);
    groups > 1 || (every && 4 * own <= 3 * padded)
}

/// The phase split (module docs) of a transposed convolution without dilation.
fn phases(x: Expr, w: &Tensor, g: &Geometry) -> Result<Expr> {
    let s = w.shape();
    let cpg = s[0] / g.groups;
    let (sh, sw) = g.strides;
    let rows = AxisSplit::new(g.input.0, s[2], sh, g.output_padding.0);
    let cols = AxisSplit::new(g.input.1, s[3], sw, g.output_padding.1);
    let vals = eval::values(w)?;
    let phase_list: Vec<(i64, i64)> = (0..sh).flat_map(|i| (0..sw).map(move |j| (i, j))).collect();
    let conv = |x: Expr, kernel: Vec<f64>, (jh, jw): (i64, i64)| -> Result<Expr> {
        let kernel = eval::make(
            &kernel,
            &Type::tensor(
                &[kernel.len() as i64 / (cpg * jh * jw), cpg, jh, jw],
                w.dtype(),
            ),
        )?;
        let padding = vec![jh - 1, jw - 1, rows.after, cols.after];
        Ok(mk(
            "nn.conv2d",
            vec![x, Expr::constant(kernel)],
            &[("padding", attr(padding)), ("groups", attr(g.groups))],
        ))
    };
    let y = if separate_phases(&rows, &cols, g.groups) {
        let parts = phase_list
            .iter()
            .map(|&(i, j)| {
                let taps = (rows.taps[i as usize].max(1), cols.taps[j as usize].max(1));
                conv(
                    x.clone(),
                    phase_kernel(&vals, s, g.groups, &rows, &cols, (i, j), taps),
                    taps,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        mk("concatenate", parts, &[("axis", attr(1i64))])
    } else {
        let taps = (rows.most(), cols.most());
        let kernel: Vec<f64> = phase_list
            .iter()
            .flat_map(|&p| phase_kernel(&vals, s, g.groups, &rows, &cols, p, taps))
            .collect();
        conv(x, kernel, taps)?
    };
    let y = if (sh, sw) == (1, 1) {
        y // one phase: nothing to interleave
    } else {
        mk(
            "nn.depth_to_space",
            vec![y],
            &[("block_size", attr(vec![sh, sw])), ("mode", attr("DCR"))],
        )
    };
    let [top, left, bottom, right] = g.pads;
    let (end_h, end_w) = (rows.full - bottom, cols.full - right);
    if top == 0 && left == 0 && end_h == rows.positions * sh && end_w == cols.positions * sw {
        return Ok(y);
    }
    Ok(mk(
        "strided_slice",
        vec![y],
        &[
            ("begin", attr(vec![top, left])),
            ("end", attr(vec![end_h, end_w])),
            ("axes", attr(vec![2i64, 3])),
        ],
    ))
}

/// The OIHW kernel `[O, C/groups, taps.0, taps.1]` of phase `(i, j)` of the IOHW kernel
/// `vals` of shape `s` (`[C, O/groups, KH, KW]`), zero where a tap falls past the kernel.
fn phase_kernel(
    vals: &[f64],
    s: &[i64],
    groups: i64,
    rows: &AxisSplit,
    cols: &AxisSplit,
    (i, j): (i64, i64),
    (jh, jw): (i64, i64),
) -> Vec<f64> {
    let (opg, kh, kw) = (s[1], s[2], s[3]);
    let cpg = s[0] / groups;
    let mut kernel = vec![0.0; (groups * opg * cpg * jh * jw) as usize];
    for (dst, v) in kernel.iter_mut().enumerate() {
        let dst = dst as i64;
        let (tw, rest) = (dst % jw, dst / jw);
        let (th, rest) = (rest % jh, rest / jh);
        let (ci, oi) = (rest % cpg, rest / cpg);
        // Input channel `ci` of output channel `oi`'s group.
        let ci = oi / opg * cpg + ci;
        if let (Some(y), Some(xx)) = (rows.kernel_index(i, th, jh), cols.kernel_index(j, tw, jw)) {
            *v = vals[(((ci * opg + oi % opg) * kh + y) * kw + xx) as usize];
        }
    }
    kernel
}

/// A dilated transposed convolution as the direct convolution it equals: the input dilated by
/// the strides (`reshape` to `[N, C, H, 1, W, 1]`, zero `nn.pad` to `[.., s, .., s]`,
/// `reshape` to `[N, C, H*s, W*s]`), padded by `d*(K-1) - pad` before and `d*(K-1) - pad +
/// output_padding - (s-1)` after (negative values crop), and convolved at stride 1 with the
/// kernel flipped.
fn dilated_input(x: Expr, w: &Tensor, g: &Geometry, n: i64, c: i64) -> Result<Expr> {
    let ws = w.shape();
    let (sh, sw) = g.strides;
    let (dh, dw) = g.dilation;
    let (h, wd) = g.input;
    let mut x = x;
    if sh > 1 || sw > 1 {
        x = mk(
            "reshape",
            vec![x],
            &[("newshape", attr(vec![n, c, h, 1, wd, 1]))],
        );
        x = mk(
            "nn.pad",
            vec![x],
            &[(
                "pad_width",
                attr(vec![0, 0, 0, 0, 0, 0, 0, sh - 1, 0, 0, 0, sw - 1]),
            )],
        );
        x = mk(
            "reshape",
            vec![x],
            &[("newshape", attr(vec![n, c, h * sh, wd * sw]))],
        );
    }
    let (eh, ew) = (dh * (ws[2] - 1), dw * (ws[3] - 1));
    let [top, left, bottom, right] = g.pads;
    let (oph, opw) = g.output_padding;
    let pads = vec![
        0,
        0,
        0,
        0,
        eh - top,
        eh - bottom + oph - (sh - 1),
        ew - left,
        ew - right + opw - (sw - 1),
    ];
    if pads.iter().any(|&v| v != 0) {
        x = mk("nn.pad", vec![x], &[("pad_width", attr(pads))]);
    }
    // The kernel flipped (channels swapped, both spatial axes reversed): the one phase of a
    // stride-1 split.
    let (kh, kw) = (ws[2], ws[3]);
    let one = |k| AxisSplit::new(1, k, 1, 0);
    let vals = eval::values(w)?;
    let flipped = phase_kernel(&vals, ws, 1, &one(kh), &one(kw), (0, 0), (kh, kw));
    let kernel = eval::make(&flipped, &Type::tensor(&[ws[1], ws[0], kh, kw], w.dtype()))?;
    Ok(mk(
        "nn.conv2d",
        vec![x, Expr::constant(kernel)],
        &[("dilation", attr(vec![dh, dw]))],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Function, IRModule, Var};
    use crate::transform::infer_type::infer_function;

    /// The typed body `nn.conv2d_transpose` of `[1, 4, 5, 6]` data by a `[4, 16, k.0, k.1]`
    /// kernel of values `0, 1, 2, ...` becomes, with `attrs`.
    fn altered(k: (i64, i64), attrs: &[(&str, Vec<i64>)]) -> (Expr, Vec<f32>) {
        let x = Var::new("x", Type::f32(&[1, 4, 5, 6]));
        let vals: Vec<f32> = (0..4 * 16 * k.0 * k.1).map(|v| v as f32).collect();
        let w = Expr::const_f32(&vals, &[4, 16, k.0, k.1]);
        let attrs: Vec<(&str, _)> = attrs.iter().map(|(n, v)| (*n, attr(v.clone()))).collect();
        let ct = mk("nn.conv2d_transpose", vec![x.expr(), w], &attrs);
        let f = infer_function(&Function::new(vec![x.clone()], ct)).unwrap();
        let want = f.body().ty().unwrap();
        let new = alter_conv_transpose(f.body(), f.body())
            .unwrap()
            .expect("altered");
        let m = IRModule::from_main(Function::new(vec![x], new));
        let body = infer_function(&m.main().unwrap()).unwrap().body().clone();
        assert_eq!(
            body.ty().unwrap(),
            want,
            "the transposed convolution's type"
        );
        (body, vals)
    }

    /// The constant kernel of convolution `conv`, its shape and values.
    fn kernel_of(conv: &Expr) -> (Vec<i64>, Vec<f64>) {
        assert_eq!(conv.op_name(), Some("nn.conv2d"));
        let k = conv.args()[1].as_constant().expect("constant kernel");
        (k.shape().to_vec(), eval::values(k).unwrap())
    }

    #[test]
    fn even_phases_are_one_convolution() {
        // 4x4, stride 2, pads 1: 2x2 taps a phase, one convolution to 4 x 16 channels whose
        // depth_to_space is cropped by the pads.
        let (body, vals) = altered(
            (4, 4),
            &[("strides", vec![2, 2]), ("padding", vec![1, 1, 1, 1])],
        );
        assert_eq!(body.op_name(), Some("strided_slice"));
        assert_eq!(body.attrs().ints("begin").unwrap(), [1, 1]);
        let shuffle = &body.args()[0];
        assert_eq!(shuffle.op_name(), Some("nn.depth_to_space"));
        assert_eq!(shuffle.attrs().ints("block_size").unwrap(), [2, 2]);
        let conv = &shuffle.args()[0];
        assert_eq!(conv.attrs().ints("padding").unwrap(), [1, 1, 1, 1]);
        let (shape, got) = kernel_of(conv);
        assert_eq!(shape, [64, 4, 2, 2]);
        // Channel (i*2 + j)*16 + o, tap (th, tw) reads w[c, o, i + (1 - th)*2, j + (1 - tw)*2].
        for (i, j, o, c, th, tw) in [(0, 0, 0, 0, 0, 0), (1, 0, 5, 3, 1, 0), (1, 1, 15, 2, 0, 1)] {
            let src = ((c * 16 + o) * 4 + i + (1 - th) * 2) * 4 + j + (1 - tw) * 2;
            let dst = ((((i * 2 + j) * 16 + o) * 4 + c) * 2 + th) * 2 + tw;
            assert_eq!(got[dst as usize], vals[src as usize] as f64);
        }
    }

    #[test]
    fn uneven_phases_are_separate_convolutions() {
        // 3x3, stride 2: phases of 2x2, 2x1, 1x2 and 1x1 taps, joined along the channels.
        let (body, vals) = altered(
            (3, 3),
            &[
                ("strides", vec![2, 2]),
                ("padding", vec![1, 1, 1, 1]),
                ("output_padding", vec![1, 1]),
            ],
        );
        let joined = &body.args()[0].args()[0];
        assert_eq!(joined.op_name(), Some("concatenate"));
        let shapes: Vec<Vec<i64>> = joined.args().iter().map(|c| kernel_of(c).0).collect();
        assert_eq!(
            shapes,
            [[16, 4, 2, 2], [16, 4, 2, 1], [16, 4, 1, 2], [16, 4, 1, 1]]
        );
        // Phase (1, 1) is the kernel's centre tap alone.
        let (_, got) = kernel_of(&joined.args()[3]);
        for (o, c) in [(0i64, 0i64), (7, 3)] {
            assert_eq!(
                got[(o * 4 + c) as usize],
                vals[(((c * 16 + o) * 3 + 1) * 3 + 1) as usize] as f64
            );
        }
    }

    #[test]
    fn an_upsampling_kernel_is_one_uncropped_1x1_convolution() {
        let (body, _) = altered((2, 2), &[("strides", vec![2, 2])]);
        assert_eq!(body.op_name(), Some("nn.depth_to_space"));
        assert_eq!(kernel_of(&body.args()[0]).0, [64, 4, 1, 1]);
    }

    #[test]
    fn a_dilated_one_convolves_the_dilated_input_by_the_flipped_kernel() {
        let (body, vals) = altered((3, 3), &[("strides", vec![2, 2]), ("dilation", vec![2, 2])]);
        assert_eq!(body.attrs().ints("dilation").unwrap(), [2, 2]);
        assert_eq!(body.args()[0].op_name(), Some("nn.pad"));
        let (shape, got) = kernel_of(&body);
        assert_eq!(shape, [16, 4, 3, 3]);
        for (o, c, y, x) in [(0i64, 0i64, 0i64, 0i64), (3, 2, 1, 2), (15, 3, 2, 0)] {
            let src = ((c * 16 + o) * 3 + (2 - y)) * 3 + (2 - x);
            assert_eq!(
                got[(((o * 4 + c) * 3 + y) * 3 + x) as usize],
                vals[src as usize] as f64
            );
        }
    }

    #[test]
    fn grouped_phases_are_grouped_convolutions() {
        // 2 groups of 2 input and 3 output channels, 2x2 kernel of stride 2: four 1x1
        // convolutions of 2 groups, output channel o of group o / 3 reading its group's inputs.
        let x = Var::new("x", Type::f32(&[1, 4, 3, 3]));
        let vals: Vec<f32> = (0..4 * 3 * 2 * 2).map(|v| v as f32).collect();
        let w = Expr::const_f32(&vals, &[4, 3, 2, 2]);
        let ct = mk(
            "nn.conv2d_transpose",
            vec![x.expr(), w],
            &[("strides", attr(vec![2i64, 2])), ("groups", attr(2i64))],
        );
        let f = infer_function(&Function::new(vec![x], ct)).unwrap();
        let body = alter_conv_transpose(f.body(), f.body())
            .unwrap()
            .expect("altered");
        let joined = &body.args()[0];
        assert_eq!(joined.op_name(), Some("concatenate"));
        for (phase, conv) in joined.args().iter().enumerate() {
            assert_eq!(conv.attrs().int("groups").unwrap(), 2);
            let (shape, got) = kernel_of(conv);
            assert_eq!(shape, [6, 2, 1, 1]);
            let (i, j) = (phase as i64 / 2, phase as i64 % 2);
            for o in 0..6i64 {
                for c in 0..2i64 {
                    let src = (((o / 3 * 2 + c) * 3 + o % 3) * 2 + i) * 2 + j;
                    assert_eq!(got[(o * 2 + c) as usize], vals[src as usize] as f64);
                }
            }
        }
    }

    #[test]
    fn phase_taps() {
        let a = AxisSplit::new(5, 3, 2, 1);
        assert_eq!(
            (a.taps.as_slice(), a.full, a.positions, a.after),
            (&[2, 1][..], 12, 6, 1)
        );
        assert_eq!(AxisSplit::new(4, 1, 2, 0).taps, [1, 0]);
        assert_eq!(AxisSplit::new(4, 5, 3, 0).taps, [2, 2, 1]);
    }
}
