//! The global functions of the tuner (what `kiln.tune` and `kiln.onnx.compile(...,
//! tuning_records=...)` in Python call).
//!
//! `tune.Tune(model_bytes: bytes, records: str, target: str | None, shape_dict: {str: [int]}
//! | None, runs: int, progress: Function | None)` -> `[{"signature": str, "heuristic_ms":
//! float, "ms": float, "records": {workload: {knob: int}}}]`: [`crate::tune`] on this process's
//! CPU for the layers `records` does not hold yet (`target` defaults to `llvm -mcpu=native`,
//! `runs` of at least 1); `progress(done, total, signature)` is called before each layer and
//! once at the end (`signature` empty).
//!
//! `tune.CompileWithRecords(records: str, model_bytes, shape_dict, frozen, target, dims)` ->
//! `onnx.Compile`'s factory module, built with the knobs of `records` for `target`'s CPU (one
//! target; records of another CPU leave the heuristics, as `kiln compile --tuning-records`).

use crate::{Event, Runner, TuneOptions};
use kiln_ffi::{register_global, Any, Array, Bytes, Error, Function, Map, Result};
use std::path::{Path, PathBuf};

/// Links this crate's registrations into the final library (call from `kiln::link_all`).
#[doc(hidden)]
pub fn link_globals() -> *const () {
    link_globals as *const ()
}

/// One layer's report as the map `tune.Tune` returns.
fn report_map(r: &crate::LayerReport) -> Map {
    let records: Map = r
        .records
        .iter()
        .map(|(key, knobs)| {
            let knobs: Map = knobs
                .iter()
                .map(|(k, v)| (Any::from(k.as_str()), Any::from(*v)))
                .collect();
            (Any::from(key.as_str()), Any::from(knobs))
        })
        .collect();
    Map::new([
        (Any::from("signature"), Any::from(r.signature.as_str())),
        (Any::from("heuristic_ms"), Any::from(r.heuristic_ms)),
        (Any::from("ms"), Any::from(r.ms)),
        (Any::from("records"), Any::from(records)),
    ])
}

register_global!("tune.Tune", |model_bytes: Bytes,
                               records: String,
                               target: Option<String>,
                               shape_dict: Option<Map>,
                               runs: i64,
                               progress: Option<Function>|
 -> Result<Array> {
    if runs < 1 {
        return Err(Error::value_error(format!(
            "tune.Tune: runs must be at least 1, got {runs}"
        )));
    }
    let model = kiln_onnx::from_bytes(model_bytes.as_bytes())
        .map_err(|e| Error::value_error(e.to_string()))?;
    let opts = TuneOptions {
        records: PathBuf::from(records),
        target: target.unwrap_or_else(|| "llvm -mcpu=native".to_string()),
        input_shapes: kiln_onnx::input_shapes_arg(shape_dict, "tune.Tune")?,
        dims: Default::default(),
        runs: u32::try_from(runs).unwrap_or(u32::MAX),
        runner: Runner::Local,
    };
    let (mut done, mut total) = (0i64, 0i64);
    let mut failed: Option<Error> = None;
    let mut tell = |done: i64, total: i64, what: &str| -> std::result::Result<(), String> {
        match &progress {
            Some(f) => f
                .call_any(&[Any::from(done), Any::from(total), Any::from(what)])
                .map(drop)
                .map_err(|e| {
                    let msg = e.to_string();
                    failed = Some(e);
                    msg
                }),
            None => Ok(()),
        }
    };
    let tuned = crate::tune(&model, &opts, &mut |event| match event {
        Event::Start {
            layers,
            tuned_before,
            ..
        } => {
            total = (layers - tuned_before) as i64;
            Ok(())
        }
        Event::Layer(signature) => tell(done, total, signature),
        Event::Tuned(_) => {
            done += 1;
            Ok(())
        }
    });
    let reports = match tuned {
        Ok(r) => r,
        // The progress callback's own error, as it raised it.
        Err(_) if failed.is_some() => return Err(failed.take().expect("an error")),
        Err(e) => return Err(Error::value_error(e)),
    };
    if let Err(e) = tell(done, total, "") {
        return Err(failed.take().unwrap_or_else(|| Error::value_error(e)));
    }
    Ok(reports.iter().map(|r| Any::from(report_map(r))).collect())
});

register_global!("tune.CompileWithRecords", |records: String,
                                             model_bytes: Bytes,
                                             shape_dict: Option<Map>,
                                             frozen: Option<Map>,
                                             target: Option<Any>,
                                             dims: Option<Map>|
 -> Result<
    kiln_runtime::module::Module,
> {
    let targets = kiln_codegen::driver::target_list(target.clone())?;
    let [one] = targets.as_slice() else {
        return Err(Error::value_error(format!(
            "tuning records apply to one target, got {}",
            targets.len()
        )));
    };
    let knobs = crate::load_records(Path::new(&records), one).map_err(Error::value_error)?;
    let _scope = kiln_topi::tuning::Scope {
        records: knobs,
        ..Default::default()
    }
    .enter();
    let compile = kiln_ffi::registry::get("onnx.Compile")
        .ok_or_else(|| Error::value_error("onnx.Compile is not registered"))?;
    let opt = |m: Option<Map>| m.map_or_else(|| Any::from(()), Any::from);
    compile
        .call_any(&[
            Any::from(model_bytes),
            opt(shape_dict),
            opt(frozen),
            target.unwrap_or_else(|| Any::from(())),
            opt(dims),
        ])?
        .try_as()
});
