"""torchvision's side of crates/csam-data/tests/streaming_torchvision.rs.

argv[1]: cases.json with
  "crops":  [{"path", "boxes": [[top, left, height, width, flip], ...]}]
  "evals":  [path, ...]
  "folder": an ImageFolder root, "batch": its batch size
  "jpegs":  [path, ...]
  "out":    a directory for the outputs
Writes (all raw bytes, cases in order):
  crops.bin   uint8 HWC 224x224x3 per box: F.resized_crop (+ hflip)
  evals.bin   uint8 HWC 224x224x3 per path: Resize(256) + CenterCrop(224)
  folder.bin  float32 NCHW of every DataLoader batch (ToTensor + Normalize)
  labels.bin  int64 labels of those batches
  jpegs.bin   uint8 HWC of each JPEG as PIL decodes it
"""
import json
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import datasets, transforms
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F

cases = json.load(open(sys.argv[1]))
out = cases["out"]
BILINEAR = InterpolationMode.BILINEAR


def rgb(path):
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


with open(f"{out}/crops.bin", "wb") as f:
    for case in cases["crops"]:
        img = rgb(case["path"])
        for top, left, height, width, flip in case["boxes"]:
            crop = F.resized_crop(img, top, left, height, width, [224, 224], BILINEAR, antialias=True)
            if flip:
                crop = F.hflip(crop)
            f.write(np.asarray(crop, dtype=np.uint8).tobytes())

evaluation = transforms.Compose(
    [transforms.Resize(256, interpolation=BILINEAR, antialias=True), transforms.CenterCrop(224)]
)
with open(f"{out}/evals.bin", "wb") as f:
    for path in cases["evals"]:
        f.write(np.asarray(evaluation(rgb(path)), dtype=np.uint8).tobytes())

normalized = transforms.Compose(
    [
        evaluation,
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ]
)
folder = datasets.ImageFolder(cases["folder"], transform=normalized)
loader = torch.utils.data.DataLoader(folder, batch_size=cases["batch"], shuffle=False)
with open(f"{out}/folder.bin", "wb") as f, open(f"{out}/labels.bin", "wb") as g:
    for xs, ys in loader:
        f.write(xs.numpy().astype(np.float32).tobytes())
        g.write(ys.numpy().astype(np.int64).tobytes())

with open(f"{out}/jpegs.bin", "wb") as f:
    for path in cases["jpegs"]:
        f.write(np.asarray(rgb(path), dtype=np.uint8).tobytes())
