"""A state dict saved with safetensors as a Python user saves one, plus an input
and the module's eval-mode output on it (extra names: runner loads it with
strict = false and checks that it computes the same output).
"""
import sys

import torch
from safetensors.torch import save_file

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
with torch.no_grad():
    model[1].running_mean.normal_()
    model[1].running_var.uniform_(0.5, 1.5)
    model[1].weight.uniform_(0.5, 1.5)
model.eval()
x = torch.randn(5, 3)
state = dict(model.state_dict())
state["input"] = x
state["expected_output"] = model(x).detach()
save_file(state, sys.argv[1])
print("written")
