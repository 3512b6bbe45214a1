//! Dataset spec strings, as given on the command line, and loading them.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use super::error::{DataError, Result};
use super::part::{into_source, Classes};
use super::{bundled, cifar, folder, idx, npy, svhn, tiny_imagenet, Augmentation, DataSource};

/// The data set `csam compare` and `csam sweep` use when none is named: the
/// whole of Fashion-MNIST, bundled.
pub const DEFAULT_DATA: &str = "fashion-mnist-full";

/// The bundled data sets by name: the values of `--data` that take no path.
pub const BUNDLED_NAMES: [&str; 4] = ["fashion-mnist", "digits", "mnist", "fashion-mnist-full"];

/// Which dataset to load.
///
/// | spec                          | source                                                    |
/// |-------------------------------|-----------------------------------------------------------|
/// | `fashion-mnist-full`          | bundled, the whole of Fashion-MNIST: 60,000 train / 10,000 test, 1x28x28, 10 classes ([`DEFAULT_DATA`]) |
/// | `fashion-mnist`               | bundled subset of it: 10,000 train / 2,000 test (fast tests) |
/// | `digits`                      | bundled 8x8 digits: 1,442 train / 355 test, 10 classes     |
/// | `mnist`                       | bundled MNIST subset: 2,000 test images, 1x28x28, 10 classes (no train; the OOD set of Fashion-MNIST) |
/// | `idx:DIR`                     | MNIST-family IDX files in DIR (classes = largest label + 1) |
/// | `cifar10:DIR`                 | CIFAR-10 binary batches                                   |
/// | `cifar100:DIR`                | CIFAR-100 binary files, fine labels                       |
/// | `npy:IMAGES,LABELS[,CLASSES]` | `.npy` uint8 images (N,H,W,C) + integer labels, test only; classes default to largest label + 1 |
/// | `folder:DIR`                  | `DIR/<class>/*.png` (split 80/20) or `DIR/train/<class>` + `DIR/test/<class>` |
/// | `svhn:DIR`                    | SVHN cropped digits, `DIR/{train,test}_32x32.mat` (MAT-files; train optional), 3x32x32, 10 classes (`10` read as digit 0) |
/// | `tiny-imagenet:DIR`           | Tiny-ImageNet-200's archive layout: `train/<wnid>/images/` (optional) and `val/` (the test part), 3x64x64, classes in `wnids.txt` order |
/// | `imagenet:DIR`                | `DIR/train/<class>/*.JPEG` + `DIR/val/<class>/*.JPEG`, streamed from disk at 224x224 ([`crate::streaming`]); 20% of `val/` held out for validation, the rest the test set |
///
/// A CIFAR-10-C corruption file stacks its 5 severities, 10,000 images each,
/// in order: severity `s` is `test.select(&((s - 1) * 10_000..s * 10_000).collect::<Vec<_>>())`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetSpec {
    /// The bundled 10,000 / 2,000 subset (the name's meaning before the
    /// whole set was bundled; old run configurations keep loading it).
    FashionMnist,
    Digits,
    Mnist,
    /// The whole of Fashion-MNIST, bundled.
    FashionMnistFull,
    Idx(PathBuf),
    Cifar10(PathBuf),
    Cifar100(PathBuf),
    Npy {
        images: PathBuf,
        labels: PathBuf,
        n_classes: Option<usize>,
    },
    Folder(PathBuf),
    Svhn(PathBuf),
    TinyImagenet(PathBuf),
    /// An ImageNet-layout folder, streamed ([`crate::streaming`]).
    ImageNet(PathBuf),
}

impl FromStr for DatasetSpec {
    type Err = DataError;

    fn from_str(spec: &str) -> Result<Self> {
        let bad = |reason: &str| DataError::BadSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (kind, argument) = match spec.split_once(':') {
            Some((kind, argument)) => (kind, Some(argument)),
            None => (spec, None),
        };
        let path = || match argument {
            Some(a) if !a.is_empty() => Ok(PathBuf::from(a)),
            _ => Err(bad("expected a path after ':'")),
        };
        match (kind, argument) {
            ("fashion-mnist", None) => Ok(DatasetSpec::FashionMnist),
            ("digits", None) => Ok(DatasetSpec::Digits),
            ("mnist", None) => Ok(DatasetSpec::Mnist),
            ("fashion-mnist-full", None) => Ok(DatasetSpec::FashionMnistFull),
            ("fashion-mnist" | "digits" | "mnist" | "fashion-mnist-full", Some(_)) => {
                Err(bad("this dataset takes no argument"))
            }
            ("idx", _) => Ok(DatasetSpec::Idx(path()?)),
            ("cifar10", _) => Ok(DatasetSpec::Cifar10(path()?)),
            ("cifar100", _) => Ok(DatasetSpec::Cifar100(path()?)),
            ("folder", _) => Ok(DatasetSpec::Folder(path()?)),
            ("svhn", _) => Ok(DatasetSpec::Svhn(path()?)),
            ("tiny-imagenet", _) => Ok(DatasetSpec::TinyImagenet(path()?)),
            ("imagenet", _) => Ok(DatasetSpec::ImageNet(path()?)),
            ("npy", Some(argument)) => {
                let parts: Vec<&str> = argument.split(',').collect();
                let (images, labels, n_classes) = match parts[..] {
                    [images, labels] => (images, labels, None),
                    [images, labels, classes] => {
                        let n: usize = classes
                            .parse()
                            .ok()
                            .filter(|&n| n > 0)
                            .ok_or_else(|| bad("the class count must be a positive integer"))?;
                        (images, labels, Some(n))
                    }
                    _ => return Err(bad("expected npy:IMAGES.npy,LABELS.npy[,CLASSES]")),
                };
                if images.is_empty() || labels.is_empty() {
                    return Err(bad("expected npy:IMAGES.npy,LABELS.npy[,CLASSES]"));
                }
                Ok(DatasetSpec::Npy {
                    images: images.into(),
                    labels: labels.into(),
                    n_classes,
                })
            }
            ("npy", None) => Err(bad("expected npy:IMAGES.npy,LABELS.npy[,CLASSES]")),
            _ => Err(bad(
                "unknown dataset; expected fashion-mnist, digits, mnist, fashion-mnist-full, \
                 idx:DIR, cifar10:DIR, cifar100:DIR, npy:IMAGES,LABELS, folder:DIR, svhn:DIR, \
                 tiny-imagenet:DIR or imagenet:DIR",
            )),
        }
    }
}

impl fmt::Display for DatasetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetSpec::FashionMnist => write!(f, "fashion-mnist"),
            DatasetSpec::Digits => write!(f, "digits"),
            DatasetSpec::Mnist => write!(f, "mnist"),
            DatasetSpec::FashionMnistFull => write!(f, "fashion-mnist-full"),
            DatasetSpec::Idx(dir) => write!(f, "idx:{}", dir.display()),
            DatasetSpec::Cifar10(dir) => write!(f, "cifar10:{}", dir.display()),
            DatasetSpec::Cifar100(dir) => write!(f, "cifar100:{}", dir.display()),
            DatasetSpec::Npy {
                images,
                labels,
                n_classes,
            } => {
                write!(f, "npy:{},{}", images.display(), labels.display())?;
                match n_classes {
                    Some(n) => write!(f, ",{n}"),
                    None => Ok(()),
                }
            }
            DatasetSpec::Folder(dir) => write!(f, "folder:{}", dir.display()),
            DatasetSpec::Svhn(dir) => write!(f, "svhn:{}", dir.display()),
            DatasetSpec::TinyImagenet(dir) => write!(f, "tiny-imagenet:{}", dir.display()),
            DatasetSpec::ImageNet(dir) => write!(f, "imagenet:{}", dir.display()),
        }
    }
}

impl DatasetSpec {
    /// Whether a left-right mirror keeps every label: true for clothing
    /// (Fashion-MNIST) and natural images (CIFAR, Tiny-ImageNet), false for
    /// digits (`digits`, SVHN) and the MNIST family in general (`idx:`),
    /// and, not knowing the content, for `npy:` and `folder:` sources.
    pub fn mirror_invariant(&self) -> bool {
        matches!(
            self,
            DatasetSpec::FashionMnist
                | DatasetSpec::FashionMnistFull
                | DatasetSpec::Cifar10(_)
                | DatasetSpec::Cifar100(_)
                | DatasetSpec::TinyImagenet(_)
                | DatasetSpec::ImageNet(_)
        )
    }

    /// Whether the source is read from disk batch by batch
    /// ([`crate::streaming`]) rather than loaded into memory.
    pub fn is_streamed(&self) -> bool {
        matches!(self, DatasetSpec::ImageNet(_))
    }

    /// [`Augmentation::standard`] for images of `height x width`, with the
    /// flip only where [`DatasetSpec::mirror_invariant`].
    pub fn standard_augmentation(&self, height: usize, width: usize) -> Augmentation {
        Augmentation {
            horizontal_flip: self.mirror_invariant(),
            ..Augmentation::standard(height, width)
        }
    }
}

/// Loads the dataset a spec names. Parts are named `<spec>/train` and
/// `<spec>/test` (e.g. `fashion-mnist/train`).
pub fn load(spec: &DatasetSpec) -> Result<DataSource> {
    let name = spec.to_string();
    match spec {
        DatasetSpec::FashionMnist => bundled::fashion_mnist(),
        DatasetSpec::Digits => bundled::digits(),
        DatasetSpec::Mnist => bundled::mnist(),
        DatasetSpec::FashionMnistFull => bundled::fashion_mnist_full(),
        DatasetSpec::Idx(dir) => {
            let (train, test) = idx::load_dir(dir)?;
            into_source(&name, train, test, Classes::Inferred)
        }
        DatasetSpec::Cifar10(dir) => cifar::load_cifar10(dir),
        DatasetSpec::Cifar100(dir) => cifar::load_cifar100(dir),
        DatasetSpec::Npy {
            images,
            labels,
            n_classes,
        } => {
            let part = npy::read_files(images, labels)?;
            let classes = n_classes.map_or(Classes::Inferred, Classes::Fixed);
            into_source(&name, None, part, classes)
        }
        DatasetSpec::Folder(dir) => folder::load(dir, &name),
        DatasetSpec::Svhn(dir) => svhn::load(dir, &name),
        DatasetSpec::TinyImagenet(dir) => tiny_imagenet::load(dir, &name),
        DatasetSpec::ImageNet(_) => Err(DataError::Streamed { spec: name }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_name_is_a_bundled_data_set() {
        for name in BUNDLED_NAMES {
            let spec: DatasetSpec = name.parse().unwrap();
            assert_eq!(spec.to_string(), name);
            assert!(
                format!("{name}:x").parse::<DatasetSpec>().is_err(),
                "{name} takes no path"
            );
        }
    }

    #[test]
    fn specs_parse_and_print_back() {
        for text in [
            "fashion-mnist",
            "digits",
            "mnist",
            "fashion-mnist-full",
            "idx:/d/mnist",
            "cifar10:c10",
            "cifar100:/x/c100",
            "npy:a.npy,b.npy",
            "npy:a.npy,b.npy,10",
            "folder:imgs",
            "svhn:/data/svhn",
            "tiny-imagenet:tiny-imagenet-200",
            "imagenet:/data/imagenet",
        ] {
            let spec: DatasetSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
        }
        assert_eq!(
            "npy:x.npy,y.npy".parse::<DatasetSpec>().unwrap(),
            DatasetSpec::Npy {
                images: "x.npy".into(),
                labels: "y.npy".into(),
                n_classes: None
            }
        );
    }

    #[test]
    fn flips_only_where_labels_survive_a_mirror() {
        let digits = DatasetSpec::Digits.standard_augmentation(8, 8);
        assert_eq!((digits.crop_padding, digits.horizontal_flip), (1, false));
        let cifar = DatasetSpec::Cifar10("c".into()).standard_augmentation(32, 32);
        assert_eq!((cifar.crop_padding, cifar.horizontal_flip), (4, true));
        assert!(DatasetSpec::FashionMnist.mirror_invariant());
        assert!(!DatasetSpec::Idx("m".into()).mirror_invariant());
        assert!(!DatasetSpec::Svhn("s".into()).mirror_invariant());
        assert!(DatasetSpec::TinyImagenet("t".into()).mirror_invariant());
    }

    #[test]
    fn bad_specs_are_refused() {
        for text in [
            "mnist:x",
            "cifar10",
            "cifar10:",
            "digits:x",
            "npy:a.npy",
            "npy:a.npy,b.npy,0",
            "npy:a.npy,b.npy,ten",
            "npy:,b.npy",
            "svhn",
            "svhn:",
            "tiny-imagenet",
            "tinyimagenet:x",
            "imagenet:",
            "",
        ] {
            assert!(
                matches!(text.parse::<DatasetSpec>(), Err(DataError::BadSpec { .. })),
                "{text:?} should be refused"
            );
        }
    }
}
