//! Input checks shared by every calibrator's `fit` and `transform`, so that a
//! bad matrix is refused with an error naming the offending row and column
//! instead of producing NaN probabilities.

use ndarray::ArrayView2;

use crate::error::{CalibError, Result};

/// Checks validation inputs: at least one row, at least two classes, one label
/// per row, finite logits, labels in `0..K`, and at least two distinct labels
/// (with a single class every calibrator would be fitted to a constant).
pub(crate) fn check_fit_inputs(
    method: &'static str,
    logits: ArrayView2<'_, f64>,
    labels: &[usize],
) -> Result<()> {
    let (n_rows, n_classes) = logits.dim();
    if n_rows == 0 {
        return Err(CalibError::Empty(format!(
            "{method}: no validation rows to fit on"
        )));
    }
    if n_classes < 2 {
        return Err(CalibError::InvalidArgument(format!(
            "{method}: logits have {n_classes} column(s); a classifier needs at least 2 classes"
        )));
    }
    if labels.len() != n_rows {
        return Err(CalibError::ShapeMismatch(format!(
            "{method}: {n_rows} logit rows but {} labels",
            labels.len()
        )));
    }
    check_finite(logits)?;
    if let Some((row, &label)) = labels.iter().enumerate().find(|(_, &y)| y >= n_classes) {
        return Err(CalibError::LabelOutOfRange {
            row,
            // A usize label that overflows i64 is reported as i64::MAX: still out of range.
            label: i64::try_from(label).unwrap_or(i64::MAX),
            n_classes,
        });
    }
    if labels.iter().all(|&y| y == labels[0]) {
        return Err(CalibError::Fit {
            method,
            reason: format!(
                "every validation label is {}; at least two classes must occur",
                labels[0]
            ),
        });
    }
    Ok(())
}

/// Checks logits handed to a fitted calibrator: fitted at all (`fitted_classes > 0`),
/// non-empty, `K` equal to the fitted `K`, all finite.
pub(crate) fn check_transform_inputs(
    method: &'static str,
    logits: ArrayView2<'_, f64>,
    fitted_classes: usize,
) -> Result<()> {
    if fitted_classes == 0 {
        return Err(CalibError::InvalidArgument(format!(
            "{method} calibrator is not fitted: call fit on validation logits first"
        )));
    }
    let (n_rows, n_classes) = logits.dim();
    if n_rows == 0 {
        return Err(CalibError::Empty(format!("{method}: no rows to transform")));
    }
    if n_classes != fitted_classes {
        return Err(CalibError::ShapeMismatch(format!(
            "{method} was fitted on {fitted_classes} classes but the logits have {n_classes} columns"
        )));
    }
    check_finite(logits)
}

fn check_finite(logits: ArrayView2<'_, f64>) -> Result<()> {
    match logits.indexed_iter().find(|(_, v)| !v.is_finite()) {
        Some(((row, col), &value)) => Err(CalibError::NonFinite { row, col, value }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn refuses_each_kind_of_bad_input() {
        let good = array![[0.0, 1.0], [1.0, 0.0]];
        assert!(check_fit_inputs("t", good.view(), &[0, 1]).is_ok());
        let empty = ndarray::Array2::<f64>::zeros((0, 2));
        assert!(matches!(
            check_fit_inputs("t", empty.view(), &[]),
            Err(CalibError::Empty(_))
        ));
        assert!(matches!(
            check_fit_inputs("t", good.view(), &[0]),
            Err(CalibError::ShapeMismatch(_))
        ));
        assert!(matches!(
            check_fit_inputs("t", good.view(), &[0, 2]),
            Err(CalibError::LabelOutOfRange {
                row: 1,
                label: 2,
                n_classes: 2
            })
        ));
        assert!(matches!(
            check_fit_inputs("t", good.view(), &[1, 1]),
            Err(CalibError::Fit { .. })
        ));
        let nan = array![[0.0, 1.0], [f64::NAN, 0.0]];
        assert!(matches!(
            check_fit_inputs("t", nan.view(), &[0, 1]),
            Err(CalibError::NonFinite { row: 1, col: 0, .. })
        ));
        assert!(matches!(
            check_transform_inputs("t", good.view(), 3),
            Err(CalibError::ShapeMismatch(_))
        ));
        assert!(matches!(
            check_transform_inputs("t", good.view(), 0),
            Err(CalibError::InvalidArgument(_))
        ));
    }
}
