#!/usr/bin/python3
"""Export the PyTorch models that tests/models/check.py runs through bib-onnx.

    export.py OUTDIR [--opset N] [MODEL...]

Writes, for each model (mlp, encoder, cnn, resnet, decoder): OUTDIR/NAME.onnx,
exported with torch.onnx.export offline with a dynamic batch axis (the
decoder's new and cached lengths dynamic too); OUTDIR/NAME.x.npy, the input,
batch 7 (the decoder's: NAME.ids.npy and NAME.pastK.npy, its cache);
OUTDIR/NAME.y.npy, torch's output for it (the decoder's logits). Weights and inputs
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


DECODER_NEW, DECODER_PAST = 3, 5


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
}


def output_names(name):
    """The model's graph outputs, in order: each is OUTDIR/NAME.out.OUTPUT.npy
    (torch's), and the first also OUTDIR/NAME.y.npy."""
    if name == "decoder":
        return ["logits"] + ["present%d" % i for i in range(2 * decoder().layers)]
    return ["y"]


def input_names(name):
    """The model's graph inputs, in order; each is OUTDIR/NAME.INPUT.npy."""
    return decoder().input_names() if name == "decoder" else ["x"]


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
    if shape is None:  # the decoder: token ids (i32, as BIB takes them) and a cache
        rng = np.random.default_rng(14)
        xs = [rng.integers(0, model.wte.num_embeddings, (batch, DECODER_NEW)).astype(np.int32)]
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
    if name == "decoder":
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
