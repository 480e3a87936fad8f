//! Graph checks: single definition of every value, defined uses, topological order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::error::{OnnxError, Result};
use crate::model::{Node, ValueInfo};
use crate::tensor::Tensor;

/// What defined a value, for messages.
#[derive(Clone, PartialEq)]
enum Definer {
    GraphInput,
    Initializer,
    Node(usize),
}

/// Checks that graph inputs, initializers and node outputs define each name once (an
/// initializer may repeat a graph input: that is how IR < 4 declares weights), that every
/// non-empty node input is defined, and that every graph output is defined.
#[cfg(test)]
pub(crate) fn check_definitions(
    inputs: &[ValueInfo],
    initializers: &[Tensor],
    nodes: &[Node],
    outputs: &[ValueInfo],
) -> Result<()> {
    check_definitions_in(inputs, initializers, nodes, outputs, &HashSet::new())
}

/// [`check_definitions`] for a subgraph (an If branch, a Loop body), which may also read the
/// names of its enclosing scopes, `outer`.
pub(crate) fn check_definitions_in(
    inputs: &[ValueInfo],
    initializers: &[Tensor],
    nodes: &[Node],
    outputs: &[ValueInfo],
    outer: &HashSet<String>,
) -> Result<()> {
    let describe = |d: &Definer| match d {
        Definer::GraphInput => "a graph input".to_string(),
        Definer::Initializer => "an initializer".to_string(),
        Definer::Node(i) => format!("node {} ({})", nodes[*i].label(), nodes[*i].op_type),
    };
    let mut defined: HashMap<&str, Definer> = HashMap::new();
    let all = inputs
        .iter()
        .map(|v| (v.name.as_str(), Definer::GraphInput))
        .chain(
            initializers
                .iter()
                .map(|t| (t.name.as_str(), Definer::Initializer)),
        )
        .chain(nodes.iter().enumerate().flat_map(|(i, n)| {
            n.outputs
                .iter()
                .filter(|o| !o.is_empty())
                .map(move |o| (o.as_str(), Definer::Node(i)))
        }));
    for (name, by) in all {
        match defined.get(name) {
            None => {
                defined.insert(name, by);
            }
            Some(Definer::GraphInput) if by == Definer::Initializer => {
                defined.insert(name, by);
            }
            Some(first) => {
                return Err(OnnxError::DuplicateDefinition {
                    name: name.to_string(),
                    first: describe(first),
                    second: describe(&by),
                })
            }
        }
    }
    for n in nodes {
        if let Some(missing) = n
            .inputs
            .iter()
            .find(|i| !i.is_empty() && !defined.contains_key(i.as_str()) && !outer.contains(*i))
        {
            return Err(OnnxError::UndefinedInput {
                node: n.label(),
                op_type: n.op_type.clone(),
                input: missing.clone(),
            });
        }
    }
    if let Some(o) = outputs
        .iter()
        .find(|o| !defined.contains_key(o.name.as_str()) && !outer.contains(&o.name))
    {
        return Err(OnnxError::UndefinedOutput {
            output: o.name.clone(),
        });
    }
    Ok(())
}

/// Orders `nodes` so that every node comes after the producers of its inputs, keeping the
/// given order wherever it already is valid (Kahn's algorithm, lowest original index first).
/// Names must already be checked by [`check_definitions`]. A cycle is an error listing the
/// nodes that could not be ordered.
pub(crate) fn topo_sort(nodes: Vec<Node>) -> Result<Vec<Node>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), i);
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut pending = vec![0usize; nodes.len()];
    let mut in_order = true;
    for (i, n) in nodes.iter().enumerate() {
        for inp in n.inputs.iter().filter(|s| !s.is_empty()) {
            if let Some(&p) = producer.get(inp.as_str()) {
                users[p].push(i);
                pending[i] += 1;
                in_order &= p < i;
            }
        }
    }
    if in_order {
        return Ok(nodes);
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| pending[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() < nodes.len() {
        // Nodes still pending are on a cycle or downstream of one; peel off the downstream
        // ones (those whose users are all peeled) so that the error names the cycle.
        let mut stuck: Vec<bool> = pending.iter().map(|&p| p > 0).collect();
        loop {
            let peel: Vec<usize> = (0..nodes.len())
                .filter(|&i| stuck[i] && users[i].iter().all(|&u| !stuck[u]))
                .collect();
            if peel.is_empty() {
                break;
            }
            for i in peel {
                stuck[i] = false;
            }
        }
        let stuck: Vec<String> = (0..nodes.len())
            .filter(|&i| stuck[i])
            .map(|i| format!("{} ({})", nodes[i].label(), nodes[i].op_type))
            .collect();
        return Err(OnnxError::Cycle { nodes: stuck });
    }
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .map(|i| slots[i].take().expect("each node once"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, inputs: &[&str], outputs: &[&str]) -> Node {
        Node {
            name: name.into(),
            op_type: "Relu".into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attributes: vec![],
        }
    }

    fn vi(name: &str) -> ValueInfo {
        ValueInfo {
            name: name.into(),
            elem_type: 1,
            dtype: None,
            dims: None,
        }
    }

    #[test]
    fn sorts_out_of_order_nodes_stably() {
        let nodes = vec![
            node("c", &["b"], &["c"]),
            node("a", &["x"], &["a"]),
            node("b", &["a"], &["b"]),
            node("d", &["x"], &["d"]),
        ];
        check_definitions(&[vi("x")], &[], &nodes, &[vi("c")]).unwrap();
        let names: Vec<String> = topo_sort(nodes)
            .unwrap()
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
    }

    #[test]
    fn cycle_is_reported() {
        let nodes = vec![
            node("a", &["x", "b"], &["a"]),
            node("b", &["a"], &["b"]),
            node("c", &["x"], &["c"]),
        ];
        let e = topo_sort(nodes).unwrap_err().to_string();
        assert_eq!(
            e,
            "the graph has a cycle among 2 node(s): 'a' (Relu), 'b' (Relu)"
        );
    }

    #[test]
    fn undefined_and_duplicate() {
        let nodes = vec![node("a", &["x", "", "w"], &["a"])];
        let e = check_definitions(&[vi("x")], &[], &nodes, &[vi("a")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "node 'a' (Relu) reads 'w', which no graph input, initializer or node output defines"
        );
        let nodes = vec![node("a", &["x"], &["y"]), node("b", &["x"], &["y"])];
        let e = check_definitions(&[vi("x")], &[], &nodes, &[vi("y")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "value 'y' is defined twice: by node 'a' (Relu) and by node 'b' (Relu)"
        );
        let nodes = vec![node("a", &["x"], &["x"])];
        let e = check_definitions(&[vi("x")], &[], &nodes, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("by a graph input and by node 'a'"), "{e}");
        let e = check_definitions(&[vi("x")], &[], &[], &[vi("z")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("graph output 'z'"), "{e}");
    }
}
