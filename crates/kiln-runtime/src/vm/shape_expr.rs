//! Shape expressions: the result shapes of kernels compiled with run-time extents, computed
//! from the dimensions of their arguments, and the values of small integer arguments (a shape
//! input), by a small stack program (the compiler derives most from the kernel's own compute,
//! so the shape rule is written once, in the operator). Words (i64), each instruction an
//! opcode and its operands:
//!
//! | opcode | operands | effect |
//! | --- | --- | --- |
//! | 0 | k | push k |
//! | 1 | a, j | push dimension j of argument a |
//! | 2..=8 | | pop b, a; push a+b, a-b, a*b, floordiv(a, b), floormod(a, b) (b > 0), min, max |
//! | 9, 10 | | pop b, a; push a == b, a < b (1 or 0) |
//! | 11 | | pop f, t, c; push c != 0 ? t : f |
//! | 12 | | pop a: the next dimension of the result |
//! | 13 | a, k | push element k of argument a (an integer tensor) |
//! | 14 | | pop c: an error unless c != 0 (the arguments do not fit the operator) |
//!
//! Arithmetic is checked: an overflow, a division by zero or a negative result dimension is an
//! error naming the program, never a panic.

use crate::tensor::Tensor;
use kiln_ffi::{Error, Result};

/// The opcodes (see the table above), named for the programs' writers.
pub mod op {
    /// `k`: push `k`.
    pub const PUSH: i64 = 0;
    /// `a, j`: push dimension `j` of argument `a`.
    pub const DIM: i64 = 1;
    /// Pop b, a; push a + b.
    pub const ADD: i64 = 2;
    /// Pop b, a; push a - b.
    pub const SUB: i64 = 3;
    /// Pop b, a; push a * b.
    pub const MUL: i64 = 4;
    /// Pop b, a; push floordiv(a, b).
    pub const FLOOR_DIV: i64 = 5;
    /// Pop b, a; push floormod(a, b).
    pub const FLOOR_MOD: i64 = 6;
    /// Pop b, a; push min(a, b).
    pub const MIN: i64 = 7;
    /// Pop b, a; push max(a, b).
    pub const MAX: i64 = 8;
    /// Pop b, a; push a == b.
    pub const EQ: i64 = 9;
    /// Pop b, a; push a < b.
    pub const LT: i64 = 10;
    /// Pop f, t, c; push c != 0 ? t : f.
    pub const SELECT: i64 = 11;
    /// Pop a: the next dimension of the result.
    pub const EMIT: i64 = 12;
    /// `a, k`: push element `k` of integer argument `a`.
    pub const VALUE: i64 = 13;
    /// Pop c: an error unless c != 0.
    pub const CHECK: i64 = 14;
}

/// Evaluates `code` over the dimensions of `args`: the result's dimensions.
pub fn eval(code: &[i64], args: &[Tensor]) -> Result<Vec<i64>> {
    let bad = |why: &str| Error::value_error(format!("shape expression {code:?}: {why}"));
    let mut stack: Vec<i64> = Vec::with_capacity(8);
    let mut out = Vec::new();
    let mut pc = 0;
    let word = |pc: usize| code.get(pc).copied().ok_or_else(|| bad("cut short"));
    while pc < code.len() {
        let opcode = code[pc];
        pc += 1;
        match opcode {
            op::PUSH => {
                stack.push(word(pc)?);
                pc += 1;
            }
            op::DIM => {
                let (a, j) = (word(pc)?, word(pc + 1)?);
                pc += 2;
                let d = usize::try_from(a)
                    .ok()
                    .and_then(|a| args.get(a))
                    .and_then(|t| usize::try_from(j).ok().and_then(|j| t.shape().get(j)))
                    .ok_or_else(|| bad("reads a dimension its arguments do not have"))?;
                stack.push(*d);
            }
            op::ADD..=op::SELECT => {
                let b = stack.pop().ok_or_else(|| bad("stack underflow"))?;
                let a = stack.pop().ok_or_else(|| bad("stack underflow"))?;
                let v = match opcode {
                    op::ADD => a.checked_add(b),
                    op::SUB => a.checked_sub(b),
                    op::MUL => a.checked_mul(b),
                    op::FLOOR_DIV => (b > 0).then(|| a.div_euclid(b)),
                    op::FLOOR_MOD => (b > 0).then(|| a.rem_euclid(b)),
                    op::MIN => Some(a.min(b)),
                    op::MAX => Some(a.max(b)),
                    op::EQ => Some((a == b) as i64),
                    op::LT => Some((a < b) as i64),
                    _ => {
                        let c = stack.pop().ok_or_else(|| bad("stack underflow"))?;
                        Some(if c != 0 { a } else { b })
                    }
                };
                stack.push(v.ok_or_else(|| bad("overflow or division by zero"))?);
            }
            op::EMIT => {
                let d = stack.pop().ok_or_else(|| bad("stack underflow"))?;
                if d < 0 {
                    return Err(bad(&format!("dimension {} comes out {d}", out.len())));
                }
                out.push(d);
            }
            op::VALUE => {
                let (a, k) = (word(pc)?, word(pc + 1)?);
                pc += 2;
                let t = usize::try_from(a)
                    .ok()
                    .and_then(|a| args.get(a))
                    .ok_or_else(|| bad("reads an argument it does not have"))?;
                let v = super::shape_fns::int_values(t, "shape expression")?;
                let x = usize::try_from(k).ok().and_then(|k| v.get(k));
                stack.push(*x.ok_or_else(|| bad("reads a value its argument does not have"))?);
            }
            op::CHECK => {
                if stack.pop().ok_or_else(|| bad("stack underflow"))? == 0 {
                    let shapes: Vec<&[i64]> = args.iter().map(|t| t.shape()).collect();
                    return Err(Error::value_error(format!(
                        "arguments of shapes {shapes:?} do not fit the operator (check at word \
                         {} of shape expression {code:?})",
                        pc - 1
                    )));
                }
            }
            _ => return Err(bad(&format!("unknown opcode {opcode}"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ffi::{DataType, Device};

    fn t(shape: &[i64]) -> Tensor {
        Tensor::empty(shape, DataType::float(32), Device::cpu(0)).unwrap()
    }

    #[test]
    fn programs_compute_dimensions_from_arguments() {
        // [a.0 * a.1, floordiv(b.0 - 1, 2) + 1, select(a.0 == 3, 7, 8), min(b.0, 4)]
        let code = [
            1, 0, 0, 1, 0, 1, 4, 12, // a.0 * a.1
            1, 1, 0, 0, 1, 3, 0, 2, 5, 0, 1, 2, 12, // (b.0 - 1) // 2 + 1
            1, 0, 0, 0, 3, 9, 0, 7, 0, 8, 11, 12, // select
            1, 1, 0, 0, 4, 7, 12, // min
        ];
        let args = [t(&[3, 5]), t(&[10])];
        assert_eq!(eval(&code, &args).unwrap(), vec![15, 5, 7, 4]);
        let other = [t(&[2, 5]), t(&[1])];
        assert_eq!(eval(&code, &other).unwrap(), vec![10, 1, 8, 1]);
        // Values of an integer argument, a passing check.
        let v = Tensor::from_slice(&[4i64, 9], &[2]).unwrap();
        let code = [13, 0, 1, 13, 0, 0, 7, 12, 0, 1, 14, 13, 0, 1, 12];
        assert_eq!(eval(&code, std::slice::from_ref(&v)).unwrap(), vec![4, 9]);
        let e = eval(&[13, 0, 2, 12], &[v]).unwrap_err().to_string();
        assert!(e.contains("value its argument does not have"), "{e}");
    }

    #[test]
    fn bad_programs_and_results_are_errors() {
        let args = [t(&[3])];
        for (code, why) in [
            (vec![1, 0, 1, 12], "do not have"),
            (vec![2], "underflow"),
            (vec![0, 4, 0, 0, 5, 12], "division by zero"),
            (vec![0, i64::MAX, 0, 2, 4, 12], "overflow"),
            (vec![0, 1, 0, 3, 3, 12], "comes out -2"),
            (vec![0], "cut short"),
            (vec![99], "unknown opcode 99"),
            (vec![13, 1, 0], "argument it does not have"),
            (vec![0, 0, 14], "do not fit"),
        ] {
            let e = eval(&code, &args).unwrap_err().to_string();
            assert!(e.contains(why), "{code:?}: {e}");
        }
    }
}
