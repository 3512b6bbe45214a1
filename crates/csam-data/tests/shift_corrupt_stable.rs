//! The bytes of the first seven corruptions stay what csam's first release
//! of `csam corrupt` wrote. Adding corruptions must not move their random
//! streams (keyed by the corruption's fixed discriminant) or their
//! arithmetic; the digests below were computed by that release's code
//! (commit 921c468) on the same inputs.

use csam_data::corrupt::{Corruption, SEVERITIES};
use csam_data::{load, Dataset, DatasetSpec};
use sha2::{Digest, Sha256};

fn inputs() -> Vec<Dataset> {
    let fashion = load(&DatasetSpec::FashionMnist).unwrap().test;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cifar10-samples");
    let cifar = load(&DatasetSpec::Folder(dir)).unwrap().train.unwrap();
    vec![fashion.select(&(0..40).collect::<Vec<_>>()), cifar]
}

/// sha256 of every image of `inputs()` corrupted at every severity with seed 7.
fn digest(corruption: Corruption) -> String {
    let mut hash = Sha256::new();
    for dataset in inputs() {
        for severity in SEVERITIES {
            for i in 0..dataset.n {
                hash.update(
                    corruption
                        .corrupt_sample(&dataset, i, severity, 7, None)
                        .unwrap(),
                );
            }
        }
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_first_seven_corruptions_write_the_bytes_they_always_wrote() {
    let expected = [
        (
            Corruption::GaussianNoise,
            "92e25152f0d565acb2ed906c8037a4bdbf66af03f4b7095a69717aec59ce43d4",
        ),
        (
            Corruption::ShotNoise,
            "580efd7278bd47f6d2e151b0783f0accd26bad6ed78d09beae9b72f4c0b27c88",
        ),
        (
            Corruption::ImpulseNoise,
            "4d1158cc5fc1dab20e36a4ca241a5de4ecd79db12ffcf189286efda5d87bc267",
        ),
        (
            Corruption::DefocusBlur,
            "9f832a2c6d6e4ecaf98f0fa241ff024d9f57826fbc4adfafb1d5a5bedb67284b",
        ),
        (
            Corruption::MotionBlur,
            "aac04d51d197195ca67eb6bc9161c496bf3967742ac36f9456b63624b9fcbe71",
        ),
        (
            Corruption::Contrast,
            "5faae9e1e71db08abd55dd56f9fd83a529a8109788449371deb3c3b56434045a",
        ),
        (
            Corruption::Brightness,
            "1ecb9e229b9b8d22c248727c330f3d585fc4a3532576fa56bdb0e51b24c4203a",
        ),
    ];
    for (corruption, want) in expected {
        assert_eq!(digest(corruption), want, "{corruption}");
    }
}
