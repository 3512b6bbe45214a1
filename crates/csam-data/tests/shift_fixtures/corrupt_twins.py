#!/usr/bin/env python3
"""The references of tests/shift_corrupt_twins.rs and
tests/shift_corrupt_whole_twins.rs: the library calls that Hendrycks &
Dietterich's make_cifar_c.py makes, and its whole corruptions, run on
inputs the Rust test wrote, their outputs written back for it to compare.

    corrupt_twins.py KIND IN OUT H W ARGS...

IN and OUT are raw little-endian arrays (uint8 for images, float64
otherwise) of an H x W image or plane. One call runs every case listed in
ARGS (or every severity 1..5), their outputs concatenated in that order.
The severities' parameters are make_cifar_c.py's own tables (CIFAR_C in
make_cifar_c.py, copied from hendrycks/robustness), not csam's, so that a
wrong value in csam's tables fails the twin. Kinds:

- pixelate C: PIL's two BOX resizes of the H x W x C uint8 image, to
  (int(W * KEEP), int(H * KEEP)) and back, for the KEEP of every severity.
- jpeg C SUBSAMPLING: PIL's JPEG save at every severity's quality with
  SUBSAMPLING (-1: PIL's default, 4:2:0 for colour; 0: 4:4:4), reopened.
- map_coordinates: scipy.ndimage.map_coordinates(order=1, mode='reflect')
  of the H x W plane at the (y, x) points that follow it in IN.
- clipped_zoom FACTOR...: the central ceil(H / FACTOR) x ceil(W / FACTOR)
  crop, scipy.ndimage.zoom(order=1) by FACTOR, its central H x W.
- gaussian SIGMA:TRUNCATE:MODE...: scipy.ndimage.gaussian_filter.
- warp_affine: cv2.warpAffine(borderMode=BORDER_REFLECT_101) of the H x W
  plane by cv2.getAffineTransform(ANCHORS, MOVED), the 3 (x, y) points of
  each following the plane in IN.
- plasma SEVERITY: make_cifar_c.py's plasma_fractal (the diamond-square
  fractal, with np.roll) of side H (= W) at fog's wibble decay of that
  severity, its uniform draws the values in IN.
- resize_fifth: cv2.resize(fx=0.2, fy=0.2) (INTER_LINEAR) of the H x W x 3
  uint8 image.
- whole CORRUPTION C [PH PW NAME]: make_cifar_c.py's function CORRUPTION
  (glass_blur, zoom_blur, snow, frost, fog, elastic_transform; see
  make_cifar_c.py beside this file) at severities 1..5 of the H x W x C
  image, its bytes the first values of IN; then, for each severity, the
  number of csam's draws and the draws; for frost, then the PH x PW x 3
  photograph NAME that csam drew. Writes the function's values before the
  final np.uint8 (floats in 0..255, H x W x C).
"""
import io
import math
import sys

import cv2
import numpy as np
import scipy.ndimage as ndi
from PIL import Image

from make_cifar_c import CIFAR_C, CORRUPTIONS, Draws, plasma_fractal


def pil_image(raw, h, w, c):
    pixels = np.frombuffer(raw, np.uint8).reshape(h, w, c)
    return Image.fromarray(pixels[:, :, 0] if c == 1 else pixels)


def pixelate(raw, h, w, c):
    image = pil_image(raw, h, w, int(c))
    for keep in CIFAR_C["pixelate"]:
        small = image.resize((int(w * keep), int(h * keep)), Image.BOX)
        yield np.asarray(small.resize((w, h), Image.BOX), np.uint8).tobytes()


def jpeg(raw, h, w, c, subsampling):
    image = pil_image(raw, h, w, int(c))
    for quality in CIFAR_C["jpeg_compression"]:
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=quality, subsampling=int(subsampling))
        yield np.asarray(Image.open(buffer), np.uint8).tobytes()


def map_coordinates(raw, h, w):
    values = np.frombuffer(raw, np.float64)
    plane = values[: h * w].reshape(h, w)
    points = values[h * w:].reshape(-1, 2).T
    yield ndi.map_coordinates(plane, points, order=1, mode="reflect").tobytes()


def clipped_zoom(raw, h, w, *factors):
    plane = np.frombuffer(raw, np.float64).reshape(h, w)
    for factor in map(float, factors):
        ch, cw = math.ceil(h / factor), math.ceil(w / factor)
        top, left = (h - ch) // 2, (w - cw) // 2
        zoomed = ndi.zoom(plane[top:top + ch, left:left + cw], factor, order=1)
        trim_top, trim_left = (zoomed.shape[0] - h) // 2, (zoomed.shape[1] - w) // 2
        yield np.ascontiguousarray(zoomed[trim_top:trim_top + h, trim_left:trim_left + w]).tobytes()


def gaussian(raw, h, w, *cases):
    plane = np.frombuffer(raw, np.float64).reshape(h, w)
    for case in cases:
        sigma, truncate, mode = case.split(":")
        yield ndi.gaussian_filter(plane, float(sigma), mode=mode, truncate=float(truncate)).tobytes()


def warp_affine(raw, h, w):
    values = np.frombuffer(raw, np.float64)
    plane = values[: h * w].reshape(h, w)
    anchors, moved = values[h * w:].reshape(2, 3, 2).astype(np.float32)
    matrix = cv2.getAffineTransform(anchors, moved)
    yield cv2.warpAffine(plane, matrix, (w, h), borderMode=cv2.BORDER_REFLECT_101).tobytes()


def plasma(raw, h, w, severity):
    draws = Draws(np.frombuffer(raw, np.float64))
    decay = CIFAR_C["fog"][int(severity) - 1][1]
    yield plasma_fractal(draws, mapsize=h, wibbledecay=decay).tobytes()
    draws.done()


def resize_fifth(raw, h, w):
    image = np.frombuffer(raw, np.uint8).reshape(h, w, 3)
    yield cv2.resize(image, (0, 0), fx=0.2, fy=0.2).tobytes()


def whole(raw, h, w, name, c, *photograph):
    values = np.frombuffer(raw, np.float64)
    c = int(c)
    image, rest = values[:h * w * c].astype(np.uint8).reshape(h, w, c), values[h * w * c:]
    severities = []
    for _ in range(5):
        n = int(rest[0])
        severities.append(Draws(rest[1:1 + n]))
        rest = rest[1 + n:]
    extra = ()
    if photograph:
        ph, pw, photo_name = photograph
        extra = (rest.astype(np.uint8).reshape(int(ph), int(pw), 3), photo_name)
    for severity, draws in enumerate(severities, 1):
        yield np.asarray(CORRUPTIONS[name](image, severity, draws, *extra), np.float64).tobytes()
        draws.done()


KINDS = {"pixelate": pixelate, "jpeg": jpeg, "map_coordinates": map_coordinates,
         "clipped_zoom": clipped_zoom, "gaussian": gaussian, "warp_affine": warp_affine,
         "plasma": plasma, "resize_fifth": resize_fifth, "whole": whole}


def main():
    kind, source, target = sys.argv[1:4]
    h, w = int(sys.argv[4]), int(sys.argv[5])
    with open(source, "rb") as f:
        raw = f.read()
    with open(target, "wb") as f:
        for output in KINDS[kind](raw, h, w, *sys.argv[6:]):
            f.write(output)


if __name__ == "__main__":
    main()
