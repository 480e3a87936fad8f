//! The functions a session offers under TVM's names (`tvm.rpc.server.*`), bound to the
//! session's own folder: upload, download, remove, listdir, workpath, load_module, and the
//! module helpers TVM's client calls (`ModuleGetFunction`, `ImportModule`).

use kiln_ffi::{AnyView, Bytes, Error, Function, Result};
use kiln_runtime::module::{load_module, Module};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Checks that `name` stays inside the session folder: a plain file name, no separators, no
/// `..`, not absolute, no NUL.
pub fn checked_name(name: &str) -> Result<&str> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\\')
        || name.contains('\0')
        || name.contains("..")
        || Path::new(name).is_absolute();
    if bad {
        return Err(Error::value_error(format!(
            "refused path `{name}`: remote files are plain names inside the session folder"
        )));
    }
    Ok(name)
}

fn str_arg(args: &[AnyView<'_>], i: usize, f: &str) -> Result<String> {
    args.get(i)
        .ok_or_else(|| Error::type_error(format!("{f}: missing argument {i}")))?
        .try_as::<String>()
}

/// The session's functions by name, bound to `dir`.
pub fn session_functions(dir: &Path) -> HashMap<String, Function> {
    let mut m = HashMap::new();
    let path_of =
        |dir: PathBuf| move |name: &str| -> Result<PathBuf> { Ok(dir.join(checked_name(name)?)) };

    let p = path_of(dir.to_path_buf());
    m.insert(
        "tvm.rpc.server.upload".to_string(),
        Function::from_packed(move |args| {
            let name = str_arg(args, 0, "upload")?;
            let data = args
                .get(1)
                .and_then(|a| a.bytes_bytes().or_else(|| a.str_bytes()))
                .ok_or_else(|| Error::type_error("upload: expected (name, bytes)"))?;
            std::fs::write(p(&name)?, data)
                .map_err(|e| Error::runtime_error(format!("upload of `{name}`: {e}")))?;
            Ok(kiln_ffi::Any::none())
        }),
    );
    let p = path_of(dir.to_path_buf());
    m.insert(
        "tvm.rpc.server.download".to_string(),
        Function::from_packed(move |args| {
            let name = str_arg(args, 0, "download")?;
            let data = std::fs::read(p(&name)?)
                .map_err(|e| Error::runtime_error(format!("download of `{name}`: {e}")))?;
            Ok(Bytes::from_bytes(&data).into())
        }),
    );
    let p = path_of(dir.to_path_buf());
    m.insert(
        "tvm.rpc.server.remove".to_string(),
        Function::from_packed(move |args| {
            let name = str_arg(args, 0, "remove")?;
            std::fs::remove_file(p(&name)?)
                .map_err(|e| Error::runtime_error(format!("remove of `{name}`: {e}")))?;
            Ok(kiln_ffi::Any::none())
        }),
    );
    let d = dir.to_path_buf();
    m.insert(
        "tvm.rpc.server.listdir".to_string(),
        Function::from_packed(move |args| {
            let sub = str_arg(args, 0, "listdir").unwrap_or_default();
            if !(sub.is_empty() || sub == "." || sub == "./") {
                checked_name(&sub)?;
            }
            let mut names: Vec<String> = std::fs::read_dir(&d)
                .map_err(|e| Error::runtime_error(format!("listdir: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            names.sort();
            Ok(names.join(",").into())
        }),
    );
    let p = path_of(dir.to_path_buf());
    m.insert(
        "tvm.rpc.server.workpath".to_string(),
        Function::from_packed(move |args| {
            let name = str_arg(args, 0, "workpath")?;
            Ok(p(&name)?.to_string_lossy().into_owned().into())
        }),
    );
    let p = path_of(dir.to_path_buf());
    m.insert(
        "tvm.rpc.server.load_module".to_string(),
        Function::from_packed(move |args| {
            let name = str_arg(args, 0, "load_module")?;
            Ok(load_module(p(&name)?)?.into())
        }),
    );
    m.insert(
        "tvm.rpc.server.ModuleGetFunction".to_string(),
        Function::from_packed(|args| {
            let m: Module = args
                .first()
                .ok_or_else(|| Error::type_error("ModuleGetFunction: missing module"))?
                .try_as()?;
            let name = str_arg(args, 1, "ModuleGetFunction")?;
            let query = args
                .get(2)
                .map(|a| a.try_as::<bool>())
                .transpose()?
                .unwrap_or(true);
            Ok(m.get_function(&name, query)?.into())
        }),
    );
    m.insert(
        "tvm.rpc.server.ImportModule".to_string(),
        Function::from_packed(|args| {
            if args.len() != 2 {
                return Err(Error::type_error("ImportModule takes (parent, child)"));
            }
            let parent: Module = args[0].try_as()?;
            let child: Module = args[1].try_as()?;
            parent.import(&child)?;
            Ok(kiln_ffi::Any::none())
        }),
    );
    m
}

#[cfg(test)]
mod tests {
    use super::checked_name;

    #[test]
    fn names_that_leave_the_folder_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "/etc/passwd",
            "a\\b",
            "x..y",
            "a\0b",
        ] {
            assert!(checked_name(bad).is_err(), "{bad:?}");
        }
        for good in ["lib.so", "a-b_c.tar", ".hidden"] {
            assert!(checked_name(good).is_ok(), "{good:?}");
        }
    }
}
