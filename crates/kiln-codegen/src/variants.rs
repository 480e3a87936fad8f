//! Code for several CPUs in one library, and the record of what each piece of code needs.
//!
//! Every library Kiln writes carries, in its `.kiln_target` section, one target record per code
//! variant (triple, CPU, the instruction-set features its code may use: the target's features
//! that the runtime can check on a host); the runtime reads them from the file before loading
//! it and refuses a library whose code the host cannot run
//! (`kiln_runtime::module::target_record`).
//!
//! A library built for several targets (`kiln compile --target "llvm -mcpu=x86-64-v3" --target
//! "llvm -mcpu=x86-64-v4"`) holds one variant per target. The least demanding one is the
//! default: its functions have the usual `__tvm_ffi_<name>` symbols (Apache TVM's runtime, which
//! knows nothing of variants, runs it); the others export the same functions under
//! `__kiln_variant_<tag>_<name>`, and Kiln's loader picks the variant with the most features
//! the host has.

use crate::target::{Target, TargetKind};
use kiln_ffi::{Error, Result};
use kiln_runtime::cpu;
use kiln_runtime::module::target_record::TargetRecord;

/// One variant of a library's code: the target it is compiled for and its tag (empty for the
/// default variant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    /// What the variant's code is generated for.
    pub target: Target,
    /// The variant's tag: empty for the default variant, else a C identifier unique in the
    /// library.
    pub tag: String,
}

impl Variant {
    /// The only variant of a single-target library.
    pub fn single(target: &Target) -> Variant {
        Variant {
            target: target.clone(),
            tag: String::new(),
        }
    }

    /// The variant's target record: triple, CPU and the features of the target that the
    /// runtime can check (what the code may use).
    pub fn record(&self) -> TargetRecord {
        let features: Vec<String> = self
            .target
            .features()
            .into_iter()
            .filter(|f| cpu::DETECTABLE.contains(&f.as_str()))
            .collect();
        TargetRecord {
            variant: self.tag.clone(),
            triple: self.target.triple(),
            cpu: self.target.cpu_name().to_string(),
            features,
            target: self.target.to_string(),
        }
    }
}

/// The variants of a library built for `targets` (one or more host targets of the same kind
/// and architecture): ordered from the least demanding (fewest features; the default, whose
/// tag is empty) to the most, each other one tagged after its CPU (`x86_64_v4`).
pub fn variants(targets: &[Target]) -> Result<Vec<Variant>> {
    let Some(first) = targets.first() else {
        return Err(Error::value_error("a build needs at least one target"));
    };
    for t in targets {
        if !t.kind.is_host() {
            return Err(Error::value_error(format!(
                "target `{t}` generates device code; a library's code variants are host targets"
            )));
        }
        if targets.len() > 1 && t.kind != TargetKind::Llvm {
            return Err(Error::value_error(format!(
                "target `{t}`: code for several CPUs in one library needs the llvm back end"
            )));
        }
        if t.arch() != first.arch() {
            return Err(Error::value_error(format!(
                "targets `{first}` and `{t}` are for different architectures; one library holds \
                 code for one architecture"
            )));
        }
    }
    let mut ordered: Vec<Target> = targets.to_vec();
    ordered.sort_by_key(|t| t.features().len());
    for (i, t) in ordered.iter().enumerate() {
        if ordered[..i].contains(t) {
            return Err(Error::value_error(format!("target `{t}` is given twice")));
        }
    }
    let mut out: Vec<Variant> = Vec::with_capacity(ordered.len());
    for (i, target) in ordered.into_iter().enumerate() {
        let tag = if i == 0 {
            String::new()
        } else {
            let base: String = target
                .cpu_name()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            if out.iter().any(|v| v.tag == base) {
                format!("{base}_{i}")
            } else {
                base
            }
        };
        out.push(Variant { target, tag });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    #[test]
    fn the_least_demanding_target_is_the_default() {
        let v = variants(&[t("llvm -mcpu=x86-64-v4"), t("llvm -mcpu=x86-64-v3")]).unwrap();
        assert_eq!(v[0].target.cpu_name(), "x86-64-v3");
        assert_eq!(v[0].tag, "");
        assert_eq!(v[1].tag, "x86_64_v4");
        let r = v[1].record();
        assert!(r.features.iter().any(|f| f == "avx512f"), "{r:?}");
        assert!(!v[0].record().features.iter().any(|f| f == "avx512f"));
        assert_eq!(r.cpu, "x86-64-v4");
    }

    #[test]
    fn bad_target_sets_are_refused() {
        let e = variants(&[t("llvm -mcpu=znver3"), t("llvm -mcpu=znver3")]).unwrap_err();
        assert!(e.message().contains("twice"), "{}", e.message());
        let e = variants(&[t("c"), t("llvm")]).unwrap_err();
        assert!(e.message().contains("llvm back end"), "{}", e.message());
        let e = variants(&[t("llvm"), t("llvm -mtriple=aarch64-linux-gnu")]).unwrap_err();
        assert!(e.message().contains("architectures"), "{}", e.message());
        assert!(variants(&[]).is_err());
        let e = variants(&[t("opencl")]).unwrap_err();
        assert!(e.message().contains("device code"), "{}", e.message());
    }
}
