//! What a library's code needs of the CPU: the target records Kiln's compiler writes into every
//! library, read from the file before it is loaded.
//!
//! Format (written once, here): the ELF section [`TARGET_RECORD_SECTION`] holds one record per
//! code variant (the linker concatenates the records of all objects; zero bytes between them
//! are padding). A record is UTF-8 text, `key=value` lines separated by `\n`, ending with one
//! NUL byte:
//!
//! ```text
//! format=kiln-target-1
//! variant=                       (empty: the default variant; else a C identifier)
//! triple=x86_64-pc-linux-gnu
//! cpu=znver3
//! features=avx,avx2,bmi,...      (LLVM names, sorted; those of crate::cpu::DETECTABLE)
//! target=llvm -mcpu=znver3       (for messages)
//! ```
//!
//! Unknown keys are ignored. The default variant's functions are `__tvm_ffi_<name>`; a
//! variant tagged `T` exports the same functions as `__kiln_variant_<T>_<name>`
//! ([`variant_symbol_prefix`]). [`select`] picks the variant to run on this host.

use crate::cpu;
use std::collections::BTreeSet;

/// The ELF section that holds a library's target records.
pub const TARGET_RECORD_SECTION: &str = ".kiln_target";

/// The first line of every record of this format.
const FORMAT_LINE: &str = "format=kiln-target-1";

/// The symbol prefix of the functions of the code variant tagged `tag`: `__tvm_ffi_` for the
/// default (empty) tag, `__kiln_variant_<tag>_` otherwise.
pub fn variant_symbol_prefix(tag: &str) -> String {
    if tag.is_empty() {
        "__tvm_ffi_".to_string()
    } else {
        format!("__kiln_variant_{tag}_")
    }
}

/// One code variant's requirements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetRecord {
    /// The variant's tag (empty for the default variant).
    pub variant: String,
    /// The LLVM target triple the code was compiled for.
    pub triple: String,
    /// The CPU it was compiled for (`znver3`, `x86-64-v4`, `generic`).
    pub cpu: String,
    /// The instruction-set features its code may use (LLVM names).
    pub features: Vec<String>,
    /// The target string it was compiled with.
    pub target: String,
}

impl TargetRecord {
    /// The record as section bytes (the trailing NUL included): what the compiler puts in the
    /// [`TARGET_RECORD_SECTION`] of every object it writes. Features are written sorted and
    /// without duplicates; a newline or NUL inside a value (which would end the line or the
    /// record) becomes a space.
    pub fn encode(&self) -> Vec<u8> {
        let clean = |v: &str| v.replace(['\n', '\0'], " ");
        let mut features: Vec<String> = self.features.iter().map(|f| clean(f)).collect();
        features.sort();
        features.dedup();
        let text = format!(
            "{FORMAT_LINE}\nvariant={}\ntriple={}\ncpu={}\nfeatures={}\ntarget={}",
            clean(&self.variant),
            clean(&self.triple),
            clean(&self.cpu),
            features.join(","),
            clean(&self.target)
        );
        let mut bytes = text.into_bytes();
        bytes.push(0);
        bytes
    }

    /// The architecture part of the triple (`x86_64`).
    pub fn arch(&self) -> &str {
        self.triple.split('-').next().unwrap_or_default()
    }

    /// The features this record needs that `host` lacks (a feature the runtime cannot detect
    /// counts as missing), sorted.
    pub fn missing_features(&self, host: &BTreeSet<&str>) -> Vec<String> {
        let mut missing: Vec<String> = self
            .features
            .iter()
            .filter(|f| !host.contains(f.as_str()))
            .cloned()
            .collect();
        missing.sort();
        missing
    }

    /// Whether code of this record runs on a host of architecture `arch` with `features`.
    pub fn runs_on(&self, arch: &str, features: &BTreeSet<&str>) -> bool {
        same_arch(self.arch(), arch) && self.missing_features(features).is_empty()
    }
}

/// Whether two triple architectures name the same machine (`x86_64` and `amd64` do).
fn same_arch(a: &str, b: &str) -> bool {
    let norm = |s: &str| match s {
        "amd64" | "x86-64" => "x86_64".to_string(),
        "arm64" => "aarch64".to_string(),
        other => other.to_string(),
    };
    norm(a) == norm(b)
}

/// Parses the contents of a [`TARGET_RECORD_SECTION`]: every record, in order. Errors give
/// the byte offset of the record at fault within the section.
pub fn parse_section(bytes: &[u8]) -> Result<Vec<TargetRecord>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        if bytes[at] == 0 {
            at += 1;
            continue;
        }
        let end = bytes[at..]
            .iter()
            .position(|&b| b == 0)
            .map(|n| at + n)
            .ok_or_else(|| {
                format!("the target record at byte {at} of the section has no terminating NUL")
            })?;
        let text = std::str::from_utf8(&bytes[at..end])
            .map_err(|e| format!("the target record at byte {at} is not UTF-8: {e}"))?;
        out.push(parse_record(text).map_err(|e| format!("the target record at byte {at}: {e}"))?);
        at = end + 1;
    }
    Ok(out)
}

/// One record's text (without its NUL).
fn parse_record(text: &str) -> Result<TargetRecord, String> {
    let mut lines = text.split('\n');
    let first = lines.next().unwrap_or_default();
    if first != FORMAT_LINE {
        return Err(format!(
            "it starts with {first:?}, not {FORMAT_LINE:?} (a newer or foreign format)"
        ));
    }
    let (mut variant, mut triple, mut cpu, mut features, mut target) =
        (None, None, None, None, None);
    for line in lines {
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("the line {line:?} is not key=value"));
        };
        let slot = match k {
            "variant" => &mut variant,
            "triple" => &mut triple,
            "cpu" => &mut cpu,
            "features" => &mut features,
            "target" => &mut target,
            _ => continue,
        };
        *slot = Some(v.to_string());
    }
    let need = |v: Option<String>, key: &str| v.ok_or_else(|| format!("it has no `{key}` line"));
    let variant = need(variant, "variant")?;
    if !variant
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!("the variant tag {variant:?} is not an identifier"));
    }
    let features = need(features, "features")?;
    Ok(TargetRecord {
        variant,
        triple: need(triple, "triple")?,
        cpu: need(cpu, "cpu")?,
        features: features
            .split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect(),
        target: need(target, "target")?,
    })
}

/// The variant to run among `records` on a host of architecture `arch` with `features`: the
/// runnable one with the most features (ties: the later record), or an error message listing
/// what each variant lacks.
pub fn select_for(
    records: &[TargetRecord],
    arch: &str,
    features: &BTreeSet<&str>,
) -> Result<usize, String> {
    let best = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.runs_on(arch, features))
        .max_by_key(|(i, r)| (r.features.len(), *i))
        .map(|(i, _)| i);
    best.ok_or_else(|| {
        let why: Vec<String> = records
            .iter()
            .map(|r| {
                let what = if same_arch(r.arch(), arch) {
                    format!(
                        "uses CPU features this machine lacks: {}",
                        r.missing_features(features).join(", ")
                    )
                } else {
                    format!("is code for {}, this machine is {arch}", r.arch())
                };
                format!(
                    "compiled for CPU `{}` ({}, {}) and {what}",
                    r.cpu, r.target, r.triple
                )
            })
            .collect();
        let machine = cpu::host_cpu_brand();
        match why.as_slice() {
            [one] => format!("its code was {one} (this machine: {machine})"),
            _ => {
                let lines: Vec<String> = records
                    .iter()
                    .zip(&why)
                    .map(|(r, w)| {
                        let tag = if r.variant.is_empty() {
                            "default"
                        } else {
                            &r.variant
                        };
                        format!("\n  variant `{tag}`: {w}")
                    })
                    .collect();
                format!(
                    "none of its {} code variants runs on this machine ({machine}):{}",
                    records.len(),
                    lines.concat()
                )
            }
        }
    })
}

/// [`select_for`] on this host.
pub fn select(records: &[TargetRecord]) -> Result<usize, String> {
    select_for(records, std::env::consts::ARCH, cpu::host_features())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(variant: &str, features: &[&str]) -> TargetRecord {
        TargetRecord {
            variant: variant.into(),
            triple: "x86_64-pc-linux-gnu".into(),
            cpu: format!("cpu_{variant}"),
            features: features.iter().map(|s| s.to_string()).collect(),
            target: "llvm".into(),
        }
    }

    #[test]
    fn records_round_trip_through_a_section() {
        let a = rec("", &["avx", "avx2", "fma"]);
        let b = rec("x86_64_v4", &["avx512f"]);
        let mut section = a.encode();
        section.extend([0, 0, 0]);
        section.extend(b.encode());
        assert_eq!(parse_section(&section).unwrap(), vec![a, b]);
        assert_eq!(parse_section(&[0, 0]).unwrap(), vec![]);
        // Unknown keys are ignored.
        let text = b"format=kiln-target-1\nvariant=\ntriple=x\ncpu=c\nfeatures=\nnew=1\ntarget=t\0";
        assert_eq!(parse_section(text).unwrap()[0].features.len(), 0);
        // Features are written sorted, once each.
        let unsorted = rec("", &["fma", "avx", "fma"]);
        let back = parse_section(&unsorted.encode()).unwrap();
        assert_eq!(back[0].features, ["avx", "fma"]);
    }

    #[test]
    fn bad_sections_name_the_offset() {
        let good = rec("", &["avx"]).encode();
        let mut no_nul = good.clone();
        no_nul.extend(b"format=kiln-target-1\nvariant=");
        let e = parse_section(&no_nul).unwrap_err();
        assert!(
            e.contains(&format!("byte {}", good.len())) && e.contains("NUL"),
            "{e}"
        );
        let e = parse_section(b"format=kiln-target-9\nvariant=\0").unwrap_err();
        assert!(e.contains("byte 0") && e.contains("kiln-target-9"), "{e}");
        let e = parse_section(b"format=kiln-target-1\nvariant=\ncpu=x\0").unwrap_err();
        assert!(e.contains("no `features`"), "{e}");
        let e = parse_section(b"format=kiln-target-1\nvariant=\ntriple=t\ncpu=c\nfeatures=\0")
            .unwrap_err();
        assert!(e.contains("byte 0") && e.contains("no `target`"), "{e}");
        let e = parse_section(b"format=kiln-target-1\nnonsense\0").unwrap_err();
        assert!(e.contains("key=value"), "{e}");
        let e = parse_section(b"format=kiln-target-1\nvariant=../x\ntriple=t\ncpu=c\nfeatures=\0")
            .unwrap_err();
        assert!(e.contains("identifier"), "{e}");
        let e = parse_section(&[b'f', 0xff, 0]).unwrap_err();
        assert!(e.contains("UTF-8"), "{e}");
    }

    #[test]
    fn selection_takes_the_richest_runnable_variant() {
        let host: BTreeSet<&str> = ["sse2", "avx", "avx2", "fma"].into();
        let v3 = rec("", &["avx", "avx2", "fma"]);
        let v4 = rec("v4", &["avx", "avx2", "fma", "avx512f"]);
        let base = rec("", &["sse2"]);
        assert_eq!(
            select_for(&[v3.clone(), v4.clone()], "x86_64", &host),
            Ok(0)
        );
        let wide: BTreeSet<&str> = ["sse2", "avx", "avx2", "fma", "avx512f"].into();
        assert_eq!(
            select_for(&[v3.clone(), v4.clone()], "x86_64", &wide),
            Ok(1)
        );
        assert_eq!(select_for(&[base, v3.clone()], "amd64", &host), Ok(1));
        let e = select_for(std::slice::from_ref(&v4), "x86_64", &host).unwrap_err();
        assert!(e.contains("cpu_v4") && e.contains("lacks: avx512f"), "{e}");
        let e = select_for(std::slice::from_ref(&v3), "aarch64", &host).unwrap_err();
        assert!(e.contains("code for x86_64"), "{e}");
        // Several variants, none runnable: one line each.
        let narrow: BTreeSet<&str> = ["sse2"].into();
        let e = select_for(&[v3, v4], "x86_64", &narrow).unwrap_err();
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 3, "{e}");
        assert!(lines[0].contains("none of its 2 code variants"), "{e}");
        assert!(
            lines[1].contains("variant `default`") && lines[1].contains("lacks: avx, avx2, fma"),
            "{e}"
        );
        assert!(
            lines[2].contains("variant `v4`") && lines[2].contains("avx512f"),
            "{e}"
        );
        // An empty list of records runs nothing.
        assert!(select_for(&[], "x86_64", &host).is_err());
    }

    #[test]
    fn variant_prefixes() {
        assert_eq!(variant_symbol_prefix(""), "__tvm_ffi_");
        assert_eq!(variant_symbol_prefix("v4"), "__kiln_variant_v4_");
    }
}
