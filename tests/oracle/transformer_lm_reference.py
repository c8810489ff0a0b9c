"""Reference for the transformer_lm plugin's parity tests, in plain PyTorch.

Two decoder-only causal language models with the public parameter names the
plugin follows:

- gpt2: karpathy/nanoGPT's GPT (model.py): pre-LayerNorm blocks, learned
  positions, packed qkv projection `attn.c_attn`, tanh-approximated GELU,
  biases everywhere, the LM head tied to the token embedding. Its state dict
  holds the tied weight twice (transformer.wte.weight and lm_head.weight), as
  PyTorch's state_dict() does.
- llama: Hugging Face transformers' LlamaForCausalLM: RMSNorm, rotary
  position embeddings with rotate_half over the two halves of each head,
  SwiGLU MLP, no biases, an untied LM head, grouped-query attention (key and
  value heads repeated to the query heads). The rotary cos/sin tables are
  non-persistent buffers, so the state dict does not hold them.

Attention is torch.nn.functional.scaled_dot_product_attention(is_causal=True).

Saves, as a plain dict with torch.save (LibTorch's pickle_load reads a dict,
not an OrderedDict): the initial state, a batch of ids and next-token
targets, the eval-mode logits, the mean cross-entropy, the state after SGD
steps, the parameter count (the tied weight once) and the forward FLOPs of
one sequence counted by torch.utils.flop_counter. On the CPU the flop
counter has no formula for the fused attention kernel
(_scaled_dot_product_flash_attention_for_cpu) and would count attention as
0; the FLOPs are counted with the math backend, whose QK^T and AV are bmm
calls the counter does count.
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        split = self.c_attn(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in split)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class GptMlp(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.c_fc = nn.Linear(width, hidden)
        self.c_proj = nn.Linear(hidden, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GptBlock(nn.Module):
    def __init__(self, width, heads, hidden, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=eps)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width, eps=eps)
        self.mlp = GptMlp(width, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, width, depth, heads, hidden, max_seq_len, eps):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, width),
                wpe=nn.Embedding(max_seq_len, width),
                h=nn.ModuleList(GptBlock(width, heads, hidden, eps) for _ in range(depth)),
                ln_f=nn.LayerNorm(width, eps=eps),
            )
        )
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 1:  # LayerNorm scales
                nn.init.ones_(p)
            elif name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * depth))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.transformer.wte(ids) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


class RmsNorm(nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, width, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q_proj = nn.Linear(width, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, width, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # Each key/value head serves heads / kv_heads consecutive query heads.
        repeat = self.heads // self.kv_heads
        shape = (b, self.kv_heads, repeat, t, self.head_dim)
        k = k[:, :, None].expand(shape).reshape(b, self.heads, t, self.head_dim)
        v = v[:, :, None].expand(shape).reshape(b, self.heads, t, self.head_dim)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class LlamaMlp(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, width, heads, kv_heads, hidden, eps):
        super().__init__()
        self.self_attn = LlamaAttention(width, heads, kv_heads)
        self.mlp = LlamaMlp(width, hidden)
        self.input_layernorm = RmsNorm(width, eps)
        self.post_attention_layernorm = RmsNorm(width, eps)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, vocab, width, depth, heads, kv_heads, hidden, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(
            LlamaLayer(width, heads, kv_heads, hidden, eps) for _ in range(depth)
        )
        self.norm = RmsNorm(width, eps)


class Llama(nn.Module):
    def __init__(self, vocab, width, depth, heads, kv_heads, hidden, max_seq_len, eps, theta):
        super().__init__()
        self.model = LlamaModel(vocab, width, depth, heads, kv_heads, hidden, eps)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
        head_dim = width // heads
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flavour", choices=["gpt2", "llama"], required=True)
    parser.add_argument("--vocab", type=int, default=97)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--mlp-hidden", type=int, default=0)
    parser.add_argument("--multiple-of", type=int, default=256)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--max-seq", type=int, default=24)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--eps", type=float, default=1e-5)
    parser.add_argument("--theta", type=float, default=10000.0)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.flavour == "gpt2":
        hidden = args.mlp_hidden or 4 * args.width
        model = Gpt(args.vocab, args.width, args.depth, args.heads, hidden, args.max_seq, args.eps)
    else:
        # Meta's Llama reference: two thirds of 4 x width, rounded up to a multiple.
        multiple = args.multiple_of
        hidden = args.mlp_hidden or multiple * math.ceil(int(2 * 4 * args.width / 3) / multiple)
        model = Llama(args.vocab, args.width, args.depth, args.heads, args.kv_heads, hidden,
                      args.max_seq, args.eps, args.theta)

    state = {k: v.clone() for k, v in model.state_dict().items()}
    stream = torch.randint(0, args.vocab, (args.batch, args.seq + 1))
    ids, targets = stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


    def loss_of(logits):
        return F.cross_entropy(logits.reshape(-1, args.vocab), targets.reshape(-1))


    model.eval()
    with torch.no_grad():
        logits = model(ids)
        loss = loss_of(logits)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(ids[:1])
    flops = counter.get_total_flops()

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for step in range(args.steps):
        optimizer.zero_grad()
        loss_of(model(ids)).backward()
        optimizer.step()

    params = sum(p.numel() for p in model.parameters())
    torch.save(
        {
            "state": state,
            "ids": ids,
            "targets": targets,
            "logits": logits,
            "loss": loss,
            "after": {k: v.clone() for k, v in model.state_dict().items()},
            "params": params,
            "flops": int(flops),
            "mlp_hidden": hidden,
        },
        args.out,
    )
    print(f"{args.flavour}: {params} parameters, {flops} FLOPs per sequence of {args.seq}, "
          f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
