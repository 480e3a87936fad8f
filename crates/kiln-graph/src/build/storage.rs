//! The storage plan of the graph codegen (TVM's `GraphPlanMemory`): one storage id per entry,
//! with entries whose lifetimes do not overlap sharing one buffer.
//!
//! Nodes are visited in topological order. An operator's outputs get storage first (a free
//! buffer of the same dtype whose size is within a factor of [`MATCH_RANGE`] of the request,
//! the smallest that fits, else the largest that does not, which the executor grows; else a new
//! one); then each input whose last reader this is goes back to the free list. Graph inputs,
//! params and graph outputs are never freed, so never shared. A view node's output (a reshape
//! that runs no kernel) takes its input's buffer, which is free only when the readers of both
//! are done.

use kiln_ffi::DataType;

/// Buffers are reused for requests between `size / MATCH_RANGE` and `size * MATCH_RANGE`
/// bytes (TVM's `match_range`).
pub const MATCH_RANGE: usize = 16;

/// What the plan needs to know of one node.
pub struct PlanNode {
    /// `null` node (graph input or param).
    pub is_input: bool,
    /// The entries this node reads.
    pub inputs: Vec<usize>,
    /// Its output entries (consecutive ids).
    pub outputs: Vec<usize>,
    /// For a view node: the input entry whose buffer its one output shares.
    pub alias: Option<usize>,
}

/// One free buffer.
struct Free {
    id: usize,
    bytes: usize,
    dtype: DataType,
    device: i32,
}

/// Storage ids for `num_entries` entries of `bytes` and `dtypes`, for `nodes` in topological
/// order; `heads` are the graph outputs.
pub fn plan_storage(
    nodes: &[PlanNode],
    bytes: &[usize],
    dtypes: &[DataType],
    heads: &[usize],
) -> Vec<usize> {
    plan_storage_on(nodes, bytes, dtypes, &vec![0; bytes.len()], heads)
}

/// [`plan_storage`] for entries on several devices: `devices` holds each entry's DLPack device
/// type, and entries of different devices never share a buffer.
pub fn plan_storage_on(
    nodes: &[PlanNode],
    bytes: &[usize],
    dtypes: &[DataType],
    devices: &[i32],
    heads: &[usize],
) -> Vec<usize> {
    let n = bytes.len();
    let mut refs = vec![0usize; n];
    for node in nodes {
        for &e in &node.inputs {
            refs[e] += 1;
        }
    }
    let mut pinned = vec![false; n];
    for &h in heads {
        pinned[h] = true;
    }
    let mut ids = vec![usize::MAX; n];
    let mut sizes: Vec<usize> = Vec::new();
    // Per buffer: reads still to come, and whether it is never freed.
    let mut users: Vec<usize> = Vec::new();
    let mut kept: Vec<bool> = Vec::new();
    let mut free: Vec<Free> = Vec::new();
    for node in nodes {
        for &e in &node.outputs {
            if node.is_input {
                pinned[e] = true;
            }
            if let Some(a) = node.alias {
                ids[e] = ids[a];
                users[ids[a]] += refs[e];
                kept[ids[a]] |= pinned[e];
                continue;
            }
            let want = bytes[e].max(1);
            let candidates = free.iter().enumerate().filter(|(_, f)| {
                f.dtype == dtypes[e]
                    && f.device == devices[e]
                    && f.bytes.saturating_mul(MATCH_RANGE) >= want
                    && f.bytes <= want.saturating_mul(MATCH_RANGE)
            });
            let fitting = candidates
                .clone()
                .filter(|(_, f)| f.bytes >= want)
                .min_by_key(|(_, f)| f.bytes)
                .map(|(i, _)| i);
            let pick = fitting.or_else(|| candidates.max_by_key(|(_, f)| f.bytes).map(|(i, _)| i));
            let id = match pick {
                Some(k) if !pinned[e] => {
                    let f = free.swap_remove(k);
                    sizes[f.id] = sizes[f.id].max(want);
                    f.id
                }
                _ => {
                    sizes.push(want);
                    users.push(0);
                    kept.push(false);
                    sizes.len() - 1
                }
            };
            ids[e] = id;
            users[id] = refs[e];
            kept[id] = pinned[e];
        }
        for &e in &node.inputs {
            users[ids[e]] -= 1;
        }
        // Inputs whose last reader this is, and outputs nobody reads (and that are not graph
        // outputs), are free now.
        for &e in node.inputs.iter().chain(&node.outputs) {
            let id = ids[e];
            if users[id] == 0 && !kept[id] {
                // On the free list now: not released twice.
                kept[id] = true;
                free.push(Free {
                    id,
                    bytes: sizes[id],
                    dtype: dtypes[e],
                    device: devices[e],
                });
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(inputs: &[usize], out: usize) -> PlanNode {
        PlanNode {
            is_input: false,
            inputs: inputs.to_vec(),
            outputs: vec![out],
            alias: None,
        }
    }

    /// An input and four nodes, each reading the previous entry.
    fn chain() -> Vec<PlanNode> {
        let input = PlanNode {
            is_input: true,
            inputs: vec![],
            outputs: vec![0],
            alias: None,
        };
        vec![input, op(&[0], 1), op(&[1], 2), op(&[2], 3), op(&[3], 4)]
    }

    #[test]
    fn a_chain_ping_pongs_between_two_buffers() {
        let f = DataType::float(32);
        let nodes = chain();
        let ids = plan_storage(&nodes, &[64; 5], &[f; 5], &[4]);
        assert_eq!(ids[1], ids[3], "{ids:?}");
        assert_ne!(ids[1], ids[2]);
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "input, two temporaries, output: {ids:?}");
        assert_ne!(ids[4], ids[1]);
        assert_ne!(ids[4], ids[2]);
    }

    #[test]
    fn entries_of_two_devices_do_not_share() {
        let f = DataType::float(32);
        let nodes = chain();
        let ids = plan_storage_on(&nodes, &[64; 5], &[f; 5], &[4, 4, 1, 4, 4], &[4]);
        assert_ne!(
            ids[3], ids[2],
            "a host entry is not reused on the device: {ids:?}"
        );
        assert_eq!(ids[3], ids[1], "device entries still share: {ids:?}");
    }

    #[test]
    fn other_dtypes_and_far_sizes_do_not_share() {
        let f = DataType::float(32);
        let i = DataType::int(32);
        let nodes = chain();
        let ids = plan_storage(&nodes, &[64, 64, 64, 64 * 1024, 64], &[f, f, i, f, f], &[4]);
        assert_ne!(ids[3], ids[1], "64 KiB does not reuse 64 B: {ids:?}");
        assert_ne!(ids[2], ids[0]);
    }

    #[test]
    fn a_view_shares_its_input_buffer_until_both_are_read() {
        let f = DataType::float(32);
        // 1 = op(0); 2 = view(1); 3 = op(2); 4 = op(1, 3): entry 1 is read after the view's
        // reader, so nothing may take its buffer before node 4.
        let mut nodes = chain();
        nodes[2].alias = Some(1);
        nodes[4] = op(&[1, 3], 4);
        let ids = plan_storage(&nodes, &[64; 5], &[f; 5], &[4]);
        assert_eq!(ids[2], ids[1], "{ids:?}");
        assert_ne!(ids[3], ids[1], "the view's buffer is still in use: {ids:?}");
        // Without the late reader, the buffer is free once the view's reader is done.
        let mut nodes = chain();
        nodes[2].alias = Some(1);
        let ids = plan_storage(&nodes, &[64; 5], &[f; 5], &[4]);
        assert_eq!(ids[2], ids[1]);
        assert_ne!(
            ids[3], ids[1],
            "node 3 reads the view while writing: {ids:?}"
        );
    }
}
