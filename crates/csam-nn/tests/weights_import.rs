//! Safetensors import into a model (`csam train --init`, a run's best
//! model): exact shapes, all variables present, floating-point values
//! converted to the model's kind, malformed files refused before any
//! allocation, and a refused file leaves the model as it was.

use std::path::Path;

use csam_nn::model::weights::{
    load_safetensors, load_safetensors_file, load_safetensors_with, LoadOptions, WeightsError,
};
use csam_nn::model::{build_model_with, InputShape, Model, ModelSpec};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// A tiny MLP (4 inputs, one hidden layer of 3, 2 classes).
fn model() -> VarStore {
    mlp_of(2).0
}

/// The tiny MLP with `classes` outputs.
fn mlp_of(classes: i64) -> (VarStore, Model) {
    let vs = VarStore::new(Device::Cpu);
    let spec = ModelSpec {
        mlp_hidden: Some(vec![3]),
        ..ModelSpec::of("mlp".parse().unwrap())
    };
    let input = InputShape {
        channels: 1,
        height: 2,
        width: 2,
    };
    let model = build_model_with(&spec, &vs.root(), input, classes).unwrap();
    (vs, model)
}

/// The variables as (name, tensor) sorted by name, deep-copied.
fn snapshot(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut variables: Vec<_> = vs
        .variables()
        .into_iter()
        .map(|(name, t)| (name, t.detach().copy()))
        .collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    variables
}

/// Every variable of `vs` filled with `value`, with `edit` applied to the
/// (name, tensor) list before it is written to safetensors bytes.
fn file_with(vs: &VarStore, value: f64, edit: impl FnOnce(&mut Vec<(String, Tensor)>)) -> Vec<u8> {
    let mut tensors: Vec<(String, Tensor)> = snapshot(vs)
        .into_iter()
        .map(|(name, t)| (name, t.fill(value)))
        .collect();
    edit(&mut tensors);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.safetensors");
    Tensor::write_safetensors(&tensors, &path).unwrap();
    std::fs::read(path).unwrap()
}

fn assert_unchanged(vs: &VarStore, before: &[(String, Tensor)]) {
    for ((name, now), (_, then)) in snapshot(vs).iter().zip(before) {
        assert!(now.equal(then), "{name} changed by a refused file");
    }
}

#[test]
fn saved_weights_load_back_exactly() {
    let source = model();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    source.save(&path).unwrap();
    let target = model();
    load_safetensors_file(&target, &path).unwrap();
    for ((name, a), (_, b)) in snapshot(&source).iter().zip(&snapshot(&target)) {
        assert!(a.equal(b), "{name} differs after the round trip");
    }
}

#[test]
fn a_broadcastable_shape_is_refused_not_broadcast() {
    let vs = model();
    let before = snapshot(&vs);
    let target = before.iter().find(|(_, t)| t.dim() == 2).unwrap().0.clone();
    let bytes = file_with(&vs, 0.5, |tensors| {
        let entry = tensors.iter_mut().find(|(n, _)| *n == target).unwrap();
        // One row: tch's VarStore::load would broadcast it into every row.
        let columns = entry.1.size()[1];
        entry.1 = Tensor::ones([1, columns], (Kind::Float, Device::Cpu));
    });
    match load_safetensors(&vs, &bytes, Path::new("w.safetensors")) {
        Err(WeightsError::Tensor { name, reason, .. }) => {
            assert_eq!(name, target);
            assert!(reason.contains("shape"), "{reason}");
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert_unchanged(&vs, &before);
}

#[test]
fn a_classifier_for_other_classes_is_refused_or_kept_fresh() {
    // Weights of the same network trained on 5 classes.
    let (other, _) = mlp_of(5);
    let bytes = file_with(&other, 0.5, |_| {});
    let (vs, model) = mlp_of(2);
    let before = snapshot(&vs);
    match load_safetensors(&vs, &bytes, Path::new("w.safetensors")) {
        Err(WeightsError::Tensor { name, reason, .. }) => {
            assert!(name.starts_with("3."), "{name}");
            assert!(reason.contains("shape [5"), "{reason}");
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert_unchanged(&vs, &before);
    // The output layer (`3.*` in the twin's Sequential) keeps its own values,
    // every other layer takes the file's.
    let kept = model
        .classifier_names()
        .expect("the MLP names its classifier");
    assert_eq!(kept, ["3"]);
    let options = LoadOptions {
        kept: &kept,
        ..LoadOptions::default()
    };
    load_safetensors_with(&vs, &bytes, Path::new("w.safetensors"), options).unwrap();
    for ((name, now), (_, then)) in snapshot(&vs).iter().zip(&before) {
        match name.starts_with("3.") {
            true => assert!(now.equal(then), "{name} was overwritten"),
            false => assert_eq!(now.max().double_value(&[]), 0.5, "{name}"),
        }
    }
}

#[test]
fn a_missing_tensor_is_refused_and_extras_are_ignored() {
    let vs = model();
    let before = snapshot(&vs);
    let dropped = before[0].0.clone();
    let bytes = file_with(&vs, 0.5, |tensors| {
        tensors.retain(|(n, _)| *n != dropped);
    });
    match load_safetensors(&vs, &bytes, Path::new("w.safetensors")) {
        Err(WeightsError::Tensor { name, reason, .. }) => {
            assert_eq!((name, reason.as_str()), (dropped, "missing from the file"))
        }
        other => panic!("expected a missing-tensor error, got {other:?}"),
    }
    assert_unchanged(&vs, &before);

    let extra = file_with(&vs, 0.5, |tensors| {
        let counter = Tensor::from_slice(&[7i64]);
        tensors.push(("bn.num_batches_tracked".into(), counter));
    });
    load_safetensors(&vs, &extra, Path::new("w.safetensors")).unwrap();
    for (name, t) in snapshot(&vs) {
        assert_eq!(t.max().double_value(&[]), 0.5, "{name}");
    }
}

#[test]
fn float64_values_load_into_a_float32_model_which_stays_float32() {
    let vs = model();
    let bytes = file_with(&vs, 0.25, |tensors| {
        for entry in tensors.iter_mut() {
            entry.1 = entry.1.to_kind(Kind::Double);
        }
    });
    load_safetensors(&vs, &bytes, Path::new("w.safetensors")).unwrap();
    for (name, t) in snapshot(&vs) {
        assert_eq!(t.kind(), Kind::Float, "{name}");
        assert_eq!(t.min().double_value(&[]), 0.25, "{name}");
    }
    let integers = file_with(&vs, 1.0, |tensors| {
        for entry in tensors.iter_mut() {
            entry.1 = entry.1.to_kind(Kind::Int64);
        }
    });
    assert!(matches!(
        load_safetensors(&vs, &integers, Path::new("w.safetensors")),
        Err(WeightsError::Tensor { .. })
    ));
}

/// A safetensors file: the u64 little-endian header length, the JSON header,
/// then the data.
fn raw(header_len: u64, header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = header_len.to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn absurd_headers_are_refused_before_allocating() {
    let vs = model();
    let before = snapshot(&vs);
    let name = Path::new("w.safetensors");
    // A header length of 10^12 bytes in a file of a few bytes.
    let huge_header = raw(1_000_000_000_000, "{}", &[]);
    assert!(matches!(
        load_safetensors(&vs, &huge_header, name),
        Err(WeightsError::Format { .. })
    ));
    // A tensor of 10^12 float32 elements whose data would lie far beyond the
    // end of the file.
    let header =
        r#"{"w":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4000000000000]}}"#;
    let huge_tensor = raw(header.len() as u64, header, &[0; 16]);
    assert!(matches!(
        load_safetensors(&vs, &huge_tensor, name),
        Err(WeightsError::Format { .. })
    ));
    // Not a safetensors file at all.
    assert!(matches!(
        load_safetensors(&vs, b"PK\x03\x04 a zip", name),
        Err(WeightsError::Format { .. })
    ));
    assert_unchanged(&vs, &before);
}

#[test]
fn errors_name_the_file_and_the_tensor() {
    let vs = model();
    let message = load_safetensors(&vs, &raw(2, "{}", &[]), Path::new("/x/init.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("/x/init.safetensors: tensor '"),
        "{message}"
    );
    assert!(message.ends_with("missing from the file"), "{message}");
    let missing = load_safetensors_file(&vs, Path::new("/nonexistent/w.safetensors"));
    assert!(matches!(missing, Err(WeightsError::Io { .. })));
}
