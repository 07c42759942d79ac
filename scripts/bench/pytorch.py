#!/usr/bin/env python3
"""The `transduce bench` training workload in PyTorch, for comparing the CPU training step.

Same model as transduce's presets (post-LN encoder-decoder of §3, no bias in the attention
projections, shared source/target/output embedding scaled by sqrt(d_model), sinusoidal
positions, dropout and label smoothing from the preset), same synthetic batch (rows of 25
random tokens, ≈ --batch-tokens tokens per side), same Adam (β 0.9/0.98, ε 1e-9), one
warm-up step, then --steps timed steps. Prints the matmul rate and training tokens/s in
the form `transduce bench` does.

    pip install torch          # any recent version; CPU is enough
    python3 scripts/bench/pytorch.py --preset small --threads 2

With --exchange DIR (written by `transduce bench --exchange DIR`) it trains transduce's own
initial weights on transduce's batch, so that with --dropout 0 the loss after N steps shows
whether both compute the same thing; --device cuda, --precision f16|bf16 (autocast, and a
GradScaler for f16), --compile (torch.compile), --tf32 (f32 products in TF32, as ours on
such GPUs) and --json are for scripts/bench/gpu.sh.
Label smoothing is transduce's: q(y) = 1 − ε, ε/(V − 1) on every other word, which is
PyTorch's label_smoothing = ε·V/(V − 1). Tokens counted: target tokens, EOS included.
"""
import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

PRESETS = {
    # n_layers, d_model, d_ff, heads, vocab, dropout, label smoothing
    "mini": (2, 128, 512, 4, 8000, 0.1, 0.1),
    "compact": (3, 192, 768, 4, 8000, 0.1, 0.1),
    "small": (3, 256, 1024, 4, 8000, 0.1, 0.1),
    "base": (6, 512, 2048, 8, 37000, 0.1, 0.1),
}


class Attention(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.h, self.p = h, p
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, memory, causal):
        b, n, d = x.shape
        m = memory.shape[1]
        split = lambda t, length: t.view(b, length, self.h, d // self.h).transpose(1, 2)
        q, k, v = split(self.q(x), n), split(self.k(memory), m), split(self.v(memory), m)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.o(out.transpose(1, 2).reshape(b, n, d))


class Layer(nn.Module):
    def __init__(self, d, d_ff, h, p, cross):
        super().__init__()
        self.self_attn = Attention(d, h, p)
        self.cross_attn = Attention(d, h, p) if cross else None
        self.ff = nn.Sequential(nn.Linear(d, d_ff), nn.ReLU(), nn.Linear(d_ff, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))
        self.drop = nn.Dropout(p)

    def forward(self, x, memory=None, causal=False):
        x = self.norms[0](x + self.drop(self.self_attn(x, x, causal)))
        if self.cross_attn is not None:
            x = self.norms[1](x + self.drop(self.cross_attn(x, memory, False)))
        return self.norms[-1](x + self.drop(self.ff(x)))


class Transformer(nn.Module):
    def __init__(self, n, d, d_ff, h, vocab, p):
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=d**-0.5)
        self.encoder = nn.ModuleList(Layer(d, d_ff, h, p, False) for _ in range(n))
        self.decoder = nn.ModuleList(Layer(d, d_ff, h, p, True) for _ in range(n))
        self.drop = nn.Dropout(p)
        pos = torch.arange(1024).unsqueeze(1)
        rate = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(1024, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * rate), torch.cos(pos * rate)
        self.register_buffer("pe", pe)

    def embed_tokens(self, ids):
        return self.drop(self.embed(ids) * math.sqrt(self.d) + self.pe[: ids.shape[1]])

    def forward(self, src, tgt):
        memory = self.embed_tokens(src)
        for layer in self.encoder:
            memory = layer(memory)
        x = self.embed_tokens(tgt)
        for layer in self.decoder:
            x = layer(x, memory, causal=True)
        return x @ self.embed.weight.t()


def load_file(path):
    """A safetensors file's tensors (F32 and I64, what `transduce bench --exchange` writes),
    read directly: GPU machines have torch but not always the safetensors package."""
    dtypes = {"F32": torch.float32, "I64": torch.int64}
    with open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = bytearray(data[8 + size:])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in dtypes:
            sys.exit(f"{path}: {name} is {info['dtype']}, expected F32 or I64")
        start, end = info["data_offsets"]
        t = torch.frombuffer(body[start:end], dtype=dtypes[info["dtype"]]) if end > start \
            else torch.empty(0, dtype=dtypes[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors


def load_exchange(model, directory, device):
    """transduce's initial weights (bundle names) into `model`; its batch as tensors."""
    weights = load_file(f"{directory}/init.safetensors")
    target = {"embedding.weight": model.embed.weight}
    for stack, layers in (("encoder", model.encoder), ("decoder", model.decoder)):
        for i, layer in enumerate(layers):
            p = f"{stack}.layers.{i}"
            attns = [("self_attn", layer.self_attn)]
            norms = ["self_attn_norm"]
            if layer.cross_attn is not None:
                attns.append(("cross_attn", layer.cross_attn))
                norms.append("cross_attn_norm")
            norms.append("ffn_norm")
            for name, attn in attns:
                for part in "qkvo":
                    target[f"{p}.{name}.{part}.weight"] = getattr(attn, part).weight
            for name, norm in zip(norms, layer.norms):
                target[f"{p}.{name}.weight"] = norm.weight
                target[f"{p}.{name}.bias"] = norm.bias
            for name, linear in (("fc1", layer.ff[0]), ("fc2", layer.ff[2])):
                target[f"{p}.ffn.{name}.weight"] = linear.weight
                target[f"{p}.ffn.{name}.bias"] = linear.bias
    missing = sorted(set(target) - set(weights))
    unused = sorted(set(weights) - set(target))
    if missing or unused:
        sys.exit(f"{directory}/init.safetensors: missing {missing}, not used {unused}")
    with torch.no_grad():
        for name, param in target.items():
            if tuple(weights[name].shape) != tuple(param.shape):
                sys.exit(f"{name}: shape {tuple(weights[name].shape)}, model has {tuple(param.shape)}")
            param.copy_(weights[name])
    batch = load_file(f"{directory}/batch.safetensors")
    return tuple(batch[k].to(device) for k in ("src", "tgt_in", "tgt_out"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, or auto (cuda when there is one)")
    ap.add_argument("--precision", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--tf32", action="store_true",
                    help="f32 products in TF32 on GPUs that have it (as transduce's cubecl "
                         "kernels promote f32 there): the like-for-like f32 row")
    ap.add_argument("--dropout", type=float, default=None, help="default: the preset's")
    ap.add_argument("--exchange", help="transduce bench --exchange DIR: same weights, same batch")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else "cpu" if args.device == "auto" else args.device)
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    n, d, d_ff, h, vocab, p, ls = PRESETS[args.preset]
    if args.dropout is not None:
        p = args.dropout

    matmul = float("nan")
    if not args.json:
        a, b = torch.rand(1024, 1024, device=device), torch.rand(1024, 1024, device=device)
        a @ b
        sync(device)
        start = time.perf_counter()
        c = a
        for _ in range(5):
            c = (c @ b) / 1024
        sync(device)
        matmul = 2 * 1024**3 * 5 / (time.perf_counter() - start) / 1e9

    model = Transformer(n, d, d_ff, h, vocab, p)
    params = sum(t.numel() for t in model.parameters())
    length = 25
    if args.exchange:
        src, tgt_in, tgt_out = load_exchange(model, args.exchange, device)
    else:
        rows = max(args.batch_tokens // (length + 1), 1)
        src = torch.randint(4, vocab, (rows, length))
        tgt = torch.randint(4, vocab, (rows, length))
        tgt_in = torch.cat([torch.full((rows, 1), 1), tgt], 1)
        tgt_out = torch.cat([tgt, torch.full((rows, 1), 2)], 1)
        src, tgt_in, tgt_out = src.to(device), tgt_in.to(device), tgt_out.to(device)
    model = model.to(device)
    optim = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    forward = torch.compile(model) if args.compile else model
    half = {"f16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "f16" else None
    # transduce's smoothing (ε/(V−1) on each other word) in PyTorch's terms (ε'/V on all).
    smoothing = ls * vocab / (vocab - 1)

    def step():
        with torch.autocast(device.type, dtype=half, enabled=half is not None):
            logits = forward(src, tgt_in)
        loss = F.cross_entropy(
            logits.float().reshape(-1, vocab), tgt_out.reshape(-1),
            label_smoothing=smoothing, reduction="sum"
        )
        optim.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optim)
            scaler.update()
        else:
            loss.backward()
            optim.step()
        return loss.detach()

    step()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        last = step()
    sync(device)
    secs = time.perf_counter() - start
    tokens_per_step = tgt_out.numel()
    tokens = tokens_per_step * args.steps
    final_loss = last.item() / tokens_per_step
    gflops = 6 * params * tokens / secs / 1e9
    if args.json:
        peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda"
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        print(json.dumps({
            "framework": f"torch {torch.__version__}",
            "backend": ("compile" if args.compile else "eager") + f" ({device.type})",
            "preset": args.preset, "precision": args.precision, "tf32": args.tf32,
            "parameters": params,
            "rows": src.shape[0], "tokens_per_step": tokens_per_step, "steps": args.steps,
            "tokens_per_sec": tokens / secs, "step_ms": 1e3 * secs / args.steps,
            "final_loss": final_loss, "loss_step": 1 + args.steps, "peak_mib_torch": peak,
        }))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"preset {args.preset} ({params} parameters)")
    print(f"matmul 1024×1024:   {matmul:>10.1f} GFLOP/s")
    print(f"training:           {tokens / secs:>10.0f} tokens/s "
          f"({gflops:.1f} GFLOP/s, {100 * gflops / matmul:.0f}% of matmul); "
          f"loss {final_loss:.4f} per token after the last step")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
