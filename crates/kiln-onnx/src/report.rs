//! The unsupported-operator report: one error listing every op type the converter lacks.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::error::{OnnxError, Result};
use crate::model::{Graph, Model};

/// One op type that the converter does not support.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// The op type, domain-qualified outside the default domain (`com.microsoft.FusedConv`).
    pub op_type: String,
    /// How many nodes use it.
    pub count: usize,
    /// The label of the first such node in graph order.
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
    pub fn unsupported_ops<'a>(
        &self,
        supported: impl IntoIterator<Item = &'a str>,
    ) -> Vec<UnsupportedOp> {
        let supported: HashSet<&str> = supported.into_iter().collect();
        let mut ops: Vec<UnsupportedOp> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for n in &self.nodes {
            let op = n.qualified_op();
            if supported.contains(op.as_str()) {
                continue;
            }
            match index.get(&op) {
                Some(&i) => ops[i].count += 1,
                None => {
                    index.insert(op.clone(), ops.len());
                    ops.push(UnsupportedOp {
                        op_type: op,
                        count: 1,
                        first_node: n.label(),
                    });
                }
            }
        }
        ops
    }
}

impl Model {
    /// `Ok(())` if the converter supports every node's op type; otherwise ONE
    /// [`OnnxError::UnsupportedOps`] listing each unsupported op type with its node count and
    /// first node. See [`Graph::unsupported_ops`] for how `supported` is spelled. `Constant`
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
