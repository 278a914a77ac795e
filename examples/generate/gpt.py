"""A GPT-style decoder with a key/value cache, as torch.onnx exports one.

The model of examples/generate (train.py), of tests/models (its "decoder")
and of bench/decoder.py (GPT-2 small's shape): token and learned position
embeddings (positions P..P+S-1), pre-norm blocks of causal self-attention
over the cache (the mask's diagonal T - S = P) and a GELU MLP, a final layer
norm and logits by the tied embedding. forward(ids [B, S], *past) takes
each layer's past keys and values [B, heads, P, width / heads] and returns
(logits [B, S, vocab], *present), the cache grown to P + S.
"""
import warnings

import torch
from torch import nn


class GPT(nn.Module):
    def __init__(self, vocab, width, heads, layers, positions, gelu="none"):
        super().__init__()
        self.width, self.heads, self.layers = width, heads, layers
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(positions, width)
        self.blocks = nn.ModuleList([nn.ModuleDict({
            "ln1": nn.LayerNorm(width), "qkv": nn.Linear(width, 3 * width), "proj": nn.Linear(width, width),
            "ln2": nn.LayerNorm(width), "mlp": nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate=gelu),
                                                              nn.Linear(4 * width, width))}) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)

    def forward(self, ids, *past):
        b, s = ids.shape
        p, e, d = past[0].shape[2], self.width, self.width // self.heads
        x = self.wte(ids) + self.wpe(torch.arange(p, p + s))[None]
        present = []
        for i, blk in enumerate(self.blocks):
            q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in blk["qkv"](blk["ln1"](x)).split(e, -1))
            k, v = torch.cat([past[2 * i], k], 2), torch.cat([past[2 * i + 1], v], 2)
            t = k.shape[2]
            a = (q @ k.transpose(-1, -2)) / d ** 0.5
            a = a.masked_fill(~torch.ones(s, t, dtype=torch.bool).tril(t - s), float("-inf")).softmax(-1)
            x = x + blk["proj"]((a @ v).transpose(1, 2).reshape(b, s, e))
            x = x + blk["mlp"](blk["ln2"](x))
            present += [k, v]
        return (self.ln_f(x) @ self.wte.weight.T, *present)

    def cache(self, batch=1, length=0):
        """An all-zero cache of length entries per layer."""
        return [torch.zeros(batch, self.heads, length, self.width // self.heads) for _ in range(2 * self.layers)]

    def input_names(self):
        return ["ids"] + ["past%d" % i for i in range(2 * self.layers)]

    def export(self, path, opset=17, batch="B", args=None):
        """torch.onnx.export with B, S and P dynamic: the inputs ids and
        pastK, the outputs logits and presentK (their length named "P + S").
        batch names the batch axis; args, the example (default 1 x 2 new
        ids over a cache of 3)."""
        dynamic = {"ids": {0: batch, 1: "S"}, "logits": {0: batch, 1: "S"}}
        for i in range(2 * self.layers):
            dynamic["past%d" % i] = {0: batch, 2: "P"}
            dynamic["present%d" % i] = {0: batch, 2: "P + S"}
        if args is None:
            args = (torch.zeros(1, 2, dtype=torch.long),) + tuple(self.cache(1, 3))
        outputs = ["logits"] + ["present%d" % i for i in range(2 * self.layers)]
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(self, args, path, input_names=self.input_names(), output_names=outputs,
                              dynamic_axes=dynamic, opset_version=opset, do_constant_folding=True)
