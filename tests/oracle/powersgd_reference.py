"""PyTorch's PowerSGD DDP comm hook on given buckets, the reference of runner's `powersgd` plugin.

  powersgd_reference.py --cases CASES.json --out STEM

CASES.json is a list of cases, each
  {"options": {keyword arguments of PowerSGDState}, "buckets": [[shape, ...], ...],
   "steps": N, "seed": S}
Two processes (torch.distributed over gloo, meeting through a file) run every
case with one PowerSGDState each. At every step each bucket, in index order,
gets fresh gradients (torch.randn from a generator seeded by seed, rank, step
and bucket) and goes through torch's powerSGD_hook; the hook's future is
waited for before the next bucket. Rank r writes STEM.rank<r>.pt with
torch.save: a list with one {"inputs", "outputs"} per case, each a list over
steps of lists over buckets of flat float32 tensors (plain lists and dicts,
what LibTorch's pickle_load reads).

dist.GradBucket cannot be built from Python (its constructor is not bound),
so the hook gets a stand-in with the four methods it calls: index(),
is_last(), buffer() and gradients() (views of the buffer, as DDP's are).
"""
import argparse
import json
import math
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd


class Bucket:
    def __init__(self, index, count, buffer, shapes):
        self._index, self._count, self._buffer, self._shapes = index, count, buffer, shapes

    def index(self):
        return self._index

    def is_last(self):
        return self._index == self._count - 1

    def buffer(self):
        return self._buffer

    def gradients(self):
        views, at = [], 0
        for shape in self._shapes:
            size = math.prod(shape)
            views.append(self._buffer[at : at + size].view(shape))
            at += size
        return views


def gradients(seed, rank, step, bucket, size):
    generator = torch.Generator().manual_seed(((seed * 8 + rank) * 1000 + step) * 100 + bucket)
    return torch.randn(size, generator=generator)


def run_case(case, rank):
    state = powersgd.PowerSGDState(process_group=None, **case["options"])
    buckets = case["buckets"]
    inputs, outputs = [], []
    for step in range(case["steps"]):
        step_in, step_out = [], []
        for index, shapes in enumerate(buckets):
            size = sum(math.prod(shape) for shape in shapes)
            buffer = gradients(case["seed"], rank, step, index, size)
            step_in.append(buffer.clone())
            reduced = powersgd.powerSGD_hook(state, Bucket(index, len(buckets), buffer, shapes)).wait()
            step_out.append(reduced.clone())
        inputs.append(step_in)
        outputs.append(step_out)
    return {"inputs": inputs, "outputs": outputs}


def worker(rank, store, cases, stem):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    results = [run_case(case, rank) for case in cases]
    torch.save(results, f"{stem}.rank{rank}.pt")
    dist.barrier()
    # The hook's finished futures may still hold the group: leave without
    # tearing it down (a gloo worker would join itself).
    os._exit(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(worker, args=(os.path.join(folder, "store"), cases, args.out), nprocs=2)
    print("written", args.out)


if __name__ == "__main__":
    main()
