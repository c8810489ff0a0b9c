"""The GPT-2-style language model of experiments/eager_vs_compiled.toml, for
runner-export: nanoGPT's layout (the class runner's transformer_lm plugin is
tested against, tests/oracle/transformer_lm_reference.py), width 256, 4
blocks, 4 heads, 64 tokens, a vocabulary of 4096, seeded weights.

  runner-export --python experiments/models/gpt2_small.py:batch1 --out models/gpt2-b1
  runner-export --python experiments/models/gpt2_small.py:batch32 --out models/gpt2-b32

Both give the same weights; the example input (token ids) has 1 or 32
sequences. The matching native run is transformer_lm with flavour = "gpt2",
width = 256, depth = 4, heads = 4 and init_from = the .safetensors file.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "oracle"))
from transformer_lm_reference import Gpt  # noqa: E402

VOCAB, WIDTH, DEPTH, HEADS, SEQ = 4096, 256, 4, 4, 64


def build(batch):
    torch.manual_seed(0)
    model = Gpt(VOCAB, WIDTH, DEPTH, HEADS, 4 * WIDTH, SEQ, 1e-5)
    ids = torch.randint(0, VOCAB, (batch, SEQ))
    return model, ids, {"input_high": VOCAB}


def batch1():
    return build(1)


def batch32():
    return build(32)
