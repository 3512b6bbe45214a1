#!/usr/bin/env python3
"""Writes a small Tiny-ImageNet-200 tree with Pillow and what Pillow decodes from it
(run by tests/data_tiny_imagenet.rs at test time).

    python make_tiny_imagenet.py OUT

OUT/wnids.txt lists 3 wnids in an order that is not sorted; OUT/train/<wnid>/images/
holds 2 JPEGs per class (64x64, RGB, one class's second image greyscale, as a few of the
real ones are) and <wnid>_boxes.txt; OUT/val/images/ holds 4 JPEGs annotated in
OUT/val/val_annotations.txt (tab-separated file, wnid, box) in an order that is not the
file-name order; OUT/test/images/ holds an unlabelled JPEG (not to be read).
OUT/expected_{train,test}_{images,labels}.npy: the images decoded by Pillow and
converted to RGB (uint8 (N, 64, 64, 3)), in the order the loader must read them (train:
class by class in wnids.txt order, file names sorted; test: annotation order), and the
labels (int64, index in wnids.txt).
"""
import pathlib
import sys

import numpy as np
from PIL import Image

OUT = pathlib.Path(sys.argv[1])
WNIDS = ["n09999999", "n01443537", "n05555555"]
rng = np.random.default_rng(3)


def picture(grey=False):
    # Smooth gradients plus a little noise: JPEG-like content, not pure noise.
    yy, xx = np.mgrid[0:64, 0:64]
    base = [(xx * rng.uniform(1, 4) + yy * rng.uniform(1, 4) + rng.uniform(0, 60)) % 256
            for _ in range(3)]
    rgb = np.stack(base, axis=-1) + rng.normal(0, 8, size=(64, 64, 3))
    image = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    return image.convert("L") if grey else image


def save(image, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, "JPEG", quality=85)


def decoded(path):
    return np.asarray(Image.open(path).convert("RGB"))


OUT.mkdir(parents=True, exist_ok=True)
(OUT / "wnids.txt").write_text("".join(w + "\n" for w in WNIDS))
train_images, train_labels = [], []
for label, wnid in enumerate(WNIDS):
    folder = OUT / "train" / wnid
    (folder / f"{wnid}_boxes.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / f"{wnid}_boxes.txt").write_text(f"{wnid}_0.JPEG\t0\t0\t63\t63\n")
    for k in range(2):
        path = folder / "images" / f"{wnid}_{k}.JPEG"
        save(picture(grey=(label == 1 and k == 1)), path)
        train_images.append(decoded(path))
        train_labels.append(label)

annotations = [("val_3.JPEG", 2), ("val_0.JPEG", 0), ("val_2.JPEG", 1), ("val_1.JPEG", 1)]
test_images, test_labels = [], []
lines = []
for name, label in annotations:
    path = OUT / "val" / "images" / name
    save(picture(grey=(name == "val_2.JPEG")), path)
    test_images.append(decoded(path))
    test_labels.append(label)
    lines.append(f"{name}\t{WNIDS[label]}\t1\t2\t60\t61\n")
(OUT / "val" / "val_annotations.txt").write_text("".join(lines))
save(picture(), OUT / "test" / "images" / "test_0.JPEG")

for part, images, labels in [("train", train_images, train_labels),
                             ("test", test_images, test_labels)]:
    np.save(OUT / f"expected_{part}_images.npy", np.stack(images))
    np.save(OUT / f"expected_{part}_labels.npy", np.array(labels, dtype=np.int64))
