//! Timing for the micro-benchmarks.

use std::time::Instant;

/// Nanoseconds per call of `body`: `warmup` calls first, then the median over `runs` runs of
/// `n` calls each.
pub fn median_ns(n: usize, runs: usize, warmup: usize, mut body: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        body();
    }
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                body();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    times[runs / 2]
}
