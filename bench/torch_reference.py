"""PyTorch reference for `csam bench`: the same models, steps and table.

Times SGD, SAM and CSAM training steps of the PyTorch twins of csam's models
(crates/csam-nn/tests/fixtures/twins.py) on one fixed synthetic batch,
exactly as `csam bench` does: `--warmup` untimed steps, then `--steps` timed
steps one by one (CUDA synchronised after each), median reported. The SAM
step mirrors crates/csam-nn/src/optim/sam.rs (docs/conventions.md):
pass 1 cross entropy and its gradient g; theta += rho g / (||g|| + 1e-12);
pass 2 (same batch) with cross entropy (SAM) or the CSAM loss, BatchNorm
running statistics restored to their post-pass-1 values; theta restored by
copy; SGD (momentum 0.9, weight decay 5e-4) steps with g'.

`--channels-last` times the model as csam's `--memory-format channels_last`
runs it: `model.to(memory_format=torch.channels_last)` once, and every forward
pass's batch converted with `contiguous(memory_format=torch.channels_last)`.

    .venv/bin/python bench/torch_reference.py --input cifar --steps 5 --threads 2
    .venv/bin/python bench/torch_reference.py --input imagenet --models resnet50,vit-s16 \
        --batch-size 32 --warmup 1 --steps 3
    .venv/bin/python bench/torch_reference.py --flops > bench/flops_reference.json
    .venv/bin/python bench/torch_reference.py --device cuda --precision bf16
    .venv/bin/python bench/torch_reference.py --models resnet20 --channels-last

`--flops` counts the multiply-adds of one example's forward pass with
PyTorch's FlopCounterMode (convolutions and matrix products; half its FLOPs),
independently of csam's count of the layers its forward pass runs, which
crates/csam-nn/tests/model_flops.rs compares with that file. timm's attention
is counted unfused: FlopCounterMode does not see inside the CPU's fused
scaled_dot_product_attention kernel.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crates", "csam-nn", "tests", "fixtures"))
import twins  # noqa: E402  (the PyTorch twins of csam's models)

MLP_HIDDEN = [256, 256]  # csam_nn::model::ModelOptions::default().mlp_hidden
# Synthetic input shapes and their class counts, as `csam bench --input`.
INPUTS = {"fmnist": (1, 28, 28), "cifar": (3, 32, 32), "imagenet": (3, 224, 224)}
CLASSES = {"fmnist": 10, "cifar": 10, "imagenet": 1000}
# The models and inputs of bench/flops_reference.json.
FLOPS_CASES = {
    "fmnist": ["mlp", "cnn", "resnet20", "resnet32", "resnet56", "wrn-16-4", "pyramidnet110-a48",
               "resnet18-cifar", "vit-ti16"],
    "cifar": ["mlp", "cnn", "resnet20", "resnet32", "resnet56", "resnet18", "resnet18-cifar",
              "resnet50-cifar", "wrn-16-4", "wrn-28-10", "pyramidnet110-a48",
              "pyramidnet272-a200", "vit-ti16", "vit-s16"],
    "imagenet": ["resnet18", "resnet50", "vit-s16", "vit-s32", "vit-b16"],
}
RHO, GAMMA, LR, MOMENTUM, WEIGHT_DECAY = 0.05, 1.0, 0.1, 0.9, 5e-4


def build(kind, shape, n_classes):
    channels, height, width = shape
    case = dict(kind=kind, channels=channels, height=height, width=width,
                n_classes=n_classes, hidden=MLP_HIDDEN, dropout=0.0, drop_path=0.0, shakedrop=0.0)
    return twins.build(case)


def forward_macs(model, shape):
    """Multiply-adds of one example's eval-mode forward pass (FlopCounterMode)."""
    for module in model.modules():
        if hasattr(module, "fused_attn"):
            module.fused_attn = False
    model.eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(1, *shape))
    return counter.get_total_flops() // 2


PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def csam_loss(logits, ys, gamma):
    """Per example -log p_y if p_y <= 1/2, else -(1 + p_y)^-gamma log p_y; mean."""
    log_p = F.log_softmax(logits, dim=1).gather(1, ys[:, None])[:, 0]
    p = log_p.exp()
    weight = torch.where(p <= 0.5, torch.ones_like(p), (1 + p).pow(-gamma))
    return -(weight * log_p).mean()


class Stepper:
    def __init__(self, model, family, autocast, memory_format):
        self.model, self.family, self.autocast = model, family, autocast
        self.memory_format = memory_format
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = [b for name, b in model.named_buffers() if "running" in name]
        self.opt = torch.optim.SGD(self.params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
        self.saved = [p.detach().clone() for p in self.params]
        self.saved_buffers = [b.detach().clone() for b in self.buffers]
        # float16 trains with dynamic loss scaling, as csam's --precision fp16.
        self.scaler = torch.amp.GradScaler(self.params[0].device.type,
                                           enabled=autocast == torch.float16)

    def forward(self, xs):
        """The logits, under autocast when timing a lower precision (as csam's
        --precision: the forward pass in the region, logits back in float32),
        of the batch in the model's memory format (as csam's Model converts
        it in every forward pass)."""
        xs = xs.contiguous(memory_format=self.memory_format)
        if self.autocast is None:
            return self.model(xs)
        with torch.autocast(xs.device.type, dtype=self.autocast):
            return self.model(xs).float()

    def step(self, xs, ys):
        loss = F.cross_entropy(self.forward(xs), ys)
        grads = torch.autograd.grad(self.scaler.scale(loss), self.params)
        if self.family != "sgd":
            inverse = 1.0 / self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
            grads = [g * inverse for g in grads]
            with torch.no_grad():
                for s, p in zip(self.saved, self.params):
                    s.copy_(p)
                for s, b in zip(self.saved_buffers, self.buffers):
                    s.copy_(b)
                norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
                scale = RHO / (norm + 1e-12)
                for p, g in zip(self.params, grads):
                    p.add_(g * scale)
            logits = self.forward(xs)
            second = csam_loss(logits, ys, GAMMA) if self.family == "csam" else F.cross_entropy(logits, ys)
            grads = torch.autograd.grad(self.scaler.scale(second), self.params)
            with torch.no_grad():
                for s, p in zip(self.saved, self.params):
                    p.copy_(s)
                for s, b in zip(self.saved_buffers, self.buffers):
                    b.copy_(s)
        for p, g in zip(self.params, grads):
            p.grad = g
        self.scaler.step(self.opt)
        self.scaler.update()
        return loss.item()


def reset_peak(device):
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def peak_bytes(device):
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def bench_case(kind, family, args, device):
    shape, n_classes = INPUTS[args.input], CLASSES[args.input]
    torch.manual_seed(0)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = build(kind, shape, n_classes).to(device).train()
    model = model.to(memory_format=memory_format)
    stepper = Stepper(model, family, PRECISIONS[args.precision], memory_format)
    xs = torch.randn(args.batch_size, *shape, device=device)
    ys = torch.randint(n_classes, (args.batch_size,), device=device)
    reset_peak(device)
    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        stepper.step(xs, ys)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    forward = 2.0 * forward_macs(build(kind, shape, n_classes), shape) * args.batch_size
    step_flops = (6.0 if family != "sgd" else 3.0) * forward
    return dict(model=kind, optimizer=family, ms_per_step=seconds * 1e3,
                images_per_s=args.batch_size / seconds, peak_memory_bytes=peak_bytes(device),
                step_flops=step_flops, gflops_per_s=step_flops / seconds / 1e9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="mlp,resnet20")
    parser.add_argument("--optimizers", default="sgd,sam,csam")
    parser.add_argument("--input", choices=sorted(INPUTS), default="cifar")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default="fp32",
                        help="forward passes under torch.autocast in bf16 / fp16 (fp16 with torch.amp.GradScaler)")
    parser.add_argument("--channels-last", action="store_true",
                        help="convolution weights and batches in torch.channels_last (csam's --memory-format)")
    parser.add_argument("--flops", action="store_true", help="print forward MACs as JSON and exit")
    args = parser.parse_args()
    if args.flops:
        table = {}
        for name, kinds in FLOPS_CASES.items():
            shape = INPUTS[name]
            for kind in kinds:
                table[f"{kind}/{name}"] = forward_macs(build(kind, shape, CLASSES[name]), shape)
        inputs = {name: dict(shape=INPUTS[name], n_classes=CLASSES[name]) for name in INPUTS}
        print(json.dumps(dict(mlp_hidden=MLP_HIDDEN, inputs=inputs, forward_macs=table), indent=2))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    shape = INPUTS[args.input]
    rows = []
    for kind in args.models.split(","):
        first = len(rows)
        for family in args.optimizers.split(","):
            rows.append(bench_case(kind, family, args, device))
        sgd = next((r["ms_per_step"] for r in rows[first:] if r["optimizer"] == "sgd"), None)
        for r in rows[first:]:
            r["ratio_to_sgd"] = r["ms_per_step"] / sgd if sgd else None
    c, h, w = shape
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
          f"precision {args.precision}, "
          f"memory format {'channels_last' if args.channels_last else 'contiguous'}, "
          f"huge pages {'on' if os.environ.get('THP_MEM_ALLOC_ENABLE', '').strip() == '1' else 'off'}, "
          f"batch {args.batch_size}, input {c}x{h}x{w}, {args.warmup} warm-up + {args.steps} timed steps (median)")
    print(f"{'model':<18} {'opt':<6} {'ms/step':>10} {'img/s':>10} {'peak MiB':>12} {'GFLOP/step':>12} {'GFLOP/s':>9} {'x SGD':>7}")
    for r in rows:
        mem = "-" if r["peak_memory_bytes"] is None else f"{r['peak_memory_bytes'] / 1048576:.0f}"
        ratio = "-" if r["ratio_to_sgd"] is None else f"{r['ratio_to_sgd']:.2f}"
        print(f"{r['model']:<18} {r['optimizer']:<6} {r['ms_per_step']:>10.2f} {r['images_per_s']:>10.1f} "
              f"{mem:>12} {r['step_flops'] / 1e9:>12.3f} {r['gflops_per_s']:>9.2f} {ratio:>7}")


if __name__ == "__main__":
    main()
