"""Reference for the data pipeline's deterministic augmentations, from torchvision.

Writes (torch.save, a plain dict) a seeded uint8 image batch [4, 3, 13, 17]
and what torchvision.transforms.v2 gives for it, per image: Resize([n]) (the
shorter side), Resize([h, w]), CenterCrop([h, w]), ToDtype(float32, scale)
as ToTensor divides (x / 255), and Normalize(mean, std) after it. The test
applies runner's Augmenter to the same batch and compares.
"""
import argparse

import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()

g = torch.Generator().manual_seed(3)
images = torch.randint(0, 256, (4, 3, 13, 17), generator=g, dtype=torch.uint8)
mean, std = [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]


def each(fn):
    return torch.stack([fn(img) for img in images])


out = {
    "images": images,
    "resize_short": each(lambda i: F.resize(i, [9], antialias=True)),
    "resize_exact": each(lambda i: F.resize(i, [20, 8], antialias=True)),
    "center_crop": each(lambda i: F.center_crop(i, [6, 9])),
    "to_float": each(lambda i: i.to(torch.float32).div(255)),
    "normalized": each(lambda i: F.normalize(i.to(torch.float32).div(255), mean, std)),
    "resize_crop_normalize": each(
        v2.Compose([v2.Resize([9], antialias=True), v2.CenterCrop([8, 8])])
    ).to(torch.float32).div(255).sub(torch.tensor(mean).view(-1, 1, 1)).div(
        torch.tensor(std).view(-1, 1, 1)
    ),
}
torch.save(out, args.out)
