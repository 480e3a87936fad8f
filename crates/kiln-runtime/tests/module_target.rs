//! Libraries that say what CPU they need (`.kiln_target` records): a library whose code this CPU
//! cannot run is refused before any of its code runs, a library with several code variants runs
//! the best one the host can, malformed records are errors naming the byte offset, and the
//! check's cost is small.

mod module_support;

use kiln_ffi::{Array, Map};
use kiln_runtime::cpu;
use kiln_runtime::module::target_record::{parse_section, select, TargetRecord};
use kiln_runtime::module::{library_target_records, load_module, LibraryModule};
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
/// tagged `v1` (when there is one), with the given records (one array, so that their order in
/// the section is the order given), and a constructor that creates `marker` when the library's
/// code runs.
fn library(dir: &Scratch, name: &str, records: &[String], with_v1: bool, marker: &Path) -> PathBuf {
    let path = dir.path(name);
    cc_shared(&path, &library_source(records, with_v1, marker));
    path
}

/// The C source of [`library`].
fn library_source(records: &[String], with_v1: bool, marker: &Path) -> String {
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
    if !records.is_empty() {
        src.push_str(&format!(
            "__attribute__((section(\".kiln_target\"), used)) static const char records[] = \
             \"{}\";\n",
            records.join("\\0")
        ));
    }
    src
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
fn records_of_several_objects_are_read_across_the_linkers_padding() {
    // As the compiler links a library with several variants: one object per variant, each with
    // its own record; the linker concatenates the sections, aligning each (zero padding).
    let dir = Scratch::new("objects");
    let host: Vec<&str> = cpu::host_features().iter().copied().collect();
    let object = |name: &str, tag: &str, cpu_name: &str, features: &[&str], ret: i64| {
        let o = dir.path(name);
        let prefix = if tag.is_empty() {
            "__tvm_ffi_".to_string()
        } else {
            format!("__kiln_variant_{tag}_")
        };
        let src = format!(
            "#include <stdint.h>\n\
             typedef struct {{ int32_t type_index; uint32_t pad; int64_t v; }} Any;\n\
             int {prefix}which(void* s, const Any* a, int32_t n, Any* r) \
             {{ r->type_index = 1; r->pad = 0; r->v = {ret}; return 0; }}\n\
             __attribute__((section(\".kiln_target\"), used, aligned(64))) \
             static const char record[] = \"{}\";\n",
            record(tag, cpu_name, features)
        );
        cc(&o, &src, &["-c", "-fPIC", "-O1"]);
        o
    };
    let a = object("a.o", "", "base", &[], 1);
    let b = object("b.o", "v1", "host", &host, 2);
    let lib = dir.path("linked.so");
    let out = std::process::Command::new("cc")
        .args(["-shared", "-o"])
        .args([&lib, &a, &b])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bytes = kiln_runtime::module::elf::section_of_file(&lib, ".kiln_target")
        .unwrap()
        .unwrap();
    let first_len = record("", "base", &[]).replace("\\n", "\n").len() + 1;
    let second = first_len.next_multiple_of(64);
    assert!(
        second > first_len
            && bytes[first_len..second].iter().all(|&b| b == 0)
            && bytes[second..].starts_with(b"format="),
        "the second record starts at byte {second}, after zero padding"
    );
    let m = load_module(&lib).unwrap();
    let node = m.downcast_node::<LibraryModule>().unwrap();
    assert_eq!(node.target_records().len(), 2);
    assert_eq!(node.chosen_variant(), Some(1));
    assert_eq!(m.function("which").unwrap().invoke::<i64>(()).unwrap(), 2);
}

#[test]
fn a_library_none_of_whose_variants_runs_names_each_on_its_own_line() {
    if !host_lacks_foreign() {
        return;
    }
    let dir = Scratch::new("none_runs");
    let marker = dir.path("ran");
    let lib = library(
        &dir,
        "two.so",
        &[
            record("", "sapphirerapids", FOREIGN),
            record(
                "v1",
                "graniterapids",
                &["amx-int8", "amx-tile", "avx512fp16"],
            ),
        ],
        true,
        &marker,
    );
    let e = load_module(&lib).unwrap_err();
    let m = e.message();
    assert_eq!(e.kind(), "RuntimeError", "{m}");
    let lines: Vec<&str> = m.lines().collect();
    assert_eq!(lines.len(), 3, "a head line and one per variant: {m}");
    assert!(
        lines[0].contains(&lib.display().to_string()) && lines[0].contains("2 code variants"),
        "{m}"
    );
    assert!(
        lines[1].contains("`default`") && lines[1].contains("sapphirerapids"),
        "{m}"
    );
    assert!(
        lines[2].contains("`v1`") && lines[2].contains("graniterapids"),
        "{m}"
    );
    assert!(lines[2].contains("amx-int8, amx-tile, avx512fp16"), "{m}");
    assert!(!marker.exists(), "the library's constructor ran");
}

#[test]
fn the_chosen_variant_is_what_the_module_api_and_the_global_report() {
    let dir = Scratch::new("api");
    let marker = dir.path("ran");
    let host: Vec<&str> = cpu::host_features().iter().copied().collect();
    let lib = library(
        &dir,
        "api.so",
        &[record("", "base", &[]), record("v1", "rich", &host)],
        true,
        &marker,
    );
    let m = load_module(&lib).unwrap();
    let node = m.downcast_node::<LibraryModule>().unwrap();
    assert_eq!(node.target_records().len(), 2);
    assert_eq!(node.chosen_variant(), Some(1));
    assert!(m.implements_function("which", false));
    // The listing keeps the default variant's names.
    assert_eq!(node.function_names(), ["which"]);
    let global = kiln_ffi::registry::get_required("runtime.ModuleTargetRecords").unwrap();
    let recs: Array = global.invoke((m.clone(),)).unwrap();
    assert_eq!(recs.len(), 2);
    let field = |i: usize, k: &str| -> String {
        let map: Map = recs.get(i).unwrap().try_as().unwrap();
        map.get(k).unwrap().try_as().unwrap()
    };
    assert_eq!(field(0, "variant"), "");
    assert_eq!(field(0, "chosen"), "0");
    assert_eq!(field(1, "variant"), "v1");
    assert_eq!(field(1, "cpu"), "rich");
    assert_eq!(field(1, "chosen"), "1");
    assert_eq!(field(1, "features"), host.join(","));
    assert_eq!(field(1, "target"), "llvm -mcpu=rich");
    assert!(field(1, "triple").starts_with(std::env::consts::ARCH));
}

#[test]
fn a_library_without_records_loads_as_before() {
    let dir = Scratch::new("plain");
    let marker = dir.path("ran");
    let lib = library(&dir, "plain.so", &[], true, &marker);
    let m = load_module(&lib).unwrap();
    assert!(marker.exists(), "the constructor ran once loaded");
    // No records: the default functions run although a tagged variant exists.
    assert_eq!(m.function("which").unwrap().invoke::<i64>(()).unwrap(), 1);
    let node = m.downcast_node::<LibraryModule>().unwrap();
    assert!(node.target_records().is_empty());
    assert_eq!(node.chosen_variant(), None);
    assert!(library_target_records(&m).is_empty());
    let global = kiln_ffi::registry::get_required("runtime.ModuleTargetRecords").unwrap();
    assert_eq!(global.invoke::<Array>((m,)).unwrap().len(), 0);
}

#[test]
fn a_record_without_a_target_line_and_a_huge_section_are_errors() {
    let dir = Scratch::new("bad_sections");
    let marker = dir.path("ran");
    let good = record("", "base", &["sse2"]);
    let lib = library(
        &dir,
        "notarget.so",
        &[
            good.clone(),
            "format=kiln-target-1\\nvariant=\\ntriple=x86_64\\ncpu=c\\nfeatures=".to_string(),
        ],
        false,
        &marker,
    );
    let e = load_module(&lib).unwrap_err();
    let m = e.message();
    // The second record starts right after the first one's NUL (or after alignment padding).
    assert!(m.contains("no `target`") && m.contains("byte "), "{m}");
    assert!(
        !m.contains("byte 0:"),
        "the offset is the second record's: {m}"
    );
    assert!(!marker.exists(), "code ran");
    // A section of 2 MiB is refused by size, before anything is parsed.
    let src = format!(
        "__attribute__((section(\".kiln_target\"), used)) static const char big[{}] = \
         {{'f'}};\nint __tvm_ffi_f(void) {{ return 0; }}\n\
         __attribute__((constructor)) static void ran(void) {{ \
         fclose(fopen(\"{}\", \"w\")); }}\n",
        2 << 20,
        marker.display()
    );
    let src = format!("#include <stdio.h>\n{src}");
    let lib = dir.path("huge.so");
    cc_shared(&lib, &src);
    let e = load_module(&lib).unwrap_err();
    let m = e.message();
    assert!(
        m.contains(&lib.display().to_string()) && m.contains("more than") && m.contains("byte "),
        "{m}"
    );
    assert!(!marker.exists(), "code ran");
}

/// Loads the library named by `KILN_TEST_LOAD` when set (run as a child process by
/// [`kiln_log_debug_names_the_chosen_variant`]); does nothing otherwise.
#[test]
fn load_the_library_named_in_the_environment() {
    if let Ok(path) = std::env::var("KILN_TEST_LOAD") {
        load_module(&path).unwrap();
    }
}

#[test]
fn kiln_log_debug_names_the_chosen_variant() {
    let dir = Scratch::new("log");
    let marker = dir.path("ran");
    let host: Vec<&str> = cpu::host_features().iter().copied().collect();
    let lib = library(
        &dir,
        "log.so",
        &[record("", "base", &[]), record("v1", "rich", &host)],
        true,
        &marker,
    );
    let run = |log: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "load_the_library_named_in_the_environment",
                "--exact",
                "--nocapture",
            ])
            .env("KILN_TEST_LOAD", &lib)
            .env("KILN_LOG", log)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("info,debug");
    let line = err
        .lines()
        .find(|l| l.starts_with("kiln: "))
        .unwrap_or_else(|| panic!("no log line in {err}"));
    assert!(
        line.contains(&lib.display().to_string()) && line.contains("`v1`") && line.contains("rich"),
        "{line}"
    );
    assert!(!run("").contains("kiln: "), "quiet without KILN_LOG");
}

/// Median of `times` (microseconds).
fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

#[test]
fn the_check_costs_microseconds() {
    let dir = Scratch::new("cost");
    let marker = dir.path("ran");
    let have: Vec<&str> = cpu::host_features().iter().copied().collect();
    let lib = library(
        &dir,
        "cost.so",
        &[record("", "base", &[]), record("v1", "host", &have)],
        true,
        &marker,
    );
    // What the loader does before dlopen: read the records from the file, choose a variant
    // (the host's features detected anew each time here, as on a process's first load; later
    // loads find them cached).
    let runs = 1000;
    let check = |detect: bool| {
        let t = std::time::Instant::now();
        if detect {
            std::hint::black_box(cpu::detect_features());
        }
        let bytes = kiln_runtime::module::elf::section_of_file(&lib, ".kiln_target")
            .unwrap()
            .unwrap();
        let records = parse_section(&bytes).unwrap();
        assert_eq!(select(&records), Ok(1));
        t.elapsed().as_secs_f64() * 1e6
    };
    let first = median((0..runs).map(|_| check(true)).collect());
    let later = median((0..runs).map(|_| check(false)).collect());
    let detect = median(
        (0..runs)
            .map(|_| {
                let t = std::time::Instant::now();
                std::hint::black_box(cpu::detect_features());
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect(),
    );
    eprintln!(
        "target record check ({}): median {first:.1} us with feature detection, {later:.1} us \
         with the features cached, detection alone {detect:.1} us ({runs} runs each)",
        cpu::host_cpu_brand()
    );
    assert!(first < 5_000.0, "the check took {first} us");
}
