"""JPEG decode rate on one core: runner's image_folder loader against Pillow
and torchvision.io on the same files.

Takes the JPEGs of an image folder (scripts/make_datasets.py's images/train,
160x160 by default), links them into a JPEG-only tree, and measures images
decoded per second on one thread, each side in a fresh process, order
alternated per round:

  runner        image_folder at full size: runner-loader --raw true, the
                loader's get_batch alone on this thread (batch 64, uint8 [3, H, W],
                decoded and transposed into the batch), no pipeline
  runner-40     image_folder with short_side = 40 (decoded at a reduced DCT scale)
  pil           Image.open(path).convert("RGB") and np.asarray: a full decode
  pil-draft-40  the same after Image.draft("RGB", (40, 40)): Pillow's own
                reduced-scale decode, the nearest thing to runner-40
  tv-io         torchvision.io.decode_jpeg(read_file(path)): libjpeg-turbo to a tensor

    ~/.cache/runner/venv-torch-2.14.1/bin/python bench/jpeg_decode.py --data DIR \
        [--runner build/bin/runner-loader] [--rounds 3] [--images 1000]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_SIDES = ["pil", "pil-draft-40", "tv-io"]


def python_side(tree, side, images):
    """Images decoded per second (this process, one thread)."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    files = (files * (images // len(files) + 1))[:images]
    if side == "tv-io":
        from torchvision import io

        def decode(path):
            return io.decode_jpeg(io.read_file(path))
    else:
        from PIL import Image

        def decode(path):
            with Image.open(path) as image:
                if side == "pil-draft-40":
                    image.draft("RGB", (40, 40))
                return np.asarray(image.convert("RGB"))

    for path in files[:20]:
        decode(path)
    start = time.perf_counter()
    for path in files:
        decode(path)
    return len(files) / (time.perf_counter() - start)


def runner_side(program, tree, side, images):
    command = [program, "--plugin", "image_folder", "--option", "path=" + tree, "--raw", "true",
               "--batch", "64", "--batches", str(max(1, images // 64))]
    if side == "runner-40":
        command += ["--option", "short_side=40"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(out.split("samples_per_s=")[1].split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder holding images/train/")
    parser.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner-loader"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--python-side", nargs=2, metavar=("TREE", "SIDE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.python_side:
        print(python_side(args.python_side[0], args.python_side[1], args.images))
        return
    with tempfile.TemporaryDirectory() as tree:
        source = os.path.join(args.data, "images", "train")
        count = 0
        for cls in sorted(os.listdir(source)):
            os.makedirs(os.path.join(tree, cls))
            for name in sorted(os.listdir(os.path.join(source, cls))):
                if name.endswith(".jpg"):
                    os.symlink(os.path.join(source, cls, name), os.path.join(tree, cls, name))
                    count += 1
        print(f"{count} JPEGs from {source}; load average {os.getloadavg()[0]:.2f}")
        sides = ["runner", "runner-40"] + PYTHON_SIDES
        results = {s: [] for s in sides}
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                if side.startswith("runner"):
                    value = runner_side(args.runner, tree, side, args.images)
                else:
                    value = float(subprocess.run(
                        [sys.executable, __file__, "--data", args.data, "--images", str(args.images),
                         "--python-side", tree, side], check=True, capture_output=True,
                        text=True).stdout)
                results[side].append(value)
                print(f"round {r} {side:13s} {value:8.0f} images/s", file=sys.stderr)
        print(f"{'side':>13}  {'images/s median [min, max]':>28}  {'/ pil':>20}")
        for side in sides:
            v = results[side]
            ratio = [a / b for a, b in zip(v, results["pil"])]
            print(f"{side:>13}  {statistics.median(v):12.0f} [{min(v):.0f}, {max(v):.0f}]"
                  f"  {statistics.median(ratio):9.2f} [{min(ratio):.2f}, {max(ratio):.2f}]")


if __name__ == "__main__":
    main()
