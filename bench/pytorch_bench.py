#!/usr/bin/python3
"""PyTorch CPU training-throughput benchmark for ptrain's model presets.

The PyTorch half of bench/cpu.sh. Builds a preset exactly as
bench/pytorch_train.py does (its model classes, loss, optimizer and input
normalisation are imported from there, not copied), and measures the
steady-state training step on the CPU:

  * the model is in train mode (dropout on, as in training);
  * K=10 distinct batches of the requested size are cut from the
    Fashion-MNIST training split and staged as tensors in memory before any
    timing, so data loading is not measured; the steps cycle through them;
  * W warm-up steps, then N timed steps, each
    zero_grad, forward, loss, backward, optimizer.step,
    timed as one block with time.perf_counter; --repeat R times that block
    and reports the best and the median.

Prints one JSON line on stdout:

    {"framework": "pytorch", "torch": "2.15.0+cu132", "model": "mnist-cnn",
     "batch": 64, "threads": 2, "steps": 50, "images_per_s": ...,
     "step_ms": ..., "peak_rss_mb": ...}

images_per_s and step_ms are the median over the R repeats (with R = 1, the
one run); *_best are the best repeat.

A second mode, --target-accuracy, measures time to accuracy instead: it
trains the preset as pytorch_train.py does (DataLoader with shuffle over the
whole training split, torch.manual_seed(seed) first), evaluates on the whole
test split every --eval-interval steps (eval mode, then back to train mode),
and stops at the first evaluation whose accuracy is >= the target. It prints
one JSON line with the steps, the test accuracy reached and the seconds,
counting evaluation time (seconds: from the start of training; and
seconds_incl_load: from the start of loading the data set).

Options:
  --model NAME          mnist-cnn, tutorial-cnn or fmnist-mlp (required)
  --batch-size N        default: the preset's (64, 100, 100)
  --threads N           torch.set_num_threads (default 2); interop threads 1
  --steps N             timed steps per repeat (default 50)
  --warmup W            untimed steps first (default 5)
  --repeat R            timed blocks (default 1)
  --seed N              torch.manual_seed (default 1)
  --data-dir DIR        the Fashion-MNIST IDX .gz files
  --target-accuracy X   time-to-accuracy mode (see above)
  --eval-interval N     steps between evaluations there (default 100; 0: at
                        the end of each epoch, as ptrain train does)
  --max-epochs N        give up after N epochs there (default 5)

Runs under Debian's PyTorch (/usr/bin/python3) and under a newer PyTorch in
a venv (e.g. /opt/torch-latest/bin/python); see docs/benchmarks.md.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_train as pt  # noqa: E402  (the same folder)

STAGED_BATCHES = 10


def set_threads(n):
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set, or parallel work already started: harmless here


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def throughput(args, p):
    x, y = pt.load_split(args.data_dir, "train", p["normalize"])
    b = args.batch_size
    if STAGED_BATCHES * b > x.shape[0]:
        raise SystemExit(f"--batch-size {b}: need {STAGED_BATCHES} x {b} training images, have {x.shape[0]}")
    g = torch.Generator().manual_seed(args.seed)
    idx = torch.randperm(x.shape[0], generator=g)[:STAGED_BATCHES * b]
    batches = [(x[idx[i * b:(i + 1) * b]].contiguous(), y[idx[i * b:(i + 1) * b]].contiguous())
               for i in range(STAGED_BATCHES)]
    del x, y

    torch.manual_seed(args.seed)
    model = p["model"]()
    model.train()
    loss_fn = p["loss"]
    opt = p["optimizer"](model.parameters())

    k = 0

    def step():
        nonlocal k
        data, target = batches[k % STAGED_BATCHES]
        k += 1
        opt.zero_grad()
        loss = loss_fn(model(data), target)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    # Each timed block runs for at least --min-seconds (whole multiples of
    # --steps): a block of a few hundred milliseconds caught PyTorch's
    # start-up (allocator, oneDNN primitive caches) and scheduler noise,
    # and 2,000 steps of fmnist-mlp ran up to twice as fast as 400.
    times = []
    steps = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        n = 0
        while True:
            for _ in range(args.steps):
                loss = step()
            n += args.steps
            loss.item()  # CPU ops are synchronous; this only guards against laziness
            if time.perf_counter() - t0 >= args.min_seconds:
                break
        times.append((time.perf_counter() - t0) / n)
        steps = n

    # times are seconds per step; a block's step count (steps) is a
    # multiple of --steps and differs from block to block
    med = statistics.median(times)
    best = min(times)
    out = {
        "framework": "pytorch", "torch": torch.__version__, "model": args.model, "batch": b,
        "threads": args.threads, "steps": steps, "min_seconds": args.min_seconds,
        "flush_denormal": args.flush_denormal, "warmup": args.warmup, "repeat": args.repeat,
        "images_per_s": round(b / med, 2), "step_ms": round(1000.0 * med, 3),
        "images_per_s_best": round(b / best, 2), "step_ms_best": round(1000.0 * best, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    print(json.dumps(out), flush=True)


def time_to_accuracy(args, p):
    t_start = time.perf_counter()
    x_train, y_train = pt.load_split(args.data_dir, "train", p["normalize"])
    x_test, y_test = pt.load_split(args.data_dir, "t10k", p["normalize"])

    torch.manual_seed(args.seed)
    model = p["model"]()
    loss_fn = p["loss"]
    opt = p["optimizer"](model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=p["step_gamma"]) if p["step_gamma"] else None
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)

    t_train = time.perf_counter()
    eval_seconds = 0.0
    steps = 0
    acc = 0.0
    evals = []
    reached = False
    for epoch in range(args.max_epochs):
        model.train()
        for data, target in loader:
            opt.zero_grad()
            loss = loss_fn(model(data), target)
            loss.backward()
            opt.step()
            steps += 1
            if (args.eval_interval and steps % args.eval_interval == 0) or \
                    (not args.eval_interval and steps % len(loader) == 0):
                te = time.perf_counter()
                _, acc = pt.evaluate(model, loss_fn, x_test, y_test, p["test_batch"])
                eval_seconds += time.perf_counter() - te
                model.train()
                evals.append([steps, round(acc, 4), round(time.perf_counter() - t_train, 2)])
                if acc >= args.target_accuracy:
                    reached = True
                    break
        if reached:
            break
        if sched is not None:
            sched.step()
    t_end = time.perf_counter()
    print(json.dumps({
        "framework": "pytorch", "torch": torch.__version__, "model": args.model, "mode": "time_to_accuracy",
        "target_accuracy": args.target_accuracy, "reached": reached, "test_accuracy": acc,
        "steps": steps, "epochs": round(steps * args.batch_size / x_train.shape[0], 3),
        "batch": args.batch_size, "threads": args.threads, "eval_interval": args.eval_interval or "epoch",
        "seed": args.seed, "seconds": round(t_end - t_train, 2),
        "seconds_incl_load": round(t_end - t_start, 2), "eval_seconds": round(eval_seconds, 2),
        "evals": evals, "peak_rss_mb": round(peak_rss_mb(), 1),
    }), flush=True)
    return 0 if reached else 3


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch CPU training throughput (or time to accuracy) of a preset.")
    ap.add_argument("--model", required=True, choices=sorted(pt.PRESETS))
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="run each timed block for at least this long, in whole multiples of --steps")
    ap.add_argument("--flush-denormal", action="store_true",
                    help="flush denormal floats to zero, as ptrain does by default")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default=pt.DEFAULT_DATA_DIR)
    ap.add_argument("--target-accuracy", type=float)
    ap.add_argument("--eval-interval", type=int, default=100)
    ap.add_argument("--max-epochs", type=int, default=5)
    args = ap.parse_args(argv)
    p = pt.PRESETS[args.model]
    if args.batch_size is None:
        args.batch_size = p["batch"]
    if args.eval_interval < 0:
        ap.error("--eval-interval must be at least 0")
    for name in ("batch_size", "threads", "steps", "repeat", "max_epochs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        ap.error("--warmup must be at least 0")
    set_threads(args.threads)
    if args.flush_denormal:
        torch.set_flush_denormal(True)
    if args.target_accuracy is not None:
        return time_to_accuracy(args, p)
    throughput(args, p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
