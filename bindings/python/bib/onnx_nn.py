"""Lowering of the neural-network ONNX ops for the importer (onnx_import.py):
normalizations, losses, convolution, pooling and the recurrent units (RNN,
LSTM, GRU, unrolled at import)."""

import itertools
import math

import numpy as np
from onnx import TensorProto

from .onnx_common import dims_prod, is_static, shape_text


class NNOps:
    """The Importer's op_ methods for neural-network ops."""

    def op_GlobalAveragePool(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.set(node, 0, self.reduce(node, "MEAN", x, list(range(2, len(x.shape))), 1))

    def op_GlobalMaxPool(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.set(node, 0, self.reduce(node, "MAX", x, list(range(2, len(x.shape))), 1))

    # normalization
    def layernorm(self, node, x, gamma, beta, eps, axis):
        """LAYERNORM_EPS (or LAYERNORM when eps is its fixed 1e-5) over the
        axes [axis:] of x, flattened into one."""
        rank = len(x.shape)
        self.f32_only(node, x, gamma, beta)
        n = dims_prod(x.shape[axis:])
        v = self.reshape(node, x, x.shape[:axis] + [n]) if axis != rank - 1 else x
        g = self.reshape(node, self.expand_const(node, gamma, x.shape[axis:]), [n])
        if beta is None:
            beta = self.const_val(np.zeros([n], np.float32)) if isinstance(n, int) else None
            if beta is None:
                self.refuse(node, "a dynamic normalized axis without a bias", "shape")
        bt = self.reshape(node, self.expand_const(node, beta, x.shape[axis:]), [n])
        out = self.rt(v.shape, "f32")
        eps32 = float(np.float32(eps))
        packed = g.const and bt.const
        if eps32 == float(np.float32(1e-5)) and not (packed and self.have("LAYERNORM_EPS")):
            # LAYERNORM's fixed eps; gamma and beta as they are.
            self.emit("LAYERNORM", out.reg, self.reg_of(node, v), self.reg_of(node, g), self.reg_of(node, bt))
        else:
            self.need(node, "LAYERNORM_EPS", "an epsilon other than 1e-5")
            if packed:
                gb = self.const_val(np.stack([g.array, bt.array]).astype(np.float32))
            else:
                g2, b2 = self.reshape(node, g, [1, n]), self.reshape(node, bt, [1, n])
                gb = self.concat(node, g2, b2, 0, "a scale or bias given at run time")
            self.scalar(1)
            self.load_f64(("scratch", 0), eps32)
            self.emit("LAYERNORM_EPS", out.reg, self.reg_of(node, v), self.reg_of(node, gb), ("scratch", 0))
        return self.reshape(node, out, x.shape)

    def expand_const(self, node, v, shape):
        if list(v.shape) == list(shape):
            return v
        if dims_prod(v.shape) == dims_prod(shape):
            return self.reshape(node, v, shape)
        if v.const and is_static(shape):
            return self.const_val(np.ascontiguousarray(np.broadcast_to(v.array, shape)), v.onnx_type)
        self.refuse(node, "a scale or bias of shape %s over %s" % (shape_text(v.shape), shape_text(shape)), "shape")

    def op_LayerNormalization(self, node):
        x = self.get(node, 0)
        gamma = self.get(node, 1)
        beta = self.get(node, 2, optional=True)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", -1), rank)
        eps = node.attr("epsilon", 1e-5)
        node.attr("stash_type")
        self.set(node, 0, self.layernorm(node, x, gamma, beta, eps, axis))
        want = [k < len(node.outputs) and node.outputs[k] and self.consumers_of(node.outputs[k]) for k in (0, 1, 2)]
        if want[1] or want[2]:
            # Mean and InvStdDev as ONNX's function body defines them:
            # ReduceMean, Sub, Mul, ReduceMean, Add eps, Sqrt, Reciprocal.
            axes = list(range(axis, rank))
            mean = self.reduce(node, "MEAN", x, axes, 1)
            self.set(node, 1, mean)
            if want[2]:
                d = self.binary(node, "TSUB", x, mean)
                var = self.reduce(node, "MEAN", self.binary(node, "TMUL", d, d), axes, 1)
                self.need(node, "SQRT", "output InvStdDev")
                self.need(node, "RECIP", "output InvStdDev")
                v = self.binary(node, "TADD", var, self.scalar_const(eps))
                self.set(node, 2, self.unary(node, "RECIP", self.unary(node, "SQRT", v)))

    def op_InstanceNormalization(self, node):
        # Layer norm of each (n, c) over the spatial axes, then scale and
        # bias per channel.
        x, scale, bias = self.get(node, 0), self.get(node, 1), self.get(node, 2)
        self.f32_only(node, x, scale, bias)
        eps = node.attr("epsilon", 1e-5)
        rank = len(x.shape)
        if rank < 3:
            self.refuse(node, "a rank-%d input" % rank, "shape")
        c = x.shape[1]
        flat = self.reshape(node, x, [dims_prod(x.shape[:2]), dims_prod(x.shape[2:])])
        hw = flat.shape[1]
        if not isinstance(hw, int):
            self.refuse(node, "dynamic spatial dimensions", "shape")
        ones = self.const_val(np.ones([hw], np.float32))
        zeros = self.const_val(np.zeros([hw], np.float32))
        y = self.reshape(node, self.layernorm(node, flat, ones, zeros, eps, 1), x.shape)
        if scale.const and bias.const and isinstance(c, int) and self.have("BATCHNORM"):
            # Scale and bias in one pass: ((y - +0) / 1) * s + b is y * s + b,
            # the TMUL and TADD below, each rounded once.
            self.set(node, 0, self.affine_batchnorm(node, y, np.asarray(scale.array).reshape(c),
                                                    np.asarray(bias.array).reshape(c)))
            return
        per_channel = [c] + [1] * (rank - 2)
        y = self.binary(node, "TMUL", y, self.reshape(node, scale, per_channel))
        self.set(node, 0, self.binary(node, "TADD", y, self.reshape(node, bias, per_channel)))

    def op_MeanVarianceNormalization(self, node):
        # ONNX's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9).
        x = self.get(node, 0)
        self.f32_only(node, x)
        rank = len(x.shape)
        axes = sorted(self.axis_of(node, a, rank) for a in node.attr("axes", [0, 2, 3]))
        mean = self.reduce(node, "MEAN", x, axes, 1)
        ex2 = self.reduce(node, "MEAN", self.binary(node, "TMUL", x, x), axes, 1)
        var = self.binary(node, "TSUB", ex2, self.binary(node, "TMUL", mean, mean))
        std = self.binary(node, "TADD", self.unary(node, "SQRT", var), self.scalar_const(1e-9))
        self.set(node, 0, self.binary(node, "TDIV", self.binary(node, "TSUB", x, mean), std))

    def nll(self, node, logp, target, weight, reduction, ignore):
        """ONNX's negative log-likelihood of logp [N,C,...] at the class
        indices target [N,...], as its reference computes it: -logp at the
        target (0 where target == ignore), times the gathered weight, then
        summed, or divided by the sum of the weights ('mean')."""
        if reduction not in ("none", "sum", "mean"):
            self.refuse(node, "attribute 'reduction' = '%s'" % reduction)
        if len(logp.shape) < 2 or target.dtype != "i32":
            self.refuse(node, "an input of rank < 2 or a non-integer target", "shape")
        ign = None
        t = target
        if ignore is not None:
            ii = self.const_val(np.array([ignore], np.int64))
            ign = self.binary(node, "TEQ", target, ii, out_type=TensorProto.BOOL)
            t = self.where(node, ign, self.const_val(np.array([0], np.int64)), target)
        self.need(node, "GATHER_ELEMENTS")
        tk = self.reshape(node, t, [t.shape[0], 1] + list(t.shape[1:]))
        g = self.rt(tk.shape, "f32")
        self.emit("GATHER_ELEMENTS", g.reg, self.reg_of(node, logp), self.reg_of(node, tk), 1)
        loss = self.unary(node, "TNEG", self.reshape(node, g, t.shape))
        zero = self.scalar_const(0.0)
        if ign is not None:
            loss = self.where(node, ign, zero, loss)
        w = None
        if weight is not None:
            self.need(node, "GATHER_AXIS")
            w = self.rt(t.shape, "f32")
            self.emit("GATHER_AXIS", w.reg, self.reg_of(node, weight), self.reg_of(node, t), 0)
            if ign is not None:
                w = self.where(node, ign, zero, w)
            loss = self.binary(node, "TMUL", w, loss)
        elif ign is not None:
            w = self.where(node, ign, zero, self.scalar_const(1.0))
        every = list(range(len(t.shape)))
        if reduction == "none":
            return loss
        total = self.reduce(node, "SUM", loss, every, 0)
        if reduction == "sum":
            return total
        if w is not None:
            return self.binary(node, "TDIV", total, self.reduce(node, "SUM", w, every, 0))
        return self.reduce(node, "MEAN", loss, every, 0)

    def op_NegativeLogLikelihoodLoss(self, node):
        x, target = self.get(node, 0), self.get(node, 1)
        weight = self.get(node, 2, optional=True)
        self.f32_only(node, x, weight)
        self.set(node, 0, self.nll(node, x, target, weight, node.attr("reduction", "mean"), node.attr("ignore_index")))

    def op_SoftmaxCrossEntropyLoss(self, node):
        x, target = self.get(node, 0), self.get(node, 1)
        weight = self.get(node, 2, optional=True)
        self.f32_only(node, x, weight)
        if len(x.shape) < 2:
            self.refuse(node, "a rank-%d input" % len(x.shape), "shape")
        self.need(node, "LOGSOFTMAX_AXIS")
        logp = self.rt(x.shape, "f32")
        self.emit("LOGSOFTMAX_AXIS", logp.reg, self.reg_of(node, x), 1)
        self.set(node, 0, self.nll(node, logp, target, weight, node.attr("reduction", "mean"),
                                   node.attr("ignore_index")))
        self.set(node, 1, logp)

    def consumers_of(self, name):
        return self.consumers.get(name) or (name in self.graph_outputs)

    def op_BatchNormalization(self, node, relu=False):
        x = self.get(node, 0)
        if node.attr("training_mode", 0):
            self.refuse(node, "attribute 'training_mode' = 1: BIB runs inference only")
        if len([o for o in node.outputs if o]) > 1:
            self.refuse(node, "the running mean and variance outputs (training mode)")
        eps = float(np.float32(node.attr("epsilon", 1e-5)))
        node.attr("momentum")
        if node.attr("spatial", 1) != 1:
            self.refuse(node, "attribute 'spatial' = 0")
        params = [self.const_input(node, k, name) for k, name in
                  ((1, "the scale"), (2, "the bias"), (3, "the mean"), (4, "the variance"))]
        self.f32_only(node, x)
        c = x.shape[1]
        p = self.const_val(np.stack([np.asarray(a, np.float32).reshape(c) for a in params]))
        self.set(node, 0, self.batchnorm(node, x, p, eps, relu))

    def batchnorm(self, node, x, params, eps, relu):
        """BATCHNORM (BATCHNORM_RELU with relu) of x by the [4,C] params."""
        mnem = "BATCHNORM_RELU" if relu else "BATCHNORM"
        self.need(node, mnem)
        out = self.rt(x.shape, "f32")
        self.scalar(1)
        self.load_f64(("scratch", 0), eps)
        self.emit(mnem, out.reg, self.reg_of(node, x), self.reg_of(node, params), ("scratch", 0))
        return out

    def affine_batchnorm(self, node, x, scale, bias, relu=False):
        """x * scale + bias per channel of axis 1 (scale and bias: [C]
        arrays) as one BATCHNORM (BATCHNORM_RELU) of mean +0, var 1, eps 0:
        ((x - +0) / sqrt(1 + 0)) * s + b, where the subtract and the divide
        are exact, so the bytes are those of a TMUL then a TADD."""
        c = len(scale)
        p = np.stack([np.asarray(scale, np.float32), np.asarray(bias, np.float32), np.zeros(c, np.float32),
                      np.ones(c, np.float32)])
        return self.batchnorm(node, x, self.const_val(p), 0.0, relu)

    # convolution and pooling
    def window(self, node, x, kernel):
        """The window of a Conv or pool: strides, dilations and pads
        (explicit, or from auto_pad and the static spatial dims), as lists
        over the spatial axes (pads: all begins, then all ends)."""
        nsp = len(kernel)
        strides = list(node.attr("strides", [1] * nsp))
        dilations = list(node.attr("dilations", [1] * nsp))
        pads = list(node.attr("pads", [0] * (2 * nsp)))
        auto = node.attr("auto_pad", "NOTSET")
        spatial = x.shape[2:]
        if not is_static(spatial):
            self.refuse(node, "dynamic spatial dimensions", "shape")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            pads = [0] * (2 * nsp)
            for k in range(nsp):
                out = -(-spatial[k] // strides[k])
                total = max(0, (out - 1) * strides[k] + (kernel[k] - 1) * dilations[k] + 1 - spatial[k])
                small, big = total // 2, total - total // 2
                pads[k], pads[k + nsp] = (small, big) if auto == "SAME_UPPER" else (big, small)
        elif auto == "VALID":
            pads = [0] * (2 * nsp)
        elif auto != "NOTSET":
            self.refuse(node, "attribute 'auto_pad' = '%s'" % auto)
        return strides, dilations, pads

    def params(self, words):
        """Loads a parameter block into scratch registers; returns the first."""
        self.scalar(len(words))
        for k, w in enumerate(words):
            self.load_int(("scratch", k), int(w))
        return ("scratch", 0)

    def pool_out(self, n, k, s, d, p0, p1, ceil):
        eff = (k - 1) * d + 1
        num = n + p0 + p1 - eff
        if ceil:
            o = -(-num // s) + 1
            if (o - 1) * s >= n + p0:
                o -= 1
            return o
        return num // s + 1

    def conv_operands(self, node, what):
        """A convolution node's x, w and optional bias (f32 each) and its
        spatial rank nsp, 1 or 2; what names the node in a refusal."""
        x, w = self.get(node, 0), self.get(node, 1)
        bias = self.get(node, 2, optional=True)
        self.f32_only(node, x, w, bias)
        nsp = len(x.shape) - 2
        if nsp not in (1, 2):
            self.refuse(node, "a %d-D %s (BIB has 1-D and 2-D)" % (nsp, what), "shape")
        return x, w, bias, nsp

    def op_Conv(self, node, relu=False):
        x, w, bias, nsp = self.conv_operands(node, "convolution")
        kernel = list(node.attr("kernel_shape", w.shape[2:]))
        group = node.attr("group", 1)
        strides, dilations, pads = self.window(node, x, kernel)
        self.need(node, "CONV")
        spatial = [self.pool_out(x.shape[2 + k], kernel[k], strides[k], dilations[k], pads[k], pads[k + nsp], 0)
                   for k in range(nsp)]
        out = self.rt([x.shape[0], w.shape[0]] + spatial, "f32")
        # ONNX-PLAN.md's block: group, stride h,w, dilation h,w, pad t,l,b,r,
        # 3 reserved; 1-D uses the w entries with h = 1.
        if nsp == 1:
            words = [group, 1, strides[0], 1, dilations[0], 0, pads[0], 0, pads[1], 0, 0, 0]
        else:
            words = [group, strides[0], strides[1], dilations[0], dilations[1]] + pads[:4] + [0, 0, 0]
        r = self.params(words)
        self.emit("CONV", out.reg, self.reg_of(node, x), self.reg_of(node, w), r)
        o = w.shape[0]
        if bias is not None and bias.const and self.have("BATCHNORM_RELU" if relu else "BATCHNORM"):
            # The bias (and the ReLU) in one pass over the output, where a
            # TADD of a [C,1,1] bias would first expand it to the output's
            # shape: ((x - +0) / sqrt(1 + 0)) * 1 + bias is exactly x + bias
            # for every x, -0 and NaN included.
            self.set(node, 0, self.affine_batchnorm(node, out, np.ones(o), np.asarray(bias.array).reshape(o), relu))
            return
        if bias is not None:
            b3 = self.reshape(node, bias, [o] + [1] * nsp)
            out = self.binary(node, "TADD", out, b3)
        if relu:
            out = self.unary(node, "RELU", out)
        self.set(node, 0, out)

    def op_ConvTranspose(self, node):
        """The transposed convolution as a CONV: the input with s - 1 zeros
        between its elements (EXPAND, then WHERE against a mask, so that no
        Inf or NaN reaches the zeros), padded by d (k - 1) - pad, convolved
        with the kernel flipped and its two channel axes swapped per group."""
        x, w, bias, nsp = self.conv_operands(node, "transposed convolution")
        self.const_input(node, 1, "the kernel")  # rearranged at import
        spatial = x.shape[2:]
        if not is_static(spatial):
            self.refuse(node, "dynamic spatial dimensions", "shape")
        group = node.attr("group", 1)
        kernel = list(node.attr("kernel_shape", w.shape[2:]))
        strides = list(node.attr("strides", [1] * nsp))
        dil = list(node.attr("dilations", [1] * nsp))
        outpad = list(node.attr("output_padding", [0] * nsp))
        pads = list(node.attr("pads", [0] * (2 * nsp)))
        out_shape = node.attr("output_shape")
        auto = node.attr("auto_pad", "NOTSET")
        full = [strides[k] * (spatial[k] - 1) + outpad[k] + (kernel[k] - 1) * dil[k] + 1 for k in range(nsp)]
        if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
            want = list(out_shape)[-nsp:] if out_shape is not None else [spatial[k] * strides[k] for k in range(nsp)]
            for k in range(nsp):
                # ONNX's rule (C division, toward zero): SAME_UPPER, and an
                # output_shape, give the begin half the total, the end the
                # rest; a negative total extends the end.
                total = full[k] - want[k]
                half = int(total / 2)
                pads[k], pads[k + nsp] = (total - half, half) if auto == "SAME_LOWER" else (half, total - half)
        elif auto not in ("NOTSET", "VALID"):
            self.refuse(node, "attribute 'auto_pad' = '%s'" % auto)
        begin = [(kernel[k] - 1) * dil[k] - pads[k] for k in range(nsp)]
        end = [(kernel[k] - 1) * dil[k] - pads[k + nsp] + outpad[k] for k in range(nsp)]
        if min(begin + end) < 0:
            self.refuse(node, "pads larger than dilation * (kernel - 1)", "attribute")
        self.need(node, "CONV")
        c, og = w.shape[0], w.shape[1]
        if c % group:
            self.refuse(node, "%d input channels in %d groups" % (c, group), "shape")
        wa = np.asarray(w.array, np.float32)
        flip = wa[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
        per = c // group
        wt = np.concatenate([np.swapaxes(flip[g * per:(g + 1) * per], 0, 1) for g in range(group)], axis=0)
        z = x
        if any(st > 1 for st in strides) and self.have("PERMUTE"):
            self.set(node, 0, self.conv_transpose_phases(node, x, wt, bias, group, og, kernel, strides, dil,
                                                         begin, end))
            return
        if any(st > 1 for st in strides):
            # [N,C,H,W] -> [N,C,H,1,W,1] -> [N,C,H,sh,W,sw], the copies but the
            # first of each block zeroed, -> [N,C,H*sh,W*sw], cut to (H-1)*sh+1.
            up, big, mask_shape = list(x.shape[:2]), list(x.shape[:2]), [1, 1]
            for k in range(nsp):
                up += [spatial[k], 1]
                big += [spatial[k], strides[k]]
                mask_shape += [1, strides[k]]
            mask = np.zeros(mask_shape, np.int64)
            mask[(0,) * len(mask_shape)] = 1
            e = self.expand(node, self.reshape(node, x, up), big)
            e = self.where(node, self.const_val(mask, TensorProto.BOOL), e, self.scalar_const(0.0))
            flat = self.reshape(node, e, list(x.shape[:2]) + [spatial[k] * strides[k] for k in range(nsp)])
            z = self.slice(node, flat, [0] * nsp, [(spatial[k] - 1) * strides[k] + 1 for k in range(nsp)],
                           list(range(2, 2 + nsp)), [1] * nsp)
        zsp = z.shape[2:]
        outsp = [zsp[k] + begin[k] + end[k] - (kernel[k] - 1) * dil[k] for k in range(nsp)]
        out = self.rt([x.shape[0], og * group] + outsp, "f32")
        if nsp == 1:
            words = [group, 1, 1, 1, dil[0], 0, begin[0], 0, end[0], 0, 0, 0]
        else:
            words = [group, 1, 1, dil[0], dil[1], begin[0], begin[1], end[0], end[1], 0, 0, 0]
        r = self.params(words)
        self.emit("CONV", out.reg, self.reg_of(node, z), self.reg_of(node, self.const_val(np.ascontiguousarray(wt))), r)
        if bias is not None:
            out = self.binary(node, "TADD", out, self.reshape(node, bias, [og * group] + [1] * nsp))
        self.set(node, 0, out)

    def conv_transpose_phases(self, node, x, wt, bias, group, og, kernel, strides, dil, begin, end):
        """A strided transposed convolution as one CONV per output phase.
        The zero-inserted form (z, above: x[i] at z[s*i], +0 between) gives
        output o the chain over the taps t ascending of wt[t] * z[o + t*d -
        begin]; a tap whose z is an inserted zero or padding adds +0 * w,
        which leaves the chain as it is for a finite w, unless the chain is
        -0 (a product that underflowed to -0): that becomes +0 there and
        stays -0 here, as in ONNX's definition, which has no such terms.
        The taps that meet x are those with (o + t*d - begin) = 0 mod s,
        which depends on o only through its phase r = o mod s: output s*m + r
        is the chain over those taps of wt[t] * x[m + (r + t*d - begin) / s],
        a CONV of x with them, at dilation d / gcd(s, d). So each phase is a
        CONV with 1/s of the taps per axis, in the same order: the same bits
        as the zero-inserted form for finite weights but the sign of such a
        zero, at 1/s^2 of its work in 2-D (an infinite weight no longer
        meets the inserted zeros either). The phases go out
        interleaved: CONCAT, RESHAPE, PERMUTE, and a SLICE of the last
        phase's overhang."""
        nsp = len(kernel)
        spatial = x.shape[2:]
        z_len = [(spatial[k] - 1) * strides[k] + 1 for k in range(nsp)]
        out_len = [z_len[k] + begin[k] + end[k] - (kernel[k] - 1) * dil[k] for k in range(nsp)]
        m_len = [-(-out_len[k] // strides[k]) for k in range(nsp)]
        n, oc = x.shape[0], og * group

        def axis_phase(k, r):
            # (taps, lo, hi, dilation, pad begin, pad end) of phase r along
            # axis k; taps empty or hi <= lo: no tap meets x.
            s, d = strides[k], dil[k]
            taps = [t for t in range(kernel[k]) if (r + t * d - begin[k]) % s == 0]
            if not taps:
                return None
            step = d // math.gcd(s, d)
            off0 = (r + taps[0] * d - begin[k]) // s
            off_last = off0 + (len(taps) - 1) * step
            lo, hi = max(0, off0), min(spatial[k], m_len[k] + off_last)
            if hi <= lo:
                return None
            pb = lo - off0
            pe = m_len[k] - (hi - lo) - pb + (len(taps) - 1) * step
            return taps, lo, hi, step, pb, pe

        phases = []
        for r in itertools.product(*[range(st) for st in strides]):
            geo = [axis_phase(k, r[k]) for k in range(nsp)]
            shape = [n, oc] + m_len
            if any(g is None for g in geo):
                phases.append(self.expand(node, self.const_val(np.zeros([1] * (2 + nsp), np.float32)), shape))
                continue
            sub = wt
            for k, g in enumerate(geo):
                sub = np.take(sub, g[0], axis=2 + k)
            xs = x
            if any(g[1] > 0 or g[2] < spatial[k] for k, g in enumerate(geo)):
                xs = self.slice(node, x, [g[1] for g in geo], [g[2] for g in geo], list(range(2, 2 + nsp)),
                                [1] * nsp)
            out = self.rt(shape, "f32")
            if nsp == 1:
                words = [group, 1, 1, 1, geo[0][3], 0, geo[0][4], 0, geo[0][5], 0, 0, 0]
            else:
                words = [group, 1, 1, geo[0][3], geo[1][3], geo[0][4], geo[1][4], geo[0][5], geo[1][5], 0, 0, 0]
            r_words = self.params(words)
            self.emit("CONV", out.reg, self.reg_of(node, xs),
                      self.reg_of(node, self.const_val(np.ascontiguousarray(sub, np.float32))), r_words)
            phases.append(out)
        # [P, N, OC, M...] with P the phases in row-major order of (r_h, r_w),
        # -> [s_h, s_w, N, OC, M_h, M_w] -> [N, OC, M_h, s_h, M_w, s_w].
        stacked = self.reshape(node, phases[0], [1, n, oc] + m_len)
        for ph in phases[1:]:
            stacked = self.concat(node, stacked, self.reshape(node, ph, [1, n, oc] + m_len), 0)
        grid = self.reshape(node, stacked, list(strides) + [n, oc] + m_len)
        perm = [nsp, nsp + 1] + [a for k in range(nsp) for a in (nsp + 2 + k, k)]
        y = self.reshape(node, self.permute(node, grid, perm), [n, oc] + [m_len[k] * strides[k] for k in range(nsp)])
        if any(m_len[k] * strides[k] != out_len[k] for k in range(nsp)):
            y = self.slice(node, y, [0] * nsp, out_len, list(range(2, 2 + nsp)), [1] * nsp)
        if bias is not None:
            y = self.binary(node, "TADD", y, self.reshape(node, bias, [oc] + [1] * nsp))
        return y

    def op_LRN(self, node):
        # y = x / (bias + alpha / size * sum of x^2 over the nearby channels)^beta;
        # the channel window sum is a CONV of ones over the channel axis.
        x = self.get(node, 0)
        self.f32_only(node, x)
        size = int(node.attr("size"))
        alpha, beta = node.attr("alpha", 0.0001), node.attr("beta", 0.75)
        bias = node.attr("bias", 1.0)
        if len(x.shape) < 3:
            self.refuse(node, "a rank-%d input" % len(x.shape), "shape")
        self.need(node, "CONV")
        n, c = x.shape[0], x.shape[1]
        rest = dims_prod(x.shape[2:])
        sq = self.reshape(node, self.binary(node, "TMUL", x, x), [n, 1, c, rest])
        ones = self.const_val(np.ones((1, 1, size, 1), np.float32))
        ss = self.rt([n, 1, c, rest], "f32")
        r = self.params([1, 1, 1, 1, 1, (size - 1) // 2, 0, size // 2, 0, 0, 0, 0])
        self.emit("CONV", ss.reg, self.reg_of(node, sq), self.reg_of(node, ones), r)
        t = self.binary(node, "TADD", self.scale(node, self.reshape(node, ss, x.shape), alpha / size),
                        self.scalar_const(bias))
        self.set(node, 0, self.binary(node, "TDIV", x, self.binary(node, "TPOW", t, self.scalar_const(beta))))

    def op_RNN(self, node):
        """An RNN with tanh, unrolled at import over the static sequence:
        per step H = tanh(X_t W^T + H R^T + Wb + Rb), summed in that order
        as ONNX's reference does; each direction with its own weights."""
        x, seq, batch, hidden, layout, dirs = self.recurrent_input(node, ["Tanh"])
        w, r, b = self.get(node, 1), self.get(node, 2), self.get(node, 3, optional=True)
        h0 = self.initial_state(node, 5, layout)
        steps_by_dir, hs = [], []
        for d, backward in enumerate(dirs):
            wt = self.transpose_last2(node, self.direction(node, w, d, [hidden, w.shape[2]]))
            rt = self.transpose_last2(node, self.direction(node, r, d, [hidden, hidden]))
            h = self.direction(node, h0, d, [batch, hidden]) if h0 is not None else \
                self.zero_state(node, batch, hidden)
            rows = None
            if b is not None:
                bb = self.direction(node, b, d, [2 * hidden])
                rows = [self.columns(node, bb, k, hidden) for k in (0, 1)]
            steps = {}
            for t in self.time_steps(seq, backward):
                xt = self.reshape(node, self.slice(node, x, [t], [t + 1], [0], [1]), [batch, x.shape[2]])
                acc = self.binary(node, "TADD", self.matmul(node, xt, wt), self.matmul(node, h, rt))
                for row in rows or []:
                    acc = self.binary(node, "TADD", acc, row)
                h = self.unary(node, "TANH", acc)
                steps[t] = self.reshape(node, h, [1, 1, batch, hidden])
            steps_by_dir.append([steps[t] for t in range(seq)])
            hs.append(h)
        self.recurrent_outputs(node, steps_by_dir, hs, batch, hidden, layout)

    def recurrent_input(self, node, acts):
        """The checks and the inputs every unrolled recurrence shares: x as
        [seq, batch, input] (layout 1 permuted), seq, batch, hidden size,
        layout, and per direction whether it runs backward in time."""
        x = self.get(node, 0)
        self.f32_only(node, x, self.get(node, 1), self.get(node, 2), self.get(node, 3, optional=True))
        direction = node.attr("direction", "forward")
        dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
        if dirs is None:
            self.refuse(node, "attribute 'direction' = '%s' (forward, reverse and bidirectional are lowered)"
                        % direction)
        given = node.attr("activations")
        # One list of activations per direction.
        if given is not None and [a.decode() if isinstance(a, bytes) else a for a in given] != acts * len(dirs):
            self.refuse(node, "attribute 'activations' other than %s" % ", ".join(acts * len(dirs)))
        for a in ("clip", "activation_alpha", "activation_beta", "input_forget"):
            if node.attr(a):
                self.refuse(node, "attribute '%s'" % a)
        layout = node.attr("layout", 0)
        if layout:
            x = self.permute(node, x, [1, 0, 2])
        seq, batch = x.shape[0], x.shape[1]
        if not isinstance(seq, int):
            self.refuse(node, "a dynamic sequence (the steps are unrolled at import)", "shape")
        if self.get(node, 4, optional=True) is not None:
            lens = self.const_ints(node, 4, "the sequence lengths")
            if any(v != seq for v in lens):
                self.refuse(node, "sequence lengths shorter than the sequence", "attribute")
        return x, seq, batch, int(node.attr("hidden_size")), layout, dirs

    def initial_state(self, node, i, layout):
        """The initial hidden (or cell) state at input i as [directions,
        batch, hidden], or None when absent: layout 1 gives it as [batch,
        directions, hidden], permuted here so that direction() takes the
        direction's part along axis 0 whatever the layout."""
        v = self.get(node, i, optional=True)
        if v is not None and layout:
            v = self.permute(node, v, [1, 0, 2])
        return v

    def direction(self, node, v, d, shape):
        """Direction d's part (along axis 0) of a recurrent weight, bias or
        initial state, viewed as shape."""
        if v.shape[0] != 1:
            v = self.slice(node, v, [d], [d + 1], [0], [1])
        return self.reshape(node, v, shape)

    @staticmethod
    def time_steps(seq, backward):
        """The order a direction reads the sequence in: the reverse one from
        the last step to the first (its outputs stay at their own steps)."""
        return range(seq - 1, -1, -1) if backward else range(seq)

    def zero_state(self, node, batch, hidden):
        """The initial hidden (or cell) state of zeros: a constant for a
        static batch, made at run time (ALLOC and FILL) for a dynamic one."""
        if isinstance(batch, int):
            return self.const_val(np.zeros((batch, hidden), np.float32))
        return self.filled(node, [batch, hidden], "f32", TensorProto.FLOAT, 0.0)

    def columns(self, node, v, k, width):
        """Columns [k*width, (k+1)*width) of v's last axis."""
        return self.slice(node, v, [k * width], [(k + 1) * width], [len(v.shape) - 1], [1])

    def recurrent_outputs(self, node, steps_by_dir, hs, batch, hidden, layout):
        """Y [seq, directions, batch, hidden]: each direction's steps joined
        in time order, the directions side by side (forward first), as ONNX
        specifies; Y_h [directions, batch, hidden] the last state of each."""
        if node.outputs and node.outputs[0]:
            y = None
            for steps in steps_by_dir:
                yd = steps[0]
                for st in steps[1:]:
                    yd = self.concat(node, yd, st, 0)
                y = yd if y is None else self.concat(node, y, yd, 1)
            self.set(node, 0, self.permute(node, y, [2, 0, 1, 3]) if layout else y)
        self.set(node, 1, self.final_states(node, hs, batch, hidden, layout))

    def final_states(self, node, hs, batch, hidden, layout):
        out = None
        for h in hs:
            hd = self.reshape(node, h, [1, batch, hidden])
            out = hd if out is None else self.concat(node, out, hd, 0)
        return self.permute(node, out, [1, 0, 2]) if layout else out

    def op_LSTM(self, node):
        """An LSTM unrolled at import, in the order of operations of ONNX's
        reference: gates = X_t W^T + H R^T + (Wb + Rb), split i, o, f, c; i,
        f with the peepholes on C; C = f C + i tanh(c); o with the peephole
        on the new C; H = o tanh(C). Each direction with its own weights."""
        x, seq, batch, hidden, layout, dirs = self.recurrent_input(node, ["Sigmoid", "Tanh", "Tanh"])
        w, r = self.get(node, 1), self.get(node, 2)
        b, p = self.get(node, 3, optional=True), self.get(node, 7, optional=True)
        h0, c0 = self.initial_state(node, 5, layout), self.initial_state(node, 6, layout)
        zeros = []  # the zero state, made once (by the first direction, after its bias)
        steps_by_dir, hs, cs = [], [], []
        for d, backward in enumerate(dirs):
            steps, h, c = self.lstm_direction(node, x, seq, batch, hidden, d, backward, w, r, b, p, h0, c0, zeros)
            steps_by_dir.append(steps)
            hs.append(h)
            cs.append(c)
        self.recurrent_outputs(node, steps_by_dir, hs, batch, hidden, layout)
        if len(node.outputs) > 2 and node.outputs[2]:
            self.set(node, 2, self.final_states(node, cs, batch, hidden, layout))

    def lstm_direction(self, node, x, seq, batch, hidden, d, backward, w, r, b, p, h0, c0, zeros):
        wt = self.transpose_last2(node, self.direction(node, w, d, [4 * hidden, w.shape[2]]))
        rt = self.transpose_last2(node, self.direction(node, r, d, [4 * hidden, hidden]))
        bias = None
        if b is not None:
            bb = self.direction(node, b, d, [8 * hidden])
            wb, rb = self.columns(node, bb, 0, 4 * hidden), self.columns(node, bb, 1, 4 * hidden)
            bias = self.binary(node, "TADD", wb, rb)
        if not zeros and (h0 is None or c0 is None):
            zeros.append(self.zero_state(node, batch, hidden))
        h = self.direction(node, h0, d, [batch, hidden]) if h0 is not None else zeros[0]
        c = self.direction(node, c0, d, [batch, hidden]) if c0 is not None else zeros[0]
        peep = None
        if p is not None:
            pp = self.direction(node, p, d, [3 * hidden])
            peep = [self.columns(node, pp, k, hidden) for k in range(3)]  # i, o, f
        steps = {}
        for t in self.time_steps(seq, backward):
            xt = self.reshape(node, self.slice(node, x, [t], [t + 1], [0], [1]), [batch, x.shape[2]])
            g = self.binary(node, "TADD", self.matmul(node, xt, wt), self.matmul(node, h, rt))
            if bias is not None:
                g = self.binary(node, "TADD", g, bias)
            gi, go, gf, gc = (self.columns(node, g, k, hidden) for k in range(4))
            if peep is not None:
                gi = self.binary(node, "TADD", gi, self.binary(node, "TMUL", peep[0], c))
                gf = self.binary(node, "TADD", gf, self.binary(node, "TMUL", peep[2], c))
            i, f = self.unary(node, "SIGMOID", gi), self.unary(node, "SIGMOID", gf)
            cc = self.unary(node, "TANH", gc)
            c = self.binary(node, "TADD", self.binary(node, "TMUL", f, c), self.binary(node, "TMUL", i, cc))
            if peep is not None:
                go = self.binary(node, "TADD", go, self.binary(node, "TMUL", peep[1], c))
            h = self.binary(node, "TMUL", self.unary(node, "SIGMOID", go), self.unary(node, "TANH", c))
            steps[t] = self.reshape(node, h, [1, 1, batch, hidden])
        return [steps[t] for t in range(seq)], h, c

    def op_GRU(self, node):
        """A GRU unrolled at import, as ONNX's reference computes it: z, r =
        sigmoid(X_t Wzr^T + H Rzr^T + (Wbzr + Rbzr)); the candidate
        tanh(X_t Wh^T + (r H) Rh^T + Wbh + Rbh), or with linear_before_reset
        tanh(X_t Wh^T + r (H Rh^T + Rbh) + Wbh); H = (1 - z) h + z H. Each
        direction with its own weights."""
        x, seq, batch, hidden, layout, dirs = self.recurrent_input(node, ["Sigmoid", "Tanh"])
        lbr = node.attr("linear_before_reset", 0)
        w, r, b = self.get(node, 1), self.get(node, 2), self.get(node, 3, optional=True)
        h0 = self.initial_state(node, 5, layout)
        one = self.scalar_const(1.0)
        steps_by_dir, hs = [], []
        for d, backward in enumerate(dirs):
            steps, h = self.gru_direction(node, x, seq, batch, hidden, d, backward, lbr, w, r, b, h0, one)
            steps_by_dir.append(steps)
            hs.append(h)
        self.recurrent_outputs(node, steps_by_dir, hs, batch, hidden, layout)

    def gru_direction(self, node, x, seq, batch, hidden, d, backward, lbr, w, r, b, h0, one):
        w2 = self.direction(node, w, d, [3 * hidden, w.shape[2]])
        r2 = self.direction(node, r, d, [3 * hidden, hidden])

        def rows(v, k0, k1):
            return self.slice(node, v, [k0 * hidden], [k1 * hidden], [0], [1])

        wzr, wh = self.transpose_last2(node, rows(w2, 0, 2)), self.transpose_last2(node, rows(w2, 2, 3))
        rzr, rh = self.transpose_last2(node, rows(r2, 0, 2)), self.transpose_last2(node, rows(r2, 2, 3))
        bzr = wbh = rbh = None
        if b is not None:
            bb = self.direction(node, b, d, [6 * hidden])
            bzr = self.binary(node, "TADD", rows(bb, 0, 2), rows(bb, 3, 5))
            wbh, rbh = rows(bb, 2, 3), rows(bb, 5, 6)
        h = self.direction(node, h0, d, [batch, hidden]) if h0 is not None else \
            self.zero_state(node, batch, hidden)
        steps = {}
        for t in self.time_steps(seq, backward):
            xt = self.reshape(node, self.slice(node, x, [t], [t + 1], [0], [1]), [batch, x.shape[2]])
            g = self.binary(node, "TADD", self.matmul(node, xt, wzr), self.matmul(node, h, rzr))
            if bzr is not None:
                g = self.binary(node, "TADD", g, bzr)
            z = self.unary(node, "SIGMOID", self.columns(node, g, 0, hidden))
            rr = self.unary(node, "SIGMOID", self.columns(node, g, 1, hidden))
            xh = self.matmul(node, xt, wh)
            if lbr:
                hr = self.matmul(node, h, rh)
                if rbh is not None:
                    hr = self.binary(node, "TADD", hr, rbh)
                cand = self.binary(node, "TADD", xh, self.binary(node, "TMUL", rr, hr))
                if wbh is not None:
                    cand = self.binary(node, "TADD", cand, wbh)
            else:
                cand = self.binary(node, "TADD", xh, self.matmul(node, self.binary(node, "TMUL", rr, h), rh))
                if wbh is not None:
                    cand = self.binary(node, "TADD", self.binary(node, "TADD", cand, wbh), rbh)
            hc = self.unary(node, "TANH", cand)
            keep = self.binary(node, "TSUB", one, z)
            h = self.binary(node, "TADD", self.binary(node, "TMUL", keep, hc), self.binary(node, "TMUL", z, h))
            steps[t] = self.reshape(node, h, [1, 1, batch, hidden])
        return [steps[t] for t in range(seq)], h

    def pool(self, node, mnem):
        x = self.get(node, 0)
        self.f32_only(node, x)
        if len([o for o in node.outputs if o]) > 1:
            self.refuse(node, "output 'Indices' is not supported")
        nsp = len(x.shape) - 2
        if nsp not in (1, 2):
            self.refuse(node, "%d-D pooling (BIB has 1-D and 2-D)" % nsp, "shape")
        kernel = list(node.attr("kernel_shape"))
        strides, dilations, pads = self.window(node, x, kernel)
        ceil = node.attr("ceil_mode", 0)
        node.attr("storage_order")
        w11 = node.attr("count_include_pad", 0) if mnem == "AVGPOOL" else 0
        self.need(node, mnem)
        spatial = [self.pool_out(x.shape[2 + k], kernel[k], strides[k], dilations[k], pads[k], pads[k + nsp], ceil)
                   for k in range(nsp)]
        out = self.rt(list(x.shape[:2]) + spatial, "f32")
        # kernel h,w, stride h,w, dilation h,w, pad t,l,b,r, ceil_mode, w11
        if nsp == 1:
            words = [1, kernel[0], 1, strides[0], 1, dilations[0], 0, pads[0], 0, pads[1], ceil, w11]
        else:
            words = kernel[:2] + strides[:2] + dilations[:2] + pads[:4] + [ceil, w11]
        r = self.params(words)
        self.emit(mnem, out.reg, self.reg_of(node, x), r)
        self.set(node, 0, out)

    def op_MaxPool(self, node):
        self.pool(node, "MAXPOOL")

    def op_AveragePool(self, node):
        self.pool(node, "AVGPOOL")

    def op_GridSample(self, node):
        """GridSample (torch's grid_sample) as torch computes it: each grid
        point's x and y unnormalized to pixel coordinates, the padding mode
        applied (border clips, reflection reflects then clips), then the
        neighbours read by GATHER_ELEMENTS from the image viewed as
        [N, C, H * W] at y * W + x (exact f32 integers, CAST to i32), a
        neighbour outside the image read as 0 (WHERE), and weighted in
        torch's order: bilinear's four corners, nearest's one (ROUND,
        halves to even), bicubic's 4 x 4 with the cubic convolution of
        A = -0.75 (a row at a time, then the rows)."""
        x, grid = self.get(node, 0), self.get(node, 1)
        self.f32_only(node, x, grid)

        def text(name, default):
            v = node.attr(name, default)
            return v.decode() if isinstance(v, bytes) else v

        mode, padding = text("mode", "bilinear"), text("padding_mode", "zeros")
        align = node.attr("align_corners", 0)
        if mode not in ("bilinear", "nearest", "bicubic"):
            self.refuse(node, "attribute 'mode' = '%s'" % mode)
        if padding not in ("zeros", "border", "reflection"):
            self.refuse(node, "attribute 'padding_mode' = '%s'" % padding)
        if len(x.shape) != 4 or len(grid.shape) != 4 or grid.shape[3] != 2:
            self.refuse(node, "input %s and grid %s: GridSample takes [N,C,H,W] and [N,Ho,Wo,2]"
                        % (shape_text(x.shape), shape_text(grid.shape)), "shape")
        n, c, h, w = x.shape
        ho, wo = grid.shape[1], grid.shape[2]
        if not isinstance(h, int) or not isinstance(w, int):
            self.refuse(node, "a dynamic height or width %s" % shape_text(x.shape), "shape")
        if h * w >= 1 << 24 or h == 0 or w == 0:
            self.refuse(node, "an image of %d x %d pixels (its positions must be exact f32 integers, "
                        "and not empty)" % (h, w), "shape")
        for mnemonic in ("SLICE", "FLOOR", "ROUND", "CAST", "WHERE", "EXPAND", "GATHER_ELEMENTS", "TABS", "TDIV"):
            self.need(node, mnemonic, "GridSample")
        points = dims_prod([ho, wo])
        table = self.reshape(node, x, [n, c, h * w])

        def k(value):
            return self.scalar_const(value)

        def op(mnemonic, a, b):
            return self.binary(node, mnemonic, a, k(b) if isinstance(b, (int, float)) else b)

        def test(mnemonic, a, b):
            return self.binary(node, mnemonic, a, k(b), out_type=TensorProto.BOOL)

        def clip(v, size):
            return op("TMIN", op("TMAX", v, 0.0), float(size - 1))

        def reflect(v, size):
            # torch's reflect_coordinates over [min, min + span]: the
            # distance from min folded by span, every odd fold mirrored.
            low, span = (0.0, float(size - 1)) if align else (-0.5, float(size))
            if span == 0:
                # One pixel, aligned: torch reflects every point to it, even
                # one that unnormalizes to NaN (infinity times 0).
                return self.filled(node, v.shape, "f32", TensorProto.FLOAT, 0.0)
            d = self.unary(node, "TABS", op("TSUB", v, low))
            flips = self.unary(node, "FLOOR", op("TDIV", d, span))
            extra = op("TSUB", d, op("TMUL", flips, span))
            half = self.unary(node, "FLOOR", op("TMUL", flips, 0.5))
            even = self.binary(node, "TEQ", op("TMUL", half, 2.0), flips, out_type=TensorProto.BOOL)
            back = op("TADD", self.binary(node, "TSUB", k(span), extra), low)
            return clip(self.where(node, even, op("TADD", extra, low), back), size)

        def pad(v, size):
            if padding == "border":
                return clip(v, size)
            if padding == "reflection":
                return reflect(v, size)
            return v

        def coordinate(axis, size):
            g = self.reshape(node, self.slice(node, grid, [axis], [axis + 1], [3], [1]), [n, 1, points])
            if align:
                return op("TMUL", op("TMUL", op("TADD", g, 1.0), 0.5), float(size - 1))
            return op("TMUL", op("TSUB", op("TMUL", op("TADD", g, 1.0), float(size)), 1.0), 0.5)

        def value(xi, yi):
            # The pixel at integral (xi, yi), 0 outside the image.
            inside = self.binary(node, "TAND", test("TGE", xi, 0.0), test("TLE", xi, float(w - 1)),
                                 out_type=TensorProto.BOOL)
            inside = self.binary(node, "TAND", inside, test("TGE", yi, 0.0), out_type=TensorProto.BOOL)
            inside = self.binary(node, "TAND", inside, test("TLE", yi, float(h - 1)), out_type=TensorProto.BOOL)
            at = op("TADD", op("TMUL", clip(yi, h), float(w)), clip(xi, w))
            idx = self.rt(at.shape, "i32", TensorProto.INT64)
            self.emit("CAST", idx.reg, self.reg_of(node, at), 2)
            idx = self.expand(node, idx, [n, c, points])
            got = self.rt([n, c, points], "f32")
            self.emit("GATHER_ELEMENTS", got.reg, self.reg_of(node, table), idx.reg, 2)
            return self.where(node, inside, got, k(0.0))

        ix, iy = coordinate(0, w), coordinate(1, h)
        if mode != "bicubic":
            ix, iy = pad(ix, w), pad(iy, h)
        if mode == "nearest":
            out = value(self.unary(node, "ROUND", ix), self.unary(node, "ROUND", iy))
        elif mode == "bilinear":
            x0, y0 = self.unary(node, "FLOOR", ix), self.unary(node, "FLOOR", iy)
            x1, y1 = op("TADD", x0, 1.0), op("TADD", y0, 1.0)
            out = None
            for xc, yc, wx, wy in ((x0, y0, op("TSUB", x1, ix), op("TSUB", y1, iy)),
                                   (x1, y0, op("TSUB", ix, x0), op("TSUB", y1, iy)),
                                   (x0, y1, op("TSUB", x1, ix), op("TSUB", iy, y0)),
                                   (x1, y1, op("TSUB", ix, x0), op("TSUB", iy, y0))):
                term = self.binary(node, "TMUL", value(xc, yc), op("TMUL", wx, wy))
                out = term if out is None else self.binary(node, "TADD", out, term)
        else:
            a = -0.75

            def weights(t):
                # torch's get_cubic_upsample_coefficients.
                def outer(s):  # ((A s - 5A) s + 8A) s - 4A, s in [1, 2]
                    return op("TSUB", op("TMUL", op("TADD", op("TMUL", op("TSUB", op("TMUL", s, a), 5 * a), s),
                                                            8 * a), s), 4 * a)

                def inner(s):  # ((A + 2) s - (A + 3)) s s + 1, s in [0, 1]
                    return op("TADD", op("TMUL", op("TMUL", op("TSUB", op("TMUL", s, a + 2), a + 3), s), s), 1.0)

                rest = self.binary(node, "TSUB", k(1.0), t)
                return [outer(op("TADD", t, 1.0)), inner(t), inner(rest),
                        outer(self.binary(node, "TSUB", k(2.0), t))]

            fx, fy = self.unary(node, "FLOOR", ix), self.unary(node, "FLOOR", iy)
            wxs, wys = weights(op("TSUB", ix, fx)), weights(op("TSUB", iy, fy))
            out = None
            for i in range(4):
                yi = pad(op("TADD", fy, float(i - 1)), h)
                row = None
                for j in range(4):
                    term = self.binary(node, "TMUL", value(pad(op("TADD", fx, float(j - 1)), w), yi), wxs[j])
                    row = term if row is None else self.binary(node, "TADD", row, term)
                term = self.binary(node, "TMUL", row, wys[i])
                out = term if out is None else self.binary(node, "TADD", out, term)
        self.set(node, 0, self.reshape(node, out, [n, c, ho, wo]))
