//! AdaFocal: focal loss whose exponent adapts, per confidence bin, to the
//! calibration of the validation split.

use tch::{Kind, Tensor};

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// AdaFocal (Ghosh, Schaaf and Gormley 2022, "AdaFocal: calibration-aware
/// adaptive focal loss", NeurIPS). Each training example takes the exponent
/// `g` of the bin its true-class probability `p` falls in:
///
/// `l = -(1 - sign(g) p + 1e-20)^|g| log p`:
///
/// focal loss for `g > 0`, inverse focal loss `-(1 + p)^|g| log p` for
/// `g < 0` (raising the confidence of under-confident bins), cross entropy
/// for `g = 0`. Bin `b` covers `[e_b, e_(b+1))`, the first and the last open
/// towards 0 and 1. Before the first update the `n_bins` bins are of equal
/// width and every `g` is `initial_gamma` (focal loss).
///
/// After each epoch ([`AdaFocal::updated`]) the bins become the equal-mass
/// bins of the validation split's confidences `r` (edges interpolated between
/// sorted confidences as `numpy.interp`; bin `b` holds `e_b < r <= e_(b+1)`),
/// and with each bin's gap `d_b = mean(r) - accuracy` (0 when empty):
///
/// 1. `g <- g exp(lambda d_b)` if `g > 0`, `g exp(-lambda d_b)` otherwise;
/// 2. switch: if `|g| < switch`, `g <- -switch` when `g > 0`, `+switch` when
///    not (a shrinking focal exponent turns into inverse focal, and back);
/// 3. clip to `[gamma_min, gamma_max]`.
///
/// As the authors' code (3mcloud/adafocal, `losses/adafocal.py`,
/// `update_bin_stats` and `get_gamma_per_sample`); defaults their `main.py`:
/// 15 bins, `lambda = 1` (`rate`), `initial_gamma = 1`, `gamma_max = 20`,
/// `gamma_min = -2`, `switch = 0.2`. Their loss sums over the batch; csam
/// takes the mean, as for every loss. The exponent is chosen from `p`'s
/// value (no gradient through the choice); the factor keeps its gradient.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaFocal {
    /// The rate `lambda > 0` of the exponents' update.
    #[serde(default = "AdaFocal::default_rate")]
    pub rate: f64,
    /// Every bin's exponent before the first update.
    #[serde(default = "AdaFocal::default_initial_gamma")]
    pub initial_gamma: f64,
    /// The largest exponent.
    #[serde(default = "AdaFocal::default_gamma_max")]
    pub gamma_max: f64,
    /// The smallest exponent (the strongest inverse focal loss).
    #[serde(default = "AdaFocal::default_gamma_min")]
    pub gamma_min: f64,
    /// The least magnitude of an exponent, `S_th > 0`.
    #[serde(default = "AdaFocal::default_switch")]
    pub switch: f64,
    /// The number of confidence bins, >= 1.
    #[serde(default = "AdaFocal::default_bins")]
    pub bins: usize,
    /// The bins and exponents learnt so far; `None` before the first update.
    /// Part of a run's checkpoint, not of its specification.
    #[serde(skip)]
    pub state: Option<AdaFocalBins>,
}

/// AdaFocal's bins and their exponents.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaFocalBins {
    /// `n_bins + 1` non-decreasing edges `e_0 .. e_n`.
    pub edges: Vec<f64>,
    /// One exponent per bin.
    pub gammas: Vec<f64>,
}

impl AdaFocalBins {
    /// The state as one float64 tensor `[gammas..., edges...]`, for a
    /// checkpoint.
    pub fn to_tensor(&self) -> Tensor {
        Tensor::from_slice(&[self.gammas.as_slice(), self.edges.as_slice()].concat())
    }

    /// The state of `bins` bins read back from [`AdaFocalBins::to_tensor`].
    pub fn from_tensor(tensor: &Tensor, bins: usize) -> Result<AdaFocalBins, LossError> {
        let values = Vec::<f64>::try_from(tensor.f_to_kind(Kind::Double)?.f_flatten(0, -1)?)?;
        if values.len() != 2 * bins + 1 {
            return Err(LossError::Shape(format!(
                "AdaFocal state of {bins} bins needs {} values, the checkpoint holds {}",
                2 * bins + 1,
                values.len()
            )));
        }
        let (gammas, edges) = values.split_at(bins);
        Ok(AdaFocalBins {
            edges: edges.to_vec(),
            gammas: gammas.to_vec(),
        })
    }
}

impl AdaFocal {
    fn default_rate() -> f64 {
        1.0
    }

    fn default_initial_gamma() -> f64 {
        1.0
    }

    fn default_gamma_max() -> f64 {
        20.0
    }

    fn default_gamma_min() -> f64 {
        -2.0
    }

    fn default_switch() -> f64 {
        0.2
    }

    fn default_bins() -> usize {
        15
    }

    /// The bins in use: the learnt ones, or equal-width bins at
    /// `initial_gamma` before the first update.
    pub fn bins(&self) -> AdaFocalBins {
        self.state.clone().unwrap_or_else(|| AdaFocalBins {
            edges: (0..=self.bins)
                .map(|b| b as f64 / self.bins as f64)
                .collect(),
            gammas: vec![self.initial_gamma; self.bins],
        })
    }

    /// The loss after an epoch whose validation split has confidences
    /// `confidence` (largest softmax probability) and `correct` predictions:
    /// new bins and exponents (see [`AdaFocal`]).
    pub fn updated(&self, confidence: &[f64], correct: &[bool]) -> Result<AdaFocal, LossError> {
        if confidence.is_empty() || confidence.len() != correct.len() {
            return Err(LossError::Shape(format!(
                "AdaFocal's update needs as many validation confidences as outcomes, at least \
                 one: got {} and {}",
                confidence.len(),
                correct.len()
            )));
        }
        let edges = equal_mass_edges(confidence, self.bins);
        let previous = self.bins();
        let gammas = (0..self.bins)
            .map(|b| {
                let gap = bin_gap(confidence, correct, edges[b], edges[b + 1]);
                self.next_gamma(previous.gammas[b], gap)
            })
            .collect();
        Ok(AdaFocal {
            state: Some(AdaFocalBins { edges, gammas }),
            ..self.clone()
        })
    }

    /// One bin's exponent after a validation gap `gap`.
    fn next_gamma(&self, gamma: f64, gap: f64) -> f64 {
        let next = match gamma > 0.0 {
            true => gamma * (self.rate * gap).exp(),
            false => gamma * (-self.rate * gap).exp(),
        };
        let switched = match (next.abs() < self.switch, next > 0.0) {
            (true, true) => -self.switch,
            (true, false) => self.switch,
            (false, _) => next,
        };
        switched.min(self.gamma_max).max(self.gamma_min)
    }
}

/// `n + 1` equal-mass edges of `values`: `numpy.interp(linspace(0, N, n + 1),
/// arange(N), sort(values))`, so `e_0` is the smallest value and `e_n` the
/// largest.
fn equal_mass_edges(values: &[f64], n: usize) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let last = sorted.len() - 1;
    (0..=n)
        .map(|k| {
            let position = k as f64 * sorted.len() as f64 / n as f64;
            if position >= last as f64 {
                return sorted[last];
            }
            let below = position.floor() as usize;
            let fraction = position - below as f64;
            sorted[below] + fraction * (sorted[below + 1] - sorted[below])
        })
        .collect()
}

/// Mean confidence minus accuracy of the values in `(low, high]`; 0 when
/// none falls there.
fn bin_gap(confidence: &[f64], correct: &[bool], low: f64, high: f64) -> f64 {
    let (mut count, mut confidence_sum, mut right) = (0usize, 0.0, 0usize);
    for (&r, &c) in confidence.iter().zip(correct) {
        if r > low && r <= high {
            count += 1;
            confidence_sum += r;
            right += usize::from(c);
        }
    }
    match count {
        0 => 0.0,
        n => (confidence_sum - right as f64) / n as f64,
    }
}

impl Default for AdaFocal {
    fn default() -> Self {
        AdaFocal {
            rate: AdaFocal::default_rate(),
            initial_gamma: AdaFocal::default_initial_gamma(),
            gamma_max: AdaFocal::default_gamma_max(),
            gamma_min: AdaFocal::default_gamma_min(),
            switch: AdaFocal::default_switch(),
            bins: AdaFocal::default_bins(),
            state: None,
        }
    }
}

impl ExampleLoss for AdaFocal {
    fn validate(&self) -> Result<(), LossError> {
        let fields = Fields("adafocal");
        fields.positive("rate", self.rate)?;
        fields.positive("switch", self.switch)?;
        let (max, min) = (self.gamma_max, self.gamma_min);
        fields.check(
            "gamma_max",
            max,
            max.is_finite() && max >= self.switch,
            "must be finite and >= switch",
        )?;
        fields.check(
            "gamma_min",
            min,
            min.is_finite() && min <= -self.switch,
            "must be finite and <= -switch",
        )?;
        let initial = self.initial_gamma;
        fields.check(
            "initial_gamma",
            initial,
            (min..=max).contains(&initial),
            "must lie in [gamma_min, gamma_max]",
        )?;
        fields.check(
            "bins",
            self.bins as f64,
            self.bins > 0,
            "must be at least 1",
        )
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let log_p = gather_true(&scores.log_probs, targets)?;
        let p = log_p.f_exp()?;
        let kind = p.kind();
        let AdaFocalBins { edges, gammas } = self.bins();
        let device = p.device();
        let interior = Tensor::from_slice(&edges[1..edges.len() - 1])
            .f_to_kind(kind)?
            .f_to_device(device)?;
        let bin = p
            .detach()
            .f_unsqueeze(1)?
            .f_ge_tensor(&interior.f_unsqueeze(0)?)?
            .f_sum_dim_intlist(1, false, Kind::Int64)?;
        let gamma = Tensor::from_slice(&gammas)
            .f_to_kind(kind)?
            .f_to_device(device)?
            .f_index_select(0, &bin)?;
        let base: Tensor = 1.0 - gamma.f_sign()? * &p + 1e-20;
        Ok(-(base.f_pow(&gamma.f_abs()?)? * log_p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Pure-Rust f64: edges and exponents <= 20 from a few operations and an
    // exp, each within a few ulps (~1e-15); 1e-12 leaves 1000x room.
    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    /// One epoch's update worked by hand: 8 validation examples, 3 bins.
    #[test]
    fn one_update_matches_the_hand_computed_epoch() {
        let confidence = [0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99];
        let correct = [false, true, false, true, true, true, false, true];
        let loss = AdaFocal {
            bins: 3,
            state: Some(AdaFocalBins {
                edges: vec![0.0, 0.4, 0.8, 1.0],
                gammas: vec![0.25, -1.0, 19.0],
            }),
            ..AdaFocal::default()
        };
        let updated = loss.updated(&confidence, &correct).unwrap();
        let state = updated.state.unwrap();
        // Positions 0, 8/3, 16/3, 8 in the sorted values (7 is the last):
        // 0.3; 0.6 + (2/3)(0.7 - 0.6); 0.9 + (1/3)(0.95 - 0.9); 0.99.
        let edges = [0.3, 0.6 + 0.2 / 3.0, 0.9 + 0.05 / 3.0, 0.99];
        close(&state.edges, &edges);
        // Bin 0 (0.3, 0.667]: 0.5 (right), 0.6 (wrong); 0.3 is in no bin.
        // gap = 0.55 - 0.5 = 0.05; 0.25 exp(0.05) = 0.2628 > 0.2: kept.
        // Bin 1 (0.667, 0.917]: 0.7, 0.8, 0.9, all right: gap = 0.8 - 1 = -0.2;
        // -1 exp(0.2) = -1.2214.
        // Bin 2 (0.917, 0.99]: 0.95 (wrong), 0.99 (right): gap = 0.97 - 0.5 =
        // 0.47; 19 exp(0.47) = 30.4 clipped to 20.
        close(
            &state.gammas,
            &[0.25 * 0.05f64.exp(), -(0.2f64.exp()), 20.0],
        );
        // The switch, both ways: 0.21 exp(-0.2) = 0.172 < 0.2 -> -0.2;
        // -0.21 exp(-0.2) = -0.172 -> +0.2; and the clip below: -1.9 exp(0.2) -> -2.
        let turning = AdaFocal {
            bins: 1,
            ..AdaFocal::default()
        };
        assert_eq!(turning.next_gamma(0.21, -0.2), -0.2);
        assert_eq!(turning.next_gamma(-0.21, 0.2), 0.2);
        assert_eq!(turning.next_gamma(-1.9, -0.2), -2.0);
        // An empty bin keeps its exponent (gap 0), a zero one stays in
        // place until the switch lifts it.
        assert_eq!(turning.next_gamma(3.0, 0.0), 3.0);
        assert_eq!(turning.next_gamma(0.0, 0.5), 0.2);
    }

    #[test]
    fn before_any_update_it_is_focal_loss_with_the_initial_gamma() {
        let loss = AdaFocal::default();
        let bins = loss.bins();
        assert_eq!(bins.gammas, vec![1.0; 15]);
        close(&bins.edges[..3], &[0.0, 1.0 / 15.0, 2.0 / 15.0]);
        let state = AdaFocalBins {
            edges: vec![0.1, 0.5, 0.9],
            gammas: vec![2.0, -1.0],
        };
        let back = AdaFocalBins::from_tensor(&state.to_tensor(), 2).unwrap();
        assert_eq!(back, state);
        assert!(AdaFocalBins::from_tensor(&state.to_tensor(), 3).is_err());
    }
}
