//! Reading a channel plane between its pixels: the bilinear sampler of
//! scipy's `map_coordinates(order=1)` and OpenCV's `warpAffine`, and scipy's
//! `zoom(order=1)` built on it.

use super::border::Border;
use super::image::Image;

/// The plane's value at the real position `(y, x)` (pixel centres at integer
/// coordinates): bilinear between the four pixels around it, each read
/// through `border` (which reproduces scipy's `map_coordinates(order=1,
/// mode='reflect')` for [`Border::Reflect`] and OpenCV's `INTER_LINEAR` with
/// `BORDER_REFLECT_101` for [`Border::Reflect101`]).
pub fn bilinear(
    plane: &[f64],
    (height, width): (usize, usize),
    (y, x): (f64, f64),
    border: Border,
) -> f64 {
    let (y0, x0) = (y.floor(), x.floor());
    let (fy, fx) = (y - y0, x - x0);
    let (y0, x0) = (y0 as i64, x0 as i64);
    let at = |dy: i64, dx: i64| {
        plane[border.index(y0 + dy, height) * width + border.index(x0 + dx, width)]
    };
    let top = at(0, 0) * (1.0 - fx) + at(0, 1) * fx;
    let bottom = at(1, 0) * (1.0 - fx) + at(1, 1) * fx;
    top * (1.0 - fy) + bottom * fy
}

/// An image of `out_height x out_width` (same channels) whose pixel `(y,
/// x)` reads each channel of `image` at `position(y, x)` through
/// [`bilinear`] with `border`.
pub fn remap(
    image: &Image,
    (out_height, out_width): (usize, usize),
    position: impl Fn(usize, usize) -> (f64, f64),
    border: Border,
) -> Image {
    let size = (image.height, image.width);
    let position = &position;
    let data = image
        .data
        .chunks_exact(image.plane_len())
        .flat_map(|plane| {
            (0..out_height * out_width).map(move |i| {
                let at = position(i / out_width, i % out_width);
                bilinear(plane, size, at, border)
            })
        })
        .collect();
    Image {
        data,
        channels: image.channels,
        height: out_height,
        width: out_width,
    }
}

/// Output length of scipy's `zoom` along an axis of `len` samples:
/// `round(len * factor)`, Python's `round` (half to even).
pub fn zoomed_len(len: usize, factor: f64) -> usize {
    (len as f64 * factor).round_ties_even() as usize
}

/// `scipy.ndimage.zoom(plane, factor, order=1)` of a `height x width` plane
/// (`grid_mode=False`): output pixel `o` reads input position `o * (n - 1) /
/// (m - 1)` along each axis (`n` samples in, `m` out), so that the corner
/// pixels stay put; the plane returned is [`zoomed_len`] on each side.
pub fn zoom(
    plane: &[f64],
    (height, width): (usize, usize),
    factor: f64,
) -> (Vec<f64>, usize, usize) {
    let (out_h, out_w) = (zoomed_len(height, factor), zoomed_len(width, factor));
    let step = |n: usize, m: usize| {
        if m > 1 {
            (n - 1) as f64 / (m - 1) as f64
        } else {
            0.0
        }
    };
    let (sy, sx) = (step(height, out_h), step(width, out_w));
    let data = (0..out_h)
        .flat_map(|y| (0..out_w).map(move |x| (y as f64 * sy, x as f64 * sx)))
        .map(|pos| bilinear(plane, (height, width), pos, Border::Nearest))
        .collect();
    (data, out_h, out_w)
}

/// The reference code's `clipped_zoom`: the central crop of `ceil(h /
/// factor) x ceil(w / factor)` pixels (top-left corner `(h - ch) // 2`),
/// [`zoom`]ed by `factor`, then the central `h x w` of that. The reference
/// crops a square (its images are); each side is cropped on its own here,
/// which is the same for square images.
pub fn clipped_zoom(plane: &[f64], (height, width): (usize, usize), factor: f64) -> Vec<f64> {
    let crop = |n: usize| (n as f64 / factor).ceil() as usize;
    let (ch, cw) = (crop(height), crop(width));
    let (top, left) = ((height - ch) / 2, (width - cw) / 2);
    let cropped: Vec<f64> = (top..top + ch)
        .flat_map(|y| {
            plane[y * width + left..y * width + left + cw]
                .iter()
                .copied()
        })
        .collect();
    let (zoomed, zh, zw) = zoom(&cropped, (ch, cw), factor);
    let (trim_top, trim_left) = ((zh - height) / 2, (zw - width) / 2);
    (trim_top..trim_top + height)
        .flat_map(|y| {
            zoomed[y * zw + trim_left..y * zw + trim_left + width]
                .iter()
                .copied()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bilinear_interpolates_inside_and_folds_outside() {
        // Plane 2x3: rows [0, 1, 2] and [3, 4, 5].
        let plane = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let at = |y, x, b| bilinear(&plane, (2, 3), (y, x), b);
        assert_eq!(at(0.0, 2.0, Border::Reflect), 2.0);
        // Weights (multiples of 1/4) and values (small integers) are exact in f64,
        // so are these interpolations; a wrong neighbour is off by >= 0.25.
        assert!((at(0.5, 0.5, Border::Reflect) - 2.0).abs() < 1e-15);
        assert!((at(0.25, 1.5, Border::Reflect) - (1.5 + 0.75)).abs() < 1e-15);
        // x = -0.5 reads columns -1 and 0: column 0 twice (reflect) or
        // columns 1 and 0 (reflect-101).
        assert!((at(0.0, -0.5, Border::Reflect) - 0.0).abs() < 1e-15);
        assert!((at(0.0, -0.5, Border::Reflect101) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn zoom_keeps_the_corners_and_spaces_the_rest_evenly() {
        // scipy: zoom(arange(4.), 1.26, order=1) = [0, 0.75, 1.5, 2.25, 3].
        let (out, h, w) = zoom(&[0.0, 1.0, 2.0, 3.0], (1, 4), 1.26);
        assert_eq!((h, w), (1, 5));
        // Step 3 / 4 and positions i * 3 / 4 are exact, so is the interpolation.
        for (a, b) in out.iter().zip([0.0, 0.75, 1.5, 2.25, 3.0]) {
            assert!((a - b).abs() < 1e-15, "{out:?}");
        }
        assert_eq!(zoomed_len(32, 1.01), 32);
        // 2.5 rounds to even.
        assert_eq!(zoomed_len(5, 0.5), 2);
    }

    #[test]
    fn a_clipped_zoom_by_one_is_the_identity_and_keeps_the_size() {
        let plane: Vec<f64> = (0..5 * 7).map(|v| v as f64).collect();
        assert_eq!(clipped_zoom(&plane, (5, 7), 1.0), plane);
        for factor in [1.06, 1.25, 1.75, 2.25] {
            assert_eq!(clipped_zoom(&plane, (5, 7), factor).len(), 35);
        }
    }
}
