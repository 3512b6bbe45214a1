//! TCE, the temperature-scaled calibration error (crates/csam-calib/README.md,
//! "TCE and temperature scaling"): the l1 ECE
//! on the test set of `softmax(z / T)`, with `T` fitted on the validation set
//! by the chosen objective (NLL, or the ECE grid of lineage (a)).

use ndarray::ArrayView2;

use super::summary::MetricOptions;
use crate::binning::Norm;
use crate::calibrators::temperature::{fit_temperature, TemperatureObjective, TemperatureScaling};
use crate::calibrators::Calibrator;
use crate::error::Result;

/// Fits `T` on `(val_logits, val_labels)` and returns the ECE of the scaled test
/// predictions, both ECEs (the grid objective's and the reported one) with the
/// equal-width binning of `options`.
pub fn tce(
    val_logits: ArrayView2<'_, f64>,
    val_labels: &[usize],
    test_logits: ArrayView2<'_, f64>,
    test_labels: &[usize],
    options: &MetricOptions,
    objective: TemperatureObjective,
) -> Result<f64> {
    let binning = options.equal_width();
    let fit = fit_temperature(val_logits, val_labels, objective, &binning)?;
    let scaler = TemperatureScaling {
        temperature: fit.temperature,
        objective,
    };
    let probs = scaler.transform(test_logits)?;
    super::ece(probs.view(), test_labels, &binning, Norm::L1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::Binning;
    use crate::scores::softmax;
    use ndarray::array;

    #[test]
    fn tce_is_the_ece_after_the_fitted_temperature() {
        let val = array![[2.0, 0.0], [1.0, 0.5], [0.0, 3.0], [2.5, 0.0], [0.2, 0.0]];
        let val_labels = [0, 1, 1, 0, 1];
        let test = array![[1.5, 0.0], [0.0, 0.7], [3.0, 0.0]];
        let test_labels = [0, 0, 0];
        let options = MetricOptions::default();
        let t = fit_temperature(
            val.view(),
            &val_labels,
            TemperatureObjective::Nll,
            &Binning::default(),
        )
        .unwrap()
        .temperature;
        let probs = softmax(test.mapv(|z| z / t).view());
        let expected =
            super::super::ece(probs.view(), &test_labels, &Binning::default(), Norm::L1).unwrap();
        let got = tce(
            val.view(),
            &val_labels,
            test.view(),
            &test_labels,
            &options,
            TemperatureObjective::Nll,
        )
        .unwrap();
        assert_eq!(got, expected);
        assert!(tce(
            val.view(),
            &val_labels,
            test.view(),
            &[0, 0],
            &options,
            TemperatureObjective::Nll
        )
        .is_err());
    }
}
