//! The machine this process runs on, as LLVM sees it (`llvm::sys::getHostCPUName` and
//! `getHostCPUFeatures`). LLVM 19 names this project's machines `znver5`; the preinstalled LLVM 14
//! would say `generic`, which is why Kiln links LLVM 19.

use inkwell::targets::TargetMachine;

/// The host CPU's name as LLVM 19 reports it (e.g. `znver5`).
pub fn host_cpu_name() -> String {
    TargetMachine::get_host_cpu_name().to_string()
}

/// The host CPU's features as LLVM detected them, each with `+` or `-` (e.g. `+avx512f`), sorted.
pub fn host_cpu_features() -> Vec<String> {
    let mut features: Vec<String> = TargetMachine::get_host_cpu_features()
        .to_string()
        .split(',')
        .filter(|f| f.len() > 1)
        .map(str::to_string)
        .collect();
    features.sort();
    features
}

/// LLVM's default (host) target triple, e.g. `x86_64-pc-linux-gnu`.
pub fn host_triple() -> String {
    TargetMachine::get_default_triple()
        .as_str()
        .to_string_lossy()
        .into_owned()
}

/// True when `triple` names the host's architecture (its first component matches).
pub(crate) fn is_host_triple(triple: &str) -> bool {
    let arch = |t: &str| t.split('-').next().unwrap_or_default().to_string();
    arch(triple) == arch(&host_triple())
}

/// The host's cache sizes as Linux reports them (`/sys/devices/system/cpu/cpu0/cache`), or
/// `None` where they cannot be read.
pub fn host_cache_sizes() -> Option<kiln_tir::CacheSizes> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut sizes = kiln_tir::CacheSizes {
        l1d: 0,
        l2: 0,
        l3: 0,
    };
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let size = size.trim();
        let bytes = match size.strip_suffix('K') {
            Some(k) => k.parse::<u64>().ok().map(|k| k * 1024),
            None => match size.strip_suffix('M') {
                Some(m) => m.parse::<u64>().ok().map(|m| m * 1024 * 1024),
                None => size.parse::<u64>().ok(),
            },
        };
        let Some(bytes) = bytes else { continue };
        match (level.trim(), kind.trim()) {
            ("1", "Data") => sizes.l1d = bytes,
            ("2", _) => sizes.l2 = bytes,
            ("3", _) => sizes.l3 = bytes,
            _ => {}
        }
    }
    (sizes.l1d > 0 && sizes.l2 > 0).then_some(sizes)
}
