"""Lowering of the elementwise and math ONNX ops for the importer
(onnx_import.py): unary and binary arithmetic, matrix products, reductions,
arg max/min, softmax, comparisons, logic, Where and Clip."""

import numpy as np
from onnx import TensorProto

from .onnx_common import (
    _bib_dtype, broadcast_shapes, dims_prod, _DTYPE_NAME, is_static, library_broadcasts, MAX_RANK, _np_for,
    shape_text, Val)


class MathOps:
    """The Importer's op_ methods for elementwise and math ops."""

    # unary math
    def _unary_op(mnemonic):
        def f(self, node):
            x = self.get(node, 0)
            self.f32_only(node, x)
            self.set(node, 0, self.unary(node, mnemonic, x))

        return f

    op_Relu = _unary_op("RELU")
    op_Sigmoid = _unary_op("SIGMOID")
    op_Tanh = _unary_op("TANH")
    op_Exp = _unary_op("EXP")
    op_Erf = _unary_op("ERF")
    op_Log = _unary_op("LOG")
    op_Sqrt = _unary_op("SQRT")
    op_Reciprocal = _unary_op("RECIP")
    op_Floor = _unary_op("FLOOR")
    op_Ceil = _unary_op("CEIL")
    op_Round = _unary_op("ROUND")  # halves to even, as ONNX Round
    # Not folded: a constant's sin is BIB's SIN at run time, as any other's.
    op_Sin = _unary_op("SIN")
    op_Cos = _unary_op("COS")

    def op_Tan(self, node):
        # sin x / cos x: BIB's SIN and COS (each within 1 ULP, for every
        # argument) and a correctly rounded division, so within a few ULP
        # everywhere, even beside the poles, and the same bits everywhere.
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.set(node, 0, self.binary(node, "TDIV", self.unary(node, "SIN", x), self.unary(node, "COS", x)))

    # Exact, so a constant folds with numpy to the bits the opcode gives.
    def fold_Floor(self, node, a):
        return [np.floor(a[0])] if a[0].dtype == np.float32 else None

    def fold_Ceil(self, node, a):
        return [np.ceil(a[0])] if a[0].dtype == np.float32 else None

    def fold_Round(self, node, a):
        return [np.round(a[0])] if a[0].dtype == np.float32 else None

    def op_Abs(self, node):
        x = self.get(node, 0)
        if x.onnx_type not in (TensorProto.FLOAT, TensorProto.INT32):
            self.f32_only(node, x)
        self.set(node, 0, self.unary(node, "TABS", x))

    def op_Neg(self, node):
        x = self.get(node, 0)
        if x.onnx_type not in (TensorProto.FLOAT, TensorProto.INT32):
            self.f32_only(node, x)
        self.set(node, 0, self.unary(node, "TNEG", x))

    def op_Softplus(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.need(node, "LOG")
        e = self.unary(node, "EXP", x)
        s = self.binary(node, "TADD", e, self.scalar_const(1.0))
        self.set(node, 0, self.unary(node, "LOG", s))

    def op_Softsign(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.need(node, "TABS")
        a = self.unary(node, "TABS", x)
        d = self.binary(node, "TADD", a, self.scalar_const(1.0))
        self.set(node, 0, self.binary(node, "TDIV", x, d))

    def op_LeakyRelu(self, node):
        # relu(x) + (-alpha) * relu(-x): for x < 0 the product is alpha * x
        # rounded once, as ONNX's alpha * x; for x >= 0 it adds -0.
        x = self.get(node, 0)
        self.f32_only(node, x)
        alpha = float(np.float32(node.attr("alpha", 0.01)))
        p = self.unary(node, "RELU", x)
        n = self.unary(node, "RELU", self.scale(node, x, -1.0))
        self.set(node, 0, self.binary(node, "TADD", p, self.scale(node, n, -alpha)))

    def op_Elu(self, node):
        # x < 0 ? (exp(x) - 1) * alpha : x, in ONNX's order of operations
        x = self.get(node, 0)
        self.f32_only(node, x)
        alpha = float(np.float32(node.attr("alpha", 1.0)))
        self.need(node, "WHERE")
        neg = self.binary(node, "TLT", x, self.scalar_const(0.0), out_type=TensorProto.BOOL)
        e = self.binary(node, "TSUB", self.unary(node, "EXP", x), self.scalar_const(1.0))
        self.set(node, 0, self.where(node, neg, self.scale(node, e, alpha), x))

    def op_Selu(self, node):
        # x <= 0 ? (exp(x) * alpha - alpha) * gamma : x * gamma
        x = self.get(node, 0)
        self.f32_only(node, x)
        alpha = float(np.float32(node.attr("alpha", 1.67326319217681884765625)))
        gamma = float(np.float32(node.attr("gamma", 1.05070102214813232421875)))
        self.need(node, "WHERE")
        le = self.binary(node, "TLE", x, self.scalar_const(0.0), out_type=TensorProto.BOOL)
        e = self.binary(node, "TSUB", self.scale(node, self.unary(node, "EXP", x), alpha), self.scalar_const(alpha))
        self.set(node, 0, self.where(node, le, self.scale(node, e, gamma), self.scale(node, x, gamma)))

    def op_Celu(self, node):
        # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
        x = self.get(node, 0)
        self.f32_only(node, x)
        alpha = float(np.float32(node.attr("alpha", 1.0)))
        zero = self.scalar_const(0.0)
        e = self.unary(node, "EXP", self.binary(node, "TDIV", x, self.scalar_const(alpha)))
        e = self.scale(node, self.binary(node, "TSUB", e, self.scalar_const(1.0)), alpha)
        self.set(node, 0, self.binary(node, "TADD", self.binary(node, "TMAX", x, zero),
                                      self.binary(node, "TMIN", e, zero)))

    def hard_sigmoid(self, node, x, alpha, beta):
        # max(0, min(1, alpha * x + beta))
        v = self.binary(node, "TADD", self.scale(node, x, alpha), self.scalar_const(beta))
        v = self.binary(node, "TMIN", v, self.scalar_const(1.0))
        return self.binary(node, "TMAX", v, self.scalar_const(0.0))

    def op_HardSigmoid(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        alpha = float(np.float32(node.attr("alpha", 0.2)))
        beta = float(np.float32(node.attr("beta", 0.5)))
        self.set(node, 0, self.hard_sigmoid(node, x, alpha, beta))

    def op_HardSwish(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.set(node, 0, self.binary(node, "TMUL", x, self.hard_sigmoid(node, x, float(np.float32(1 / 6)), 0.5)))

    def op_ThresholdedRelu(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        alpha = float(np.float32(node.attr("alpha", 1.0)))
        self.need(node, "WHERE")
        gt = self.binary(node, "TGT", x, self.scalar_const(alpha), out_type=TensorProto.BOOL)
        self.set(node, 0, self.where(node, gt, x, self.scalar_const(0.0)))

    def op_PRelu(self, node):
        x, slope = self.get(node, 0), self.get(node, 1)
        self.f32_only(node, x, slope)
        self.need(node, "WHERE")
        neg = self.binary(node, "TLT", x, self.scalar_const(0.0), out_type=TensorProto.BOOL)
        self.set(node, 0, self.where(node, neg, self.binary(node, "TMUL", x, slope, True), x))

    def op_Shrink(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        bias = float(np.float32(node.attr("bias", 0.0)))
        lambd = float(np.float32(node.attr("lambd", 0.5)))
        self.need(node, "WHERE")
        lo = self.binary(node, "TLT", x, self.scalar_const(-lambd), out_type=TensorProto.BOOL)
        hi = self.binary(node, "TGT", x, self.scalar_const(lambd), out_type=TensorProto.BOOL)
        up = self.where(node, hi, self.binary(node, "TSUB", x, self.scalar_const(bias)), self.scalar_const(0.0))
        self.set(node, 0, self.where(node, lo, self.binary(node, "TADD", x, self.scalar_const(bias)), up))

    # binary math
    def _binary_op(mnemonic, commutes, np_fn=None, exact_fold=True):
        def f(self, node):
            a, b = self.get(node, 0), self.get(node, 1)
            if a.onnx_type != b.onnx_type:
                self.refuse(node, "inputs of two types", "dtype")
            if a.onnx_type != TensorProto.FLOAT:
                if a.onnx_type in (TensorProto.INT32, TensorProto.INT64) and mnemonic in ("TADD", "TSUB", "TMUL"):
                    self.need_i32(node, mnemonic)
                else:
                    self.f32_only(node, a, b)
            self.set(node, 0, self.binary(node, mnemonic, a, b, commutes))

        return f

    op_Add = _binary_op("TADD", True)
    op_Sub = _binary_op("TSUB", False)
    op_Mul = _binary_op("TMUL", True)
    op_Div = _binary_op("TDIV", False)

    def op_Pow(self, node):
        x, y = self.get(node, 0), self.get(node, 1)
        self.f32_only(node, x)
        if y.const and y.array.size == 1 and float(y.array.reshape(-1)[0]) == 2.0:
            # x^2 is x * x correctly rounded, as pow gives it.
            self.set(node, 0, self.binary(node, "TMUL", x, x))
            return
        if y.const and y.array.size == 1 and float(y.array.reshape(-1)[0]) == 1.0:
            self.set(node, 0, x)
            return
        if y.dtype == "i32" and y.onnx_type != TensorProto.BOOL and not y.const:
            # numpy's float ** int: the exponent as f32 (exact below 2^24).
            self.need(node, "CAST")
            yf = self.rt(y.shape, "f32")
            self.emit("CAST", yf.reg, self.reg_of(node, y), 1)
            y = yf
        elif y.const and y.array.dtype.kind in "iu":
            y = self.const_val(y.array.astype(np.float32))
        self.f32_only(node, y)
        self.set(node, 0, self.binary(node, "TPOW", x, y))

    def _variadic(mnemonic):
        def f(self, node):
            vals = [self.get(node, k) for k in range(len(node.inputs))]
            self.f32_only(node, *vals)
            acc = vals[0]
            for v in vals[1:]:
                acc = self.binary(node, mnemonic, acc, v, True)
            if len(vals) == 1:
                acc = self.unary(node, "COPY", acc) if not acc.const else acc
            if node.op == "Mean" and len(vals) > 1:
                acc = self.binary(node, "TDIV", acc, self.scalar_const(float(len(vals))))
            self.set(node, 0, acc)

        return f

    op_Sum = _variadic("TADD")
    op_Mean = _variadic("TADD")
    op_Max = _variadic("TMAX")
    op_Min = _variadic("TMIN")

    # matrix products
    def matmul(self, node, a, b, bias=None, act=None, lazy=False):
        """a . b (+ bias row) (then act) on BIB's MATMUL / LINEAR*, which
        take numpy.matmul's shapes (batch axes broadcast, rank-1 operands)."""
        self.f32_only(node, a, b)
        ra, rb = len(a.shape), len(b.shape)
        if ra == 0 or rb == 0:
            self.refuse(node, "a rank-0 operand", "shape")
        ka = a.shape[-1]
        kb = b.shape[0] if rb == 1 else b.shape[-2]
        if ka != kb:
            self.refuse(node, "inner dimensions %s and %s differ" % (ka, kb), "shape")
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        if batch is None:
            self.refuse(node, "batch axes %s and %s do not broadcast" % (shape_text(a.shape[:-2]),
                        shape_text(b.shape[:-2])), "shape")
        if len(batch) > 4:
            self.refuse(node, "%d batch axes (BIB's MATMUL takes up to 4)" % len(batch), "shape")
        shape = list(batch) + ([a.shape[-2]] if ra > 1 else []) + ([b.shape[-1]] if rb > 1 else [])
        if lazy:
            out = Val(shape, "f32", TensorProto.FLOAT)
            out.lazy = (a, b, bias, act)
            return out
        out = self.rt(shape, "f32")
        if bias is None and act is None:
            self.emit("MATMUL", out.reg, self.reg_of(node, a), self.reg_of(node, b))
        else:
            mnem = {None: "LINEAR", "RELU": "LINEAR_RELU", "GELU": "LINEAR_GELU", "GELU_ERF": "LINEAR_GELU_ERF"}[act]
            self.need(node, mnem)
            self.emit(mnem, out.reg, self.reg_of(node, a), self.reg_of(node, b), self.reg_of(node, bias))
        return out

    def op_MatMul(self, node):
        self.set(node, 0, self.matmul(node, self.get(node, 0), self.get(node, 1)))

    def op_Einsum(self, node):
        """Einsum as permutes, sums and batched matrix products: with two
        operands each index is a batch one (both inputs and the output), a
        contracted one (both inputs only), or free (one input and the
        output); an index in one input alone and not the output is summed
        out first (REDUCE_SUM). Each operand is permuted to [batch, free,
        contracted] and viewed as [batch, M, K] / [batch, K, N] for one
        MATMUL (one fma chain over the contracted indices, in the first
        operand's order), whose [batch, M, N] is viewed and permuted to the
        output. More operands fold left to right."""
        eq = node.attr("equation").replace(" ", "")
        vals = [self.get(node, k) for k in range(len(node.inputs))]
        self.f32_only(node, *vals)
        lhs, arrow, out = eq.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(vals):
            self.refuse(node, "equation '%s' names %d operands, the node has %d" % (eq, len(terms), len(vals)))
        # '...' becomes one placeholder per axis it covers, right-aligned
        # across the operands (numpy's broadcasting of the leading axes).
        spans = []
        for t, v in zip(terms, vals):
            if t.count("...") > 1 or (t.replace("...", "").replace(".", "") != t.replace("...", "")):
                self.refuse(node, "equation '%s': a malformed '...'" % eq)
            spans.append(len(v.shape) - len(t.replace("...", "")) if "..." in t else 0)
        ell = max(spans + [0])
        holders = [chr(0x2460 + k) for k in range(ell)]
        terms = [t.replace("...", "".join(holders[ell - e:])) for t, e in zip(terms, spans)]
        if arrow:
            # Without '...' on the right, the ellipsis axes are summed.
            out = out.replace("...", "".join(holders))
        else:
            letters = "".join(terms)
            out = "".join(holders) + "".join(sorted(c for c in set(letters) if c not in holders
                                                    and letters.count(c) == 1))
        for t, v in zip(terms, vals):
            if not all(c.isalpha() or c in holders for c in t) or len(t) != len(v.shape):
                self.refuse(node, "equation '%s': term '%s' does not match an input of rank %d"
                            % (eq, t.replace("".join(holders), "..."), len(v.shape)))
        first = vals[0]
        for k in range(len(vals)):
            vals[k], terms[k] = self.einsum_diagonal(node, eq, vals[k], terms[k])
        if len(set(out)) != len(out) or any(c not in "".join(terms) for c in out):
            self.refuse(node, "equation '%s': the output's indices must be distinct indices of the inputs" % eq)
        sizes = {}
        for t, v in zip(terms, vals):
            for c, d in zip(t, v.shape):
                if c not in sizes or sizes[c] == 1:
                    sizes[c] = d
                elif d != 1 and d != sizes[c]:
                    self.refuse(node, "equation '%s': index '%s' has the sizes %s and %s" % (eq, c, sizes[c], d),
                                "shape")
        acc, at = vals[0], terms[0]
        for k in range(1, len(vals)):
            later = out + "".join(terms[k + 1:])
            keep = "".join(c for c in dict.fromkeys(at + terms[k]) if c in later)
            acc, at = self.einsum2(node, eq, acc, at, vals[k], terms[k], keep, sizes)
        acc, at = self.einsum_sum(node, eq, acc, at, out)
        if at != out:
            acc = self.permute(node, acc, [at.index(c) for c in out])
        if acc is first:
            acc = self.unary(node, "COPY", acc)
        self.set(node, 0, acc)

    def einsum_diagonal(self, node, eq, x, term):
        """x (indices term) with an index repeated in term taken once, on
        its diagonal (a trace is the diagonal, then summed out): the two
        axes moved last (PERMUTE), viewed as one of n * n, and every
        (n + 1)-th element of it (SLICE), the index now last. Exact."""
        while len(set(term)) != len(term):
            c = next(c for c in term if term.count(c) > 1)
            a1 = term.index(c)
            a2 = term.index(c, a1 + 1)
            n = x.shape[a1]
            if x.shape[a2] != n:
                self.refuse(node, "equation '%s': index '%s' repeated in one operand has the sizes %s and %s"
                            % (eq, c, n, x.shape[a2]), "shape")
            if not isinstance(n, int):
                self.refuse(node, "equation '%s': index '%s' repeated in one operand (a diagonal) has the dynamic "
                            "size %s" % (eq, c, n), "shape")
            rest = [k for k in range(len(term)) if k not in (a1, a2)]
            x = self.permute(node, x, rest + [a1, a2])
            x = self.reshape(node, x, x.shape[:-2] + [n * n])
            x = self.slice(node, x, [0], [n * n], [len(rest)], [n + 1])
            term = "".join(term[k] for k in rest) + c
        return x, term

    def einsum_sum(self, node, eq, x, term, keep):
        """x (indices term) with the indices not in keep summed out."""
        axes = [k for k, c in enumerate(term) if c not in keep]
        if not axes:
            return x, term
        x = self.reduce(node, "SUM", x, axes, 0)
        return x, "".join(c for c in term if c in keep)

    def einsum2(self, node, eq, a, ta, b, tb, out, sizes):
        """a (indices ta) and b (tb) to the indices out, in an order of
        this function's choosing (returned)."""
        a, ta = self.einsum_sum(node, eq, a, ta, out + tb)
        b, tb = self.einsum_sum(node, eq, b, tb, out + ta)
        batch = [c for c in ta if c in tb and c in out]
        contr = [c for c in ta if c in tb and c not in out]
        left = [c for c in ta if c not in tb]
        right = [c for c in tb if c not in ta]
        for c in contr + left + right:
            for t, v in ((ta, a), (tb, b)):
                if c in t and v.shape[t.index(c)] != sizes[c]:
                    self.refuse(node, "equation '%s': index '%s' broadcast from size 1 outside the batch indices"
                                % (eq, c), "shape")
        da = [a.shape[ta.index(c)] for c in batch]
        db = [b.shape[tb.index(c)] for c in batch]
        if da == db:
            bshape_a = bshape_b = [dims_prod(da)] if batch else []
        else:
            if len(batch) > 4:
                self.refuse(node, "equation '%s': %d broadcast batch indices (BIB's MATMUL takes up to 4)"
                            % (eq, len(batch)), "shape")
            bshape_a, bshape_b = da, db
        m = dims_prod([sizes[c] for c in left])
        n = dims_prod([sizes[c] for c in right])
        kk = dims_prod([sizes[c] for c in contr])
        pa = self.permute(node, a, [ta.index(c) for c in batch + left + contr])
        pb = self.permute(node, b, [tb.index(c) for c in batch + contr + right])
        y = self.matmul(node, self.reshape(node, pa, bshape_a + [m, kk]), self.reshape(node, pb, bshape_b + [kk, n]))
        shape = [sizes[c] for c in batch + left + right]
        return self.reshape(node, y, shape), "".join(batch + left + right)

    def op_Gemm(self, node):
        a, b = self.get(node, 0), self.get(node, 1)
        c = self.get(node, 2, optional=True)
        alpha = float(node.attr("alpha", 1.0))
        beta = float(node.attr("beta", 1.0))
        if node.attr("transA", 0):
            a = self.transpose_last2(node, a)
        if node.attr("transB", 0):
            b = self.transpose_last2(node, b)
        self.f32_only(node, a, b, c)
        n = b.shape[-1]
        bias = None
        if c is not None and beta != 0.0:
            if c.const and beta != 1.0:
                c = self.const_val((c.array * np.float32(beta)).astype(np.float32))
                beta = 1.0
            row = beta == 1.0 and alpha == 1.0 and dims_prod(c.shape) in (n,) and all(d == 1 for d in c.shape[:-1])
            if row and c.shape[-1] == n:
                bias = self.reshape(node, c, [n])
        if bias is not None:
            self.set(node, 0, self.matmul(node, a, b, bias))
            return
        y = self.matmul(node, a, b)
        if alpha != 1.0:
            y = self.scale(node, y, alpha)
        if c is not None and beta != 0.0:
            if beta != 1.0:
                c = self.scale(node, c, beta)
            y = self.binary(node, "TADD", y, c, True)
        self.set(node, 0, y)

    def transpose_last2(self, node, v):
        if v.const:
            return self.const_val(np.ascontiguousarray(np.swapaxes(v.array, -1, -2)), v.onnx_type)
        out = self.rt(v.shape[:-2] + [v.shape[-1], v.shape[-2]], v.dtype, v.onnx_type)
        self.emit("TRANSPOSE", out.reg, self.reg_of(node, v))
        return out

    # reductions
    def reduce(self, node, kind, x, axes, keepdims):
        """kind over axes (sorted, distinct), keepdims 0/1."""
        rank = len(x.shape)
        out_keep = [1 if k in axes else d for k, d in enumerate(x.shape)]
        out_shape = out_keep if keepdims else [d for k, d in enumerate(x.shape) if k not in axes]
        if not axes:
            return self.reshape(node, x, out_shape)
        trailing = axes == list(range(rank - len(axes), rank))
        old = {"SUM": "SUM", "MEAN": "MEAN", "MAX": "MAX"}
        if trailing and kind in old:
            lead = x.shape[: rank - len(axes)]
            flat = self.reshape(node, x, lead + [dims_prod(x.shape[rank - len(axes):])])
            out = self.rt(lead, "f32")
            self.emit(old[kind], out.reg, self.reg_of(node, flat))
            return self.reshape(node, out, out_shape)
        mnem = "REDUCE_" + kind
        self.need(node, mnem, "axes %s of a rank-%d input" % (axes, rank))
        mask = sum(1 << a for a in axes)
        out = self.rt(out_shape, "f32")
        self.emit(mnem, out.reg, self.reg_of(node, x), mask, 1 if keepdims else 0)
        return out

    def reduce_args(self, node, x):
        rank = len(x.shape)
        keepdims = node.attr("keepdims", 1)
        # Read whether or not the axes are empty: torch writes the default
        # (0) beside explicit axes, and an attribute never read is refused.
        noop = node.attr("noop_with_empty_axes", 0)
        axes = self.axes_of(node, 1, rank)
        if axes is None or axes == []:
            if noop:
                return [], keepdims
            axes = list(range(rank))
        return sorted(set(axes)), keepdims

    def _reduce_op(kind, pre=None, post=None):
        def f(self, node):
            x = self.get(node, 0)
            self.f32_only(node, x)
            axes, keepdims = self.reduce_args(node, x)
            if not axes and node.attr("noop_with_empty_axes", 0):
                self.set(node, 0, x)
                return
            v = x
            if pre == "abs":
                v = self.unary(node, "TABS", v)
            elif pre == "square":
                v = self.binary(node, "TMUL", v, v)
            elif pre == "exp":
                self.need(node, "LOG")
                v = self.unary(node, "EXP", v)
            if post in ("sqrt", "log"):
                self.need(node, "SQRT" if post == "sqrt" else "LOG")
            v = self.reduce(node, kind, v, axes, keepdims)
            if post == "sqrt":
                v = self.unary(node, "SQRT", v)
            elif post == "log":
                v = self.unary(node, "LOG", v)
            self.set(node, 0, v)

        return f

    op_ReduceSum = _reduce_op("SUM")
    op_ReduceMean = _reduce_op("MEAN")
    op_ReduceMax = _reduce_op("MAX")
    op_ReduceMin = _reduce_op("MIN")
    op_ReduceProd = _reduce_op("PROD")
    op_ReduceL1 = _reduce_op("SUM", pre="abs")
    op_ReduceL2 = _reduce_op("SUM", pre="square", post="sqrt")
    op_ReduceSumSquare = _reduce_op("SUM", pre="square")
    op_ReduceLogSum = _reduce_op("SUM", post="log")
    op_ReduceLogSumExp = _reduce_op("SUM", pre="exp", post="log")

    def arg(self, node, which):
        x = self.get(node, 0)
        self.f32_only(node, x)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", 0), rank)
        keepdims = node.attr("keepdims", 1)
        last = node.attr("select_last_index", 0)
        n = x.shape[axis]
        if last:
            # The last extreme of x is the first of x reversed along the
            # axis, at n - 1 - its index there.
            if not isinstance(n, int):
                self.refuse(node, "attribute 'select_last_index' = 1 over a dynamic axis", "shape")
            x = self.slice(node, x, [-1], [-(1 << 62)], [axis], [-1])
        idx = self.arg_first(node, x, which, axis, keepdims)
        if last:
            self.need_i32(node, "TMUL")
            idx = self.binary(node, "TMUL", idx, self.const_val(np.array([-1], np.int64)))
            idx = self.binary(node, "TADD", idx, self.const_val(np.array([n - 1], np.int64)))
        self.set(node, 0, idx)

    def arg_first(self, node, x, which, axis, keepdims):
        rank = len(x.shape)
        shape_keep = [1 if k == axis else d for k, d in enumerate(x.shape)]
        shape_drop = [d for k, d in enumerate(x.shape) if k != axis]
        out_shape = shape_keep if keepdims else shape_drop
        mnem = "ARG%s_AXIS" % which
        if which == "MIN" and not self.have(mnem):
            # The first minimum of x is the first maximum of -x.
            self.need(node, "TNEG", "ArgMin")
            return self.arg_first(node, self.unary(node, "TNEG", x), "MAX", axis, keepdims)
        if axis == rank - 1 and which == "MAX" or not self.have(mnem):
            v = x
            if axis != rank - 1:
                if axis == rank - 2:
                    v = self.transpose_last2(node, v)
                else:
                    self.need(node, mnem, "an axis other than the last")
            out = self.rt([d for k, d in enumerate(v.shape) if k != rank - 1], "i32", TensorProto.INT64)
            self.emit("ARGMAX", out.reg, self.reg_of(node, v))
            return self.reshape(node, out, out_shape)
        out = self.rt(out_shape, "i32", TensorProto.INT64)
        self.emit(mnem, out.reg, self.reg_of(node, x), axis, 1 if keepdims else 0)
        return out

    def op_ArgMax(self, node):
        self.arg(node, "MAX")

    def op_ArgMin(self, node):
        self.arg(node, "MIN")

    def op_TopK(self, node):
        # The k first elements along the axis in the order ARGMAX_AXIS and
        # ARGMIN_AXIS pick the first (a NaN first, -0 and +0 apart, a tie
        # the lower index, as ONNX asks), their int64 indices and, by
        # GATHER_ELEMENTS at them, their values: exact, so TopK with k = 1
        # is the first column of any larger k.
        x = self.get(node, 0)
        self.f32_only(node, x)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", -1), rank)
        if self.opset < 10:
            k = int(node.attr("k"))
        else:
            k = self.const_ints(node, 1, "k")[0]
        largest = node.attr("largest", 1)
        node.attr("sorted")  # sorted either way: unsorted leaves the order free
        n = x.shape[axis]
        if k < 1:
            self.refuse(node, "k = %d: TopK takes a positive k" % k)
        if n == 0:
            self.refuse(node, "TopK along an empty axis %d" % axis, "shape")
        if isinstance(n, int) and k > n:
            self.refuse(node, "k = %d is larger than axis %d (of size %d)" % (k, axis, n), "shape")
        if k == 1:
            idx = self.arg_first(node, x, "MAX" if largest else "MIN", axis, 1)
        elif not isinstance(n, int):
            self.refuse(node, "TopK with k = %d along a dynamic axis %d (%s)" % (k, axis, n), "shape")
        elif self.have("ARGSORT_DESC"):
            idx = self.topk_sorted(node, x, axis, k, largest)
        elif k <= self.TOPK_ROUNDS_MAX and (n > self.TOPK_PAIRS_MAX or k * self.TOPK_ROUND_PASSES < n):
            idx = self.topk_rounds(node, x, axis, k, largest)
        elif n <= self.TOPK_PAIRS_MAX:
            idx = self.topk_indices(node, x, axis, k, largest)
        else:
            self.refuse(node, "TopK with k = %d along axis %d of %d: above %d elements BIB picks them one round "
                        "each, at most %d rounds" % (k, axis, n, self.TOPK_PAIRS_MAX, self.TOPK_ROUNDS_MAX), "shape")
        self.need(node, "GATHER_ELEMENTS", "TopK's values")
        values = self.rt(idx.shape, "f32")
        self.emit("GATHER_ELEMENTS", values.reg, self.reg_of(node, x), self.reg_of(node, idx), axis)
        self.set(node, 0, values)
        self.set(node, 1, idx)

    # TopK with k > 1 compares every pair along an axis of up to this many
    # elements (n^2 per row, in time and in memory), and picks the k one
    # round each beyond it, or wherever k rounds of about TOPK_ROUND_PASSES
    # passes over x each cost less than the pairs (a top-5 of 1,000 classes:
    # 50 passes, where the pairs hold 1,000 comparisons per element).
    TOPK_PAIRS_MAX = 1024
    TOPK_ROUNDS_MAX = 64
    TOPK_ROUND_PASSES = 10

    def topk_sorted(self, node, x, axis, k, largest):
        """The indices of x's k first elements along its static axis: TOPK_DESC
        (TOPK_ASC) with c = k, the first k columns of ARGSORT_DESC
        (ARGSORT_ASC), which orders each row as ARGMAX (ARGMIN) picks; the
        axis moved last and back by PERMUTE. A library with ARGSORT but
        without TOPK sorts whole rows and slices. The same order as the pairs
        and the rounds below, which libraries without ARGSORT take."""
        rank = len(x.shape)
        n = x.shape[axis]
        which = "DESC" if largest else "ASC"
        v = x
        perm = list(range(rank))
        if axis != rank - 1:
            perm = [a for a in range(rank) if a != axis] + [axis]
            v = self.permute(node, x, perm)
        if self.have("TOPK_" + which):
            order = self.rt(v.shape[:-1] + [k], "i32", TensorProto.INT64)
            self.emit("TOPK_" + which, order.reg, self.reg_of(node, v), k)
        else:
            order = self.rt(v.shape, "i32", TensorProto.INT64)
            self.emit("ARGSORT_" + which, order.reg, self.reg_of(node, v))
        if k < n and order.shape[-1] != k:
            order = self.slice(node, order, [0], [k], [rank - 1], [1])
        if axis != rank - 1:
            back = [perm.index(a) for a in range(rank)]
            order = self.permute(node, order, back)
        return order

    def topk_rounds(self, node, x, axis, k, largest):
        """The indices of x's k first elements along its static axis, one
        round each (the order topk_indices gives): round r takes the first
        extreme of x with the elements taken so far replaced by -Inf (+Inf
        for the smallest), by ARGMAX_AXIS (ARGMIN_AXIS). When that extreme is
        the fill itself, every element left equals it, and the first one
        left is taken instead (a taken one may come first). O(k n) per row,
        where the pairs cost n^2."""
        n = x.shape[axis]
        rank = len(x.shape)
        for mnemonic in ("WHERE", "TNOT", "TOR", "CAST", "GATHER_ELEMENTS", "CONCAT"):
            self.need(node, mnemonic, "TopK with k = %d" % k)
        which = "MAX" if largest else "MIN"
        fill = self.scalar_const(-np.inf if largest else np.inf)
        iota = self.const_val(np.arange(n, dtype=np.int64).reshape([n if a == axis else 1 for a in range(rank)]))
        taken, picks = None, []
        for _ in range(k):
            left = x if taken is None else self.where(node, taken, fill, x)
            pick = self.arg_first(node, left, which, axis, 1)
            if taken is not None:
                best = self.rt(pick.shape, "f32")
                self.emit("GATHER_ELEMENTS", best.reg, self.reg_of(node, left), pick.reg, axis)
                stuck = self.binary(node, "TEQ", best, fill, out_type=TensorProto.BOOL)
                free = self.rt(x.shape, "f32")
                self.emit("CAST", free.reg, self.reg_of(node, self.unary(node, "TNOT", taken)), 1)
                pick = self.where(node, stuck, self.arg_first(node, free, "MAX", axis, 1), pick)
            picks.append(pick)
            hit = self.binary(node, "TEQ", pick, iota, out_type=TensorProto.BOOL)
            taken = hit if taken is None else self.binary(node, "TOR", taken, hit, out_type=TensorProto.BOOL)
        idx = picks[0]
        for pick in picks[1:]:
            idx = self.concat(node, idx, pick, axis)
        return idx

    def topk_indices(self, node, x, axis, k, largest):
        """The indices of x's k first elements along its static axis, by
        rank: element i's place is the number of elements j that come
        before it, counted over an [n, n] comparison of every pair (axis
        holds i, a new axis after it j). j comes before i when it is a NaN
        and i is not; when x_j is greater (less) than x_i; when they are
        equal and 1 / x_j is greater (less) than 1 / x_i (+0 before -0 for
        the largest, the other way for the smallest); and otherwise, both
        NaN or the same value, when j < i. That order is total, so the
        places are 0..n-1 once each, and output r is the one element whose
        place is r (ARGMAX_AXIS of place == r over i). Every count is exact
        (at most n, within f32's integers): the same bits everywhere."""
        n = x.shape[axis]
        rank = len(x.shape)
        if rank + 1 > MAX_RANK:
            self.refuse(node, "TopK with k = %d on a rank-%d input (it compares pairs on rank %d; BIB tensors "
                        "have at most %d)" % (k, rank, rank + 1, MAX_RANK), "shape")
        for mnemonic in ("RECIP", "TNOT", "TAND", "TOR", "CAST", "ARGMAX_AXIS"):
            self.need(node, mnemonic, "TopK with k = %d" % k)
        shape_i = x.shape[:axis + 1] + [1] + x.shape[axis + 1:]
        shape_j = x.shape[:axis] + [1] + x.shape[axis:]

        def pair(v):
            return self.reshape(node, v, shape_i), self.reshape(node, v, shape_j)

        def test(mnemonic, a, b):
            return self.binary(node, mnemonic, a, b, out_type=TensorProto.BOOL)

        order = "TGT" if largest else "TLT"
        xi, xj = pair(x)
        ri, rj = pair(self.unary(node, "RECIP", x))
        nani, nanj = pair(self.unary(node, "TNOT", test("TEQ", x, x)))
        after = [n, n] + [1] * (rank - 1 - axis)
        lower = self.const_val(np.tri(n, n, -1, dtype=np.bool_).reshape(after), TensorProto.BOOL)
        tie = test("TOR", test(order, rj, ri), test("TAND", test("TEQ", rj, ri), lower))
        before = test("TOR", test(order, xj, xi), test("TAND", test("TEQ", xj, xi), tie))
        nan_first = test("TAND", nanj, test("TOR", self.unary(node, "TNOT", nani), lower))
        before = test("TOR", before, nan_first)
        count = self.rt(before.shape, "f32")
        self.emit("CAST", count.reg, self.reg_of(node, before), 1)
        place = self.reduce(node, "SUM", count, [axis + 1], 1)
        ranks = np.arange(k, dtype=np.float32).reshape([k if a == axis + 1 else 1 for a in range(rank + 1)])
        hit = test("TEQ", place, self.const_val(ranks))
        hits = self.rt(hit.shape, "f32")
        self.emit("CAST", hits.reg, self.reg_of(node, hit), 1)
        idx = self.rt(x.shape[:axis] + [k] + x.shape[axis + 1:], "i32", TensorProto.INT64)
        self.emit("ARGMAX_AXIS", idx.reg, hits.reg, axis, 0)
        return idx

    def softmax(self, node, log):
        x = self.get(node, 0)
        self.f32_only(node, x)
        rank = len(x.shape)
        default = -1 if self.opset >= 13 else 1
        axis = self.axis_of(node, node.attr("axis", default), rank)
        if self.opset < 13 and axis != rank - 1:
            # Before opset 13 the softmax is over the flattened axes [axis:].
            v = self.reshape(node, x, x.shape[:axis] + [dims_prod(x.shape[axis:])])
            out = self.softmax_last(node, v, log)
            self.set(node, 0, self.reshape(node, out, x.shape))
            return
        if axis == rank - 1:
            self.set(node, 0, self.softmax_last(node, x, log))
            return
        mnem = "LOGSOFTMAX_AXIS" if log else "SOFTMAX_AXIS"
        if self.have(mnem):
            out = self.rt(x.shape, "f32")
            self.emit(mnem, out.reg, self.reg_of(node, x), axis)
            self.set(node, 0, out)
            return
        # The axis moved last, the last-axis kernel, moved back: the bits
        # SOFTMAX_AXIS defines.
        if axis == rank - 2:
            t = self.transpose_last2(node, x)
            self.set(node, 0, self.transpose_last2(node, self.softmax_last(node, t, log)))
            return
        self.need(node, "PERMUTE", "axis %d of a rank-%d input" % (axis, rank))
        perm = [k for k in range(rank) if k != axis] + [axis]
        back = [perm.index(k) for k in range(rank)]
        t = self.softmax_last(node, self.permute(node, x, perm), log)
        self.set(node, 0, self.permute(node, t, back))

    def softmax_last(self, node, x, log):
        return self.unary(node, "LOGSOFTMAX" if log else "SOFTMAX", x)

    def op_Softmax(self, node):
        self.softmax(node, False)

    def op_LogSoftmax(self, node):
        self.softmax(node, True)

    # compare and select
    def _compare(mnemonic, swap=False):
        def f(self, node):
            a, b = self.get(node, 0), self.get(node, 1)
            if a.dtype != b.dtype or a.dtype is None:
                self.refuse(node, "inputs of two types", "dtype")
            if swap:
                a, b = b, a
            self.set(node, 0, self.binary(node, mnemonic, a, b, mnemonic == "TEQ", out_type=TensorProto.BOOL))

        return f

    op_Equal = _compare("TEQ")
    op_Less = _compare("TLT")
    op_LessOrEqual = _compare("TLE")
    op_Greater = _compare("TGT")
    op_GreaterOrEqual = _compare("TGE")

    def op_IsNaN(self, node):
        # NaN is the one value that is not equal to itself.
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.need(node, "TNOT")
        eq = self.binary(node, "TEQ", x, x, out_type=TensorProto.BOOL)
        out = self.rt(x.shape, "i32", TensorProto.BOOL)
        self.emit("TNOT", out.reg, self.reg_of(node, eq))
        self.set(node, 0, out)

    def op_IsInf(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
        hits = []
        if pos:
            hits.append(self.binary(node, "TEQ", x, self.scalar_const(np.inf), out_type=TensorProto.BOOL))
        if neg:
            hits.append(self.binary(node, "TEQ", x, self.scalar_const(-np.inf), out_type=TensorProto.BOOL))
        if not hits:
            if not is_static(x.shape):
                self.refuse(node, "detect_positive = detect_negative = 0 on a dynamic shape", "shape")
            self.set(node, 0, self.const_val(np.zeros([int(d) for d in x.shape], np.bool_), TensorProto.BOOL))
            return
        out = hits[0] if len(hits) == 1 else self.binary(node, "TOR", hits[0], hits[1], out_type=TensorProto.BOOL)
        self.set(node, 0, out)

    def op_Sign(self, node):
        # x > 0 ? 1 : (x < 0 ? -1 : x): zeros keep their sign, NaN stays NaN.
        x = self.get(node, 0)
        self.f32_only(node, x)
        gt = self.binary(node, "TGT", x, self.scalar_const(0.0), out_type=TensorProto.BOOL)
        lt = self.binary(node, "TLT", x, self.scalar_const(0.0), out_type=TensorProto.BOOL)
        low = self.where(node, lt, self.scalar_const(-1.0), x)
        self.set(node, 0, self.where(node, gt, self.scalar_const(1.0), low))

    def op_EyeLike(self, node):
        x = self.get(node, 0)
        if len(x.shape) != 2 or not is_static(x.shape):
            self.refuse(node, "an input that is not a static matrix", "shape")
        et = node.attr("dtype", x.onnx_type)
        if _bib_dtype(et) is None:
            self.refuse(node, "attribute 'dtype' = %s" % _DTYPE_NAME.get(et), "dtype")
        arr = np.eye(x.shape[0], x.shape[1], k=node.attr("k", 0)).astype(_np_for(et))
        self.set(node, 0, self.const_val(arr, et))

    def op_Not(self, node):
        x = self.get(node, 0)
        self.need(node, "TNOT")
        out = self.rt(x.shape, "i32", TensorProto.BOOL)
        self.emit("TNOT", out.reg, self.reg_of(node, x))
        self.set(node, 0, out)

    def _logic(mnemonic):
        def f(self, node):
            a, b = self.get(node, 0), self.get(node, 1)
            self.set(node, 0, self.binary(node, mnemonic, a, b, True, out_type=TensorProto.BOOL))

        return f

    op_And = _logic("TAND")
    op_Or = _logic("TOR")
    op_Xor = _logic("TXOR")

    def op_Where(self, node):
        c, a, b = self.get(node, 0), self.get(node, 1), self.get(node, 2)
        if a.onnx_type != b.onnx_type:
            self.refuse(node, "inputs of two types", "dtype")
        self.set(node, 0, self.where(node, c, a, b))

    def where(self, node, c, a, b):
        self.need(node, "WHERE")
        shape = broadcast_shapes(c.shape, a.shape, b.shape)
        if shape is None:
            self.refuse(node, "shapes that do not broadcast", "shape")
        if not library_broadcasts():
            # WHERE takes a condition of the result's shape, and values of
            # that shape, a row over its last axis, or one element.
            c = self.expand(node, c, shape)

            def fit(v):
                if list(v.shape) == shape or dims_prod(v.shape) == 1:
                    return v
                if shape and v.shape and v.shape[-1] == shape[-1] and all(d == 1 for d in v.shape[:-1]):
                    return self.reshape(node, v, [shape[-1]])
                return self.expand(node, v, shape)

            a, b = fit(a), fit(b)
        out = self.rt(shape, a.dtype, a.onnx_type)
        self.emit("WHERE", out.reg, self.reg_of(node, c), self.reg_of(node, a), self.reg_of(node, b))
        return out

    def op_Clip(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        if self.opset < 11:
            lo, hi = node.attr("min"), node.attr("max")
            lo = None if lo is None else self.scalar_const(lo)
            hi = None if hi is None else self.scalar_const(hi)
        else:
            lo, hi = self.get(node, 1, True), self.get(node, 2, True)
        v = x
        if lo is not None:
            v = self.binary(node, "TMAX", v, self.reshape(node, lo, [1]) if lo.const else lo)
        if hi is not None:
            v = self.binary(node, "TMIN", v, self.reshape(node, hi, [1]) if hi.const else hi)
        if v is x:
            v = self.unary(node, "COPY", x)
        self.set(node, 0, v)

    # QuantizeLinear and DequantizeLinear: quantized models in the QDQ form
    # (onnxruntime's quantizer writes them so) run in float32, exactly as
    # the ops define them. The quantized values are integers held in i32
    # (their ONNX type kept: int8, uint8, int16, uint16, int32). The scale is
    # a float32 scalar or one per index along `axis`; the zero point, if
    # given, has its shape and the quantized type.
    QUANT_RANGE = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127),
                   TensorProto.UINT16: (0, 65535), TensorProto.INT16: (-32768, 32767)}

    def quant_params(self, node, x, qtype_from):
        """(scale, zero point, quantized ONNX type) as float32 arrays shaped
        to broadcast against x, from the constant inputs 1 and 2."""
        if node.attr("block_size", 0):
            self.refuse(node, "attribute 'block_size' (blocked quantization)", "attribute")
        scale = self.const_input(node, 1, "the scale")
        zp_val = self.get(node, 2, True)
        zp = self.const_input(node, 2, "the zero point", optional=True)
        if scale.dtype != np.float32:
            self.refuse(node, "a scale of type %s (float32 is supported)" % scale.dtype, "dtype")
        qtype = zp_val.onnx_type if zp_val is not None else qtype_from
        if qtype not in self.QUANT_RANGE and qtype != TensorProto.INT32:
            self.refuse(node, "quantized type %s (int8, uint8, int16, uint16 and int32 are supported)"
                        % _DTYPE_NAME.get(qtype), "dtype")
        zp = np.zeros(scale.shape, np.int64) if zp is None else np.asarray(zp).astype(np.int64)
        if zp.shape != scale.shape or scale.ndim > 1:
            self.refuse(node, "a scale of shape %s and a zero point of shape %s (one per tensor, or one "
                        "per index along the axis)" % (list(scale.shape), list(zp.shape)), "shape")
        rank = len(x.shape)
        axis = node.attr("axis", 1)
        if scale.size > 1:  # one of size 1 is per tensor, as onnxruntime takes it
            axis = self.axis_of(node, axis, rank)
            if x.shape[axis] != scale.size:
                self.refuse(node, "%d scales along axis %d of size %s" % (scale.size, axis, x.shape[axis]), "shape")
        scale, zp = self.along_axis(scale, zp, axis, rank)
        return scale, zp.astype(np.float32), qtype

    @staticmethod
    def along_axis(scale, zp, axis, rank):
        """scale and zp shaped to broadcast against a tensor of rank: [1]
        for one value, else their values along axis."""
        if scale.size == 1:
            return scale.reshape([1]), zp.reshape([1])
        shape = [scale.size if a == axis % rank else 1 for a in range(rank)]
        return scale.reshape(shape), zp.reshape(shape)

    def fold_DequantizeLinear(self, node, a):
        if a[0].dtype.kind not in "iu" or a[1].dtype != np.float32 or node.attr("block_size", 0):
            return None  # op_DequantizeLinear refuses it by name
        return [self.dequantized(node, a[0], a[1], a[2] if len(a) > 2 else None)]

    @staticmethod
    def dequantized(node, x, scale, zp):
        """(x - zero point) * scale in float32, as the op defines it."""
        zp = np.zeros(scale.shape, np.int64) if zp is None else np.asarray(zp)
        scale, zp = MathOps.along_axis(scale, zp, node.attr("axis", 1), x.ndim)
        return ((x.astype(np.float32) - zp.astype(np.float32)) * scale).astype(np.float32)

    def op_DequantizeLinear(self, node):
        # (x - zero point) * scale: x converted to float32 by CAST (exact
        # for 8 and 16 bits; an int32 rounds as numpy's astype), the zero
        # point subtracted (exact), one rounding in the multiply.
        x = self.get(node, 0)
        if x.dtype != "i32":
            self.refuse(node, "input of type %s (a quantized integer type is supported)"
                        % _DTYPE_NAME.get(x.onnx_type), "dtype")
        scale, zp, _ = self.quant_params(node, x, x.onnx_type)
        self.need(node, "CAST")
        v = self.rt(x.shape, "f32")
        self.emit("CAST", v.reg, self.reg_of(node, x), 1)
        if np.any(zp != 0):
            v = self.binary(node, "TSUB", v, self.const_val(zp))
        self.set(node, 0, self.binary(node, "TMUL", v, self.const_val(scale)))

    def op_QuantizeLinear(self, node):
        # round(x / scale) + zero point, saturated to the quantized type's
        # range: a correctly rounded division, ROUND (halves to even, as the
        # op asks), an exact add, TMAX and TMIN, then CAST to i32 (exact on
        # those integers; a NaN becomes 0, as CAST makes it).
        x = self.get(node, 0)
        self.f32_only(node, x)
        scale, zp, qtype = self.quant_params(node, x, TensorProto.UINT8)
        v = self.unary(node, "ROUND", self.binary(node, "TDIV", x, self.const_val(scale)))
        if np.any(zp != 0):
            v = self.binary(node, "TADD", v, self.const_val(zp))
        lo, hi = self.QUANT_RANGE.get(qtype, (-(1 << 31), (1 << 31) - 1))
        if qtype in self.QUANT_RANGE:  # CAST saturates at int32's limits itself
            v = self.binary(node, "TMAX", v, self.scalar_const(lo))
            v = self.binary(node, "TMIN", v, self.scalar_const(hi))
        self.need(node, "CAST")
        out = self.rt(x.shape, "i32", qtype)
        self.emit("CAST", out.reg, self.reg_of(node, v), 2)
        self.set(node, 0, out)

    def op_Hardmax(self, node):
        # 1.0 where the first maximum along the axis is, else 0.0.
        x = self.get(node, 0)
        self.f32_only(node, x)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", -1 if self.opset >= 13 else 1), rank)
        if self.opset < 13 and axis != rank - 1:
            self.refuse(node, "attribute 'axis' before opset 13 (over the flattened axes)")
        n = x.shape[axis]
        if not isinstance(n, int):
            self.refuse(node, "a dynamic axis", "shape")
        idx = self.arg_first(node, x, "MAX", axis, 1)
        iota = self.const_val(np.arange(n, dtype=np.int64).reshape([n if k == axis else 1 for k in range(rank)]))
        hit = self.binary(node, "TEQ", idx, iota, True, out_type=TensorProto.BOOL)
        self.need(node, "CAST")
        out = self.rt(hit.shape, "f32")
        self.emit("CAST", out.reg, self.reg_of(node, hit), 1)
        self.set(node, 0, out)
