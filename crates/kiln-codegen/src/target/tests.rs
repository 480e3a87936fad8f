use super::*;

fn err(s: &str) -> String {
    let e = Target::parse(s).unwrap_err();
    assert_eq!(e.kind(), "ValueError", "{s}");
    e.message()
}

#[test]
fn plain_kinds() {
    for (s, kind) in [
        ("llvm", TargetKind::Llvm),
        ("c", TargetKind::C),
        ("opencl", TargetKind::OpenCl),
        ("cuda", TargetKind::Cuda),
    ] {
        let t = Target::parse(s).unwrap();
        assert_eq!(t.kind, kind);
        assert_eq!(t.opt_level, 3);
        assert_eq!(t.to_string(), s);
    }
    assert_eq!(Target::parse("cuda").unwrap().kind.device_type(), 2);
    assert_eq!(Target::parse("opencl").unwrap().kind.device_type(), 4);
    assert!(Target::parse("c").unwrap().kind.is_host());
}

#[test]
fn llvm_flags_and_canonical_string() {
    let t = Target::parse(
        "llvm  -opt-level=2 -mattr=+avx2,-avx512f -fast-math -mcpu=skylake-avx512 \
         -mtriple=x86_64-pc-linux-gnu",
    )
    .unwrap();
    assert_eq!(t.mcpu.as_deref(), Some("skylake-avx512"));
    assert_eq!(t.mattr, vec!["+avx2", "-avx512f"]);
    assert_eq!(t.opt_level, 2);
    assert!(t.fast_math);
    assert_eq!(t.mtriple.as_deref(), Some("x86_64-pc-linux-gnu"));
    let canonical = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512 \
                     -mattr=+avx2,-avx512f -opt-level=2 -fast-math";
    assert_eq!(t.to_string(), canonical);
    assert_eq!(Target::parse(canonical).unwrap(), t);
    assert_eq!(t.llvm_features(), "+avx2,-avx512f");
    // `--flag` is accepted as in TVM.
    assert_eq!(Target::parse("llvm --opt-level=1").unwrap().opt_level, 1);
}

#[test]
fn device_flags() {
    let t = Target::parse("cuda -arch=sm_80 -max_num_threads=1024").unwrap();
    assert_eq!(t.attrs["arch"], "sm_80");
    assert_eq!(t.to_string(), "cuda -arch=sm_80 -max_num_threads=1024");
    let o = Target::parse("opencl -device=pocl -thread_warp_size=1").unwrap();
    assert_eq!(o.to_string(), "opencl -device=pocl -thread_warp_size=1");
    assert!(o.features().is_empty());
}

#[test]
fn errors_name_the_flag() {
    assert!(err("").contains("empty"));
    assert!(err("vulkan").contains("unknown target kind `vulkan`"));
    let m = err("llvm -mcpux=znver4");
    assert!(m.contains("`-mcpux`") && m.contains("-mcpu"), "{m}");
    assert!(err("llvm -opt-level=4").contains("`-opt-level=4`"));
    assert!(err("llvm -opt-level=x").contains("`-opt-level=x`"));
    assert!(err("llvm -mattr=avx2").contains("`avx2`"));
    assert!(err("llvm -mattr=+avx2,").contains("`-mattr`"));
    assert!(err("llvm -mcpu").contains("`-mcpu` needs a value"));
    assert!(err("llvm -mcpu=").contains("`-mcpu` needs a value"));
    assert!(err("llvm -fast-math=1").contains("`-fast-math` takes no value"));
    assert!(err("llvm -mcpu=a -mcpu=b").contains("given twice"));
    assert!(err("llvm mcpu=znver4").contains("`mcpu=znver4` is not a flag"));
    assert!(err("llvm -mcpu=znver9").contains("unknown CPU `znver9`"));
    assert!(err("opencl -mcpu=znver4").contains("`-mcpu`"));
    assert!(err("cuda -max_num_threads=0").contains("positive integer"));
    assert!(err("llvm -mcpu=native -mtriple=aarch64-linux-gnu").contains("native"));
    // Another architecture's CPUs are not checked against the x86 list.
    let arm = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1").unwrap();
    assert!(arm.is_aarch64() && !arm.is_x86());
    assert_eq!(arm.vector_width_bits(), 128);
    assert!(arm.has_feature("neon"));
}

#[test]
fn native_resolves_to_the_host() {
    let t = Target::parse("llvm -mcpu=native").unwrap();
    let name = host_cpu_name();
    assert_eq!(t.mcpu.as_deref(), Some(name.as_str()));
    assert_ne!(name, "native");
    assert!(!t.host_features.is_empty());
    assert_eq!(t.to_string(), format!("llvm -mcpu={name}"));
    assert_eq!(Target::host().mcpu, t.mcpu);
    // What the machine can do comes from detection, not from the name.
    let detected = |f: &str| t.host_features.iter().any(|h| h == &format!("+{f}"));
    assert_eq!(t.has_avx512(), detected("avx512f"));
    assert_eq!(t.has_avx2(), detected("avx2"));
    if name == "znver5" {
        assert!(t.has_avx512() && t.has_fma());
        assert_eq!(t.vector_width_bits(), 512);
    }
    // -mattr still applies on top of the host's features.
    let no512 = Target::parse("llvm -mcpu=native -mattr=-avx512f").unwrap();
    assert!(!no512.has_avx512() && !no512.has_feature("avx512bw"));
    assert!(no512.llvm_features().ends_with(",-avx512f"));
}

#[test]
fn feature_queries_follow_cpu_and_mattr() {
    let t = Target::parse("llvm -mcpu=znver4").unwrap();
    assert!(t.has_avx512() && t.has_avx512_vnni() && t.has_fma());
    assert_eq!(t.vector_width_bits(), 512);
    assert_eq!(t.vector_lanes(32), 16);
    assert_eq!(t.vector_lanes(8), 64);
    let h = Target::parse("llvm -mcpu=haswell").unwrap();
    assert!(h.has_avx2() && !h.has_avx512());
    assert_eq!(h.vector_width_bits(), 256);
    let g = Target::parse("llvm").unwrap();
    assert!(!g.has_avx2());
    assert_eq!(g.vector_width_bits(), 128);
    let up = Target::parse("llvm -mattr=+avx512bw").unwrap();
    assert!(up.has_avx512() && up.has_avx2() && up.has_feature("avx"));
    let down = Target::parse("llvm -mcpu=skylake-avx512 -mattr=-avx2").unwrap();
    assert!(!down.has_avx512() && !down.has_avx2() && down.has_feature("avx"));
    assert_eq!(down.vector_width_bits(), 256);
    assert!(Target::parse("c -mcpu=znver5").unwrap().has_avx512());
}

#[test]
fn build_by_hand() {
    let mut t = Target::new(TargetKind::Llvm);
    t.mcpu = Some("znver5".into());
    t.opt_level = 0;
    assert_eq!(t.to_string(), "llvm -mcpu=znver5 -opt-level=0");
    assert_eq!(t.kind_name(), "llvm");
    assert_eq!(
        "llvm -mcpu=znver5 -opt-level=0".parse::<Target>().unwrap(),
        t
    );
}
