"""Image sets read by weft's C++ readers, without torchvision: MNIST-format (IDX) folders such as
Debian's dataset-fashion-mnist, IDX volumes (`weft data shapes3d`), CIFAR-10/100 binaries, and
tiny-imagenet or ImageNet-style folders of JPEG/PNG files (decoded whole into memory, fitted to
64x64: for small sets; `weft train` streams them), each recognised by its files.

    images, labels = weft.data.load_split("/usr/share/datasets/fashion-mnist", "train", 5000)
"""
import torch

from . import _weft

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def load_split(folder, split, limit=None):
    """(images [count, channels, (depth,) rows, cols] uint8 tensor, labels [count] int64 tensor),
    read by weft's C++ readers (headers, sizes and gzip checksums checked; weft.BadData
    otherwise). The folder's layout picks the reader (IDX images or volumes, CIFAR-10/100,
    tiny-imagenet, folder)."""
    return _weft.read_split(str(folder), str(split), -1 if limit is None else int(limit))


def normalization(images):
    """(mean, std) of the pixels scaled to [0, 1], as `weft train` measures them."""
    return _weft.pixel_normalization(images)


def normalize(images, mean, std, dtype=torch.float32):
    return ((images.to(torch.float64) / 255.0 - mean) / std).to(dtype)
