//! The executor's debug mode: time every node (TVM's debug executor `run_individual` and
//! `profile`) and print a table of node name, function, time and share of the total.
//!
//! Nodes are timed in graph order, each run alone between two clock reads (and a device
//! synchronisation on devices that are not the host), `number` sweeps per measurement; while a
//! measurement is shorter than `min_repeat_ms`, `number` grows as in the time evaluator. The
//! time of a node is the mean over `repeat` measurements.

use super::executor::GraphExecutor;
use crate::device::{device_api, is_host};
use kiln_ffi::{DataType, Error, Result};
use std::fmt;
use std::time::Instant;

/// The time of one node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeTime {
    /// Node index.
    pub node: usize,
    /// Node name.
    pub name: String,
    /// The function it calls.
    pub func_name: String,
    /// Mean seconds per call.
    pub seconds: f64,
    /// Share of the total, in percent.
    pub percent: f64,
    /// Shapes and dtypes of its outputs.
    pub outputs: Vec<(Vec<i64>, DataType)>,
}

/// Per-node times of a graph (see [`GraphExecutor::profile`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// One row per `tvm_op` node, in graph order.
    pub rows: Vec<NodeTime>,
    /// Sum of the node times, in seconds.
    pub total_seconds: f64,
}

impl GraphExecutor {
    /// Times every node (see the module docs): mean seconds per call, by node index (0 for
    /// inputs). `number` and `repeat` must be at least 1.
    pub fn run_individual(
        &mut self,
        number: u32,
        repeat: u32,
        min_repeat_ms: u32,
    ) -> Result<Vec<f64>> {
        if number == 0 || repeat == 0 {
            return Err(Error::value_error(format!(
                "run_individual needs number >= 1 and repeat >= 1 (got number={number}, \
                 repeat={repeat})"
            )));
        }
        self.run()?; // warm-up
        let n = self.ops.len();
        if self.ops.iter().all(Option::is_none) {
            return Ok(vec![0.0; n]);
        }
        let syncs: Vec<Option<kiln_ffi::Device>> = (0..n)
            .map(|nid| {
                self.ops[nid].as_ref()?;
                let node = &self.graph.nodes[nid];
                let eid = if node.num_outputs() > 0 {
                    self.graph.entry_id(nid, 0)
                } else {
                    self.graph.entry_of(node.inputs.first()?)
                };
                let dev = self.entry_device(eid);
                (!is_host(dev)).then_some(dev)
            })
            .collect();
        let mut total = vec![0.0f64; n];
        let mut number = number as u64;
        for _ in 0..repeat {
            let mut sweep;
            let mut duration_ms = 0.0f64;
            loop {
                if duration_ms > 0.0 {
                    let per = duration_ms / number as f64;
                    number = ((min_repeat_ms as f64 / per + 1.0).max(number as f64 * 1.618)) as u64;
                }
                sweep = vec![0.0f64; n];
                let start = Instant::now();
                for _ in 0..number {
                    for (nid, t) in sweep.iter_mut().enumerate() {
                        if self.ops[nid].is_none() {
                            continue;
                        }
                        let t0 = Instant::now();
                        self.run_node(nid)?;
                        if let Some(dev) = syncs[nid] {
                            // SAFETY: NULL is the default stream of every device.
                            unsafe { device_api(dev)?.stream_sync(dev, std::ptr::null_mut())? };
                        }
                        *t += t0.elapsed().as_secs_f64();
                    }
                }
                duration_ms = start.elapsed().as_secs_f64() * 1e3;
                if duration_ms >= min_repeat_ms as f64 {
                    break;
                }
            }
            for (acc, t) in total.iter_mut().zip(&sweep) {
                *acc += t / number as f64;
            }
        }
        Ok(total.into_iter().map(|t| t / repeat as f64).collect())
    }

    /// Times every node (see [`run_individual`](Self::run_individual)) and returns a
    /// [`Profile`], whose `Display` is a table.
    pub fn profile(&mut self, number: u32, repeat: u32, min_repeat_ms: u32) -> Result<Profile> {
        let times = self.run_individual(number, repeat, min_repeat_ms)?;
        let total_seconds: f64 = times.iter().sum();
        let graph = self.graph.clone();
        let rows = graph
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(nid, node)| {
                let param = node.param.as_ref()?;
                self.ops[nid].as_ref()?;
                Some(NodeTime {
                    node: nid,
                    name: node.name.clone(),
                    func_name: param.func_name.clone(),
                    seconds: times[nid],
                    percent: if total_seconds > 0.0 {
                        100.0 * times[nid] / total_seconds
                    } else {
                        0.0
                    },
                    outputs: (0..param.num_outputs)
                        .map(|k| {
                            let eid = graph.entry_id(nid, k);
                            (graph.shapes[eid].clone(), graph.dtypes[eid])
                        })
                        .collect(),
                })
            })
            .collect();
        Ok(Profile {
            rows,
            total_seconds,
        })
    }
}

/// `value` with `decimals` decimals, formatted with integer arithmetic (float formatting would
/// add about 15 KB to the deployable runtime for this one table).
fn fixed(value: f64, decimals: u32) -> String {
    let scale = 10u64.pow(decimals);
    let scaled = (value.max(0.0) * scale as f64).round() as u64;
    format!(
        "{}.{:0width$}",
        scaled / scale,
        scaled % scale,
        width = decimals as usize
    )
}

impl fmt::Display for Profile {
    /// A table sorted by time, slowest first, with a total line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Slowest first; an insertion sort (few rows), which keeps the deployable runtime free
        // of the standard library's sort.
        let mut rows: Vec<&NodeTime> = Vec::with_capacity(self.rows.len());
        for r in &self.rows {
            let at = rows
                .iter()
                .position(|q| q.seconds < r.seconds)
                .unwrap_or(rows.len());
            rows.insert(at, r);
        }
        let shape = |r: &NodeTime| {
            r.outputs
                .iter()
                .map(|(s, d)| format!("{s:?} {d}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let name_w = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(9);
        let op_w = rows
            .iter()
            .map(|r| r.func_name.len())
            .max()
            .unwrap_or(0)
            .max(8);
        writeln!(
            f,
            "{:>5}  {:<name_w$}  {:<op_w$}  {:>12}  {:>8}  Output shape",
            "Node", "Node name", "Function", "Time (us)", "Time (%)"
        )?;
        for r in &rows {
            writeln!(
                f,
                "{:>5}  {:<name_w$}  {:<op_w$}  {:>12}  {:>8}  {}",
                r.node,
                r.name,
                r.func_name,
                fixed(r.seconds * 1e6, 3),
                fixed(r.percent, 2),
                shape(r)
            )?;
        }
        writeln!(
            f,
            "{:>5}  {:<name_w$}  {:<op_w$}  {:>12}  {:>8}",
            "",
            "Total",
            "",
            fixed(self.total_seconds * 1e6, 3),
            if self.total_seconds > 0.0 {
                "100.00"
            } else {
                "0.00"
            }
        )
    }
}
