//! What the tests of csam-data share: the project venv's python, running a
//! fixture or reference script, comparing a loaded part with the `.npy` pair a script
//! computed independently, generated image files, and the images the corruption
//! twins corrupt.

#![allow(dead_code)] // each test binary uses its own share of these helpers

use std::path::Path;

use csam_data::corrupt::Image;
use csam_data::{load, Dataset, DatasetSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The twins' python: a bare `cargo test` without it skips a twin, `cargo
/// xtask test` fails it.
#[allow(unused_imports)] // not every test binary runs a twin
pub use csam_testkit::twin::python;

/// Runs `tests/data_fixtures/<script> <args>` with `python`; panics with its
/// stderr if it fails.
pub fn run_fixture_script(python: &Path, script: &str, args: &[&Path]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data_fixtures")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `tests/shift_fixtures/<script> KIND IN OUT ARGS...` with `python`
/// on `input` (raw bytes, written to `IN` in `dir`) and returns the bytes it
/// wrote to `OUT`.
pub fn run_reference(
    python: &Path,
    script: &str,
    dir: &Path,
    kind: &str,
    input: &[u8],
    args: &[String],
) -> Vec<u8> {
    let (source, target) = (
        dir.join(format!("{kind}.in")),
        dir.join(format!("{kind}.out")),
    );
    std::fs::write(&source, input).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/shift_fixtures")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(kind)
        .arg(&source)
        .arg(&target)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{kind}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read(&target).unwrap()
}

/// Real images: CIFAR-10 samples (3 channels) and Fashion-MNIST (1 channel).
pub fn real_images() -> Vec<Image> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cifar10-samples");
    let cifar = load(&DatasetSpec::Folder(dir)).unwrap().train.unwrap();
    let fashion = load(&DatasetSpec::FashionMnist).unwrap().test;
    (0..4)
        .map(|i| Image::from_bytes(cifar.image(i), 3, 32, 32))
        .chain((0..2).map(|i| Image::from_bytes(fashion.image(i), 1, 28, 28)))
        .collect()
}

/// Random bytes at odd sizes, 1 and 3 channels.
pub fn random_images() -> Vec<Image> {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    [(3, 5, 7), (1, 13, 20), (3, 40, 33)]
        .map(|(c, h, w)| {
            let bytes: Vec<u8> = (0..c * h * w).map(|_| rng.random()).collect();
            Image::from_bytes(&bytes, c, h, w)
        })
        .to_vec()
}

/// `image`'s bytes interleaved (`H x W x C`), as PIL and numpy hold them.
pub fn hwc(image: &Image) -> Vec<u8> {
    let (bytes, plane) = (image.to_bytes(), image.plane_len());
    (0..plane)
        .flat_map(|i| (0..image.channels).map(move |c| (c, i)))
        .map(|(c, i)| bytes[c * plane + i])
        .collect()
}

/// `H W` then `extra`, the arguments of a reference script's kind.
pub fn args(height: usize, width: usize, extra: impl IntoIterator<Item = String>) -> Vec<String> {
    [height.to_string(), width.to_string()]
        .into_iter()
        .chain(extra)
        .collect()
}

/// `values` as raw little-endian float64.
pub fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Raw little-endian float64 back to values.
pub fn f64_values(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// The test part of `npy:<dir>/expected_<part>_images.npy,<dir>/expected_<part>_labels.npy,<classes>`:
/// what a fixture script computed (images NHWC, read as CHW like any `npy:` source).
pub fn expected(dir: &Path, part: &str, classes: usize) -> Dataset {
    let spec = DatasetSpec::Npy {
        images: dir.join(format!("expected_{part}_images.npy")),
        labels: dir.join(format!("expected_{part}_labels.npy")),
        n_classes: Some(classes),
    };
    load(&spec).unwrap().test
}

/// A `width x height` test image with `channels` (1 or 3) bytes per
/// pixel: smooth gradients plus hash noise, so that resampling weights
/// every neighbour differently and compression has detail to keep.
pub fn test_image(width: u32, height: u32, channels: usize, salt: u32) -> Vec<u8> {
    let mut data = Vec::with_capacity((width * height) as usize * channels);
    for y in 0..height {
        for x in 0..width {
            for c in 0..channels as u32 {
                let smooth = (x * 255 / width.max(1) + y * 127 / height.max(1) + c * 60) % 256;
                let h = (x.wrapping_mul(73_856_093)
                    ^ y.wrapping_mul(19_349_663)
                    ^ (c + salt).wrapping_mul(83_492_791))
                    % 41;
                data.push(((smooth + h) % 256) as u8);
            }
        }
    }
    data
}

/// Saves a test image as `path` (format from the extension: png or jpg).
pub fn save_image(path: &Path, width: u32, height: u32, channels: usize, salt: u32) {
    let data = test_image(width, height, channels, salt);
    let colour = match channels {
        1 => image::ColorType::L8,
        _ => image::ColorType::Rgb8,
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::save_buffer(path, &data, width, height, colour).unwrap();
}
