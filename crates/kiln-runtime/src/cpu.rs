//! The instruction-set features of the CPU this process runs on, by their LLVM names (`avx2`,
//! `avx512f`, `amx-tile`, ...), read with CPUID and checked against what the operating system
//! saves on a context switch (XCR0): a library's code may use a feature only when both the CPU
//! has it and the OS enabled its register state.
//!
//! [`DETECTABLE`] is the one table of features Kiln checks before loading a library; the
//! compiler records, for each library it writes, the features of its target that appear here
//! (`kiln_codegen::variants`).

use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Which register of a CPUID leaf holds a feature bit.
#[derive(Clone, Copy)]
enum Reg {
    Eax,
    Ebx,
    Ecx,
    Edx,
}

/// The register state a feature needs the OS to save (XCR0 bits).
#[derive(Clone, Copy, PartialEq)]
enum State {
    /// SSE and older: always saved on x86-64.
    None,
    /// AVX: XMM and YMM state (XCR0 bits 1, 2).
    Avx,
    /// AVX-512: AVX plus opmask, ZMM_Hi256 and Hi16_ZMM (bits 5, 6, 7).
    Avx512,
    /// AMX: AVX plus XTILECFG and XTILEDATA (bits 17, 18).
    Amx,
}

/// One feature: its LLVM name, CPUID leaf and sub-leaf, register, bit and OS state.
struct Feature {
    name: &'static str,
    leaf: u32,
    subleaf: u32,
    reg: Reg,
    bit: u32,
    state: State,
}

const fn f(
    name: &'static str,
    leaf: u32,
    subleaf: u32,
    reg: Reg,
    bit: u32,
    state: State,
) -> Feature {
    Feature {
        name,
        leaf,
        subleaf,
        reg,
        bit,
        state,
    }
}

/// Every feature Kiln can check, with where CPUID reports it (Intel SDM vol. 2A, CPUID; AMD
/// APM vol. 3, appendix E).
const FEATURES: &[Feature] = &[
    f("sse", 1, 0, Reg::Edx, 25, State::None),
    f("sse2", 1, 0, Reg::Edx, 26, State::None),
    f("sse3", 1, 0, Reg::Ecx, 0, State::None),
    f("ssse3", 1, 0, Reg::Ecx, 9, State::None),
    f("fma", 1, 0, Reg::Ecx, 12, State::Avx),
    f("sse4.1", 1, 0, Reg::Ecx, 19, State::None),
    f("sse4.2", 1, 0, Reg::Ecx, 20, State::None),
    f("movbe", 1, 0, Reg::Ecx, 22, State::None),
    f("popcnt", 1, 0, Reg::Ecx, 23, State::None),
    f("avx", 1, 0, Reg::Ecx, 28, State::Avx),
    f("f16c", 1, 0, Reg::Ecx, 29, State::Avx),
    f("bmi", 7, 0, Reg::Ebx, 3, State::None),
    f("avx2", 7, 0, Reg::Ebx, 5, State::Avx),
    f("bmi2", 7, 0, Reg::Ebx, 8, State::None),
    f("avx512f", 7, 0, Reg::Ebx, 16, State::Avx512),
    f("avx512dq", 7, 0, Reg::Ebx, 17, State::Avx512),
    f("avx512ifma", 7, 0, Reg::Ebx, 21, State::Avx512),
    f("avx512cd", 7, 0, Reg::Ebx, 28, State::Avx512),
    f("avx512bw", 7, 0, Reg::Ebx, 30, State::Avx512),
    f("avx512vl", 7, 0, Reg::Ebx, 31, State::Avx512),
    f("avx512vbmi", 7, 0, Reg::Ecx, 1, State::Avx512),
    f("avx512vbmi2", 7, 0, Reg::Ecx, 6, State::Avx512),
    f("gfni", 7, 0, Reg::Ecx, 8, State::None),
    f("vaes", 7, 0, Reg::Ecx, 9, State::Avx),
    f("vpclmulqdq", 7, 0, Reg::Ecx, 10, State::Avx),
    f("avx512vnni", 7, 0, Reg::Ecx, 11, State::Avx512),
    f("avx512bitalg", 7, 0, Reg::Ecx, 12, State::Avx512),
    f("avx512vpopcntdq", 7, 0, Reg::Ecx, 14, State::Avx512),
    f("amx-bf16", 7, 0, Reg::Edx, 22, State::Amx),
    f("avx512fp16", 7, 0, Reg::Edx, 23, State::Avx512),
    f("amx-tile", 7, 0, Reg::Edx, 24, State::Amx),
    f("amx-int8", 7, 0, Reg::Edx, 25, State::Amx),
    f("avxvnni", 7, 1, Reg::Eax, 4, State::Avx),
    f("avx512bf16", 7, 1, Reg::Eax, 5, State::Avx512),
    f("lzcnt", 0x8000_0001, 0, Reg::Ecx, 5, State::None),
];

/// The names of every feature Kiln checks on a host (LLVM spelling), in the table's order:
/// the compiler records, of a target's features, those in this list.
pub const DETECTABLE: &[&str] = &NAMES;

/// [`FEATURES`]' names, taken from the table at compile time.
const NAMES: [&str; FEATURES.len()] = {
    let mut names = [""; FEATURES.len()];
    let mut i = 0;
    while i < FEATURES.len() {
        names[i] = FEATURES[i].name;
        i += 1;
    }
    names
};

/// The features of this machine's CPU that its OS supports (LLVM names), detected once.
pub fn host_features() -> &'static BTreeSet<&'static str> {
    static HOST: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    HOST.get_or_init(detect)
}

/// Detects the host's features anew (what [`host_features`] caches): for measuring the
/// detection itself.
pub fn detect_features() -> BTreeSet<&'static str> {
    detect()
}

/// The CPU's marketing name (`AMD EPYC 9B45 ...`), or the architecture where it has none.
pub fn host_cpu_brand() -> String {
    static BRAND: OnceLock<String> = OnceLock::new();
    BRAND.get_or_init(brand).clone()
}

#[cfg(target_arch = "x86_64")]
fn detect() -> BTreeSet<&'static str> {
    use std::arch::x86_64::{__cpuid_count, CpuidResult};
    // Leaves above the maximum return another leaf's data: each is read only when the maximum
    // covers it.
    let cpuid = __cpuid_count;
    let max_basic = cpuid(0, 0).eax;
    let max_ext = cpuid(0x8000_0000, 0).eax;
    // Each (leaf, sub-leaf) is read once: in a virtual machine every CPUID traps to the
    // hypervisor (microseconds each).
    let mut read: Vec<((u32, u32), Option<CpuidResult>)> = Vec::with_capacity(8);
    let mut leaf = |l: u32, s: u32| -> Option<CpuidResult> {
        if let Some((_, r)) = read.iter().find(|(k, _)| *k == (l, s)) {
            return *r;
        }
        let max = if l >= 0x8000_0000 { max_ext } else { max_basic };
        let r = (l <= max).then(|| cpuid(l, s));
        read.push(((l, s), r));
        r
    };
    let leaf1 = leaf(1, 0);
    let osxsave = leaf1.is_some_and(|r| r.ecx & (1 << 27) != 0);
    let xcr0 = if osxsave {
        // SAFETY: XGETBV is available when CPUID reports OSXSAVE; register 0 is XCR0.
        unsafe { xgetbv0() }
    } else {
        0
    };
    let state_ok = |s: State| match s {
        State::None => true,
        State::Avx => xcr0 & 0b110 == 0b110,
        State::Avx512 => xcr0 & 0b1110_0110 == 0b1110_0110,
        State::Amx => {
            xcr0 & 0b110 == 0b110 && xcr0 & (0b11 << 17) == (0b11 << 17) && amx_permitted()
        }
    };
    FEATURES
        .iter()
        .filter(|ft| {
            let Some(r) = leaf(ft.leaf, ft.subleaf) else {
                return false;
            };
            let v = match ft.reg {
                Reg::Eax => r.eax,
                Reg::Ebx => r.ebx,
                Reg::Ecx => r.ecx,
                Reg::Edx => r.edx,
            };
            v & (1 << ft.bit) != 0 && state_ok(ft.state)
        })
        .map(|ft| ft.name)
        .collect()
}

/// Whether this process may use the AMX tile data state. Linux enables it in XCR0 but faults
/// a process that uses it before asking (`arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`), so
/// Kiln asks once, here, on CPUs whose OS enabled the state: AMX code is reported runnable only
/// when the kernel grants it.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn amx_permitted() -> bool {
    static PERMITTED: OnceLock<bool> = OnceLock::new();
    *PERMITTED.get_or_init(|| {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with this request only reads its integer argument; it changes no
        // memory of this process (the kernel grows its own signal-frame size).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        rc == 0
    })
}

/// Other systems make the state usable once it is enabled in XCR0.
#[cfg(all(target_arch = "x86_64", not(target_os = "linux")))]
fn amx_permitted() -> bool {
    true
}

/// XCR0, the register state the OS saves.
///
/// # Safety
/// The CPU must report OSXSAVE (CPUID.1:ECX bit 27).
#[cfg(target_arch = "x86_64")]
unsafe fn xgetbv0() -> u64 {
    let (eax, edx): (u32, u32);
    // SAFETY: the caller checked OSXSAVE; XGETBV with ECX = 0 reads XCR0 into EDX:EAX.
    unsafe {
        std::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") eax, out("edx") edx,
            options(nomem, nostack, preserves_flags));
    }
    ((edx as u64) << 32) | eax as u64
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> BTreeSet<&'static str> {
    BTreeSet::new()
}

#[cfg(target_arch = "x86_64")]
fn brand() -> String {
    use std::arch::x86_64::__cpuid;
    // The brand leaves are read only when the extended maximum covers them.
    let max_ext = __cpuid(0x8000_0000).eax;
    if max_ext < 0x8000_0004 {
        return "x86_64".to_string();
    }
    let mut bytes = Vec::with_capacity(48);
    for l in 0x8000_0002u32..=0x8000_0004 {
        let r = __cpuid(l);
        for v in [r.eax, r.ebx, r.ecx, r.edx] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    let s = String::from_utf8_lossy(&bytes);
    s.trim_matches(|c: char| c == '\0' || c.is_whitespace())
        .to_string()
}

#[cfg(not(target_arch = "x86_64"))]
fn brand() -> String {
    std::env::consts::ARCH.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_each_feature_of_the_table_once() {
        assert_eq!(DETECTABLE.len(), FEATURES.len());
        let unique: BTreeSet<&str> = DETECTABLE.iter().copied().collect();
        assert_eq!(unique.len(), DETECTABLE.len());
        assert!(DETECTABLE.contains(&"avx512fp16") && DETECTABLE.contains(&"amx-tile"));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn detection_agrees_with_the_kernel() {
        let host = host_features();
        assert!(host.contains("sse2"));
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let flags: BTreeSet<&str> = info
            .lines()
            .find(|l| l.starts_with("flags"))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        // Every feature of the table, with the name Linux gives it (Linux, too, hides a
        // feature whose register state it does not enable).
        let linux_names = [
            ("sse", "sse"),
            ("sse2", "sse2"),
            ("sse3", "pni"),
            ("ssse3", "ssse3"),
            ("fma", "fma"),
            ("sse4.1", "sse4_1"),
            ("sse4.2", "sse4_2"),
            ("movbe", "movbe"),
            ("popcnt", "popcnt"),
            ("avx", "avx"),
            ("f16c", "f16c"),
            ("bmi", "bmi1"),
            ("avx2", "avx2"),
            ("bmi2", "bmi2"),
            ("avx512f", "avx512f"),
            ("avx512dq", "avx512dq"),
            ("avx512ifma", "avx512ifma"),
            ("avx512cd", "avx512cd"),
            ("avx512bw", "avx512bw"),
            ("avx512vl", "avx512vl"),
            ("avx512vbmi", "avx512vbmi"),
            ("avx512vbmi2", "avx512_vbmi2"),
            ("gfni", "gfni"),
            ("vaes", "vaes"),
            ("vpclmulqdq", "vpclmulqdq"),
            ("avx512vnni", "avx512_vnni"),
            ("avx512bitalg", "avx512_bitalg"),
            ("avx512vpopcntdq", "avx512_vpopcntdq"),
            ("amx-bf16", "amx_bf16"),
            ("avx512fp16", "avx512_fp16"),
            ("amx-tile", "amx_tile"),
            ("amx-int8", "amx_int8"),
            ("avxvnni", "avx_vnni"),
            ("avx512bf16", "avx512_bf16"),
            ("lzcnt", "abm"),
        ];
        let ours: Vec<&str> = linux_names.iter().map(|p| p.0).collect();
        assert_eq!(
            ours, DETECTABLE,
            "every detectable feature is cross-checked"
        );
        for (ours, linux) in linux_names {
            assert_eq!(
                host.contains(ours),
                flags.contains(linux),
                "{ours} (/proc/cpuinfo: {linux})"
            );
        }
        assert_eq!(&detect_features(), host);
        assert!(!host_cpu_brand().is_empty());
    }
}
