"""Prints the oracle's torch and torchvision versions (the parity tests' smoke check)."""
import torch

try:
    import torchvision

    vision = torchvision.__version__
except ImportError:
    vision = "none"
print(f"torch {torch.__version__} torchvision {vision}")
