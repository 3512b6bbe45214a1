"""Bad input raises CalibrationError (a ValueError) with one line that names the problem."""

import numpy as np
import pytest

import csam_calib as cc


def raises(match, function, *args, **kwargs):
    with pytest.raises(cc.CalibrationError, match=match) as caught:
        function(*args, **kwargs)
    assert isinstance(caught.value, ValueError)
    assert "\n" not in str(caught.value)


def test_bad_arrays_are_refused_with_what_is_wrong():
    probs = np.array([[0.7, 0.3], [0.4, 0.6]])
    raises("sum to 1.5", cc.ece, np.array([[0.7, 0.8], [0.4, 0.6]]), [0, 1])
    raises("probability 1.2 at row 0, column 0 is above 1", cc.ece, np.array([[1.2, -0.2], [0.4, 0.6]]), [0, 1])
    raises("non-finite|NaN", cc.ece, np.array([[np.nan, 0.3], [0.4, 0.6]]), [0, 1])
    raises(r"probs must be a 2-D array \(N x K\), got shape \[2\]", cc.ece, np.array([0.7, 0.3]), [0])
    raises("label 2 at row 1 is outside 0..=1", cc.ece, probs, [0, 2])
    raises("label -1", cc.ece, probs, [0, -1])
    raises("labels must hold integer class indices", cc.ece, probs, [0.0, 1.0])
    raises("2 rows|2 labels|shape mismatch", cc.ece, probs, [0, 1, 1])
    raises("probs must hold numbers", cc.ece, np.array([["a", "b"]]), [0])


def test_bad_options_list_the_valid_ones():
    probs, labels = np.array([[0.7, 0.3], [0.4, 0.6]]), [0, 1]
    raises("edges: unknown variant `open`, expected `right-closed` or `left-closed-with-one-bin`",
           cc.ece, probs, labels, edges="open")
    raises("norm: unknown variant `l3`", cc.ece, probs, labels, norm="l3")
    raises("variant: unknown variant", cc.adaptive_ece, probs, labels, variant="quantile")
    raises("metric: unknown metric `auc`, expected one of ece", cc.bootstrap, "auc", probs, labels)
    raises("invalid argument", cc.ece, probs, labels, n_bins=0)
    # Counts no machine could allocate, negative or non-integer ones: a
    # ValueError each, the interpreter unharmed.
    for function in (cc.ece, cc.adaptive_ece, cc.classwise_ece, cc.reliability_diagram, cc.summarize):
        for n_bins in (10**12, 2**62, 10**30, -1, 2.5):
            raises(r"n_bins must be an integer in 1..=100000", function, probs, labels, n_bins=n_bins)
    for resamples in (10**10, -3, 1):
        raises(r"resamples must be an integer in 2..=10000000", cc.bootstrap, "ece", probs, labels, resamples=resamples)
    raises("level must be in", cc.bootstrap, "ece", probs, labels, level=1.5)
    # A NaN tolerance would let any row through, a negative one none.
    raises("tolerance must be a number >= 0, got NaN", cc.ece, np.array([[0.7, 3.8], [0.4, 0.6]]), labels, tolerance=float("nan"))
    raises("tolerance must be a number >= 0, got -1", cc.ece, probs, labels, tolerance=-1.0)


def test_undefined_metrics_say_why():
    # Every prediction right: no wrong one to rank against.
    raises("undefined", cc.auroc_misclassification, np.array([[0.9, 0.1], [0.2, 0.8]]), [0, 1])
