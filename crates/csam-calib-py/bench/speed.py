"""Speed of csam_calib against torchmetrics, netcal and plain numpy/scipy on the
same arrays in the same process, one thread each: ECE, AdaECE, classwise ECE, misclassification
AUROC and a temperature fit, each the best of --repeats runs.

    .venv/bin/python crates/csam-calib-py/bench/speed.py [--rows 1000000] [--classes 100]
        [--libraries csam_calib numpy]

Prints a markdown table of seconds (lower is better); "-" where a library has
no such metric. Each library is called as its documentation shows; csam_calib
checks its inputs (row sums, labels) inside its time, the others do not.
"""

import argparse
import time

import numpy as np


def best_of(repeats, function):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def data(rows, classes, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, rows)
    logits = rng.standard_normal((rows, classes), dtype=np.float32) * 2.0
    logits[np.arange(rows), labels] += 2.0
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    return logits, probs.astype(np.float32), labels


def numpy_ece(probs, labels, bins=15):
    confidence = probs.max(axis=1)
    hit = probs.argmax(axis=1) == labels
    index = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
    count = np.bincount(index, minlength=bins)
    gap = np.abs(np.bincount(index, hit, bins) - np.bincount(index, confidence, bins))
    return gap.sum() / len(labels)


def numpy_adaptive_ece(probs, labels, bins=15):
    confidence = probs.max(axis=1)
    hit = probs.argmax(axis=1) == labels
    order = np.argsort(confidence, kind="stable")
    return sum(
        abs(hit[c].sum() - confidence[c].sum()) for c in np.array_split(order, bins)
    ) / len(labels)


def numpy_classwise_ece(probs, labels, bins=15):
    total = 0.0
    for k in range(probs.shape[1]):
        p = probs[:, k]
        index = np.clip(np.ceil(p * bins).astype(np.int64) - 1, 0, bins - 1)
        gap = np.bincount(index, labels == k, bins) - np.bincount(index, p, bins)
        total += np.abs(gap).sum() / len(labels)
    return total / probs.shape[1]


def numpy_auroc(probs, labels):
    from scipy.stats import rankdata

    confidence = probs.max(axis=1)
    hit = probs.argmax(axis=1) == labels
    ranks = rankdata(confidence)
    positives = hit.sum()
    negatives = len(hit) - positives
    return (ranks[hit].sum() - positives * (positives + 1) / 2) / (positives * negatives)


def numpy_temperature(logits, labels):
    from scipy.optimize import minimize_scalar

    z64 = logits.astype(np.float64)
    rows = np.arange(len(labels))

    def nll(log_t):
        z = z64 / np.exp(log_t)
        z = z - z.max(axis=1, keepdims=True)
        return -(z[rows, labels] - np.log(np.exp(z).sum(axis=1))).mean()

    return np.exp(minimize_scalar(nll, bounds=(np.log(0.01), np.log(100)), method="bounded").x)


def csam_row(logits, probs, labels):
    import csam_calib as cc

    return {
        "ECE": lambda: cc.ece(probs, labels),
        "AdaECE": lambda: cc.adaptive_ece(probs, labels, variant="chunked"),
        "classwise ECE": lambda: cc.classwise_ece(probs, labels),
        "AUROC": lambda: cc.auroc_misclassification(probs, labels),
        "temperature fit": lambda: cc.Calibrator("temperature").fit(logits, labels),
    }


def torchmetrics_row(logits, probs, labels):
    import torch
    from torchmetrics.functional.classification import binary_auroc, multiclass_calibration_error

    # One thread, as csam_calib and numpy compute (and as libtorch's OpenMP
    # threads spin against each other on a shared machine).
    torch.set_num_threads(1)
    p, y, z = torch.from_numpy(probs), torch.from_numpy(labels), torch.from_numpy(logits)
    classes = probs.shape[1]

    def temperature():
        # The temperature-scaling repository's fit: LBFGS on the NLL (plain PyTorch;
        # torchmetrics has no calibrator).
        t = torch.ones(1, requires_grad=True)
        optimizer = torch.optim.LBFGS([t], lr=0.01, max_iter=50)

        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(z / t, y)
            loss.backward()
            return loss

        optimizer.step(closure)

    def auroc():
        confidence, prediction = p.max(dim=1)
        return binary_auroc(confidence, (prediction == y).long())

    return {
        "ECE": lambda: multiclass_calibration_error(p, y, num_classes=classes, n_bins=15),
        "AUROC": auroc,
        "temperature fit": temperature,
    }


def netcal_row(logits, probs, labels):
    from netcal.metrics import ECE
    from netcal.scaling import TemperatureScaling

    return {
        "ECE": lambda: ECE(bins=15).measure(probs, labels),
        "AdaECE": lambda: ECE(bins=15, equal_intervals=False).measure(probs, labels),
        "temperature fit": lambda: TemperatureScaling().fit(probs, labels),
    }


def numpy_row(logits, probs, labels):
    return {
        "ECE": lambda: numpy_ece(probs, labels),
        "AdaECE": lambda: numpy_adaptive_ece(probs, labels),
        "classwise ECE": lambda: numpy_classwise_ece(probs, labels),
        "AUROC": lambda: numpy_auroc(probs, labels),
        "temperature fit": lambda: numpy_temperature(logits, labels),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--libraries",
        nargs="+",
        default=["csam_calib", "torchmetrics", "netcal", "numpy"],
        choices=["csam_calib", "torchmetrics", "netcal", "numpy"],
        help="the rows to time (torchmetrics' LBFGS temperature fit alone takes minutes)",
    )
    args = parser.parse_args()
    logits, probs, labels = data(args.rows, args.classes)
    columns = ["ECE", "AdaECE", "classwise ECE", "AUROC", "temperature fit"]
    rows = [
        (name, make)
        for name, key, make in [
            ("csam_calib", "csam_calib", csam_row),
            ("torchmetrics", "torchmetrics", torchmetrics_row),
            ("netcal", "netcal", netcal_row),
            ("numpy / scipy", "numpy", numpy_row),
        ]
        if key in args.libraries
    ]
    print(f"{args.rows:,} x {args.classes} float32, best of {args.repeats}, seconds\n")
    print("| Library | " + " | ".join(columns) + " |")
    print("|:--|" + "--:|" * len(columns))
    for name, make in rows:
        try:
            calls = make(logits, probs, labels)
        except ImportError as missing:
            print(f"| {name} | not installed ({missing.name}) |")
            continue
        cells = [
            f"{best_of(args.repeats, calls[c]):.3f}" if c in calls else "-" for c in columns
        ]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
