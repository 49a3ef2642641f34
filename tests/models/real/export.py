"""Exports the project's own set of real models with torch, from seeded random weights,
and stores each graph with its large initializers stripped (`*.onnx` in this folder).

The tests and the bench never run this script and never need torch: they read the
stripped graphs and refill every stripped initializer from a seeded PRNG
(`rivet::real_models`, materialised into `target/real-models/`). A stripped initializer
keeps its name, type and dims, loses its data, and carries in its `doc_string`

    rivet-fill uniform LO HI SEED

the range of a uniform distribution with the mean and standard deviation of the values
torch's init gave it (LO, HI = mean -/+ sqrt(3) std), and the seed of its stream. The
model's `metadata_props` say how to make its inputs: `rivet-input:NAME` =
`DTYPE DIMS KIND A B` with KIND `uniform` (floats in [A, B)), `int` (integers in
[A, B)), `range` (A, A+1, ... along the last axis) or `ones`.

To rerun (torch is a dev-only dependency, never installed into the repo's .venv):

    python3 -m venv /work/torchvenv
    /work/torchvenv/bin/pip install torch torchvision onnxscript onnx==1.20.1
    /work/torchvenv/bin/python tests/models/real/export.py [NAME_SUBSTRING ...]

Versions used for the committed files: torch 2.15.0, torchvision 0.29.2, onnxscript
0.7.2, onnx 1.20.1. Every model here is written in plain torch.nn (no transformers, no
hub weights); the CNNs are torchvision's architectures with weights=None.
"""

import io
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
STRIP_MIN_ELEMENTS = 64
NEG = torch.finfo(torch.float32).min

warnings.filterwarnings("ignore")


# ---------------------------------------------------------------- building blocks


def attend(q, k, v, mask, scale, sdpa):
    """q [B, H, S, D], k/v [B, H, T, D]; mask: additive [B, 1, S, T] or None."""
    if sdpa:
        if mask is not None:  # ORT's Attention wants the mask's query axis at full size
            mask = mask.expand(q.shape[0], mask.shape[1], q.shape[2], k.shape[2])
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    s = torch.matmul(q, k.transpose(-1, -2))
    if scale != 1.0:
        s = s * scale
    if mask is not None:
        s = s + mask
    return torch.matmul(torch.softmax(s, dim=-1), v)


def causal_mask(positions_q, positions_k):
    """Additive mask from position ids, [B, 1, S, T]: computed in the graph (a mask made
    from shapes alone would be folded into a constant by the exporter)."""
    later = positions_k[:, None, None, :] > positions_q[:, None, :, None]
    zero = torch.zeros((), dtype=torch.float32)
    return torch.where(later, torch.full((), NEG), zero)


class SelfAttention(nn.Module):
    def __init__(self, d, heads, kv_heads=None, bias=True, k_bias=True, scale=True):
        super().__init__()
        self.h, self.kvh = heads, kv_heads or heads
        self.hd = d // heads
        self.q = nn.Linear(d, heads * self.hd, bias=bias)
        self.k = nn.Linear(d, self.kvh * self.hd, bias=bias and k_bias)
        self.v = nn.Linear(d, self.kvh * self.hd, bias=bias)
        self.o = nn.Linear(heads * self.hd, d, bias=bias)
        self.scale = 1.0 / math.sqrt(self.hd) if scale else 1.0
        self.sdpa = False

    def split(self, x, heads):
        b, s, _ = x.shape
        return x.reshape(b, s, heads, self.hd).transpose(1, 2)

    def forward(self, x, mask=None, rope=None, past=None, bias=None):
        q, k, v = self.split(self.q(x), self.h), self.split(self.k(x), self.kvh), self.split(self.v(x), self.kvh)
        if rope is not None:
            q, k = rope(q), rope(k)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        present = (k, v)
        if self.kvh != self.h:  # grouped-query attention: each kv head serves h/kvh q heads
            r = self.h // self.kvh
            b, _, t, hd = k.shape
            k = k[:, :, None].expand(b, self.kvh, r, t, hd).reshape(b, self.h, t, hd)
            v = v[:, :, None].expand(b, self.kvh, r, t, hd).reshape(b, self.h, t, hd)
        if bias is not None:
            mask = bias if mask is None else mask + bias
        a = attend(q, k, v, mask, self.scale, self.sdpa)
        b, _, s, _ = a.shape
        return self.o(a.transpose(1, 2).reshape(b, s, self.h * self.hd)), present


class RmsNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def jitter_norms(model, gen):
    """Fresh norms are identities (weight 1, bias 0, running stats 0/1): spread them so
    the stored scales say something and the refilled models are not degenerate."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm, RmsNorm)):
            if getattr(m, "weight", None) is not None:
                m.weight.data = 1.0 + 0.2 * (torch.rand(m.weight.shape, generator=gen) - 0.5)
            if getattr(m, "bias", None) is not None:
                m.bias.data = 0.1 * (torch.rand(m.bias.shape, generator=gen) - 0.5)
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.data = 0.1 * (torch.rand(m.running_mean.shape, generator=gen) - 0.5)
            m.running_var.data = 0.5 + torch.rand(m.running_var.shape, generator=gen)


# ---------------------------------------------------------------- the models


class Bert(nn.Module):
    """Post-LayerNorm encoder with learned positions, an additive padding mask from an
    int64 attention mask, erf Gelu and a tanh pooler."""

    def __init__(self, vocab, d, layers, heads, ff, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln0 = nn.LayerNorm(d, eps=1e-12)
        self.attn = nn.ModuleList(SelfAttention(d, heads) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d, eps=1e-12) for _ in range(layers))
        self.ff1 = nn.ModuleList(nn.Linear(d, ff) for _ in range(layers))
        self.ff2 = nn.ModuleList(nn.Linear(ff, d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d, eps=1e-12) for _ in range(layers))
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        x = self.ln0(self.tok(input_ids) + self.pos(torch.arange(s))[None])
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for i in range(len(self.attn)):
            x = self.ln1[i](x + self.attn[i](x, mask)[0])
            x = self.ln2[i](x + self.ff2[i](F.gelu(self.ff1[i](x))))
        return x, torch.tanh(self.pool(x[:, 0]))


class Gpt2(nn.Module):
    """Pre-LayerNorm decoder, learned positions, tanh Gelu, tied LM head, a KV cache."""

    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.attn = nn.ModuleList(SelfAttention(d, heads) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.fc = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)

    def forward(self, input_ids, position_ids, *past):
        x = self.wte(input_ids) + self.wpe(position_ids)
        decode = len(past) > 0
        mask = None if decode else causal_mask(position_ids, position_ids)
        presents = []
        for i in range(len(self.attn)):
            kv = (past[2 * i], past[2 * i + 1]) if decode else None
            a, present = self.attn[i](self.ln1[i](x), mask, past=kv)
            presents += present
            x = x + a
            x = x + self.proj[i](F.gelu(self.fc[i](self.ln2[i](x)), approximate="tanh"))
        return (F.linear(self.lnf(x), self.wte.weight), *presents)


class Rope(nn.Module):
    """Rotary embedding on the two halves of each head, cos/sin from the position ids."""

    def __init__(self, hd, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.cos = self.sin = None

    def set_positions(self, position_ids):
        f = position_ids[:, :, None].to(torch.float32) * self.inv_freq[None, None, :]
        e = torch.cat([f, f], dim=-1)[:, None]
        self.cos, self.sin = torch.cos(e), torch.sin(e)

    def __call__(self, x):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos + rotated * self.sin


class Llama(nn.Module):
    """Pre-RMSNorm decoder with grouped-query attention, RoPE, SwiGLU and a KV cache."""

    def __init__(self, vocab, d, layers, heads, kv_heads, ff):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rope = Rope(d // heads)
        self.attn = nn.ModuleList(SelfAttention(d, heads, kv_heads, bias=False) for _ in range(layers))
        self.n1 = nn.ModuleList(RmsNorm(d) for _ in range(layers))
        self.n2 = nn.ModuleList(RmsNorm(d) for _ in range(layers))
        self.gate = nn.ModuleList(nn.Linear(d, ff, bias=False) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(d, ff, bias=False) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(ff, d, bias=False) for _ in range(layers))
        self.norm = RmsNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, position_ids, *past):
        x = self.embed(input_ids)
        self.rope.set_positions(position_ids)
        decode = len(past) > 0
        mask = None if decode else causal_mask(position_ids, position_ids)
        presents = []
        for i in range(len(self.attn)):
            kv = (past[2 * i], past[2 * i + 1]) if decode else None
            a, present = self.attn[i](self.n1[i](x), mask, rope=self.rope, past=kv)
            presents += present
            x = x + a
            h = self.n2[i](x)
            x = x + self.down[i](F.silu(self.gate[i](h)) * self.up[i](h))
        return (self.head(self.norm(x)), *presents)


class Vit(nn.Module):
    """Patch-embedding conv, class token, learned positions, pre-LayerNorm encoder."""

    def __init__(self, image, patch, d, layers, heads, classes=100):
        super().__init__()
        n = (image // patch) ** 2
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, n + 1, d))
        self.attn = nn.ModuleList(SelfAttention(d, heads) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, pixel_values):
        x = self.patch(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for i in range(len(self.attn)):
            x = x + self.attn[i](self.ln1[i](x))[0]
            x = x + self.fc2[i](F.gelu(self.fc1[i](self.ln2[i](x))))
        return self.head(self.lnf(x)[:, 0])


class WhisperEncoder(nn.Module):
    """Two Gelu convs over log-mel frames (the second with stride 2), sinusoidal
    positions, pre-LayerNorm encoder whose key projection has no bias."""

    def __init__(self, mels, frames, d, layers, heads):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        n = frames // 2
        t = torch.arange(n, dtype=torch.float32)[:, None]
        inv = torch.exp(-math.log(10000.0) * torch.arange(d // 2, dtype=torch.float32) / (d // 2 - 1))
        self.register_buffer("positions", torch.cat([torch.sin(t * inv), torch.cos(t * inv)], dim=1))
        self.attn = nn.ModuleList(SelfAttention(d, heads, k_bias=False) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.lnf = nn.LayerNorm(d)

    def forward(self, input_features):
        x = F.gelu(self.conv2(F.gelu(self.conv1(input_features)))).transpose(1, 2) + self.positions
        for i in range(len(self.attn)):
            x = x + self.attn[i](self.ln1[i](x))[0]
            x = x + self.fc2[i](F.gelu(self.fc1[i](self.ln2[i](x))))
        return self.lnf(x)


class T5Encoder(nn.Module):
    """RMS-normalised (no bias, no mean) pre-norm encoder, unscaled attention with a
    bucketed relative-position bias shared by all layers, gated-Gelu feed-forward."""

    def __init__(self, vocab, d, layers, heads, ff, seq, buckets=32, max_distance=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rel = nn.Embedding(buckets, heads)
        self.attn = nn.ModuleList(SelfAttention(d, heads, bias=False, scale=False) for _ in range(layers))
        self.n1 = nn.ModuleList(RmsNorm(d) for _ in range(layers))
        self.n2 = nn.ModuleList(RmsNorm(d) for _ in range(layers))
        self.wi0 = nn.ModuleList(nn.Linear(d, ff, bias=False) for _ in range(layers))
        self.wi1 = nn.ModuleList(nn.Linear(d, ff, bias=False) for _ in range(layers))
        self.wo = nn.ModuleList(nn.Linear(ff, d, bias=False) for _ in range(layers))
        self.norm = RmsNorm(d)
        self.buckets, self.max_distance = buckets, max_distance

    def bucket(self, rel):
        # Bidirectional: half the buckets per sign; exact below max_exact, log-spaced above.
        n = self.buckets // 2
        out = (rel > 0).to(torch.int64) * n
        a = rel.abs()
        exact = n // 2
        log = exact + (
            torch.log(a.float().clamp(min=1) / exact) / math.log(self.max_distance / exact) * (n - exact)
        ).to(torch.int64)
        return out + torch.where(a < exact, a, log.clamp(max=n - 1))

    def forward(self, input_ids, position_ids):
        x = self.embed(input_ids)
        rel = position_ids[:, None, :] - position_ids[:, :, None]  # [B, S, T]
        bias = self.rel(self.bucket(rel)).permute(0, 3, 1, 2)  # [B, H, S, T]
        for i in range(len(self.attn)):
            x = x + self.attn[i](self.n1[i](x), bias=bias)[0]
            h = self.n2[i](x)
            x = x + self.wo[i](F.gelu(self.wi0[i](h), approximate="tanh") * self.wi1[i](h))
        return self.norm(x)


# ---------------------------------------------------------------- the set


def cnn(name):
    import torchvision.models as tvm

    return lambda: (getattr(tvm, name)(weights=None), [("x", "float32", [1, 3, 224, 224], "uniform", -1, 1)], ["y"])


def lm_inputs(vocab, seq, past=None, kv=None, hd=None):
    """Inputs of a decoder: the prefill (seq tokens) or a decode step (1 token at
    position `past`, with a cache of `past` positions per layer)."""
    if past is None:
        return [("input_ids", "int64", [1, seq], "int", 0, vocab), ("position_ids", "int64", [1, seq], "range", 0, 0)]
    layers, heads = kv
    ins = [("input_ids", "int64", [1, 1], "int", 0, vocab), ("position_ids", "int64", [1, 1], "range", past, 0)]
    for i in range(layers):
        for t in "kv":
            ins.append((f"past_{t}{i}", "float32", [1, heads, past, hd], "uniform", -1, 1))
    return ins


def lm_outputs(layers):
    return ["logits"] + [f"present_{t}{i}" for i in range(layers) for t in "kv"]


def bert(vocab, d, layers, heads, ff, seq):
    ins = [("input_ids", "int64", [1, seq], "int", 0, vocab), ("attention_mask", "int64", [1, seq], "ones", 0, 0)]
    return lambda: (Bert(vocab, d, layers, heads, ff, seq), ins, ["last_hidden_state", "pooled"])


def gpt2(vocab, d, layers, heads, seq, past=None):
    ins = lm_inputs(vocab, seq, past, (layers, heads), d // heads)
    return lambda: (Gpt2(vocab, d, layers, heads, seq), ins, lm_outputs(layers))


def llama(vocab, d, layers, heads, kv_heads, ff, seq, past=None):
    ins = lm_inputs(vocab, seq, past, (layers, kv_heads), d // heads)
    return lambda: (Llama(vocab, d, layers, heads, kv_heads, ff), ins, lm_outputs(layers))


def vit(image, patch, d, layers, heads):
    ins = [("pixel_values", "float32", [1, 3, image, image], "uniform", -1, 1)]
    return lambda: (Vit(image, patch, d, layers, heads), ins, ["logits"])


def whisper(mels, frames, d, layers, heads):
    ins = [("input_features", "float32", [1, mels, frames], "uniform", -1, 1)]
    return lambda: (WhisperEncoder(mels, frames, d, layers, heads), ins, ["last_hidden_state"])


def t5(vocab, d, layers, heads, ff, seq):
    ins = [("input_ids", "int64", [1, seq], "int", 0, vocab), ("position_ids", "int64", [1, seq], "range", 0, 0)]
    return lambda: (T5Encoder(vocab, d, layers, heads, ff, seq), ins, ["last_hidden_state"])



class LstmClassifier(nn.Module):
    """A text classifier: embeddings, a 2-layer bidirectional LSTM, mean over time, a
    linear head (the ONNX graph: Gather, Transpose, two LSTM nodes, ReduceMean, Gemm)."""

    def __init__(self, vocab, d, hidden, layers, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=layers, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, input_ids):
        y, _ = self.lstm(self.emb(input_ids))
        return self.head(y.mean(dim=1))


def lstm(vocab, d, hidden, layers, classes, batch, seq):
    ins = [("input_ids", "int64", [batch, seq], "int", 0, vocab)]
    return lambda: (LstmClassifier(vocab, d, hidden, layers, classes), ins, ["logits"])

class ConvBnSilu(nn.Sequential):
    def __init__(self, cin, cout, k=3, stride=1):
        super().__init__(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class YoloTiny(nn.Module):
    """A YOLO-style detector: a stride-2 Conv-BN-SiLU backbone down to strides 8, 16 and
    32, an FPN top-down path (nearest 2x Upsample, exported as Resize, and Concat), a
    1x1 head per scale with `anchors` boxes of 5 + `classes` values per cell, all scales
    reshaped to [1, N, 5 + classes] and concatenated, then a Sigmoid."""

    def __init__(self, classes, anchors=3):
        super().__init__()
        self.a, self.k = anchors, 5 + classes
        self.stem = nn.Sequential(ConvBnSilu(3, 16, stride=2), ConvBnSilu(16, 32, stride=2), ConvBnSilu(32, 32))
        self.c3 = ConvBnSilu(32, 64, stride=2)  # stride 8
        self.c4 = ConvBnSilu(64, 96, stride=2)  # stride 16
        self.c5 = ConvBnSilu(96, 128, stride=2)  # stride 32
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.l5 = ConvBnSilu(128, 64, k=1)
        self.f4 = ConvBnSilu(64 + 96, 64)
        self.l4 = ConvBnSilu(64, 32, k=1)
        self.f3 = ConvBnSilu(32 + 64, 48)
        self.heads = nn.ModuleList(nn.Conv2d(c, anchors * self.k, 1) for c in (48, 64, 128))

    def flat(self, head, x):
        b, _, h, w = x.shape
        return head(x).view(b, self.a, self.k, h, w).permute(0, 1, 3, 4, 2).reshape(b, -1, self.k)

    def forward(self, x):
        p3 = self.c3(self.stem(x))
        p4 = self.c4(p3)
        p5 = self.c5(p4)
        t5 = self.l5(p5)
        n4 = self.f4(torch.cat([self.up(t5), p4], 1))
        n3 = self.f3(torch.cat([self.up(self.l4(n4)), p3], 1))
        outs = [self.flat(h, t) for h, t in zip(self.heads, (n3, n4, p5))]
        return torch.sigmoid(torch.cat(outs, 1))


def yolo(image, classes):
    ins = [("images", "float32", [1, 3, image, image], "uniform", -1, 1)]
    return lambda: (YoloTiny(classes), ins, ["detections"])


class CondTiny(nn.Module):
    """A data-dependent branch (scripted, so the `if` exports as an If node): a conv stem,
    then a 3x3 conv + Relu when the input's mean is positive, else a per-pixel Linear +
    Tanh; both branches read the outer graph's weights. Outputs the pooled logits and which
    branch ran (int64, 1 for the first), so a test can tell the branches apart."""

    script = True

    def __init__(self, c, classes):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.mix = nn.Linear(c, c)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        h = self.stem(x)
        if bool(x.mean() > 0):
            y = torch.relu(self.conv(h))
            branch = torch.ones([], dtype=torch.int64)
        else:
            y = torch.tanh(self.mix(h.permute(0, 2, 3, 1))).permute(0, 3, 1, 2)
            branch = torch.zeros([], dtype=torch.int64)
        return self.head(y.mean([2, 3])), branch


def cond(c, classes, image):
    # The stored input's mean is about 0.5: the first branch; its negation takes the other.
    ins = [("x", "float32", [1, 3, image, image], "uniform", -0.5, 1.5)]
    return lambda: (CondTiny(c, classes), ins, ["logits", "branch"])


# name -> (factory, [(opset, exporter)]); "ts" is the TorchScript exporter, "dynamo" the
# torch.export-based one (opset 23 turns scaled_dot_product_attention into Attention).
TS17, TS20, DY23 = (17, "ts"), (20, "ts"), (23, "dynamo")
MODELS = {
    "resnet18": (cnn("resnet18"), [TS17]),
    "mobilenet_v2": (cnn("mobilenet_v2"), [TS17]),
    "efficientnet_b0": (cnn("efficientnet_b0"), [TS17]),
    "bert_tiny": (bert(1024, 128, 2, 2, 512, 64), [TS17, TS20, DY23]),
    "bert_small": (bert(4096, 512, 4, 8, 2048, 256), [TS17]),
    "gpt2_tiny_prefill": (gpt2(1024, 128, 2, 2, 32), [TS17, DY23]),
    "gpt2_tiny_decode": (gpt2(1024, 128, 2, 2, 32, past=31), [TS17, DY23]),
    "gpt2_small_prefill": (gpt2(4096, 768, 2, 12, 128), [TS17]),
    "gpt2_small_decode": (gpt2(4096, 768, 2, 12, 128, past=127), [TS17]),
    "llama_tiny_prefill": (llama(1024, 256, 2, 8, 2, 688, 64), [TS17, DY23]),
    "llama_tiny_decode": (llama(1024, 256, 2, 8, 2, 688, 64, past=63), [TS17, DY23]),
    "llama_small_prefill": (llama(4096, 512, 4, 8, 2, 1376, 256), [TS17]),
    "llama_small_decode": (llama(4096, 512, 4, 8, 2, 1376, 256, past=255), [TS17]),
    "vit_tiny": (vit(64, 8, 192, 2, 3), [TS17, TS20, DY23]),
    "vit_small": (vit(224, 16, 384, 4, 6), [TS17]),
    "whisper_tiny": (whisper(80, 200, 384, 2, 6), [TS17, DY23]),
    "whisper_small": (whisper(80, 1000, 384, 4, 6), [TS17]),
    "t5_tiny": (t5(1024, 128, 2, 4, 512, 64), [TS17, DY23]),
    "t5_small": (t5(4096, 512, 4, 8, 1024, 128), [TS17]),
    "lstm_tiny": (lstm(1000, 64, 64, 2, 10, 2, 32), [TS17]),
    "yolo_tiny": (yolo(160, 8), [TS17]),
    "cond_tiny": (cond(16, 10, 32), [TS17]),
}


def example(spec):
    _, dtype, dims, kind, a, b = spec
    if kind == "uniform":
        return torch.rand(dims) * (b - a) + a
    if kind == "int":
        return torch.randint(a, b, dims)
    if kind == "ones":
        return torch.ones(dims, dtype=torch.int64)
    return (torch.arange(dims[-1]) + a).expand(*dims).contiguous()


def large_constants_to_initializers(graph):
    """The dynamo exporter can leave folded tensors in Constant nodes: move the large
    ones to initializers so that they are stripped too."""
    keep = []
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            t = node.attribute[0].t
            if t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) >= STRIP_MIN_ELEMENTS:
                t.name = node.output[0]
                graph.initializer.append(t)
                continue
        keep.append(node)
    del graph.node[:]
    graph.node.extend(keep)


def drop_annotations(model):
    """The dynamo exporter annotates every node with its torch source (stack traces,
    module paths): tens of KB that nothing reads."""
    for node in model.graph.node:
        node.ClearField("metadata_props")
        node.ClearField("doc_string")
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        v.ClearField("metadata_props")
        v.ClearField("doc_string")
    model.graph.ClearField("value_info")
    model.ClearField("metadata_props")


def strip(model):
    """Replaces the data of each float initializer of STRIP_MIN_ELEMENTS or more finite
    values by its fill recipe; returns (stripped count, stripped bytes)."""
    count, nbytes = 0, 0
    for i, t in enumerate(model.graph.initializer):
        if t.data_type != onnx.TensorProto.FLOAT or np.prod(t.dims) < STRIP_MIN_ELEMENTS:
            continue
        a = numpy_helper.to_array(t).astype(np.float64)
        if not np.isfinite(a).all():
            continue
        mean, std = float(a.mean()), float(a.std())
        lo, hi = mean - math.sqrt(3) * std, mean + math.sqrt(3) * std
        count, nbytes = count + 1, nbytes + a.size * 4
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.doc_string = f"rivet-fill uniform {np.float32(lo)!r} {np.float32(hi)!r} {1000 + i}".replace(
            "np.float32(", ""
        ).replace(")", "")
    return count, nbytes


def export(name, factory, opset, exporter):
    torch.manual_seed(20261201)
    gen = torch.Generator().manual_seed(20261202)
    model, ins, outs = factory()
    jitter_norms(model, gen)
    model.eval()
    if exporter == "dynamo":
        for m in model.modules():
            if isinstance(m, SelfAttention):
                m.sdpa = True
    args = tuple(example(s) for s in ins)
    names = [s[0] for s in ins]
    with torch.no_grad():
        if exporter == "ts":
            buf = io.BytesIO()
            torch.onnx.export(
                torch.jit.script(model) if getattr(model, "script", False) else model, args, buf, opset_version=opset, input_names=names, output_names=outs, dynamo=False,
                do_constant_folding=True,
            )
            proto = onnx.load_from_string(buf.getvalue())
        else:
            prog = torch.onnx.export(
                model, args, opset_version=opset, input_names=names, output_names=outs, dynamo=True,
                optimize=True, verbose=False,
            )
            proto = prog.model_proto
    large_constants_to_initializers(proto.graph)
    drop_annotations(proto)
    # Check the export with ORT before stripping: torch and ORT agree on the real weights.
    check_with_ort(proto, model, args, name)
    count, nbytes = strip(proto)
    for s in ins:
        entry = proto.metadata_props.add()
        entry.key = f"rivet-input:{s[0]}"
        entry.value = f"{s[1]} {','.join(map(str, s[2]))} {s[3]} {s[4]} {s[5]}"
    path = os.path.join(HERE, f"{name}_op{opset}.onnx")
    onnx.save(proto, path)
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{name}_op{opset} ({exporter}): {os.path.getsize(path)} bytes, {count} initializers ({nbytes} bytes) "
          f"stripped, {len(proto.graph.node)} nodes: {' '.join(ops)}")


def check_with_ort(proto, model, args, name):
    try:
        import onnxruntime as ort
    except ImportError:
        return
    s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(s.get_inputs(), args)}
    got = s.run(None, feeds)
    with torch.no_grad():
        want = model(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    worst = max(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want))
    assert worst < 1e-2, f"{name}: ORT and torch differ by {worst}"


def main():
    wanted = sys.argv[1:]
    for name, (factory, exports) in MODELS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        for opset, exporter in exports:
            export(name, factory, opset, exporter)


if __name__ == "__main__":
    main()
