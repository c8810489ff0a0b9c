"""PyTorch DDP with the PowerSGD comm hook on runner's `mlp`, the reference of tests/cli/powersgd_cli_test.cpp.

  powersgd_ddp_reference.py --out DIR [--features F --hidden H1,H2,... --classes C
      --samples N --batch B --world W --steps S --lr LR --momentum M
      --rank R --start I --epsilon E --powersgd-seed P --seed SEED]

Writes into DIR what both sides start from:
  inputs.npy        float32 (N, F), torch.randn
  labels.npy        int64   (N,), torch.randint(C)
  init.safetensors  the initial weights of the model below (nn.Linear's own init)
and what PyTorch ends at:
  torch.safetensors the weights after S steps of DistributedDataParallel over W
                    gloo processes, with register_comm_hook(PowerSGDState(...),
                    powerSGD_hook) and torch.optim.SGD

The model is runner's `mlp` plugin as it builds itself: a module `net`, an
nn.Sequential of Linear and ReLU per hidden width, then a Linear to the
classes; the state dict's names are net.0.weight, net.0.bias, net.2.weight, ...
Its loss is the cross-entropy of the logits and the integer labels.

The data order is runner's IndexSampler with shuffle = false: a step takes a
global batch of W * B consecutive samples (a partial one at the end of an
epoch is dropped) and rank r takes its r-th slice of B samples.

DDP keeps its defaults (bucket_cap_mb 25, first bucket 1 MiB, one bucket at
the first step, rebuilt in gradient-arrival order afterwards), as runner does.
Each process uses one intra-op thread.
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel


class Mlp(nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        layers, width = [], features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def make_inputs(args):
    torch.manual_seed(args.seed)
    model = Mlp(args.features, args.hidden, args.classes)
    generator = torch.Generator().manual_seed(args.seed + 1)
    inputs = torch.randn(args.samples, args.features, generator=generator)
    labels = torch.randint(args.classes, (args.samples,), generator=generator)
    np.save(os.path.join(args.out, "inputs.npy"), inputs.numpy().astype(np.float32))
    np.save(os.path.join(args.out, "labels.npy"), labels.numpy().astype(np.int64))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(args.out, "init.safetensors"))


def slice_of(step, rank, args):
    """The sample indices rank `rank` trains on at `step` (runner's IndexSampler, no shuffle)."""
    per_global = args.world * args.batch
    per_epoch = args.samples // per_global
    start = (step % per_epoch) * per_global + rank * args.batch
    return slice(start, start + args.batch)


def worker(rank, store, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=args.world)
    inputs = torch.from_numpy(np.load(os.path.join(args.out, "inputs.npy")))
    labels = torch.from_numpy(np.load(os.path.join(args.out, "labels.npy")))
    model = Mlp(args.features, args.hidden, args.classes)
    model.load_state_dict(load_file(os.path.join(args.out, "init.safetensors")))
    ddp = DistributedDataParallel(model)
    state = powersgd.PowerSGDState(
        process_group=None,
        matrix_approximation_rank=args.rank,
        start_powerSGD_iter=args.start,
        orthogonalization_epsilon=args.epsilon,
        random_seed=args.powersgd_seed,
    )
    ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    losses = []
    for step in range(args.steps):
        rows = slice_of(step, rank, args)
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(inputs[rows]), labels[rows])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if rank == 0:
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()},
                  os.path.join(args.out, "torch.safetensors"))
        print("losses", " ".join(f"{x:.6f}" for x in losses))
    dist.barrier()
    # The hook's finished futures may still hold the group: leave without
    # tearing it down (a gloo worker would join itself).
    os._exit(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--hidden", type=lambda s: [int(h) for h in s.split(",")], default=[24, 16])
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--samples", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8, help="samples per rank and step")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--rank", type=int, default=2, help="matrix_approximation_rank")
    parser.add_argument("--start", type=int, default=2, help="start_powerSGD_iter")
    parser.add_argument("--epsilon", type=float, default=0.0, help="orthogonalization_epsilon")
    parser.add_argument("--powersgd-seed", type=int, default=0, help="PowerSGDState's random_seed")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and data")
    args = parser.parse_args()
    if args.samples < args.world * args.batch:
        parser.error("fewer samples than one global batch")
    os.makedirs(args.out, exist_ok=True)
    make_inputs(args)
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(worker, args=(os.path.join(folder, "store"), args), nprocs=args.world)
    print("written", args.out)


if __name__ == "__main__":
    main()
