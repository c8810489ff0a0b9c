#!/usr/bin/env python3
"""A Linear's two paths at bench/models.py's gpt2 shapes, forward + backward.

addmm: at::linear, what PyTorch's F.linear runs (the bias added inside the
GEMM); matmul + add_: what LibTorch's C++ torch::nn::Linear::forward runs on a
3-D input. The four projection shapes of a block on [8, 64, in], one thread,
30 rounds with the order alternated, thread CPU time (less disturbed by other
processes than wall time). docs/benchmarks.md section 4 (issue 30).
  ~/.cache/runner/venv-torch-2.14.1/bin/python bench/linear_paths.py
"""
import statistics as s
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
shapes = [(256, 768), (256, 256), (256, 1024), (1024, 256)]
x0 = {k: torch.randn(8, 64, k) for k, _ in shapes}
ws = [(torch.randn(n, k, requires_grad=True), torch.randn(n, requires_grad=True)) for k, n in shapes]
def run(kind):
    for (k, n), (w, b) in zip(shapes, ws):
        x = x0[k].requires_grad_(True)
        y = F.linear(x, w, b) if kind == "addmm" else torch.matmul(x, w.t()).add_(b)
        y.sum().backward()
tot = {"addmm": [], "matmul+add_": []}
for r in range(30):
    for kind in (list(tot) if r % 2 else list(tot)[::-1]):
        t = time.thread_time(); run(kind); tot[kind].append(time.thread_time() - t)
for k, v in tot.items(): print(k, f"median {s.median(v)*1e3:.2f} ms per 4 projections fwd+bwd")
print("ratio matmul+add_/addmm", s.median(tot["matmul+add_"]) / s.median(tot["addmm"]))
