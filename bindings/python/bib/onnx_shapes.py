"""Lowering of the ONNX ops that move data or compute shapes for the importer
(onnx_import.py): Transpose, Resize, Reshape, Squeeze, Shape, Cast, Concat,
Slice, Split, Gather, Expand, Tile and their kin."""

import numpy as np
from onnx import TensorProto, numpy_helper

from .onnx_common import (
    _bib_dtype, broadcast_shapes, dim_div, dim_mul, dims_prod, _DTYPE_NAME, is_static,
    library_broadcasts, MAX_RANK, _np_for, shape_text, dim_sign, dim_sub, dim_sum, Sym, Val)


class ShapeOps:
    """The Importer's op_ methods for shapes and data movement."""

    # shapes and data movement
    def permute(self, node, v, perm):
        rank = len(v.shape)
        shape = [v.shape[p] for p in perm]
        if perm == list(range(rank)):
            return v
        if v.const and v.array.dtype != object:
            return self.const_val(np.ascontiguousarray(np.transpose(v.array, perm)), v.onnx_type)
        # Axes of size 1 may move freely: a view when the others keep their order.
        moved = [p for p in perm if v.shape[p] != 1]
        if moved == sorted(moved):
            return self.reshape(node, v, shape)
        if perm[:-2] == list(range(rank - 2)):
            return self.transpose_last2(node, v)
        self.need(node, "PERMUTE", "a permutation other than the last two axes")
        out = self.rt(shape, v.dtype, v.onnx_type)
        self.scalar(rank)
        for k, p in enumerate(perm):
            self.load_int(("scratch", k), p)
        self.emit("PERMUTE", out.reg, self.reg_of(node, v), ("scratch", 0), rank)
        return out

    def op_Transpose(self, node):
        x = self.get(node, 0)
        rank = len(x.shape)
        perm = node.attr("perm")
        if perm is None:
            perm = list(reversed(range(rank)))
        else:
            perm = [self.axis_of(node, p, rank, "perm entry") for p in perm]
        if sorted(perm) != list(range(rank)):
            self.refuse(node, "attribute 'perm' %s is not a permutation of %d axes" % (perm, rank))
        self.set(node, 0, self.permute(node, x, perm))

    def op_Resize(self, node):
        """Resize is separable: along each resized axis the result is a
        constant matrix times the input, computed here with the formulas of
        ONNX's reference (coordinate transform, neighbours with edge
        padding, nearest / linear / cubic coefficients). Nearest becomes
        GATHER_AXIS of the chosen indices (exact); linear and cubic a MATMUL
        by the matrix along that axis."""
        x = self.get(node, 0)
        self.f32_only(node, x)
        rank = len(x.shape)
        mode = node.attr("mode", "nearest")
        ctm = node.attr("coordinate_transformation_mode", "half_pixel")
        nearest = node.attr("nearest_mode", "round_prefer_floor")
        a = node.attr("cubic_coeff_a", -0.75)
        exclude = node.attr("exclude_outside", 0)
        node.attr("extrapolation_value")
        if ctm not in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
            self.refuse(node, "attribute 'coordinate_transformation_mode' = '%s'" % ctm)
        if mode not in ("nearest", "linear", "cubic"):
            self.refuse(node, "attribute 'mode' = '%s'" % mode)
        if node.op == "Upsample" or self.opset < 11:
            # Upsample and Resize-10: scales (an attribute before opset 9),
            # the asymmetric transform, nearest rounding down.
            ctm, nearest = "asymmetric", "floor"
            sizes = None
            scales = node.attr("scales")
            scales = np.array(scales) if scales is not None else self.const_input(node, 1, "the scales")
            if mode == "nearest" and any(abs(f - round(f)) > 0 or f < 1 for f in scales.reshape(-1)):
                self.refuse(node, "nearest with a scale that is not a whole number before opset 11")
        else:
            scales = self.const_input(node, 2, "the scales", optional=True) if len(node.inputs) > 2 else None
            sizes = self.const_input(node, 3, "the sizes", optional=True) if len(node.inputs) > 3 else None
            if node.inputs[1:2] and node.inputs[1]:
                self.const_input(node, 1, "the roi")  # read only by tf_crop_and_resize
        # Only the resized axes need static sizes: an axis kept as it is
        # (factor 1, or a size that is the input's own dim, as torch builds
        # sizes from Shape(x)[:2]) may be dynamic, a batch or channels.
        if sizes is not None and sizes.size:
            out = [v if isinstance(v, Sym) else int(v) for v in sizes.reshape(-1).tolist()]
            if len(out) == rank:
                factors = [1.0 if o == i else None if isinstance(o, Sym) or isinstance(i, Sym) else o / i
                           for o, i in zip(out, x.shape)]
        elif scales is not None and scales.size:
            if scales.dtype == object:
                self.ints_of(node, scales, "the scales", "the scales")
            factors = [float(v) for v in scales.reshape(-1)]
            out = [i if f == 1.0 else None if isinstance(i, Sym) else int(np.floor(i * f))
                   for i, f in zip(x.shape, factors)]
        else:
            self.refuse(node, "neither scales nor sizes", "attribute")
        if len(out) != rank:
            self.refuse(node, "%d scales for a rank-%d input" % (len(out), rank), "shape")
        for k in range(rank):
            if factors[k] is None or out[k] is None:
                self.refuse(node, "resizing the dynamic axis %d (of size %s): only the resized axes must be static"
                            % (k, x.shape[k]), "shape")
        v = x
        for k in range(rank):
            if out[k] == x.shape[k] and factors[k] == 1.0:
                continue
            m = _resize_matrix(x.shape[k], out[k], factors[k], mode, ctm, nearest, a, exclude)
            if mode == "nearest":
                idx = self.const_val(m.argmax(axis=1).astype(np.int64))
                self.need(node, "GATHER_AXIS")
                shape = list(v.shape)
                shape[k] = out[k]
                res = self.rt(shape, "f32")
                self.emit("GATHER_AXIS", res.reg, self.reg_of(node, v), self.reg_of(node, idx), k)
                v = res
            elif k == rank - 1:
                v = self.matmul(node, v, self.const_val(np.ascontiguousarray(m.T.astype(np.float32))))
            elif k == rank - 2:
                v = self.matmul(node, self.const_val(m.astype(np.float32)), v)
            else:
                perm = [j for j in range(rank) if j != k] + [k]
                mt = self.const_val(np.ascontiguousarray(m.T.astype(np.float32)))
                t = self.matmul(node, self.permute(node, v, perm), mt)
                v = self.permute(node, t, [perm.index(j) for j in range(rank)])
        if v is x:
            v = self.unary(node, "COPY", x)
        self.set(node, 0, v)

    op_Upsample = op_Resize

    def op_DepthToSpace(self, node):
        x = self.get(node, 0)
        bs = int(node.attr("blocksize"))
        mode = node.attr("mode", "DCR")
        if len(x.shape) != 4 or mode not in ("DCR", "CRD"):
            self.refuse(node, "attribute 'mode' = %s or a rank-%d input" % (mode, len(x.shape)), "attribute")
        b, c, h, w = x.shape
        c2 = dim_div(c, bs * bs)
        if c2 is None:
            self.refuse(node, "channels %s are not a multiple of blocksize^2" % c, "shape")
        if mode == "DCR":
            v = self.reshape(node, x, [b, bs, bs, c2, h, w])
            v = self.permute(node, v, [0, 3, 4, 1, 5, 2])
        else:
            v = self.reshape(node, x, [b, c2, bs, bs, h, w])
            v = self.permute(node, v, [0, 1, 4, 2, 5, 3])
        self.set(node, 0, self.reshape(node, v, [b, c2, dim_mul(h, bs), dim_mul(w, bs)]))

    def op_SpaceToDepth(self, node):
        x = self.get(node, 0)
        bs = int(node.attr("blocksize"))
        if len(x.shape) != 4:
            self.refuse(node, "a rank-%d input" % len(x.shape), "shape")
        b, c, h, w = x.shape
        h2, w2 = dim_div(h, bs), dim_div(w, bs)
        if h2 is None or w2 is None:
            self.refuse(node, "spatial dims %s, %s are not multiples of the blocksize" % (h, w), "shape")
        v = self.reshape(node, x, [b, c, h2, bs, w2, bs])
        v = self.permute(node, v, [0, 3, 5, 1, 2, 4])
        self.set(node, 0, self.reshape(node, v, [b, dim_mul(c, bs * bs), h2, w2]))

    def op_Reshape(self, node):
        x = self.get(node, 0)
        shape = self.const_input(node, 1, "the shape")
        allowzero = node.attr("allowzero", 0)
        out = []
        infer = None
        for k, d in enumerate(shape.reshape(-1).tolist()):
            if isinstance(d, int) and d == -1:
                if infer is not None:
                    self.refuse(node, "two -1 entries in the shape", "attribute")
                infer = k
                out.append(1)
            elif isinstance(d, int) and d == 0 and not allowzero:
                if k >= len(x.shape):
                    self.refuse(node, "shape entry %d is 0 past the input's rank" % k, "attribute")
                out.append(x.shape[k])
            else:
                if dim_sign(d) == -1:
                    self.refuse(node, "shape entry %d is %s, a negative size" % (k, d), "shape")
                out.append(d)
        total = dims_prod(x.shape)
        if infer is not None:
            rest = dims_prod(out)
            q = dim_div(total, rest)
            if q is None:
                self.refuse(node, "cannot infer the -1 entry of the shape from %s" % shape_text(x.shape), "shape")
            out[infer] = q
        if dims_prod(out) != total:
            self.refuse(
                node, "shape %s does not hold the %s elements of %s" % (shape_text(out), total, shape_text(x.shape)),
                "shape")
        self.set(node, 0, self.reshape(node, x, out))

    def op_Flatten(self, node):
        x = self.get(node, 0)
        axis = node.attr("axis", 1)
        rank = len(x.shape)
        axis = axis + rank if axis < 0 else axis
        self.set(node, 0, self.reshape(node, x, [dims_prod(x.shape[:axis]), dims_prod(x.shape[axis:])]))

    def axes_of(self, node, k, rank, attr="axes"):
        axes = node.attr(attr)
        if axes is None and len(node.inputs) > k and node.inputs[k]:
            axes = self.const_ints(node, k, "the axes")
        if axes is None:
            return None
        return [self.axis_of(node, int(a), rank, "axis") for a in axes]

    def op_Squeeze(self, node):
        x = self.get(node, 0)
        axes = self.axes_of(node, 1, len(x.shape))
        if axes is None:
            axes = [k for k, d in enumerate(x.shape) if d == 1]
        for a in axes:
            if x.shape[a] != 1:
                self.refuse(node, "axis %d has size %s, not 1" % (a, x.shape[a]), "shape")
        self.set(node, 0, self.reshape(node, x, [d for k, d in enumerate(x.shape) if k not in axes]))

    def op_Unsqueeze(self, node):
        x = self.get(node, 0)
        n = len(x.shape)
        axes = node.attr("axes")
        if axes is None:
            axes = self.const_ints(node, 1, "the axes")
        rank = n + len(axes)
        axes = sorted(self.axis_of(node, int(a), rank) for a in axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        self.set(node, 0, self.reshape(node, x, shape))

    def op_Shape(self, node):
        x = self.get(node, 0)
        rank = len(x.shape)
        start = node.attr("start", 0)
        end = node.attr("end", rank)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        dims = x.shape[start:end]
        arr = np.array(dims, np.int64) if is_static(dims) else np.array(dims, object)
        self.set(node, 0, self.const_val(arr, TensorProto.INT64))

    def op_Size(self, node):
        x = self.get(node, 0)
        n = dims_prod(x.shape)
        self.set(node, 0, self.const_val(np.array(n, np.int64 if isinstance(n, int) else object), TensorProto.INT64))

    def op_ConstantOfShape(self, node):
        shape = self.const_input(node, 0, "the shape").reshape(-1).tolist()
        value = node.attr("value")
        arr = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
        et = value.data_type if value is not None else TensorProto.FLOAT
        if all(isinstance(d, int) for d in shape):
            self.set(node, 0, self.const_val(np.full(shape, arr[0], arr.dtype), et))
            return
        dtype = _bib_dtype(et)
        if dtype is None:
            self.refuse(node, "attribute 'value' of type %s" % _DTYPE_NAME.get(et), "dtype")
        self.set(node, 0, self.filled(node, shape, dtype, et, arr[0]))

    def filled(self, node, shape, dtype, onnx_type, value):
        """A tensor of shape (dims may be dynamic) with every element value,
        made at run time (ALLOC and FILL): nothing stored in the module."""
        out = self.rt(shape, dtype, onnx_type)
        r = self.load_dims(node, shape)
        self.emit("ALLOC", out.reg, 1 if dtype == "f32" else 2, r, len(shape))
        self.scalar(len(shape) + 1)
        slot = ("scratch", len(shape))
        if dtype == "f32":
            self.load_f64(slot, float(value))
        else:
            self.load_int(slot, value if isinstance(value, Sym) else int(value))
        self.emit("FILL", out.reg, slot)
        return out

    def const_or_positions(self, node, n):
        """0..n-1 as an int64 value: a constant for a static n, else made
        at run time (positions)."""
        if isinstance(n, int):
            return self.const_val(np.arange(n, dtype=np.int64))
        return self.positions(node, n)

    def positions(self, node, n, onnx_type=TensorProto.INT64):
        """0..n-1 (n a dynamic dim) as a tensor [n] made at run time, i32 or
        (onnx_type FLOAT) f32, exact, with no bound below int32's: in base
        256 from a constant 0..255, four digits (256^4 = 2^32). Each step
        takes the positions p so far, c of them, to
        (p[:, None] * 256 + digits[None, :]) flattened, cut to the next
        count: ceil(n / 256^3), ceil(n / 256^2), ceil(n / 256), then n.
        Integer products and sums are exact; f32 of a position below 2^24
        too."""
        self.need_i32(node, "TMUL")
        for m in ("SLICE", "TMUL", "TADD"):
            self.need(node, m, "the positions of a dynamic axis")
        base, bits, levels = 256, 8, 4
        if getattr(self, "_digits", None) is None:
            self._digits = self.const_val(np.arange(base, dtype=np.int32), TensorProto.INT32)
            self._base = self.const_val(np.array([base], np.int32), TensorProto.INT32)
        digits, radix = self._digits, self._base
        self.scalar(12)
        # Scratch 0..2: a SLICE's bounds or a RESHAPE's sizes; 8..11: the
        # counts, the last n itself.
        counts = [("scratch", 8 + k) for k in range(levels)]
        self.load_int(counts[-1], n)
        for k in range(levels - 1):
            shift = bits * (levels - 1 - k)
            self.emit("ADDI", counts[k], counts[-1], (1 << shift) - 1)
            self.emit("SHRI", counts[k], counts[k], shift)

        def cut(v, count):
            out = self.rt([n], "i32", TensorProto.INT32)
            self.emit("LDI", ("scratch", 0), 0)
            self.emit("MOV", ("scratch", 1), count)
            self.emit("LDI", ("scratch", 2), 1)
            self.emit("SLICE", out.reg, self.reg_of(node, v), ("scratch", 0), 1)
            return out

        p = cut(digits, counts[0])
        for prev, count in zip(counts[:-1], counts[1:]):
            col = self.rt([n, 1], "i32", TensorProto.INT32)
            self.emit("MOV", ("scratch", 0), prev)
            self.emit("LDI", ("scratch", 1), 1)
            self.emit("RESHAPE", col.reg, p.reg, ("scratch", 0), 2)
            high = self.rt([n, 1], "i32", TensorProto.INT32)
            self.emit("TMUL", high.reg, col.reg, self.reg_of(node, radix))
            if not library_broadcasts():
                self.need(node, "EXPAND")
                wide = self.rt([n, base], "i32", TensorProto.INT32)
                self.emit("LDI", ("scratch", 1), base)
                self.emit("EXPAND", wide.reg, high.reg, ("scratch", 0), 2)
                high = wide
            both = self.rt([n, base], "i32", TensorProto.INT32)
            self.emit("TADD", both.reg, high.reg, self.reg_of(node, digits))
            flat = self.rt([n], "i32", TensorProto.INT32)
            self.emit("SHLI", ("scratch", 0), prev, bits)
            self.emit("RESHAPE", flat.reg, both.reg, ("scratch", 0), 1)
            p = cut(flat, count)
        if onnx_type == TensorProto.FLOAT:
            self.need(node, "CAST")
            f = self.rt([n], "f32")
            self.emit("CAST", f.reg, p.reg, 1)
            p = f
        return p

    def concat(self, node, a, b, axis, what=None):
        """a and b joined along axis (CONCAT): the result's size there is the
        sum of theirs, dynamic dims included."""
        self.need(node, "CONCAT", what)
        shape = list(a.shape)
        shape[axis] = dim_sum(a.shape[axis], b.shape[axis])
        out = self.rt(shape, a.dtype, a.onnx_type)
        self.emit("CONCAT", out.reg, self.reg_of(node, a), self.reg_of(node, b), axis)
        return out

    def op_Pad(self, node):
        x = self.get(node, 0)
        rank = len(x.shape)
        mode = node.attr("mode", "constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if self.opset < 11:
            pads = list(node.attr("pads", node.attr("paddings", [0] * (2 * rank))))
            value = node.attr("value", 0.0)
        else:
            pads = self.const_ints(node, 1, "the pads")
            c = self.const_input(node, 2, "the constant value", optional=True)
            value = np.asarray(c).reshape(-1)[0] if c is not None and np.asarray(c).size else 0
        axes = list(range(rank))
        if len(node.inputs) > 3 and node.inputs[3]:
            axes = [self.axis_of(node, a, rank) for a in self.const_ints(node, 3, "the axes")]
        if len(pads) != 2 * len(axes):
            self.refuse(node, "%d pads for %d axes" % (len(pads), len(axes)), "attribute")
        if mode not in ("constant", "reflect", "edge"):
            self.refuse(node, "mode '%s' (constant, reflect and edge are supported)" % mode, "attribute")
        before, after = [0] * rank, [0] * rank
        for k, a in enumerate(axes):
            before[a], after[a] = pads[k], pads[k + len(axes)]
        if x.const and x.array.dtype != object:
            arr = x.array
            crop = tuple(slice(max(-b, 0), arr.shape[k] - max(-e, 0)) for k, (b, e) in enumerate(zip(before, after)))
            arr = arr[crop]
            width = [(max(b, 0), max(e, 0)) for b, e in zip(before, after)]
            if mode == "constant":
                arr = np.pad(arr, width, mode="constant", constant_values=np.asarray(value).astype(arr.dtype))
            else:
                arr = np.pad(arr, width, mode=mode)
            self.set(node, 0, self.const_val(np.ascontiguousarray(arr), x.onnx_type))
            return
        if x.dtype not in ("f32", "i32"):
            self.refuse(node, "input of type %s" % _DTYPE_NAME.get(x.onnx_type), "dtype")
        v = x
        # Negative pads crop first: a Slice of each such axis.
        if any(b < 0 or e < 0 for b, e in zip(before, after)):
            ax = [a for a in range(rank) if before[a] < 0 or after[a] < 0]
            for a in ax:
                if not isinstance(x.shape[a], int):
                    self.refuse(node, "a negative pad on the dynamic axis %d" % a, "shape")
            v = self.slice(node, v, [max(-before[a], 0) for a in ax],
                           [x.shape[a] - max(-after[a], 0) for a in ax], ax, [1] * len(ax))
        for a in range(rank):
            b, e = max(before[a], 0), max(after[a], 0)
            if b == 0 and e == 0:
                continue
            n = v.shape[a]
            if not isinstance(n, int):
                self.refuse(node, "padding the dynamic axis %d" % a, "shape")
            if mode == "constant":
                parts = []
                for width in (b, e):
                    if width == 0:
                        parts.append(None)
                        continue
                    shape = list(v.shape)
                    shape[a] = width
                    parts.append(self.filled(node, shape, v.dtype, v.onnx_type, value))
                acc = v
                for part, first in ((parts[0], True), (parts[1], False)):
                    if part is None:
                        continue
                    acc = self.concat(node, part, acc, a) if first else self.concat(node, acc, part, a)
                v = acc
                continue
            # reflect and edge: one GATHER_AXIS of the padded positions' sources.
            if n == 0 or (mode == "reflect" and (n < 2 or b >= n or e >= n)):
                self.refuse(node, "mode '%s' pads %d and %d on axis %d of size %d" % (mode, b, e, a, n), "shape")
            pos = np.arange(-b, n + e)
            if mode == "edge":
                idx = np.clip(pos, 0, n - 1)
            else:
                idx = np.abs(pos)
                idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
            self.need(node, "GATHER_AXIS")
            shape = list(v.shape)
            shape[a] = len(idx)
            out = self.rt(shape, v.dtype, v.onnx_type)
            self.emit("GATHER_AXIS", out.reg, self.reg_of(node, v), self.reg_of(node, self.const_val(idx)), a)
            v = out
        if v is x:
            v = self.unary(node, "COPY", x)
        self.set(node, 0, v)

    def fold_Trilu(self, node, a):
        if a[0].dtype == object or (len(a) > 1 and a[1] is not None and a[1].dtype == object):
            return None  # op_Trilu refuses it by name
        k = int(np.asarray(a[1]).reshape(-1)[0]) if len(a) > 1 and a[1] is not None else 0
        return [np.triu(a[0], k) if node.attr("upper", 1) else np.tril(a[0], k)]

    def op_Trilu(self, node):
        # The kept triangle of the last two axes is known at import: one
        # WHERE of x against an exact zero, with the triangle as condition.
        # k may be a dynamic dimension (the diagonal of a causal mask over a
        # cache: T - S is the cache's length), loaded at run time.
        x = self.get(node, 0)
        kv = self.const_input(node, 1, "k", optional=True)
        k = np.asarray(kv).reshape(-1)[0] if kv is not None and np.size(kv) else 0
        k = k if isinstance(k, Sym) else int(k)
        upper = node.attr("upper", 1)
        if len(x.shape) < 2:
            self.refuse(node, "an input of rank %d (Trilu needs 2 or more)" % len(x.shape), "shape")
        n, m = x.shape[-2:]
        if isinstance(n, int) and isinstance(m, int) and isinstance(k, int):
            ones = np.ones((n, m), np.int64)
            keep = self.const_val((np.triu(ones, k) if upper else np.tril(ones, k)).astype(np.bool_),
                                  TensorProto.BOOL)
        else:
            # A dynamic matrix axis (a causal mask of a sequence's length):
            # the triangle compares column j with row i + k at run time,
            # j >= i + k above, j <= i + k below, on exact i32 positions.
            def along(d, axis):
                shape = [d, 1] if axis == 0 else [1, d]
                if isinstance(d, int):
                    return self.const_val(np.arange(d, dtype=np.int64).reshape(shape))
                return self.reshape(node, self.const_or_positions(node, d), shape)

            rows, cols = along(n, 0), along(m, 1)
            if isinstance(k, Sym):
                self.need_i32(node, "TADD")
                rows = self.binary(node, "TADD", rows, self.filled(node, [1], "i32", TensorProto.INT64, k))
            elif k != 0:
                if rows.const:
                    rows = self.const_val(rows.array + k)
                else:
                    self.need_i32(node, "TADD")
                    rows = self.binary(node, "TADD", rows, self.const_val(np.array([k], np.int64)))
            keep = self.binary(node, "TGE" if upper else "TLE", cols, rows, out_type=TensorProto.BOOL)
        zero = self.const_val(np.zeros(1, np.float32 if x.dtype == "f32" else np.int64), x.onnx_type)
        self.set(node, 0, self.where(node, keep, x, zero))

    def fold_CumSum(self, node, a):
        x = a[0]
        if x.dtype.kind not in "iu" or a[1].dtype == object:
            return None  # a float sum is the kernel's, in its order
        axis = int(np.asarray(a[1]).reshape(-1)[0])
        v = np.flip(x, axis) if node.attr("reverse", 0) else x
        c = np.cumsum(v, axis=axis, dtype=x.dtype)
        if node.attr("exclusive", 0):
            c = c - v
        return [np.ascontiguousarray(np.flip(c, axis) if node.attr("reverse", 0) else c)]

    def op_CumSum(self, node):
        # CUMSUM (CUMSUM_AXIS on another axis than the last; a library
        # without it moves the axis last and back), its flags ONNX's
        # exclusive and reverse: one add after another, numpy.cumsum's bits.
        x = self.get(node, 0)
        rank = len(x.shape)
        axis = self.axis_of(node, self.const_ints(node, 1, "the axis")[0], rank)
        n = x.shape[axis]
        if x.dtype not in ("f32", "i32"):
            self.refuse(node, "input of type %s" % _DTYPE_NAME.get(x.onnx_type), "dtype")
        reverse, exclusive = node.attr("reverse", 0), node.attr("exclusive", 0)
        flags = (1 if exclusive else 0) | (2 if reverse else 0)
        if axis != rank - 1 and self.have("CUMSUM_AXIS"):
            out = self.rt(x.shape, x.dtype, x.onnx_type)
            self.emit("CUMSUM_AXIS", out.reg, self.reg_of(node, x), axis, flags)
            self.set(node, 0, out)
            return
        if self.have("CUMSUM"):
            v, perm = x, list(range(rank))
            if axis != rank - 1:
                perm = [a for a in range(rank) if a != axis] + [axis]
                v = self.permute(node, x, perm)
            out = self.rt(v.shape, x.dtype, x.onnx_type)
            self.emit("CUMSUM", out.reg, self.reg_of(node, v), flags)
            if axis != rank - 1:
                out = self.permute(node, out, [perm.index(a) for a in range(rank)])
            self.set(node, 0, out)
            return
        # Without CUMSUM: a scan in log2(n) steps (Hillis and Steele), each
        # adding the running sums shifted d places along the axis (d = 1, 2,
        # 4, ...), zeros shifted in. Exact for integers; for floats the order
        # of additions is this tree's, the same on every executor.
        if not isinstance(n, int):
            self.refuse(node, "a running sum along the dynamic axis %d" % axis, "shape")
        big = 1 << 62

        def flip(v):
            return self.slice(node, v, [-1], [-big], [axis], [-1])

        def shifted(v, d):
            # v moved d places up the axis, d zeros first: [0]*d + v[:n-d].
            shape = list(v.shape)
            shape[axis] = d
            zeros = self.filled(node, shape, v.dtype, v.onnx_type, 0)
            if d >= n:
                return self.slice(node, zeros, [0], [n], [axis], [1])
            kept = self.slice(node, v, [0], [n - d], [axis], [1])
            return self.concat(node, zeros, kept, axis)

        v = flip(x) if reverse else x
        if exclusive:
            v = shifted(v, 1)
        d = 1
        while d < n:
            v = self.binary(node, "TADD", v, shifted(v, d))
            d *= 2
        if reverse:
            v = flip(v)
        if v is x:
            v = self.unary(node, "COPY", x)
        self.set(node, 0, v)

    def op_Cast(self, node):
        x = self.get(node, 0)
        to = node.attr("to")
        self.cast(node, x, to)

    def op_CastLike(self, node):
        x = self.get(node, 0)
        like = self.get(node, 1)
        self.cast(node, x, like.onnx_type)

    def cast(self, node, x, to):
        if x.iota is not None and x.reg is None and to in (TensorProto.INT64, TensorProto.INT32, TensorProto.FLOAT):
            out = Val(x.shape, "f32" if to == TensorProto.FLOAT else "i32", to)  # positions stay positions
            out.iota = x.iota
            self.set(node, 0, out)
            return
        if x.const:
            if x.array.dtype == object:
                if to in (TensorProto.INT64, TensorProto.INT32):
                    self.set(node, 0, self.const_val(x.array, to))
                    return
                if to != TensorProto.FLOAT or x.array.size != 1:
                    self.refuse(node, "a cast of dynamic dimensions to %s" % _DTYPE_NAME.get(to), "dtype")
                # One dynamic dimension as a float (x.sum(1) / x.shape[1],
                # a scale of 1 / sqrt(S)): loaded, converted and filled in at
                # run time; exact below 2^24, correctly rounded above.
                shape = list(x.array.shape)
                out = self.rt(shape, "f32", to)
                self.emit("ALLOC", out.reg, 1, self.load_dims(node, shape), len(shape))
                self.scalar(len(shape) + 1)
                slot = ("scratch", len(shape))
                self.load_int(slot, x.array.reshape(-1)[0])
                self.emit("ITOF", slot, slot)
                self.emit("FILL", out.reg, slot)
                out.dim = x.array.reshape(-1)[0]
                self.set(node, 0, out)
                return
            self.set(node, 0, self.const_val(x.array.astype(_np_for(to)), to))
            return
        if (to == TensorProto.DOUBLE and x.onnx_type == TensorProto.FLOAT
                and self.read_only_by(node, ("IsInf", "IsNaN"))):
            # float32 to float64 is exact and keeps every infinity and NaN,
            # so the tests read the float32 tensor itself (torch's
            # nan_to_num casts to double for IsInf).
            self.set(node, 0, x)
            return
        dtype = _bib_dtype(to)
        if dtype is None or x.dtype is None:
            self.refuse(
                node, "attribute 'to' = %s from %s: BIB tensors are f32 or i32" % (
                    _DTYPE_NAME.get(to), _DTYPE_NAME.get(x.onnx_type)), "dtype")
        if to == x.onnx_type or (dtype == x.dtype and to != TensorProto.BOOL and x.onnx_type != TensorProto.BOOL
                                 and not (to in (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
                                                 TensorProto.UINT16))):
            self.set(node, 0, Val(x.shape, x.dtype, to, reg=x.reg))
            return
        if to == TensorProto.BOOL or to not in (TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64):
            self.refuse(node, "attribute 'to' = %s: BIB casts between f32 and i32" % _DTYPE_NAME.get(to), "dtype")
        self.need(node, "CAST")
        out = self.rt(x.shape, dtype, to)
        self.emit("CAST", out.reg, self.reg_of(node, x), 1 if dtype == "f32" else 2)
        self.set(node, 0, out)

    def read_only_by(self, node, ops):
        """Whether the node's first result is read by nodes of ops alone
        (and is not a graph output)."""
        name = node.outputs[0]
        readers = self.consumers.get(name, [])
        return bool(readers) and name not in self.graph_outputs and all(r.op in ops for r in readers)

    def op_Concat(self, node):
        vals = [self.get(node, k) for k in range(len(node.inputs))]
        rank = len(vals[0].shape)
        axis = self.axis_of(node, node.attr("axis"), rank)
        if all(v.const for v in vals):
            self.set(node, 0, self.const_val(np.concatenate([v.array for v in vals], axis), vals[0].onnx_type))
            return
        vals = [v for v in vals if v.shape[axis] != 0] or vals[:1]
        acc = vals[0]
        for v in vals[1:]:
            acc = self.concat(node, acc, v, axis)
        if acc is vals[0] and len(vals) == 1 and not acc.const:
            acc = self.unary(node, "COPY", acc)
        self.set(node, 0, acc)

    def slice(self, node, x, starts, ends, axes, steps):
        rank = len(x.shape)
        triples = [(0, x.shape[k], 1) for k in range(rank)]
        shape = list(x.shape)
        dynamic_bound = False
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = self.axis_of(node, int(a), rank)
            n = x.shape[a]
            if st == 0:
                self.refuse(node, "step 0 on axis %d" % a, "attribute")
            if any(isinstance(v, Sym) for v in (s, e)) and st == 1:
                # Bounds of dynamic dimensions, step 1: [0:S] (pos[:, :S], a
                # table's first S rows), [-S:] (the last S of a cache's
                # P + S: [P:P + S]). SLICE takes them as loaded at run time,
                # with ONNX's rule (a negative bound counts from the end,
                # then both clamp). The result's size is worked out taking
                # each dim as at least 1: a bound negative whatever the
                # symbols are (-S) counts from the end, one that is not (P)
                # from the start, and the axis reaches both. Where that does
                # not hold at run time (S = 0, a table shorter than S), the
                # SLICE still gives ONNX's result, and the shapes of what
                # reads it refuse it.
                bounds, loaded = [], []
                for v, what in ((s, "start"), (e, "end")):
                    to_end = isinstance(v, int) and v >= (1 << 31) - 1
                    sign = 1 if to_end else dim_sign(v)
                    if sign is None:
                        self.refuse(node, "the %s %s on axis %d: a dynamic bound is taken when its sign is known "
                                    "(S, P + 1, -S)" % (what, v, a), "shape")
                    bounds.append(n if to_end else dim_sum(n, v) if sign < 0 else v)
                    loaded.append((1 << 62) if to_end else v)
                if bounds != [0, n]:
                    triples[a] = (loaded[0], loaded[1], 1)
                    shape[a] = dim_sub(bounds[1], bounds[0])
                    dynamic_bound = True
                continue
            if any(isinstance(v, Sym) for v in (s, e, st)):
                self.refuse(node, "the bounds %s:%s:%s on axis %d: of dynamic dimensions, only step 1 is taken"
                            % (s, e, st, a), "shape")
            if not isinstance(n, int):
                # Fixed bounds on a dynamic axis of size S: x[:, :1], x[:, -1:],
                # x[:, 2:5]. The result's size assumes S reaches the bounds;
                # the VM's SLICE clamps to the real S, and a shorter result
                # is refused by the shapes of what reads it (a RESHAPE).
                s, e, st = int(s), int(e), int(st)
                to_end = e >= (1 << 31) - 1
                if st == 1 and s == 0 and to_end:
                    continue
                if st == 1 and s >= 0 and not to_end and e >= 0:
                    count = max(0, e - s)
                elif st == 1 and s < 0 and (to_end or s < e < 0):
                    count = -s if to_end else e - s
                else:
                    self.refuse(node, "the bounds %d:%d:%d on the dynamic axis %d (fixed bounds from the start, "
                                "or counted from the end, step 1, are taken)" % (s, e, st, a), "shape")
                triples[a] = (s, (1 << 62) if to_end else e, 1)
                shape[a] = count
                dynamic_bound = True
                continue
            s, e, st = int(s), int(e), int(st)
            # ONNX's clamping, done here so that the VM sees plain bounds.
            if s < 0:
                s += n
            if e < 0:
                e += n
            if st > 0:
                s = min(max(s, 0), n)
                e = min(max(e, 0), n)
                count = max(0, (e - s + st - 1) // st)
            else:
                s = min(max(s, -1), n - 1)
                e = min(max(e, -1), n - 1)
                count = max(0, (s - e - st - 1) // (-st))
            triples[a] = (s, e, st)
            shape[a] = count
        if x.lazy is not None and not dynamic_bound and \
                all(t == (0, x.shape[k], 1) for k, t in enumerate(triples[:-1])) and triples[-1][2] == 1:
            # Columns s:e of a . W + b are a . W[:, s:e] + b[s:e], the same
            # fma chains: one LINEAR of those columns, no copy.
            a, w, b, act = x.lazy
            s0, e0, _ = triples[-1]
            ws = self.const_val(np.ascontiguousarray(w.array[:, s0:e0]))
            bs = self.const_val(np.ascontiguousarray(b.array[s0:e0]))
            return self.matmul(node, a, ws, bs, act)
        if x.const and x.array.dtype != object and not dynamic_bound:
            idx = tuple(slice(s, e if e >= 0 else None, st) for s, e, st in triples)
            return self.const_val(np.ascontiguousarray(x.array[idx]), x.onnx_type)
        if x.const and not dynamic_bound:
            idx = tuple(slice(s, e if e >= 0 else None, st) for s, e, st in triples)
            return self.const_val(x.array[idx], x.onnx_type)
        if shape == list(x.shape) and all(t[2] == 1 for t in triples):
            return x
        self.need(node, "SLICE")
        out = self.rt(shape, x.dtype, x.onnx_type)
        self.scalar(3 * rank)
        for k, (s, e, st) in enumerate(triples):
            # Bounds are clamped above; a -1 left by a negative step means
            # "before the first element", which the VM's rule (negative
            # counts from the end) reads from -(n+1).
            if st < 0:
                s = -int(x.shape[k]) - 1 if s == -1 else s
                e = -int(x.shape[k]) - 1 if e == -1 else e
            self.load_int(("scratch", 3 * k), s)
            self.load_int(("scratch", 3 * k + 1), e)
            self.load_int(("scratch", 3 * k + 2), st)
        self.emit("SLICE", out.reg, self.reg_of(node, x), ("scratch", 0), rank)
        return out

    def op_Slice(self, node):
        x = self.get(node, 0)
        if "starts" in node.attrs:  # opset < 10
            starts, ends = node.attr("starts"), node.attr("ends")
            axes = node.attr("axes", list(range(len(starts))))
            steps = [1] * len(starts)
        else:
            starts = self.const_input(node, 1, "the starts").reshape(-1).tolist()
            ends = self.const_input(node, 2, "the ends").reshape(-1).tolist()
            # The starts and ends may be dynamic dimensions (x[:, :S]); the
            # axes and steps are ints at import, a dynamic one refused by name.
            a = self.const_ints(node, 3, "the axes", optional=True)
            axes = a if a is not None else list(range(len(starts)))
            s = self.const_ints(node, 4, "the steps", optional=True)
            steps = s if s is not None else [1] * len(starts)
        self.set(node, 0, self.slice(node, x, starts, ends, axes, steps))

    def op_Split(self, node):
        x = self.get(node, 0)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", 0), rank)
        split = node.attr("split")
        if split is None and len(node.inputs) > 1 and node.inputs[1]:
            split = self.const_ints(node, 1, "the split sizes")
        n = x.shape[axis]
        outs = len(node.outputs)
        if split is None:
            if not isinstance(n, int):
                self.refuse(node, "splitting the dynamic axis %d" % axis, "shape")
            if n % outs:
                self.refuse(node, "axis %d of size %d does not split into %d equal parts" % (axis, n, outs), "shape")
            split = [n // outs] * outs
        if not isinstance(n, int):
            # Fixed sizes on a dynamic axis (torch traces x.split(S // 2) to
            # the sizes of the example): ONNX requires them to sum to the
            # axis. x viewed with that sum in its place is a RESHAPE, whose
            # element count the VM checks at run time: another size stops
            # the run there instead of giving parts of the wrong size. The
            # count cannot see the axis when another one is 0, so the axis
            # itself is checked too (a TRAP whose code is the sum).
            shape = list(x.shape)
            shape[axis] = sum(split)
            whole = x
            x = self.reshape(node, x, shape)
            self.check_dim(node, whole, axis, sum(split))
        start = 0
        for k, size in enumerate(split):
            self.set(node, k, self.slice(node, x, [start], [start + size], [axis], [1]))
            start += size

    def op_Gather(self, node):
        x, idx = self.get(node, 0), self.get(node, 1)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", 0), rank)
        if idx.iota is not None and idx.reg is None and isinstance(x.shape[axis], int):
            # Rows 0..S-1 of the table: its first S rows, a SLICE (a table
            # shorter than S is refused by the RESHAPE that follows).
            rows = self.slice(node, x, [0], [idx.iota], [axis], [1])
            self.set(node, 0, self.reshape(node, rows, x.shape[:axis] + list(idx.shape) + x.shape[axis + 1:]))
            return
        if idx.const and idx.array.dtype == object:
            # Indices folded from shapes that hold a dynamic dimension
            # (pe[x.size(1)]): refused by name (const_val keeps an object
            # array only when it holds a Sym).
            self.ints_of(node, idx.array, "input '%s' (the indices)" % node.inputs[1], "the indices")
        if x.const and idx.const:
            i = idx.array.astype(np.int64)
            self.set(node, 0, self.const_val(np.take(x.array, i, axis=axis), x.onnx_type))
            return
        if idx.const and isinstance(x.shape[axis], int):
            n = x.shape[axis]
            i = idx.array.astype(np.int64)
            if i.size and (i.min() < -n or i.max() >= n):
                self.refuse(node, "an index outside [-%d, %d)" % (n, n), "attribute")
            idx = self.const_val(np.where(i < 0, i + n, i).astype(np.int32), TensorProto.INT64)
        shape = x.shape[:axis] + list(idx.shape) + x.shape[axis + 1:]
        if axis == 0 and idx.const:
            out = self.rt(shape, x.dtype, x.onnx_type)
            self.emit("GATHER", out.reg, self.reg_of(node, x), self.reg_of(node, idx, "the indices"))
            self.set(node, 0, out)
            return
        self.need(node, "GATHER_AXIS", "an axis other than 0, or indices given at run time,")
        out = self.rt(shape, x.dtype, x.onnx_type)
        self.emit("GATHER_AXIS", out.reg, self.reg_of(node, x), self.reg_of(node, idx, "the indices"), axis)
        self.set(node, 0, out)

    def op_Compress(self, node):
        # The kept positions are known at import: a GATHER_AXIS of them.
        x = self.get(node, 0)
        cond = np.array(self.const_ints(node, 1, "the condition"), bool)
        axis = node.attr("axis")
        if axis is None:
            x = self.reshape(node, x, [dims_prod(x.shape)])
            axis = 0
        axis = self.axis_of(node, axis, len(x.shape))
        n = x.shape[axis]
        if not isinstance(n, int):
            self.refuse(node, "compressing a dynamic axis", "shape")
        idx = np.nonzero(cond[:n])[0].astype(np.int64)
        self.need(node, "GATHER_AXIS")
        shape = list(x.shape)
        shape[axis] = len(idx)
        out = self.rt(shape, x.dtype, x.onnx_type)
        self.emit("GATHER_AXIS", out.reg, self.reg_of(node, x), self.reg_of(node, self.const_val(idx)), axis)
        self.set(node, 0, out)

    def op_OneHot(self, node):
        # values[1] where the index (negative ones + depth) is the position
        # along the new axis, values[0] elsewhere. A depth that is a
        # dynamic dim (one_hot(i, x.shape[1])) is loaded at run time, its
        # positions made then.
        idx, values = self.get(node, 0), self.get(node, 2)
        depth = np.asarray(self.const_input(node, 1, "the depth")).reshape(-1)
        if depth.size != 1:
            self.refuse(node, "a depth of %d values (OneHot takes one)" % depth.size, "shape")
        depth = depth[0] if isinstance(depth[0], Sym) else self.const_ints(node, 1, "the depth")[0]
        rank = len(idx.shape) + 1
        axis = self.axis_of(node, node.attr("axis", -1), rank)
        if idx.dtype == "f32":
            self.need(node, "CAST")
            i = self.rt(idx.shape, "i32")
            self.emit("CAST", i.reg, self.reg_of(node, idx), 2)
            idx = i
        self.need_i32(node, "TADD")
        if isinstance(depth, Sym):
            count = self.filled(node, [1], "i32", TensorProto.INT64, depth)
        else:
            count = self.const_val(np.array([depth], np.int64))
        neg = self.binary(node, "TLT", idx, self.const_val(np.array([0], np.int64)), out_type=TensorProto.BOOL)
        idx = self.where(node, neg, self.binary(node, "TADD", idx, count), idx)
        shape = list(idx.shape)
        shape.insert(axis, 1)
        col = self.reshape(node, idx, shape)
        along = [depth if k == axis else 1 for k in range(rank)]
        iota = self.reshape(node, self.const_or_positions(node, depth), along)
        hit = self.binary(node, "TEQ", col, iota, True, out_type=TensorProto.BOOL)
        pair = np.asarray(self.const_input(node, 2, "the values")).reshape(-1)
        off = self.const_val(pair[0:1], values.onnx_type)
        on = self.const_val(pair[1:2], values.onnx_type)
        self.set(node, 0, self.where(node, hit, on, off))

    def op_GatherElements(self, node):
        x, idx = self.get(node, 0), self.get(node, 1)
        axis = self.axis_of(node, node.attr("axis", 0), len(x.shape))
        self.need(node, "GATHER_ELEMENTS")
        out = self.rt(idx.shape, x.dtype, x.onnx_type)
        self.emit("GATHER_ELEMENTS", out.reg, self.reg_of(node, x), self.reg_of(node, idx, "the indices"), axis)
        self.set(node, 0, out)

    # scatter: each output element compares its position with every index
    # along the axis, so only existing opcodes run and every step is exact.
    def op_ScatterElements(self, node):
        data, idx, updates = self.get(node, 0), self.get(node, 1), self.get(node, 2)
        rank = len(data.shape)
        axis = self.axis_of(node, node.attr("axis", 0), rank)
        reduction = self.scatter_reduction(node, data, updates)
        if list(idx.shape) != list(updates.shape) or len(idx.shape) != rank:
            self.refuse(node, "indices %s and updates %s: ONNX asks one shape of the data's rank %d"
                        % (shape_text(idx.shape), shape_text(updates.shape), rank), "shape")
        if any(idx.shape[k] != data.shape[k] for k in range(rank) if k != axis):
            self.refuse(node, "indices %s cover part of the data %s on an axis other than %d"
                        % (shape_text(idx.shape), shape_text(data.shape), axis), "shape")
        pos = self.scatter_positions(node, idx, data.shape[axis], "axis %d" % axis)
        self.set(node, 0, self.scatter(node, data, axis, pos, updates, reduction))

    op_Scatter = op_ScatterElements  # opsets 9 and 10: no reduction

    def op_GatherND(self, node):
        # The indexed axes as one (row-major positions): a GATHER of rows of
        # the data viewed as [their product, rest...]. Each component of an
        # index is checked and made non-negative as ScatterND's are. With
        # batch_dims b, the first b axes of data and indices pair up: each
        # batch's positions are offset by its number times the indexed
        # product.
        data, idx = self.get(node, 0), self.get(node, 1)
        b = node.attr("batch_dims", 0)
        rank, q = len(data.shape), len(idx.shape)
        k = idx.shape[-1] if idx.shape else None
        if not 0 <= b < min(q, rank):
            self.refuse(node, "batch_dims = %d with data of rank %d and indices of rank %d" % (b, rank, q),
                        "attribute")
        if not isinstance(k, int) or not 1 <= k <= rank - b:
            self.refuse(node, "indices %s: the last axis must be a static 1..%d (the data's rank less batch_dims)"
                        % (shape_text(idx.shape), rank - b), "shape")
        batch, lead, rest = data.shape[:b], data.shape[b:b + k], data.shape[b + k:]
        if not is_static(batch + lead):
            self.refuse(node, "batch and indexed axes %s of the data are dynamic" % shape_text(batch + lead), "shape")
        if list(idx.shape[:b]) != list(batch):
            self.refuse(node, "indices %s and data %s differ on the %d batch axes"
                        % (shape_text(idx.shape), shape_text(data.shape), b), "shape")
        m = dims_prod(idx.shape[:-1])
        if b and not isinstance(m, int):
            self.refuse(node, "a dynamic number of indices %s with batch_dims" % shape_text(idx.shape[:-1]), "shape")
        rows = self.row_major_positions(node, self.reshape(node, idx, [m, k]), lead, b)
        if b:
            per, nb = dims_prod(lead), dims_prod(batch)
            offsets = np.repeat(np.arange(nb, dtype=np.int64) * per, m // nb if nb else 0)
            rows = self.binary(node, "TADD", rows, self.const_val(offsets))
        table = self.reshape(node, data, [dims_prod(batch) * dims_prod(lead)] + list(rest))
        self.need(node, "GATHER")
        out = self.rt([m] + list(rest), data.dtype, data.onnx_type)
        self.emit("GATHER", out.reg, self.reg_of(node, table), self.reg_of(node, rows, "the indices"))
        self.set(node, 0, self.reshape(node, out, list(idx.shape[:-1]) + list(rest)))

    def op_ScatterND(self, node):
        # The indexed axes as one (row-major positions), updates as rows.
        data, idx, updates = self.get(node, 0), self.get(node, 1), self.get(node, 2)
        reduction = self.scatter_reduction(node, data, updates)
        rank = len(data.shape)
        k = idx.shape[-1] if idx.shape else None
        if not isinstance(k, int) or not 1 <= k <= rank:
            self.refuse(node, "indices %s: the last axis must be a static 1..%d (the data's rank)"
                        % (shape_text(idx.shape), rank), "shape")
        lead, rest = data.shape[:k], data.shape[k:]
        if not is_static(lead):
            self.refuse(node, "indexed axes %s of the data are dynamic" % shape_text(lead), "shape")
        if list(updates.shape) != list(idx.shape[:-1]) + list(rest):
            self.refuse(node, "updates %s: ONNX asks %s" % (shape_text(updates.shape),
                                                          shape_text(list(idx.shape[:-1]) + list(rest))), "shape")
        m = dims_prod(idx.shape[:-1])
        if not isinstance(m, int):
            self.refuse(node, "a dynamic number of indices %s" % shape_text(idx.shape[:-1]), "shape")
        rows = self.row_major_positions(node, self.reshape(node, idx, [m, k]), lead, 0)
        pos = self.reshape(node, rows, [m] + [1] * len(rest))
        out = self.scatter(node, self.reshape(node, data, [dims_prod(lead)] + list(rest)), 0, pos,
                           self.reshape(node, updates, [m] + list(rest)), reduction)
        self.set(node, 0, self.reshape(node, out, data.shape))

    def row_major_positions(self, node, flat, lead, first):
        """The row-major positions in an array of dims lead of the index
        tuples flat [m, k] (k = len(lead)), the data's axes first.. first+k-1:
        each component checked and made non-negative (scatter_positions),
        times its stride, summed in i32."""
        m, k = flat.shape
        rows = None
        for t in range(k):
            comp = flat if k == 1 else self.slice(node, flat, [t], [t + 1], [1], [1])
            comp = self.scatter_positions(node, self.reshape(node, comp, [m]), lead[t], "axis %d" % (first + t))
            stride = dims_prod(lead[t + 1:])
            if stride != 1:
                self.need_i32(node, "TMUL")
                comp = self.binary(node, "TMUL", comp, self.const_val(np.array([stride], np.int64)))
            rows = comp if rows is None else self.binary(node, "TADD", rows, comp)
        return rows

    def scatter_reduction(self, node, data, updates):
        reduction = node.attr("reduction", b"none")
        reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
        if reduction not in ("none", "add", "mul"):
            self.refuse(node, "attribute 'reduction' = '%s'" % reduction)
        if data.onnx_type != updates.onnx_type:
            self.refuse(node, "data and updates of two types", "dtype")
        if reduction != "none":
            self.f32_only(node, data, updates)
        return reduction

    def scatter_positions(self, node, idx, n, what):
        """idx's indices along an axis of n, each in [-n, n), negative ones
        plus n: checked at import when constant, else by a GATHER_AXIS of
        0..n-1 at them (which traps on an index outside)."""
        if not isinstance(n, int):
            self.refuse(node, "the data's %s is dynamic (%s)" % (what, n), "shape")
        if idx.const:
            i = np.array(self.ints_of(node, idx.array, "input '%s' (the indices)" % node.inputs[1], "the indices"),
                         np.int64).reshape([int(d) for d in idx.shape])
            if i.size and (i.min() < -n or i.max() >= n):
                self.refuse(node, "an index outside [-%d, %d) on the data's %s" % (n, n, what), "attribute")
            return self.const_val(np.where(i < 0, i + n, i), TensorProto.INT64)
        self.need(node, "GATHER_AXIS", "indices given at run time")
        out = self.rt(idx.shape, "i32", TensorProto.INT64)
        self.emit("GATHER_AXIS", out.reg, self.reg_of(node, self.const_val(np.arange(n, dtype=np.int64))),
                  self.reg_of(node, idx, "the indices"), 0)
        return out

    # A scatter compares each of its m updates with each of the n positions
    # along its axis: at most this many pairs (per element of the others).
    SCATTER_PAIRS_MAX = 1 << 24

    def scatter(self, node, data, axis, pos, updates, reduction):
        """data with updates scattered along axis at pos (non-negative,
        updates' shape or 1 past the axis). Each pair of an update position
        j and an output position p along the axis compares pos[j] with p
        ([..., m, n, ...]). Without a reduction p takes the update of the
        last j that hits it (the largest j + 1 over hits, by MAX), by
        GATHER_ELEMENTS. With one, p hit once combines the data with that
        update (ONNX's reference bits); p hit several times with the hits'
        updates summed (multiplied) first in SUM's (PROD's) tree in the
        order of j (-0 or 1 elsewhere, which change nothing). A p that no j
        hits keeps the data's element."""
        for mnemonic in ("TEQ", "CAST", "WHERE", "GATHER_ELEMENTS"):
            self.need(node, mnemonic, "a scatter")
        rank = len(data.shape)
        n, m = data.shape[axis], updates.shape[axis]
        if not isinstance(m, int):
            self.refuse(node, "a dynamic number of updates along axis %d (%s)" % (axis, m), "shape")
        if m == 0:
            return data
        if m * n > self.SCATTER_PAIRS_MAX:
            self.refuse(node, "a scatter of %d updates along an axis of %d: %d pairs to compare, above the %d BIB "
                        "takes" % (m, n, m * n, self.SCATTER_PAIRS_MAX), "shape")
        if rank + 1 > MAX_RANK:
            self.refuse(node, "a scatter into rank %d (it compares pairs on rank %d; BIB tensors have at most %d)"
                        % (rank, rank + 1, MAX_RANK), "shape")

        def pair(v):
            return self.reshape(node, v, v.shape[:axis + 1] + [1] + v.shape[axis + 1:])

        def along(values, size, at):
            return np.asarray(values).reshape([size if k == at else 1 for k in range(rank + 1)])

        hit = self.binary(node, "TEQ", pair(pos), self.const_val(along(np.arange(n, dtype=np.int64), n, axis + 1)),
                          out_type=TensorProto.BOOL)
        hits = self.rt(hit.shape, "f32")
        self.emit("CAST", hits.reg, self.reg_of(node, hit), 1)
        writers = along(np.arange(1, m + 1, dtype=np.float32), m, axis)
        last = self.reduce(node, "MAX", self.binary(node, "TMUL", hits, self.const_val(writers)), [axis], 0)
        j = self.binary(node, "TMAX", self.binary(node, "TADD", last, self.scalar_const(-1.0)), self.scalar_const(0.0))
        ji = self.rt(j.shape, "i32", TensorProto.INT64)
        self.emit("CAST", ji.reg, self.reg_of(node, j), 2)
        ji = self.expand(node, ji, data.shape)
        new = self.rt(data.shape, data.dtype, data.onnx_type)
        self.emit("GATHER_ELEMENTS", new.reg, self.reg_of(node, updates), ji.reg, axis)
        if reduction != "none":
            kind, mnemonic, unit = ("SUM", "TADD", -0.0) if reduction == "add" else ("PROD", "TMUL", 1.0)
            terms = self.where(node, hit, pair(updates), self.scalar_const(unit))
            several = self.binary(node, "TGT", self.reduce(node, "SUM", hits, [axis], 0), self.scalar_const(1.0),
                                  out_type=TensorProto.BOOL)
            new = self.where(node, several, self.reduce(node, kind, terms, [axis], 0), new)
            new = self.binary(node, mnemonic, data, new)
        written = self.binary(node, "TGT", last, self.scalar_const(0.0), out_type=TensorProto.BOOL)
        return self.where(node, written, new, data)

    def op_Expand(self, node):
        x = self.get(node, 0)
        shape = self.const_input(node, 1, "the shape").reshape(-1).tolist()
        out = broadcast_shapes(x.shape, shape)
        if out is None:
            self.refuse(node, "shape %s does not broadcast with %s" % (shape_text(shape), shape_text(x.shape)), "shape")
        if dims_prod(out) == dims_prod(x.shape):
            self.set(node, 0, self.reshape(node, x, out))
            return
        self.set(node, 0, self.expand(node, x, out))

    def op_Tile(self, node):
        x = self.get(node, 0)
        # A repeat may be a dynamic dim (cls.repeat(x.shape[0], 1, 1)): the
        # expanded axis is then that dim times the size, loaded at run time.
        reps = [r if isinstance(r, Sym) else int(r)
                for r in self.const_input(node, 1, "the repeats").reshape(-1).tolist()]
        if len(reps) != len(x.shape):
            self.refuse(node, "%d repeats for a rank-%d input" % (len(reps), len(x.shape)), "shape")
        # One axis at a time: [pre, d, post] viewed as [pre, 1, d, post],
        # expanded to [pre, r, d, post], viewed as [pre, r*d, post].
        v = x
        for k, r in enumerate(reps):
            if isinstance(r, int) and r == 1:
                continue
            shape = list(v.shape)
            pre, post = dims_prod(shape[:k]), dims_prod(shape[k + 1:])
            up = self.reshape(node, v, [pre, 1, shape[k], post])
            big = self.expand(node, up, [pre, r, shape[k], post])
            shape[k] = dim_mul(r, shape[k])
            v = self.reshape(node, big, shape)
        if v is x and not x.const:
            v = self.unary(node, "COPY", x)
        self.set(node, 0, v)


def _resize_matrix(n_in, n_out, scale, mode, ctm, nearest, a, exclude):
    """The [n_out, n_in] matrix of a 1-D Resize, as ONNX's reference
    (onnx/backend/test/case/node/resize.py) computes each output."""
    m = np.zeros((n_out, n_in))
    width = scale * n_in  # the reference's output width: not rounded
    for x in range(n_out):
        if ctm == "align_corners":
            x_ori = 0.0 if width == 1 else x * (n_in - 1) / (width - 1)
        elif ctm == "asymmetric":
            x_ori = x / scale
        elif ctm == "pytorch_half_pixel":
            x_ori = -0.5 if width == 1 else (x + 0.5) / scale - 0.5
        else:
            x_ori = (x + 0.5) / scale - 0.5
        x_ori = float(x_ori)
        ratio = 1.0 if x_ori.is_integer() else x_ori - np.floor(x_ori)
        if mode == "nearest":
            if x_ori.is_integer():
                coeffs = [0.0, 1.0]
            elif nearest == "round_prefer_floor":
                coeffs = [float(ratio <= 0.5), float(ratio > 0.5)]
            elif nearest == "round_prefer_ceil":
                coeffs = [float(ratio < 0.5), float(ratio >= 0.5)]
            elif nearest == "floor":
                coeffs = [1.0, 0.0]
            else:
                coeffs = [0.0, 1.0]
        elif mode == "linear":
            coeffs = [1 - ratio, ratio]
        else:
            r = ratio
            coeffs = [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                      ((a + 2) * r - (a + 3)) * r * r + 1,
                      ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                      ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a]
        n = len(coeffs)
        # The n nearest indexes of the edge-padded input, the smaller first.
        pad = int(np.ceil(n / 2))
        xp = x_ori + pad
        lo = int(np.floor(xp))
        cands = [i for i in range(lo - n - 1, lo + n + 2) if 0 <= i < n_in + 2 * pad]
        idxes = sorted(sorted(cands, key=lambda i: (abs(xp - i), i))[:n])
        idxes = [i - pad for i in idxes]
        coeffs = np.array(coeffs, np.float64)
        if exclude:
            for j, i in enumerate(idxes):
                if i < 0 or i >= n_in:
                    coeffs[j] = 0
            coeffs /= coeffs.sum()
        for c, i in zip(coeffs, idxes):
            m[x, min(max(i, 0), n_in - 1)] += c
    return m
