//! Casts to and from the narrow types (float8 variants, float4 E2M1, int4/uint4, int2/uint2)
//! built through LLVM, against `kiln_ffi::narrow` (itself tested against each format's bit
//! layout): every code decoded, random and special float32 values encoded (saturating or not,
//! E8M0 in each rounding mode), and a narrow-to-narrow cast through float32.

#[path = "topi_injective_common.rs"]
mod common;

use common::*;
use kiln_ffi::narrow::{e8m0_from_f32, int_from_f32, int_to_f32, E8m0Round, NarrowFloat};
use kiln_ffi::{Any, DataType, Device};
use kiln_runtime::tensor::Tensor as RtTensor;
use kiln_te::create_schedule;
use kiln_topi::elemwise::narrow_cast::NarrowMode;
use kiln_topi::elemwise::{cast, cast_with};

const INTS: [&str; 4] = ["int4", "uint4", "int2", "uint2"];

/// Builds `cast_with(x: from -> to)` and runs it on the raw bytes `input`; the output bytes.
fn run_cast(from: DataType, to: DataType, mode: NarrowMode, input: &[u8], n: usize) -> Vec<u8> {
    let x = ph(&[n as i64], from, "x");
    let y = cast_with(&x, to, mode).unwrap();
    let s = create_schedule(&[y.op().clone()]);
    let name = "narrow_cast";
    let m = kiln_codegen::driver::build(&s, &[x, y.clone()], NATIVE, name)
        .unwrap_or_else(|e| panic!("building {from} -> {to}: {e}"));
    let xin = RtTensor::empty(&[n as i64], from, Device::cpu(0)).unwrap();
    xin.copy_from_bytes(input).unwrap();
    let out = poisoned(&y);
    m.function(name)
        .unwrap()
        .call_any(&[Any::from(xin), Any::from(out.clone())])
        .unwrap();
    out.to_bytes().unwrap()
}

/// Random float32 values over the narrow ranges (many near ties), plus specials.
fn samples(seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-30,
        -1e-40,
        448.0,
        464.0,
        470.0,
        -480.0,
        57344.0,
        61440.0,
        1e9,
        -3e38,
        5.0,
        -7.0,
        0.25,
    ];
    for u in rng.f32s(3000) {
        let e = rng.ints(1, -22, 18)[0] as i32;
        v.push(u * 2f32.powi(e));
    }
    // Exact midpoints between neighbours of E4M3 and E5M2 (ties to even).
    for m in rng.ints(200, 0, 256) {
        v.push((m as f32 + 0.5) * 2f32.powi(rng.ints(1, -10, 6)[0] as i32));
    }
    v
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s_of(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn every_code_decodes_to_float32() {
    let codes: Vec<u8> = (0..=255).collect();
    for f in NarrowFloat::ALL {
        let n = if f == NarrowFloat::E2M1FN { 16 } else { 256 };
        let got = f32s_of(&run_cast(
            f.dtype(),
            f32t(),
            NarrowMode::default(),
            &codes[..n],
            n,
        ));
        for (c, g) in got.iter().enumerate() {
            let want = f.to_f32(c as u8);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "{f:?} code {c:#x}: got {g}, want {want}"
            );
        }
    }
    for name in INTS {
        let t: DataType = name.parse().unwrap();
        let (bits, signed) = kiln_ffi::narrow::narrow_int(t).unwrap();
        let n = 1usize << bits;
        let got = f32s_of(&run_cast(t, f32t(), NarrowMode::default(), &codes[..n], n));
        for (c, g) in got.iter().enumerate() {
            assert_eq!(*g, int_to_f32(c as u8, bits, signed), "{name} code {c}");
        }
        // To a wider integer directly.
        let wide = run_cast(t, DataType::int(8), NarrowMode::default(), &codes[..n], n);
        for (c, g) in wide.iter().enumerate() {
            assert_eq!(*g as i8 as f32, int_to_f32(c as u8, bits, signed), "{name}");
        }
    }
}

#[test]
fn float32_encodes_with_onnx_rules() {
    let seed = seed("narrow_encode");
    let v = samples(seed);
    let input = bytes_of(&v);
    for f in NarrowFloat::ALL {
        let modes: Vec<NarrowMode> = if f == NarrowFloat::E8M0FNU {
            [E8m0Round::Up, E8m0Round::Down, E8m0Round::Nearest]
                .into_iter()
                .flat_map(|round| [true, false].map(|saturate| NarrowMode { saturate, round }))
                .collect()
        } else {
            [true, false]
                .map(|saturate| NarrowMode {
                    saturate,
                    round: E8m0Round::Up,
                })
                .to_vec()
        };
        for mode in modes {
            let got = run_cast(f32t(), f.dtype(), mode, &input, v.len());
            for (x, g) in v.iter().zip(&got) {
                let want = if f == NarrowFloat::E8M0FNU {
                    e8m0_from_f32(*x, mode.saturate, mode.round)
                } else {
                    f.from_f32(*x, mode.saturate)
                };
                assert_eq!(
                    *g, want,
                    "{f:?} {mode:?} of {x:e}: got {g:#x}, want {want:#x} (KILN_TEST_SEED={seed})"
                );
            }
        }
    }
    for name in INTS {
        let t: DataType = name.parse().unwrap();
        let (bits, _) = kiln_ffi::narrow::narrow_int(t).unwrap();
        let got = run_cast(f32t(), t, NarrowMode::default(), &input, v.len());
        for (x, g) in v.iter().zip(&got) {
            assert_eq!(
                *g,
                int_from_f32(*x, bits),
                "{name} of {x:e} (KILN_TEST_SEED={seed})"
            );
        }
    }
}

#[test]
fn narrow_to_narrow_goes_through_float32() {
    let codes: Vec<u8> = (0..=255).collect();
    let (from, to) = (NarrowFloat::E5M2, NarrowFloat::E4M3FN);
    for saturate in [true, false] {
        let mode = NarrowMode {
            saturate,
            round: E8m0Round::Up,
        };
        let got = run_cast(from.dtype(), to.dtype(), mode, &codes, 256);
        for (c, g) in got.iter().enumerate() {
            let want = to.from_f32(from.to_f32(c as u8), saturate);
            assert_eq!(*g, want, "code {c:#x} saturate={saturate}");
        }
    }
    // float16 -> int4 through float32; plain `cast` is the saturating default.
    let x = ph(&[3], DataType::float(16), "h");
    assert!(cast(&x, "int4".parse().unwrap()).is_ok());
}
