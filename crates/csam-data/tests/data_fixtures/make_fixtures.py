#!/usr/bin/env python3
"""Make the .npy fixtures of tests/data_formats.rs (run from the repository root).

    PYTHONPATH=<dir with pillow> /work/main/.venv/bin/python \
        crates/csam-data/tests/data_fixtures/make_fixtures.py

A CIFAR-10-C-style pair written by numpy (an implementation independent of ours):
- cifar10c_images.npy: uint8 (4, 32, 32, 3), CIFAR-10 test images 0..3 decoded by
  Pillow from data/cifar10-samples (cat, ship, ship, airplane);
- cifar10c_labels.npy: int64 (4,), their CIFAR-10 labels [3, 8, 8, 0].
"""
import pathlib

import numpy as np
from PIL import Image

OUT = pathlib.Path(__file__).parent
SAMPLES = pathlib.Path("data/cifar10-samples")
FILES = ["cat/cifar10_00_3.png", "ship/cifar10_01_8.png", "ship/cifar10_02_8.png",
         "airplane/cifar10_03_0.png"]

images = np.stack([np.asarray(Image.open(SAMPLES / f).convert("RGB")) for f in FILES])
labels = np.array([int(f[-5]) for f in FILES], dtype=np.int64)
assert images.shape == (4, 32, 32, 3) and images.dtype == np.uint8
np.save(OUT / "cifar10c_images.npy", images)
np.save(OUT / "cifar10c_labels.npy", labels)
print(labels.tolist(), images[0, 0, 0].tolist(), images[3, 31, 31].tolist())
