"""Shared data of the csam_calib tests: seeded predictions of a 5-class model."""

import numpy as np
import pytest


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture
def predictions():
    """(logits, probs, labels) of 3000 rows and 5 classes, overconfident on purpose."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 5, 3000)
    logits = rng.normal(size=(3000, 5)) * 2.0
    logits[np.arange(3000), labels] += rng.normal(1.0, 1.0, 3000)
    return logits, softmax(logits), labels


def rows_with_confidence(confidences, n_classes=3):
    """Probability rows whose class 0 holds each confidence, the rest shared equally."""
    rows = []
    for c in confidences:
        row = np.full(n_classes, (1.0 - c) / (n_classes - 1))
        row[0] = c
        rows.append(row)
    return np.array(rows)
