//! The frost photographs that the frost corruption blends in. They are not
//! csam's: the reference reads `frost1.png`, `frost2.png`, `frost3.png`,
//! `frost4.jpg`, `frost5.jpg` (and lists a `frost6.jpg` it never draws:
//! `np.random.randint(5)`) from `ImageNet-C/create_c/` of the repository
//! `hendrycks/robustness`. That repository is Apache-2.0 licensed, but it
//! says nothing of where the photographs come from or who may copy them, so
//! csam does not bundle them: whoever wants frost downloads them and points
//! csam at the directory that holds them ([`FrostTextures::load`]).

use std::path::Path;

use super::border::Border;
use super::image::Image;
use super::resample::remap;
use crate::error::{DataError, Result};

/// The photographs the reference draws from, in its order.
pub const FROST_FILES: [&str; 5] = [
    "frost1.png",
    "frost2.png",
    "frost3.png",
    "frost4.jpg",
    "frost5.jpg",
];
/// The reference shrinks each photograph by this factor before cropping
/// (`cv2.resize(frost, (0, 0), fx=0.2, fy=0.2)` for CIFAR-10's 32x32
/// images), so the frost's grain is the same for every image size.
pub const FROST_SCALE: f64 = 0.2;
/// Where to get the photographs, for the error of a directory without them.
pub const FROST_SOURCE: &str =
    "https://github.com/hendrycks/robustness/tree/master/ImageNet-C/create_c";

/// The frost photographs, as RGB images in `[0, 1]` already shrunk by
/// [`FROST_SCALE`].
#[derive(Debug, Clone, PartialEq)]
pub struct FrostTextures {
    textures: Vec<Image>,
}

impl FrostTextures {
    /// Reads [`FROST_FILES`] from `dir` (PNG or JPEG, any colour type,
    /// converted to 8-bit RGB) and shrinks each by [`FROST_SCALE`] as
    /// OpenCV's `resize(INTER_LINEAR)` does: `round(side * 0.2)` pixels a
    /// side, output pixel `o` reading input position `(o + 0.5) / 0.2 -
    /// 0.5` bilinearly, edges repeated (the positions are whole pixels for
    /// this factor). A missing or undecodable file is an error that says
    /// where to get them.
    pub fn load(dir: &Path) -> Result<FrostTextures> {
        let textures = FROST_FILES
            .iter()
            .map(|name| {
                let path = dir.join(name);
                if !path.is_file() {
                    return Err(DataError::Missing {
                        path,
                        hint: format!(
                            "the frost corruption blends in the frost photographs {} of \
                             {FROST_SOURCE}, which csam does not bundle (their licence is not \
                             stated); download them into {}",
                            FROST_FILES.join(", "),
                            dir.display()
                        ),
                    });
                }
                let decoded = image::open(&path)
                    .map_err(|source| DataError::Decode { path, source })?
                    .to_rgb8();
                let (w, h) = (decoded.width() as usize, decoded.height() as usize);
                let chw: Vec<u8> = (0..3)
                    .flat_map(|c| decoded.pixels().map(move |p| p.0[c]))
                    .collect();
                Ok(shrink(&Image::from_bytes(&chw, 3, h, w), FROST_SCALE))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(FrostTextures { textures })
    }

    /// Textures already shrunk (RGB, any size of at least one pixel), in
    /// the order the corruption draws from.
    pub fn from_scaled(textures: Vec<Image>) -> FrostTextures {
        debug_assert!(textures
            .iter()
            .all(|t| t.channels == 3 && t.plane_len() > 0));
        FrostTextures { textures }
    }

    /// The shrunk textures, in draw order.
    pub fn textures(&self) -> &[Image] {
        &self.textures
    }
}

/// `image` resized by `factor` as OpenCV's `resize(INTER_LINEAR)` (see
/// [`FrostTextures::load`]); at least one pixel a side.
fn shrink(image: &Image, factor: f64) -> Image {
    let side = |n: usize| ((n as f64 * factor).round_ties_even() as usize).max(1);
    let scale = 1.0 / factor;
    let source = |o: usize| (o as f64 + 0.5) * scale - 0.5;
    remap(
        image,
        (side(image.height), side(image.width)),
        |y, x| (source(y), source(x)),
        Border::Nearest,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinking_by_a_fifth_picks_every_fifth_pixel_from_the_third() {
        // Factor 0.2: output o reads (o + 0.5) * 5 - 0.5 = 5 o + 2.
        let image = Image {
            data: (0..12 * 10).map(|v| v as f64).collect(),
            channels: 1,
            height: 12,
            width: 10,
        };
        let small = shrink(&image, 0.2);
        // round(2.4) = 2 rows, round(2.0) = 2 columns.
        assert_eq!((small.height, small.width), (2, 2));
        let expected = [2 * 10 + 2, 2 * 10 + 7, 7 * 10 + 2, 7 * 10 + 7];
        // Positions 5 o + 2 land on pixels up to a few roundings (< 4e-15 at < 12),
        // times a step of <= 10 between neighbours: < 4e-14; a neighbour is off by >= 1.
        for (a, b) in small.data.iter().zip(expected) {
            assert!((a - b as f64).abs() < 1e-12, "{:?}", small.data);
        }
    }

    #[test]
    fn a_directory_without_the_photographs_is_refused_with_where_to_get_them() {
        let dir = std::env::temp_dir().join("csam-no-frost-here");
        let error = FrostTextures::load(&dir).unwrap_err().to_string();
        assert!(error.contains("frost1.png"), "{error}");
        assert!(error.contains("hendrycks/robustness"), "{error}");
        assert!(error.contains("does not bundle"), "{error}");
    }
}
