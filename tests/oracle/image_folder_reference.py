"""Reference for the image_folder loader, from Pillow and torchvision.

Writes a small class-per-folder tree under --out and, with torch.save (a
plain dict), what PIL decodes from each file and what torchvision's
Resize(short_side) + CenterCrop make of that decode:

  train/ant/0.jpg  RGB 53x37 (width x height), quality 95
  train/ant/1.png  RGB 53x37
  train/bee/2.png  grayscale (mode L) 53x37: RGB decodes replicate it
  train/bee/3.jpg  RGB 53x37, 4:2:0 chroma subsampling (PIL's default)
  big/ant/0.jpg    RGB 160x120, big/bee/1.jpg RGB 120x150, smoother: decoded
                   at a reduced DCT scale when short_side = 40
  eval/ant/9.png, eval/bee/8.jpg

Keys: "<folder>/<file>" -> uint8 [3, H, W] (PIL convert("RGB")),
"<folder>/<file>:L" -> uint8 [1, H, W] (PIL convert("L")),
"<folder>/<file>:40" -> Resize(40, antialias) then CenterCrop(40) of the RGB.
"""
import argparse
import os

import numpy as np
import torch
from PIL import Image
from torchvision.transforms.v2 import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()

rng = np.random.default_rng(5)


def picture(width, height, channels, scale):
    """Gradients plus mild noise: what photographs look like to a codec.
    `scale` (pixels per radian) sets how smooth."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    planes = []
    for c in range(channels):
        base = 128 + 80 * np.sin((x * (c + 1) + y * (3 - c)) / scale)
        planes.append(np.clip(base + rng.normal(0, 6, (height, width)), 0, 255))
    return np.stack(planes, -1).astype(np.uint8)


def save(rel, width, height, mode="RGB", **kwargs):
    path = os.path.join(args.out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # The big images are downscaled 3-4x: content of a photograph at that
    # scale (waves a few dozen pixels long), not detail near the new Nyquist
    # limit, where any resampler differs from any other.
    pixels = picture(width, height, 3 if mode == "RGB" else 1, 9.0 if width < 100 else 30.0)
    image = Image.fromarray(pixels if mode == "RGB" else pixels[:, :, 0], mode)
    image.save(path, **kwargs)
    return rel


files = [
    save("train/ant/0.jpg", 53, 37, quality=95),
    save("train/ant/1.png", 53, 37),
    save("train/bee/2.png", 53, 37, mode="L"),
    save("train/bee/3.jpg", 53, 37, quality=90),
    save("big/ant/0.jpg", 160, 120, quality=90),
    save("big/bee/1.jpg", 120, 150, quality=90),
    save("eval/ant/9.png", 53, 37),
    save("eval/bee/8.jpg", 53, 37, quality=90),
]

out = {}
for rel in files:
    with Image.open(os.path.join(args.out, rel)) as image:
        rgb = torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1).contiguous()
        gray = torch.from_numpy(np.asarray(image.convert("L")).copy()).unsqueeze(0).contiguous()
    out[rel] = rgb
    out[rel + ":L"] = gray
    out[rel + ":40"] = F.center_crop(F.resize(rgb, [40], antialias=True), [40, 40]).contiguous()
torch.save(out, os.path.join(args.out, "reference.pt"))
