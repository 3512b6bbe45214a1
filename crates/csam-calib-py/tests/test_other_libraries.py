"""csam_calib against torchmetrics' and netcal's ECE, where they are installed.

The conventions they reveal (docs in crates/csam-calib-py/README.md):
- torchmetrics' `MulticlassCalibrationError` bins [lo, hi) with an extra bin for
  a confidence of exactly 1.0: csam's `edges="left-closed-with-one-bin"`, equal
  up to torchmetrics' float32 arithmetic, also with confidences on the edges.
- netcal's `ECE` bins with numpy's histogram: [lo, hi), 1.0 in the last bin.
  It equals csam's `left-closed-with-one-bin` whenever no confidence is exactly
  1.0, and neither csam convention when some are.
- Both differ from csam's default `right-closed` (the paper's) only where a
  confidence sits exactly on a bin edge.
"""

import numpy as np
import pytest

import csam_calib as cc
from conftest import rows_with_confidence

ON_EDGES = (
    rows_with_confidence([0.6, 0.6, 0.6, 0.55, 0.55, 1.0, 1.0, 0.95, 0.95]),
    np.array([0, 1, 2, 0, 0, 0, 1, 0, 0]),
)


def torchmetrics_ece(probs, labels, norm="l1"):
    torch = pytest.importorskip("torch")
    functional = pytest.importorskip("torchmetrics.functional.classification")
    return functional.multiclass_calibration_error(
        torch.from_numpy(probs), torch.from_numpy(labels), num_classes=probs.shape[1], n_bins=15, norm=norm
    ).item()


def netcal_ece(probs, labels):
    metrics = pytest.importorskip("netcal.metrics")
    return metrics.ECE(bins=15).measure(probs, labels)


@pytest.mark.parametrize("norm", ["l1", "max"])
def test_torchmetrics_is_the_left_closed_convention(predictions, norm):
    _, probs, labels = predictions
    ours = cc.ece(probs, labels, edges="left-closed-with-one-bin", norm=norm)
    assert torchmetrics_ece(probs, labels, norm) == pytest.approx(ours, abs=1e-6)
    probs, labels = ON_EDGES
    ours = cc.ece(probs, labels, edges="left-closed-with-one-bin", norm=norm)
    assert torchmetrics_ece(probs, labels, norm) == pytest.approx(ours, abs=1e-6)


def test_netcal_is_numpys_histogram_convention(predictions):
    _, probs, labels = predictions
    assert netcal_ece(probs, labels) == pytest.approx(
        cc.ece(probs, labels, edges="left-closed-with-one-bin"), abs=1e-12
    )
    probs, labels = ON_EDGES
    theirs = netcal_ece(probs, labels)
    for edges in ["right-closed", "left-closed-with-one-bin"]:
        assert abs(theirs - cc.ece(probs, labels, edges=edges)) > 0.01
