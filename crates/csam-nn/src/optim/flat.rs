//! Flat copies of tensor lists: one kernel to gather many tensors into a
//! contiguous buffer and one to scatter it back, instead of one per tensor (a
//! ResNet-20 has 65 parameter tensors; on a GPU the per-tensor launches would
//! cost more than the arithmetic).

use super::OptimError;
use tch::Tensor;

/// The tensors as 1-D views sharing their storage (writes go to the tensors).
/// Fails for a non-contiguous tensor, which no `VarStore` variable is.
fn views(tensors: &[Tensor]) -> Result<Vec<Tensor>, OptimError> {
    tensors
        .iter()
        .map(|t| Ok(t.detach().f_view([-1])?))
        .collect()
}

/// The concatenation of the flattened tensors (a new buffer).
pub(crate) fn flatten(tensors: &[Tensor]) -> Result<Tensor, OptimError> {
    Ok(Tensor::f_cat(&views(tensors)?, 0)?)
}

/// Writes consecutive chunks of the 1-D `values` into `tensors` (one operation).
pub(crate) fn scatter(values: &Tensor, tensors: &[Tensor]) -> Result<(), OptimError> {
    let sizes: Vec<i64> = tensors.iter().map(|t| t.numel() as i64).collect();
    let _guard = tch::no_grad_guard();
    values.f_split_with_sizes_copy_out(&views(tensors)?, sizes.as_slice(), 0)?;
    Ok(())
}

/// A saved copy of a list of tensors in one contiguous buffer, reused across
/// captures while the tensors keep their shapes, kind and device.
#[derive(Debug)]
pub(crate) struct FlatCopy {
    shapes: Vec<Vec<i64>>,
    flat: Tensor,
}

impl FlatCopy {
    /// A copy of the current values of `tensors` (at least one).
    pub(crate) fn new(tensors: &[Tensor]) -> Result<Self, OptimError> {
        let _guard = tch::no_grad_guard();
        Ok(Self {
            shapes: tensors.iter().map(|t| t.size()).collect(),
            flat: flatten(tensors)?,
        })
    }

    /// Whether `tensors` have the layout this copy was made for.
    pub(crate) fn fits(&self, tensors: &[Tensor]) -> bool {
        let (kind, device) = (self.flat.kind(), self.flat.device());
        self.shapes.len() == tensors.len()
            && self
                .shapes
                .iter()
                .zip(tensors)
                .all(|(s, t)| *s == t.size() && t.kind() == kind && t.device() == device)
    }

    /// Saves the current values of `tensors` (same layout) into the buffer.
    pub(crate) fn capture(&mut self, tensors: &[Tensor]) -> Result<(), OptimError> {
        let _guard = tch::no_grad_guard();
        let _ = Tensor::f_cat_out(&self.flat, &views(tensors)?, 0)?;
        Ok(())
    }

    /// Writes the saved values back into `tensors` (exact copy).
    pub(crate) fn restore(&self, tensors: &[Tensor]) -> Result<(), OptimError> {
        scatter(&self.flat, tensors)
    }

    /// The saved values, flattened and concatenated.
    pub(crate) fn values(&self) -> &Tensor {
        &self.flat
    }
}

/// Views of consecutive chunks of the 1-D `flat`, shaped like `like` (writes
/// through a view change `flat`).
pub(crate) fn chunk_views(flat: &Tensor, like: &[Tensor]) -> Result<Vec<Tensor>, OptimError> {
    let mut offset = 0;
    like.iter()
        .map(|t| {
            let n = t.numel() as i64;
            let view = flat.f_narrow(0, offset, n)?.f_view(t.size().as_slice())?;
            offset += n;
            Ok(view)
        })
        .collect()
}
