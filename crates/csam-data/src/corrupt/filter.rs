//! scipy.ndimage's Gaussian filter (what scikit-image's `filters.gaussian`
//! calls), on one channel plane.

use super::border::Border;

/// scipy's `_gaussian_kernel1d`: taps `exp(-x^2 / (2 sigma^2))` for `x` in
/// `-r..=r` with `r = floor(truncate * sigma + 0.5)`, normalised to sum 1.
/// A deviation of (almost) zero gives the identity `[1]`, as scipy skips
/// such axes.
pub fn gaussian_taps(sigma: f64, truncate: f64) -> Vec<f64> {
    if sigma <= 1e-15 {
        return vec![1.0];
    }
    let radius = (truncate * sigma + 0.5).floor() as i64;
    let taps: Vec<f64> = (-radius..=radius)
        .map(|x| (-0.5 * (x * x) as f64 / (sigma * sigma)).exp())
        .collect();
    let total: f64 = taps.iter().sum();
    taps.into_iter().map(|t| t / total).collect()
}

/// `scipy.ndimage.gaussian_filter(plane, sigma, mode=border,
/// truncate=truncate)` of a `height x width` plane: the taps of
/// [`gaussian_taps`] along the rows, then along the columns.
pub fn gaussian_filter(
    plane: &[f64],
    (height, width): (usize, usize),
    sigma: f64,
    truncate: f64,
    border: Border,
) -> Vec<f64> {
    let taps = gaussian_taps(sigma, truncate);
    let radius = (taps.len() / 2) as i64;
    let pass = |data: &[f64], along_x: bool| -> Vec<f64> {
        let mut out = vec![0.0; data.len()];
        for y in 0..height {
            for x in 0..width {
                out[y * width + x] = taps
                    .iter()
                    .zip(-radius..=radius)
                    .map(|(w, d)| {
                        let (sy, sx) = if along_x {
                            (y, border.index(x as i64 + d, width))
                        } else {
                            (border.index(y as i64 + d, height), x)
                        };
                        w * data[sy * width + sx]
                    })
                    .sum();
            }
        }
        out
    };
    // Axis 0 (down the columns) first, then axis 1, as scipy loops over
    // the axes; the order changes round-off only.
    let columns = pass(plane, false);
    pass(&columns, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_follow_scipys_radius_and_normalisation() {
        // sigma 0.4, truncate 4: radius floor(2.1) = 2.
        let taps = gaussian_taps(0.4, 4.0);
        assert_eq!(taps.len(), 5);
        let raw = [(-2.0f64 / 0.16).exp(), (-0.5f64 / 0.16).exp(), 1.0];
        let total = 2.0 * (raw[0] + raw[1]) + raw[2];
        // Five terms summed in another order, then a quotient: <= 5 roundings of
        // values <= 1.3 (0.5 ulp <= 1.1e-16), < 6e-16 on taps below 1.
        assert!((taps[2] - 1.0 / total).abs() < 1e-15);
        assert!((taps[0] - raw[0] / total).abs() < 1e-15);
        // sigma 0.05: radius floor(0.7) = 0, the identity.
        assert_eq!(gaussian_taps(0.05, 4.0), vec![1.0]);
        assert_eq!(gaussian_taps(0.0, 3.0), vec![1.0]);
    }

    #[test]
    fn a_filter_keeps_flat_planes_and_the_mean_of_periodic_ones() {
        let flat = vec![0.3; 6 * 5];
        for border in [Border::Reflect, Border::Nearest, Border::Reflect101] {
            let out = gaussian_filter(&flat, (6, 5), 2.5, 3.0, border);
            // Two passes of 17 taps (radius 8) summing to 1 within 17 eps: <= 4 * 17 *
            // 2.2e-16 * 0.3 ~ 4.5e-15 off 0.3; a wrong border or tap is off by > 1e-3.
            assert!(out.iter().all(|v| (v - 0.3).abs() < 1e-12));
        }
        // An impulse in the middle spreads into the separable kernel's outer product.
        let mut impulse = vec![0.0; 9 * 9];
        impulse[4 * 9 + 4] = 1.0;
        let out = gaussian_filter(&impulse, (9, 9), 0.7, 4.0, Border::Reflect);
        let taps = gaussian_taps(0.7, 4.0);
        let r = taps.len() / 2;
        // One nonzero product plus zeros: the same single rounding as the expected.
        assert!((out[4 * 9 + 4] - taps[r] * taps[r]).abs() < 1e-15);
        assert!((out[3 * 9 + 5] - taps[r - 1] * taps[r + 1]).abs() < 1e-15);
    }
}
