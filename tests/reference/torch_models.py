"""The tutorials' models in PyTorch, and a safetensors writer.

Shared by tests/reference/make_reference.py (the parity references) and
bench/pytorch_train.py (the accuracy and speed comparisons), so both
describe exactly the same PyTorch modules. Importing this module changes no
global torch setting; each script sets its own.
"""
import json
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

_DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8")}


def write_safetensors(path, tensors, metadata=None):
    """tensors: ordered dict name -> torch.Tensor (float32 or int64); written
    to a temporary file and renamed, so a reader never sees half a file."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in _DTYPES:
            raise TypeError("%s: unsupported dtype %s" % (name, t.dtype))
        st_dtype, np_dtype = _DTYPES[t.dtype]
        raw = t.numpy().astype(np_dtype, copy=False).tobytes(order="C")
        header[name] = {
            "dtype": st_dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    header["__metadata__"] = meta
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


class MnistCNN(nn.Module):
    """pytorch/examples mnist Net."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class TutorialCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(1, 16, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2))
        self.conv2 = nn.Sequential(nn.Conv2d(16, 32, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2))
        self.out = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = self.conv2(x)
        x = torch.flatten(x, 1)
        x = self.out(x)
        return F.log_softmax(x, dim=1)


class FmnistMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(784, 200)
        self.lin2 = nn.Linear(200, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = self.lin1(x)
        x = F.log_softmax(x, dim=1)
        return self.lin2(x)
