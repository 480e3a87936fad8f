//! `kiln tune`: [`kiln::tune::tune`] with a progress bar, one line per tuned layer.

use indicatif::{ProgressBar, ProgressStyle};
use kiln::tune::{Event, TuneOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use kiln::tune::{load_records, runner};

/// The options of `kiln tune`.
pub struct TuneArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// `--input-shape` flags.
    pub input_shapes: Vec<String>,
    /// `--dim` flags (`seq=16,64`): the layers of every shape the library will hold.
    pub dims: Vec<String>,
    /// The records file, target, runs and runner.
    pub options: TuneOptions,
}

/// Runs `kiln tune`.
pub fn run(args: TuneArgs) -> Result<(), String> {
    let mut opts = args.options;
    opts.input_shapes = kiln_onnx::parse_input_shape_flags(&args.input_shapes)
        .map_err(|e| format!("bad --input-shape: {e}"))?;
    opts.dims = kiln_onnx::parse_dim_flags(&args.dims).map_err(|e| format!("bad --dim: {e}"))?;
    let model = kiln_onnx::load_model(&args.model).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:20} {pos}/{len} {msg}")
            .expect("a valid progress template"),
    );
    let say = |line: String| {
        if pb.is_hidden() {
            println!("{line}");
        } else {
            pb.println(line);
        }
    };
    let result = kiln::tune::tune(&model, &opts, &mut |event| match event {
        Event::Start {
            layers,
            tuned_before,
            cpu,
        } => {
            println!(
                "{}: {layers} distinct layers, {tuned_before} already tuned, {} to tune ({cpu})",
                args.model.display(),
                layers - tuned_before
            );
            pb.set_length((layers - tuned_before) as u64);
            pb.enable_steady_tick(Duration::from_millis(120));
            Ok(())
        }
        Event::Layer(signature) => {
            pb.set_message(signature.chars().take(60).collect::<String>());
            Ok(())
        }
        Event::Tuned(r) => {
            say(format!(
                "{:.3} ms -> {:.3} ms ({:.2}x)  {}",
                r.heuristic_ms,
                r.ms,
                r.heuristic_ms / r.ms,
                r.signature
            ));
            pb.inc(1);
            Ok(())
        }
    });
    pb.finish_and_clear();
    result?;
    println!(
        "{} written in {:.1} s",
        opts.records.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
