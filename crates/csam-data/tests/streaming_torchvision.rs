//! The streamed ImageNet pipeline against torchvision, image by image: the
//! training crop (`F.resized_crop`, bilinear with antialiasing, and
//! `hflip`), the evaluation transform (`Resize(256)` + `CenterCrop(224)`),
//! whole normalised batches of an `ImageFolder` through a `DataLoader`, and
//! JPEG decoding against Pillow's. Skipped, with a notice, without the
//! project venv.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use csam_data::streaming::{
    decode_rgb, mirror, random_resized_crop_box, resized_crop, CropBox, ImageFiles, ImageTransform,
    StreamOptions, StreamingLoader,
};
use csam_data::Normalization;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const SIDE: usize = 224 * 224 * 3;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// PNG images of several sizes and shapes, one greyscale.
    pngs: Vec<PathBuf>,
    /// JPEGs written by the `image` crate (baseline, 4:2:0), one greyscale.
    jpegs: Vec<PathBuf>,
    /// An `ImageFolder` tree of PNGs: `folder/<class>/*.png`.
    folder: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let sizes = [
        (500, 375, 3),
        (375, 500, 3),
        (333, 257, 3),
        (230, 224, 1),
        (1000, 120, 3),
        (96, 64, 3),
    ];
    let pngs: Vec<PathBuf> = sizes
        .iter()
        .enumerate()
        .map(|(i, &(w, h, c))| {
            let path = root.join(format!("img{i}.png"));
            support::save_image(&path, w, h, c, i as u32);
            path
        })
        .collect();
    let jpegs: Vec<PathBuf> = [(320, 240, 3), (257, 199, 3), (200, 150, 1)]
        .iter()
        .enumerate()
        .map(|(i, &(w, h, c))| {
            let path = root.join(format!("photo{i}.jpg"));
            support::save_image(&path, w, h, c, 10 + i as u32);
            path
        })
        .collect();
    let folder = root.join("folder");
    for (class, count) in [("n0001", 3), ("n0002", 2)] {
        for k in 0..count {
            let path = folder.join(class).join(format!("{k}.png"));
            support::save_image(&path, 300 + 17 * k, 260, 3, 20 + k);
        }
    }
    Fixture {
        _dir: dir,
        root,
        pngs,
        jpegs,
        folder,
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn crops_evaluation_batches_and_jpeg_decoding_match_torchvision() {
    let Some(python) = support::python() else {
        return;
    };
    let f = fixture();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut crop_cases = Vec::new();
    let mut ours_crops = Vec::new();
    let mut described = Vec::new();
    for path in &f.pngs {
        let image = decode_rgb(path).unwrap();
        let (w, h) = (image.width, image.height);
        let mut boxes = vec![
            (
                CropBox {
                    left: 0,
                    top: 0,
                    width: w,
                    height: h,
                },
                false,
            ),
            (
                CropBox {
                    left: 1,
                    top: 2,
                    width: w / 3 + 1,
                    height: h / 2 + 3,
                },
                true,
            ),
        ];
        for k in 0..3 {
            let b = random_resized_crop_box(w, h, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut rng);
            boxes.push((b, k % 2 == 0));
        }
        let listed: Vec<_> = boxes
            .iter()
            .map(|(b, flip)| serde_json::json!([b.top, b.left, b.height, b.width, flip]))
            .collect();
        crop_cases.push(serde_json::json!({ "path": path, "boxes": listed }));
        for (b, flip) in boxes {
            described.push(format!("{b:?} of {w}x{h}, flip {flip}"));
            let crop = resized_crop(&image, b, 224);
            ours_crops.extend(if flip { mirror(crop) } else { crop }.data);
        }
    }
    let ours_evals: Vec<u8> = f
        .pngs
        .iter()
        .flat_map(|p| {
            ImageTransform::evaluation(224)
                .apply(&decode_rgb(p).unwrap(), &mut rng)
                .data
        })
        .collect();

    let out = f.root.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let cases = serde_json::json!({
        "crops": crop_cases, "evals": f.pngs, "folder": f.folder, "batch": 2,
        "jpegs": f.jpegs, "out": out,
    });
    let cases_file = f.root.join("cases.json");
    std::fs::write(&cases_file, cases.to_string()).unwrap();
    support::run_fixture_script(&python, "torchvision_transforms.py", &[&cases_file]);

    // Pillow's fixed-point resampling, reproduced: the same bytes where
    // Pillow runs the horizontal pass first, at most one level apart where
    // Pillow 13 runs the vertical pass first (see `csam_data::pillow_resize`).
    let within_one = |ours: &[u8], theirs: &[u8], what: &str| -> bool {
        assert_eq!(ours.len(), theirs.len(), "{what}");
        let worst = ours.iter().zip(theirs).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(
            worst <= Some(1),
            "{what}: pixels differ by up to {worst:?} levels"
        );
        ours == theirs
    };
    let theirs = read(&out.join("crops.bin"));
    assert_eq!(theirs.len(), ours_crops.len());
    let identical = ours_crops
        .chunks(SIDE)
        .zip(theirs.chunks(SIDE))
        .zip(&described)
        .filter(|((a, b), what)| within_one(a, b, what))
        .count();
    // The whole-image box of the first picture shrinks both ways by 2.2 and
    // 1.7: Pillow 13 runs the horizontal pass first there, as we do.
    assert!(ours_crops[..SIDE] == theirs[..SIDE], "{}", described[0]);
    eprintln!(
        "{identical} of {} crops byte-identical to Pillow's",
        described.len()
    );
    within_one(
        &ours_evals,
        &read(&out.join("evals.bin")),
        "Resize(256) + CenterCrop(224)",
    );

    // Whole batches: ImageFolder's class order, file order, ToTensor + Normalize.
    let files = Arc::new(ImageFiles::list(&f.folder, "folder", None).unwrap());
    let options =
        StreamOptions::evaluation(2, ImageTransform::evaluation(224), 2, tch::Device::Cpu);
    let loader = StreamingLoader::new(files, &Normalization::imagenet(), options).unwrap();
    let (mut xs, mut ys) = (Vec::<f32>::new(), Vec::<i64>::new());
    for batch in loader.epoch(0) {
        let (x, y) = batch.unwrap();
        xs.extend(Vec::<f32>::try_from(x.view([-1])).unwrap());
        ys.extend(Vec::<i64>::try_from(y).unwrap());
    }
    let their_xs: Vec<f32> = read(&out.join("folder.bin"))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let their_ys: Vec<i64> = read(&out.join("labels.bin"))
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(ys, their_ys);
    assert_eq!(xs.len(), their_xs.len());
    // One level is 1 / (255 std) ~ 0.0175 after normalisation; torchvision
    // normalises in float32, the loader's tables in float64.
    let worst = xs
        .iter()
        .zip(&their_xs)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < 0.0176, "normalised pixels differ by up to {worst}");

    // JPEG: another decoder (zune-jpeg inside the `image` crate against
    // Pillow's libjpeg-turbo) rounds its inverse DCT and chroma upsampling
    // its own way: on these images 2% of a level on average, 3 at most.
    let theirs = read(&out.join("jpegs.bin"));
    let ours: Vec<u8> = f
        .jpegs
        .iter()
        .flat_map(|p| decode_rgb(p).unwrap().data)
        .collect();
    assert_eq!(ours.len(), theirs.len());
    let diffs: Vec<u32> = ours
        .iter()
        .zip(&theirs)
        .map(|(&a, &b)| a.abs_diff(b) as u32)
        .collect();
    let mean = diffs.iter().sum::<u32>() as f64 / diffs.len() as f64;
    let max = diffs.iter().copied().max().unwrap_or(0);
    eprintln!("JPEG decoding against Pillow: mean |diff| {mean:.3}, max {max}");
    assert!(mean < 0.1 && max <= 4, "mean {mean}, max {max}");
}
