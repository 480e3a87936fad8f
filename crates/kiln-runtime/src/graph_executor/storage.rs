//! Memory of a graph executor, as the graph's storage plan says: entries with the same
//! `storage_id` share one buffer (the compiler reuses memory between entries whose lifetimes do
//! not overlap), sized for the largest of them, on the device of its entries.
//!
//! A buffer is one 64-byte aligned `uint8` tensor; every entry is a view of its buffer with the
//! entry's shape and dtype. Sizes count whole bytes per element (`ceil(bits * lanes / 8)`), as
//! TVM does.

use super::graph_json::Graph;
use crate::device::ALLOC_ALIGNMENT;
use crate::tensor::Tensor;
use kiln_ffi::{DataType, Device, Error, Result};
use std::collections::HashMap;

/// Bytes an entry of `shape` and `dtype` needs, or a `ValueError` on overflow.
pub fn entry_bytes(shape: &[i64], dtype: DataType) -> Result<usize> {
    let numel = crate::tensor::layout::checked_numel(shape)?;
    numel.checked_mul(dtype.bytes()).ok_or_else(|| {
        Error::value_error(format!(
            "a tensor of shape {shape:?} and dtype {dtype} does not fit in memory"
        ))
    })
}

/// One buffer of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolEntry {
    /// Bytes needed (the largest entry using it).
    pub bytes: usize,
    /// DLPack device type of its entries.
    pub device_type: i32,
    /// The entries that use it.
    pub entries: Vec<usize>,
}

/// The buffers a graph needs, by storage id (`None`: an id no entry uses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoragePlan {
    /// Indexed by storage id.
    pub pools: Vec<Option<PoolEntry>>,
}

impl StoragePlan {
    /// Computes the plan of `graph`; entries without a `device_index` are on
    /// `default_device_type`. Entries of one storage id on two devices are an error.
    pub fn new(graph: &Graph, default_device_type: i32) -> Result<StoragePlan> {
        let mut pools: Vec<Option<PoolEntry>> = Vec::new();
        for (eid, &sid) in graph.storage_ids.iter().enumerate() {
            let device_type = graph
                .device_types
                .as_ref()
                .map_or(default_device_type, |d| d[eid]);
            let bytes = entry_bytes(&graph.shapes[eid], graph.dtypes[eid])
                .map_err(|e| e.context(format!("graph JSON: {}", graph.entry_owner(eid))))?;
            if sid >= pools.len() {
                pools.resize(sid + 1, None);
            }
            match &mut pools[sid] {
                Some(pool) => {
                    if pool.device_type != device_type {
                        return Err(Error::value_error(format!(
                            "graph JSON: storage id {sid} is used on device type {} by {} and \
                             on device type {device_type} by {}; one storage cannot be on two \
                             devices",
                            pool.device_type,
                            graph.entry_owner(pool.entries[0]),
                            graph.entry_owner(eid)
                        )));
                    }
                    pool.bytes = pool.bytes.max(bytes);
                    pool.entries.push(eid);
                }
                slot @ None => {
                    *slot = Some(PoolEntry {
                        bytes,
                        device_type,
                        entries: vec![eid],
                    })
                }
            }
        }
        Ok(StoragePlan { pools })
    }

    /// Total bytes of all buffers.
    pub fn total_bytes(&self) -> usize {
        self.pools.iter().flatten().map(|p| p.bytes).sum()
    }
}

/// Allocated buffers and the view of every entry.
pub struct Storage {
    /// Buffers by storage id.
    pub pools: Vec<Option<Tensor>>,
    /// The view of every entry into its buffer.
    pub views: Vec<Tensor>,
}

/// The device of `devices` for `device_type` (the first of that type), else the first device
/// (TVM's fallback).
pub fn device_for(devices: &[Device], device_type: i32) -> Device {
    devices
        .iter()
        .copied()
        .find(|d| d.device_type() == device_type)
        .unwrap_or(devices[0])
}

impl Storage {
    /// Allocates the buffers of `plan` on `devices` and makes the entry views.
    pub fn allocate(graph: &Graph, plan: &StoragePlan, devices: &[Device]) -> Result<Storage> {
        Storage::allocate_with(graph, plan, devices, &HashMap::new())
    }

    /// [`allocate`](Self::allocate) with the memory of some entries given (`given`: entry id
    /// to tensor): a buffer all of whose entries are given (the params several executors
    /// share) is not allocated, and those entries view the given tensors. A given tensor must
    /// have its entry's shape and dtype and be compact, 64-byte aligned and on the entry's
    /// device; one that is not is not used (the entry gets memory of its own).
    pub fn allocate_with(
        graph: &Graph,
        plan: &StoragePlan,
        devices: &[Device],
        given: &HashMap<usize, Tensor>,
    ) -> Result<Storage> {
        if devices.is_empty() {
            return Err(Error::value_error(
                "a graph executor needs at least one device",
            ));
        }
        let usable = |eid: usize, dev: Device| {
            given.get(&eid).filter(|t| {
                t.device() == dev
                    && t.shape() == graph.shapes[eid].as_slice()
                    && t.dtype() == graph.dtypes[eid]
                    && t.is_contiguous()
                    && (t.numel() == 0 || t.is_aligned(ALLOC_ALIGNMENT))
            })
        };
        let pools = plan
            .pools
            .iter()
            .enumerate()
            .map(|(sid, p)| {
                let Some(p) = p.as_ref() else {
                    return Ok(None);
                };
                let dev = device_for(devices, p.device_type);
                if p.entries.iter().all(|&eid| usable(eid, dev).is_some()) {
                    return Ok(None);
                }
                Tensor::empty(&[p.bytes.max(1) as i64], DataType::uint(8), dev)
                    .map(Some)
                    .map_err(|e| e.context(format!("allocating storage {sid} ({} bytes)", p.bytes)))
            })
            .collect::<Result<Vec<_>>>()?;
        let views = graph
            .storage_ids
            .iter()
            .enumerate()
            .map(|(eid, &sid)| match &pools[sid] {
                Some(pool) => pool.view(&graph.shapes[eid], graph.dtypes[eid]),
                // Not allocated: every entry of this storage was found usable above.
                None => Ok(given[&eid].clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Storage { pools, views })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAPH: &str = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "tvm_op", "name": "a", "inputs": [[0, 0, 0]],
         "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}},
        {"op": "tvm_op", "name": "b", "inputs": [[1, 0, 0]],
         "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}},
        {"op": "tvm_op", "name": "c", "inputs": [[2, 0, 0]],
         "attrs": {"func_name": "g", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}}
      ],
      "arg_nodes": [0], "heads": [[3, 0, 0]], "node_row_ptr": [0, 1, 2, 3, 4],
      "attrs": {
        "shape": ["list_shape", [[4], [4, 2], [4], [2]]],
        "dltype": ["list_str", ["float32", "float32", "float64", "int8"]],
        "storage_id": ["list_int", [0, 1, 2, 1]]
      }
    }"#;

    #[test]
    fn shared_ids_take_the_largest_entry() {
        let g = Graph::parse(GRAPH).unwrap();
        let plan = StoragePlan::new(&g, 1).unwrap();
        let sizes: Vec<usize> = plan
            .pools
            .iter()
            .map(|p| p.as_ref().unwrap().bytes)
            .collect();
        assert_eq!(sizes, [16, 32, 32]);
        assert_eq!(plan.pools[1].as_ref().unwrap().entries, [1, 3]);
        assert_eq!(plan.total_bytes(), 80);
        let s = Storage::allocate(&g, &plan, &[Device::cpu(0)]).unwrap();
        assert_eq!(s.views[3].shape(), &[2]);
        assert_eq!(s.views[3].dtype(), DataType::int(8));
        assert_eq!(s.views[1].raw_data(), s.views[3].raw_data());
        assert_ne!(s.views[0].raw_data(), s.views[1].raw_data());
        assert!(s.views.iter().all(|v| v.is_aligned(64)));
    }

    #[test]
    fn given_entries_use_the_given_memory() {
        let g = Graph::parse(GRAPH).unwrap();
        let plan = StoragePlan::new(&g, 1).unwrap();
        let cpu = [Device::cpu(0)];
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
        let given = HashMap::from([(0usize, x.clone())]);
        let s = Storage::allocate_with(&g, &plan, &cpu, &given).unwrap();
        // Storage 0 (x's alone) is not allocated: x views the given tensor.
        assert!(s.pools[0].is_none());
        assert!(s.views[0].same_as(&x));
        assert_eq!(s.views[0].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        assert!(s.pools[1].is_some() && s.pools[2].is_some());
        // A tensor of another shape, or an entry sharing its storage, gets memory of its own.
        let wrong = Tensor::from_slice(&[1.0f32; 8], &[8]).unwrap();
        let s = Storage::allocate_with(&g, &plan, &cpu, &HashMap::from([(0, wrong)])).unwrap();
        assert!(s.pools[0].is_some());
        let y = Tensor::from_slice(&[0.0f32; 8], &[4, 2]).unwrap();
        let s = Storage::allocate_with(&g, &plan, &cpu, &HashMap::from([(1, y.clone())])).unwrap();
        assert!(s.pools[1].is_some(), "entry 3 shares storage 1");
        assert!(!s.views[1].same_as(&y));
    }

    #[test]
    fn one_storage_on_two_devices_is_refused() {
        let text = GRAPH.replace(
            "\"storage_id\"",
            "\"device_index\": [\"list_int\", [1, 1, 1, 2]], \"storage_id\"",
        );
        let g = Graph::parse(&text).unwrap();
        let e = StoragePlan::new(&g, 1).unwrap_err();
        assert!(e.message().contains("storage id 1"), "{}", e.message());
        assert!(e.message().contains("nodes[3] (\"c\")"), "{}", e.message());
    }
}
