"""A small classifier for the GPU check kit's AOTInductor check where
torchvision is not installed (the CPU proof's venv): runner-export
--python scripts/gpu_kit/small_model.py:build."""
import torch


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    return model, torch.randn(8, 32)
