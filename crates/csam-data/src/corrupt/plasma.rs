//! The plasma fractal of the fog corruption: a square height map made by
//! the diamond-square algorithm, as the reference's `plasma_fractal` (a
//! modification of FLHerne's `mapgen/diamondsquare.py`).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The side of the map for a `height x width` image: the next power of two
/// at or above both sides, and at least 32 (the reference's `mapsize` for
/// CIFAR-10), so a 28x28 or 32x32 image gets the reference's 32x32 map.
pub fn plasma_side(height: usize, width: usize) -> usize {
    height.max(width).max(32).next_power_of_two()
}

/// A `side x side` height map (row-major) scaled to `[0, 1]` (minimum 0,
/// maximum 1). `side` must be a power of two. Starting from corner value 0,
/// a step of size `s` (from `side` down to 2, halving) sets each square's
/// centre to the mean of its 4 corners, then each diamond's centre (the
/// midpoints of the square edges: first the top ones, then the left ones)
/// to the mean of its 4 neighbours, the map wrapping around at its edges;
/// each new value gets `w * U(-w, w)` added, `w` starting at 100 and divided
/// by `decay` after each step. (`w * U(-w, w)`, not `U(-w, w)`: the
/// reference's `wibbledmean`, kept.) The uniform values `U(-w, w)` are `-w +
/// 2 w u` (numpy's `uniform`) with `u` taken from `draws` ([`plasma_draws`])
/// in that order, row by row; `draws` holds as many as [`plasma_draws`]
/// makes for `side`.
pub fn plasma_fractal(side: usize, decay: f64, draws: &[f64]) -> Vec<f64> {
    debug_assert!(side.is_power_of_two());
    debug_assert_eq!(draws.len(), plasma_draw_count(side));
    let n = side;
    let mut map = vec![0.0; n * n];
    let mut wibble = 100.0;
    let mut step = n;
    let mut draws = draws.iter();
    let mut wibbled = |sum: f64, wibble: f64| {
        // Invariant (asserted above in debug builds): one draw per value set.
        let u = *draws.next().expect("plasma_draws' count for this side");
        sum / 4.0 + wibble * (-wibble + 2.0 * wibble * u)
    };
    while step >= 2 {
        let (k, half) = (n / step, step / 2);
        // Square corners (i, j) and centres (i, j) of this step, wrapped.
        let corner = |map: &[f64], i: usize, j: usize| map[(i % k) * step * n + (j % k) * step];
        let centre = |map: &[f64], i: usize, j: usize| {
            map[((i % k) * step + half) * n + (j % k) * step + half]
        };
        for i in 0..k {
            for j in 0..k {
                let sum = corner(&map, i, j)
                    + corner(&map, i + 1, j)
                    + corner(&map, i, j + 1)
                    + corner(&map, i + 1, j + 1);
                map[(i * step + half) * n + j * step + half] = wibbled(sum, wibble);
            }
        }
        // Top edge midpoints: the centres below and above, the corners left and right.
        for i in 0..k {
            for j in 0..k {
                let sum = centre(&map, i, j)
                    + centre(&map, i + k - 1, j)
                    + corner(&map, i, j)
                    + corner(&map, i, j + 1);
                map[i * step * n + j * step + half] = wibbled(sum, wibble);
            }
        }
        // Left edge midpoints: the centres right and left, the corners above and below.
        for i in 0..k {
            for j in 0..k {
                let sum = centre(&map, i, j)
                    + centre(&map, i, j + k - 1)
                    + corner(&map, i, j)
                    + corner(&map, i + 1, j);
                map[(i * step + half) * n + j * step] = wibbled(sum, wibble);
            }
        }
        step /= 2;
        wibble /= decay;
    }
    let min = map.iter().copied().fold(f64::INFINITY, f64::min);
    let max = map.iter().map(|v| v - min).fold(0.0, f64::max);
    map.iter()
        .map(|v| if max > 0.0 { (v - min) / max } else { 0.0 })
        .collect()
}

/// The random numbers of a [`plasma_fractal`] of side `side`: uniform in
/// `[0, 1)`, one for each value the map sets. Their number depends on
/// `side` only, so every decay meets the same draws.
pub fn plasma_draws(side: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    (0..plasma_draw_count(side)).map(|_| rng.random()).collect()
}

/// How many values a map of side `side` (a power of two) sets: each step of
/// size `s` sets `3 (side / s)^2` (square centres, top and left edge
/// midpoints).
fn plasma_draw_count(side: usize) -> usize {
    (0..side.trailing_zeros())
        .map(|t| 3 * (1usize << t).pow(2))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_map_spans_zero_to_one_and_every_cell_is_set() {
        for side in [2, 8, 32, 64] {
            let mut rng = ChaCha8Rng::seed_from_u64(side as u64);
            let map = plasma_fractal(side, 2.0, &plasma_draws(side, &mut rng));
            assert_eq!(map.len(), side * side);
            let min = map.iter().copied().fold(f64::INFINITY, f64::min);
            let max = map.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert_eq!((min, max), (0.0, 1.0), "side {side}");
            // Distinct values almost everywhere: no cell was left at its start.
            let mut sorted = map.clone();
            sorted.sort_by(f64::total_cmp);
            sorted.dedup();
            assert!(sorted.len() >= side * side - 1, "side {side}");
        }
        assert_eq!(plasma_side(28, 28), 32);
        assert_eq!(plasma_side(33, 20), 64);
    }

    #[test]
    fn a_faster_decay_gives_a_smoother_map() {
        // Fine steps get w / decay^t: with decay 3 they add less high-frequency
        // detail than with decay 1.75, so neighbours differ less.
        let roughness = |decay| {
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let map = plasma_fractal(64, decay, &plasma_draws(64, &mut rng));
            map.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>()
        };
        let (smooth, rough) = (roughness(3.0), roughness(1.75));
        // The finest steps' amplitudes, relative to the first, are 3^-5 against
        // 1.75^-5 (15x less), and the ranges that rescale both maps to [0, 1] differ
        // by ~1.5x: the ratio sits far below 0.8, which equal decays would reach.
        assert!(smooth < 0.8 * rough, "{smooth} {rough}");
    }
}
