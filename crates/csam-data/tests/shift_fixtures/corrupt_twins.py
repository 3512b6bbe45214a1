#!/usr/bin/env python3
"""The references of tests/shift_corrupt_twins.rs: the library calls that
Hendrycks & Dietterich's make_cifar_c.py makes, run on inputs the Rust test
wrote, their outputs written back for it to compare.

    corrupt_twins.py KIND IN OUT H W ARGS...

IN and OUT are raw little-endian arrays (uint8 for images, float64
otherwise) of an H x W image or plane. One call runs every case listed in
ARGS (or every severity 1..5), their outputs concatenated in that order.
The severities' parameters are make_cifar_c.py's own tables (CIFAR_C
below, copied from hendrycks/robustness), not csam's, so that a wrong
value in csam's tables fails the twin. Kinds:

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
- glass C SEVERITY: the reference's glass blur (that severity's sigma,
  max_delta and iterations) of the
  H x W x C float64 image (values k / 255) with the (dx, dy) draws that
  follow it in IN: a Gaussian blur (scikit-image's: scipy's filter, nearest,
  truncated at 4, channels apart), np.uint8 of it times 255, the local pixel
  "swaps" as numpy runs them on an H x W x C array, the blur again.
- plasma SEVERITY: the reference's diamond-square plasma fractal, at fog's
  wibble decay of that severity, of side H
  (= W), its uniform draws the values in IN (in [0, 1), the order numpy
  would fill each array), written with np.roll as the reference is.
- resize_fifth: cv2.resize(fx=0.2, fy=0.2) (INTER_LINEAR) of the H x W x 3
  uint8 image.
"""
import io
import math
import sys

import cv2
import numpy as np
import scipy.ndimage as ndi
from PIL import Image


# make_cifar_c.py's parameters per severity 1..5 (`c = [...][severity - 1]`).
CIFAR_C = {
    "pixelate": [0.95, 0.9, 0.85, 0.75, 0.65],
    "jpeg_compression": [80, 65, 58, 50, 40],
    # sigma, max_delta, iterations
    "glass_blur": [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)],
    # (mixing weight, wibble decay)
    "fog": [(.2, 3), (.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)],
}


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


def glass(raw, h, w, c, severity):
    c = int(c)
    sigma, delta, iterations = CIFAR_C["glass_blur"][int(severity) - 1]
    values = np.frombuffer(raw, np.float64)
    image = values[: h * w * c].reshape(h, w, c)
    draws = iter(values[h * w * c:].astype(int).reshape(-1, 2).tolist())

    def blur(a):
        return ndi.gaussian_filter(a, (sigma, sigma, 0), mode="nearest", truncate=4.0)

    x = np.uint8(blur(image) * 255)
    for _ in range(iterations):
        for row in range(h - delta, delta, -1):
            for col in range(w - delta, delta, -1):
                dx, dy = next(draws)
                # The reference's swap, on numpy views of whole pixels.
                x[row, col], x[row + dy, col + dx] = x[row + dy, col + dx], x[row, col]
    yield np.clip(blur(x / 255.0), 0, 1).tobytes()


def plasma(raw, h, w, severity):
    draws = np.frombuffer(raw, np.float64)
    decay, used = CIFAR_C["fog"][int(severity) - 1][1], 0
    m = np.zeros((h, w))
    step, wibble = h, 100.0

    def noisy(total):
        nonlocal used
        u = draws[used:used + total.size].reshape(total.shape)
        used += total.size
        return total / 4 + wibble * (-wibble + 2 * wibble * u)

    while step >= 2:
        half = step // 2
        corners = m[0::step, 0::step]
        squares = corners + np.roll(corners, -1, axis=0)
        squares = squares + np.roll(squares, -1, axis=1)
        m[half::step, half::step] = noisy(squares)
        centres, corners = m[half::step, half::step], m[0::step, 0::step]
        m[0::step, half::step] = noisy(
            centres + np.roll(centres, 1, axis=0) + corners + np.roll(corners, -1, axis=1))
        m[half::step, 0::step] = noisy(
            centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=0))
        step //= 2
        wibble /= decay
    assert used == draws.size, "csam drew another number of values than this decay needs"
    m -= m.min()
    yield (m / m.max()).tobytes()


def resize_fifth(raw, h, w):
    image = np.frombuffer(raw, np.uint8).reshape(h, w, 3)
    yield cv2.resize(image, (0, 0), fx=0.2, fy=0.2).tobytes()


KINDS = {"pixelate": pixelate, "jpeg": jpeg, "map_coordinates": map_coordinates,
         "clipped_zoom": clipped_zoom, "gaussian": gaussian, "warp_affine": warp_affine,
         "glass": glass, "plasma": plasma, "resize_fifth": resize_fifth}


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
