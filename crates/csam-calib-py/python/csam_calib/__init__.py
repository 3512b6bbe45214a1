"""csam_calib: calibration metrics and post-hoc calibrators from csam, on numpy arrays.

Metrics take ``probs`` (N x K class probabilities, rows summing to 1) and
integer ``labels`` (N,); calibrators and ``tce`` take logits. float32 and
float64 C-contiguous arrays are read in place; anything else numpy can read
(other dtypes and layouts, lists, CPU torch tensors) is converted once.
Errors raise ``CalibrationError`` (a ``ValueError``) with csam's message.
"""

from ._native import (
    CALIBRATORS,
    CalibrationError,
    Calibrator,
    accuracy,
    adaptive_ece,
    auroc_misclassification,
    auroc_ood,
    auroc_ovr,
    bootstrap,
    brier,
    classwise_ece,
    ece,
    nll,
    reliability_diagram,
    softmax,
    summarize,
    tce,
)

__all__ = [
    "CALIBRATORS",
    "CalibrationError",
    "Calibrator",
    "accuracy",
    "adaptive_ece",
    "auroc_misclassification",
    "auroc_ood",
    "auroc_ovr",
    "bootstrap",
    "brier",
    "classwise_ece",
    "ece",
    "nll",
    "reliability_diagram",
    "softmax",
    "summarize",
    "tce",
]
