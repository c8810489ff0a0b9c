"""runner's data pipeline against PyTorch's DataLoader on the same CIFAR-10
binary files with the same augmentations (random crop 32 with padding 4,
horizontal flip, scaling to [0, 1], normalisation), batch 128, shuffled,
pin_memory off (CPU), at num_workers 0, 1 and 2.

Each round runs every side and worker count in a fresh process, order
alternated per round; prints samples/s per side as median [min, max] over
rounds and the ratio runner / DataLoader per round (median [min, max]).
Two PyTorch pipelines are measured: "pil", torchvision's own CIFAR10 path
(PIL image -> RandomCrop, RandomHorizontalFlip, ToTensor, Normalize), what
most training scripts run; and "tensor", transforms.v2 on uint8 tensors.

    ~/.cache/runner/venv-torch-2.14.1/bin/python bench/loader_compare.py \
        [--runner build/bin/runner-loader] [--data DIR] [--rounds 3] [--batches 100]

Without --data it writes 50000 training images with scripts/make_datasets.py
into a temporary folder first.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def torch_side(data, workers, batches, flavour):
    """Samples/s of a DataLoader over the CIFAR-10 binary files (this process)."""
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    folder = os.path.join(data, "cifar-10-batches-bin")
    records = np.concatenate([
        np.fromfile(os.path.join(folder, f"data_batch_{b}.bin"), np.uint8).reshape(-1, 3073)
        for b in range(1, 6)
    ])
    labels = records[:, 0].astype(np.int64)
    pixels = records[:, 1:].reshape(-1, 3, 32, 32)

    if flavour == "pil":
        from PIL import Image
        from torchvision import transforms as T

        transform = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                               T.Normalize(MEAN, STD)])
        hwc = np.ascontiguousarray(pixels.transpose(0, 2, 3, 1))

        def item(i):
            return transform(Image.fromarray(hwc[i])), int(labels[i])
    else:
        from torchvision.transforms import v2

        transform = v2.Compose([v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(),
                                v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])

        def item(i):
            return transform(torch.from_numpy(pixels[i])), int(labels[i])

    class Cifar(Dataset):
        def __len__(self):
            return len(labels)

        def __getitem__(self, i):
            return item(i)

    loader = DataLoader(Cifar(), batch_size=128, shuffle=True, num_workers=workers,
                        pin_memory=False, drop_last=True, persistent_workers=workers > 0)
    it = iter(loader)
    for _ in range(5):
        next(it)
    start = time.perf_counter()
    samples = 0
    for _ in range(batches):
        x, _ = next(it)
        samples += x.shape[0]
    return samples / (time.perf_counter() - start)


def runner_side(program, data, workers, batches):
    out = subprocess.run(
        [program, "--plugin", "cifar", "--option", "path=" + os.path.join(data, "cifar-10-batches-bin"),
         "--workers", str(workers), "--batches", str(batches), "--augment", "cifar"],
        check=True, capture_output=True, text=True).stdout
    return float(out.split("samples_per_s=")[1].split()[0])


def spread(values):
    return f"{statistics.median(values):9.0f} [{min(values):.0f}, {max(values):.0f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner-loader"))
    parser.add_argument("--data", help="folder holding cifar-10-batches-bin/ (default: generated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--torch-side", nargs=2, metavar=("WORKERS", "FLAVOUR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_side:
        print(torch_side(args.data, int(args.torch_side[0]), args.batches, args.torch_side[1]))
        return
    temp = None
    if not args.data:
        temp = tempfile.TemporaryDirectory()
        args.data = temp.name
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_datasets.py"), args.data,
                        "--formats", "cifar10", "--train", "50000", "--eval", "100"],
                       check=True, capture_output=True)
    sides = ["runner", "pil", "tensor"]
    results = {(s, w): [] for s in sides for w in args.workers.split(",")}
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for w in args.workers.split(","):
            for side in order:
                if side == "runner":
                    value = runner_side(args.runner, args.data, w, args.batches)
                else:
                    value = float(subprocess.run(
                        [sys.executable, __file__, "--data", args.data, "--batches", str(args.batches),
                         "--torch-side", w, side], check=True, capture_output=True, text=True).stdout)
                results[(side, w)].append(value)
                print(f"round {r} workers {w} {side:6s} {value:9.0f} samples/s", file=sys.stderr)
    print(f"{'workers':>7}  {'runner':>22}  {'DataLoader pil':>22}  {'DataLoader tensor':>22}  "
          f"{'runner/pil':>22}  {'runner/tensor':>22}")
    for w in args.workers.split(","):
        run = results[("runner", w)]
        ratios = [[a / b for a, b in zip(run, results[(s, w)])] for s in ("pil", "tensor")]
        print(f"{w:>7}  {spread(run):>22}  {spread(results[('pil', w)]):>22}  "
              f"{spread(results[('tensor', w)]):>22}  "
              + "  ".join(f"{statistics.median(r):9.2f} [{min(r):.2f}, {max(r):.2f}]" for r in ratios))


if __name__ == "__main__":
    main()
