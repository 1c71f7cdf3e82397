"""MNIST-format (IDX) image sets, such as Debian's dataset-fashion-mnist, without torchvision.

    images, labels = weft.data.load_split("/usr/share/datasets/fashion-mnist", "train", 5000)
"""
import gzip
import os
import struct

import numpy as np
import torch

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def read_idx(path, limit=None):
    """The array of an IDX file (plain or .gz), the first `limit` items when given."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        head = f.read(4)
        if len(head) != 4 or head[0] != 0 or head[1] != 0 or head[2] != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file")
        dims = struct.unpack(">" + "I" * head[3], f.read(4 * head[3]))
        count = dims[0] if limit is None or limit < 0 else min(dims[0], limit)
        item = int(np.prod(dims[1:], dtype=np.int64)) if len(dims) > 1 else 1
        data = np.frombuffer(f.read(count * item), dtype=np.uint8)
        if data.size != count * item:
            raise ValueError(f"{path}: truncated ({data.size} of {count * item} bytes)")
        return data.reshape((count,) + tuple(dims[1:]))


def _find(folder, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{folder}: neither {name} nor {name}.gz")


def load_split(folder, split, limit=None):
    """(images [count, 1, rows, cols] uint8 tensor, labels [count] int64 tensor)."""
    images_name, labels_name = _FILES[split]
    images = read_idx(_find(folder, images_name), limit)
    labels = read_idx(_find(folder, labels_name), limit)
    if len(images) != len(labels):
        raise ValueError(f"{folder}: {len(images)} {split} images but {len(labels)} labels")
    return (torch.from_numpy(images.copy()).unsqueeze(1),
            torch.from_numpy(labels.astype(np.int64)))


def normalization(images):
    """(mean, std) of the pixels scaled to [0, 1], as `weft train` measures them."""
    x = images.to(torch.float64) / 255.0
    mean = x.mean().item()
    return mean, max(1e-12, (x * x).mean().item() - mean * mean) ** 0.5


def normalize(images, mean, std, dtype=torch.float32):
    return ((images.to(torch.float64) / 255.0 - mean) / std).to(dtype)
