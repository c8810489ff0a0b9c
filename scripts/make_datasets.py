#!/usr/bin/env python3
"""Writes small data sets in every format runner's loaders read, for the
examples, the benchmarks and trying things out. Nothing is downloaded: the
samples are generated (seeded), with labels a model can learn (each class
has its own pattern, under noise).

    scripts/make_datasets.py OUT [--formats cifar10,mnist,...] [--train N] [--eval N]

Formats and what they write under OUT:
  cifar10       cifar-10-batches-bin/data_batch_{1..5}.bin, test_batch.bin
  cifar100      cifar-100-binary/train.bin, test.bin
  mnist         mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte
  image_folder  images/{train,val}/<class>/<n>.{jpg,png} (3/4 JPEG, 1/4 PNG;
                --image-size pixels square, 160 by default)
  npy           npy/{train,eval}_{inputs,labels}.npy (float32 [N, 3, 32, 32], int64)
  tokens        tokens/tokens.bin (uint16 ids, a Markov chain over 256 tokens)

Run it with the interpreter of the set-up environment (numpy; Pillow for
image_folder), e.g. ~/.cache/runner/venv-torch-2.14.1/bin/python. With
another Python it checks those imports first and says which Python to use,
before it writes anything.
"""
import argparse
import glob
import importlib
import os
import struct
import sys

np = None  # numpy, imported by main() once it is known to be there

FORMATS = ["cifar10", "cifar100", "mnist", "image_folder", "npy", "tokens"]


def missing_modules(formats):
    """The modules (as pip names them) the formats need that this Python
    cannot import."""
    needed = [("numpy", "numpy")]
    if "image_folder" in formats:
        needed.append(("PIL.Image", "Pillow"))
    missing = []
    for module, package in needed:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    return missing


def setup_pythons():
    """The set-up's interpreters on this machine (scripts/dev makes them)."""
    pattern = os.path.join(os.path.expanduser("~"), ".cache", "runner", "venv-torch-*", "bin", "python")
    return sorted(glob.glob(pattern))


def images(rng, n, classes, channels, size):
    """n uint8 images [n, channels, size, size] and labels: class c is a
    stripe pattern of its own frequency and orientation, plus noise."""
    labels = rng.integers(0, classes, n)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32)
    out = np.empty((n, channels, size, size), np.uint8)
    for i, c in enumerate(labels):
        angle = np.pi * (c % 8) / 8
        freq = 1 + c // 8
        wave = np.sin(2 * np.pi * freq * (x * np.cos(angle) + y * np.sin(angle)) / size)
        for ch in range(channels):
            tint = 0.5 + 0.5 * np.sin(c + 2.1 * ch)
            img = 128 + 90 * tint * wave + rng.normal(0, 25, (size, size))
            out[i, ch] = np.clip(img, 0, 255).astype(np.uint8)
    return out, labels


def write_cifar(out, rng, train, evaluation, hundred):
    folder = os.path.join(out, "cifar-100-binary" if hundred else "cifar-10-batches-bin")
    os.makedirs(folder, exist_ok=True)
    classes = 100 if hundred else 10

    def records(n):
        x, fine = images(rng, n, classes, 3, 32)
        head = [(fine // 5).astype(np.uint8), fine.astype(np.uint8)] if hundred else [fine.astype(np.uint8)]
        # (3 * 32 * 32, not -1: a batch of --train below 5 may hold no record)
        return np.concatenate([np.stack(head, 1), x.reshape(n, 3 * 32 * 32)], 1).tobytes()

    if hundred:
        files = {"train.bin": train, "test.bin": evaluation}
    else:
        per = -(-train // 5)
        files = {f"data_batch_{b}.bin": min(per, max(0, train - (b - 1) * per)) for b in range(1, 6)}
        files["test_batch.bin"] = evaluation
    for name, n in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(records(n))
    return folder


def write_idx(path, array):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, array.ndim]))
        f.write(struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(np.uint8).tobytes())


def write_mnist(out, rng, train, evaluation):
    folder = os.path.join(out, "mnist")
    os.makedirs(folder, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", evaluation)):
        x, y = images(rng, n, 10, 1, 28)
        write_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), x[:, 0])
        write_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), y)
    return folder


def write_image_folder(out, rng, train, evaluation, size):
    from PIL import Image

    folder = os.path.join(out, "images")
    for split, n in (("train", train), ("val", evaluation)):
        x, y = images(rng, n, 10, 3, size)
        for i, (img, c) in enumerate(zip(x, y)):
            d = os.path.join(folder, split, f"class_{c:02d}")
            os.makedirs(d, exist_ok=True)
            picture = Image.fromarray(img.transpose(1, 2, 0))
            if i % 4 == 3:
                picture.save(os.path.join(d, f"{i:06d}.png"))
            else:
                picture.save(os.path.join(d, f"{i:06d}.jpg"), quality=90)
    return folder


def write_npy(out, rng, train, evaluation):
    folder = os.path.join(out, "npy")
    os.makedirs(folder, exist_ok=True)
    for split, n in (("train", train), ("eval", evaluation)):
        x, y = images(rng, n, 10, 3, 32)
        np.save(os.path.join(folder, f"{split}_inputs.npy"), x.astype(np.float32) / 255)
        np.save(os.path.join(folder, f"{split}_labels.npy"), y.astype(np.int64))
    return folder


def write_tokens(out, rng, train, evaluation):
    folder = os.path.join(out, "tokens")
    os.makedirs(folder, exist_ok=True)
    vocab, length = 256, 129 * (train + evaluation)
    successors = rng.integers(0, vocab, (vocab, 4))
    picks = rng.choice(5, size=length, p=[0.45, 0.25, 0.15, 0.10, 0.05])
    fallback = rng.integers(0, vocab, length)
    ids = np.empty(length, np.uint16)
    ids[0] = fallback[0]
    for i in range(1, length):
        ids[i] = fallback[i] if picks[i] == 4 else successors[ids[i - 1], picks[i]]
    path = os.path.join(folder, "tokens.bin")
    ids.tofile(path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write into (created)")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help="comma-separated, of: " + ", ".join(FORMATS))
    parser.add_argument("--train", type=int, default=2000, help="training samples per format")
    parser.add_argument("--eval", type=int, default=500, help="held-out samples per format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--image-size", type=int, default=160,
                        help="side of the image_folder images (JPEG decoding cost grows with it)")
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        sys.exit(f"make_datasets.py: unknown format {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    if args.train < 1 or args.eval < 1 or args.image_size < 8:
        sys.exit("make_datasets.py: --train and --eval must be >= 1, --image-size >= 8")
    missing = missing_modules(formats)
    if missing:
        found = setup_pythons()
        use = found[-1] if found else "~/.cache/runner/venv-torch-VERSION/bin/python (scripts/dev makes it)"
        sys.exit(f"make_datasets.py: this Python ({sys.executable}) cannot import "
                 f"{' and '.join(missing)}; nothing was written. Run it with the set-up's "
                 f"Python: {use} {' '.join(sys.argv)}")
    global np
    import numpy as np
    writers = {
        "cifar10": lambda rng: write_cifar(args.out, rng, args.train, args.eval, False),
        "cifar100": lambda rng: write_cifar(args.out, rng, args.train, args.eval, True),
        "mnist": lambda rng: write_mnist(args.out, rng, args.train, args.eval),
        "image_folder": lambda rng: write_image_folder(args.out, rng, args.train, args.eval,
                                                       args.image_size),
        "npy": lambda rng: write_npy(args.out, rng, args.train, args.eval),
        "tokens": lambda rng: write_tokens(args.out, rng, args.train, args.eval),
    }
    for name in formats:
        rng = np.random.default_rng([args.seed, FORMATS.index(name)])
        print(f"{name}: {writers[name](rng)}")


if __name__ == "__main__":
    main()
