//! [`CpuDesc`]: the one description of the CPU a program is compiled for. Schedules, layout
//! passes and tiling decisions read the vector width, the number of vector registers, FMA and
//! the cache sizes from here and nowhere else, so that code compiled for an AVX2 core (16
//! registers of 8 floats) is tiled for it, and code for AVX-512 (32 registers of 16 floats) for
//! that.
//!
//! The description is built from the target (`kiln_codegen::target::Target::cpu_desc`: triple,
//! `-mcpu`, `-mattr`, and for `-mcpu=native` the host's features and caches); this module holds
//! the facts that follow from a feature set and a CPU name.

use kiln_ffi::DataType;
use std::collections::BTreeSet;
use std::fmt;

/// Cache sizes in bytes, per core for L1 data and L2, per core complex for L3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheSizes {
    /// Level 1 data cache.
    pub l1d: u64,
    /// Level 2 cache.
    pub l2: u64,
    /// Level 3 cache (0 when there is none).
    pub l3: u64,
}

impl CacheSizes {
    /// Typical sizes of the named CPU's family (used when not compiling for the host, whose
    /// caches are read instead).
    pub fn of_cpu(cpu: &str) -> CacheSizes {
        const K: u64 = 1024;
        const M: u64 = 1024 * 1024;
        let (l1d, l2, l3) = match cpu {
            "znver5" => (48 * K, M, 32 * M),
            "znver4" => (32 * K, M, 32 * M),
            "znver3" => (32 * K, 512 * K, 32 * M),
            "znver1" | "znver2" => (32 * K, 512 * K, 16 * M),
            "icelake-server" | "icelake_server" | "sapphirerapids" | "emeraldrapids"
            | "graniterapids" | "graniterapids-d" | "graniterapids_d" => (48 * K, 2 * M, 32 * M),
            "icelake-client" | "icelake_client" | "tigerlake" | "rocketlake" => {
                (48 * K, 512 * K, 8 * M)
            }
            "skylake-avx512" | "skylake_avx512" | "skx" | "cascadelake" | "cooperlake" => {
                (32 * K, M, 32 * M)
            }
            "alderlake" | "raptorlake" | "meteorlake" | "arrowlake" | "lunarlake" => {
                (48 * K, 2 * M, 16 * M)
            }
            _ => (32 * K, 512 * K, 8 * M),
        };
        CacheSizes { l1d, l2, l3 }
    }
}

/// What schedules know about the CPU they generate code for (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CpuDesc {
    /// The LLVM target triple (`x86_64-pc-linux-gnu`).
    pub triple: String,
    /// The CPU name as LLVM knows it (`znver3`, `x86-64-v4`, `generic`).
    pub cpu: String,
    /// The enabled instruction-set features, LLVM names without `+` (`avx2`, `fma`, ...).
    pub features: BTreeSet<String>,
    /// The width of the widest vector register, in bits.
    pub vector_bits: u32,
    /// The number of architectural vector registers of that width.
    pub vector_registers: u32,
    /// Whether the CPU has fused multiply-add.
    pub fma: bool,
    /// The width in bits of the multiply-add units: a wider vector issues as several halves
    /// (AMD Zen 4 runs AVX-512 as two 256-bit halves), so it does no more multiply-adds a cycle
    /// than vectors of this width. The vector width unless the CPU is known to split it
    /// ([`fma_datapath_bits`]).
    pub fma_bits: u32,
    /// Cache sizes.
    pub caches: CacheSizes,
}

/// The width of the named CPU's multiply-add units where it is narrower than its widest
/// vectors: AMD Zen 1 splits AVX's 256-bit vectors in two, Zen 2 to Zen 4 have 256-bit units
/// (Zen 4 runs AVX-512 on them), Zen 5 512-bit ones. `None` for CPUs taken to run their
/// widest vectors whole.
pub fn fma_datapath_bits(cpu: &str) -> Option<u32> {
    match cpu {
        "znver1" => Some(128),
        "znver2" | "znver3" | "znver4" => Some(256),
        _ => None,
    }
}

impl CpuDesc {
    /// The description of a CPU with `features` (vector width, registers and FMA follow from
    /// them and the triple's architecture); `caches` default to the CPU family's.
    pub fn new(
        triple: &str,
        cpu: &str,
        features: BTreeSet<String>,
        caches: Option<CacheSizes>,
    ) -> CpuDesc {
        let arch = triple.split('-').next().unwrap_or_default();
        let x86_64 = matches!(arch, "x86_64" | "x86-64" | "amd64");
        let x86_32 = matches!(arch, "i386" | "i486" | "i586" | "i686" | "x86");
        let aarch64 = matches!(arch, "aarch64" | "arm64" | "aarch64_be");
        let has = |f: &str| features.contains(f);
        let vector_bits = if (x86_64 || x86_32) && has("avx512f") {
            512
        } else if (x86_64 || x86_32) && has("avx") {
            256
        } else {
            128
        };
        // x86-64 has 16 vector registers, 32 with AVX-512 (zmm16-31 and their narrower
        // halves); 32-bit x86 has 8; AArch64 has 32 NEON registers.
        let vector_registers = if x86_32 {
            8
        } else if x86_64 {
            if has("avx512f") {
                32
            } else {
                16
            }
        } else if aarch64 {
            32
        } else {
            16
        };
        let fma = has("fma") || has("avx512f") || aarch64;
        let fma_bits = fma_datapath_bits(cpu).map_or(vector_bits, |b| b.min(vector_bits));
        CpuDesc {
            triple: triple.to_string(),
            cpu: cpu.to_string(),
            caches: caches.unwrap_or_else(|| CacheSizes::of_cpu(cpu)),
            features,
            vector_bits,
            vector_registers,
            fma,
            fma_bits,
        }
    }

    /// A made-up CPU with `vector_bits`-wide vectors and `vector_registers` registers (for
    /// tests that check that schedules follow the description, and for exploring tilings).
    pub fn custom(vector_bits: u32, vector_registers: u32) -> CpuDesc {
        CpuDesc {
            triple: "x86_64-unknown-linux-gnu".into(),
            cpu: "custom".into(),
            features: BTreeSet::new(),
            vector_bits,
            vector_registers,
            fma: false,
            fma_bits: vector_bits,
            caches: CacheSizes::of_cpu("generic"),
        }
    }

    /// How many elements of `dtype` one vector register holds (at least 1); the narrow types
    /// stored one per byte count 8 bits.
    pub fn lanes(&self, dtype: DataType) -> i64 {
        self.lanes_of_bits(crate::dtype::DataTypeExt::storage_bits(dtype))
    }

    /// How many elements of `bits` bits one vector register holds (at least 1).
    pub fn lanes_of_bits(&self, bits: u32) -> i64 {
        (self.vector_bits / bits.max(1)).max(1) as i64
    }

    /// The bytes of one cache line (64 on every x86-64 CPU), the unit memory moves in.
    pub fn cache_line_bytes(&self) -> i64 {
        64
    }

    /// float32 lanes per vector: the unit of the float32 schedules and layouts.
    pub fn f32_lanes(&self) -> i64 {
        self.lanes_of_bits(32)
    }

    /// How many vector accumulators an inner kernel that streams one operand vector and
    /// broadcasts the other may keep live: three quarters of the registers (24 of AVX-512's 32,
    /// 12 of AVX2's 16), the rest holding the loaded and broadcast operands.
    pub fn accumulators(&self) -> i64 {
        (self.vector_registers as i64 * 3 / 4).max(1)
    }

    /// The accumulator budget of kernels that also keep several operand vectors live (several
    /// channel blocks of a convolution, two column vectors of a matrix product): half the
    /// registers.
    pub fn accumulators_wide(&self) -> i64 {
        (self.vector_registers as i64 / 2).max(1)
    }

    /// Whether `feature` (an LLVM name such as `avx512vnni`) is enabled.
    pub fn has(&self, feature: &str) -> bool {
        self.features.contains(feature)
    }

    /// Whether the CPU has an instruction for [`crate::op::DOT4_U8S8`] on vectors of `bits`
    /// bits (VNNI's `vpdpbusd`, accumulating into int32 lanes): 512 with AVX512-VNNI, 256 and
    /// 128 with AVX512-VNNI and AVX512-VL or with AVX-VNNI.
    pub fn has_dot4_u8s8(&self, bits: u32) -> bool {
        let avx512 = self.has("avx512vnni");
        match bits {
            512 => avx512,
            256 | 128 => (avx512 && self.has("avx512vl")) || self.has("avxvnni"),
            _ => false,
        }
    }

    /// Whether vectors of `bits` bits have AVX-512's `vscalefps` (`x * 2^floor(n)` of floats,
    /// with overflow to infinity and underflow through subnormals to zero): 512 with AVX-512F,
    /// 256 and 128 with AVX-512VL too.
    pub fn has_scalef(&self, bits: u32) -> bool {
        let f = self.has("avx512f");
        match bits {
            512 => f,
            256 | 128 => f && self.has("avx512vl"),
            _ => false,
        }
    }

    /// The int32 lanes of the widest vector [`Self::has_dot4_u8s8`] (at most the vector
    /// registers' width), or `None` without such an instruction.
    pub fn dot4_u8s8_lanes(&self) -> Option<i64> {
        [512, 256, 128]
            .into_iter()
            .find(|&b| b <= self.vector_bits && self.has_dot4_u8s8(b))
            .map(|b| b as i64 / 32)
    }
}

impl fmt::Display for CpuDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}-bit vectors x {} registers, f32 lanes {}, fma {}, L1d {} KiB, L2 {} KiB, \
             L3 {} KiB",
            self.cpu,
            self.triple,
            self.vector_bits,
            self.vector_registers,
            self.f32_lanes(),
            self.fma,
            self.caches.l1d / 1024,
            self.caches.l2 / 1024,
            self.caches.l3 / 1024
        )
    }
}

impl Default for CpuDesc {
    /// The x86-64 baseline (SSE2: 128-bit vectors, 16 registers), what `llvm` without `-mcpu`
    /// generates code for.
    fn default() -> CpuDesc {
        let features = ["sse", "sse2"].iter().map(|s| s.to_string()).collect();
        CpuDesc::new("x86_64-unknown-linux-gnu", "generic", features, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(features: &[&str]) -> CpuDesc {
        let f = features.iter().map(|s| s.to_string()).collect();
        CpuDesc::new("x86_64-pc-linux-gnu", "test", f, None)
    }

    #[test]
    fn dot_products_follow_the_vnni_features() {
        assert_eq!(desc(&["avx2", "fma"]).dot4_u8s8_lanes(), None);
        let avxvnni = desc(&["avx", "avx2", "fma", "avxvnni"]);
        assert_eq!(avxvnni.dot4_u8s8_lanes(), Some(8));
        assert!(!avxvnni.has_dot4_u8s8(512));
        let zmm = desc(&["avx512f", "avx512vnni"]);
        assert_eq!(zmm.dot4_u8s8_lanes(), Some(16));
        assert!(!zmm.has_dot4_u8s8(256), "256-bit forms need AVX512-VL");
        let all = desc(&["avx512f", "avx512vl", "avx512vnni"]);
        assert!(all.has_dot4_u8s8(256) && all.has_dot4_u8s8(128));
    }

    #[test]
    fn scalef_follows_the_avx512_features() {
        assert!(!desc(&["avx2", "fma"]).has_scalef(256));
        let f = desc(&["avx512f"]);
        assert!(f.has_scalef(512) && !f.has_scalef(256) && !f.has_scalef(128));
        let vl = desc(&["avx512f", "avx512vl"]);
        assert!(vl.has_scalef(256) && vl.has_scalef(128) && !vl.has_scalef(64));
    }

    #[test]
    fn width_and_registers_follow_features() {
        let avx512 = desc(&["avx512f", "avx2", "fma"]);
        assert_eq!((avx512.vector_bits, avx512.vector_registers), (512, 32));
        assert_eq!(avx512.f32_lanes(), 16);
        assert_eq!(avx512.lanes(DataType::int(8)), 64);
        assert_eq!(avx512.lanes(DataType::int(4)), 64);
        let avx2 = desc(&["avx", "avx2", "fma"]);
        assert_eq!((avx2.vector_bits, avx2.vector_registers), (256, 16));
        assert_eq!(avx2.f32_lanes(), 8);
        assert!(avx2.fma);
        let sse = CpuDesc::default();
        assert_eq!(
            (sse.vector_bits, sse.vector_registers, sse.fma),
            (128, 16, false)
        );
        let i686 = CpuDesc::new("i686-pc-linux-gnu", "pentium4", BTreeSet::new(), None);
        assert_eq!(i686.vector_registers, 8);
        assert_eq!(CpuDesc::custom(128, 8).accumulators(), 6);
        assert_eq!(avx512.accumulators(), 24);
        assert_eq!(avx2.accumulators(), 12);
    }
}
