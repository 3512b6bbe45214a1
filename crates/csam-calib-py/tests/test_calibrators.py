"""The calibrators: fit / transform / save / load, checked against scikit-learn
and against their formulas."""

import json
import os

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

import csam_calib as cc
from conftest import softmax


def test_every_calibrator_fits_and_returns_probability_rows(predictions):
    logits, _, labels = predictions
    binary = labels % 2
    for method in cc.CALIBRATORS:
        # Platt scaling is for binary classifiers: fitted on two of the logits.
        z, y = (logits[:, :2], binary) if method == "platt" else (logits, labels)
        probs = cc.Calibrator(method).fit(z[:1500], y[:1500]).transform(z[1500:])
        assert probs.shape == (1500, z.shape[1]) and probs.dtype == np.float64
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)


def test_temperature_scaling_divides_the_logits_by_the_fitted_temperature(predictions):
    logits, _, labels = predictions
    calibrator = cc.Calibrator("temperature").fit(logits, labels)
    t = calibrator.params["temperature"]
    assert t > 1.0  # the data are overconfident
    np.testing.assert_allclose(calibrator.transform(logits), softmax(logits / t), atol=1e-12)


def test_isotonic_is_scikit_learns_one_vs_rest_regression_renormalised(predictions):
    logits, probs, labels = predictions
    val, test = slice(0, 1500), slice(1500, None)
    columns = [
        IsotonicRegression(out_of_bounds="clip").fit(probs[val, k], labels[val] == k).predict(probs[test, k])
        for k in range(5)
    ]
    expected = np.stack(columns, axis=1)
    expected /= expected.sum(axis=1, keepdims=True)
    got = cc.Calibrator("isotonic").fit(logits[val], labels[val]).transform(logits[test])
    np.testing.assert_allclose(got, expected, atol=1e-9)


def test_save_and_load_round_trip_and_never_overwrite_silently(predictions, tmp_path):
    logits, _, labels = predictions
    calibrator = cc.Calibrator("vector").fit(logits, labels)
    path = tmp_path / "vector.json"
    calibrator.save(str(path))
    assert json.loads(path.read_text())["method"] == "vector"
    loaded = cc.Calibrator.load(str(path))
    np.testing.assert_array_equal(loaded.transform(logits), calibrator.transform(logits))
    with pytest.raises(cc.CalibrationError, match="exists; pass overwrite=True"):
        cc.Calibrator("temperature").fit(logits, labels).save(str(path))
    assert json.loads(path.read_text())["method"] == "vector"
    cc.Calibrator("temperature").fit(logits, labels).save(str(path), overwrite=True)
    assert cc.Calibrator.load(str(path)).method == "temperature"


def test_load_refuses_what_is_not_a_calibrator_file_without_reading_it(tmp_path):
    # /dev/zero never ends: reading it whole would fill memory.
    for device in ["/dev/zero", "/dev/urandom"]:
        if os.path.exists(device):
            with pytest.raises(ValueError, match=f"{device}: not a regular file"):
                cc.Calibrator.load(device)
    with pytest.raises(cc.CalibrationError, match="not a regular file"):
        cc.Calibrator.load(str(tmp_path))
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(64 * 2**20 + 1)  # sparse: no disk, and refused on its length
    with pytest.raises(cc.CalibrationError, match="67108865 bytes, more than a calibrator file holds"):
        cc.Calibrator.load(str(huge))


def test_misuse_is_refused(predictions):
    logits, _, labels = predictions
    with pytest.raises(cc.CalibrationError, match="unknown calibrator 'beta'; valid: temperature"):
        cc.Calibrator("beta")
    with pytest.raises(cc.CalibrationError, match="not fitted: call fit"):
        cc.Calibrator("platt").transform(logits)
    with pytest.raises(cc.CalibrationError, match="fitted on 5 classes but the logits have 3"):
        cc.Calibrator("matrix").fit(logits, labels).transform(logits[:, :3])
    with pytest.raises(cc.CalibrationError, match="every validation label is 0"):
        cc.Calibrator("vector").fit(logits, np.zeros_like(labels))
    with pytest.raises(cc.CalibrationError, match="Platt scaling is for binary classifiers"):
        cc.Calibrator("platt").fit(logits, labels)
    with pytest.raises(cc.CalibrationError):
        cc.Calibrator.from_json('{"method": "matrix", "weights": [[1.0]]}')
