#!/usr/bin/env python3
"""Writes SVHN-layout MAT-files with scipy and what torchvision's SVHN makes of them
(run by tests/data_svhn.rs at test time).

    python make_svhn.py OUT

For each variant OUT/<variant>/ holds train_32x32.mat and test_32x32.mat, written by
scipy.io.savemat(format='5', oned_as='column') as the official files are laid out: X uint8
of shape (32, 32, 3, N), y of shape (N, 1) with digits 1..10 (10 standing for 0), plus
expected_<part>_images.npy (uint8 (N, 32, 32, 3)) and expected_<part>_labels.npy (int64)
computed as torchvision.datasets.SVHN does: images X.transpose(3, 2, 0, 1) (NCHW, stored
here as NHWC for the npy: loader), labels y with 10 replaced by 0.

Variants: `compressed` (do_compression=True; train y uint8, test y double) and `plain`
(do_compression=False; train y double, test y uint8).
"""
import pathlib
import sys

import numpy as np
import scipy.io

OUT = pathlib.Path(sys.argv[1])
rng = np.random.default_rng(7)


def part(folder, name, n, y_dtype, compress):
    x = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    digits = rng.integers(1, 11, size=n)
    digits[0] = 10  # every part holds a 10 (digit 0)
    y = digits.reshape(n, 1).astype(y_dtype)
    scipy.io.savemat(folder / f"{name}_32x32.mat", {"X": x, "y": y}, format="5",
                     do_compression=compress, oned_as="column")
    # torchvision.datasets.SVHN.__init__: data = transpose(X, (3, 2, 0, 1)); labels
    # = y.astype(int64).squeeze(), with np.place(labels, labels == 10, 0).
    nchw = np.transpose(x, (3, 2, 0, 1))
    labels = y.astype(np.int64).squeeze(1)
    np.place(labels, labels == 10, 0)
    np.save(folder / f"expected_{name}_images.npy", np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)))
    np.save(folder / f"expected_{name}_labels.npy", labels)


for variant, compress, (train_y, test_y) in [
    ("compressed", True, (np.uint8, np.float64)),
    ("plain", False, (np.float64, np.uint8)),
]:
    folder = OUT / variant
    folder.mkdir(parents=True)
    part(folder, "train", 5, train_y, compress)
    part(folder, "test", 7, test_y, compress)
