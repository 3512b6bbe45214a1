//! What the data tests share: the project venv's python for the tests that
//! check against a Python reference, and generated image files.

#![allow(dead_code)] // each test binary uses its own share of these helpers

use std::path::{Path, PathBuf};

/// The project venv's python (`<workspace>/.venv/bin/python`), or
/// `CSAM_PYTHON`; None when neither exists (the reference tests then skip
/// with a notice).
pub fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CSAM_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    venv.exists().then_some(venv)
}

/// Runs `tests/twins/<script>` with `args`, asserting success.
pub fn run_script(python: &Path, script: &str, args: &[&Path]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/twins")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
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
