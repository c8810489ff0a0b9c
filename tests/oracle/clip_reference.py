"""Reference for the gradient-clipping parity tests: torch.nn.utils.clip_grad_norm_.

Saves, with torch.save, a dict of cases; each holds the gradients given to
clip_grad_norm_ (an empty tensor where the parameter has no gradient, with
has_grad false), max_norm, the norm it returned and the gradients after it.
Cases: under and over max_norm, an inf and a nan gradient, mixed float32 and
bfloat16 gradients with a parameter without gradient, and no gradient at all.
"""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
shapes = [(64, 33), (17,), (5, 5, 5), (3, 2)]


def grads(scale=1.0, dtypes=None):
    dtypes = dtypes or [torch.float32] * len(shapes)
    return [(torch.randn(s) * scale).to(d) for s, d in zip(shapes, dtypes)]


def case(given, max_norm):
    params = []
    for g in given:
        if g is None:
            params.append(torch.nn.Parameter(torch.zeros(4)))
        else:
            p = torch.nn.Parameter(torch.zeros(g.shape, dtype=g.dtype))
            p.grad = g.clone()
            params.append(p)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return {
        "grads": [g if g is not None else torch.zeros(0) for g in given],
        "has_grad": torch.tensor([g is not None for g in given]),
        "max_norm": torch.tensor(max_norm, dtype=torch.float64),
        "norm": norm,
        "clipped": [p.grad if p.grad is not None else torch.zeros(0) for p in params],
    }


with_inf = grads()
with_inf[2][1, 2, 3] = float("inf")
with_nan = grads()
with_nan[0][10, 5] = float("nan")
mixed = grads(dtypes=[torch.float32, torch.bfloat16, torch.float32, torch.bfloat16])
mixed[2] = None

cases = {
    "under": case(grads(0.01), 5.0),
    "over": case(grads(), 1.0),
    "inf": case(with_inf, 1.0),
    "nan": case(with_nan, 1.0),
    "mixed": case(mixed, 2.0),
    "none": case([None, None], 1.0),
}
torch.save(cases, args.out)
