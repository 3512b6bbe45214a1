"""numpy / scikit-learn / torchmetrics timings of the same ECE and
misclassification AUROC as benches/metrics.rs, on data of the same shape and
dtype (1,000,000 x 100 float32 softmax rows; not the same generator, so values
differ).

Run from the repository root (`cargo xtask python` installs scikit-learn and
torchmetrics into .venv; a library that is missing is reported and skipped):

    .venv/bin/python crates/csam-calib/benches/numpy_reference.py
"""

import time

import numpy as np

ROWS, CLASSES, BINS = 1_000_000, 100, 15


def data():
    rng = np.random.default_rng(42)
    z = 4.0 * rng.random((ROWS, CLASSES), dtype=np.float32)
    z[np.arange(ROWS), rng.integers(0, CLASSES, ROWS)] += 6.0 * rng.random(ROWS, dtype=np.float32)
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    # Labels drawn from each row (inverse CDF), as the Rust bench does.
    u = rng.random((ROWS, 1), dtype=np.float32)
    labels = np.minimum((np.cumsum(z, axis=1) < u).sum(axis=1), CLASSES - 1)
    return z, labels


def ece(probs, labels):
    """Right-closed 15-bin ECE, vectorised: max, argmax, bin index, bincount."""
    conf = probs.max(axis=1).astype(np.float64)
    hit = (probs.argmax(axis=1) == labels).astype(np.float64)
    idx = np.ceil(conf * BINS).astype(np.int64) - 1
    keep = idx >= 0
    idx, conf, hit = idx[keep], conf[keep], hit[keep]
    count = np.bincount(idx, minlength=BINS)
    sum_conf = np.bincount(idx, weights=conf, minlength=BINS)
    sum_hit = np.bincount(idx, weights=hit, minlength=BINS)
    nz = count > 0
    return np.abs(sum_hit[nz] - sum_conf[nz]).sum() / len(labels)


def sklearn_auroc():
    """scikit-learn's `roc_auc_score` on the confidence, or None if it is missing."""
    try:
        from sklearn.metrics import roc_auc_score
    except ImportError:
        return None

    def auroc(probs, labels):
        conf = probs.max(axis=1)
        hit = probs.argmax(axis=1) == labels
        return roc_auc_score(hit, conf)

    return auroc


def torchmetrics_ece():
    """torchmetrics' 15-bin multiclass ECE on tensors sharing the arrays'
    memory (all of torch's threads), or None if it is missing."""
    try:
        import torch
        from torchmetrics.functional.classification import multiclass_calibration_error
    except ImportError:
        return None

    def ece(probs, labels):
        p, y = torch.from_numpy(probs), torch.from_numpy(labels)
        return multiclass_calibration_error(p, y, num_classes=CLASSES, n_bins=BINS)

    return ece


def timed(name, f, *args, repeats=5):
    f(*args)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - t)
    best, median = min(times), sorted(times)[len(times) // 2]
    gbs = ROWS * CLASSES * 4 / median / 1e9
    print(f"{name:32s} median {median * 1e3:8.1f} ms  best {best * 1e3:8.1f} ms  ({gbs:.2f} GB/s of input)")


def main():
    probs, labels = data()
    print(f"numpy {np.__version__}, {probs.shape} {probs.dtype}")
    timed("ece equal-width (numpy)", ece, probs, labels)
    for name, make, package in [
        ("ece equal-width (torchmetrics)", torchmetrics_ece, "torchmetrics"),
        ("auroc misclassification (sklearn)", sklearn_auroc, "scikit-learn"),
    ]:
        function = make()
        if function is None:
            print(f"{name:32s} skipped: {package} is not installed (cargo xtask python installs it)")
        else:
            timed(name, function, probs, labels)


if __name__ == "__main__":
    main()
