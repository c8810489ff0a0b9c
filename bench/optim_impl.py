"""torch.optim's own paths on the parameter sets of bench/optim_impl.cpp.

The same shapes, measurement and table as runner-optim-impl, for PyTorch's
AdamW (or Adam, Adagrad) with foreach=False ("loop", its CPU default),
foreach=True and fused=True: how far runner's impls are from Python's, and
whether the ratios between impls are the same on both sides.

    ~/.cache/runner/venv-torch-2.14.1/bin/python bench/optim_impl.py [--optimizer adamw]
        [--sets resnet18,transformer,tiny] [--rounds 5] [--warmup 3] [--min-time 1.0]
        [--threads 1]
"""
import argparse
import statistics
import time

import torch


def resnet18():
    shapes = [(64, 3, 7, 7), (64,), (64,)]
    c_in = 64
    for out in (64, 128, 256, 512):
        for block in range(2):
            src = c_in if block == 0 else out
            shapes += [(out, src, 3, 3), (out,), (out,), (out, out, 3, 3), (out,), (out,)]
            if block == 0 and src != out:
                shapes += [(out, src, 1, 1), (out,), (out,)]
        c_in = out
    return shapes + [(1000, 512), (1000,)]


def gpt2(width, depth, vocab, positions):
    shapes = [(vocab, width), (positions, width)]
    for _ in range(depth):
        shapes += [(width,), (width,), (3 * width, width), (3 * width,), (width, width),
                   (width,), (width,), (width,), (4 * width, width), (4 * width,),
                   (width, 4 * width), (width,)]
    return shapes + [(width,), (width,)]


SETS = {
    "resnet18": resnet18(),
    "transformer": gpt2(256, 12, 8192, 1024),
    "tiny": gpt2(64, 2, 256, 64),
}
PATHS = {"loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "adagrad": torch.optim.Adagrad}


def measure(args, impl, params):
    optimizer = OPTIMIZERS[args.optimizer](params, **PATHS[impl])
    for _ in range(args.warmup):
        optimizer.step()
    steps, start = 0, time.perf_counter()
    while True:
        optimizer.step()
        steps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= args.min_time:
            return steps / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--optimizer", default="adamw", choices=sorted(OPTIMIZERS))
    parser.add_argument("--sets", default="resnet18,transformer,tiny")
    parser.add_argument("--impls", default="loop,foreach,fused")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    impls = args.impls.split(",")
    print(f"torch.optim {args.optimizer} (torch {torch.__version__}), {args.threads} thread(s), "
          f"{args.rounds} rounds, >= {args.min_time:.2f} s per measurement")
    header = f"{'set':<12} {'tensors':>7} {'values':>10}"
    header += "".join(f" {impl:>10}/s" for impl in impls)
    header += "".join(f"   {impl + '/' + impls[0] + ' [min, max]':<26}" for impl in impls[1:])
    print(header)
    for name in args.sets.split(","):
        torch.manual_seed(0)
        params = []
        for shape in SETS[name]:
            p = torch.nn.Parameter(torch.randn(shape) * 0.02)
            p.grad = torch.randn(shape) * 1e-3
            params.append(p)
        rates = {impl: [] for impl in impls}
        ratios = {impl: [] for impl in impls[1:]}
        for round_ in range(args.rounds):
            rate = {}
            for k in range(len(impls)):
                impl = impls[(k + round_) % len(impls)]
                rate[impl] = measure(args, impl, params)
                rates[impl].append(rate[impl])
            for impl in impls[1:]:
                ratios[impl].append(rate[impl] / rate[impls[0]])
        line = f"{name:<12} {len(params):>7} {sum(p.numel() for p in params):>10}"
        line += "".join(f" {statistics.median(rates[impl]):>12.1f}" for impl in impls)
        for impl in impls[1:]:
            r = ratios[impl]
            line += f"   {statistics.median(r):5.2f} [{min(r):5.2f}, {max(r):5.2f}]          "
        print(line)


if __name__ == "__main__":
    main()
