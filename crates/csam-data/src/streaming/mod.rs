//! Image-folder data sets too large for memory (ImageNet: 1.28 million
//! JPEGs, about 140 GB decoded), read from disk while training.
//!
//! An [`ImageFiles`] list holds paths and labels only ([`index`]); a
//! [`StreamingLoader`] decodes and transforms batches in worker threads
//! behind a bounded queue ([`loader`]), with torchvision's ImageNet
//! reference transforms ([`transform`]) and Pillow's bilinear resampling
//! ([`crate::pillow_resize`]), so that a model sees what it would see under
//! `torchvision.datasets.ImageFolder` with the reference recipe.

pub mod index;
pub mod loader;
pub mod transform;

pub use crate::pillow_resize::Pixels;
pub use index::{ImageFiles, ImageNetSplits, IMAGENET_HELD_OUT_FRACTION};
pub use loader::{decode_rgb, StreamOptions, StreamingBatches, StreamingLoader};
pub use transform::{
    center_crop_box, mirror, random_resized_crop_box, resized_crop, shorter_side_to, CropBox,
    ImageTransform,
};
