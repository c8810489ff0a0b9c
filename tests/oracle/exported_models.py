"""Exported models for the aoti and torchscript plugins' tests, made with
python/runner_export.py (the exporter users run), plus the files the tests
need beside them:

  OUT/mlp.*            a small MLP classifier, samples [3, 4] -> 5 classes,
                       batch 4: .pt2 (static batch), .ts, .safetensors,
                       .reference.safetensors, .json
  OUT/mlp_dynamic.*    the same weights with a dynamic batch (AOTInductor only)
  OUT/lm.*             a tiny token model, ids [2, 6] below 11 -> [2, 6, 11]
                       logits (TorchScript only)
  OUT/mlp_cuda.pt2     mlp.pt2 whose metadata says it was compiled for CUDA
  OUT/mlp_torch1.pt2   mlp.pt2 whose metadata says torch 1.13.0 made it
  OUT/mlp.wrong.safetensors  mlp's reference with one output changed by 0.5
  OUT/not_a_module.ts  a tensor saved with torch.save (not a TorchScript module)
  OUT/train/           inputs.npy (float32 [8, 3, 4]) and labels.npy (int64
                       [8]) for the npy loader, and after_sgd.safetensors:
                       mlp's state after 2 SGD steps (lr 0.1) over those
                       8 samples in order, batch 4, mean cross-entropy
  OUT/breaks.txt       what the exporter printed (and its exit code) for a
                       model with control flow that depends on its input's values

  OUT/stamp            written last: a hash of this script, the exporter and
                       torch's version; when it matches, nothing is redone

Usage: exported_models.py OUT
"""
import contextlib
import io
import json
import os
import sys
import zipfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import runner_export  # noqa: E402


def mlp():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))
    return model, torch.randn(4, 3, 4)


def lm():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Embedding(11, 8), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 11))
    return model, torch.randint(0, 11, (2, 6)), {"input_high": 11}


def breaks():
    class DataDependent(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # control flow on a value: torch.export cannot capture it
                return x * 2
            return x - 1

    return DataDependent(), torch.randn(2, 3)


def export(out, function, *flags):
    code = runner_export.main(["--python", f"{__file__}:{function}", "--out", out, *flags])
    if code != 0:
        sys.exit(f"exporting {function} failed with {code}")


def rewrite_metadata(source, target, changes):
    """A copy of a package with keys of its AOTInductor metadata changed."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                meta.update(changes)
                data = json.dumps(meta).encode()
            zout.writestr(item, data)


def stamp_of():
    """What the files depend on: this script, the exporter and torch's version."""
    import hashlib
    digest = hashlib.sha256(torch.__version__.encode())
    for path in (__file__, runner_export.__file__):
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def main():
    out = sys.argv[1]
    stamp = os.path.join(out, "stamp")
    if os.path.exists(stamp) and open(stamp).read() == stamp_of():
        print("up to date:", out)
        return
    if os.path.exists(stamp):
        os.remove(stamp)
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    export(os.path.join(out, "mlp"), "mlp")
    export(os.path.join(out, "mlp_dynamic"), "mlp", "--dynamic-batch", "--formats", "aoti")
    export(os.path.join(out, "lm"), "lm", "--formats", "torchscript")
    rewrite_metadata(os.path.join(out, "mlp.pt2"), os.path.join(out, "mlp_cuda.pt2"),
                     {"AOTI_DEVICE_KEY": "cuda", "runner.device": "cuda"})
    rewrite_metadata(os.path.join(out, "mlp.pt2"), os.path.join(out, "mlp_torch1.pt2"),
                     {"runner.torch_version": "1.13.0"})

    reference = load_file(os.path.join(out, "mlp.reference.safetensors"))
    reference["output"][1, 2] += 0.5
    save_file(reference, os.path.join(out, "mlp.wrong.safetensors"))
    torch.save(torch.ones(3), os.path.join(out, "not_a_module.ts"))

    # Two SGD steps of the same MLP over 8 samples in order, batch 4.
    train = os.path.join(out, "train")
    os.makedirs(train, exist_ok=True)
    generator = torch.Generator().manual_seed(3)
    inputs = torch.randn(8, 3, 4, generator=generator)
    labels = torch.randint(0, 5, (8,), generator=generator)
    np.save(os.path.join(train, "inputs.npy"), inputs.numpy())
    np.save(os.path.join(train, "labels.npy"), labels.numpy())
    model, _ = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        batch = slice(4 * step, 4 * step + 4)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(inputs[batch]), labels[batch]).backward()
        optimizer.step()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(train, "after_sgd.safetensors"))

    # A model torch.export refuses: the exporter's message and exit code.
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = runner_export.main(["--python", f"{__file__}:breaks", "--formats", "aoti",
                                   "--out", os.path.join(out, "breaks")])
    with open(os.path.join(out, "breaks.txt"), "w") as f:
        f.write(f"{code}\n{stderr.getvalue()}")
    with open(stamp + ".tmp", "w") as f:
        f.write(stamp_of())
    os.replace(stamp + ".tmp", stamp)
    print("wrote", out)


if __name__ == "__main__":
    main()
