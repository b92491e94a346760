"""bf16_emulation.py - one epoch of mnist-cnn in fp32 and with ptrain's
--precision bf16 (or, with --tf32, tf32) rounding emulated on the CPU,
seed by seed.

ptrain's bf16 rounds what every GEMM and convolution multiplies to bf16 and
sums in fp32 (docs/gpu.md, Precision). Here each conv and linear layer does
the same in PyTorch: its forward product and both products of its backward
pass take their inputs rounded to bf16, and sum in fp32; the bias and its
gradient stay fp32. The difference in test accuracy between a seed's two
runs shows how far one epoch moves with a change of rounding, which sizes
the GPU test's comparison (tests/parallel/test_gpu_training.sh compares
the means over seeds).

  python3 bench/bf16_emulation.py [--tf32] SEED...   # needs torch and numpy; about 3 min a seed on 2 cores

--tf32 rounds to TF32's 10 stored mantissa bits instead of bf16's 7, as
tensor cores do under --precision tf32 (and PyTorch's allow_tf32).

Prints one line per seed: fp32's test accuracy, the emulation's, and the
difference. The preset as `ptrain models mnist-cnn` lists it: Adadelta at
lr 1.0, batch 64, Fashion-MNIST normalised as the preset does.
"""
import gzip
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FASHION = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    return np.frombuffer(gzip.open(FASHION + name).read(), np.uint8, offset=offset)


def split(prefix):
    x = torch.tensor(idx(f"{prefix}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28), dtype=torch.float32) / 255
    y = torch.tensor(idx(f"{prefix}-labels-idx1-ubyte.gz", 8).astype(np.int64))
    return (x - 0.1307) / 0.3081, y


DROP = 16  # the low bits of an fp32 the emulated format drops: 16 for bf16, 13 for TF32


def bf16(t):
    """t rounded to the emulated format (to nearest, ties to even), kept in fp32."""
    if DROP == 16:
        return t.bfloat16().float()
    u = t.contiguous().view(torch.int32)
    half = (1 << (DROP - 1)) - 1
    r = (u + half + ((u >> DROP) & 1)) & ~((1 << DROP) - 1)
    return torch.where(torch.isfinite(t), r.view(torch.float32), t)


class Conv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return F.conv2d(bf16(x), bf16(w), b)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        d = bf16(dy)
        dx = torch.nn.grad.conv2d_input(x.shape, bf16(w), d)
        dw = torch.nn.grad.conv2d_weight(bf16(x), w.shape, d)
        return dx, dw, dy.sum((0, 2, 3))


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return bf16(x) @ bf16(w).t() + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        d = bf16(dy)
        return d @ bf16(w), d.t() @ bf16(x), dy.sum(0)


class MnistCnn(nn.Module):
    def __init__(self, emulate):
        super().__init__()
        self.emulate = emulate
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def conv(self, m, x):
        return Conv.apply(x, m.weight, m.bias) if self.emulate else m(x)

    def linear(self, m, x):
        return Linear.apply(x, m.weight, m.bias) if self.emulate else m(x)

    def forward(self, x):
        x = F.relu(self.conv(self.conv1, x))
        x = F.relu(self.conv(self.conv2, x))
        x = F.dropout(F.max_pool2d(x, 2), 0.25, self.training)
        x = F.relu(self.linear(self.fc1, torch.flatten(x, 1)))
        x = F.dropout(x, 0.5, self.training)
        return F.log_softmax(self.linear(self.fc2, x), 1)


def one_epoch(emulate, seed, train, test):
    torch.manual_seed(seed)
    model = MnistCnn(emulate)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    order = torch.randperm(train[0].shape[0], generator=torch.Generator().manual_seed(seed))
    model.train()
    for i in range(0, len(order), 64):
        batch = order[i:i + 64]
        opt.zero_grad()
        F.nll_loss(model(train[0][batch]), train[1][batch]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        correct = sum((model(test[0][i:i + 1000]).argmax(1) == test[1][i:i + 1000]).sum().item()
                      for i in range(0, test[0].shape[0], 1000))
    return correct / test[0].shape[0]


def main(seeds):
    torch.set_num_threads(2)
    train, test = split("train"), split("t10k")
    for seed in seeds:
        t0 = time.time()
        a, b = one_epoch(False, seed, train, test), one_epoch(True, seed, train, test)
        print(f"seed {seed}: fp32 {a:.4f}  {'tf32' if DROP == 13 else 'bf16'}-emulated {b:.4f}  difference {b - a:+.4f}  ({time.time() - t0:.0f} s)",
              flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--tf32"]:
        DROP, args = 13, args[1:]
    main([int(s) for s in args] or [1])
