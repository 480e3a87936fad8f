//! A library built by the real pipeline (TE -> driver::lower -> LLVM) and exported by Kiln,
//! loaded by Apache TVM 0.27 in a Python subprocess: a tiled + vectorized + parallel matmul, a
//! broadcast with a symbolic dimension and a softmax compute correctly there on random inputs,
//! and calling with a wrong dtype or arity raises the TypeError texts TVM's own build of the
//! same kernel raises.

mod e2e_common;

use e2e_common::*;
use kiln_codegen::driver;
use kiln_tir::IRModule;

const SCRIPT: &str = r#"
import sys, numpy as np, tvm
from tvm import te
so, seed = sys.argv[1], int(sys.argv[2])
m = tvm.runtime.load_module(so)
rng = np.random.default_rng(seed)
T = tvm.runtime.tensor

# Tiled + vectorized + parallel matmul (ragged edges).
n, mm_, l = 67, 45, 29
a = rng.standard_normal((n, l)).astype("float32")
b = rng.standard_normal((l, mm_)).astype("float32")
c = T(np.full((n, mm_), np.nan, dtype="float32"))
m["mm"](T(a), T(b), c)
np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)

# Broadcast with a symbolic number of rows.
for rows in (1, 5, 40):
    x = rng.standard_normal((rows, 37)).astype("float32")
    y = rng.standard_normal(37).astype("float32")
    o = T(np.full((rows, 37), np.nan, dtype="float32"))
    m["bcast"](T(x), T(y), o)
    np.testing.assert_allclose(o.numpy(), x * y + 1, rtol=1e-6, atol=1e-6)

# Softmax.
x = (rng.standard_normal((9, 37)) * 8).astype("float32")
o = T(np.full((9, 37), np.nan, dtype="float32"))
m["softmax"](T(x), o)
e = np.exp(x - x.max(axis=1, keepdims=True))
np.testing.assert_allclose(o.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)

# The same matmul built by TVM: its TypeError texts must be ours.
A = te.placeholder((n, l), "float32", name="A")
B = te.placeholder((l, mm_), "float32", name="B")
k = te.reduce_axis((0, l), "k")
C = te.compute((n, mm_), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
ref = tvm.compile(tvm.IRModule({"mm": te.create_prim_func([A, B, C]).with_attr("global_symbol", "mm")}), target="llvm")
def err(f, *args):
    try:
        f(*args)
    except TypeError as e:
        return str(e)
    raise SystemExit("no TypeError for %r" % (args,))
c = T(np.zeros((n, mm_), dtype="float32"))
cases = [
    (T(a), T(b.astype("float64")), c),   # wrong dtype
    (T(a), T(b)),                        # wrong arity
    (T(a), 3, c),                        # a scalar for a tensor
]
for args in cases:
    ours, theirs = err(m["mm"], *args), err(ref["mm"], *args)
    assert ours == theirs, "kiln: %r\ntvm:  %r" % (ours, theirs)
    print("TypeError:", ours.splitlines()[0])
print("tvm ok")
"#;

#[test]
fn exported_pipeline_library_runs_in_tvm() {
    let seed = seed("tvm");
    let (a, b, cc, k) = matmul(67, 45, 29);
    let mm = driver::lower(&schedule_tiled(&cc, &k, 8, 16, 4), &[a, b, cc], "mm", false).unwrap();
    let (a, b, cc, s) = broadcast(37);
    let bc = driver::lower(&s, &[a, b, cc], "bcast", false).unwrap();
    let (x, y, s) = softmax(9, 37);
    let sm = driver::lower(&s, &[x, y], "softmax", false).unwrap();
    let funcs = [mm, bc, sm]
        .iter()
        .flat_map(|m| {
            m.functions()
                .iter()
                .map(|(k, f)| (k.to_string(), f.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let module =
        kiln_codegen::driver::codegen_build(&IRModule::new(funcs).unwrap(), NATIVE).unwrap();
    let dir = std::env::temp_dir().join(format!("kiln-e2e-tvm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("libpipeline.so");
    module
        .downcast_node::<kiln_codegen::LlvmModule>()
        .unwrap()
        .export_library(&so)
        .unwrap();
    // The exported library also loads back into Kiln.
    let back = kiln_runtime::module::load_module(&so).unwrap();
    assert!(back.function("softmax").is_ok());

    let Some(py) = kiln_testing::process::python_with(&["tvm"]) else {
        eprintln!("skipping the Apache TVM check: no .venv with apache-tvm");
        return;
    };
    let out = std::process::Command::new(&py)
        .args(["-c", SCRIPT])
        .arg(&so)
        .arg((seed % (1 << 31)).to_string())
        .env("TVM_NUM_THREADS", "2")
        .output()
        .unwrap();
    let text = kiln_testing::process::combined(&out);
    assert!(
        out.status.success() && text.contains("tvm ok"),
        "KILN_TEST_SEED={seed}\n{text}"
    );
    eprintln!("{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
