//! The memory a spec's weights take, checked before any is allocated.
//!
//! libtorch cannot be asked whether a tensor fits: when its allocator
//! refuses, tch panics inside `VarStore`, and a process that would have to
//! page 1.6 PB in is not told so in one line. The sizes a user controls are
//! the MLP's hidden widths, the members of an ensemble, and the classes and
//! input size of the data; everything else is the fixed body of a registered
//! architecture (at most ViT-B/16's 86 M parameters). So the check counts the
//! layers those sizes scale, exactly for the MLP and through a bound on the
//! feature width ([`MAX_FEATURE_WIDTH`]) for the classifier of the others,
//! and refuses weights larger than the machine's memory.

use super::{Ensemble, InputShape, ModelError, ModelSpec};

/// The widest features any registered architecture gives its classifier
/// (ResNet-50's are 2,048; a test builds each one and checks the bound).
pub(crate) const MAX_FEATURE_WIDTH: u128 = 4096;

/// Bytes of one float32 weight.
const WEIGHT_BYTES: u128 = 4;

/// Refuses `spec` for `input` and `n_classes` when the weights of its
/// scalable layers alone take more bytes than the machine's memory (where the
/// system says how much it has).
pub(crate) fn check_fits(
    spec: &ModelSpec,
    input: InputShape,
    n_classes: i64,
) -> Result<(), ModelError> {
    let Some(memory) = machine_memory() else {
        return Ok(());
    };
    let bytes = scaled_weights(spec, input, n_classes) * WEIGHT_BYTES;
    if bytes <= u128::from(memory) {
        return Ok(());
    }
    Err(ModelError::TooLarge {
        weights: in_units(bytes),
        memory: in_units(u128::from(memory)),
        sizes: sizes(spec, n_classes),
    })
}

/// The weights of the layers whose size the user sets: the MLP's every
/// layer, another architecture's classifier, each counted with its members
/// (BatchEnsemble's fast weights, MIMO's wider input and output layers).
fn scaled_weights(spec: &ModelSpec, input: InputShape, n_classes: i64) -> u128 {
    let (shared_members, io_members) = match spec.ensemble {
        Ensemble::Single => (0, 1),
        Ensemble::BatchEnsemble { size, .. } => (width(size), 1),
        Ensemble::Mimo { size, .. } => (0, width(size)),
    };
    let classes = width(n_classes) * io_members;
    let widths: Vec<u128> = if spec.arch.takes_hidden_widths() {
        let features = width(input.channels) * width(input.height) * width(input.width);
        std::iter::once(features * io_members)
            .chain(spec.hidden_widths().into_iter().map(width))
            .chain(std::iter::once(classes))
            .collect()
    } else {
        vec![MAX_FEATURE_WIDTH, classes]
    };
    widths
        .windows(2)
        .map(|pair| {
            let (inputs, outputs) = (pair[0], pair[1]);
            // Weight and bias, and a member's fast weights on both sides and its own bias.
            inputs * outputs + outputs + shared_members * (inputs + 2 * outputs)
        })
        .sum()
}

/// `bytes` in the largest binary unit that leaves at least 1 (`23.4 GiB`).
fn in_units(bytes: u128) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A size as a count (0 for the negative sizes other checks refuse).
fn width(size: i64) -> u128 {
    u128::try_from(size).unwrap_or(0)
}

/// The sizes that scale the weights, as the message names them.
fn sizes(spec: &ModelSpec, n_classes: i64) -> String {
    let mut named = vec![format!("{n_classes} classes")];
    if spec.arch.takes_hidden_widths() {
        named.push(format!("mlp_hidden {:?}", spec.hidden_widths()));
    }
    if !spec.ensemble.is_single() {
        named.push(format!(
            "ensemble {} of {}",
            spec.ensemble.name(),
            spec.ensemble.members()
        ));
    }
    named.join(", ")
}

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`);
/// `None` where the system does not say, and the check is then skipped.
fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{build_model_with, ModelKind};
    use tch::{nn::VarStore, Device};

    fn shape(channels: i64, height: i64, width: i64) -> InputShape {
        InputShape {
            channels,
            height,
            width,
        }
    }

    #[test]
    fn the_mlps_weights_are_counted_exactly() {
        let spec = ModelSpec {
            mlp_hidden: Some(vec![5, 4]),
            ..ModelSpec::of("mlp".parse().unwrap())
        };
        let input = shape(1, 2, 3);
        // (6 + 1) 5 + (5 + 1) 4 + (4 + 1) 3, as the built model holds.
        assert_eq!(scaled_weights(&spec, input, 3), 35 + 24 + 15);
        let vs = VarStore::new(Device::Cpu);
        build_model_with(&spec, &vs.root(), input, 3).unwrap();
        let held: i64 = vs
            .trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum();
        assert_eq!(held, 74);
    }

    #[test]
    fn the_feature_bound_holds_for_every_architecture() {
        tch::set_num_threads(1);
        for kind in ModelKind::all().filter(|kind| kind.name() != "torchscript") {
            let vs = VarStore::new(Device::Cpu);
            let input = shape(3, 32, 32);
            let model = build_model_with(&ModelSpec::of(kind), &vs.root(), input, 2).unwrap();
            let features = model.network.feature_width();
            assert!(
                (features as u128) <= MAX_FEATURE_WIDTH,
                "{kind}: {features} features"
            );
        }
    }

    #[test]
    fn weights_beyond_the_machines_memory_are_refused_before_any_is_allocated() {
        let Some(memory) = machine_memory() else {
            return;
        };
        let huge_mlp = ModelSpec {
            mlp_hidden: Some(vec![100_000_000_000, 256]),
            ..ModelSpec::of("mlp".parse().unwrap())
        };
        let members = ModelSpec {
            ensemble: Ensemble::BatchEnsemble {
                size: 100_000_000_000,
                random_sign_init: 0.5,
            },
            ..ModelSpec::of("cnn".parse().unwrap())
        };
        let cnn = ModelSpec::of("cnn".parse().unwrap());
        let cases = [
            (&huge_mlp, 10, "mlp_hidden [100000000000, 256]"),
            (&members, 10, "ensemble batch-ensemble of 100000000000"),
            (&cnn, 1_000_000_000_000, "1000000000000 classes"),
        ];
        for (spec, classes, named) in cases {
            let vs = VarStore::new(Device::Cpu);
            let error = build_model_with(spec, &vs.root(), shape(1, 28, 28), classes)
                .expect_err("too large")
                .to_string();
            assert!(error.contains(named) && !error.contains('\n'), "{error}");
            let machine = format!("more than this machine's {}", in_units(memory.into()));
            assert!(error.contains(&machine), "{error}");
            assert!(vs.variables().is_empty(), "allocated before refusing");
        }
        // A model that fits is built.
        let vs = VarStore::new(Device::Cpu);
        build_model_with(&cnn, &vs.root(), shape(1, 28, 28), 10).unwrap();
    }
}
