//! Static input shapes: parsing `--input-shape` and binding a graph's symbolic dimensions.

use std::collections::BTreeMap;

use crate::error::{OnnxError, Result};
use crate::model::{Dim, Graph};
use crate::tensor::DataType;

/// Input shapes given by the user, input name to dimensions.
pub type InputShapes = BTreeMap<String, Vec<usize>>;

/// The comma-separated non-negative integers of `list` (empty items skipped); an item that is
/// not one is an error saying `who: 'item' is not what (a non-negative integer)`.
fn parse_sizes(list: &str, who: &str, what: &str) -> Result<Vec<usize>> {
    list.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse::<usize>().map_err(|_| {
                OnnxError::InputShape(format!(
                    "{who}: '{d}' is not {what} (a non-negative integer)"
                ))
            })
        })
        .collect()
}

/// Parses one `--input-shape` value: `name=1,3,224,224`, several joined by `;`
/// (`a=1,3,224,224;b=1,10`). `name=` alone is a scalar. The name is everything before the
/// last `=`, so names with `/` or `:` work.
pub fn parse_input_shapes(spec: &str) -> Result<InputShapes> {
    parse_input_shape_flags([spec])
}

/// Parses repeated `--input-shape` flags, each as in [`parse_input_shapes`]; a name given
/// twice is an error.
pub fn parse_input_shape_flags<I, S>(flags: I) -> Result<InputShapes>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut shapes = InputShapes::new();
    for flag in flags {
        for item in flag
            .as_ref()
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let (name, dims) = item.rsplit_once('=').ok_or_else(|| {
                OnnxError::InputShape(format!(
                    "'{item}' is not of the form NAME=D0,D1,... (e.g. data=1,3,224,224)"
                ))
            })?;
            let name = name.trim();
            if name.is_empty() {
                return Err(OnnxError::InputShape(format!("'{item}' has no input name")));
            }
            let dims = parse_sizes(dims, &format!("input '{name}'"), "a dimension")?;
            if shapes.insert(name.to_string(), dims).is_some() {
                return Err(OnnxError::InputShape(format!(
                    "input '{name}' is given twice"
                )));
            }
        }
    }
    Ok(shapes)
}

/// Values of symbolic dimensions to compile for, dimension name to values: one library holds
/// code for every combination (see [`Graph::specializations`]). No values (`NAME=any`): any
/// value, known only at run time (kernels compiled with run-time extents).
pub type DimValues = BTreeMap<String, Vec<usize>>;

/// The value a dimension known only at run time is bound to while checking input shapes (the
/// converted graph carries -1 there instead).
pub const ANY_DIM_PROBE: usize = 1;

/// Parses repeated `--dim NAME=V1,V2,...` flags (`seq=7,16,64`, or `seq=any`: known only at
/// run time); a name given twice or without values is an error.
pub fn parse_dim_flags<I, S>(flags: I) -> Result<DimValues>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = DimValues::new();
    for flag in flags {
        let item = flag.as_ref().trim();
        let (name, values) = item.split_once('=').ok_or_else(|| {
            OnnxError::InputShape(format!(
                "'{item}' is not of the form NAME=V1,V2,... (e.g. seq=16,64,128)"
            ))
        })?;
        let name = name.trim();
        let values = if values.trim() == "any" {
            Vec::new()
        } else {
            let v = parse_sizes(values, &format!("dimension '{name}'"), "a size")?;
            if v.is_empty() {
                return Err(OnnxError::InputShape(format!(
                    "'{item}' needs a dimension name and at least one value (or 'any')"
                )));
            }
            v
        };
        if name.is_empty() {
            return Err(OnnxError::InputShape(format!(
                "'{item}' needs a dimension name and at least one value (or 'any')"
            )));
        }
        if out.insert(name.to_string(), values).is_some() {
            return Err(OnnxError::InputShape(format!(
                "dimension '{name}' is given twice"
            )));
        }
    }
    Ok(out)
}

/// A graph input with a fully static shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticInput {
    /// The input's name.
    pub name: String,
    /// Its element type.
    pub dtype: DataType,
    /// Its static shape.
    pub shape: Vec<usize>,
}

/// The result of binding input shapes: static inputs plus the value of every symbolic dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundShapes {
    /// The graph's runtime inputs in order, with static shapes.
    pub inputs: Vec<StaticInput>,
    /// Values of the symbolic dimensions (`batch` = 1...), for resolving `value_info` and outputs.
    pub symbols: BTreeMap<String, usize>,
}

impl BoundShapes {
    /// Resolves a declared shape with the bound symbols; `None` if a dimension stays unknown.
    pub fn resolve(&self, dims: &[Dim]) -> Option<Vec<usize>> {
        dims.iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                Dim::Symbolic(s) => self.symbols.get(s).copied(),
                Dim::Unknown => None,
            })
            .collect()
    }
}

impl Graph {
    /// Gives every runtime input a static shape.
    ///
    /// A shape in `given` must match the input's rank and fixed dimensions, and binds its
    /// symbolic ones (one symbol shared by several inputs must get one value). An input not in
    /// `given` keeps its declared shape, whose symbols must be bound by another input. Errors:
    /// an unknown input name (listing the inputs), a mismatch, an unsupported element type, or a
    /// dimension left unbound ([`OnnxError::UnboundDim`], naming the input and the dimension).
    pub fn bind_input_shapes(&self, given: &InputShapes) -> Result<BoundShapes> {
        for name in given.keys() {
            if self.input(name).is_none() {
                let names: Vec<&str> = self.inputs.iter().map(|v| v.name.as_str()).collect();
                return Err(OnnxError::InputShape(format!(
                    "the model has no input '{name}' (its inputs: {})",
                    names.join(", ")
                )));
            }
        }
        let mut symbols = BTreeMap::new();
        for v in &self.inputs {
            let (Some(shape), Some(dims)) = (given.get(&v.name), &v.dims) else {
                continue;
            };
            if shape.len() != dims.len() {
                return Err(OnnxError::InputShape(format!(
                    "input '{}' has rank {} ({}), but the given shape {shape:?} has rank {}",
                    v.name,
                    dims.len(),
                    fmt_dims(dims),
                    shape.len()
                )));
            }
            for (i, (d, &n)) in dims.iter().zip(shape).enumerate() {
                match d {
                    Dim::Fixed(m) if *m != n => {
                        return Err(OnnxError::InputShape(format!(
                            "input '{}': dimension {i} is {m} in the model, but {n} was given",
                            v.name
                        )))
                    }
                    Dim::Symbolic(s) => match symbols.insert(s.clone(), n) {
                        Some(prev) if prev != n => {
                            return Err(OnnxError::InputShape(format!(
                                "dimension '{s}' is given as {prev} and as {n} (input '{}', dimension {i})",
                                v.name
                            )))
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for v in &self.inputs {
            let dtype = v.dtype.ok_or_else(|| {
                OnnxError::InputShape(format!(
                    "input '{}' has element type {}, which Kiln does not support",
                    v.name,
                    crate::tensor::onnx_type_name(v.elem_type)
                ))
            })?;
            let shape = match (given.get(&v.name), &v.dims) {
                (Some(shape), _) => shape.clone(),
                (None, None) => {
                    return Err(OnnxError::InputShape(format!(
                        "input '{}' has no declared shape; give it with --input-shape {}=...",
                        v.name, v.name
                    )))
                }
                (None, Some(dims)) => dims
                    .iter()
                    .enumerate()
                    .map(|(i, d)| match d {
                        Dim::Fixed(n) => Ok(*n),
                        Dim::Symbolic(s) => {
                            symbols
                                .get(s)
                                .copied()
                                .ok_or_else(|| OnnxError::UnboundDim {
                                    input: v.name.clone(),
                                    dim: i,
                                    symbol: s.clone(),
                                })
                        }
                        Dim::Unknown => Err(OnnxError::UnboundDim {
                            input: v.name.clone(),
                            dim: i,
                            symbol: "?".into(),
                        }),
                    })
                    .collect::<Result<_>>()?,
            };
            inputs.push(StaticInput {
                name: v.name.clone(),
                dtype,
                shape,
            });
        }
        Ok(BoundShapes { inputs, symbols })
    }
}

impl Graph {
    /// The input shapes of every combination of `dims` (symbolic dimension values), each with
    /// `given` for the inputs it names, in the order of `dims`' names then values. Errors: a
    /// dimension no input declares (listing those that are), or an input of `given` that also
    /// has a dimension of `dims`.
    pub fn specializations(
        &self,
        given: &InputShapes,
        dims: &DimValues,
    ) -> Result<Vec<InputShapes>> {
        let declared: Vec<&str> = self
            .inputs
            .iter()
            .flat_map(|v| v.dims.iter().flatten())
            .filter_map(|d| match d {
                Dim::Symbolic(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        for name in dims.keys() {
            if !declared.contains(&name.as_str()) {
                let mut names = declared.clone();
                names.sort();
                names.dedup();
                return Err(OnnxError::InputShape(format!(
                    "dimension '{name}' is not a symbolic dimension of the model's inputs \
                     (they have: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        }
        let mut combos: Vec<BTreeMap<&str, usize>> = vec![BTreeMap::new()];
        for (name, values) in dims {
            // Known only at run time: bound to a probe value (the graph gets -1 there).
            let values: &[usize] = if values.is_empty() {
                &[ANY_DIM_PROBE]
            } else {
                values
            };
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |&v| {
                        let mut c = c.clone();
                        c.insert(name.as_str(), v);
                        c
                    })
                })
                .collect();
        }
        let mut out = Vec::with_capacity(combos.len());
        for combo in combos {
            let mut shapes = given.clone();
            for v in &self.inputs {
                let Some(ds) = &v.dims else { continue };
                let uses = ds
                    .iter()
                    .any(|d| matches!(d, Dim::Symbolic(s) if combo.contains_key(s.as_str())));
                if !uses {
                    continue;
                }
                if given.contains_key(&v.name) {
                    return Err(OnnxError::InputShape(format!(
                        "input '{}' has a shape given and a dimension given values; give one",
                        v.name
                    )));
                }
                let mut shape = Vec::with_capacity(ds.len());
                for (i, d) in ds.iter().enumerate() {
                    shape.push(match d {
                        Dim::Fixed(n) => *n,
                        Dim::Symbolic(s) => match combo.get(s.as_str()) {
                            Some(&n) => n,
                            None => {
                                return Err(OnnxError::UnboundDim {
                                    input: v.name.clone(),
                                    dim: i,
                                    symbol: s.clone(),
                                })
                            }
                        },
                        Dim::Unknown => {
                            return Err(OnnxError::UnboundDim {
                                input: v.name.clone(),
                                dim: i,
                                symbol: "?".into(),
                            })
                        }
                    });
                }
                shapes.insert(v.name.clone(), shape);
            }
            out.push(shapes);
        }
        Ok(out)
    }
}

fn fmt_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(Dim::to_string).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let s = parse_input_shapes("data=1,3,224,224; gpu_0/x:0 = 2 ,5;s=").unwrap();
        assert_eq!(s["data"], vec![1, 3, 224, 224]);
        assert_eq!(s["gpu_0/x:0"], vec![2, 5]);
        assert_eq!(s["s"], Vec::<usize>::new());
        let s = parse_input_shape_flags(["a=1", "b=2,3"]).unwrap();
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn rejects_bad_specs() {
        let msg = |s: &str| parse_input_shapes(s).unwrap_err().to_string();
        assert!(msg("data").contains("NAME=D0,D1"));
        assert!(msg("=1,2").contains("no input name"));
        assert!(msg("a=1,x").contains("'x' is not a dimension"));
        assert!(msg("a=1,-3").contains("'-3'"));
        assert!(parse_input_shape_flags(["a=1", "a=2"])
            .unwrap_err()
            .to_string()
            .contains("twice"));
    }
}
