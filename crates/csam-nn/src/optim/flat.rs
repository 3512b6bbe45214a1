//! Flat copies of tensor lists: one kernel to gather many tensors into a
//! contiguous buffer and one to scatter it back, instead of one per tensor (a
//! ResNet-20 has 65 parameter tensors; on a GPU the per-tensor launches would
//! cost more than the arithmetic).
//!
//! A flat buffer holds every tensor's elements in logical (row-major index)
//! order, whatever the tensor's strides: a channels_last convolution weight
//! (`model::memory_format`) and its gradient flatten to the same values, in
//! the same order, as their contiguous twins, so optimiser state, SAM's saved
//! weights and checkpoints do not depend on the layout.

use super::OptimError;
use tch::Tensor;

/// The tensors as 1-D tensors in logical order: views sharing their storage
/// for contiguous tensors, copies for the others (a channels_last weight
/// has no 1-D view in logical order).
fn flat_values(tensors: &[Tensor]) -> Result<Vec<Tensor>, OptimError> {
    tensors
        .iter()
        .map(|t| Ok(t.detach().f_reshape([-1])?))
        .collect()
}

/// The concatenation of the flattened tensors (a new buffer).
pub(crate) fn flatten(tensors: &[Tensor]) -> Result<Tensor, OptimError> {
    Ok(Tensor::f_cat(&flat_values(tensors)?, 0)?)
}

/// Writes consecutive chunks of the 1-D `values` into `tensors`: one
/// operation into 1-D views of them when every tensor is contiguous, else
/// one copy per tensor, each chunk shaped like its tensor (a copy writes
/// through the destination's strides).
pub(crate) fn scatter(values: &Tensor, tensors: &[Tensor]) -> Result<(), OptimError> {
    let sizes: Vec<i64> = tensors.iter().map(|t| t.numel() as i64).collect();
    let _guard = tch::no_grad_guard();
    if tensors.iter().all(Tensor::is_contiguous) {
        values.f_split_with_sizes_copy_out(&flat_values(tensors)?, sizes.as_slice(), 0)?;
        return Ok(());
    }
    let chunks = values.f_split_with_sizes(sizes.as_slice(), 0)?;
    for (chunk, tensor) in chunks.iter().zip(tensors) {
        tensor
            .detach()
            .f_copy_(&chunk.f_view(tensor.size().as_slice())?)?;
    }
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
        let _ = Tensor::f_cat_out(&self.flat, &flat_values(tensors)?, 0)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory_format::{is_channels_last, MemoryFormat};
    use tch::{Device, Kind};

    /// A convolution weight and a bias, contiguous, and the same values with
    /// the weight in channels_last.
    fn twins() -> (Vec<Tensor>, Vec<Tensor>) {
        let w = Tensor::randn([4, 3, 2, 5], (Kind::Float, Device::Cpu));
        let b = Tensor::randn([4], (Kind::Float, Device::Cpu));
        let nhwc = MemoryFormat::ChannelsLast.apply(&w);
        assert!(is_channels_last(&nhwc) && !nhwc.is_contiguous());
        (vec![w, b.copy()], vec![nhwc, b])
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    #[test]
    fn flatten_gives_logical_order_whatever_the_layout() {
        let (contiguous, nhwc) = twins();
        let flat = flatten(&nhwc).unwrap();
        assert_eq!(flat.size(), vec![4 * 3 * 2 * 5 + 4]);
        // Bitwise (a copy, no arithmetic): the order of a row-major walk over
        // [O, I, H, W].
        assert_eq!(max_diff(&flat, &flatten(&contiguous).unwrap()), 0.0);
        let by_index = Tensor::cat(
            &[contiguous[0].reshape([-1]), contiguous[1].shallow_clone()],
            0,
        );
        assert_eq!(max_diff(&flat, &by_index), 0.0);
    }

    #[test]
    fn scatter_and_flat_copies_write_through_the_layout() {
        let (contiguous, nhwc) = twins();
        let values = Tensor::arange(4 * 3 * 2 * 5 + 4, (Kind::Float, Device::Cpu));
        scatter(&values, &nhwc).unwrap();
        scatter(&values, &contiguous).unwrap();
        assert!(is_channels_last(&nhwc[0]), "the weight keeps its layout");
        // Copies move values without arithmetic: exact equality on every CPU.
        assert_eq!(max_diff(&nhwc[0], &contiguous[0]), 0.0);
        assert_eq!(max_diff(&flatten(&nhwc).unwrap(), &values), 0.0);
        // A saved copy restores the values into the channels_last weight.
        let mut saved = FlatCopy::new(&nhwc).unwrap();
        let _ = nhwc[0].detach().fill_(7.0);
        saved.restore(&nhwc).unwrap();
        assert_eq!(max_diff(&nhwc[0], &contiguous[0]), 0.0);
        let _ = nhwc[1].detach().fill_(-1.0);
        saved.capture(&nhwc).unwrap();
        assert_eq!(
            max_diff(&saved.values().narrow(0, 0, 120), &values.narrow(0, 0, 120)),
            0.0
        );
        assert_eq!(
            saved
                .values()
                .narrow(0, 120, 4)
                .abs()
                .sum(Kind::Float)
                .double_value(&[]),
            4.0
        );
    }
}
