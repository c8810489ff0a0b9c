"""runner's data pipeline against PyTorch's DataLoader on the same files with
the same augmentations (random crop 32 with padding 4, horizontal flip,
scaling to [0, 1], normalisation), batch 128, shuffled, pin_memory off (CPU),
at num_workers 0, 1 and 2.

--dataset cifar (default): the CIFAR-10 binary files (no decoding: the
pipeline's own cost). --dataset image_folder: JPEG and PNG files (160x160 by
default, 3/4 JPEG), each decoded, resized to 40 and center-cropped to 40x40
before the augmentations (decoding dominates). runner is measured twice
there: "runner" resizes on decode (image_folder's short_side and crop: a
JPEG is decoded at a reduced DCT scale) and "runner-full" decodes at full
size and resizes in the pipeline (resize, center_crop), the same work as
torchvision's Resize.

Each round runs every side and worker count in a fresh process, order
alternated per round; prints samples/s per side as median [min, max] over
rounds and the ratio runner / DataLoader per round (median [min, max]).
Two PyTorch pipelines are measured: "pil", torchvision's own CIFAR10 path
(PIL image -> RandomCrop, RandomHorizontalFlip, ToTensor, Normalize), what
most training scripts run; and "tensor", transforms.v2 on uint8 tensors.

    ~/.cache/runner/venv-torch-2.14.1/bin/python bench/loader_compare.py \
        [--runner build/bin/runner-loader] [--data DIR] [--rounds 3] [--batches 100]

Without --data it writes the data set with scripts/make_datasets.py into a
temporary folder first (cifar: 50000 training images; image_folder: 2000).
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


def torch_side(data, workers, batches, flavour, dataset):
    """Samples/s of a DataLoader over the data set's files (this process)."""
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    if dataset == "image_folder":
        from torchvision import datasets, io
        from torchvision import transforms as T
        from torchvision.transforms import v2

        root = os.path.join(data, "images", "train")
        if flavour == "pil":  # torchvision's ImageFolder as training scripts use it
            transform = T.Compose([T.Resize(40), T.CenterCrop(40), T.RandomCrop(32, padding=4),
                                   T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
            folder = datasets.ImageFolder(root, transform=transform)
        else:  # decoded by torchvision.io (libjpeg-turbo, libpng) into uint8 tensors
            transform = v2.Compose([v2.Resize(40, antialias=True), v2.CenterCrop(40),
                                    v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip(),
                                    v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
            folder = datasets.ImageFolder(
                root, loader=lambda path: io.decode_image(path, mode=io.ImageReadMode.RGB),
                transform=transform)
        dataset_object = folder
    else:
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

        dataset_object = Cifar()

    loader = DataLoader(dataset_object, batch_size=128, shuffle=True, num_workers=workers,
                        pin_memory=False, drop_last=True, persistent_workers=workers > 0)
    it = iter(loader)

    def draw():
        nonlocal it
        try:
            return next(it)
        except StopIteration:  # a small data set: the next epoch
            it = iter(loader)
            return next(it)

    for _ in range(5):
        draw()
    start = time.perf_counter()
    samples = 0
    for _ in range(batches):
        x, _ = draw()
        samples += x.shape[0]
    return samples / (time.perf_counter() - start)


def runner_side(program, data, workers, batches, dataset, side):
    if dataset == "image_folder":
        command = [program, "--plugin", "image_folder",
                   "--option", "path=" + os.path.join(data, "images", "train")]
        if side == "runner":
            command += ["--option", "short_side=40", "--option", "crop=40,40"]
        else:
            command += ["--resize", "40"]
    else:
        command = [program, "--plugin", "cifar",
                   "--option", "path=" + os.path.join(data, "cifar-10-batches-bin")]
    command += ["--workers", str(workers), "--batches", str(batches), "--augment", "cifar"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(out.split("samples_per_s=")[1].split()[0])


def spread(values):
    return f"{statistics.median(values):9.0f} [{min(values):.0f}, {max(values):.0f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner-loader"))
    parser.add_argument("--dataset", choices=["cifar", "image_folder"], default="cifar")
    parser.add_argument("--data", help="folder holding cifar-10-batches-bin/ or images/train/ "
                                       "(default: generated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--torch-side", nargs=2, metavar=("WORKERS", "FLAVOUR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_side:
        print(torch_side(args.data, int(args.torch_side[0]), args.batches, args.torch_side[1],
                         args.dataset))
        return
    temp = None
    if not args.data:
        temp = tempfile.TemporaryDirectory()
        args.data = temp.name
        formats, train = ("cifar10", "50000") if args.dataset == "cifar" else ("image_folder", "2000")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_datasets.py"), args.data,
                        "--formats", formats, "--train", train, "--eval", "100"],
                       check=True, capture_output=True)
    runners = ["runner"] if args.dataset == "cifar" else ["runner", "runner-full"]
    sides = runners + ["pil", "tensor"]
    results = {(s, w): [] for s in sides for w in args.workers.split(",")}
    for r in range(args.rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for w in args.workers.split(","):
            for side in order:
                if side in runners:
                    value = runner_side(args.runner, args.data, w, args.batches, args.dataset, side)
                else:
                    value = float(subprocess.run(
                        [sys.executable, __file__, "--data", args.data, "--batches", str(args.batches),
                         "--dataset", args.dataset, "--torch-side", w, side],
                        check=True, capture_output=True, text=True).stdout)
                results[(side, w)].append(value)
                print(f"round {r} workers {w} {side:6s} {value:9.0f} samples/s", file=sys.stderr)
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"{'side':>12}  {'workers':>7}  {'samples/s median [min, max]':>30}  "
          f"{'/ pil':>20}  {'/ tensor':>20}")
    for w in args.workers.split(","):
        for side in sides:
            values = results[(side, w)]
            ratios = [[a / b for a, b in zip(values, results[(s, w)])] for s in ("pil", "tensor")]
            print(f"{side:>12}  {w:>7}  {spread(values):>30}  "
                  + "  ".join(f"{statistics.median(r):7.2f} [{min(r):.2f}, {max(r):.2f}]"
                              for r in ratios))


if __name__ == "__main__":
    main()
