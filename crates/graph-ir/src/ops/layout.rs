//! Reshaping and permuting: `Reshape`, `Flatten`, `Transpose`.

use super::{Cost, OpSpec, expect_inputs, resolve_axis};
use crate::tensor::Fact;

/// ONNX `Reshape` with a constant target shape (`0` copies the input
/// dimension unless `allowzero`, `-1` is inferred).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reshape {
    pub shape: Vec<i64>,
    pub allowzero: bool,
}

/// Resolves an ONNX reshape target against an input shape.
pub fn reshape_target(input: &[usize], target: &[i64], allowzero: bool) -> Result<Vec<usize>, String> {
    let volume: usize = input.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(
                *input
                    .get(i)
                    .ok_or_else(|| format!("0 at position {i} has no input dimension to copy"))?,
            ),
            t if t >= 0 => out.push(t as usize),
            _ => return Err(format!("invalid reshape target {target:?}")),
        }
    }
    let known = out
        .iter()
        .try_fold(1usize, |p, &d| p.checked_mul(d))
        .ok_or_else(|| format!("reshape target {target:?} is too large"))?;
    if let Some(i) = infer_at {
        if known == 0 || !volume.is_multiple_of(known) {
            return Err(format!("cannot reshape {input:?} to {target:?}"));
        }
        out[i] = volume / known;
    } else if known != volume {
        return Err(format!("cannot reshape {input:?} ({volume} elements) to {target:?}"));
    }
    Ok(out)
}

impl OpSpec for Reshape {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let shape = reshape_target(&inputs[0].shape, &self.shape, self.allowzero)?;
        Ok(vec![Fact::new(inputs[0].dtype, shape)])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}

/// ONNX `Flatten`: dimensions before `axis` become one, the rest another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flatten {
    pub axis: i64,
}

impl OpSpec for Flatten {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        let r = x.rank() as i64;
        if self.axis < -r || self.axis > r {
            return Err(format!("axis {} is out of range for {x}", self.axis));
        }
        let axis = if self.axis < 0 { self.axis + r } else { self.axis } as usize;
        let outer: usize = x.shape[..axis].iter().product();
        let inner: usize = x.shape[axis..].iter().product();
        Ok(vec![Fact::new(x.dtype, [outer, inner])])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}

/// ONNX `Transpose` with an explicit permutation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transpose {
    pub perm: Vec<usize>,
}

impl OpSpec for Transpose {
    fn infer(&self, inputs: &[&Fact]) -> Result<Vec<Fact>, String> {
        expect_inputs(inputs, 1, 1)?;
        let x = inputs[0];
        let mut seen = vec![false; x.rank()];
        if self.perm.len() != x.rank() {
            return Err(format!("perm {:?} does not match {x}", self.perm));
        }
        for &p in &self.perm {
            let axis = resolve_axis(p as i64, x.rank())?;
            if std::mem::replace(&mut seen[axis], true) {
                return Err(format!("perm {:?} repeats axis {axis}", self.perm));
            }
        }
        Ok(vec![Fact::new(
            x.dtype,
            self.perm.iter().map(|&p| x.shape[p]).collect::<Vec<_>>(),
        )])
    }

    fn cost(&self, _inputs: &[&Fact], _outputs: &[Fact]) -> Cost {
        Cost::default()
    }
}

#[cfg(test)]
mod tests {
    use super::reshape_target;

    #[test]
    fn reshape_rules() {
        assert_eq!(reshape_target(&[1, 512, 1, 1], &[1, -1], false).unwrap(), [1, 512]);
        assert_eq!(reshape_target(&[2, 3, 4], &[0, -1], false).unwrap(), [2, 12]);
        assert!(reshape_target(&[2, 3], &[4, -1], false).is_err());
    }
}
