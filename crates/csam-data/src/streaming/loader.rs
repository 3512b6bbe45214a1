//! Batches decoded from image files by worker threads while the consumer
//! trains: the streamed counterpart of [`crate::BatchLoader`].
//!
//! Epoch `e` visits the files in the permutation drawn from `(seed, Order,
//! e)` (or in file order without shuffling), as the in-memory loader does.
//! The sample at position `p` of the epoch draws its crop and flip from its
//! own ChaCha8 stream, `(seed, Augment, e)` with stream number `p`, and each
//! batch is built whole by one worker: batch `k` by worker `k mod N`. So the
//! batches depend on the seed and the epoch only, never on the worker count
//! or on timing.
//!
//! Memory: worker `w` hands its batches over a channel holding at most
//! `ceil(prefetch / N)` of them and blocks when it is full, so at most
//! `prefetch + N` batches (the queued ones and one being built per worker)
//! exist at a time, whatever the size of the data set.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use tch::{Device, Tensor};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::index::ImageFiles;
use super::transform::ImageTransform;
use crate::error::{DataError, Result};
use crate::loader::{batches_per_epoch, epoch_order};
use crate::normalize::Normalization;
use crate::pillow_resize::Pixels;
use crate::rng::{stream, Purpose};

/// How a [`StreamingLoader`] walks its files.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamOptions {
    pub batch_size: usize,
    /// Visit the files in a seeded random order per epoch (off: file order).
    pub shuffle: bool,
    /// Drop the last batch when smaller than `batch_size`.
    pub drop_last: bool,
    pub transform: ImageTransform,
    pub seed: u64,
    /// Decoding threads (at least 1).
    pub workers: usize,
    /// Finished batches waiting for the consumer, at most (at least 1).
    pub prefetch: usize,
    pub device: Device,
}

impl StreamOptions {
    /// Training: shuffled, last partial batch kept, `workers` threads with
    /// two batches each in the queue (PyTorch's `prefetch_factor=2`).
    pub fn training(
        batch_size: usize,
        transform: ImageTransform,
        seed: u64,
        workers: usize,
        device: Device,
    ) -> StreamOptions {
        StreamOptions {
            batch_size,
            shuffle: true,
            drop_last: false,
            transform,
            seed,
            workers,
            prefetch: 2 * workers.max(1),
            device,
        }
    }

    /// Evaluation: file order, every file once.
    pub fn evaluation(
        batch_size: usize,
        transform: ImageTransform,
        workers: usize,
        device: Device,
    ) -> StreamOptions {
        StreamOptions {
            shuffle: false,
            seed: 0,
            ..StreamOptions::training(batch_size, transform, 0, workers, device)
        }
    }
}

/// Yields normalised `(xs: f32 [B, 3, S, S], ys: i64 [B])` batches of image
/// files, decoded and transformed in worker threads (see the module doc).
#[derive(Debug, Clone)]
pub struct StreamingLoader {
    files: Arc<ImageFiles>,
    tables: Arc<Vec<[f32; 256]>>,
    options: StreamOptions,
}

/// One batch as built by a worker, before it becomes tensors.
struct HostBatch {
    pixels: Vec<f32>,
    labels: Vec<i64>,
}

impl StreamingLoader {
    /// Checks the options and that `normalization` has 3 channels (images
    /// are decoded to RGB, greyscale ones included, as torchvision's
    /// `ImageFolder` does).
    pub fn new(
        files: Arc<ImageFiles>,
        normalization: &Normalization,
        options: StreamOptions,
    ) -> Result<StreamingLoader> {
        normalization.validate(3)?;
        let invalid = |what: &str| Err(DataError::Invalid(format!("{what} must be positive")));
        if options.batch_size == 0 {
            return invalid("batch size");
        }
        if options.workers == 0 {
            return invalid("the number of data workers");
        }
        if options.prefetch == 0 {
            return invalid("the prefetch depth");
        }
        if options.transform.size() == 0 {
            return invalid("the image size");
        }
        Ok(StreamingLoader {
            files,
            tables: Arc::new(normalization.lookup_tables()),
            options,
        })
    }

    /// The files this loader reads.
    pub fn files(&self) -> &ImageFiles {
        &self.files
    }

    /// Batches per epoch.
    pub fn n_batches(&self) -> usize {
        let options = &self.options;
        batches_per_epoch(self.files.len(), options.batch_size, options.drop_last)
    }

    /// The file indices of `epoch` in visiting order, as the in-memory
    /// loader draws them.
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let options = &self.options;
        epoch_order(self.files.len(), options.shuffle, options.seed, epoch)
    }

    /// Starts the workers of `epoch`; they stop when the batches are
    /// consumed or the iterator is dropped.
    pub fn epoch(&self, epoch: u64) -> StreamingBatches {
        let order = Arc::new(self.order(epoch));
        let n_batches = self.n_batches();
        let workers = self.options.workers.min(n_batches.max(1));
        let capacity = self.options.prefetch.div_ceil(workers);
        let stop = Arc::new(AtomicBool::new(false));
        let mut receivers = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for worker in 0..workers {
            let (sender, receiver) = sync_channel(capacity);
            let job = WorkerJob {
                loader: self.clone(),
                order: Arc::clone(&order),
                epoch,
                first: worker,
                step: workers,
                n_batches,
                stop: Arc::clone(&stop),
            };
            handles.push(std::thread::spawn(move || job.run(sender)));
            receivers.push(receiver);
        }
        StreamingBatches {
            receivers,
            handles,
            stop,
            next: 0,
            n_batches,
            side: self.options.transform.size() as i64,
            device: self.options.device,
            failed: false,
        }
    }

    /// The normalised pixels of the files at visiting positions
    /// `positions` of `epoch`'s `order`.
    fn build(
        &self,
        order: &[usize],
        positions: std::ops::Range<usize>,
        epoch: u64,
    ) -> Result<HostBatch> {
        let size = self.options.transform.size();
        let plane = size * size;
        let mut pixels = vec![0f32; positions.len() * 3 * plane];
        let mut labels = Vec::with_capacity(positions.len());
        for (position, out) in positions.zip(pixels.chunks_exact_mut(3 * plane)) {
            let index = order[position];
            let mut rng = stream(self.options.seed, Purpose::Augment, epoch);
            rng.set_stream(position as u64);
            let image = decode_rgb(&self.files.files[index])?;
            let sample = self.options.transform.apply(&image, &mut rng);
            for (i, rgb) in sample.data.chunks_exact(3).enumerate() {
                for c in 0..3 {
                    out[c * plane + i] = self.tables[c][usize::from(rgb[c])];
                }
            }
            labels.push(self.files.labels[index] as i64);
        }
        Ok(HostBatch { pixels, labels })
    }
}

/// The most bytes one streamed image may decode to as 8-bit RGB: 512 MiB,
/// the `image` crate's own default allocation limit, which bounds its
/// decoded buffer but not the RGB copy made of a greyscale or palette image
/// (a 389 KB PNG declaring 20000x20000 grey pixels took 2.8 GB). About 179
/// million pixels: far above any photograph a classifier is trained on, and
/// each decoding thread may hold one.
pub const MAX_DECODED_BYTES: u64 = 512 * 1024 * 1024;

/// Refuses an image of `width` x `height` pixels whose RGB pixels would take
/// more than [`MAX_DECODED_BYTES`], from its header, before decoding it.
fn check_decoded_size(path: &Path, width: usize, height: usize) -> Result<()> {
    let bytes = width as u128 * height as u128 * 3;
    if bytes <= u128::from(MAX_DECODED_BYTES) {
        return Ok(());
    }
    Err(DataError::ImageTooLarge {
        path: path.to_path_buf(),
        width,
        height,
        bytes,
        limit: MAX_DECODED_BYTES,
    })
}

/// Decodes an image file (format from its bytes) to 8-bit RGB; greyscale
/// and CMYK images are converted, as Pillow's `convert("RGB")` does. The
/// header's size is checked first ([`MAX_DECODED_BYTES`]).
///
/// JPEGs go to zune-jpeg (the decoder inside the `image` crate) in strict
/// mode, so that a truncated or corrupt file is an error rather than an
/// image padded with grey; other formats to the `image` crate.
pub fn decode_rgb(path: &Path) -> Result<Pixels> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let decode_error = |source| DataError::Decode {
        path: path.to_path_buf(),
        source,
    };
    if bytes.starts_with(&[0xff, 0xd8]) {
        let options = DecoderOptions::default()
            .set_strict_mode(true)
            .jpeg_set_out_colorspace(ColorSpace::RGB);
        let mut decoder = JpegDecoder::new_with_options(ZCursor::new(&bytes), options);
        let jpeg_error = |e: zune_jpeg::errors::DecodeErrors| {
            decode_error(image::ImageError::Decoding(
                image::error::DecodingError::new(image::ImageFormat::Jpeg.into(), e.to_string()),
            ))
        };
        decoder.decode_headers().map_err(jpeg_error)?;
        if let Some((width, height)) = decoder.dimensions() {
            check_decoded_size(path, width, height)?;
        }
        let data = decoder.decode().map_err(jpeg_error)?;
        // Invariant: a successful decode has read the header.
        let (width, height) = decoder.dimensions().expect("dimensions after decoding");
        return Ok(Pixels {
            data,
            width,
            height,
            channels: 3,
        });
    }
    let decoder = image::ImageReader::new(std::io::Cursor::new(&bytes))
        .with_guessed_format()
        .map_err(|e| DataError::io(path, e))?
        .into_decoder()
        .map_err(decode_error)?;
    let (width, height) = image::ImageDecoder::dimensions(&decoder);
    check_decoded_size(path, width as usize, height as usize)?;
    let decoded = image::DynamicImage::from_decoder(decoder)
        .map_err(decode_error)?
        .into_rgb8();
    let (width, height) = (decoded.width() as usize, decoded.height() as usize);
    Ok(Pixels {
        data: decoded.into_raw(),
        width,
        height,
        channels: 3,
    })
}

/// What one worker does in an epoch: batches `first`, `first + step`, ...
struct WorkerJob {
    loader: StreamingLoader,
    order: Arc<Vec<usize>>,
    epoch: u64,
    first: usize,
    step: usize,
    n_batches: usize,
    stop: Arc<AtomicBool>,
}

impl WorkerJob {
    fn run(self, sender: SyncSender<Result<HostBatch>>) {
        let b = self.loader.options.batch_size;
        for k in (self.first..self.n_batches).step_by(self.step) {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let positions = k * b..((k + 1) * b).min(self.order.len());
            let batch = self.loader.build(&self.order, positions, self.epoch);
            let failed = batch.is_err();
            // A closed channel means the consumer is gone: nothing to do.
            if sender.send(batch).is_err() || failed {
                return;
            }
        }
    }
}

/// The batches of one epoch of a [`StreamingLoader`], in order; an
/// unreadable file ends the epoch with its error.
pub struct StreamingBatches {
    receivers: Vec<Receiver<Result<HostBatch>>>,
    handles: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    next: usize,
    n_batches: usize,
    /// Side of the square samples.
    side: i64,
    device: Device,
    failed: bool,
}

impl Iterator for StreamingBatches {
    type Item = Result<(Tensor, Tensor)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next == self.n_batches {
            return None;
        }
        let receiver = &self.receivers[self.next % self.receivers.len()];
        self.next += 1;
        let batch = match receiver.recv() {
            Ok(batch) => batch,
            Err(_) => Err(DataError::Invalid(
                "a data worker thread stopped without a batch or an error".into(),
            )),
        };
        match batch {
            Ok(HostBatch { pixels, labels }) => {
                let b = labels.len() as i64;
                let xs = Tensor::from_slice(&pixels)
                    .view([b, 3, self.side, self.side])
                    .to_device(self.device);
                let ys = Tensor::from_slice(&labels).to_device(self.device);
                Some(Ok((xs, ys)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.failed {
            0
        } else {
            self.n_batches - self.next
        };
        (0, Some(left))
    }
}

impl Drop for StreamingBatches {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receivers unblocks workers waiting on a full channel.
        self.receivers.clear();
        for handle in self.handles.drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG of a signature, an IHDR chunk declaring `width` x `height` 8-bit
    /// greyscale pixels, one byte of image data and IEND: enough for a
    /// decoder to read the size, and a few dozen bytes whatever the size.
    fn png_header(width: u32, height: u32) -> Vec<u8> {
        let chunk = |kind: &[u8], data: &[u8]| {
            let mut crc = flate2::Crc::new();
            crc.update(kind);
            crc.update(data);
            let mut bytes = (data.len() as u32).to_be_bytes().to_vec();
            bytes.extend_from_slice(kind);
            bytes.extend_from_slice(data);
            bytes.extend_from_slice(&crc.sum().to_be_bytes());
            bytes
        };
        let mut ihdr = width.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&height.to_be_bytes());
        // Bit depth 8, colour type 0 (greyscale), deflate, no filter, no interlace.
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend(chunk(b"IHDR", &ihdr));
        // The decoder reads the header up to the first image data chunk;
        // this one holds no valid stream.
        png.extend(chunk(b"IDAT", &[0]));
        png.extend(chunk(b"IEND", &[]));
        png
    }

    /// A real 8 x 8 JPEG whose baseline frame header (SOF0: marker, length,
    /// precision, then height and width) is rewritten to declare `width` x
    /// `height`; its scan still holds 8 x 8 pixels.
    fn jpeg_declaring(width: u16, height: u16) -> Vec<u8> {
        let mut bytes = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 90)
            .encode(&[128; 8 * 8 * 3], 8, 8, image::ExtendedColorType::Rgb8)
            .unwrap();
        let sof = bytes
            .windows(2)
            .position(|marker| marker == [0xff, 0xc0])
            .expect("a baseline frame header");
        bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
        bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
        bytes
    }

    /// Writes `file` to `path` and asserts that decoding it is refused from
    /// its header as `width` x `height` RGB pixels (`width * height * 3`
    /// bytes), past [`MAX_DECODED_BYTES`].
    fn assert_refused_for_size(path: &Path, file: Vec<u8>, width: usize, height: usize) {
        std::fs::write(path, file).unwrap();
        match decode_rgb(path) {
            Err(DataError::ImageTooLarge {
                width: w,
                height: h,
                bytes,
                ..
            }) if (w, h) == (width, height) && bytes == (width * height * 3) as u128 => {}
            other => panic!("{:?}", other.map(|p| (p.width, p.height))),
        }
    }

    #[test]
    fn a_jpeg_declaring_more_pixels_than_the_limit_is_refused_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.jpg");
        // Within zune-jpeg's own limit of 16384 a side, past ours.
        assert_refused_for_size(&path, jpeg_declaring(16_000, 16_000), 16_000, 16_000);
        // Within the limit the size is no reason to refuse.
        std::fs::write(&path, jpeg_declaring(100, 100)).unwrap();
        let decoded = decode_rgb(&path);
        assert!(
            !matches!(decoded, Err(DataError::ImageTooLarge { .. })),
            "{:?}",
            decoded.map(|p| (p.width, p.height))
        );
        std::fs::write(&path, jpeg_declaring(8, 8)).unwrap();
        assert_eq!(
            decode_rgb(&path).unwrap().width,
            8,
            "the unpatched size decodes"
        );
    }

    #[test]
    fn an_image_declaring_more_pixels_than_the_limit_is_refused_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.png");
        assert_refused_for_size(&path, png_header(20_000, 20_000), 20_000, 20_000);
        // At the limit's side, the same header is read and decoding goes on
        // to the missing pixel data: a decoding error, not the size.
        std::fs::write(&path, png_header(100, 100)).unwrap();
        let Err(error) = decode_rgb(&path) else {
            panic!("a header without pixel data decoded");
        };
        assert!(matches!(error, DataError::Decode { .. }), "{error}");
    }
}
