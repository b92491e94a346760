#!/usr/bin/env python3
"""PyTorch GPU training benchmark for ptrain's presets: the PyTorch half of
bench/gpu.sh, and its tools.

Trains one preset for --epochs epochs on a GPU and prints one JSON line with
each epoch's seconds, images/s and the final test accuracy. Two ways:

  --mode tutorial   as the tutorials write it: a DataLoader over a
                    TensorDataset in host memory (shuffle=True,
                    pin_memory=False, no workers), each batch moved to the
                    GPU with .to(device), the loss read with .item() every
                    --log-interval steps as pytorch/examples/mnist logs it.
                    Augmentation (cifar-convnet: random crop with 4 pixels
                    of zero padding, horizontal flip) is done per batch on
                    the CPU with tensor ops before the move: a
                    torchvision-free stand-in for the tutorial's per-sample
                    RandomCrop/RandomHorizontalFlip, and faster than them.
  --mode best       PyTorch at its best: the whole split on the GPU, each
                    epoch's order drawn there (torch.randperm) and batches
                    sliced there, augmentation on the GPU,
                    cudnn.benchmark on, zero_grad(set_to_none=True), the
                    fused (Adam) or foreach (Adadelta) optimizer, and
                    torch.compile(model) when it works here (--compile).

Both: the preset's model (built from the same classes as the CPU benchmarks,
plus cifar-convnet here; --dry-run checks every one layer for layer against
`ptrain models`), optimizer, learning rate, batch size and input
normalisation; the last partial batch is kept, as DataLoader keeps it. Before
timing, --warmup steps run (CUDA and cuDNN start-up, cuDNN's algorithm
search, compilation, the partial batch's shape too) and the model, optimizer
and random state are then put back, so every epoch figure is training alone:
torch.cuda.synchronize() before and after each epoch, time.perf_counter().
Evaluation on the whole test split (eval mode, --test-batch-size) follows
the last epoch, untimed. Precision is full FP32 (--precision fp32: TF32 off for cuDNN
convolutions and matmuls alike, where PyTorch's default would run cuDNN in
TF32), TF32 in both with --precision tf32, or with --precision bf16 the
forward pass and loss under torch.autocast(dtype=torch.bfloat16), training
and evaluation alike, with TF32 off for what autocast leaves in fp32.

Output (one line):

  {"framework": "pytorch", "torch": "2.x", "mode": "best", "model": ...,
   "dataset": "cifar10" | "synthetic-cifar10" | ..., "batch": 64, "epochs": 1,
   "epoch_seconds": [...], "seconds": <last epoch>, "images_per_s": ...,
   "test_accuracy": ..., "compiled": true, "gpu": "NVIDIA H100 ...", ...}

Tools (no GPU needed):

  --dry-run                 build every model (or --model's) on the CPU and
                            check it against `PTRAIN models NAME` (--ptrain):
                            the layers in order with their sizes, the
                            parameter count, loss, optimizer, learning rate,
                            batch sizes, normalisation and augmentation;
                            also checks the augmentation function
  --make-synthetic DIR      write a synthetic data set shaped like --dataset
                            (fashion-mnist: gzipped IDX; cifar10: binary
                            batches) into DIR, for machines without the real
                            one: ten classes, each a fixed smooth pattern plus
                            noise, so accuracy shows that training worked but
                            says nothing about the real data set
  --record-ptrain METRICS   turn the last line of ptrain's --metrics file
                            into a result line like the ones above
  --table RESULTS           print the Markdown table of a gpu.sh results file

--device cpu with --max-steps and --test-limit runs the training loops on the
CPU, as a smoke test where there is no GPU. Nothing here touches the network.
"""

import argparse
import copy
import datetime
import gzip
import json
import os
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("mnist-cnn", "tutorial-cnn", "cifar-convnet")
FASHION_DIR = "/usr/share/datasets/fashion-mnist"
CIFAR_DIR = "data/cifar10"
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)

# What the presets' `defaults` and `normalize`/`augment` lines say; --dry-run
# compares these with ptrain's own spec, so they cannot drift apart.
SETTINGS = {
    "mnist-cnn": dict(dataset="fashion-mnist", loss="nll", optimizer="adadelta", lr=1.0, batch=64,
                      test_batch=1000, normalize=((0.1307,), (0.3081,)), crop=0, flip=False, step_gamma=0.7),
    "tutorial-cnn": dict(dataset="fashion-mnist", loss="cross-entropy", optimizer="adam", lr=0.01, batch=100,
                         test_batch=1000, normalize=None, crop=0, flip=False, step_gamma=None),
    "cifar-convnet": dict(dataset="cifar10", loss="cross-entropy", optimizer="adam", lr=0.001, batch=64,
                          test_batch=1000, normalize=(CIFAR_MEAN, CIFAR_STD), crop=4, flip=True, step_gamma=None),
}


# ---------------------------------------------------------------- models


def model_class(name):
    """The PyTorch module of a preset: the CPU benchmarks' classes for the
    Fashion-MNIST presets, cifar-convnet here (written from its spec)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    sys.path.insert(0, HERE)
    import pytorch_train as pt

    if name == "mnist-cnn":
        return pt.MnistCNN
    if name == "tutorial-cnn":
        return pt.TutorialCNN

    class CifarConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 48, 3, padding=1)
            self.conv2 = nn.Conv2d(48, 96, 3, padding=1)
            self.conv3 = nn.Conv2d(96, 192, 3, padding=1)
            self.conv4 = nn.Conv2d(192, 256, 3, padding=1)
            self.conv5 = nn.Conv2d(256, 512, 3, padding=1)
            self.conv6 = nn.Conv2d(512, 1024, 3, padding=1)
            self.fc1 = nn.Linear(1024 * 8 * 8, 2048)
            self.fc2 = nn.Linear(2048, 64)
            self.fc3 = nn.Linear(64, 10)
            self.dropout = nn.Dropout(0.25)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout(x)
            x = F.relu(self.conv3(x))
            x = F.relu(self.conv4(x))
            x = F.relu(self.conv5(x))
            x = F.relu(self.conv6(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.dropout(x)
            return self.fc3(x)

    return CifarConvNet


def loss_fn(name):
    import torch.nn.functional as F
    return F.nll_loss if SETTINGS[name]["loss"] == "nll" else F.cross_entropy


def make_optimizer(name, params, best, device):
    """The preset's optimizer; at its best, the multi-tensor kernels a GPU
    run would use (same update rule, fewer launches)."""
    import torch
    s = SETTINGS[name]
    cuda = device.type == "cuda"
    if s["optimizer"] == "adam":
        return torch.optim.Adam(params, lr=s["lr"], **({"fused": True} if best and cuda else {}))
    if s["optimizer"] == "adadelta":
        return torch.optim.Adadelta(params, lr=s["lr"], **({"foreach": True} if best else {}))
    raise ValueError(f"{name}: no optimizer {s['optimizer']}")


# ---------------------------------------------------------------- data


def read_cifar(data_dir, train):
    """CIFAR-10 binary batches (in data_dir or data_dir/cifar-10-batches-bin):
    uint8 images (N, 3, 32, 32) and labels (N)."""
    import numpy as np
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if train else ["test_batch.bin"]
    base = data_dir
    if not os.path.exists(os.path.join(base, names[0])):
        base = os.path.join(data_dir, "cifar-10-batches-bin")
    raw = b"".join(open(os.path.join(base, n), "rb").read() for n in names)
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
    return rec[:, 1:].reshape(-1, 3, 32, 32), rec[:, 0].astype(np.int64)


def has_data(dataset, data_dir):
    if dataset == "cifar10":
        return any(os.path.exists(os.path.join(data_dir, s, "test_batch.bin")) for s in ("", "cifar-10-batches-bin"))
    return os.path.exists(os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz"))


def load_split(name, data_dir, train):
    """(images float32 N x C x H x W, normalised as the preset does; labels int64)."""
    import torch
    s = SETTINGS[name]
    if s["dataset"] == "cifar10":
        images, labels = read_cifar(data_dir, train)
        x = torch.from_numpy(images.copy()).to(torch.float32).div_(255.0)
        y = torch.from_numpy(labels)
    else:
        sys.path.insert(0, HERE)
        import pytorch_train as pt
        x, y = pt.load_split(data_dir, "train" if train else "t10k", None)
    if s["normalize"]:
        mean, std = (torch.tensor(v, dtype=torch.float32).view(1, -1, 1, 1) for v in s["normalize"])
        x = x.sub_(mean).div_(std)
    return x, y


def pad_value(name):
    """A raw pixel of 0 after normalisation: what RandomCrop's zero padding
    becomes, since the crop comes before Normalize (as in ptrain's loader)."""
    import torch
    s = SETTINGS[name]
    if not s["normalize"]:
        return torch.zeros(1)
    mean, std = s["normalize"]
    return torch.tensor([-m / d for m, d in zip(mean, std)], dtype=torch.float32)


def augment(x, pad, flip, fill):
    """Random crop of the original size from x padded by pad with fill (one
    value per channel), then a horizontal flip with probability 1/2; a whole
    batch at once, on x's device."""
    import torch
    b, c, h, w = x.shape
    dev = x.device
    if pad:
        xp = fill.to(dev).view(1, -1, 1, 1).expand(b, c, h + 2 * pad, w + 2 * pad).clone()
        xp[:, :, pad:pad + h, pad:pad + w] = x
        dy = torch.randint(0, 2 * pad + 1, (b,), device=dev)
        dx = torch.randint(0, 2 * pad + 1, (b,), device=dev)
    else:
        xp = x
        dy = dx = torch.zeros(b, dtype=torch.long, device=dev)
    cols = torch.arange(w, device=dev).expand(b, w)
    if flip:
        flipped = torch.rand(b, device=dev) < 0.5
        cols = torch.where(flipped[:, None], w - 1 - cols, cols)
    rows = (dy[:, None] + torch.arange(h, device=dev)).view(b, 1, h, 1)
    cols = (dx[:, None] + cols).view(b, 1, 1, w)
    return xp[torch.arange(b, device=dev).view(b, 1, 1, 1), torch.arange(c, device=dev).view(1, c, 1, 1), rows, cols]


# ---------------------------------------------------------------- synthetic data


def synthetic(dataset, out_dir, seed=0):
    """Ten classes, each a smooth random pattern (a coarse grid of random
    values, upsampled) at mid contrast plus pixel noise, clipped to bytes."""
    import numpy as np
    rng = np.random.default_rng(seed)
    c, hw = (3, 32) if dataset == "cifar10" else (1, 28)
    # Faint patterns under strong noise, so that one epoch ends short
    # of 100%: a broken trainer then shows as a lower accuracy.
    contrast = 15 if dataset == "cifar10" else 20
    coarse = rng.uniform(-1, 1, size=(10, c, 4, 4))
    templates = coarse.repeat(hw // 4 + 1, axis=2).repeat(hw // 4 + 1, axis=3)[:, :, :hw, :hw]

    def draw(n):
        labels = rng.integers(0, 10, size=n, dtype=np.int64)
        images = np.empty((n, c, hw, hw), dtype=np.uint8)
        for i in range(0, n, 5000):  # chunks keep the float buffer small
            lab = labels[i:i + 5000]
            noise = rng.normal(0, 64, size=(len(lab), c, hw, hw))
            images[i:i + 5000] = np.clip(128 + contrast * templates[lab] + noise, 0, 255).astype(np.uint8)
        return images, labels

    os.makedirs(out_dir, exist_ok=True)
    # A mark that bench/gpu.sh reads, so that a set made beforehand (a GPU
    # host without the real one) is not named as the real one in results.
    with open(os.path.join(out_dir, "SYNTHETIC"), "w") as f:
        f.write(f"synthetic {dataset}-shaped data from bench/pytorch_gpu_bench.py --make-synthetic, seed {seed}\n")
    if dataset == "cifar10":
        for name, n in [(f"data_batch_{i}.bin", 10000) for i in range(1, 6)] + [("test_batch.bin", 10000)]:
            images, labels = draw(n)
            rec = np.concatenate([labels.astype(np.uint8)[:, None], images.reshape(n, -1)], axis=1)
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(rec.tobytes())
        return
    for prefix, n in (("train", 60000), ("t10k", 10000)):
        images, labels = draw(n)
        with gzip.open(os.path.join(out_dir, f"{prefix}-images-idx3-ubyte.gz"), "wb", compresslevel=1) as f:
            f.write(struct.pack(">HBBIII", 0, 0x08, 3, n, hw, hw) + images.tobytes())
        with gzip.open(os.path.join(out_dir, f"{prefix}-labels-idx1-ubyte.gz"), "wb", compresslevel=1) as f:
            f.write(struct.pack(">HBBI", 0, 0x08, 1, n) + labels.astype(np.uint8).tobytes())


# ---------------------------------------------------------------- training


def gpu_name(device):
    import torch
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(precision, device):
    """bf16's autocast region, or none."""
    import contextlib
    import torch
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def evaluate(model, lossf, x, y, batch, device, precision="fp32"):
    """Mean test loss (summed per sample) and accuracy; x, y on any device."""
    import torch
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad(), autocast(precision, device):
        for i in range(0, x.shape[0], batch):
            data, target = x[i:i + batch].to(device), y[i:i + batch].to(device)
            out = model(data)
            total += lossf(out, target, reduction="sum").item()
            correct += (out.argmax(dim=1) == target).sum().item()
    return total / x.shape[0], correct / x.shape[0]


def train(args):
    import torch
    name = args.model
    s = SETTINGS[name]
    device = torch.device(args.device)
    best = args.mode == "best"
    batch = args.batch_size or s["batch"]
    lossf = loss_fn(name)
    fill = pad_value(name)

    t_load = time.perf_counter()
    x_train, y_train = load_split(name, args.data_dir, True)
    x_test, y_test = load_split(name, args.data_dir, False)
    n = x_train.shape[0]
    load_seconds = time.perf_counter() - t_load

    # FP32 means FP32 on both sides: PyTorch's default runs cuDNN's
    # convolutions in TF32, which ptrain's FP32 does not.
    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = best
    torch.manual_seed(args.seed)
    model = model_class(name)().to(device)
    opt = make_optimizer(name, model.parameters(), best, device)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=s["step_gamma"]) if s["step_gamma"] else None

    upload_seconds = 0.0
    if best:
        t0 = time.perf_counter()
        x_dev, y_dev = x_train.to(device), y_train.to(device)
        sync(device)
        upload_seconds = time.perf_counter() - t0

    compiled, compile_error = False, None
    net = model
    if best and args.compile != "off":
        try:
            net = torch.compile(model)
            compiled = True
        except Exception as e:  # no compiler backend here: eager it is
            compile_error = f"{type(e).__name__}: {e}"
            if args.compile == "on":
                raise

    def step(data, target):
        if best:
            opt.zero_grad(set_to_none=True)
        else:
            opt.zero_grad()
        with autocast(args.precision, device):
            loss = lossf(net(data), target)
        loss.backward()
        opt.step()
        return loss

    def batch_at(i, size, order):
        """A training batch of the given size starting at position i."""
        if best:
            idx = order[i:i + size]
            data, target = x_dev[idx], y_dev[idx]
            if s["crop"] or s["flip"]:
                data = augment(data, s["crop"], s["flip"], fill)
            return data, target
        data, target = x_train[order[i:i + size]], y_train[order[i:i + size]]
        if s["crop"] or s["flip"]:
            data = augment(data, s["crop"], s["flip"], fill)
        return data.to(device), target.to(device)

    # Warm-up on full batches and on the partial last one, then everything
    # put back, so the epochs below time training only.
    warm_order = torch.arange(n, device=device if best else "cpu")
    snapshot = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
    t_warm = time.perf_counter()
    model.train()
    sizes = [batch] * args.warmup + ([n % batch] if args.warmup and n % batch else [])
    try:
        for k, size in enumerate(sizes):
            step(*batch_at((k * batch) % (n - size + 1), size, warm_order))
        sync(device)
    except Exception as e:
        if not compiled or args.compile == "on":
            raise
        # torch.compile accepts the model but fails at its first call where
        # no compiler toolchain is installed: eager it is.
        compile_error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        compiled, net = False, model
        for size in sizes:
            step(*batch_at(0, size, warm_order))
        sync(device)
    warmup_seconds = time.perf_counter() - t_warm
    model.load_state_dict(snapshot[0])
    opt.load_state_dict(snapshot[1])
    torch.manual_seed(args.seed)

    epoch_seconds, train_losses, steps = [], [], 0
    for _epoch in range(args.epochs):
        model.train()
        loss_sum = torch.zeros((), device=device)
        seen = 0
        sync(device)
        t0 = time.perf_counter()
        if best:
            order = torch.randperm(n, device=device)
            for i in range(0, n, batch):
                size = min(batch, n - i)
                loss = step(*batch_at(i, size, order))
                loss_sum += loss.detach() * size
                seen += size
                steps += 1
                if args.max_steps and steps >= args.max_steps:
                    break
        else:
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train), batch_size=batch,
                                                 shuffle=True, pin_memory=False)
            for i, (data, target) in enumerate(loader):
                if s["crop"] or s["flip"]:
                    data = augment(data, s["crop"], s["flip"], fill)
                data, target = data.to(device), target.to(device)
                loss = step(data, target)
                if i % args.log_interval == 0:
                    loss.item()  # the tutorials' log line reads it here
                loss_sum += loss.detach() * target.shape[0]
                seen += target.shape[0]
                steps += 1
                if args.max_steps and steps >= args.max_steps:
                    break
        sync(device)
        epoch_seconds.append(time.perf_counter() - t0)
        train_losses.append(loss_sum.item() / seen)
        if sched is not None:
            sched.step()
        if args.max_steps and steps >= args.max_steps:
            break

    if args.test_limit:
        x_test, y_test = x_test[:args.test_limit], y_test[:args.test_limit]
    test_loss, test_acc = evaluate(model, lossf, x_test, y_test, args.test_batch_size or s["test_batch"], device,
                                   args.precision)
    last = epoch_seconds[-1]
    images = seen
    return {
        "framework": "pytorch", "torch": torch.__version__, "mode": args.mode, "model": name,
        "dataset": args.dataset_label or s["dataset"], "batch": batch, "epochs": len(epoch_seconds),
        "epoch_seconds": [round(t, 3) for t in epoch_seconds], "seconds": round(last, 3),
        "images_per_s": round(images / last, 1), "train_loss": round(train_losses[-1], 5),
        "test_loss": round(test_loss, 5), "test_accuracy": round(test_acc, 4),
        "compiled": compiled, **({"compile_error": compile_error[:300]} if compile_error else {}),
        "cudnn_benchmark": best, "precision": args.precision, "warmup_steps": len(sizes),
        "warmup_seconds": round(warmup_seconds, 2), "load_seconds": round(load_seconds, 2),
        "upload_seconds": round(upload_seconds, 3), "device": args.device, "gpu": gpu_name(device),
        **({"max_steps": args.max_steps} if args.max_steps else {}),
        **({"test_limit": args.test_limit} if args.test_limit else {}), "seed": args.seed,
    }


# ---------------------------------------------------------------- dry run


def parse_spec(text):
    """ptrain's spec language, as much as the comparison needs: the layers
    as tuples, and the other lines as dicts."""
    layers, other = [], {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        kind, rest = words[0], words[1:]
        kv = dict(w.split("=", 1) for w in rest if "=" in w)
        named = [w for w in rest if "=" not in w]
        if kind == "conv2d":
            layers.append(("conv2d", named[0], int(kv["out"]), int(kv["kernel"]), int(kv.get("padding", 0)),
                           int(kv.get("stride", 1))))
        elif kind == "linear":
            layers.append(("linear", named[0], int(kv["out"])))
        elif kind == "maxpool2d":
            layers.append(("maxpool2d", int(kv["kernel"])))
        elif kind == "dropout":
            layers.append(("dropout", float(kv["p"])))
        elif kind in ("relu", "flatten", "logsoftmax"):
            layers.append((kind,))
        elif kind in ("loss",):
            other["loss"] = named[0]
        elif kind in ("normalize", "augment", "defaults", "input"):
            other[kind] = kv if kv else rest
        elif kind != "name":
            raise ValueError(f"spec line not understood here: {line}")
    return layers, other


def torch_layers(model):
    """The model's forward pass as the same tuples, read from a torch.fx trace."""
    import torch
    import torch.fx
    import torch.nn as nn
    import torch.nn.functional as F
    mods = dict(model.named_modules())
    out = []
    for node in torch.fx.symbolic_trace(model).graph.nodes:
        if node.op == "call_module":
            m = mods[node.target]
            if isinstance(m, nn.Conv2d):
                out.append(("conv2d", node.target, m.out_channels, m.kernel_size[0], m.padding[0], m.stride[0]))
            elif isinstance(m, nn.Linear):
                out.append(("linear", node.target, m.out_features))
            elif isinstance(m, nn.Dropout):
                out.append(("dropout", m.p))
            elif isinstance(m, nn.ReLU):
                out.append(("relu",))
            elif isinstance(m, nn.MaxPool2d):
                k = m.kernel_size if isinstance(m.kernel_size, int) else m.kernel_size[0]
                out.append(("maxpool2d", k))
            else:
                out.append(("module?", type(m).__name__))
        elif node.op in ("call_function", "call_method"):
            t = node.target
            if t in (F.relu, torch.relu) or t == "relu":
                out.append(("relu",))
            elif t is F.max_pool2d:
                out.append(("maxpool2d", node.args[1] if len(node.args) > 1 else node.kwargs["kernel_size"]))
            elif t in (torch.flatten,) or t == "flatten":
                out.append(("flatten",))
            elif t in (F.log_softmax, torch.log_softmax) or t == "log_softmax":
                out.append(("logsoftmax",))
            elif t is F.dropout:
                out.append(("dropout", node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5)))
            else:
                out.append(("function?", str(t)))
    return out


def dry_run(args):
    import torch
    failures = 0
    names = [args.model] if args.model else list(MODELS)
    for name in names:
        spec = subprocess.run([args.ptrain, "models", name], capture_output=True, text=True, check=True).stdout
        table = subprocess.run([args.ptrain, "models"], capture_output=True, text=True, check=True).stdout
        want_params = next(int(line.split()[1]) for line in table.splitlines() if line.split()[:1] == [name])
        layers, other = parse_spec(spec)
        torch.manual_seed(0)
        model = model_class(name)()
        got = torch_layers(model)
        nparams = sum(p.numel() for p in model.parameters())
        s = SETTINGS[name]
        d = other["defaults"]
        checks = [
            ("layers", got, layers),
            ("parameters", nparams, want_params),
            ("loss", s["loss"], other["loss"]),
            ("dataset", s["dataset"], d["dataset"]),
            ("optimizer", s["optimizer"], d["optimizer"]),
            ("lr", s["lr"], float(d["lr"])),
            ("batch", s["batch"], int(d["batch"])),
            ("test batch", s["test_batch"], int(d["test-batch"])),
            ("step gamma", s["step_gamma"], float(d["gamma"]) if d.get("scheduler") == "step" else None),
            ("normalize", s["normalize"], tuple(tuple(float(v) for v in other["normalize"][k].split(","))
                                               for k in ("mean", "std")) if "normalize" in other else None),
            ("crop", s["crop"], int(other.get("augment", {}).get("crop", 0))),
            ("flip", s["flip"], other.get("augment", {}).get("flip", "0") == "1"),
        ]
        x = torch.randn(2, *(int(v) for v in other["input"]))
        out = model(x)
        checks.append(("output", tuple(out.shape), (2, 10)))
        bad = [(what, g, w) for what, g, w in checks if g != w]
        for what, g, w in bad:
            print(f"{name}: {what}: PyTorch has {g}, ptrain {w}", file=sys.stderr)
        failures += bool(bad)
        print(json.dumps({"model": name, "layers": len(got), "parameters": nparams, "matches_ptrain": not bad}))
    failures += check_augment()
    return 1 if failures else 0


def check_augment():
    """Without padding or flip the batch comes back as it was; with a flip
    every image is itself or its mirror; with padding every output pixel is
    an input pixel or the fill, and the crops differ."""
    import torch
    torch.manual_seed(0)
    x = torch.randn(64, 3, 8, 8)
    fill = torch.tensor([-1.5, -2.5, -3.5])
    bad = []
    if not torch.equal(augment(x, 0, False, fill), x):
        bad.append("identity")
    y = augment(x, 0, True, fill)
    same = (y == x).flatten(1).all(1)
    mirrored = (y == x.flip(3)).flatten(1).all(1)
    if not bool((same | mirrored).all()) or not bool(same.any()) or not bool(mirrored.any()):
        bad.append("flip")
    z = augment(x, 2, False, fill)
    for b in range(x.shape[0]):
        for c in range(3):
            vals = set(z[b, c].flatten().tolist()) - {fill[c].item()}
            if not vals <= set(x[b, c].flatten().tolist()):
                bad.append("crop values")
                break
    if torch.equal(z, x):
        bad.append("crop moved nothing")
    for what in bad:
        print(f"augment: {what} check failed", file=sys.stderr)
    print(json.dumps({"augment_checks": "failed" if bad else "passed"}))
    return 1 if bad else 0


# ---------------------------------------------------------------- ptrain results and the table


def smi_samples(path):
    """nvidia-smi's CSV lines (timestamp, utilization %, memory MiB) as
    (Unix time, util, MiB); its timestamps are the machine's local time, as
    datetime reads them."""
    rows = []
    try:
        f = open(path)
    except OSError:
        return rows
    with f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3 or not parts[1].isdigit():
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                rows.append((t, int(parts[1]), int(parts[2])))
            except ValueError:
                continue
    return rows


def smi_summary(path, since=None, until=None):
    """The run's nvidia-smi samples summed up: the whole run's mean
    utilisation and peak memory, and where ptrain said over which window its
    own NVML figures are (since, until), the same over that window, which is
    what can be compared with them."""
    rows = smi_samples(path)
    out = {}
    if rows:
        out.update(gpu_util_mean_pct=round(sum(r[1] for r in rows) / len(rows), 1),
                   gpu_mem_peak_mib=max(r[2] for r in rows), gpu_samples=len(rows))
    if since is not None and until is not None:
        win = [r for r in rows if since <= r[0] <= until]
        if win:
            out.update(smi_window_util_pct=round(sum(r[1] for r in win) / len(win), 1),
                       smi_window_mem_peak_mib=max(r[2] for r in win), smi_window_samples=len(win))
    return out


def merge_result(args):
    """A run's result line with what gpu.sh measured around it: the round,
    the wall time, other processes' CPU use and nvidia-smi's samples."""
    o = json.loads(args.merge_result)
    o.update(round=args.round, wall_seconds=args.wall, other_cores=args.other_cores)
    o.update(smi_summary(args.smi, o.get("ptrain_gpu_since"), o.get("ptrain_gpu_until")) if args.smi else {})
    print(json.dumps(o))
    return 0


def record_ptrain(args):
    """ptrain's last --metrics line (an epoch) as a result line."""
    with open(args.record_ptrain) as f:
        epochs = [json.loads(line) for line in f if line.strip()]
    epochs = [e for e in epochs if e.get("event", "epoch") == "epoch" and "seconds" in e]
    if not epochs:
        raise SystemExit(f"{args.record_ptrain}: no epoch line")
    e = epochs[-1]
    s = SETTINGS[args.model]
    out = {
        "framework": "ptrain", "mode": args.ptrain_mode, "model": args.model,
        "dataset": args.dataset_label or s["dataset"], "batch": args.batch_size or s["batch"], "epochs": len(epochs),
        "epoch_seconds": [round(x["seconds"], 3) for x in epochs], "seconds": round(e["seconds"], 3),
        "images_per_s": round(e["images_per_s"], 1), "train_loss": e.get("train_loss"),
        "test_loss": e.get("test_loss"), "test_accuracy": e.get("test_acc"), "device": args.device,
        "precision": args.precision,
        # ptrain's own view of the GPU (NVML), for the run's nvidia-smi samples beside it
        "ptrain_gpu_util_pct": e.get("gpu_util_pct"), "ptrain_gpu_mem_peak_mib": e.get("gpu_mem_peak_mib"),
        "ptrain_gpu_since": e.get("gpu_since"), "ptrain_gpu_until": e.get("gpu_until"),
        "gpu_syncs": e.get("gpu_syncs"), "gpu_ahead_waits": e.get("gpu_ahead_waits"),
        "gpu_loss_reads": e.get("gpu_loss_reads"), "graph_steps": e.get("graph_steps"),
    }
    print(json.dumps(out))
    return 0


def table(path):
    """Markdown: per model, the median over rounds of each run's last epoch."""
    meta, runs = {}, []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            o = json.loads(line)
            if o.get("meta"):
                meta = o
            elif not o.get("error"):
                runs.append(o)
    torch_v = meta.get("torch", "?")
    cols = [("ptrain", "ptrain"), ("tutorial", f"PyTorch {torch_v}, as the tutorials"),
            ("best", f"PyTorch {torch_v}, at its best")]
    # Beside the default run, one with the step's kernels launched one by
    # one ("eager", EAGER=1); files from before the graphs were the default
    # have "graphs" (--cuda-graphs) beside an eager "ptrain" instead.
    extra = next((m for m in ("eager", "graphs") if any(r["mode"] == m for r in runs)), None)
    if extra:
        cols.insert(1, (extra, "ptrain --no-cuda-graphs" if extra == "eager" else "ptrain --cuda-graphs"))
    print(f"GPU: {meta.get('gpu', '?')}; {meta.get('ptrain', 'ptrain ?')}; PyTorch {torch_v}; "
          f"{meta.get('epochs', '?')} epoch(s), median of {meta.get('rounds', '?')} round(s)\n")
    print("| model | data | " + " | ".join(f"{title}: s/epoch, img/s, test acc" for _, title in cols)
          + f" | ptrain / tutorial (PyTorch {torch_v}) | ptrain / best (PyTorch {torch_v}) |"
          + (" CUDA graphs / eager |" if extra else ""))
    print("|---|---|" + "---|" * (len(cols) + 2 + bool(extra)))
    for model in MODELS:
        mine = [r for r in runs if r["model"] == model]
        if not mine:
            continue
        med, cells = {}, []
        for mode, _ in cols:
            rs = [r for r in mine if r["mode"] == mode]
            if not rs:
                cells.append("-")
                continue
            ips = statistics.median(r["images_per_s"] for r in rs)
            sec = statistics.median(r["seconds"] for r in rs)
            acc = statistics.median(r["test_accuracy"] for r in rs if r.get("test_accuracy") is not None)
            med[mode] = ips
            note = "" if mode != "best" else (" (compiled)" if all(r.get("compiled") for r in rs) else " (eager)")
            cells.append(f"{sec:.2f} s, {ips:,.0f}, {acc:.4f}{note}")
        ratio = [f"{med['ptrain'] / med[m]:.2f}x" if "ptrain" in med and m in med else "-" for m in ("tutorial", "best")]
        if extra:
            on, off = ("ptrain", "eager") if extra == "eager" else ("graphs", "ptrain")
            ratio.append(f"{med[on] / med[off]:.2f}x" if on in med and off in med else "-")
        print(f"| {model} | {mine[0].get('dataset', '?')} | " + " | ".join(cells) + " | " + " | ".join(ratio) + " |")
    precisions = sorted({"bf16 autocast" if r.get("precision") == "bf16" else r.get("precision", "default (TF32 in cuDNN)")
                         for r in runs if r.get("framework") != "ptrain"})
    mine = sorted({r.get("precision", "fp32") for r in runs if r.get("framework") == "ptrain"})
    said = {"fp32": "FP32 (cuBLAS and cuDNN in FMA math, no TF32)",
            "tf32": "TF32 (cuBLAS's TF32 tensor-op math, cuDNN in the math its algorithm asks for)",
            "bf16": "bf16 (every GEMM's inputs rounded to bf16, fp32 sums and storage; convolutions on the gemm path)"}
    print("\nRatios are images/s, ptrain over PyTorch: above 1, ptrain is faster. Precision: ptrain "
          + ", ".join(said.get(p, p) for p in mine) + "; PyTorch " + ", ".join(precisions) + ".")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch GPU training benchmark of a ptrain preset (and its tools).")
    ap.add_argument("--model", choices=MODELS)
    ap.add_argument("--mode", choices=("tutorial", "best"), default="best")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--test-batch-size", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir")
    ap.add_argument("--dataset-label", help="the data set's name in the output (e.g. synthetic-cifar10)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                    help="--mode best: torch.compile the model (auto: when it works here)")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                    help="fp32: TF32 off in cuDNN and matmuls (default); tf32: on in both; "
                         "bf16: torch.autocast to bfloat16, TF32 off")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--log-interval", type=int, default=10)
    ap.add_argument("--max-steps", type=int, default=0, help="stop early (smoke tests)")
    ap.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test samples (smoke tests)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--ptrain", default="build/ptrain")
    ap.add_argument("--make-synthetic", metavar="DIR")
    ap.add_argument("--dataset", choices=("fashion-mnist", "cifar10"), help="with --make-synthetic")
    ap.add_argument("--record-ptrain", metavar="METRICS")
    ap.add_argument("--ptrain-mode", choices=("ptrain", "eager"), default="ptrain",
                    help="--record-ptrain: the run's mode in the results (eager: it ran with --no-cuda-graphs)")
    ap.add_argument("--table", metavar="RESULTS")
    ap.add_argument("--merge-result", metavar="JSON", help="gpu.sh: a run's result line, completed and printed")
    ap.add_argument("--round", type=int, default=1, help="with --merge-result")
    ap.add_argument("--wall", type=float, default=0.0, help="with --merge-result: the process's seconds")
    ap.add_argument("--other-cores", type=float, default=0.0, help="with --merge-result")
    ap.add_argument("--smi", metavar="CSV", help="with --merge-result: nvidia-smi's samples during the run")
    args = ap.parse_args(argv)

    if args.table:
        return table(args.table)
    if args.merge_result:
        return merge_result(args)
    if args.make_synthetic:
        if not args.dataset:
            ap.error("--make-synthetic needs --dataset")
        synthetic(args.dataset, args.make_synthetic)
        return 0
    if args.dry_run:
        return dry_run(args)
    if not args.model:
        ap.error("--model is required")
    if args.record_ptrain:
        return record_ptrain(args)
    for name in ("epochs", "log_interval"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0 or args.max_steps < 0 or args.test_limit < 0:
        ap.error("--warmup, --max-steps and --test-limit must be at least 0")
    if args.data_dir is None:
        args.data_dir = CIFAR_DIR if SETTINGS[args.model]["dataset"] == "cifar10" else FASHION_DIR
    if not has_data(SETTINGS[args.model]["dataset"], args.data_dir):
        raise SystemExit(f"{args.data_dir}: no {SETTINGS[args.model]['dataset']} files (--make-synthetic writes some)")
    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: PyTorch {torch.__version__} sees no CUDA device")
    print(json.dumps(train(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
