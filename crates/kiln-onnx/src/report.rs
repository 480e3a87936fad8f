//! The unsupported-operator report: one error listing every op type the converter lacks.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::attr::AttrValue;
use crate::error::{OnnxError, Result};
use crate::model::{qualified_op, Graph, Model};
use crate::proto::GraphProto;

/// One op type that the converter does not support.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// The op type, domain-qualified outside the default domain (`com.microsoft.FusedConv`).
    pub op_type: String,
    /// How many nodes use it.
    pub count: usize,
    /// The label of the first such node in graph order: its [`crate::Node::label`] at the top
    /// level, its path inside a subgraph (see [`Graph::unsupported_ops`]).
    pub first_node: String,
}

/// Every unsupported op type of a model, in order of first use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOps {
    /// Where the model came from (its path or `<bytes>`); may be empty.
    pub source: String,
    /// The model's default-domain opset (0 if unknown).
    pub opset: i64,
    /// The op types, in order of first use.
    pub ops: Vec<UnsupportedOp>,
}

impl fmt::Display for UnsupportedOps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: usize = self.ops.iter().map(|o| o.count).sum();
        if !self.source.is_empty() {
            write!(f, "'{}': ", self.source)?;
        }
        write!(
            f,
            "{} unsupported operator type(s) in {nodes} node(s)",
            self.ops.len()
        )?;
        if self.opset > 0 {
            write!(f, " (opset {})", self.opset)?;
        }
        write!(f, ":")?;
        let width = self.ops.iter().map(|o| o.op_type.len()).max().unwrap_or(0);
        for o in &self.ops {
            write!(
                f,
                "\n  {:<width$}  {:>4} node(s), first: {}",
                o.op_type, o.count, o.first_node
            )?;
        }
        Ok(())
    }
}

impl Graph {
    /// The op types that `supported` lacks, with counts and first node, in order of first use.
    ///
    /// `supported` holds op types as [`crate::Node::qualified_op`] spells them: plain names
    /// for the default domain (`Conv`), `domain.Op` for others.
    ///
    /// The nodes of subgraphs count too: every graph-valued attribute (`GRAPH` or `GRAPHS`:
    /// the branches of `If`, the body of `Loop` and `Scan`, any other) at any depth, visited
    /// right after the node that holds it. A top-level node is labelled as by
    /// [`crate::Node::label`]; a node inside a subgraph by its path from the top level,
    /// `If 'vad_if' / then_branch / node 'lstm_1'`, chained for nested subgraphs
    /// (`Loop 'l' / body / If 'b' / else_branch / node 'c'`). Unnamed nodes on a path are
    /// given by their index in their graph's node list (`node #3`, `If #0`; topological order
    /// at the top level, file order in subgraphs), and a graph of a `GRAPHS` attribute by its
    /// index (`branches[1]`).
    pub fn unsupported_ops<'a>(
        &self,
        supported: impl IntoIterator<Item = &'a str>,
    ) -> Vec<UnsupportedOp> {
        let mut tally = Tally {
            supported: supported.into_iter().collect(),
            ops: Vec::new(),
            index: HashMap::new(),
        };
        for (i, n) in self.nodes.iter().enumerate() {
            let op = n.qualified_op();
            tally.add(&op, || n.label());
            let subgraphs = n.attributes.iter().flat_map(|(name, value)| {
                let graphs: &[GraphProto] = match value {
                    AttrValue::Graph(g) => std::slice::from_ref(g.as_ref()),
                    AttrValue::Graphs(gs) => gs,
                    _ => &[],
                };
                subgraph_steps(name, graphs, matches!(value, AttrValue::Graphs(_)))
            });
            tally.add_subgraphs(&op, &n.name, i, "", subgraphs);
        }
        tally.ops
    }
}

/// The unsupported op types found so far, in order of first use.
struct Tally<'s> {
    supported: HashSet<&'s str>,
    ops: Vec<UnsupportedOp>,
    /// Op type to its place in `ops`.
    index: HashMap<String, usize>,
}

impl Tally<'_> {
    /// Counts one node of `op` unless it is supported; `label` names it if it is the first.
    fn add(&mut self, op: &str, label: impl FnOnce() -> String) {
        if self.supported.contains(op) {
            return;
        }
        match self.index.get(op) {
            Some(&i) => self.ops[i].count += 1,
            None => {
                self.index.insert(op.to_string(), self.ops.len());
                self.ops.push(UnsupportedOp {
                    op_type: op.to_string(),
                    count: 1,
                    first_node: label(),
                });
            }
        }
    }

    /// Counts the nodes of the subgraphs of the node `op` named `name` (index `i` in its
    /// graph), whose own path is `path` (empty at the top level); `subgraphs` gives each
    /// subgraph with the path step of its attribute (`then_branch`, `branches[1]`).
    fn add_subgraphs<'g>(
        &mut self,
        op: &str,
        name: &str,
        i: usize,
        path: &str,
        subgraphs: impl Iterator<Item = (String, &'g GraphProto)>,
    ) {
        let mut subgraphs = subgraphs.peekable();
        if subgraphs.peek().is_none() {
            return;
        }
        let node = match name {
            "" => format!("{op} #{i}"),
            _ => format!("{op} '{name}'"),
        };
        let node = match path {
            "" => node,
            _ => format!("{path} / {node}"),
        };
        for (step, g) in subgraphs {
            self.add_graph(g, &format!("{node} / {step}"));
        }
    }

    /// Counts the nodes of the subgraph `g` found at `path`, and those of its subgraphs.
    fn add_graph(&mut self, g: &GraphProto, path: &str) {
        for (i, n) in g.node.iter().enumerate() {
            let op = qualified_op(n.domain(), n.op_type());
            self.add(&op, || match n.name() {
                "" => format!("{path} / node #{i}"),
                name => format!("{path} / node '{name}'"),
            });
            let subgraphs = n.attribute.iter().flat_map(|a| {
                subgraph_steps(a.name(), a.g.as_slice(), false).chain(subgraph_steps(
                    a.name(),
                    &a.graphs,
                    true,
                ))
            });
            self.add_subgraphs(&op, n.name(), i, path, subgraphs);
        }
    }
}

/// The graphs of the attribute `attr` with the path step of each: the attribute's name, with
/// the graph's index when the attribute holds a list (`GRAPHS`).
fn subgraph_steps<'g>(
    attr: &'g str,
    graphs: &'g [GraphProto],
    list: bool,
) -> impl Iterator<Item = (String, &'g GraphProto)> + 'g {
    graphs.iter().enumerate().map(move |(k, g)| {
        let step = if list {
            format!("{attr}[{k}]")
        } else {
            attr.to_string()
        };
        (step, g)
    })
}

impl Model {
    /// `Ok(())` if the converter supports every node's op type; otherwise ONE
    /// [`OnnxError::UnsupportedOps`] listing each unsupported op type with its node count and
    /// first node, nodes inside subgraphs (`If` branches, `Loop` and `Scan` bodies) included.
    /// See [`Graph::unsupported_ops`] for how `supported` is spelled and how nodes inside
    /// subgraphs are labelled. `Constant`
    /// nodes stay in the graph (their values are also in [`Graph::constant`]), so a converter
    /// that handles them lists `Constant` too.
    pub fn check_supported_ops<'a>(
        &self,
        supported: impl IntoIterator<Item = &'a str>,
    ) -> Result<()> {
        let ops = self.graph.unsupported_ops(supported);
        if ops.is_empty() {
            return Ok(());
        }
        Err(OnnxError::UnsupportedOps(UnsupportedOps {
            source: self.source.clone(),
            opset: self.opsets.get("").copied().unwrap_or(0),
            ops,
        }))
    }
}

#[cfg(test)]
mod tests;
