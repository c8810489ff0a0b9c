"""Reference for the optimizer plugins' parity tests, from torch.optim.

Reads a JSON list of cases (written by tests/plugins/optimizers/optim_parity_test.cpp):
each names an optimizer (adam, adamw, rmsprop, adagrad, sgd, lion), its
options as the experiment file writes them (impl and no_decay included), and
optionally a learning rate and a momentum per step. Builds a small model
(Linear(8, 16), LayerNorm(16), Linear(16, 4), seeded), a sequence of gradients
(seeded normal draws at varying scales; a few parameters have no gradient at
some steps), and for every case runs the PyTorch optimizer the plugin must
match, from the same initial parameters through the same gradients:
impl "loop" is foreach=False (PyTorch's CPU default), "foreach" is
foreach=True, "fused" is fused=True. Lion, which torch.optim does not have,
is the update of Chen et al. (2023) written below in plain torch (one
parameter at a time, or with torch._foreach_* ops for impl "foreach").

With --dtype bfloat16 the model, its parameters and the gradients are
bfloat16 (the optimizer state follows the parameters, as in torch.optim).

Saves, with torch.save as plain dicts and lists (what LibTorch's pickle_load
reads): the initial parameters, the gradients per step (a missing name: no
gradient at that step) and, per case, the parameters after the last step.
"""
import argparse
import json

import torch

STEPS = 10
# Gradient scale per step: amsgrad's running maximum and RMSprop's averages
# only differ from the plain statistics when gradient sizes change.
SCALES = [1.0, 0.3, 2.0, 0.5, 1.5, 0.2, 1.0, 3.0, 0.4, 1.0]
# Parameters without a gradient at a step (PyTorch skips them, state and all).
MISSING = {3: {"2.bias"}, 6: {"0.weight"}}


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    )


def matches(name, module, pattern):
    """runner::matches: the pattern in the name, or (ignoring case) in the owner's type."""
    if not pattern:
        return False
    return pattern in name or pattern.lower() in type(module).__name__.lower()


def param_groups(model, options):
    """runner's decay_groups: one group, or the decay group then the no_decay one."""
    patterns = options.get("no_decay", [])
    params = list(model.named_parameters())
    if not patterns:
        return [{"params": [p for _, p in params]}]
    owners = dict(model.named_modules())
    decay, exempt = [], []
    for name, p in params:
        owner = owners[name.rsplit(".", 1)[0]]
        (exempt if any(matches(name, owner, pat) for pat in patterns) else decay).append(p)
    groups = []
    if decay:
        groups.append({"params": decay})
    if exempt:
        groups.append({"params": exempt, "weight_decay": 0.0})
    return groups


class Lion(torch.optim.Optimizer):
    """Lion with decoupled weight decay: one parameter at a time, or with the
    torch._foreach_* ops over a group (foreach=True), as torch.optim's own
    optimizers have both paths (they round differently in bfloat16)."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, foreach=False):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})
        self.foreach = foreach

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), weight_decay = group["lr"], group["betas"], group["weight_decay"]
            if self.foreach:
                self._foreach_step(group, lr, beta1, beta2, weight_decay)
                continue
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                if weight_decay != 0:
                    p.mul_(1 - lr * weight_decay)
                # c = beta1 * m + (1 - beta1) * g; p -= lr * sign(c)
                c = m.mul(beta1).add_(p.grad, alpha=1 - beta1)
                p.add_(c.sign_(), alpha=-lr)
                # m = beta2 * m + (1 - beta2) * g
                m.mul_(beta2).add_(p.grad, alpha=1 - beta2)

    def _foreach_step(self, group, lr, beta1, beta2, weight_decay):
        params = [p for p in group["params"] if p.grad is not None]
        grads = [p.grad for p in params]
        for p in params:
            if not self.state[p]:
                self.state[p]["exp_avg"] = torch.zeros_like(p)
        exp_avgs = [self.state[p]["exp_avg"] for p in params]
        if not params:
            return
        if weight_decay != 0:
            torch._foreach_mul_(params, 1 - lr * weight_decay)
        update = torch._foreach_mul(exp_avgs, beta1)
        torch._foreach_add_(update, grads, alpha=1 - beta1)
        torch._foreach_sign_(update)
        torch._foreach_add_(params, update, alpha=-lr)
        torch._foreach_mul_(exp_avgs, beta2)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta2)


def make_optimizer(case, model):
    o = dict(case["options"])
    impl = o.pop("impl", "loop")
    o.pop("no_decay", None)
    if "betas" in o:
        o["betas"] = tuple(o["betas"])
    groups = param_groups(model, case["options"])
    name = case["optimizer"]
    if name == "lion":
        assert impl in ("loop", "foreach")
        return Lion(groups, **o, foreach=impl == "foreach")
    paths = {"foreach": impl == "foreach"}
    if impl == "fused":
        paths = {"fused": True}
    elif name in ("adam", "adamw", "adagrad"):
        paths["fused"] = False
    cls = {
        "adam": torch.optim.Adam,
        "adamw": torch.optim.AdamW,
        "rmsprop": torch.optim.RMSprop,
        "adagrad": torch.optim.Adagrad,
        "sgd": torch.optim.SGD,
    }[name]
    return cls(groups, **o, **paths)


def set_momentum(optimizer, name, momentum):
    """What runner::Optimizer::set_momentum does, as OneCycleLR does it."""
    for group in optimizer.param_groups:
        if name in ("adam", "adamw", "lion"):
            group["betas"] = (momentum, group["betas"][1])
        else:
            group["momentum"] = momentum


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", required=True, help="JSON file of cases")
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="the parameters' and gradients' dtype (the optimizer state follows them)",
    )
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    with open(args.cases) as f:
        cases = json.load(f)
    torch.set_num_threads(1)

    initial = {k: v.detach().to(dtype) for k, v in make_model().named_parameters()}
    generator = torch.Generator().manual_seed(1)
    grads = []
    for step in range(STEPS):
        grads.append(
            {
                k: (torch.randn(v.shape, generator=generator) * SCALES[step]).to(dtype)
                for k, v in initial.items()
                if k not in MISSING.get(step, set())
            }
        )

    after = {}
    for case in cases:
        model = make_model().to(dtype)
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(initial[k])
        optimizer = make_optimizer(case, model)
        params = dict(model.named_parameters())
        for step in range(STEPS):
            if case.get("lrs"):
                for group in optimizer.param_groups:
                    group["lr"] = case["lrs"][step]
            if case.get("momenta"):
                set_momentum(optimizer, case["optimizer"], case["momenta"][step])
            for k, p in params.items():
                p.grad = grads[step][k].clone() if k in grads[step] else None
            optimizer.step()
        after[case["name"]] = {k: p.detach().clone() for k, p in params.items()}

    torch.save({"initial": initial, "grads": grads, "after": after}, args.out)
    print(f"{len(cases)} cases, {STEPS} steps each")


if __name__ == "__main__":
    main()
