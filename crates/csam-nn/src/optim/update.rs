//! Where a base optimiser's elementwise update runs: on each parameter
//! tensor in place, or on one flat copy of them all.
//!
//! The update is the same elementwise arithmetic either way, so both give the
//! same bits; what differs is the cost. On the CPU an operation costs its
//! memory traffic: updating each tensor in place reads and writes every value
//! once per operation, where a flat copy adds a gather, a scatter and a
//! temporary per operation (on an MLP step, a fifth of the time). On a GPU
//! an operation costs a kernel launch: a ResNet-20 has 65 parameter tensors,
//! so one flat buffer runs a few kernels where the tensors would run a few
//! hundred. This is the choice `torch.optim` makes by default: its for-loop
//! implementation on the CPU, its multi-tensor (`_foreach`) one on CUDA.

use super::flat::{chunk_views, flatten, scatter};
use super::OptimError;
use tch::{Device, Tensor};

/// Where [`update_elementwise`] runs an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// On each parameter tensor in place.
    PerTensor,
    /// On one flat copy of all parameters, written back after.
    Flat,
}

impl Layout {
    /// Per tensor on the CPU, flat elsewhere (module docs).
    fn for_device(device: Device) -> Layout {
        match device {
            Device::Cpu => Layout::PerTensor,
            _ => Layout::Flat,
        }
    }
}

/// Runs `update(theta, grad, state)` once per parameter tensor on the CPU, or
/// once on all of them flattened elsewhere, where `theta` must be updated in
/// place (it is the parameter itself, or a flat copy written back after),
/// `grad` is its gradient and `state` holds the matching parts of each
/// per-parameter state buffer in `buffers` (flat, parameter after parameter,
/// as [`chunk_views`] lays them out), to update in place. Runs without
/// gradient tracking.
pub(crate) fn update_elementwise<F>(
    params: &[Tensor],
    grads: &[Tensor],
    buffers: &[&Tensor],
    update: F,
) -> Result<(), OptimError>
where
    F: FnMut(&mut Tensor, &Tensor, &mut [Tensor]) -> Result<(), OptimError>,
{
    let Some(first) = params.first() else {
        return Ok(());
    };
    update_in(
        Layout::for_device(first.device()),
        params,
        grads,
        buffers,
        update,
    )
}

/// [`update_elementwise`] in `layout`.
fn update_in<F>(
    layout: Layout,
    params: &[Tensor],
    grads: &[Tensor],
    buffers: &[&Tensor],
    mut update: F,
) -> Result<(), OptimError>
where
    F: FnMut(&mut Tensor, &Tensor, &mut [Tensor]) -> Result<(), OptimError>,
{
    let _guard = tch::no_grad_guard();
    if layout == Layout::Flat {
        let mut theta = flatten(params)?;
        let mut state: Vec<Tensor> = buffers.iter().map(|b| b.shallow_clone()).collect();
        update(&mut theta, &flatten(grads)?, &mut state)?;
        return scatter(&theta, params);
    }
    let parts = buffers
        .iter()
        .map(|b| chunk_views(b, params))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, (param, grad)) in params.iter().zip(grads).enumerate() {
        let mut theta = param.shallow_clone();
        let mut state: Vec<Tensor> = parts.iter().map(|p| p[i].shallow_clone()).collect();
        update(&mut theta, grad, &mut state)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    /// Both layouts give the same bits: a momentum-and-decay update (SGD's
    /// arithmetic) from the same start, over parameters of several shapes.
    #[test]
    fn both_layouts_give_the_same_bits() {
        let shapes: [&[i64]; 4] = [&[7, 5], &[5], &[3, 2, 4, 4], &[1]];
        let start: Vec<Tensor> = shapes
            .iter()
            .map(|s| Tensor::randn(*s, (Kind::Float, Device::Cpu)))
            .collect();
        let grads: Vec<Tensor> = shapes
            .iter()
            .map(|s| Tensor::randn(*s, (Kind::Float, Device::Cpu)))
            .collect();
        let run = |layout: Layout| {
            let params: Vec<Tensor> = start.iter().map(Tensor::copy).collect();
            let buffer = flatten(&grads).unwrap().zeros_like() + 0.25;
            for _ in 0..3 {
                update_in(layout, &params, &grads, &[&buffer], |theta, grad, state| {
                    let direction = grad.f_add(&theta.f_mul_scalar(5e-4)?)?;
                    let _ = state[0].f_mul_scalar_(0.9)?.f_add_(&direction)?;
                    let _ = theta.f_add_(&state[0].f_mul_scalar(-0.1)?)?;
                    Ok(())
                })
                .unwrap();
            }
            (flatten(&params).unwrap(), buffer)
        };
        let (flat, flat_buffer) = run(Layout::Flat);
        let (each, each_buffer) = run(Layout::PerTensor);
        // Elementwise float32 ops only, each one IEEE rounding in SIMD and
        // scalar loops alike (no reductions): equal bits on every CPU.
        assert!(flat.equal(&each), "parameters differ between layouts");
        assert!(
            flat_buffer.equal(&each_buffer),
            "state differs between layouts"
        );
        assert!(
            !flat.equal(&flatten(&start).unwrap()),
            "nothing was updated"
        );
    }
}
