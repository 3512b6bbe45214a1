//! Replays the committed fuzz corpus of the csam-train targets
//! (`fuzz/corpus/{idx,npy_images,cifar,svhn_mat,safetensors,config}/`) through the
//! entry points the cargo-fuzz targets call, so plain `cargo test` runs every
//! seed and regression input without libFuzzer.
//!
//! What a seed must do is in its name (see fuzz/src/corpus.rs).

use std::path::Path;

use csam_data::parse::{self, InMemory};
use csam_nn::model::weights;
use csam_train::spec::RunSpec;

#[path = "../../../fuzz/src/corpus.rs"]
mod corpus;
#[path = "../../../fuzz/src/model.rs"]
mod fuzz_model;
#[path = "../../../fuzz/src/pair.rs"]
mod pair;

/// Runs `parse` on every corpus file of `target`.
fn replay<T, E: std::fmt::Display>(target: &str, parse: impl Fn(&[u8]) -> Result<T, E>) {
    for path in corpus::corpus_files(env!("CARGO_MANIFEST_DIR"), target) {
        let bytes = std::fs::read(&path).expect("readable corpus file");
        corpus::check_outcome(&path, &parse(&bytes));
    }
}

fn named<'a>(name: &'a str, bytes: &'a [u8]) -> InMemory<'a> {
    InMemory {
        name: Path::new(name),
        bytes,
    }
}

#[test]
fn idx_corpus_replays() {
    replay("idx", |bytes| {
        let (images, labels) = pair::split_pair(bytes);
        parse::idx(named("images", images), named("labels", labels))
    });
}

#[test]
fn npy_images_corpus_replays() {
    replay("npy_images", |bytes| {
        let (images, labels) = pair::split_pair(bytes);
        parse::npy(
            named("images.npy", images),
            named("labels.npy", labels),
            None,
        )
    });
}

#[test]
fn cifar_corpus_replays() {
    // A seed is one of the two variants; each input also goes through the
    // other, which must return (an error) without panicking.
    replay("cifar", |bytes| {
        let batch = named("batch.bin", bytes);
        let (ten, hundred) = (parse::cifar10_batch(batch), parse::cifar100_batch(batch));
        ten.or(hundred)
    });
}

#[test]
fn svhn_mat_corpus_replays() {
    replay("svhn_mat", |bytes| {
        parse::svhn_mat(named("test_32x32.mat", bytes))
    });
}

#[test]
fn safetensors_corpus_replays() {
    let vs = fuzz_model::tiny_mlp();
    replay("safetensors", |bytes| {
        weights::load_safetensors(&vs, bytes, Path::new("fuzz.safetensors"))
    });
}

#[test]
fn config_corpus_replays() {
    replay("config", |bytes| {
        let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
        let spec = RunSpec::from_saved_toml(text, "fuzz").map_err(|e| e.to_string())?;
        spec.validate().map_err(|e| e.to_string())
    });
}
