//! Libraries that say what CPU they need (`.kiln_target` records): a library whose code this CPU
//! cannot run is refused before any of its code runs, a library with several code variants runs
//! the best one the host can, malformed records are errors naming the byte offset, and the
//! check's cost is small.

mod module_support;

use kiln_runtime::cpu;
use kiln_runtime::module::target_record::{parse_section, select, TargetRecord};
use kiln_runtime::module::{library_target_records, load_module};
use module_support::*;
use std::path::{Path, PathBuf};

/// The features no AMD CPU has (AMX, AVX512-FP16): a library needing them is refused on most
/// machines; where the host has them the tests that rely on a refusal say so and skip.
const FOREIGN: &[&str] = &["amx-tile", "avx512fp16"];

fn host_lacks_foreign() -> bool {
    let host = cpu::host_features();
    let lacks = FOREIGN.iter().any(|f| !host.contains(f));
    if !lacks {
        eprintln!("skipped: this CPU has {FOREIGN:?}, so no library needing them is refused");
    }
    lacks
}

/// A record's C string literal body (the C compiler adds the NUL).
fn record(tag: &str, cpu_name: &str, features: &[&str]) -> String {
    let r = TargetRecord {
        variant: tag.to_string(),
        triple: format!("{}-pc-linux-gnu", std::env::consts::ARCH),
        cpu: cpu_name.to_string(),
        features: features.iter().map(|s| s.to_string()).collect(),
        target: format!("llvm -mcpu={cpu_name}"),
    };
    let bytes = r.encode();
    let text = std::str::from_utf8(&bytes[..bytes.len() - 1]).unwrap();
    text.replace('\n', "\\n")
}

/// A library whose `which` function returns `1` in the default variant and `2` in the variant
/// tagged `v1` (when there is one), with the given records, and a constructor that creates
/// `marker` when the library's code runs.
fn library(dir: &Scratch, name: &str, records: &[String], with_v1: bool, marker: &Path) -> PathBuf {
    let mut src = String::from(
        "#include <stdint.h>\n#include <stdio.h>\n\
         typedef struct { int32_t type_index; uint32_t pad; int64_t v; } Any;\n\
         int __tvm_ffi_which(void* s, const Any* a, int32_t n, Any* r) \
         { r->type_index = 1; r->pad = 0; r->v = 1; return 0; }\n",
    );
    if with_v1 {
        src.push_str(
            "int __kiln_variant_v1_which(void* s, const Any* a, int32_t n, Any* r) \
             { r->type_index = 1; r->pad = 0; r->v = 2; return 0; }\n",
        );
    }
    src.push_str(&format!(
        "__attribute__((constructor)) static void ran(void) {{ FILE* f = fopen(\"{}\", \"w\"); \
         if (f) fclose(f); }}\n",
        marker.display()
    ));
    for (i, r) in records.iter().enumerate() {
        src.push_str(&format!(
            "__attribute__((section(\".kiln_target\"), used)) static const char rec{i}[] = \
             \"{r}\";\n"
        ));
    }
    let path = dir.path(name);
    cc_shared(&path, &src);
    path
}

#[test]
fn a_library_for_a_cpu_this_one_is_not_is_refused_before_its_code_runs() {
    if !host_lacks_foreign() {
        return;
    }
    let dir = Scratch::new("refused");
    let marker = dir.path("ran");
    let lib = library(
        &dir,
        "spr.so",
        &[record(
            "",
            "sapphirerapids",
            &["avx512f", "amx-tile", "avx512fp16"],
        )],
        false,
        &marker,
    );
    let e = load_module(&lib).unwrap_err();
    let m = e.message();
    assert_eq!(e.kind(), "RuntimeError", "{m}");
    assert!(
        m.contains(&lib.display().to_string()),
        "names the file: {m}"
    );
    assert!(m.contains("sapphirerapids"), "names the CPU: {m}");
    for f in FOREIGN {
        if !cpu::host_features().contains(f) {
            assert!(m.contains(f), "names the missing {f}: {m}");
        }
    }
    assert!(
        m.contains(&cpu::host_cpu_brand()),
        "names this machine: {m}"
    );
    assert!(!marker.exists(), "the library's constructor ran");
}

#[test]
fn a_library_for_this_cpu_loads_and_its_code_runs() {
    let dir = Scratch::new("runs");
    let marker = dir.path("ran");
    let have: Vec<&str> = cpu::host_features().iter().copied().take(6).collect();
    let lib = library(&dir, "ok.so", &[record("", "host", &have)], false, &marker);
    let m = load_module(&lib).unwrap();
    assert!(marker.exists(), "the constructor ran once loaded");
    let which = m.function("which").unwrap();
    assert_eq!(which.invoke::<i64>(()).unwrap(), 1);
    let recs = library_target_records(&m);
    assert_eq!(recs.len(), 1);
    assert!(recs[0].1, "the only variant is the chosen one");
    assert_eq!(recs[0].0.cpu, "host");
}

#[test]
fn the_best_variant_the_host_can_run_is_chosen() {
    let dir = Scratch::new("variants");
    let marker = dir.path("ran");
    let host: Vec<&str> = cpu::host_features().iter().copied().collect();
    let base: Vec<&str> = host.iter().copied().filter(|f| *f == "sse2").collect();
    // v1 needs more than the default, all of it present here: v1 runs.
    let rich = library(
        &dir,
        "rich.so",
        &[record("", "base", &base), record("v1", "rich", &host)],
        true,
        &marker,
    );
    let m = load_module(&rich).unwrap();
    assert_eq!(m.function("which").unwrap().invoke::<i64>(()).unwrap(), 2);
    let chosen: Vec<_> = library_target_records(&m)
        .into_iter()
        .filter(|r| r.1)
        .collect();
    assert_eq!(chosen.len(), 1);
    assert_eq!(chosen[0].0.variant, "v1");
    if !host_lacks_foreign() {
        return;
    }
    // v1 needs what this CPU lacks: the default runs.
    let mut wants = host.clone();
    wants.extend(FOREIGN);
    let foreign = library(
        &dir,
        "foreign.so",
        &[
            record("", "base", &base),
            record("v1", "sapphirerapids", &wants),
        ],
        true,
        &marker,
    );
    let m = load_module(&foreign).unwrap();
    assert_eq!(m.function("which").unwrap().invoke::<i64>(()).unwrap(), 1);
}

#[test]
fn malformed_records_are_errors_with_offsets() {
    let dir = Scratch::new("bad_records");
    let marker = dir.path("ran");
    let good = record("", "base", &["sse2"]);
    for (name, rec, want) in [
        (
            "format.so",
            "format=kiln-target-7\\nvariant=".to_string(),
            "kiln-target-7",
        ),
        (
            "missing.so",
            "format=kiln-target-1\\nvariant=\\ncpu=x".to_string(),
            "no `",
        ),
        (
            "junk.so",
            "format=kiln-target-1\\njunk".to_string(),
            "key=value",
        ),
    ] {
        let lib = library(&dir, name, &[good.clone(), rec], false, &marker);
        let e = load_module(&lib).unwrap_err();
        let m = e.message();
        assert!(m.contains(want) && m.contains("byte "), "{name}: {m}");
        assert!(m.contains(&lib.display().to_string()), "{name}: {m}");
        assert!(!marker.exists(), "{name}: code ran");
    }
    // A record without its NUL (the section ends mid-record).
    let src = "__attribute__((section(\".kiln_target\"), used)) static const char r[4] = \
               {'f','o','r','m'};\nint __tvm_ffi_f(void) { return 0; }\n";
    let lib = dir.path("nonul.so");
    cc_shared(&lib, src);
    let e = load_module(&lib).unwrap_err();
    assert!(e.message().contains("NUL"), "{}", e.message());
}

#[test]
fn the_check_costs_microseconds() {
    let dir = Scratch::new("cost");
    let marker = dir.path("ran");
    let have: Vec<&str> = cpu::host_features().iter().copied().collect();
    let lib = library(
        &dir,
        "cost.so",
        &[record("", "host", &have)],
        false,
        &marker,
    );
    // Reading the records from the file and choosing a variant, as the loader does.
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let bytes = kiln_runtime::module::elf::section_of_file(&lib, ".kiln_target")
            .unwrap()
            .unwrap();
        let records = parse_section(&bytes).unwrap();
        assert_eq!(select(&records), Ok(0));
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    eprintln!("target record check: median {median:.1} us over 200 loads");
    assert!(median < 5_000.0, "the check took {median} us");
}
