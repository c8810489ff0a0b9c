"""Safetensors files written and read by the safetensors package, for runner's reader and writer.

  write OUT   writes tensors of several dtypes and metadata to OUT, as a user's script would
  check IN    reads IN (written by runner) and checks its tensors and metadata
"""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def expected():
    return {
        "layer.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4,
        "layer.bias": torch.tensor([-1.5, 2.25], dtype=torch.bfloat16),
        "steps": torch.tensor([7, -8, 1 << 40], dtype=torch.int64),
        "mask": torch.tensor([[True, False], [False, True]]),
        "empty": torch.zeros(0, 4, dtype=torch.float16),
    }


if sys.argv[1] == "write":
    save_file(expected(), sys.argv[2], metadata={"format": "pt", "by": "python"})
    print("written")
else:
    with safe_open(sys.argv[2], framework="pt") as f:
        got = {k: f.get_tensor(k) for k in f.keys()}
        meta = f.metadata()
    want = expected()
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for k in want:
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), (k, got[k], want[k])
    assert meta == {"format": "pt", "by": "runner"}, meta
    print("ok")
