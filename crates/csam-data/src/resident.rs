//! Batches built on the device from a dataset kept there
//! ([`crate::LoaderOptions::resident`], [`ResidentData`]).
//!
//! The dataset is uploaded once as `u8 [N, C, H + 2p, W + 2p]`, zero-padded
//! by the crop padding `p`, with the normalisation's lookup tables as
//! `f32 [C * 256]` and the labels as `i64 [N]`. Per batch the host sends one
//! `i64 [4, B]` tensor (sample index, `dy`, `dx`, flip of each row; the
//! draws are the host path's, from the same stream in the same order) and the
//! device builds the batch with the convention of [`crate::Augmentation`]:
//! output pixel `(b, c, y, x)` is padded pixel
//! `(index_b, c, dy_b + y, dx_b + x')` with `x' = W - 1 - x` where row `b`
//! is flipped, else `x` (the host's `(y + dy - p, x' + dx - p)` shifted by
//! the padding), mapped through table `c`. Padding is byte 0, which maps to
//! table entry 0 as on the host, and every value is a table entry, so the
//! batches are bit-identical to the host path's.

use tch::{Device, Kind, Tensor};

use super::augment::Draw;
use super::dataset::Dataset;
use super::error::{DataError, Result};
use super::loader::LoaderOptions;
use super::normalize::Normalization;

/// The most bytes of padded images kept on a device other than the CPU:
/// 4 GiB. tch has no query of a device's free memory, so this is a fixed
/// cap that leaves a 16 GiB card most of its memory for the model; it holds
/// CIFAR-10's training set padded by 4 (`50000 x 3 x 40 x 40` bytes, 240 MB)
/// many times over. On the CPU the dataset is in memory already.
pub const RESIDENT_DEVICE_LIMIT: u64 = 4 << 30;

/// A dataset, its labels and its normalisation's lookup tables on one
/// device, for the loaders of one set of [`LoaderOptions`] (crop padding and
/// device): [`crate::BatchLoader::new`] uploads one for its own use;
/// [`crate::BatchLoader::with_resident`] builds a loader on one uploaded
/// earlier, so that a loader per epoch uploads nothing. Cloning it makes
/// another handle on the same device memory.
#[derive(Debug)]
pub struct ResidentData {
    /// `u8 [N, C, H + 2p, W + 2p]`.
    images: Tensor,
    /// `i64 [N]`.
    labels: Tensor,
    /// `f32 [C * 256]`: entry `c * 256 + v` is `tables[c][v]`.
    tables: Tensor,
    /// `(C, H, W)` of a sample before padding.
    shape: [i64; 3],
    /// What it was uploaded for: samples, normalisation, crop padding, device.
    n: usize,
    normalization: Normalization,
    padding: usize,
    device: Device,
}

impl Clone for ResidentData {
    fn clone(&self) -> Self {
        ResidentData {
            images: self.images.shallow_clone(),
            labels: self.labels.shallow_clone(),
            tables: self.tables.shallow_clone(),
            normalization: self.normalization.clone(),
            ..*self
        }
    }
}

impl ResidentData {
    /// Uploads `dataset` padded by the crop padding of `options`, its labels
    /// and the lookup tables of `normalization` to `options.device`, after
    /// checking the normalisation against the dataset and the padded images
    /// against [`RESIDENT_DEVICE_LIMIT`] (off the CPU).
    pub fn upload(
        dataset: &Dataset,
        normalization: &Normalization,
        options: &LoaderOptions,
    ) -> Result<ResidentData> {
        normalization.validate(dataset.channels)?;
        let (padding, device) = (options.augmentation.crop_padding, options.device);
        let (c, h, w) = dataset.sample_shape();
        let needed = [c, h + 2 * padding, w + 2 * padding]
            .iter()
            .try_fold(dataset.n as u64, |bytes, &side| {
                bytes.checked_mul(side as u64)
            })
            .unwrap_or(u64::MAX);
        check_fits(&dataset.name, device, padding, needed)?;
        let p = padding as i64;
        let shape = [c as i64, h as i64, w as i64];
        let images = Tensor::from_slice(&dataset.images)
            .view([dataset.n as i64, shape[0], shape[1], shape[2]])
            .constant_pad_nd([p, p, p, p])
            .to_device(device);
        let labels: Vec<i64> = dataset.labels.iter().map(|&l| l as i64).collect();
        let tables = normalization.lookup_tables();
        Ok(ResidentData {
            images,
            labels: Tensor::from_slice(&labels).to_device(device),
            tables: Tensor::from_slice(tables.as_flattened()).to_device(device),
            shape,
            n: dataset.n,
            normalization: normalization.clone(),
            padding,
            device,
        })
    }

    /// Refuses a loader of `dataset`, `normalization` and `options` that
    /// this upload was not made for (other samples, normalisation, crop
    /// padding or device).
    pub(crate) fn check_made_for(
        &self,
        dataset: &Dataset,
        normalization: &Normalization,
        options: &LoaderOptions,
    ) -> Result<()> {
        let (c, h, w) = dataset.sample_shape();
        let same = self.n == dataset.n
            && self.shape == [c as i64, h as i64, w as i64]
            && self.normalization == *normalization
            && self.padding == options.augmentation.crop_padding
            && self.device == options.device;
        match same {
            true => Ok(()),
            false => Err(DataError::Invalid(format!(
                "{}: its resident data was uploaded for other samples, normalisation, crop \
                 padding or device than this loader's",
                dataset.name
            ))),
        }
    }

    /// The batch of the samples `indices` augmented by `draws` (one each):
    /// `(f32 [B, C, H, W], i64 [B])` on the device (see the module doc).
    pub(crate) fn batch(&self, indices: &[usize], draws: &[Draw]) -> (Tensor, Tensor) {
        let device = self.images.device();
        let [c, h, w] = self.shape;
        let b = indices.len() as i64;
        let fields = [
            indices.iter().map(|&i| i as i64).collect::<Vec<_>>(),
            draws.iter().map(|d| d.dy as i64).collect(),
            draws.iter().map(|d| d.dx as i64).collect(),
            draws.iter().map(|d| i64::from(d.flip)).collect(),
        ];
        let sent = Tensor::from_slice(&fields.concat())
            .view([4, b])
            .to_device(device);
        let (index, dy, dx, flip) = (sent.get(0), sent.get(1), sent.get(2), sent.get(3));
        let images = self.images.index_select(0, &index);
        let padded_width = images.size()[3];
        let ys = Tensor::arange(h, (Kind::Int64, device));
        let rows = (dy.unsqueeze(1) + ys.unsqueeze(0))
            .view([b, 1, h, 1])
            .expand([b, c, h, padded_width], false);
        let images = images.gather(2, &rows, false);
        let xs = Tensor::arange(w, (Kind::Int64, device)).unsqueeze(0);
        let mirrored = xs.flip([1]);
        let columns = (mirrored.where_self(&flip.unsqueeze(1).ne(0), &xs) + dx.unsqueeze(1))
            .view([b, 1, 1, w])
            .expand([b, c, h, w], false);
        let bytes = images.gather(3, &columns, false);
        let offsets = (Tensor::arange(c, (Kind::Int64, device)) * 256).view([1, c, 1, 1]);
        let pixels = self.tables.take(&(bytes.to_kind(Kind::Int64) + offsets));
        (pixels, self.labels.index_select(0, &index))
    }
}

/// Refuses `needed` bytes of padded images off the CPU above
/// [`RESIDENT_DEVICE_LIMIT`].
pub(crate) fn check_fits(name: &str, device: Device, padding: usize, needed: u64) -> Result<()> {
    if device == Device::Cpu || needed <= RESIDENT_DEVICE_LIMIT {
        return Ok(());
    }
    Err(DataError::ResidentTooLarge {
        name: name.to_string(),
        device: format!("{device:?}"),
        padding,
        needed,
        allowed: RESIDENT_DEVICE_LIMIT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_applies_off_the_cpu_only() {
        let over = RESIDENT_DEVICE_LIMIT + 1;
        assert!(check_fits("d", Device::Cpu, 4, u64::MAX).is_ok());
        assert!(check_fits("d", Device::Cuda(0), 4, RESIDENT_DEVICE_LIMIT).is_ok());
        let message = check_fits("d", Device::Cuda(1), 4, over)
            .unwrap_err()
            .to_string();
        assert!(message.contains(&over.to_string()), "{message}");
        assert!(
            message.contains(&RESIDENT_DEVICE_LIMIT.to_string()),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }
}
