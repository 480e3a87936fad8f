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
