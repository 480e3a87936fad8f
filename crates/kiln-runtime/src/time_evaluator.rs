//! The time evaluator (TVM's `time_evaluator`): wraps a function into one that runs it
//! repeatedly and returns how long each run took.
//!
//! The evaluator takes the function's own arguments. It calls the function once to warm up, then
//! for each of `repeat` measurements runs it `number` times between two device synchronisations;
//! while a measurement is shorter than `min_repeat_ms`, `number` grows (to what the last timing
//! suggests, at least by the golden ratio, as TVM does) and the measurement is taken again. The
//! result is TVM's format: `repeat` native-endian `f64` mean seconds per call, as `bytes`.

use crate::module::Module;
use kiln_ffi::{
    register_global, register_global_packed, Any, AnyView, Bytes, Device, Error, Function, Result,
};
use std::time::{Duration, Instant};

/// How a time evaluator measures (TVM's parameters, same defaults as its Python API).
#[derive(Clone, Debug)]
pub struct TimeEvaluatorOptions {
    /// Calls per measurement (grown to reach `min_repeat_ms`).
    pub number: u32,
    /// Number of measurements returned.
    pub repeat: u32,
    /// Minimum duration of one measurement, in milliseconds (0: no minimum).
    pub min_repeat_ms: u32,
    /// Measurements of exactly zero nanoseconds allowed before giving up on `min_repeat_ms`.
    pub limit_zero_time_iterations: u32,
    /// Pause after every `repeats_to_cooldown` measurements, in milliseconds.
    pub cooldown_interval_ms: u32,
    /// See `cooldown_interval_ms`.
    pub repeats_to_cooldown: u32,
    /// Bytes of memory to write before each measurement to flush the caches (0: none).
    pub cache_flush_bytes: usize,
}

impl Default for TimeEvaluatorOptions {
    fn default() -> Self {
        TimeEvaluatorOptions {
            number: 10,
            repeat: 1,
            min_repeat_ms: 0,
            limit_zero_time_iterations: 100,
            cooldown_interval_ms: 0,
            repeats_to_cooldown: 1,
            cache_flush_bytes: 0,
        }
    }
}

fn sync(device: Device) -> Result<()> {
    let api = crate::device::device_api(device)?;
    // SAFETY: NULL is the default stream of every device.
    unsafe { api.stream_sync(device, std::ptr::null_mut()) }
}

/// Measures `f` on `args`: `repeat` mean times per call, in seconds.
pub fn measure(
    f: &Function,
    args: &[AnyView<'_>],
    device: Device,
    options: &TimeEvaluatorOptions,
    preproc: Option<&Function>,
) -> Result<Vec<f64>> {
    if options.number == 0 || options.repeat == 0 {
        return Err(Error::value_error(format!(
            "time_evaluator needs number >= 1 and repeat >= 1 (got number={}, repeat={})",
            options.number, options.repeat
        )));
    }
    f.call(args)
        .map_err(|e| e.context("time_evaluator warm-up call"))?;
    sync(device)?;
    let mut flush = vec![0u8; options.cache_flush_bytes];
    let mut number = options.number as u64;
    let min_ms = options.min_repeat_ms as f64;
    let mut out = Vec::with_capacity(options.repeat as usize);
    for i in 0..options.repeat {
        if let Some(p) = preproc {
            p.call(args)
                .map_err(|e| e.context("time_evaluator preproc"))?;
        }
        if !flush.is_empty() {
            // A write the optimiser cannot drop evicts the caches.
            flush.iter_mut().for_each(|b| *b = b.wrapping_add(1));
            std::hint::black_box(&flush);
        }
        let mut duration_ms = 0.0f64;
        let mut zero_times = 0;
        loop {
            if duration_ms > 0.0 {
                let per_call = duration_ms / number as f64;
                number = ((min_ms / per_call + 1.0).max(number as f64 * 1.618)) as u64;
            }
            let start = Instant::now();
            for _ in 0..number {
                f.call(args)?;
            }
            sync(device)?;
            let nanos = start.elapsed().as_nanos();
            if nanos == 0 {
                zero_times += 1;
            }
            duration_ms = nanos as f64 / 1e6;
            if duration_ms >= min_ms || zero_times >= options.limit_zero_time_iterations {
                break;
            }
        }
        out.push(duration_ms / 1e3 / number as f64);
        if options.cooldown_interval_ms > 0
            && options.repeats_to_cooldown > 0
            && i % options.repeats_to_cooldown == 0
        {
            std::thread::sleep(Duration::from_millis(options.cooldown_interval_ms as u64));
        }
    }
    Ok(out)
}

/// Packs times as TVM does: native-endian `f64`s back to back.
pub fn times_to_bytes(times: &[f64]) -> Vec<u8> {
    times.iter().flat_map(|t| t.to_ne_bytes()).collect()
}

/// A function that takes `f`'s arguments and returns the measured times (see the module docs).
pub fn time_evaluator(
    f: Function,
    device: Device,
    options: TimeEvaluatorOptions,
    preproc: Option<Function>,
) -> Function {
    Function::from_packed(move |args| {
        let times = measure(&f, args, device, &options, preproc.as_ref())?;
        Ok(Bytes::from_bytes(&times_to_bytes(&times)).into())
    })
}

/// A time evaluator for the function `name` of `module` (searching its imports).
pub fn module_time_evaluator(
    module: &Module,
    name: &str,
    device: Device,
    options: TimeEvaluatorOptions,
) -> Result<Function> {
    Ok(time_evaluator(
        module.function(name)?,
        device,
        options,
        None,
    ))
}

fn u32_arg(args: &[AnyView<'_>], i: usize, what: &str) -> Result<u32> {
    args.get(i)
        .ok_or_else(|| Error::type_error(format!("runtime.RPCTimeEvaluator: missing `{what}`")))?
        .try_as::<u32>()
        .map_err(|e| e.context(format!("runtime.RPCTimeEvaluator argument `{what}`")))
}

// TVM's signature: (mod or None, name, dev_type, dev_id, number, repeat, min_repeat_ms,
// limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown, cache_flush_bytes,
// f_preproc name); with no module, `name` is a global function.
register_global_packed!(
    "runtime.RPCTimeEvaluator",
    |args: &[AnyView<'_>]| -> Result<Any> {
        if args.len() < 7 {
            return Err(Error::type_error(format!(
                "runtime.RPCTimeEvaluator takes at least 7 arguments, got {}",
                args.len()
            )));
        }
        let module: Option<Module> = args[0].try_as()?;
        let name: String = args[1].try_as()?;
        let device = Device::new(args[2].try_as()?, args[3].try_as()?);
        let mut options = TimeEvaluatorOptions {
            number: u32_arg(args, 4, "number")?,
            repeat: u32_arg(args, 5, "repeat")?,
            min_repeat_ms: u32_arg(args, 6, "min_repeat_ms")?,
            ..Default::default()
        };
        if args.len() > 7 {
            options.limit_zero_time_iterations = u32_arg(args, 7, "limit_zero_time_iterations")?;
        }
        if args.len() > 8 {
            options.cooldown_interval_ms = u32_arg(args, 8, "cooldown_interval_ms")?;
        }
        if args.len() > 9 {
            options.repeats_to_cooldown = u32_arg(args, 9, "repeats_to_cooldown")?;
        }
        if args.len() > 10 {
            options.cache_flush_bytes = u32_arg(args, 10, "cache_flush_bytes")? as usize;
        }
        let preproc = match args.get(11).map(|a| a.try_as::<String>()).transpose()? {
            Some(p) if !p.is_empty() => Some(kiln_ffi::registry::get_required(&p)?),
            _ => None,
        };
        let f = match module {
            Some(m) => m.function(&name)?,
            None => kiln_ffi::registry::get_required(&name)?,
        };
        Ok(time_evaluator(f, device, options, preproc).into())
    }
);

register_global!(
    "runtime.FunctionTimeEvaluator",
    |f: Function, device: Device, number: u32, repeat: u32, min_repeat_ms: u32| {
        time_evaluator(
            f,
            device,
            TimeEvaluatorOptions {
                number,
                repeat,
                min_repeat_ms,
                ..Default::default()
            },
            None,
        )
    }
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn returns_repeat_times_and_grows_number_to_reach_the_minimum() {
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        let f = Function::from_typed(move |x: i64| {
            c.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(200));
            x
        });
        let options = TimeEvaluatorOptions {
            number: 1,
            repeat: 3,
            min_repeat_ms: 5,
            ..Default::default()
        };
        let eval = time_evaluator(f, Device::cpu(0), options, None);
        let out: Bytes = eval.invoke((7i64,)).unwrap();
        let times: Vec<f64> = out
            .as_bytes()
            .chunks(8)
            .map(|b| f64::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(times.len(), 3);
        for t in &times {
            assert!(*t >= 150e-6 && *t < 50e-3, "{t}");
        }
        // 5 ms at ~0.2 ms per call needs more than one call per measurement.
        assert!(calls.load(Ordering::Relaxed) > 3 * 5);
    }

    #[test]
    fn errors_from_the_function_come_back() {
        let f = Function::from_typed(|| -> Result<i64> { Err(Error::value_error("nope")) });
        let eval = time_evaluator(f, Device::cpu(0), TimeEvaluatorOptions::default(), None);
        let e = eval.invoke::<Bytes>(()).unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("nope"));
        let g = Function::from_typed(|| 1i64);
        let bad = TimeEvaluatorOptions {
            repeat: 0,
            ..Default::default()
        };
        let e = time_evaluator(g, Device::cpu(0), bad, None)
            .invoke::<Bytes>(())
            .unwrap_err();
        assert!(e.message().contains("repeat"));
    }
}
