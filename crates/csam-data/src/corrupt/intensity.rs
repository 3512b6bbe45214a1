//! Intensity corruptions of Hendrycks & Dietterich (2019): contrast (their
//! "digital" family) and brightness (their "weather" family), with the
//! CIFAR-10-C parameters of their `make_cifar_c.py`. Both are deterministic.

use super::image::Image;

/// Contrast factor per severity 1..5.
pub const CONTRAST: [f64; 5] = [0.75, 0.5, 0.4, 0.3, 0.15];
/// Amount added to the HSV value channel per severity 1..5.
pub const BRIGHTNESS: [f64; 5] = [0.05, 0.1, 0.15, 0.2, 0.3];

/// `clip((x - m) * factor + m, 0, 1)` with `m` the mean of each channel
/// over the image.
pub fn contrast(image: &Image, factor: f64) -> Image {
    let plane = image.plane_len();
    let data = image
        .data
        .chunks_exact(plane)
        .flat_map(|channel| {
            let mean = channel.iter().sum::<f64>() / plane as f64;
            channel
                .iter()
                .map(move |&x| ((x - mean) * factor + mean).clamp(0.0, 1.0))
        })
        .collect();
    image.with_data(data)
}

/// The reference code's HSV round trip (`rgb2hsv`, `V = clip(V + amount, 0,
/// 1)`, `hsv2rgb`), in closed form: hue and saturation are kept, so each
/// pixel's channels are scaled by `V' / V` where `V` is their maximum and
/// `V' = min(V + amount, 1)`; a black pixel (`V = 0`, saturation 0) becomes
/// grey `V'`. For one channel this is `min(x + amount, 1)`, the HSV value of
/// a grey pixel. No deviation from the reference, only no detour through hue.
pub fn brightness(image: &Image, amount: f64) -> Image {
    let plane = image.plane_len();
    let mut out = image.data.clone();
    for p in 0..plane {
        let value = (0..image.channels)
            .map(|c| image.data[c * plane + p])
            .fold(0.0, f64::max);
        let brighter = (value + amount).clamp(0.0, 1.0);
        for c in 0..image.channels {
            let x = &mut out[c * plane + p];
            *x = if value > 0.0 {
                *x * brighter / value
            } else {
                brighter
            };
        }
    }
    image.with_data(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgb(pixels: &[[f64; 3]]) -> Image {
        let n = pixels.len();
        Image {
            data: (0..3)
                .flat_map(|c| pixels.iter().map(move |p| p[c]))
                .collect(),
            channels: 3,
            height: 1,
            width: n,
        }
    }

    #[test]
    fn contrast_pulls_each_channel_towards_its_own_mean() {
        // Channel 0: 0.2 and 0.6 (mean 0.4); channel 1: 1.0 and 1.0; channel 2: 0 and 0.4.
        let out = contrast(&rgb(&[[0.2, 1.0, 0.0], [0.6, 1.0, 0.4]]), 0.5);
        let expected = [0.3, 0.5, 1.0, 1.0, 0.1, 0.3];
        // A mean of 2 values and one blend: <= 4 roundings of values <= 1, < 5e-16.
        for (a, b) in out.data.iter().zip(expected) {
            assert!((a - b).abs() < 1e-12, "{:?}", out.data);
        }
    }

    #[test]
    fn brightness_matches_a_textbook_hsv_round_trip() {
        // Hand-made HSV: (0.2, 0.4, 0.8) has V 0.8, S 0.75, H 220 deg; V + 0.1 =
        // 0.9 keeps H and S, so RGB = 0.9 * (1 - S * (1 - f)) per channel:
        // (0.225, 0.45, 0.9). Black becomes grey 0.1; white stays white.
        let out = brightness(
            &rgb(&[[0.2, 0.4, 0.8], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]),
            0.1,
        );
        let expected = [0.225, 0.1, 1.0, 0.45, 0.1, 1.0, 0.9, 0.1, 1.0];
        // An HSV round trip is ~10 f64 roundings of values <= 6 (the hue sector):
        // < 10 * 4.4e-16 ~ 4.4e-15; a wrong sector or channel is off by >= 0.1.
        for (a, b) in out.data.iter().zip(expected) {
            assert!((a - b).abs() < 1e-12, "{:?}", out.data);
        }
    }
}
