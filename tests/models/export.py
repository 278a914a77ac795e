#!/usr/bin/python3
"""Export the PyTorch models that tests/models/check.py runs through bib-onnx.

    export.py OUTDIR [--opset N] [MODEL...]

Writes, for each model (mlp, encoder, cnn, resnet, decoder, rope): OUTDIR/NAME.onnx,
exported with torch.onnx.export offline with a dynamic batch axis (the
decoders' new and cached lengths dynamic too); OUTDIR/NAME.x.npy, the input,
batch 7 (a decoder's: NAME.ids.npy and NAME.pastK.npy, its cache);
OUTDIR/NAME.y.npy, torch's output for it (a decoder's logits), and
OUTDIR/NAME.out.OUTPUT.npy, each of its outputs (a decoder's grown cache
too). Weights and inputs
come from fixed seeds, so every run writes the same files. Nothing here is
committed: `make test` regenerates the models.
"""
import argparse
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "generate"))
import gpt  # noqa: E402  (examples/generate/gpt.py)

BATCH = 7


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 48),
                                 nn.Tanh(), nn.Linear(48, 10))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    """[N,1,16,16] -> [N,10]: two Conv2d/ReLU/MaxPool2d stages, then Linear."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class ResNet(nn.Module):
    """[N,3,12,12] -> [N,10]: a residual block with a reflect-padded Conv2d,
    BatchNorm2d and ReLU, torch's default AvgPool2d with padding (Pad, then
    AveragePool: the padded zeros count), and features standardised with
    torch's unbiased std before a Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.conv = nn.Conv2d(8, 8, kernel_size=3, padding=1, padding_mode="reflect")
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AvgPool2d(3, stride=2, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 10)
        with torch.no_grad():  # running statistics other than 0 and 1
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = torch.relu(h + self.bn(self.conv(h)))
        f = torch.flatten(self.pool(h), 1)
        f = (f - f.mean(1, keepdim=True)) / f.std(1, keepdim=True)
        return self.fc(f)


def decoder():
    """examples/generate/gpt.py's GPT with a key/value cache: ids [N,3] and
    each of two layers' past keys and values [N,4,5,8] -> the logits y
    [N,3,50] and the grown cache [N,4,8,8]; the new and cached lengths
    dynamic too."""
    return gpt.GPT(vocab=50, width=32, heads=4, layers=2, positions=64, gelu="tanh")


class RMSNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class RoPEDecoder(gpt.GPT):
    """The decoder in LLaMA's form, with the same cache as GPT's: rotary
    position embeddings (cos and sin of the positions P..P+S-1 times the
    inverse frequencies, rotate_half by Slice, Neg and Concat), RMSNorm and
    a SiLU-gated MLP, no biases."""

    def __init__(self, vocab=50, width=32, heads=4, layers=2):
        nn.Module.__init__(self)
        self.width, self.heads, self.layers = width, heads, layers
        d = width // heads
        self.emb, self.norm, self.head = nn.Embedding(vocab, width), RMSNorm(width), nn.Linear(width, vocab, bias=False)
        self.blocks = nn.ModuleList([nn.ModuleDict({
            "n1": RMSNorm(width), "q": nn.Linear(width, width, bias=False), "k": nn.Linear(width, width, bias=False),
            "v": nn.Linear(width, width, bias=False), "o": nn.Linear(width, width, bias=False), "n2": RMSNorm(width),
            "gate": nn.Linear(width, 3 * width, bias=False), "up": nn.Linear(width, 3 * width, bias=False),
            "down": nn.Linear(3 * width, width, bias=False)}) for _ in range(layers)])
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))

    def forward(self, ids, *past):
        b, s = ids.shape
        p, d = past[0].shape[2], self.width // self.heads
        f = torch.outer(torch.arange(p, p + s).float(), self.inv_freq)
        angles = torch.cat([f, f], -1)
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]

        def rotate(t):
            lo, hi = t.chunk(2, -1)
            return t * cos + torch.cat([-hi, lo], -1) * sin

        x, present = self.emb(ids), []
        for i, blk in enumerate(self.blocks):
            h = blk["n1"](x)
            q, k, v = (blk[n](h).view(b, s, self.heads, d).transpose(1, 2) for n in ("q", "k", "v"))
            k = torch.cat([past[2 * i], rotate(k)], 2)
            v = torch.cat([past[2 * i + 1], v], 2)
            t = k.shape[2]
            a = (rotate(q) @ k.transpose(-1, -2)) / d ** 0.5
            a = a.masked_fill(~torch.ones(s, t, dtype=torch.bool).tril(t - s), float("-inf")).softmax(-1)
            x = x + blk["o"]((a @ v).transpose(1, 2).reshape(b, s, self.width))
            h = blk["n2"](x)
            x = x + blk["down"](nn.functional.silu(blk["gate"](h)) * blk["up"](h))
            present += [k, v]
        return (self.head(self.norm(x)), *present)


DECODER_NEW, DECODER_PAST = 3, 5
CACHED = ("decoder", "rope")  # the models with a key/value cache


def encoder():
    return nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                      activation="gelu", norm_first=True, batch_first=True)


# name -> (constructor, input shape after the batch axis; None: inputs_of says)
MODELS = {
    "mlp": (MLP, (32,)),
    "encoder": (encoder, (10, 64)),
    "cnn": (CNN, (1, 16, 16)),
    "resnet": (ResNet, (3, 12, 12)),
    "decoder": (decoder, None),
    "rope": (RoPEDecoder, None),
}


def output_names(name):
    """The model's graph outputs, in order: each is OUTDIR/NAME.out.OUTPUT.npy
    (torch's), and the first also OUTDIR/NAME.y.npy."""
    if name in CACHED:
        return ["logits"] + ["present%d" % i for i in range(2 * MODELS[name][0]().layers)]
    return ["y"]


def input_names(name):
    """The model's graph inputs, in order; each is OUTDIR/NAME.INPUT.npy."""
    return MODELS[name][0]().input_names() if name in CACHED else ["x"]


def build(name, batch=BATCH, seq=None):
    """Model NAME with its fixed weights, and its inputs: [x] (batch rows;
    the encoder's sequence length seq, default 10), or the decoder's ids and
    cache."""
    make, shape = MODELS[name]
    if seq is not None and shape is not None:
        shape = (seq,) + shape[1:]
    torch.manual_seed(14)
    model = make().eval()
    # Default initialisation leaves biases at 0 and norm weights at 1, which would
    # hide a swapped gamma and beta (and the exporter folds equal initialisers
    # into one): every parameter gets noise of its own.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    if shape is None:  # a decoder: token ids (i32, as BIB takes them) and a cache
        rng = np.random.default_rng(14)
        vocab = model.wte.num_embeddings if hasattr(model, "wte") else model.emb.num_embeddings
        xs = [rng.integers(0, vocab, (batch, DECODER_NEW)).astype(np.int32)]
        xs += [rng.standard_normal(c.shape).astype(np.float32) for c in model.cache(batch, DECODER_PAST)]
        return model, xs
    x = np.random.default_rng(14).standard_normal((batch,) + shape).astype(np.float32)
    return model, [x]


def export_model(name, outdir, opset, batch=BATCH, seq=None):
    """Write OUTDIR/NAME.onnx, NAME.INPUT.npy for each of input_names(name),
    NAME.out.OUTPUT.npy for each of output_names(name) and NAME.y.npy, the
    first output (see the module's doc); returns the model."""
    os.makedirs(outdir, exist_ok=True)
    model, xs = build(name, batch, seq)
    names = input_names(name)
    args = tuple(torch.from_numpy(x.astype(np.int64) if x.dtype == np.int32 else x) for x in xs)
    # With grad enabled, nn.TransformerEncoderLayer takes its module path (the
    # one the export traces), not the fused inference kernel.
    out = model(*args)
    outs = [t.detach().numpy() for t in (out if isinstance(out, tuple) else (out,))]
    path = os.path.join(outdir, name + ".onnx")
    if name in CACHED:
        model.export(path, opset, batch="batch", args=args)
    else:
        torch.onnx.export(model, args, path, input_names=names, output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=opset,
                          do_constant_folding=True)
    for n, x in zip(names, xs):
        np.save(os.path.join(outdir, "%s.%s.npy" % (name, n)), x)
    for n, y in zip(output_names(name), outs):
        np.save(os.path.join(outdir, "%s.out.%s.npy" % (name, n)), y)
    np.save(os.path.join(outdir, name + ".y.npy"), outs[0])
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("models", nargs="*", default=list(MODELS))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for name in args.models:
        if name not in MODELS:
            sys.exit("export.py: unknown model '%s' (known: %s)" % (name, ", ".join(MODELS)))
        export_model(name, args.outdir, args.opset)


if __name__ == "__main__":
    main()
