"""Loads a resnet18 state saved by runner ([train] save_to) into torchvision's
resnet18 with strict=True, and checks the file's metadata; exits non-zero if
anything does not fit."""
import sys

import torch
import torchvision
from safetensors import safe_open
from safetensors.torch import load_file

path = sys.argv[1]
state = load_file(path)
with safe_open(path, framework="pt") as f:
    metadata = f.metadata()
assert metadata["producer"] == "runner", metadata
assert metadata["model"] == "resnet", metadata
model = torchvision.models.resnet18(num_classes=10)
model.load_state_dict(state, strict=True)
model.eval()
with torch.no_grad():
    out = model(torch.randn(2, 3, 32, 32))
assert out.shape == (2, 10) and torch.isfinite(out).all()
print(f"loaded {len(state)} tensors strictly; steps {metadata['steps']}")
