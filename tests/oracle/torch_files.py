"""Files written by torch.save as users write them, for runner's reader of torch.save files.

  good DIR     writes NAME.pt files into DIR, each with NAME.safetensors beside it holding
               the same tensors (contiguous copies: the reference runner compares to)
  bad DIR      writes NAME.pt files that are not state dicts, or damaged
  resnet DIR   writes resnet18.pt, torchvision's resnet18 state dict, and resnet18.safetensors

The good files: small (Linear + BatchNorm1d, its buffers changed from their
initial values; the reference also holds an input and the module's eval-mode
output on it), half (the same module in float16), tied (an embedding whose
weight is also the output layer's: two names, one storage), params
(state_dict(keep_vars=True): Parameters), dtypes (a plain dict of float32,
float16, bfloat16, int64, bool, a 0-d and an empty tensor) and views (a plain
dict of a tensor and views of its storage: transposed, offset, strided).

The bad ones: checkpoint ({"model": state dict, "optimizer": ..., "epoch"}),
list, entry (a dict with an int value), intkey, namespace (a Python object),
protocol4, legacy (the pre-1.6 format), nodatapkl and nostorage (small.pt
rebuilt without data.pkl, without the record data/0).
"""
import argparse
import collections
import os
import sys
import zipfile

import torch
from safetensors.torch import save_file


def small_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    with torch.no_grad():
        model[1].running_mean.normal_()
        model[1].running_var.uniform_(0.5, 1.5)
        model[1].weight.uniform_(0.5, 1.5)
        model[1].num_batches_tracked.fill_(3)
    return model.eval()


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(5, 3)
        self.head = torch.nn.Linear(3, 5, bias=False)
        self.head.weight = self.embed.weight


def reference(state, path, extra=None):
    """Contiguous copies (safetensors holds no shared or strided tensors)."""
    tensors = {k: v.detach().clone().contiguous() for k, v in state.items()}
    tensors.update(extra or {})
    save_file(tensors, path)


def copy_zip(src, dst, drop):
    """src rebuilt without the records whose names end with `drop`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if not info.filename.endswith(drop):
                zout.writestr(info, zin.read(info.filename))


def saver(out):
    def save(name, obj, **kwargs):
        torch.save(obj, os.path.join(out, name + ".pt"), **kwargs)

    return save


def good(out):
    save = saver(out)

    def ref(name, state, extra=None):
        reference(state, os.path.join(out, name + ".safetensors"), extra)

    model = small_model()
    x = torch.randn(5, 3)
    save("small", model.state_dict())
    ref("small", model.state_dict(), {"input": x, "expected_output": model(x).detach()})
    assert isinstance(model.state_dict(), collections.OrderedDict)

    half = small_model().half()
    save("half", half.state_dict())
    ref("half", half.state_dict())

    torch.manual_seed(1)
    tied = Tied()
    state = tied.state_dict()
    assert state["embed.weight"].data_ptr() == state["head.weight"].data_ptr()
    save("tied", state)
    ref("tied", state)

    torch.manual_seed(2)
    linear = torch.nn.Linear(2, 3)
    save("params", linear.state_dict(keep_vars=True))
    ref("params", linear.state_dict())

    torch.manual_seed(3)
    dtypes = {
        "f32": torch.randn(3, 2),
        "f16": torch.randn(4).half(),
        "bf16": torch.randn(2, 3).bfloat16(),
        "i64": torch.tensor([7, -8, 1 << 40]),
        "bool": torch.tensor([[True, False], [False, True]]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
    }
    save("dtypes", dtypes)
    ref("dtypes", dtypes)

    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {"base": base, "t": base.t(), "block": base[1:3, 2:5], "row": base[2],
             "strided": base[:, ::2]}
    assert not views["t"].is_contiguous() and views["block"].storage_offset() == 8
    save("views", views)
    ref("views", views)
    print("written")


def bad(out):
    save = saver(out)
    model = small_model()
    x = torch.randn(5, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model.train()
    model(x).sum().backward()
    optimizer.step()
    save("checkpoint", {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": 3, "seen": 1 << 40, "delta": -(1 << 33)})
    save("list", [torch.randn(2), torch.randn(3)])
    save("entry", {"w": torch.randn(2), "step": 3})
    save("intkey", {0: torch.randn(2)})
    save("namespace", {"w": torch.randn(2), "args": argparse.Namespace(lr=0.1)})
    save("protocol4", small_model().state_dict(), pickle_protocol=4)
    save("legacy", small_model().state_dict(), _use_new_zipfile_serialization=False)
    save("small", small_model().state_dict())
    copy_zip(os.path.join(out, "small.pt"), os.path.join(out, "nodatapkl.pt"), "/data.pkl")
    copy_zip(os.path.join(out, "small.pt"), os.path.join(out, "nostorage.pt"), "/data/0")
    print("written")


def resnet(out):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    torch.save(model.state_dict(), os.path.join(out, "resnet18.pt"))
    reference(model.state_dict(), os.path.join(out, "resnet18.safetensors"))
    print("written")


if __name__ == "__main__":
    {"good": good, "bad": bad, "resnet": resnet}[sys.argv[1]](sys.argv[2])
