"""The streamed image pipeline against torchvision, on one JPEG folder, in one run.

Times decoding plus the ImageNet training transforms (RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize) into batches:

- torchvision: `datasets.ImageFolder` + `DataLoader(num_workers=W,
  shuffle=True)`, from the creation of the loader's iterator to the last
  batch (worker start-up included);
- csam: `csam bench --data DIR` (its streamed loader, `W` worker threads),
  timed the same way, when `--csam BINARY` is given.

Prints one table (images/s). Without DIR's existence it first writes an
ImageNet-like folder there: `--images` JPEGs (quality 90, 4:2:0) in
`--classes` class folders, of ImageNet's common sizes (500x375, 375x500,
500x333, 400x300, 640x480), with smooth random colour fields and
fine noise so that they compress like photographs (~50-90 KB).

    .venv/bin/python bench/data_reference.py /tmp/jpegs --csam target/release/csam \
        --workers 2 --batch-size 64 --images 2000
"""

import argparse
import json
import os
import subprocess
import time

import numpy as np
import torch
from PIL import Image
from torchvision import datasets, transforms

SIZES = [(500, 375), (375, 500), (500, 333), (400, 300), (640, 480)]


def make_folder(root, images, classes, seed):
    rng = np.random.default_rng(seed)
    for k in range(images):
        w, h = SIZES[k % len(SIZES)]
        coarse = rng.integers(0, 256, (h // 32 + 2, w // 32 + 2, 3), dtype=np.uint8)
        smooth = np.asarray(Image.fromarray(coarse).resize((w, h), Image.BICUBIC), dtype=np.float32)
        noisy = smooth + rng.normal(0, 12, (h, w, 3))
        img = Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))
        folder = os.path.join(root, f"class{k % classes:03d}")
        os.makedirs(folder, exist_ok=True)
        img.save(os.path.join(folder, f"{k:06d}.jpg"), quality=90)


def time_torchvision(root, workers, batch_size, images, size):
    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(size, antialias=True),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )
    folder = datasets.ImageFolder(root, transform=transform)
    if images < len(folder):
        folder = torch.utils.data.Subset(folder, range(images))
    loader = torch.utils.data.DataLoader(
        folder, batch_size=batch_size, shuffle=True, num_workers=workers
    )
    started = time.perf_counter()
    seen = 0
    for xs, _ in loader:
        seen += xs.shape[0]
    return seen, time.perf_counter() - started


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--csam", help="the csam binary to time beside torchvision")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if not os.path.exists(a.dir):
        make_folder(a.dir, a.images, a.classes, a.seed)
    rows = []
    if a.csam:
        out = subprocess.run(
            [a.csam, "bench", "--data", a.dir, "--workers", str(a.workers),
             "--batch-size", str(a.batch_size), "--images", str(a.images),
             "--size", str(a.size), "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
        row = json.loads(out)
        rows.append(("csam (streamed)", row["images"], row["seconds"]))
    seen, seconds = time_torchvision(a.dir, a.workers, a.batch_size, a.images, a.size)
    rows.append(("torchvision ImageFolder + DataLoader", seen, seconds))
    print(f"| pipeline ({a.workers} workers, batch {a.batch_size}, {a.size}x{a.size}) | images | s | images/s |")
    print("|---|--:|--:|--:|")
    for name, n, s in rows:
        print(f"| {name} | {n} | {s:.2f} | {n / s:.0f} |")
    if len(rows) == 2:
        print(f"\ncsam / torchvision: {(rows[0][1] / rows[0][2]) / (rows[1][1] / rows[1][2]):.2f}x")


if __name__ == "__main__":
    main()
