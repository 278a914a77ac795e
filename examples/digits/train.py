#!/usr/bin/python3
"""Train a 64-32-10 MLP on scikit-learn's bundled digits with torch, and export it.

    train.py OUTDIR

Writes OUTDIR/digits.onnx (inputs "x" f32[batch, 64]; outputs "logits"
f32[batch, 10] and "label", the ArgMax of the logits), OUTDIR/images.npy (all
1,797 8x8 images, f32[1797, 64], pixels 0..16 divided by 16, which is exact),
OUTDIR/labels.npy (the true digits), OUTDIR/held_out.npy (the indices of the
597 images kept out of training) and OUTDIR/torch_labels.npy (torch's own
predictions from the trained model, which `bib run` must reproduce).

sklearn.datasets.load_digits reads a file shipped with scikit-learn: no
network. Seeds are fixed and torch runs on one thread, so every run trains
the same weights; it takes a few seconds of CPU.
"""
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

TRAIN = 1200  # the first 1200 images (after a fixed shuffle) train; the other 597 are held out
EPOCHS = 300


class Digits(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        logits = self.net(x)
        return logits, torch.argmax(logits, dim=1)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: train.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(images))
    train = order[:TRAIN]

    model = Digits()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.from_numpy(images[train])
    y = torch.from_numpy(labels[train])
    for _ in range(EPOCHS):  # full batch: a few seconds
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x)[0], y)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        predicted = model(torch.from_numpy(images))[1].numpy()
    torch.onnx.export(model, torch.from_numpy(images[:2]), os.path.join(out, "digits.onnx"),
                      input_names=["x"], output_names=["logits", "label"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}, "label": {0: "batch"}},
                      opset_version=17)
    np.save(os.path.join(out, "images.npy"), images)
    np.save(os.path.join(out, "labels.npy"), labels)
    np.save(os.path.join(out, "torch_labels.npy"), predicted)
    held = np.sort(order[TRAIN:])
    np.save(os.path.join(out, "held_out.npy"), held)
    print("torch: loss %.4f after %d epochs on %d images; accuracy %.2f%% on the %d held out"
          % (loss.item(), EPOCHS, TRAIN, 100.0 * (predicted[held] == labels[held]).mean(), len(held)))


if __name__ == "__main__":
    main()
