"""Hendrycks & Dietterich's make_cifar_c.py (hendrycks/robustness,
ImageNet-C/create_c/make_cifar_c.py), the corruptions that csam's
whole-image twins check (tests/shift_corrupt_whole_twins.rs): glass blur,
zoom blur, snow, frost, fog and the elastic transform, with the authors'
per-severity tables (CIFAR_C) and their arithmetic, line by line. What
differs, each csam's documented adaptation or a stand-in for a library the
project venv does not hold:

- Randomness: every np.random call takes csam's draws instead, made into
  values the way numpy does (normal(loc, scale): loc + scale * z;
  uniform(low, high): low + (high - low) * u, except snow's angle, which
  csam draws in degrees; randint: the integer itself; each checked to lie
  in numpy's range). The draws are csam's; the tables and the arithmetic
  on them are the authors'.
- Sizes: any square H x W x C uint8 image, 1 or 3 channels; 32 becomes the
  image's side (csam's elastic transform scales IMSIZE with it).
- One channel: snow's grey is the value itself, frost blends the luma of
  its crop (the authors' functions take RGB only).
- skimage.filters.gaussian is the scipy.ndimage.gaussian_filter it calls
  (channels apart for multichannel=True).
- Glass blur's first np.uint8 adds csam's 1e-9 round-off guard
  (Image::to_bytes) before truncating.
- Snow's ImageMagick MotionBlurImage (Wand) is csam's rendering of it: the
  numpy one of the imagecorruptions package (bethgelab/imagecorruptions),
  in float64, with the taps kept inside the image normalised to sum one;
  the 8-bit PNG it writes is a rounding to bytes.
- The elastic transform's cv2.warpAffine reads at exact positions (csam's;
  OpenCV rounds them to 1/32 pixel).
- Frost's photograph comes as the pixels csam decodes from its file (the
  JPEG decoders of OpenCV and csam may differ by a level; that is no part
  of the corruption); a shrunk photograph no larger than the image is read
  from offset 0 and tiled (csam's; the authors' randint would fail).
"""
import math

import cv2
import numpy as np
from scipy.ndimage import gaussian_filter, map_coordinates
from scipy.ndimage import zoom as scizoom

# make_cifar_c.py's parameters per severity 1..5 (`c = [...][severity - 1]`).
CIFAR_C = {
    "pixelate": [0.95, 0.9, 0.85, 0.75, 0.65],
    "jpeg_compression": [80, 65, 58, 50, 40],
    # sigma, max_delta, iterations
    "glass_blur": [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)],
    "zoom_blur": [np.arange(1, 1.06, 0.01), np.arange(1, 1.11, 0.01), np.arange(1, 1.16, 0.01),
                  np.arange(1, 1.21, 0.01), np.arange(1, 1.26, 0.01)],
    "snow": [(0.1, 0.2, 1, 0.6, 8, 3, 0.95),
             (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
             (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
             (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
             (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8)],
    "frost": [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)],
    "frost_files": ['./frost1.png', './frost2.png', './frost3.png', './frost4.jpg', './frost5.jpg',
                    './frost6.jpg'],
    "fog": [(.2, 3), (.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)],
    # fractions of IMSIZE: (alpha, sigma, affine)
    "elastic_transform": [(0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05),
                          (0.1, 0.03, 0.03)],
}

# Image::to_bytes's guard against k / 255 * 255 truncating to k - 1.
ROUND_OFF_GUARD = 1e-9


class Draws:
    """csam's random numbers, handed out as numpy's calls would use them."""

    def __init__(self, values):
        self.values, self.used = np.asarray(values, np.float64), 0

    def take(self, size):
        n = int(np.prod(size))
        assert self.used + n <= self.values.size, "csam drew fewer numbers than the reference uses"
        out = self.values[self.used:self.used + n].reshape(size)
        self.used += n
        return out

    def normal(self, size, loc, scale):
        return loc + scale * self.take(size)

    def uniform(self, low, high, size=()):
        u = self.take(size)
        assert np.all((0 <= u) & (u < 1))
        return low + (high - low) * u

    def uniform_drawn(self, low, high):
        """A value csam drew uniform in [low, high) itself (its own
        uniform-float arithmetic), checked to lie in numpy's range."""
        value = self.take(())
        assert low <= value < high, f"{value} outside numpy's uniform({low}, {high})"
        return value

    def randint(self, low, high, size=()):
        k = self.take(size).astype(np.int64)
        assert np.all((low <= k) & (k < high)), f"{k} outside numpy's randint({low}, {high})"
        return k

    def done(self):
        assert self.used == self.values.size, "csam drew more numbers than the reference uses"


def gaussian(image, sigma, multichannel=False, mode="nearest", truncate=4.0):
    """skimage.filters.gaussian of a float image: scipy's filter."""
    sigmas = (sigma, sigma, 0) if multichannel else sigma
    return gaussian_filter(image, sigmas, mode=mode, truncate=truncate)


def plasma_fractal(draws, mapsize=32, wibbledecay=3):
    assert (mapsize & (mapsize - 1) == 0)
    maparray = np.empty((mapsize, mapsize), dtype=np.float64)
    maparray[0, 0] = 0
    stepsize = mapsize
    wibble = 100

    def wibbledmean(array):
        return array / 4 + wibble * draws.uniform(-wibble, wibble, array.shape)

    def fillsquares():
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[stepsize // 2:mapsize:stepsize,
                 stepsize // 2:mapsize:stepsize] = wibbledmean(squareaccum)

    def filldiamonds():
        mapsize = maparray.shape[0]
        drgrid = maparray[stepsize // 2:mapsize:stepsize, stepsize // 2:mapsize:stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ldrsum = drgrid + np.roll(drgrid, 1, axis=0)
        lulsum = ulgrid + np.roll(ulgrid, -1, axis=1)
        ltsum = ldrsum + lulsum
        maparray[0:mapsize:stepsize, stepsize // 2:mapsize:stepsize] = wibbledmean(ltsum)
        tdrsum = drgrid + np.roll(drgrid, 1, axis=1)
        tulsum = ulgrid + np.roll(ulgrid, -1, axis=0)
        ttsum = tdrsum + tulsum
        maparray[stepsize // 2:mapsize:stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)

    while stepsize >= 2:
        fillsquares()
        filldiamonds()
        stepsize //= 2
        wibble /= wibbledecay

    maparray -= maparray.min()
    return maparray / maparray.max()


def clipped_zoom(img, zoom_factor):
    h = img.shape[0]
    # ceil crop height(= crop width)
    ch = int(np.ceil(h / zoom_factor))

    top = (h - ch) // 2
    img = scizoom(img[top:top + ch, top:top + ch], (zoom_factor, zoom_factor, 1), order=1)
    # trim off any extra pixels
    trim_top = (img.shape[0] - h) // 2

    return img[trim_top:trim_top + h, trim_top:trim_top + h]


def shift(image, dx, dy):
    """imagecorruptions' shift: the image moved by (dy, dx), edges repeated."""
    if dx < 0:
        shifted = np.roll(image, shift=image.shape[1] + dx, axis=1)
        shifted[:, dx:] = shifted[:, dx - 1:dx]
    elif dx > 0:
        shifted = np.roll(image, shift=dx, axis=1)
        shifted[:, :dx] = shifted[:, dx:dx + 1]
    else:
        shifted = image
    if dy < 0:
        shifted = np.roll(shifted, shift=image.shape[0] + dy, axis=0)
        shifted[dy:, :] = shifted[dy - 1:dy, :]
    elif dy > 0:
        shifted = np.roll(shifted, shift=dy, axis=0)
        shifted[:dy, :] = shifted[dy:dy + 1, :]
    return shifted


def motion_blur(x, radius, sigma, angle):
    """imagecorruptions' _motion_blur of a float plane, in float64, its kept
    taps normalised to sum one (csam's rendering of MotionBlurImage)."""
    width = radius * 2 + 1
    k = np.exp(-np.arange(width) ** 2 / (2 * (sigma ** 2))) / (np.sqrt(2 * np.pi) * sigma)
    kernel = k / np.sum(k)
    point = (width * np.sin(np.deg2rad(angle)), width * np.cos(np.deg2rad(angle)))
    hypot = math.hypot(point[0], point[1])
    taps = []
    for i in range(width):
        dy = -math.ceil(((i * point[0]) / hypot) - 0.5)
        dx = -math.ceil(((i * point[1]) / hypot) - 0.5)
        if np.abs(dy) >= x.shape[0] or np.abs(dx) >= x.shape[1]:
            # simulated motion exceeded image borders
            break
        taps.append((dx, dy))
    kept = kernel[:len(taps)] / np.sum(kernel[:len(taps)])
    blurred = np.zeros_like(x, dtype=np.float64)
    for weight, (dx, dy) in zip(kept, taps):
        blurred = blurred + weight * shift(x, dx, dy)
    return np.clip(blurred, 0, 1)


def warp_affine(image, M):
    """cv2.warpAffine(image, M, (W, H), borderMode=cv2.BORDER_REFLECT_101),
    each output pixel read bilinearly at its exact position M^-1 (x, y)
    (scipy's 'mirror' is reflect-101), float32 out as OpenCV's."""
    h, w = image.shape[:2]
    inverse = cv2.invertAffineTransform(M)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    sx = inverse[0, 0] * xs + inverse[0, 1] * ys + inverse[0, 2]
    sy = inverse[1, 0] * xs + inverse[1, 1] * ys + inverse[1, 2]
    planes = [map_coordinates(image[..., k].astype(np.float64), [sy, sx], order=1, mode="mirror")
              for k in range(image.shape[2])]
    return np.stack(planes, axis=-1).astype(np.float32)


def luma(rgb):
    """cv2.COLOR_RGB2GRAY's weights, for the one-channel adaptations."""
    return (0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2])[..., np.newaxis]


def glass_blur(x, severity, draws):
    # sigma, max_delta, iterations
    c = CIFAR_C["glass_blur"][severity - 1]
    height, width = x.shape[:2]

    x = np.uint8(gaussian(np.array(x) / 255., sigma=c[0], multichannel=True) * 255
                 + ROUND_OFF_GUARD)

    # locally shuffle pixels
    for i in range(c[2]):
        for h in range(height - c[1], c[1], -1):
            for w in range(width - c[1], c[1], -1):
                dx, dy = draws.randint(-c[1], c[1], size=(2,))
                h_prime, w_prime = h + dy, w + dx
                # swap
                x[h, w], x[h_prime, w_prime] = x[h_prime, w_prime], x[h, w]

    return np.clip(gaussian(x / 255., sigma=c[0], multichannel=True), 0, 1) * 255


def zoom_blur(x, severity, draws):
    c = CIFAR_C["zoom_blur"][severity - 1]

    x = (np.array(x) / 255.).astype(np.float32)
    out = np.zeros_like(x)
    for zoom_factor in c:
        out += clipped_zoom(x, zoom_factor)

    x = (x + out) / (len(c) + 1)
    return np.clip(x, 0, 1) * 255


def fog(x, severity, draws):
    c = CIFAR_C["fog"][severity - 1]
    h, w = x.shape[:2]

    x = np.array(x) / 255.
    max_val = x.max()
    x += c[0] * plasma_fractal(draws, wibbledecay=c[1])[:h, :w][..., np.newaxis]
    return np.clip(x * max_val / (max_val + c[0]), 0, 1) * 255


def frost(x, severity, draws, photograph, name):
    c = CIFAR_C["frost"][severity - 1]
    h, w = x.shape[:2]
    idx = draws.randint(0, 5)
    filename = CIFAR_C["frost_files"][idx]
    assert filename == "./" + name, f"csam drew {name} where the reference reads {filename}"
    frost = photograph[..., [2, 1, 0]]  # cv2.imread's BGR
    frost = cv2.resize(frost, (0, 0), fx=0.2, fy=0.2)
    # randomly crop and convert to rgb
    x_start = draws.randint(0, max(frost.shape[0] - h, 1))
    y_start = draws.randint(0, max(frost.shape[1] - w, 1))
    rows = np.arange(x_start, x_start + h) % frost.shape[0]
    cols = np.arange(y_start, y_start + w) % frost.shape[1]
    frost = frost[np.ix_(rows, cols)][..., [2, 1, 0]]
    if x.shape[2] == 1:
        frost = luma(frost.astype(np.float64))

    return np.clip(c[0] * np.array(x) + c[1] * frost, 0, 255)


def snow(x, severity, draws):
    c = CIFAR_C["snow"][severity - 1]
    h, w = x.shape[:2]

    x = np.array(x, dtype=np.float32) / 255.
    snow_layer = draws.normal(size=x.shape[:2], loc=c[0], scale=c[1])  # [:2] for monochrome

    snow_layer = clipped_zoom(snow_layer[..., np.newaxis], c[2])
    snow_layer[snow_layer < c[3]] = 0

    snow_layer = (np.clip(snow_layer.squeeze(), 0, 1) * 255).astype(np.uint8)
    angle = draws.uniform_drawn(-135, -45)
    snow_layer = np.round(motion_blur(snow_layer / 255., c[4], c[5], angle) * 255)

    snow_layer = snow_layer / 255.
    snow_layer = snow_layer[..., np.newaxis]

    grey = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY).reshape(h, w, 1) if x.shape[2] == 3 else x
    x = c[6] * x + (1 - c[6]) * np.maximum(x, grey * 1.5 + 0.5)
    return np.clip(x + snow_layer + np.rot90(snow_layer, k=2), 0, 1) * 255


def elastic_transform(image, severity, draws):
    IMSIZE = min(image.shape[:2])
    c = [tuple(IMSIZE * f for f in fractions) for fractions in CIFAR_C["elastic_transform"]][
        severity - 1]

    image = np.array(image, dtype=np.float32) / 255.
    shape = image.shape
    shape_size = shape[:2]

    # random affine
    center_square = np.float32(shape_size) // 2
    square_size = min(shape_size) // 3
    pts1 = np.float32([center_square + square_size,
                       [center_square[0] + square_size, center_square[1] - square_size],
                       center_square - square_size])
    pts2 = pts1 + draws.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
    M = cv2.getAffineTransform(pts1, pts2)
    image = warp_affine(image, M)

    dx = (gaussian(draws.uniform(-1, 1, size=shape[:2]),
                   c[1], mode='reflect', truncate=3) * c[0]).astype(np.float32)
    dy = (gaussian(draws.uniform(-1, 1, size=shape[:2]),
                   c[1], mode='reflect', truncate=3) * c[0]).astype(np.float32)
    dx, dy = dx[..., np.newaxis], dy[..., np.newaxis]

    x, y, z = np.meshgrid(np.arange(shape[1]), np.arange(shape[0]), np.arange(shape[2]))
    indices = np.reshape(y + dy, (-1, 1)), np.reshape(x + dx, (-1, 1)), np.reshape(z, (-1, 1))
    return np.clip(map_coordinates(image, indices, order=1, mode='reflect').reshape(shape), 0, 1) * 255


CORRUPTIONS = {"glass_blur": glass_blur, "zoom_blur": zoom_blur, "snow": snow, "frost": frost,
               "fog": fog, "elastic_transform": elastic_transform}
