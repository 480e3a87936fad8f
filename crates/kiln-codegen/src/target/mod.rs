//! Targets (seed 004's `tvm.target.Target`): what to generate code for, parsed from the strings
//! users write.
//!
//! ```text
//! llvm                                   host code through LLVM, generic CPU of the triple
//! llvm -mcpu=native -opt-level=3         the machine this runs on (LLVM 19 says `znver5` here)
//! llvm -mcpu=skylake-avx512 -mattr=+avx512f,-avx512bw -mtriple=x86_64-pc-linux-gnu -fast-math
//! c -mcpu=znver4                         C source compiled by `cc`
//! opencl -device=pocl                    OpenCL C kernels, host code through LLVM
//! cuda -arch=sm_80                       CUDA C++ kernels (source only), host code through LLVM
//! ```
//!
//! [`Target`] is a plain struct of strings, integers and flags (easy to reflect, print and
//! compare); `Display` writes the canonical string, which parses back to an equal target.
//! `-mcpu=native` is resolved when parsing: the struct holds the host CPU's name and the
//! features LLVM detected, so schedules see the real machine.

pub mod cpu;
mod host;

pub use host::{host_cache_sizes, host_cpu_features, host_cpu_name, host_triple};

use kiln_ffi::{Error, Result};
use kiln_tir::CpuDesc;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// The kind of a target: which code generator handles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// Host code through LLVM.
    Llvm,
    /// C source, compiled by the system C compiler.
    C,
    /// OpenCL C kernels (device code; the host part is `llvm` or `c`).
    OpenCl,
    /// CUDA kernels (device code; compile-only until a GPU is available).
    Cuda,
}

impl TargetKind {
    /// Every kind, in the order of their names' documentation.
    pub const ALL: [TargetKind; 4] = [
        TargetKind::Llvm,
        TargetKind::C,
        TargetKind::OpenCl,
        TargetKind::Cuda,
    ];

    /// The kind's name in target strings (`llvm`, `c`, `opencl`, `cuda`).
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Llvm => "llvm",
            TargetKind::C => "c",
            TargetKind::OpenCl => "opencl",
            TargetKind::Cuda => "cuda",
        }
    }

    /// The DLPack device type code that code for this kind runs on (CPU 1, CUDA 2, OpenCL 4).
    pub fn device_type(self) -> i32 {
        match self {
            TargetKind::Llvm | TargetKind::C => 1,
            TargetKind::Cuda => 2,
            TargetKind::OpenCl => 4,
        }
    }

    /// True for kinds that generate host (CPU) code.
    pub fn is_host(self) -> bool {
        matches!(self, TargetKind::Llvm | TargetKind::C)
    }

    /// The flags (without the leading `-`) a target of this kind accepts.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            TargetKind::Llvm | TargetKind::C => {
                &["mcpu", "mattr", "mtriple", "opt-level", "fast-math"]
            }
            TargetKind::OpenCl => &[
                "device",
                "max_num_threads",
                "thread_warp_size",
                "max_shared_memory_per_block",
            ],
            TargetKind::Cuda => &[
                "arch",
                "mcpu",
                "max_num_threads",
                "thread_warp_size",
                "max_shared_memory_per_block",
            ],
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TargetKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<TargetKind> {
        TargetKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::value_error(format!(
                    "unknown target kind `{s}` (Kiln knows llvm, c, opencl and cuda)"
                ))
            })
    }
}

/// The default `-opt-level`.
pub const DEFAULT_OPT_LEVEL: u8 = 3;

/// A parsed target. Fields are public and plain so that the struct can be reflected and built
/// by hand; [`Target::parse`] checks what a string may contain.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Which code generator handles the target.
    pub kind: TargetKind,
    /// `-mcpu`: the CPU to tune and select instructions for (`native` is already resolved to the
    /// host CPU's name). For CUDA, the GPU architecture as LLVM's NVPTX backend names it.
    pub mcpu: Option<String>,
    /// `-mattr`: features to add (`+avx2`) or remove (`-avx512f`), in the order given.
    pub mattr: Vec<String>,
    /// `-mtriple`: the LLVM target triple; `None` is the host's.
    pub mtriple: Option<String>,
    /// `-opt-level`: 0 to 3 (default 3).
    pub opt_level: u8,
    /// `-fast-math`: allow reassociation, reciprocal approximations and ignoring NaN/Inf.
    pub fast_math: bool,
    /// The host's features as LLVM detected them (`+avx512f`, `-amx-tile`, ...) when the target
    /// was written with `-mcpu=native`; empty otherwise. Applied before `mattr`.
    pub host_features: Vec<String>,
    /// Device flags of `opencl` and `cuda` targets (`device`, `arch`, `max_num_threads`, ...).
    pub attrs: BTreeMap<String, String>,
}

impl Target {
    /// A target of `kind` with every flag at its default.
    pub fn new(kind: TargetKind) -> Target {
        Target {
            kind,
            mcpu: None,
            mattr: Vec::new(),
            mtriple: None,
            opt_level: DEFAULT_OPT_LEVEL,
            fast_math: false,
            host_features: Vec::new(),
            attrs: BTreeMap::new(),
        }
    }

    /// `llvm -mcpu=native`: LLVM code for the machine this runs on.
    pub fn host() -> Target {
        Target::parse("llvm -mcpu=native").expect("the host target always parses")
    }

    /// Parses a target string (see the module docs). Errors name the offending flag and the
    /// whole string.
    pub fn parse(s: &str) -> Result<Target> {
        let bad = |msg: String| Error::value_error(format!("invalid target `{s}`: {msg}"));
        let mut words = s.split_whitespace();
        let kind_word = words
            .next()
            .ok_or_else(|| bad("the string is empty (expected llvm, c, opencl or cuda)".into()))?;
        let kind: TargetKind = kind_word.parse().map_err(|e: Error| bad(e.message()))?;
        let mut t = Target::new(kind);
        let mut seen = BTreeSet::new();
        let mut native = false;
        for word in words {
            let flag = word
                .strip_prefix("--")
                .or_else(|| word.strip_prefix('-'))
                .ok_or_else(|| bad(format!("`{word}` is not a flag (flags start with `-`)")))?;
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            if !kind.flags().contains(&name) {
                let accepted: Vec<String> = kind.flags().iter().map(|f| format!("-{f}")).collect();
                return Err(bad(format!(
                    "unknown flag `-{name}` for a `{kind}` target (it accepts {})",
                    accepted.join(", ")
                )));
            }
            if !seen.insert(name) {
                return Err(bad(format!("flag `-{name}` is given twice")));
            }
            let need_value = || {
                value
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| bad(format!("flag `-{name}` needs a value (`-{name}=...`)")))
            };
            match name {
                "fast-math" => {
                    if value.is_some() {
                        return Err(bad("flag `-fast-math` takes no value".into()));
                    }
                    t.fast_math = true;
                }
                "mcpu" if kind.is_host() => {
                    let v = need_value()?;
                    if v == "native" {
                        native = true;
                    } else {
                        t.mcpu = Some(v.to_string());
                    }
                }
                "mattr" => {
                    for item in need_value()?.split(',') {
                        let ok = item.len() > 1 && (item.starts_with('+') || item.starts_with('-'));
                        if !ok {
                            return Err(bad(format!(
                                "`-mattr` item `{item}` must be a feature name after `+` or `-` \
                                 (e.g. `-mattr=+avx2,-avx512f`)"
                            )));
                        }
                        t.mattr.push(item.to_string());
                    }
                }
                "mtriple" => t.mtriple = Some(need_value()?.to_string()),
                "opt-level" => {
                    let v = need_value()?;
                    t.opt_level = v
                        .parse::<u8>()
                        .ok()
                        .filter(|l| *l <= 3)
                        .ok_or_else(|| bad(format!("`-opt-level={v}` must be 0, 1, 2 or 3")))?;
                }
                "max_num_threads" | "thread_warp_size" | "max_shared_memory_per_block" => {
                    let v = need_value()?;
                    if !v.parse::<u64>().is_ok_and(|n| n > 0) {
                        return Err(bad(format!("`-{name}={v}` must be a positive integer")));
                    }
                    t.attrs.insert(name.to_string(), v.to_string());
                }
                _ => {
                    t.attrs.insert(name.to_string(), need_value()?.to_string());
                }
            }
        }
        if native {
            if t.mtriple
                .as_ref()
                .is_some_and(|tr| !host::is_host_triple(tr))
            {
                return Err(bad(
                    "`-mcpu=native` cannot be combined with a `-mtriple` of another machine".into(),
                ));
            }
            t.mcpu = Some(host_cpu_name());
            t.host_features = host_cpu_features();
        } else if let Some(cpu) = &t.mcpu {
            if t.is_x86() && !cpu::X86_CPUS.contains(&cpu.as_str()) {
                return Err(bad(format!(
                    "unknown CPU `{cpu}` in `-mcpu={cpu}`: LLVM 19 does not know it for {} \
                     (for example: native, x86-64-v3, skylake-avx512, icelake-server, \
                     sapphirerapids, znver4, znver5)",
                    t.triple()
                )));
            }
        }
        Ok(t)
    }

    /// The kind's name.
    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }

    /// The LLVM target triple: `-mtriple`, or the host's.
    pub fn triple(&self) -> String {
        self.mtriple.clone().unwrap_or_else(host_triple)
    }

    /// The architecture part of the triple (`x86_64`, `aarch64`, ...).
    pub fn arch(&self) -> String {
        let triple = self.triple();
        triple.split('-').next().unwrap_or_default().to_string()
    }

    /// True when the target's triple is an x86 one (32 or 64 bits).
    pub fn is_x86(&self) -> bool {
        matches!(
            self.arch().as_str(),
            "x86_64" | "x86-64" | "amd64" | "i386" | "i486" | "i586" | "i686" | "x86"
        )
    }

    /// True when the target's triple is an AArch64 one.
    pub fn is_aarch64(&self) -> bool {
        matches!(self.arch().as_str(), "aarch64" | "arm64" | "aarch64_be")
    }

    /// The CPU name given to LLVM: `-mcpu`, or `generic`.
    pub fn cpu_name(&self) -> &str {
        self.mcpu.as_deref().unwrap_or("generic")
    }

    /// The LLVM feature string: host features (for `-mcpu=native`) then `-mattr`, comma separated.
    pub fn llvm_features(&self) -> String {
        self.host_features
            .iter()
            .chain(&self.mattr)
            .cloned()
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The features enabled for this target (LLVM names, no `+`): the CPU's (from its name, or
    /// from host detection for `-mcpu=native`), then `-mattr` additions and removals with their
    /// implications (`+avx512f` brings AVX2 and FMA; `-avx2` removes AVX-512).
    pub fn features(&self) -> BTreeSet<String> {
        let mut set = BTreeSet::new();
        if !self.kind.is_host() {
            return set;
        }
        if !self.host_features.is_empty() {
            for f in &self.host_features {
                if let Some(name) = f.strip_prefix('+') {
                    set.insert(name.to_string());
                }
            }
        } else if self.is_x86() {
            set.extend(
                cpu::x86_cpu_features(self.cpu_name())
                    .into_iter()
                    .map(String::from),
            );
        } else if self.is_aarch64() {
            set.insert("neon".to_string());
        }
        for item in &self.mattr {
            let (sign, name) = item.split_at(1);
            // Follow implications both ways: enabling brings prerequisites, disabling removes
            // what depends on the feature.
            let mut stack = vec![name.to_string()];
            let mut visited = BTreeSet::new();
            while let Some(f) = stack.pop() {
                if !visited.insert(f.clone()) {
                    continue;
                }
                if sign == "+" {
                    stack.extend(cpu::implied_by(&f).iter().map(|s| s.to_string()));
                    set.insert(f);
                } else {
                    stack.extend(cpu::requiring(&f).into_iter().map(String::from));
                    set.remove(&f);
                }
            }
        }
        set
    }

    /// True when `feature` (an LLVM feature name such as `avx2`) is enabled.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.features().contains(feature)
    }

    /// AVX-512 Foundation (512-bit vectors).
    pub fn has_avx512(&self) -> bool {
        self.has_feature("avx512f")
    }

    /// AVX2 (256-bit integer vectors).
    pub fn has_avx2(&self) -> bool {
        self.has_feature("avx2")
    }

    /// Fused multiply-add.
    pub fn has_fma(&self) -> bool {
        self.has_feature("fma")
    }

    /// AVX-512 VNNI (int8 dot products).
    pub fn has_avx512_vnni(&self) -> bool {
        self.has_feature("avx512vnni")
    }

    /// The width of the widest vector register in bits (see [`CpuDesc`]).
    pub fn vector_width_bits(&self) -> u32 {
        self.cpu_desc().vector_bits
    }

    /// How many elements of `element_bits` bits one vector register holds (at least 1).
    pub fn vector_lanes(&self, element_bits: u32) -> u32 {
        self.cpu_desc().lanes_of_bits(element_bits) as u32
    }

    /// The description of the CPU this target generates code for, which schedules and layout
    /// passes read: vector width and registers from the features, the host's caches for
    /// `-mcpu=native` (the CPU family's typical ones otherwise). Device targets describe the
    /// host baseline.
    pub fn cpu_desc(&self) -> CpuDesc {
        let native = !self.host_features.is_empty();
        let caches = if native { host_cache_sizes() } else { None };
        CpuDesc::new(&self.triple(), self.cpu_name(), self.features(), caches)
    }
}

impl fmt::Display for Target {
    /// The canonical string: kind, then `-mtriple`, `-mcpu`, `-mattr`, `-opt-level` (when not
    /// 3), `-fast-math`, then device flags by name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        if let Some(t) = &self.mtriple {
            write!(f, " -mtriple={t}")?;
        }
        if let Some(c) = &self.mcpu {
            write!(f, " -mcpu={c}")?;
        }
        if !self.mattr.is_empty() {
            write!(f, " -mattr={}", self.mattr.join(","))?;
        }
        if self.opt_level != DEFAULT_OPT_LEVEL {
            write!(f, " -opt-level={}", self.opt_level)?;
        }
        if self.fast_math {
            f.write_str(" -fast-math")?;
        }
        for (k, v) in &self.attrs {
            write!(f, " -{k}={v}")?;
        }
        Ok(())
    }
}

impl FromStr for Target {
    type Err = Error;
    fn from_str(s: &str) -> Result<Target> {
        Target::parse(s)
    }
}

#[cfg(test)]
mod tests;
