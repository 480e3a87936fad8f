//! What Kiln knows about named CPUs without asking LLVM: which x86 CPU names LLVM 19 accepts, and
//! the instruction-set features that schedules care about (SSE to AVX-512, FMA, VNNI, BF16, FP16).
//!
//! LLVM's C API cannot list the features a named CPU implies, so the families below are written
//! down from LLVM 19's X86 CPU definitions; only the features a schedule asks about are kept.
//! For `-mcpu=native` the features come from LLVM's host detection instead (see `host`).

/// Every x86 CPU name LLVM 19 accepts for `-mcpu` (from `llc -mtriple=x86_64 -mcpu=help`).
pub const X86_CPUS: &[&str] = &[
    "alderlake",
    "amdfam10",
    "arrowlake",
    "arrowlake-s",
    "arrowlake_s",
    "athlon",
    "athlon-4",
    "athlon-fx",
    "athlon-mp",
    "athlon-tbird",
    "athlon-xp",
    "athlon64",
    "athlon64-sse3",
    "atom",
    "atom_sse4_2",
    "atom_sse4_2_movbe",
    "barcelona",
    "bdver1",
    "bdver2",
    "bdver3",
    "bdver4",
    "bonnell",
    "broadwell",
    "btver1",
    "btver2",
    "c3",
    "c3-2",
    "cannonlake",
    "cascadelake",
    "clearwaterforest",
    "cooperlake",
    "core-avx-i",
    "core-avx2",
    "core2",
    "core_2_duo_sse4_1",
    "core_2_duo_ssse3",
    "core_2nd_gen_avx",
    "core_3rd_gen_avx",
    "core_4th_gen_avx",
    "core_4th_gen_avx_tsx",
    "core_5th_gen_avx",
    "core_5th_gen_avx_tsx",
    "core_aes_pclmulqdq",
    "core_i7_sse4_2",
    "corei7",
    "corei7-avx",
    "emeraldrapids",
    "generic",
    "geode",
    "goldmont",
    "goldmont-plus",
    "goldmont_plus",
    "gracemont",
    "grandridge",
    "graniterapids",
    "graniterapids-d",
    "graniterapids_d",
    "haswell",
    "i386",
    "i486",
    "i586",
    "i686",
    "icelake-client",
    "icelake-server",
    "icelake_client",
    "icelake_server",
    "ivybridge",
    "k6",
    "k6-2",
    "k6-3",
    "k8",
    "k8-sse3",
    "knl",
    "knm",
    "lakemont",
    "lunarlake",
    "meteorlake",
    "mic_avx512",
    "nehalem",
    "nocona",
    "opteron",
    "opteron-sse3",
    "pantherlake",
    "penryn",
    "pentium",
    "pentium-m",
    "pentium-mmx",
    "pentium2",
    "pentium3",
    "pentium3m",
    "pentium4",
    "pentium4m",
    "pentium_4",
    "pentium_4_sse3",
    "pentium_ii",
    "pentium_iii",
    "pentium_iii_no_xmm_regs",
    "pentium_m",
    "pentium_mmx",
    "pentium_pro",
    "pentiumpro",
    "prescott",
    "raptorlake",
    "rocketlake",
    "sandybridge",
    "sapphirerapids",
    "sierraforest",
    "silvermont",
    "skx",
    "skylake",
    "skylake-avx512",
    "skylake_avx512",
    "slm",
    "tigerlake",
    "tremont",
    "westmere",
    "winchip-c6",
    "winchip2",
    "x86-64",
    "x86-64-v2",
    "x86-64-v3",
    "x86-64-v4",
    "yonah",
    "znver1",
    "znver2",
    "znver3",
    "znver4",
    "znver5",
];

const SSE2: &[&str] = &["sse", "sse2"];
const SSE42: &[&str] = &["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"];
const AVX: &[&str] = &["avx"];
const AVX2: &[&str] = &["avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"];
const AVX512: &[&str] = &["avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"];
const VNNI: &[&str] = &["avx512vnni"];
const ICELAKE: &[&str] = &[
    "avx512vbmi",
    "avx512vbmi2",
    "avx512bitalg",
    "avx512vpopcntdq",
];

/// The instruction-set level of a CPU family, from which its feature set follows.
#[derive(Clone, Copy)]
enum Level {
    Sse2,
    Sse42,
    Avx,
    Avx2,
    Avx512,
}

fn family(cpu: &str) -> Option<(Level, &'static [&'static str])> {
    Some(match cpu {
        "znver5" | "znver4" => (
            Level::Avx512,
            &[
                "avx512vnni",
                "avx512bf16",
                "avx512vbmi",
                "avx512vbmi2",
                "avx512bitalg",
                "avx512vpopcntdq",
                "avx512ifma",
            ],
        ),
        "sapphirerapids" | "emeraldrapids" | "graniterapids" | "graniterapids-d"
        | "graniterapids_d" => (
            Level::Avx512,
            &[
                "avx512vnni",
                "avx512bf16",
                "avx512fp16",
                "avx512vbmi",
                "avx512vbmi2",
                "avx512bitalg",
                "avx512vpopcntdq",
                "avx512ifma",
                "amx-tile",
                "amx-int8",
                "amx-bf16",
                "avxvnni",
            ],
        ),
        "icelake-client" | "icelake-server" | "icelake_client" | "icelake_server" | "tigerlake"
        | "rocketlake" => (Level::Avx512, ICELAKE),
        "cooperlake" => (Level::Avx512, &["avx512vnni", "avx512bf16"]),
        "cascadelake" => (Level::Avx512, VNNI),
        "skylake-avx512" | "skylake_avx512" | "skx" | "cannonlake" | "x86-64-v4" => {
            (Level::Avx512, &[])
        }
        "knl" | "knm" | "mic_avx512" => (Level::Avx512, &[]),
        "alderlake" | "raptorlake" | "meteorlake" | "arrowlake" | "arrowlake-s" | "arrowlake_s"
        | "lunarlake" | "pantherlake" | "gracemont" | "sierraforest" | "grandridge"
        | "clearwaterforest" => (Level::Avx2, &["avxvnni"]),
        "haswell"
        | "broadwell"
        | "skylake"
        | "core-avx2"
        | "core_4th_gen_avx"
        | "core_4th_gen_avx_tsx"
        | "core_5th_gen_avx"
        | "core_5th_gen_avx_tsx"
        | "znver1"
        | "znver2"
        | "znver3"
        | "bdver4"
        | "x86-64-v3" => (Level::Avx2, &[]),
        "bdver2" | "bdver3" => (Level::Avx, &["fma", "f16c"]),
        "sandybridge" | "ivybridge" | "corei7-avx" | "core-avx-i" | "core_2nd_gen_avx"
        | "core_3rd_gen_avx" | "btver2" | "bdver1" => (Level::Avx, &[]),
        "nehalem" | "westmere" | "corei7" | "core_i7_sse4_2" | "core_aes_pclmulqdq"
        | "silvermont" | "slm" | "goldmont" | "goldmont-plus" | "goldmont_plus" | "tremont"
        | "x86-64-v2" | "atom_sse4_2" | "atom_sse4_2_movbe" => (Level::Sse42, &[]),
        _ => return None,
    })
}

/// The features (names as LLVM spells them, without `+`) that an x86 CPU name implies, as far as
/// Kiln tracks them; `None` for a CPU Kiln has no table for (features then come only from
/// `-mattr`). Unknown or pre-SSE2 x86 CPUs get the x86-64 baseline.
pub fn x86_cpu_features(cpu: &str) -> Vec<&'static str> {
    let (level, extra) = family(cpu).unwrap_or((Level::Sse2, &[]));
    let mut out: Vec<&'static str> = SSE2.to_vec();
    let groups: &[&[&str]] = match level {
        Level::Sse2 => &[],
        Level::Sse42 => &[SSE42],
        Level::Avx => &[SSE42, AVX],
        Level::Avx2 => &[SSE42, AVX, AVX2],
        Level::Avx512 => &[SSE42, AVX, AVX2, AVX512],
    };
    for g in groups {
        out.extend_from_slice(g);
    }
    out.extend_from_slice(extra);
    out
}

/// What enabling a feature also enables (a small subset of LLVM's implications, enough for the
/// queries schedules make): `+avx512f` implies AVX2 and FMA, `+avx2` implies AVX, and so on.
pub fn implied_by(feature: &str) -> &'static [&'static str] {
    match feature {
        "sse3" => &["sse2"],
        "ssse3" => &["sse3"],
        "sse4.1" => &["ssse3"],
        "sse4.2" => &["sse4.1"],
        "avx" => &["sse4.2"],
        "avx2" | "fma" | "f16c" => &["avx"],
        "avx512f" => &["avx2", "fma", "f16c"],
        f if f.starts_with("avx512") => &["avx512f"],
        "avxvnni" => &["avx2"],
        _ => &[],
    }
}

/// The inverse of [`implied_by`]: disabling `feature` also disables what requires it.
pub fn requiring(feature: &str) -> Vec<&'static str> {
    let all = [
        "sse3",
        "ssse3",
        "sse4.1",
        "sse4.2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512cd",
        "avx512bw",
        "avx512dq",
        "avx512vl",
        "avx512vnni",
        "avx512bf16",
        "avx512fp16",
        "avx512vbmi",
        "avx512vbmi2",
        "avx512bitalg",
        "avx512vpopcntdq",
        "avx512ifma",
        "avxvnni",
    ];
    all.into_iter()
        .filter(|f| implied_by(f).contains(&feature))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        assert!(x86_cpu_features("znver5").contains(&"avx512f"));
        assert!(x86_cpu_features("znver5").contains(&"avx512bf16"));
        assert!(x86_cpu_features("skylake-avx512").contains(&"avx512bw"));
        assert!(!x86_cpu_features("skylake").contains(&"avx512f"));
        assert!(x86_cpu_features("haswell").contains(&"fma"));
        assert!(!x86_cpu_features("sandybridge").contains(&"avx2"));
        assert_eq!(x86_cpu_features("x86-64"), vec!["sse", "sse2"]);
        for cpu in X86_CPUS {
            assert!(x86_cpu_features(cpu).contains(&"sse2"), "{cpu}");
        }
    }

    #[test]
    fn implications() {
        assert!(requiring("avx2").contains(&"avx512f"));
        assert!(requiring("avx512f").contains(&"avx512bw"));
        assert!(implied_by("avx512vnni").contains(&"avx512f"));
    }
}
