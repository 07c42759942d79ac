#!/usr/bin/env python3
"""The `transduce bench` training workload in PyTorch, for comparing the CPU training step.

Same model as transduce's presets (post-LN encoder-decoder of §3, no bias in the attention
projections, shared source/target/output embedding scaled by sqrt(d_model), sinusoidal
positions, dropout and label smoothing from the preset), same synthetic batch (rows of 25
random tokens, ≈ --batch-tokens tokens per side), same Adam (β 0.9/0.98, ε 1e-9), one
warm-up step, then --steps timed steps. Prints the matmul rate and training tokens/s in
the form `transduce bench` does.

    pip install torch          # any recent version; CPU is enough
    python3 scripts/bench-pytorch.py --preset small --threads 2
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

PRESETS = {
    # n_layers, d_model, d_ff, heads, vocab, dropout, label smoothing
    "mini": (2, 128, 512, 4, 8000, 0.1, 0.1),
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    n, d, d_ff, h, vocab, p, ls = PRESETS[args.preset]

    a, b = torch.rand(1024, 1024), torch.rand(1024, 1024)
    a @ b
    start = time.perf_counter()
    c = a
    for _ in range(5):
        c = (c @ b) / 1024
    matmul = 2 * 1024**3 * 5 / (time.perf_counter() - start) / 1e9

    model = Transformer(n, d, d_ff, h, vocab, p)
    params = sum(t.numel() for t in model.parameters())
    length = 25
    rows = max(args.batch_tokens // (length + 1), 1)
    src = torch.randint(4, vocab, (rows, length))
    tgt = torch.randint(4, vocab, (rows, length))
    tgt_in = torch.cat([torch.full((rows, 1), 1), tgt], 1)
    tgt_out = torch.cat([tgt, torch.full((rows, 1), 2)], 1)
    optim = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step():
        logits = model(src, tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, vocab), tgt_out.reshape(-1), label_smoothing=ls, reduction="sum"
        )
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()

    step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    secs = time.perf_counter() - start
    tokens = rows * (length + 1) * args.steps
    gflops = 6 * params * tokens / secs / 1e9
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"preset {args.preset} ({params} parameters)")
    print(f"matmul 1024×1024:   {matmul:>10.1f} GFLOP/s")
    print(f"training:           {tokens / secs:>10.0f} tokens/s "
          f"({gflops:.1f} GFLOP/s, {100 * gflops / matmul:.0f}% of matmul)")


if __name__ == "__main__":
    main()
