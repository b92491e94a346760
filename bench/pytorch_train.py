#!/usr/bin/python3
"""PyTorch reference trainer for ptrain's Fashion-MNIST model presets.

Trains one preset the way its PyTorch tutorial does, with the preset's
defaults (see `./build/ptrain models NAME`), and prints the final test loss
and accuracy as one JSON line on stdout:

    {"model": "fmnist-mlp", "seed": 1, "epochs": 1, "test_loss": 0.61,
     "test_accuracy": 0.78, "torch": "1.13.0a0", ...}

Presets:
  mnist-cnn     pytorch/examples/mnist Net; F.nll_loss; Adadelta lr 1.0,
                StepLR(step_size=1, gamma=0.7) stepped per epoch; batch 64,
                test batch 1000; inputs x/255 then Normalize(0.1307, 0.3081).
  tutorial-cnn  conv1/conv2 as nn.Sequential(Conv2d, ReLU, MaxPool2d), out
                Linear(1568, 10), log_softmax; nn.CrossEntropyLoss; Adam lr
                0.01; batch 100; inputs x/255.
  fmnist-mlp    lin1 Linear(784, 200), log_softmax(dim=1), lin2 Linear(200,
                10); nn.CrossEntropyLoss; Adam lr 0.01; batch 100; x/255.

As in pytorch/examples: torch.manual_seed(seed) first, then the model is
built, then the batches come from torch.utils.data.DataLoader(shuffle=True)
over the in-memory tensors (part of torch itself, not torchvision), so the
shuffled order draws from the default generator exactly as the tutorials'
loaders do; the last, partial batch is kept.

Options:
  --model NAME          fmnist-mlp, tutorial-cnn or mnist-cnn (required)
  --seed N              torch.manual_seed (default 1)
  --epochs N            epochs to train (default 1)
  --threads N           torch.set_num_threads (default 2)
  --data-dir DIR        the Fashion-MNIST IDX .gz files
                        (default /usr/share/datasets/fashion-mnist)
  --export-init FILE    write the freshly initialised weights (before any
                        training) as an F32 safetensors file named like the
                        state_dict; `ptrain train --init-from FILE` reads it
  --export-only         with --export-init: export, then exit without training
  --no-shuffle          keep the dataset's order, so that with --export-init
                        and ptrain's --init-from --no-shuffle both frameworks
                        see the same weights and the same batches

Run with Debian's PyTorch (python3-torch), not another python3 on PATH:

    /usr/bin/python3 bench/pytorch_train.py --model fmnist-mlp --seed 1
    /usr/bin/python3 bench/pytorch_train.py --model mnist-cnn --seed 2 \\
        --export-init /tmp/init.safetensors --export-only

torchvision is not needed: the IDX files are read with gzip and numpy.
Nothing here touches the network.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The models (and the safetensors writer) are the parity references' own.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from torch_models import FmnistMLP, MnistCNN, TutorialCNN, write_safetensors  # noqa: E402

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"


# ---------------------------------------------------------------- data


def read_idx(path):
    """Reads a gzipped IDX file (unsigned byte data) into a numpy array."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} bytes of data, header says {dims}")
    return data.reshape(dims)


def load_split(data_dir, prefix, normalize):
    """Returns (images N x 1 x 28 x 28 float32, labels N int64) for one split.

    Images are scaled as ToTensor does (x / 255) and, if normalize is given as
    (mean, std), then standardised as transforms.Normalize does.
    """
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.copy()).to(torch.float32).div_(255.0).unsqueeze(1)
    if normalize is not None:
        mean, std = normalize
        x = x.sub_(mean).div_(std)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


# ---------------------------------------------------------------- presets


# Each preset: model class, loss on (output, target) with mean reduction,
# optimizer factory, batch sizes, input normalisation, StepLR gamma or None.
PRESETS = {
    "mnist-cnn": dict(
        model=MnistCNN,
        loss=F.nll_loss,
        optimizer=lambda p: torch.optim.Adadelta(p, lr=1.0),
        batch=64, test_batch=1000,
        normalize=(0.1307, 0.3081),
        step_gamma=0.7,
    ),
    "tutorial-cnn": dict(
        model=TutorialCNN,
        loss=nn.CrossEntropyLoss(),
        optimizer=lambda p: torch.optim.Adam(p, lr=0.01),
        batch=100, test_batch=1000,
        normalize=None,
        step_gamma=None,
    ),
    "fmnist-mlp": dict(
        model=FmnistMLP,
        loss=nn.CrossEntropyLoss(),
        optimizer=lambda p: torch.optim.Adam(p, lr=0.01),
        batch=100, test_batch=1000,
        normalize=None,
        step_gamma=None,
    ),
}


# ---------------------------------------------------------------- training


def evaluate(model, loss_fn, x, y, batch):
    """Mean test loss (summed per sample, then / N) and accuracy."""
    model.eval()
    total_loss = 0.0
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            out = model(x[i:i + batch])
            t = y[i:i + batch]
            total_loss += loss_fn(out, t).item() * t.shape[0]
            correct += (out.argmax(dim=1) == t).sum().item()
    n = x.shape[0]
    return total_loss / n, correct / n


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train a ptrain preset with PyTorch; print one JSON line.")
    ap.add_argument("--model", required=True, choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    ap.add_argument("--export-init", metavar="FILE")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--no-shuffle", action="store_true",
                    help="keep the dataset's order (to compare with ptrain --no-shuffle from the same init)")
    args = ap.parse_args(argv)
    if args.export_only and not args.export_init:
        ap.error("--export-only needs --export-init FILE")
    if args.epochs < 1:
        ap.error("--epochs must be at least 1")

    torch.set_num_threads(args.threads)
    p = PRESETS[args.model]

    torch.manual_seed(args.seed)
    model = p["model"]()
    if args.export_init:
        write_safetensors(args.export_init, model.state_dict())
        if args.export_only:
            return 0

    x_train, y_train = load_split(args.data_dir, "train", p["normalize"])
    x_test, y_test = load_split(args.data_dir, "t10k", p["normalize"])

    loss_fn = p["loss"]
    opt = p["optimizer"](model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=p["step_gamma"]) if p["step_gamma"] else None

    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_train, y_train), batch_size=p["batch"], shuffle=not args.no_shuffle)
    n = x_train.shape[0]
    t0 = time.time()
    train_loss = 0.0
    for _epoch in range(args.epochs):
        model.train()
        loss_sum = 0.0
        for data, target in train_loader:
            opt.zero_grad()
            loss = loss_fn(model(data), target)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * target.shape[0]
        train_loss = loss_sum / n
        if sched is not None:
            sched.step()
    train_seconds = time.time() - t0

    test_loss, test_acc = evaluate(model, loss_fn, x_test, y_test, p["test_batch"])
    print(json.dumps({
        "model": args.model, "seed": args.seed, "epochs": args.epochs,
        "train_loss": round(train_loss, 6),
        "test_loss": round(test_loss, 6), "test_accuracy": test_acc,
        "train_seconds": round(train_seconds, 1),
        "shuffle": not args.no_shuffle, "threads": args.threads, "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
