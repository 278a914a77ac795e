#!/usr/bin/python3
"""tools/make-npy.py: demo inputs for examples/mlp.basm.

usage: make-npy.py DIR [--n N] [--d D] [--h H] [--o O] [--seed S]

Writes DIR/x.npy (f32[n, d]), DIR/W1.npy (f32[d, h]), DIR/b1.npy (f32[h]),
DIR/W2.npy (f32[h, o]) and DIR/b2.npy (f32[o]), C order, little-endian,
from a seeded generator, so the same arguments give the same files.
"""
import argparse
import os

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--d", type=int, default=96)
    p.add_argument("--h", type=int, default=64)
    p.add_argument("--o", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.dir, exist_ok=True)
    arrays = {
        "x": rng.standard_normal((a.n, a.d)),
        "W1": rng.standard_normal((a.d, a.h)) / np.sqrt(a.d),
        "b1": rng.standard_normal(a.h) * 0.1,
        "W2": rng.standard_normal((a.h, a.o)) / np.sqrt(a.h),
        "b2": rng.standard_normal(a.o) * 0.1,
    }
    for name, value in arrays.items():
        np.save(os.path.join(a.dir, name + ".npy"), value.astype("<f4"))
    print(f"wrote x{list(arrays['x'].shape)} W1{list(arrays['W1'].shape)} "
          f"b1{list(arrays['b1'].shape)} W2{list(arrays['W2'].shape)} "
          f"b2{list(arrays['b2'].shape)} to {a.dir}")


if __name__ == "__main__":
    main()
