//! Memory formats: how a convolutional model lays out its 4-D tensors, as
//! `model.to(memory_format=torch.channels_last)` and
//! `x.to(memory_format=torch.channels_last)` do in PyTorch.
//!
//! A 4-D tensor keeps its logical shape `[N, C, H, W]` in either format;
//! only the strides differ. Contiguous (NCHW) has strides
//! `[C H W, H W, W, 1]`; channels_last (NHWC) has `[H W C, 1, W C, C]`, the
//! channels of one pixel side by side, which the convolution kernels of
//! oneDNN (CPU) and cuDNN (tensor cores) prefer. Every op reads a tensor by
//! its logical indices, so the values a model computes are the same in both
//! formats up to the order of floating-point sums inside the kernels.
//!
//! With [`MemoryFormat::ChannelsLast`], [`MemoryFormat::convert_variables`]
//! lays the model's 4-D weights out in channels_last once, after the model is
//! built, and [`super::Model`] converts every 4-D input batch before its
//! forward pass; the activations then stay channels_last through the
//! convolutions, BatchNorm, ReLU and pooling, and the weights' gradients
//! come back in their weights' layout. What reads a tensor's memory as a
//! flat array handles either layout: the optimisers' flat buffers are in
//! logical (NCHW) order (`optim/flat.rs`), and a saved weights file is
//! written in the standard layout, so it does not depend on the format
//! that trained it.
//!
//! libtorch's memory-format API is reached through a C++ shim
//! (`csrc/memory_format.cpp`): tch has no `contiguous(memory_format)`.

use std::ffi::{c_char, c_int, CStr};

use tch::nn::VarStore;
use tch::Tensor;
use torch_sys::C_tensor;

extern "C" {
    fn csam_memory_format_free_error(message: *mut c_char);
    fn csam_channels_last(input: *const C_tensor, out: *mut *mut C_tensor) -> *mut c_char;
    fn csam_is_channels_last(input: *const C_tensor) -> c_int;
}

/// The layout of a model's 4-D weights and input batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryFormat {
    /// NCHW strides, libtorch's default.
    #[default]
    Contiguous,
    /// NHWC strides (`torch.channels_last`).
    ChannelsLast,
}

impl MemoryFormat {
    /// Its name in a run specification.
    pub fn name(self) -> &'static str {
        match self {
            MemoryFormat::Contiguous => "contiguous",
            MemoryFormat::ChannelsLast => "channels_last",
        }
    }

    /// `t` in this format: a 4-D tensor in channels_last (sharing `t`'s
    /// storage when it already is), any other tensor, and every tensor in
    /// the contiguous format, as it is. Differentiable, as torch's
    /// `contiguous(memory_format=...)`.
    pub fn apply(self, t: &Tensor) -> Tensor {
        match self {
            MemoryFormat::ChannelsLast if t.dim() == 4 => {
                // Invariant: libtorch lays out any 4-D tensor in channels_last;
                // only an allocation can fail, which tch's own ops panic on too.
                channels_last(t).unwrap_or_else(|e| panic!("channels_last copy: {e}"))
            }
            _ => t.shallow_clone(),
        }
    }

    /// Lays out every 4-D floating-point variable of `vs` (the convolution
    /// weights) in this format, in place: the variables keep their identity
    /// (an optimiser holding them sees the new layout) and values. Nothing
    /// for the contiguous format, in which `VarStore` creates variables.
    pub fn convert_variables(self, vs: &VarStore) {
        if self == MemoryFormat::Contiguous {
            return;
        }
        for (_, mut variable) in vs.variables() {
            if variable.dim() == 4 && variable.is_floating_point() {
                let converted = tch::no_grad(|| self.apply(&variable));
                // `set_data` swaps the storage of the variable every handle
                // shares (the `VarStore`'s, the model's), as
                // `Module._apply` does for `model.to(memory_format=...)`.
                variable.set_data(&converted);
            }
        }
    }
}

/// `t` (4-D) in channels_last.
fn channels_last(t: &Tensor) -> Result<Tensor, String> {
    let mut out = std::ptr::null_mut();
    // SAFETY: `t` is a live tensor; on success `out` is a new handle we own.
    let message = unsafe { csam_channels_last(t.as_ptr(), &mut out) };
    if message.is_null() {
        // SAFETY: the shim returned a handle it allocated for us.
        return Ok(unsafe { Tensor::from_ptr(out) });
    }
    // SAFETY: a non-null result is a NUL-terminated string the shim allocated
    // and hands over; it is freed once, here.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    unsafe { csam_memory_format_free_error(message) };
    Err(text)
}

/// Whether `t` is laid out in channels_last (`t.is_contiguous(
/// memory_format=torch.channels_last)`): a 4-D tensor with NHWC strides.
/// Both formats hold for a tensor whose strides do not tell them apart
/// (one channel, or a 1 x 1 image).
pub fn is_channels_last(t: &Tensor) -> bool {
    // SAFETY: the shim only reads the live tensor's sizes and strides.
    unsafe { csam_is_channels_last(t.as_ptr()) != 0 }
}

impl std::str::FromStr for MemoryFormat {
    type Err = String;

    fn from_str(name: &str) -> Result<MemoryFormat, String> {
        [MemoryFormat::Contiguous, MemoryFormat::ChannelsLast]
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| format!("unknown memory format {name:?}: contiguous or channels_last"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn channels_last_keeps_values_and_sets_nhwc_strides() {
        let t = Tensor::randn([2, 3, 4, 5], (Kind::Float, Device::Cpu));
        let c = MemoryFormat::ChannelsLast.apply(&t);
        assert_eq!(c.size(), t.size());
        assert_eq!(c.stride(), vec![60, 1, 15, 3]);
        assert!(is_channels_last(&c) && !c.is_contiguous());
        assert!(!is_channels_last(&t));
        // A layout change copies values without arithmetic: exact.
        assert_eq!((&c - &t).abs().max().double_value(&[]), 0.0);
        // Other ranks, and the contiguous format, leave tensors as they are.
        let v = Tensor::randn([4, 5], (Kind::Float, Device::Cpu));
        assert_eq!(MemoryFormat::ChannelsLast.apply(&v).stride(), v.stride());
        assert_eq!(MemoryFormat::Contiguous.apply(&c).stride(), c.stride());
    }

    #[test]
    fn convert_variables_changes_the_shared_layout_of_4d_variables_only() {
        let vs = VarStore::new(Device::Cpu);
        let w = vs.root().randn_standard("w", &[4, 3, 3, 3]);
        let b = vs.root().zeros("b", &[4]);
        let before = w.copy();
        MemoryFormat::ChannelsLast.convert_variables(&vs);
        // The handle the model holds sees the new layout.
        assert!(is_channels_last(&w) && !w.is_contiguous());
        assert!(w.requires_grad());
        // A copy without arithmetic: exact.
        assert_eq!((&w - &before).abs().max().double_value(&[]), 0.0);
        assert_eq!(b.stride(), vec![1]);
    }

    /// A model converts its batch: with its weights left contiguous
    /// (`build_model_with`), a channels_last model's convolutions still run
    /// in NHWC, which shows in their weights' gradients' strides.
    #[test]
    fn forward_passes_convert_the_batch() {
        use crate::model::{build_model_with, InputShape, ModelSpec};
        let input = InputShape {
            channels: 3,
            height: 6,
            width: 5,
        };
        let xs = Tensor::randn([4, 3, 6, 5], (Kind::Float, Device::Cpu));
        for format in [MemoryFormat::Contiguous, MemoryFormat::ChannelsLast] {
            let vs = VarStore::new(Device::Cpu);
            let spec = ModelSpec {
                memory_format: format,
                ..ModelSpec::of("cnn".parse().unwrap())
            };
            let model = build_model_with(&spec, &vs.root(), input, 4).unwrap();
            let weights: Vec<Tensor> = vs
                .trainable_variables()
                .into_iter()
                .filter(|t| t.dim() == 4)
                .collect();
            assert!(!weights.is_empty() && weights.iter().all(Tensor::is_contiguous));
            let loss = model
                .forward_mode(&xs, super::super::Mode::Train)
                .sum(Kind::Float);
            let grads = Tensor::run_backward(&[&loss], &weights, false, false);
            let nhwc = grads.iter().all(is_channels_last);
            assert_eq!(nhwc, format == MemoryFormat::ChannelsLast, "{format:?}");
        }
    }

    /// The architectures without convolutions over feature maps refuse
    /// channels_last in one line that names those it applies to; the
    /// others build with it.
    #[test]
    fn non_convolutional_models_are_refused_in_one_line() {
        use crate::model::{build_model_with, InputShape, ModelSpec};
        let input = InputShape {
            channels: 3,
            height: 32,
            width: 32,
        };
        let build = |name: &str| {
            let vs = VarStore::new(Device::Cpu);
            let spec = ModelSpec {
                memory_format: MemoryFormat::ChannelsLast,
                // A TorchScript model names its file; the layout is refused
                // before the file is read.
                script: (name == "torchscript").then(|| "net.pt".into()),
                ..ModelSpec::of(name.parse().unwrap())
            };
            build_model_with(&spec, &vs.root(), input, 10).map(|_| ())
        };
        for name in ["mlp", "vit-ti16", "torchscript"] {
            let message = build(name).unwrap_err().to_string();
            assert!(!message.contains('\n'), "{message}");
            assert!(
                message.contains("memory_format = channels_last: applies only to cnn, resnet20,")
                    && message.ends_with(&format!("wrn-40-2, not {name}")),
                "{message}"
            );
        }
        for name in ["cnn", "resnet20", "resnet18-cifar"] {
            build(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    /// Members (BatchEnsemble, MIMO) and Gaussian layers (mean-field,
    /// rank-1) compute in channels_last what they compute contiguous, from
    /// the same weights and noise seed, to float tolerance.
    #[test]
    fn members_and_posteriors_compute_the_same_in_channels_last() {
        use crate::model::{build_model_in, Bayesian, Ensemble, InputShape, Mode, ModelSpec};
        let batch_ensemble = Ensemble::BatchEnsemble {
            size: 2,
            random_sign_init: -0.5,
        };
        let cases = [
            (batch_ensemble, Bayesian::None),
            (
                Ensemble::Mimo {
                    size: 2,
                    input_repetition: 0.0,
                    batch_repetitions: 1,
                },
                Bayesian::None,
            ),
            (
                Ensemble::Single,
                Bayesian::MeanField {
                    prior_std: 1.0,
                    tied_prior_mean: false,
                    stddev_init: 0.05,
                    samples: 2,
                    kl_annealing_epochs: 0,
                },
            ),
            (
                batch_ensemble,
                Bayesian::Rank1 {
                    prior_std: 0.1,
                    samples: 1,
                    kl_annealing_epochs: 0,
                },
            ),
        ];
        let input = InputShape {
            channels: 3,
            height: 6,
            width: 5,
        };
        let xs = Tensor::randn([4, 3, 6, 5], (Kind::Float, Device::Cpu));
        for (ensemble, bayesian) in cases {
            let logits = |memory_format, from: Option<&VarStore>| {
                let mut vs = VarStore::new(Device::Cpu);
                let spec = ModelSpec {
                    ensemble,
                    bayesian,
                    memory_format,
                    ..ModelSpec::of("cnn".parse().unwrap())
                };
                let model = build_model_in(&spec, &vs, input, 4)
                    .unwrap_or_else(|e| panic!("{ensemble:?} {bayesian:?}: {e}"));
                if let Some(from) = from {
                    vs.copy(from).unwrap();
                }
                model.set_noise_seed(3);
                let train = model.forward_mode(&xs, Mode::Train);
                (vs, train)
            };
            let (nhwc_vs, nhwc) = logits(MemoryFormat::ChannelsLast, None);
            let (_, plain) = logits(MemoryFormat::Contiguous, Some(&nhwc_vs));
            let d = (&nhwc - &plain).abs().max().double_value(&[]);
            // Float32, layouts run different kernels (reduction orders): convs
            // sum <= 576 terms, 576 * 1.19e-7 = 7e-5 relative per layer, ~2e-4
            // over three on logits ~0.3; a layout bug moves them by O(0.1).
            assert!(d < 1e-3, "{ensemble:?} {bayesian:?}: logits differ by {d}");
        }
    }

    /// A weights file is the same bytes whichever layout the model holds
    /// (`weights::save_safetensors` writes the standard one).
    #[test]
    fn saved_weights_do_not_depend_on_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let saved = |format: MemoryFormat| {
            let vs = VarStore::new(Device::Cpu);
            let root = vs.root();
            let _ = root.var_copy(
                "conv",
                &Tensor::arange(2 * 3 * 4 * 5, (Kind::Float, Device::Cpu)).reshape([2, 3, 4, 5]),
            );
            let _ = root.var_copy("bias", &Tensor::arange(2, (Kind::Float, Device::Cpu)));
            format.convert_variables(&vs);
            let path = dir.path().join(format!("{}.safetensors", format.name()));
            crate::model::weights::save_safetensors(&vs, &path).unwrap();
            std::fs::read(path).unwrap()
        };
        assert_eq!(
            saved(MemoryFormat::ChannelsLast),
            saved(MemoryFormat::Contiguous)
        );
    }

    #[test]
    fn names_parse_back() {
        for f in [MemoryFormat::Contiguous, MemoryFormat::ChannelsLast] {
            assert_eq!(f.name().parse::<MemoryFormat>(), Ok(f));
        }
        assert!("nhwc"
            .parse::<MemoryFormat>()
            .unwrap_err()
            .contains("channels_last"));
    }
}
