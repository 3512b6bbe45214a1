//! Image corruptions at 5 severities, after Hendrycks & Dietterich,
//! "Benchmarking Neural Network Robustness to Common Corruptions and
//! Perturbations" (ICLR 2019), with the CIFAR-10-C parameters of their
//! `make_cifar_c.py` (repository `hendrycks/robustness`).
//!
//! Written in Rust from those definitions, for any image size and 1 or 3
//! channels (the formulas are per channel or per pixel; brightness uses the
//! pixel's maximum over its channels, the HSV value, and snow and one-channel
//! frost a luma). Sizes in pixels scale with the image where the reference
//! ties them to CIFAR-10's 32 (the elastic transform's, fog's map); each
//! function's doc says how. The random draws come from ChaCha8 streams keyed
//! by `(seed, corruption, image index)`, so an image's corruption does not
//! depend on which other images or corruptions were made, and the same seed
//! gives the same bytes on every machine. The severity is not part of the
//! key: an image meets the same random numbers at every severity (the same
//! motion angle, the same Gaussian draws scaled by a larger deviation,
//! impulse hits that grow into a superset, the same snow layer, fog map
//! draws, frost crop and warp), so its severities differ in strength only.
//! numpy's random streams are not reproduced: the noise is the same
//! distribution as CIFAR-10-C's, not the same samples. The corruptions
//! whose draws do not depend on the pixels draw them first, as a value of
//! their own ([`blur::glass_moves`], [`weather::SnowDraws`],
//! [`weather::FrostCrop`], [`weather::fog_draws`],
//! [`digital::ElasticDraws`]), and then apply them, so that a reference
//! can be handed the same numbers.
//!
//! Families: [`noise`] (Gaussian, shot, impulse), [`blur`] (defocus, glass,
//! motion, zoom), [`weather`] (snow, frost, fog), [`intensity`] (brightness,
//! contrast), [`digital`] (elastic transform, pixelate, JPEG). Their tools:
//! [`border`], [`filter`], [`resample`] and [`crate::pillow_resize`]
//! reproduce the border modes, Gaussian filter, interpolation and box resize
//! of the libraries the reference calls, and [`plasma`] is fog's fractal.
//!
//! Frost blends in photographs that csam does not bundle (their licence is
//! not stated, see [`frost_textures`]): it runs only with a
//! [`FrostTextures`] loaded from a directory holding them, passed to
//! [`Corruption::apply`] / [`Corruption::corrupt_sample`] (`csam
//! corrupt` has no way to be given them yet and leaves frost out).
//!
//! The pieces are checked against the libraries the reference calls
//! (`tests/shift_corrupt_twins.rs`: scipy, Pillow, OpenCV, numpy), and the
//! random or chained corruptions whole against the reference's functions
//! given csam's draws (`tests/shift_corrupt_whole_twins.rs`). Where
//! those cannot be matched byte for byte, the function's doc says how ours
//! differs: snow's and motion blur's streak (our rendering of ImageMagick's
//! motion blur), the elastic warp (exact positions where OpenCV rounds to
//! 1/32 pixel), JPEG (no chroma subsampling, where Pillow subsamples
//! 4:2:0).

pub mod blur;
pub mod border;
pub mod digital;
pub mod filter;
pub mod frost_textures;
pub mod image;
pub mod intensity;
pub mod noise;
pub mod plasma;
pub mod resample;
pub mod weather;

use std::fmt;
use std::str::FromStr;

use rand_chacha::ChaCha8Rng;

use crate::error::DataError;
use crate::rng::{stream, Purpose};
use crate::Dataset;
pub use frost_textures::FrostTextures;
pub use image::Image;

/// One corruption of the benchmark. The names are CIFAR-10-C's file names.
///
/// The discriminant is part of each image's random-stream key
/// ([`Corruption::corrupt_sample`]), so it is fixed by hand: the first
/// seven corruptions csam made keep 0..=6, and the eight added later take
/// 7..=14, so that the bytes of the first seven did not change. It is not
/// the order of [`Corruption::ALL`]; never renumber a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Corruption {
    GaussianNoise = 0,
    ShotNoise = 1,
    ImpulseNoise = 2,
    DefocusBlur = 3,
    GlassBlur = 7,
    MotionBlur = 4,
    ZoomBlur = 8,
    Snow = 9,
    Frost = 10,
    Fog = 11,
    Brightness = 6,
    Contrast = 5,
    ElasticTransform = 12,
    Pixelate = 13,
    JpegCompression = 14,
}

/// A severity level, 1 (mildest) to 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Severity(u8);

/// Severities 1 to 5.
pub const SEVERITIES: [Severity; 5] = [
    Severity(1),
    Severity(2),
    Severity(3),
    Severity(4),
    Severity(5),
];

impl Severity {
    /// The severity `level` (1..=5), None outside.
    pub fn new(level: u8) -> Option<Severity> {
        (1..=5).contains(&level).then_some(Severity(level))
    }

    /// The level, 1..=5.
    pub fn level(self) -> u8 {
        self.0
    }

    /// Parses `1-5` (a range), `3` or `1,3,5` into severities in the order
    /// given; each level must be 1..=5 and appear once.
    pub fn parse_list(text: &str) -> Result<Vec<Severity>, String> {
        let level = |t: &str| {
            t.trim()
                .parse::<u8>()
                .ok()
                .and_then(Severity::new)
                .ok_or_else(|| format!("severity '{t}' is not 1, 2, 3, 4 or 5"))
        };
        let mut out = Vec::new();
        for part in text.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (level(lo)?, level(hi)?);
                    out.extend(SEVERITIES.into_iter().filter(|s| (lo..=hi).contains(s)));
                }
                None => out.push(level(part)?),
            }
        }
        let mut sorted = out.clone();
        sorted.sort();
        sorted.dedup();
        if out.is_empty() || sorted.len() != out.len() {
            return Err(format!(
                "severities '{text}': expected distinct levels such as 1-5 or 1,3,5"
            ));
        }
        Ok(out)
    }

    /// Index into the parameter tables, 0..=4.
    fn index(self) -> usize {
        usize::from(self.0 - 1)
    }
}

impl Corruption {
    /// Every corruption, in CIFAR-10-C's order (that of `make_cifar_c.py`
    /// and the paper's figures).
    pub const ALL: [Corruption; 15] = [
        Corruption::GaussianNoise,
        Corruption::ShotNoise,
        Corruption::ImpulseNoise,
        Corruption::DefocusBlur,
        Corruption::GlassBlur,
        Corruption::MotionBlur,
        Corruption::ZoomBlur,
        Corruption::Snow,
        Corruption::Frost,
        Corruption::Fog,
        Corruption::Brightness,
        Corruption::Contrast,
        Corruption::ElasticTransform,
        Corruption::Pixelate,
        Corruption::JpegCompression,
    ];

    /// The CIFAR-10-C file stem (`gaussian_noise` for `gaussian_noise.npy`).
    pub fn name(self) -> &'static str {
        match self {
            Corruption::GaussianNoise => "gaussian_noise",
            Corruption::ShotNoise => "shot_noise",
            Corruption::ImpulseNoise => "impulse_noise",
            Corruption::DefocusBlur => "defocus_blur",
            Corruption::GlassBlur => "glass_blur",
            Corruption::MotionBlur => "motion_blur",
            Corruption::ZoomBlur => "zoom_blur",
            Corruption::Snow => "snow",
            Corruption::Frost => "frost",
            Corruption::Fog => "fog",
            Corruption::Brightness => "brightness",
            Corruption::Contrast => "contrast",
            Corruption::ElasticTransform => "elastic_transform",
            Corruption::Pixelate => "pixelate",
            Corruption::JpegCompression => "jpeg_compression",
        }
    }

    /// Whether the corruption blends in the frost photographs, which the
    /// caller supplies ([`FrostTextures`]).
    pub fn needs_frost_textures(self) -> bool {
        self == Corruption::Frost
    }

    /// Corrupts one clean image (the reference code's function of this
    /// name at `severity`), drawing randomness from `rng`. Fails for
    /// [`Corruption::Frost`] without `frost` textures, and for JPEG
    /// compression of an image the format cannot hold.
    pub fn apply(
        self,
        image: &Image,
        severity: Severity,
        rng: &mut ChaCha8Rng,
        frost: Option<&FrostTextures>,
    ) -> crate::error::Result<Image> {
        let s = severity.index();
        let (h, w) = (image.height, image.width);
        Ok(match self {
            Corruption::GaussianNoise => noise::gaussian_noise(image, noise::GAUSSIAN_STD[s], rng),
            Corruption::ShotNoise => noise::shot_noise(image, noise::SHOT_PHOTONS[s], rng),
            Corruption::ImpulseNoise => noise::impulse_noise(image, noise::IMPULSE_AMOUNT[s], rng),
            Corruption::DefocusBlur => {
                let (radius, alias) = blur::DEFOCUS[s];
                blur::defocus_blur(image, radius, alias)
            }
            Corruption::GlassBlur => {
                let (sigma, max_delta, iterations) = blur::GLASS[s];
                let moves = blur::glass_moves(h, w, max_delta, iterations, rng);
                blur::glass_blur(image, sigma, max_delta, &moves)
            }
            Corruption::MotionBlur => {
                let (radius, sigma) = blur::MOTION[s];
                blur::motion_blur(image, radius, sigma, rng)
            }
            Corruption::ZoomBlur => blur::zoom_blur(image, blur::ZOOM_STEPS[s]),
            Corruption::Snow => {
                let draws = weather::SnowDraws::draw(h, w, rng);
                weather::snow_corruption(image, &weather::SNOW[s], &draws)
            }
            Corruption::Frost => {
                let textures =
                    frost.ok_or_else(|| DataError::Invalid(FROST_NEEDS_TEXTURES.into()))?;
                let crop = weather::FrostCrop::draw(h, w, textures, rng);
                weather::frost(image, textures, weather::FROST[s], &crop)
            }
            Corruption::Fog => weather::fog(image, weather::FOG[s], &weather::fog_draws(h, w, rng)),
            Corruption::Brightness => intensity::brightness(image, intensity::BRIGHTNESS[s]),
            Corruption::Contrast => intensity::contrast(image, intensity::CONTRAST[s]),
            Corruption::ElasticTransform => {
                let draws = digital::ElasticDraws::draw(h, w, rng);
                digital::elastic_transform(image, digital::ELASTIC[s], &draws)
            }
            Corruption::Pixelate => digital::pixelate(image, digital::PIXELATE[s]),
            Corruption::JpegCompression => {
                digital::jpeg_compression(image, digital::JPEG_QUALITY[s])?
            }
        })
    }

    /// Sample `index` of `dataset` corrupted at `severity`, as CHW bytes.
    /// The random stream is keyed by `(seed, self, index)` (see the module
    /// doc; `self` by its fixed discriminant). `frost` is needed by
    /// [`Corruption::Frost`] only.
    pub fn corrupt_sample(
        self,
        dataset: &Dataset,
        index: usize,
        severity: Severity,
        seed: u64,
        frost: Option<&FrostTextures>,
    ) -> crate::error::Result<Vec<u8>> {
        let clean = Image::from_bytes(
            dataset.image(index),
            dataset.channels,
            dataset.height,
            dataset.width,
        );
        let key = (self as u64) << 56 | index as u64;
        let mut rng = stream(seed, Purpose::Corrupt, key);
        Ok(self.apply(&clean, severity, &mut rng, frost)?.to_bytes())
    }

    /// The whole `dataset` corrupted at `severity` (same labels, shape and
    /// classes; named `<dataset>/<corruption>-<severity>`); `frost` as in
    /// [`Corruption::corrupt_sample`].
    pub fn corrupt_dataset(
        self,
        dataset: &Dataset,
        severity: Severity,
        seed: u64,
        frost: Option<&FrostTextures>,
    ) -> crate::error::Result<Dataset> {
        let mut images = Vec::with_capacity(dataset.images.len());
        for i in 0..dataset.n {
            images.extend(self.corrupt_sample(dataset, i, severity, seed, frost)?);
        }
        Ok(Dataset {
            images,
            name: format!("{}/{}-{}", dataset.name, self.name(), severity.level()),
            ..dataset.clone()
        })
    }
}

/// Why frost cannot run without its photographs, and what to do.
pub const FROST_NEEDS_TEXTURES: &str = "frost blends in the frost photographs of \
Hendrycks & Dietterich (frost1.png ... frost5.jpg, from ImageNet-C/create_c/ of \
github.com/hendrycks/robustness), which csam does not bundle because their licence is \
not stated; download them into a directory and load it with FrostTextures::load";

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Corruption {
    type Err = String;

    /// A CIFAR-10-C name (`gaussian_noise`; `gaussian-noise` also accepted).
    fn from_str(text: &str) -> Result<Self, String> {
        let wanted = text.replace('-', "_");
        Corruption::ALL
            .into_iter()
            .find(|c| c.name() == wanted)
            .ok_or_else(|| {
                let known: Vec<&str> = Corruption::ALL.iter().map(|c| c.name()).collect();
                format!("unknown corruption '{text}'; known: {}", known.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_list_the_known_ones() {
        for c in Corruption::ALL {
            assert_eq!(c.name().parse::<Corruption>(), Ok(c));
        }
        assert_eq!("motion-blur".parse(), Ok(Corruption::MotionBlur));
        let e = "spatter".parse::<Corruption>().unwrap_err();
        assert!(
            e.contains("spatter") && e.contains("jpeg_compression"),
            "{e}"
        );
    }

    #[test]
    fn the_stream_keys_of_the_first_seven_never_move_and_all_are_distinct() {
        // The random streams of csam corrupt's first release were keyed by
        // these discriminants; changing one changes the bytes written.
        let first = [
            (Corruption::GaussianNoise, 0),
            (Corruption::ShotNoise, 1),
            (Corruption::ImpulseNoise, 2),
            (Corruption::DefocusBlur, 3),
            (Corruption::MotionBlur, 4),
            (Corruption::Contrast, 5),
            (Corruption::Brightness, 6),
        ];
        for (c, key) in first {
            assert_eq!(c as u64, key, "{c}");
        }
        let mut keys: Vec<u64> = Corruption::ALL.iter().map(|&c| c as u64).collect();
        keys.sort();
        assert_eq!(keys, (0..15).collect::<Vec<u64>>());
    }

    #[test]
    fn severities_are_one_to_five() {
        assert!(Severity::new(0).is_none() && Severity::new(6).is_none());
        assert_eq!(SEVERITIES.map(Severity::level), [1, 2, 3, 4, 5]);
        let levels = |t: &str| {
            Severity::parse_list(t).map(|v| v.iter().map(|s| s.level()).collect::<Vec<_>>())
        };
        assert_eq!(levels("1-5"), Ok(vec![1, 2, 3, 4, 5]));
        assert_eq!(levels("2,4-5"), Ok(vec![2, 4, 5]));
        assert_eq!(levels("3"), Ok(vec![3]));
        for bad in ["0", "6", "1,1", "", "5-3", "x"] {
            assert!(levels(bad).is_err(), "{bad}");
        }
    }
}
