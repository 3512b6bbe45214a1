"""Writes the seed inputs of the csam-train fuzz targets (fuzz/corpus/*/seed_*),
and the `npy` target's uint8 image seed.

Run with the project's venv: .venv/bin/python fuzz/make_seeds.py
Seeds named seed_bad_* are invalid on purpose: the corpus replay test
(crates/csam-train/tests/fuzz_corpus.rs) checks that they are refused.
Pair targets (idx, npy_images) take one input holding two files: a u16
little-endian length of the first file, the first file, then the second
(see csam_fuzz::split_pair in fuzz/src/lib.rs).
"""

import gzip
import io
import struct
from pathlib import Path

import numpy as np
import scipy.io
import torch
from safetensors.torch import save

CORPUS = Path(__file__).parent / "corpus"


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed_{name}").write_bytes(data)


def pair(first, second):
    return struct.pack("<H", len(first)) + first + second


def idx(type_code, dims, data):
    header = bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return header + bytes(data)


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def gz(data):
    return gzip.compress(data, mtime=0)


def idx_seeds():
    images = idx(8, [2, 2, 3], range(12))
    labels = idx(8, [2], [3, 1])
    write("idx", "pair", pair(images, labels))
    write("idx", "pair_gzip", pair(gz(images), gz(labels)))
    write("idx", "bad_count_mismatch", pair(images, idx(8, [3], [0, 1, 2])))
    # 2^32 - 1 images of 1000x1000 in a gzip of a few dozen bytes.
    write("idx", "bad_huge_claim_gzip", pair(gz(idx(8, [2**32 - 1, 1000, 1000], [])), labels))


def cifar_seeds():
    record10 = bytes([7]) + bytes(range(256)) * 12
    write("cifar", "cifar10_two_records", record10 + bytes([9]) + bytes(3072))
    write("cifar", "cifar100_record", bytes([3, 42]) + bytes(range(256)) * 12)
    write("cifar", "cifar10_gzip", gz(record10))
    write("cifar", "bad_label_out_of_range", bytes([10]) + bytes(3072))


def npy_images_seeds():
    images = np.arange(12, dtype=np.uint8).reshape(2, 1, 2, 3)
    write("npy_images", "nhwc_i8_labels", pair(npy(images), npy(np.array([3, 1], dtype="<i8"))))
    write("npy_images", "nhw_u2_be_labels", pair(npy(images[..., 0]), npy(np.array([0, 2], dtype=">u2"))))
    write("npy_images", "bad_negative_label", pair(npy(images), npy(np.array([-1, 1], dtype="<i4"))))
    write("npy_images", "bad_fortran", pair(npy(np.asfortranarray(images)), npy(np.array([0, 1], dtype="|u1"))))
    # numpy never compresses .npy files: a gzipped one is refused (with a hint).
    write("npy_images", "bad_gzipped", pair(gz(npy(images)), npy(np.array([3, 1], dtype="<i8"))))


def npy_seeds():
    # An image array for the uint8 path of the npy target (read widened too).
    images = np.arange(24, dtype=np.uint8).reshape(2, 2, 2, 3)
    (CORPUS / "npy" / "seed_images_u1_nhwc.npy").write_bytes(npy(images))


def mat(arrays, compress):
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, arrays, format="5", do_compression=compress, oned_as="column")
    return buffer.getvalue()


def svhn_mat_seeds():
    # Two 32x32x3 images: a whole file is a few kB the fuzzer can mutate.
    x = (np.arange(2 * 3072) % 251).astype(np.uint8).reshape(32, 32, 3, 2, order="F")
    write("svhn_mat", "u8_labels_compressed", mat({"X": x, "y": np.array([[10], [3]], np.uint8)}, True))
    write("svhn_mat", "double_labels_plain", mat({"X": x, "y": np.array([[1.0], [10.0]])}, False))
    write("svhn_mat", "bad_label_zero", mat({"X": x, "y": np.array([[0], [3]], np.uint8)}, False))
    write("svhn_mat", "bad_no_labels", mat({"X": x}, True))


def safetensors_seeds():
    # The fuzz target's model: MLP 4 -> 3 -> 2 (keys as in tests/fixtures/twins.py).
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    write("safetensors", "mlp", save(state))
    write("safetensors", "mlp_float64", save({k: v.double() for k, v in state.items()}))
    write("safetensors", "mlp_extra_counter", save({**state, "bn.num_batches_tracked": torch.tensor(7)}))
    write("safetensors", "bad_wrong_shape", save({**state, "1.weight": torch.ones(1, 4)}))


if __name__ == "__main__":
    idx_seeds()
    cifar_seeds()
    npy_images_seeds()
    npy_seeds()
    svhn_mat_seeds()
    safetensors_seeds()
