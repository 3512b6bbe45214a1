//! Pillow's `Image.resize(size, Image.BOX)` on 8-bit planes, integer for
//! integer: the pixelate corruption is two of these, and Pillow rounds to
//! bytes after each pass, so the bytes are reproduced rather than the ideal
//! box average (`Resample.c`, `precompute_coeffs` and the `_8bpc` passes).

/// Fixed-point precision of Pillow's 8-bit coefficients (`PRECISION_BITS`).
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// One output sample's first input index and its fixed-point weights.
struct Tap {
    first: usize,
    weights: Vec<i64>,
}

/// Pillow's coefficients for resampling `n_in` samples to `n_out` with the
/// box filter: output `o` is centred on input position `c = (o + 0.5) * s`
/// (`s = n_in / n_out`), covers inputs `int(c - r + 0.5)..int(c + r +
/// 0.5)` (`r = 0.5 max(s, 1)`) each weighted 1 where `|i - c + 0.5| / max(s,
/// 1)` lies in `(-0.5, 0.5]`, normalised, and scaled to integers with
/// `2^22` rounding half away from zero.
fn box_taps(n_in: usize, n_out: usize) -> Vec<Tap> {
    let scale = n_in as f64 / n_out as f64;
    let filter_scale = scale.max(1.0);
    let support = 0.5 * filter_scale;
    (0..n_out)
        .map(|o| {
            let centre = (o as f64 + 0.5) * scale;
            let first = ((centre - support + 0.5) as i64).max(0) as usize;
            let end = ((centre + support + 0.5) as i64).min(n_in as i64) as usize;
            let raw: Vec<f64> = (first..end)
                .map(|i| {
                    let t = (i as f64 - centre + 0.5) / filter_scale;
                    if t > -0.5 && t <= 0.5 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let total: f64 = raw.iter().sum();
            let weights = raw
                .iter()
                .map(|&w| {
                    let w = if total != 0.0 { w / total } else { w };
                    (0.5 + w * f64::from(1u32 << PRECISION_BITS)) as i64
                })
                .collect();
            Tap { first, weights }
        })
        .collect()
}

/// Pillow's `clip8`: the fixed-point sum (rounding offset included) back to a byte.
fn clip8(sum: i64) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The `height x width` byte plane resized to `out_height x out_width` with
/// Pillow's box filter: the horizontal pass first (skipped when the width
/// stays), rounded to bytes, then the vertical pass (skipped when the
/// height stays), as Pillow does.
pub fn box_resize(
    plane: &[u8],
    (height, width): (usize, usize),
    (out_height, out_width): (usize, usize),
) -> Vec<u8> {
    let round = 1i64 << (PRECISION_BITS - 1);
    let mut rows = plane.to_vec();
    if out_width != width {
        let taps = box_taps(width, out_width);
        rows = (0..height)
            .flat_map(|y| {
                let row = &plane[y * width..(y + 1) * width];
                taps.iter().map(move |t| {
                    let sum: i64 = t
                        .weights
                        .iter()
                        .enumerate()
                        .map(|(k, w)| i64::from(row[t.first + k]) * w)
                        .sum();
                    clip8(round + sum)
                })
            })
            .collect();
    }
    if out_height == height {
        return rows;
    }
    let taps = box_taps(height, out_height);
    taps.iter()
        .flat_map(|t| {
            let rows = &rows;
            (0..out_width).map(move |x| {
                let sum: i64 = t
                    .weights
                    .iter()
                    .enumerate()
                    .map(|(k, w)| i64::from(rows[(t.first + k) * out_width + x]) * w)
                    .sum();
                clip8(round + sum)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_averages_pairs_and_doubling_repeats() {
        // 4 -> 2: each output is the mean of a pair, rounded half up.
        assert_eq!(box_resize(&[0, 3, 10, 20], (1, 4), (1, 2)), vec![2, 15]);
        // 2 -> 4: each input covers two outputs.
        assert_eq!(box_resize(&[7, 9], (1, 2), (1, 4)), vec![7, 7, 9, 9]);
        // Vertically the same.
        assert_eq!(box_resize(&[0, 3, 10, 20], (4, 1), (2, 1)), vec![2, 15]);
        // Same size: untouched.
        assert_eq!(box_resize(&[1, 2, 3], (1, 3), (1, 3)), vec![1, 2, 3]);
    }
}
