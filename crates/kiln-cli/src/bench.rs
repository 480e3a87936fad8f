//! `kiln bench`: time a compiled model's whole-graph run (median, min and max over repeats of
//! `number` runs each, after a warm-up run) at the thread count of `KILN_NUM_THREADS`, and with
//! `--profile` print the executor's per-node table.

use crate::run::{create_executor, load_factory, lock, set_inputs};
use std::path::PathBuf;
use std::time::Instant;

/// The options of `kiln bench`.
pub struct BenchArgs {
    /// The compiled library.
    pub library: PathBuf,
    /// Measurements.
    pub repeat: u32,
    /// Runs per measurement.
    pub number: u32,
    /// Also print the per-node table.
    pub profile: bool,
    /// `--input name=file.npy` flags.
    pub inputs: Vec<String>,
}

/// Median, min and max of `v` (not empty).
pub fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (median, s[0], s[n - 1])
}

/// Milliseconds per run of `exec`: `repeat` measurements of `number` runs each, after
/// `warmup` runs, each ended by `sync` (which waits for a device).
pub fn time_runs(
    exec: &mut dyn kiln_runtime::executor::Executor,
    warmup: u32,
    repeat: u32,
    number: u32,
    sync: impl Fn() -> Result<(), String>,
) -> Result<Vec<f64>, String> {
    for _ in 0..warmup {
        exec.run()
            .map_err(|e| format!("the warm-up run failed: {e}"))?;
    }
    sync()?;
    let mut ms = Vec::with_capacity(repeat as usize);
    for _ in 0..repeat {
        let t = Instant::now();
        for _ in 0..number {
            exec.run().map_err(|e| format!("the run failed: {e}"))?;
        }
        sync()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3 / number.max(1) as f64);
    }
    Ok(ms)
}

/// Runs `kiln bench`.
pub fn run(args: &BenchArgs) -> Result<(), String> {
    if args.repeat == 0 || args.number == 0 {
        return Err(format!(
            "--repeat and --number must be at least 1 (got {} and {})",
            args.repeat, args.number
        ));
    }
    let factory = load_factory(&args.library)?;
    let exec_module = create_executor(&factory)?;
    let mut exec = lock(&exec_module);
    let given = args
        .inputs
        .iter()
        .map(|f| crate::run::parse_input_flag(f))
        .collect::<Result<Vec<_>, _>>()?;
    set_inputs(&factory, &mut *exec, &given, Some(0))?;
    // Kernels on a device run asynchronously: each measurement ends when the device is done.
    let dev = crate::run::library_device(&factory);
    let sync = || -> Result<(), String> {
        let api = kiln_runtime::device::device_api(dev).map_err(|e| e.to_string())?;
        // SAFETY: NULL is the default stream of every device.
        unsafe { api.stream_sync(dev, std::ptr::null_mut()) }
            .map_err(|e| format!("synchronizing {dev} failed: {e}"))
    };
    let ms = time_runs(&mut *exec, 1, args.repeat, args.number, sync)?;
    let (median, min, max) = stats(&ms);
    println!(
        "{}: {} threads, {} x {} runs",
        args.library.display(),
        kiln_runtime::thread_pool::num_threads(),
        args.repeat,
        args.number
    );
    println!("median {median:.4} ms   min {min:.4} ms   max {max:.4} ms");
    if args.profile {
        let crate::run::Locked::Graph(g) = &mut exec else {
            return Err(
                "--profile times the nodes of a static graph; this library runs on the \
                 virtual machine (control flow decided at run time)"
                    .into(),
            );
        };
        let p = g
            .profile(args.number, args.repeat, 0)
            .map_err(|e| format!("profiling failed: {e}"))?;
        println!("\n{p}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn stats() {
        assert_eq!(super::stats(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(super::stats(&[4.0, 1.0]), (2.5, 1.0, 4.0));
    }
}
