#!/usr/bin/python3
"""The inputs of bench/encoder_layer.bench.sh.

    encoder_layer.py OUTDIR --batch B --seq S

Exports tests/models/export.py's transformer encoder layer (d_model 64, 4
heads, feed-forward 128, GELU, norm_first, fixed weights) to OUTDIR/encoder.onnx
with a sequence length of S, and writes its input OUTDIR/encoder.x.npy
(f32[B, S, 64]), torch's output OUTDIR/encoder.y.npy, and the weights of
bench/encoder_layer.basm, the same layer written by hand, as OUTDIR/NAME.npy
(LINEAR's [in, out] layout: torch's weight transposed).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "models"))
import export  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    layer = export.export_model("encoder", args.outdir, 17, batch=args.batch, seq=args.seq)
    e = layer.self_attn.embed_dim
    w_in = layer.self_attn.in_proj_weight.detach().numpy()
    b_in = layer.self_attn.in_proj_bias.detach().numpy()
    weights = {
        "g1": layer.norm1.weight, "be1": layer.norm1.bias,
        "wq": w_in[:e].T, "bq": b_in[:e],
        "wk": w_in[e:2 * e].T, "bk": b_in[e:2 * e],
        "wv": w_in[2 * e:].T, "bv": b_in[2 * e:],
        "wo": layer.self_attn.out_proj.weight.detach().numpy().T, "bo": layer.self_attn.out_proj.bias,
        "g2": layer.norm2.weight, "be2": layer.norm2.bias,
        "w1": layer.linear1.weight.detach().numpy().T, "b1": layer.linear1.bias,
        "w2": layer.linear2.weight.detach().numpy().T, "b2": layer.linear2.bias,
    }
    for name, w in weights.items():
        w = w.detach().numpy() if hasattr(w, "detach") else w
        np.save(os.path.join(args.outdir, name + ".npy"), np.ascontiguousarray(w, dtype=np.float32))


if __name__ == "__main__":
    main()
