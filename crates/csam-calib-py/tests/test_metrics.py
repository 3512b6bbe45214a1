"""csam_calib's metrics against independent implementations written here from
their definitions, and against scikit-learn where it has the metric."""

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import log_loss, roc_auc_score

import csam_calib as cc
from conftest import rows_with_confidence


def reference_ece(probs, labels, n_bins=15, right_closed=True, norm="l1"):
    """ECE from its definition, with the bin edges of either convention."""
    confidence = probs.max(axis=1)
    hit = probs.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    if right_closed:
        bins = [(confidence > lo) & (confidence <= hi) for lo, hi in zip(edges[:-1], edges[1:])]
    else:
        bins = [(confidence >= lo) & (confidence < hi) for lo, hi in zip(edges[:-1], edges[1:])]
        bins.append(confidence == 1.0)
    gaps = [(m.sum() / len(labels), abs(hit[m].mean() - confidence[m].mean())) for m in bins if m.any()]
    if norm == "l1":
        return sum(w * g for w, g in gaps)
    if norm == "l2":
        return np.sqrt(sum(w * g * g for w, g in gaps))
    return max(g for _, g in gaps)


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("edges", ["right-closed", "left-closed-with-one-bin"])
def test_ece_follows_its_definition_for_every_norm_and_edge_convention(predictions, norm, edges):
    _, probs, labels = predictions
    expected = reference_ece(probs, labels, right_closed=edges == "right-closed", norm=norm)
    assert cc.ece(probs, labels, edges=edges, norm=norm) == pytest.approx(expected, abs=1e-12)


def test_edge_conventions_differ_where_a_confidence_sits_on_an_edge():
    # Confidences 0.6 (an edge of 15 bins) and 1.0: the conventions bin them apart.
    probs = rows_with_confidence([0.6, 0.6, 0.6, 0.55, 0.55, 1.0, 1.0, 0.95, 0.95])
    labels = np.array([0, 1, 2, 0, 0, 0, 1, 0, 0])
    right = cc.ece(probs, labels)
    left = cc.ece(probs, labels, edges="left-closed-with-one-bin")
    assert right == pytest.approx(reference_ece(probs, labels, right_closed=True), abs=1e-12)
    assert left == pytest.approx(reference_ece(probs, labels, right_closed=False), abs=1e-12)
    assert abs(right - left) > 0.1


def test_float32_is_read_in_its_own_precision(predictions):
    _, probs, labels = predictions
    narrow = probs.astype(np.float32)
    expected = reference_ece(narrow.astype(np.float64), labels)
    assert cc.ece(narrow, labels) == pytest.approx(expected, abs=1e-9)


def test_adaptive_ece_variants_follow_their_definitions(predictions):
    _, probs, labels = predictions
    confidence = probs.max(axis=1)
    hit = probs.argmax(axis=1) == labels
    n = len(labels)
    # Interpolated: edges interpolated in the sorted confidences, bins (lo, hi].
    s = np.sort(confidence)
    edges = np.interp(np.linspace(0, n, 16), np.arange(n), s)
    interpolated = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (confidence > lo) & (confidence <= hi)
        if m.any():
            interpolated += m.sum() / n * abs(hit[m].mean() - confidence[m].mean())
    # Chunked: numpy array_split of the samples sorted by (confidence, hit).
    order = np.lexsort((hit, confidence))
    chunked = sum(
        len(c) / n * abs(hit[c].mean() - confidence[c].mean()) for c in np.array_split(order, 15)
    )
    assert cc.adaptive_ece(probs, labels) == pytest.approx(interpolated, abs=1e-12)
    assert cc.adaptive_ece(probs, labels, variant="chunked") == pytest.approx(chunked, abs=1e-12)


def test_classwise_ece_is_the_mean_of_per_class_errors(predictions):
    _, probs, labels = predictions
    edges = np.linspace(0, 1, 16)
    per_class = []
    for k in range(probs.shape[1]):
        p, y = probs[:, k], labels == k
        error = 0.0
        for lo, hi in zip(edges[:-1], edges[1:]):
            m = (p > lo) & (p <= hi)
            if m.any():
                error += m.sum() / len(p) * abs(y[m].mean() - p[m].mean())
        per_class.append(error)
    assert cc.classwise_ece(probs, labels) == pytest.approx(np.mean(per_class), abs=1e-12)


def test_aurocs_equal_scikit_learn(predictions):
    _, probs, labels = predictions
    hit = probs.argmax(axis=1) == labels
    assert cc.auroc_misclassification(probs, labels) == pytest.approx(
        roc_auc_score(hit, probs.max(axis=1)), abs=1e-12
    )
    assert cc.auroc_ovr(probs, labels) == pytest.approx(
        roc_auc_score(labels, probs, multi_class="ovr", average="macro"), abs=1e-12
    )
    inside, outside = probs[:1500], probs[1500:] ** 0.5
    outside = outside / outside.sum(axis=1, keepdims=True)
    truth = np.r_[np.ones(1500), np.zeros(1500)]
    scores = np.r_[inside.max(axis=1), outside.max(axis=1)]
    assert cc.auroc_ood(inside, outside) == pytest.approx(roc_auc_score(truth, scores), abs=1e-12)
    entropy = lambda p: -(p * np.log(p)).sum(axis=1)
    scores = -np.r_[entropy(inside), entropy(outside)]
    assert cc.auroc_ood(inside, outside, score="negative-entropy") == pytest.approx(
        roc_auc_score(truth, scores), abs=1e-12
    )


def test_reliability_diagram_equals_scikit_learns_calibration_curve(predictions):
    # calibration_curve bins [lo, hi) with 1.0 in the last bin; no confidence
    # here is exactly on an edge or 1.0, where the conventions differ.
    _, probs, labels = predictions
    confidence = probs.max(axis=1)
    hit = probs.argmax(axis=1) == labels
    fraction, mean_predicted = calibration_curve(hit, confidence, n_bins=15, strategy="uniform")
    diagram = cc.reliability_diagram(probs, labels, edges="left-closed-with-one-bin")
    filled = diagram["count"] > 0
    assert diagram["n_samples"] == len(labels)
    np.testing.assert_allclose(diagram["accuracy"][filled], fraction, atol=1e-12)
    np.testing.assert_allclose(diagram["mean_confidence"][filled], mean_predicted, atol=1e-12)
    assert np.isnan(diagram["accuracy"][~filled]).all()


def test_scoring_rules_follow_their_definitions(predictions):
    _, probs, labels = predictions
    rows = np.arange(len(labels))
    assert cc.nll(probs, labels) == pytest.approx(-np.log(probs[rows, labels]).mean(), abs=1e-12)
    one_hot = np.eye(probs.shape[1])[labels]
    assert cc.brier(probs, labels) == pytest.approx(((probs - one_hot) ** 2).sum(axis=1).mean(), abs=1e-12)
    assert cc.accuracy(probs, labels) == pytest.approx((probs.argmax(axis=1) == labels).mean(), abs=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method, n_val", [("isotonic", 1500), ("histogram", 300)])
def test_nll_is_scikit_learns_log_loss_also_on_zeros_and_ones(predictions, method, n_val, dtype):
    # Isotonic regression and histogram binning put exactly 0 on a class where
    # no validation row of that region had it: the case where a clip at the
    # smallest float costs 708.
    logits, _, labels = predictions
    val, test = slice(0, n_val), slice(1500, None)
    calibrated = cc.Calibrator(method).fit(logits[val], labels[val]).transform(logits[test])
    rows = np.arange(len(labels[test]))
    assert (calibrated[rows, labels[test]] == 0).any()
    certain = np.array([[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]])
    probs = np.vstack([calibrated, certain]).astype(dtype)
    y = np.concatenate([labels[test], [0, 0]])
    # csam clips float32 probabilities as their float64 values (at 2^-52, not
    # at float32's 2^-23 where scikit-learn clips float32 input), so the
    # reference is log_loss of the same values in float64.
    expected = log_loss(y, probs.astype(np.float64), labels=range(5))
    # Both sides sum 1502 logs in float64, ~1e-13 apart.
    tolerance = 1e-12
    assert cc.nll(probs, y) == pytest.approx(expected, rel=tolerance)
    assert cc.summarize(probs, y)["nll"] == cc.nll(probs, y)


def test_tce_is_the_ece_after_the_nll_temperature(predictions):
    logits, _, labels = predictions
    val, test = slice(0, 1500), slice(1500, None)
    # The NLL-optimal temperature, found by scipy in log T.
    optimize = pytest.importorskip("scipy.optimize")

    def nll_at(log_t):
        z = logits[val] / np.exp(log_t)
        z = z - z.max(axis=1, keepdims=True)
        return -(z[np.arange(1500), labels[val]] - np.log(np.exp(z).sum(axis=1))).mean()

    found = optimize.minimize_scalar(nll_at, bounds=(np.log(0.01), np.log(100)), method="bounded",
                                     options={"xatol": 1e-10})
    t = np.exp(found.x)
    z = logits[test] / t
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    expected = reference_ece(p, labels[test])
    got = cc.tce(logits[val], labels[val], logits[test], labels[test])
    assert got == pytest.approx(expected, abs=1e-6)


def test_bootstrap_interval_brackets_a_large_sets_ece_and_is_deterministic(predictions):
    # 3000 rows: the ECE's bias on resamples is small beside its spread, so the
    # BCa interval (BC here: more rows than resamples) holds the estimate.
    _, probs, labels = predictions
    estimate, lower, upper = cc.bootstrap("ece", probs, labels, resamples=200, seed=3)
    assert estimate == cc.ece(probs, labels)
    assert lower < estimate < upper
    assert cc.bootstrap("ece", probs, labels, resamples=200, seed=3) == (estimate, lower, upper)
    assert cc.bootstrap("ece", probs, labels, resamples=200, seed=4) != (estimate, lower, upper)


def test_bootstrap_has_no_interval_for_an_estimate_below_every_resample():
    # 40 rows calibrated exactly (dyadic confidences, each bin's accuracy equal
    # to its confidence): the ECE is 0, every resample's is positive, so BCa
    # cannot place the estimate and says so; a mean (NLL) keeps its interval.
    rows, labels = [], []
    for confidence, count, right in [(0.625, 16, 10), (0.75, 8, 6), (0.875, 16, 14)]:
        rows += [[confidence, 1.0 - confidence]] * count
        labels += [0] * right + [1] * (count - right)
    probs, labels = np.array(rows), np.array(labels)
    assert cc.ece(probs, labels) == 0.0
    for metric in ["ece", "mce", "classwise_ece"]:
        with pytest.raises(cc.CalibrationError, match="outside all 200 resampled values"):
            cc.bootstrap(metric, probs, labels, resamples=200)
    estimate, lower, upper = cc.bootstrap("nll", probs, labels, resamples=200)
    assert lower < estimate < upper


def test_summary_holds_every_metric(predictions):
    _, probs, labels = predictions
    summary = cc.summarize(probs, labels)
    assert summary["ece"] == cc.ece(probs, labels)
    assert summary["adaptive_ece"] == cc.adaptive_ece(probs, labels)
    assert summary["classwise_ece"] == cc.classwise_ece(probs, labels)
    assert summary["mce"] == cc.ece(probs, labels, norm="max")
    assert summary["rms_ce"] == cc.ece(probs, labels, norm="l2")


def test_summary_and_bootstrap_share_one_vocabulary(predictions):
    _, probs, labels = predictions
    summary = cc.summarize(probs, labels)
    descriptive = {"mean_confidence", "mean_entropy", "tce"}
    assert summary["tce"] is None
    for name in sorted(set(summary) - descriptive):
        estimate, _, _ = cc.bootstrap(name, probs, labels, resamples=20)
        assert estimate == summary[name], name
    for cli_name, name in [("adaece", "adaptive_ece"), ("ece_l2", "rms_ce")]:
        with pytest.raises(cc.CalibrationError, match=f"csam_calib calls it `{name}`"):
            cc.bootstrap(cli_name, probs, labels)


def test_inputs_numpy_can_read_are_accepted(predictions):
    torch = pytest.importorskip("torch")
    _, probs, labels = predictions
    expected = cc.ece(probs, labels)
    assert cc.ece(np.asfortranarray(probs), labels) == expected
    assert cc.ece(probs.tolist(), labels.tolist()) == expected
    assert cc.ece(torch.from_numpy(probs), torch.from_numpy(labels)) == expected
    assert cc.ece(probs, labels.astype(np.uint8)) == expected
    np.testing.assert_allclose(cc.softmax(np.log(probs)), probs, atol=1e-12)
