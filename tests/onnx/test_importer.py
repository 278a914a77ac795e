#!/usr/bin/python3
"""Unit tests of the ONNX importer (bib.onnx_import, tools/bib-onnx) on
graphs built here with onnx.helper: folding, symbolic batch dims, fused
patterns, names, refusals and the command line."""

import contextlib
import importlib.machinery
import importlib.util
import io
import math
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import unittest
import unittest.mock
import warnings

sys.dont_write_bytecode = True
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import bib  # noqa: E402
from bib import onnx_import  # noqa: E402
from bib.onnx_common import library_takes_zero_dims  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.nn.functional as TF  # noqa: E402
except ImportError:
    torch = None

TOOL = os.path.join(ROOT, "tools", "bib-onnx")
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def ops(module):
    """The mnemonics of the module's instructions, in order."""
    out = []
    for line in module.disassemble().splitlines():
        t = line.strip()
        if t and t[0].isupper() and not t.startswith(";"):
            out.append(t.split()[0])
    return out


def have(mnemonic):
    try:
        return bib.opcode(mnemonic) >> 16 == 3
    except bib.UsageError:
        return False


def rng(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class Folding(unittest.TestCase):
    def test_shape_arithmetic_is_folded(self):
        # y = reshape(x, concat(shape(x)[0:1], [-1])): Shape, Gather,
        # Unsqueeze, Concat, all known at import: one RESHAPE remains.
        nodes = [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ]
        m = model(
            nodes,
            [helper.make_tensor_value_info("x", F, ["N", 3, 4])],
            [helper.make_tensor_value_info("y", F, ["N", 12])],
            [init("zero", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "MUL", "DIM", "HALT")], ["RESHAPE"])
        x = rng((2, 3, 4), 1)
        np.testing.assert_array_equal(mod.run({"x": x})["y"], x.reshape(2, 12))

    def test_products_of_dynamic_dims_are_folded_and_loaded_at_run_time(self):
        # y = reshape(x, [shape[0] * shape[1], shape[2]]) for x [N, 3, 4].
        nodes = [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
            helper.make_node("Gather", ["s", "i1"], ["c"], axis=0),
            helper.make_node("Gather", ["s", "i2"], ["w"], axis=0),
            helper.make_node("Mul", ["n", "c"], ["nc"]),
            helper.make_node("Unsqueeze", ["nc", "ax0"], ["nc1"]),
            helper.make_node("Unsqueeze", ["w", "ax0"], ["w1"]),
            helper.make_node("Concat", ["nc1", "w1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ]
        i64 = lambda v: np.array(v, np.int64)  # noqa: E731
        m = model(
            nodes,
            [helper.make_tensor_value_info("x", F, ["N", 3, 4])],
            [helper.make_tensor_value_info("y", F, ["M", 4])],
            [init("i0", i64(0)), init("i1", i64(1)), init("i2", i64(2)), init("ax0", i64([0]))],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "MUL", "DIM", "HALT")], ["RESHAPE"])
        for n in (2, 5):
            x = rng((n, 3, 4), n)
            np.testing.assert_array_equal(mod.run({"x": x})["y"], x.reshape(3 * n, 4))

    def test_nonzero_of_a_constant_is_folded(self):
        # torch's x[:, mask] with a constant mask: NonZero, Transpose,
        # Squeeze of the mask's positions, a Gather of them.
        mask = np.array([True, False, True, True, False, False], np.bool_)
        nodes = [
            helper.make_node("NonZero", ["mask"], ["nz"]),
            helper.make_node("Squeeze", ["nz", "ax0"], ["idx"]),
            helper.make_node("Gather", ["x", "idx"], ["y"], axis=1),
        ]
        m = model(nodes, [helper.make_tensor_value_info("x", F, ["N", 6])],
                  [helper.make_tensor_value_info("y", F, ["N", 3])],
                  [init("mask", mask), init("ax0", np.array([0], np.int64))])
        mod = onnx_import.import_model(m)
        self.assertNotIn("NonZero", mod.disassemble())
        x = rng((4, 6), 3)
        self.assertEqual(mod.run({"x": x})["y"].tobytes(), np.ascontiguousarray(x[:, mask]).tobytes())

    def test_nonzero_at_run_time_is_refused(self):
        m = model([helper.make_node("NonZero", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, [4])],
                  [helper.make_tensor_value_info("y", I64, [1, "K"])])
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        self.assertIn("(NonZero): NonZero of an input known only at run time", str(cm.exception))
        self.assertEqual(cm.exception.reason, "shape")

    def test_constant_arithmetic_and_cast_are_folded(self):
        # w = Cast(c, float) * 2 + 1 is a constant; y = x + w is one TADD.
        nodes = [
            helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([1, 2, 3], np.int64))),
            helper.make_node("Cast", ["c"], ["cf"], to=F),
            helper.make_node("Mul", ["cf", "two"], ["c2"]),
            helper.make_node("Add", ["c2", "one"], ["w"]),
            helper.make_node("Add", ["x", "w"], ["y"]),
        ]
        m = model(
            nodes,
            [helper.make_tensor_value_info("x", F, [2, 3])],
            [helper.make_tensor_value_info("y", F, [2, 3])],
            [init("two", np.float32(2)), init("one", np.float32(1))],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT")], ["TADD"])
        x = rng((2, 3), 2)
        np.testing.assert_array_equal(mod.run({"x": x})["y"], x + np.array([3, 5, 7], np.float32))


class Memory(unittest.TestCase):
    def test_each_intermediate_is_freed_after_its_last_reader(self):
        # Eight Relus in a chain over 1 MiB tensors: at most the input and two
        # intermediates are live at once, not all nine.
        names = ["x"] + ["h%d" % k for k in range(7)] + ["y"]
        nodes = [helper.make_node("Relu", [a], [b]) for a, b in zip(names, names[1:])]
        m = model(nodes, [helper.make_tensor_value_info("x", F, [1 << 18])],
                  [helper.make_tensor_value_info("y", F, [1 << 18])])
        mod = onnx_import.import_model(m)
        self.assertEqual(ops(mod).count("FREE"), 7)
        r = mod.run({"x": rng((1 << 18,), 17)})
        self.assertLessEqual(r.stats.peak_memory, 3 * (1 << 20) + (1 << 16))


    def test_large_initializers_go_through_shape_inference_without_their_bytes(self):
        # W has 2^17 elements, past the importer's bound: ONNX's shape
        # inference sees its dims only. The module still carries its values,
        # the Reshape still reads its small target, and the caller's model
        # keeps its bytes.
        w = rng((512, 256), 21)
        m = model([helper.make_node("MatMul", ["x", "W"], ["h"]),
                   helper.make_node("Reshape", ["h", "shape"], ["y"])],
                  [helper.make_tensor_value_info("x", F, ["n", 512])],
                  [helper.make_tensor_value_info("y", F, ["n", 16, 16])],
                  [init("W", w), init("shape", np.array([-1, 16, 16], np.int64))])
        lean, data = onnx_import._without_large_data(m)
        self.assertEqual(list(data), ["W"])
        kept = {t.name: t for t in lean.graph.initializer}
        self.assertEqual((list(kept["W"].dims), kept["W"].raw_data), ([512, 256], b""))
        self.assertEqual(numpy_helper.to_array(kept["shape"]).tolist(), [-1, 16, 16])
        mod = onnx_import.import_model(m)
        for n in (1, 3):
            x = rng((n, 512), 22 + n)
            y = mod.run({"x": x})["y"]
            np.testing.assert_allclose(y, (x @ w).reshape(-1, 16, 16), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(numpy_helper.to_array(m.graph.initializer[0]), w)

    def test_a_value_aliased_by_identity_stays_live_for_its_alias(self):
        # y = Identity(h): h's last reader is the Identity, but y is h's
        # register and a graph output, so h must not be freed.
        m = model(
            [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Identity", ["h"], ["y"])],
            [helper.make_tensor_value_info("x", F, [3])],
            [helper.make_tensor_value_info("y", F, [3])],
        )
        r = onnx_import.import_model(m).run({"x": np.array([-1, 0, 2], np.float32)})
        np.testing.assert_array_equal(r["y"], [0, 0, 2])


class SymbolicBatch(unittest.TestCase):
    def mlp(self):
        w1, b1 = rng((8, 16), 3), rng((16,), 4)
        w2, b2 = rng((16, 4), 5), rng((4,), 6)
        nodes = [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Add", ["h", "b1"], ["hb"]),
            helper.make_node("Relu", ["hb"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["o"]),
            helper.make_node("Add", ["o", "b2"], ["y"]),
        ]
        return model(
            nodes,
            [helper.make_tensor_value_info("x", F, ["batch", 8])],
            [helper.make_tensor_value_info("y", F, ["batch", 4])],
            [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)],
        ), (w1, b1, w2, b2)

    def test_one_module_serves_batch_1_and_5_with_the_same_bytes_per_row(self):
        m, (w1, b1, w2, b2) = self.mlp()
        mod = onnx_import.import_model(m)
        decl = {t.name: t for t in mod.vm().tensors()}
        self.assertEqual(decl["x"].shape, ("batch", 8))
        self.assertEqual(decl["y"].shape, ("batch", 4))
        x = rng((5, 8), 7)
        y5 = mod.run({"x": x})["y"]
        self.assertEqual(y5.shape, (5, 4))
        for i in range(5):
            y1 = mod.run({"x": x[i : i + 1]})["y"]
            self.assertEqual(y1.tobytes(), y5[i : i + 1].tobytes(), "row %d" % i)
        ref = np.maximum(x @ w1 + b1, 0) @ w2 + b2
        np.testing.assert_allclose(y5, ref, rtol=1e-5, atol=1e-5)

    def test_matmul_add_relu_is_one_linear_relu(self):
        m, _ = self.mlp()
        body = [o for o in ops(onnx_import.import_model(m)) if o not in ("LDI", "HALT", "DIM", "MUL", "FREE")]
        self.assertEqual(body, ["LINEAR_RELU", "LINEAR"])


    def test_gemm_with_transposed_weight_then_relu_is_one_linear_relu(self):
        # nn.Linear as torch exports it for a 2-D input: Gemm(x, W[N,K], b, transB=1).
        w, b = rng((16, 8), 14), rng((16,), 15)
        m = model(
            [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])],
            [helper.make_tensor_value_info("x", F, ["N", 8])],
            [helper.make_tensor_value_info("y", F, ["N", 16])],
            [init("w", w), init("b", b)],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT", "DIM", "MUL")], ["LINEAR_RELU"])
        x = rng((3, 8), 16)
        np.testing.assert_allclose(mod.run({"x": x})["y"], np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-5)


class Patterns(unittest.TestCase):
    def layernorm_graph(self, eps, opset=17):
        nodes = [
            helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
            helper.make_node("Sub", ["x", "m"], ["d"]),
            helper.make_node("Pow", ["d", "two"], ["p"]),
            helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
            helper.make_node("Add", ["v", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["s"]),
            helper.make_node("Div", ["d", "s"], ["n"]),
            helper.make_node("Mul", ["n", "gamma"], ["g"]),
            helper.make_node("Add", ["g", "beta"], ["y"]),
        ]
        gamma, beta = rng((16,), 8), rng((16,), 9)
        m = model(
            nodes,
            [helper.make_tensor_value_info("x", F, ["N", 5, 16])],
            [helper.make_tensor_value_info("y", F, ["N", 5, 16])],
            [init("two", np.float32(2)), init("eps", np.float32(eps)), init("gamma", gamma), init("beta", beta)],
            opset=opset,
        )
        return m, gamma, beta

    def check_layernorm(self, eps):
        m, gamma, beta = self.layernorm_graph(eps)
        mod = onnx_import.import_model(m)
        body = [o for o in ops(mod) if o not in ("LDI", "LDI64", "HALT", "DIM", "MUL")]
        self.assertIn(body, (["LAYERNORM_EPS"], ["LAYERNORM"]))
        x = rng((3, 5, 16), 10)
        mu = x.mean(-1, keepdims=True)
        ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + np.float32(eps)) * gamma + beta
        np.testing.assert_allclose(mod.run({"x": x})["y"], ref, rtol=1e-4, atol=1e-5)

    def test_pytorch_layer_norm_pattern_is_one_instruction(self):
        self.check_layernorm(1e-5)

    @unittest.skipUnless(have("LAYERNORM_EPS"), "this libbib has no LAYERNORM_EPS")
    def test_layer_norm_pattern_with_another_eps_is_layernorm_eps(self):
        self.check_layernorm(1e-3)

    def test_layer_norm_pattern_whose_mean_is_read_elsewhere_is_not_fused(self):
        m, _, _ = self.layernorm_graph(1e-5)
        m.graph.output.append(helper.make_tensor_value_info("m", F, None))
        try:
            mod = onnx_import.import_model(m)
        except onnx_import.Refused as e:
            # A library without an opcode the unfused nodes need refuses one
            # of them: fine, as long as the group was not fused.
            self.assertRegex(e.text, r"^node '(Sub|Pow|Sqrt|Div)_\d+' ")
            return
        self.assertNotIn("LAYERNORM", ops(mod))

    def test_layer_norm_pattern_of_a_computed_value_with_an_identity_bias_is_fused(self):
        # As torch exports a residual then norm: x = a + b is no graph input,
        # and beta comes through an Identity of another initializer.
        m, gamma, beta = self.layernorm_graph(1e-5)
        g = m.graph
        nodes = [helper.make_node("Add", ["a", "b"], ["x"]), helper.make_node("Identity", ["beta0"], ["beta"])]
        nodes += list(g.node)
        inits = [i for i in g.initializer if i.name != "beta"] + [init("beta0", beta)]
        m2 = model(
            nodes,
            [helper.make_tensor_value_info(n, F, ["N", 5, 16]) for n in ("a", "b")],
            list(g.output),
            inits,
        )
        mod = onnx_import.import_model(m2)
        body = [o for o in ops(mod) if o not in ("LDI", "LDI64", "HALT", "DIM", "MUL", "FREE")]
        self.assertIn(body, (["TADD", "LAYERNORM_EPS"], ["TADD", "LAYERNORM"]))
        a, b = rng((2, 5, 16), 29), rng((2, 5, 16), 30)
        x = a + b
        mu = x.mean(-1, keepdims=True)
        ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + np.float32(1e-5)) * gamma + beta
        np.testing.assert_allclose(mod.run({"a": a, "b": b})["y"], ref, rtol=1e-4, atol=1e-5)

    def test_opset_17_layer_normalization_is_one_instruction(self):
        gamma, beta = rng((16,), 11), rng((16,), 12)
        m = model(
            [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)],
            [helper.make_tensor_value_info("x", F, ["N", 16])],
            [helper.make_tensor_value_info("y", F, ["N", 16])],
            [init("gamma", gamma), init("beta", beta)],
        )
        mod = onnx_import.import_model(m)
        body = [o for o in ops(mod) if o not in ("LDI", "LDI64", "HALT", "DIM", "MUL")]
        self.assertIn(body, (["LAYERNORM_EPS"], ["LAYERNORM"]))

    def gelu_tanh_graph(self):
        c = math.sqrt(2 / math.pi)
        nodes = [
            helper.make_node("Pow", ["x", "three"], ["p"]),
            helper.make_node("Mul", ["p", "kappa"], ["q"]),
            helper.make_node("Add", ["x", "q"], ["r"]),
            helper.make_node("Mul", ["r", "beta"], ["s"]),
            helper.make_node("Tanh", ["s"], ["t"]),
            helper.make_node("Add", ["t", "one"], ["u"]),
            helper.make_node("Mul", ["x", "half"], ["h"]),
            helper.make_node("Mul", ["h", "u"], ["y"]),
        ]
        return model(
            nodes,
            [helper.make_tensor_value_info("x", F, [4, 8])],
            [helper.make_tensor_value_info("y", F, [4, 8])],
            [init("three", np.float32(3)), init("kappa", np.float32(0.044715)), init("beta", np.float32(c)),
             init("one", np.float32(1)), init("half", np.float32(0.5))],
        )

    def test_gelu_tanh_pattern_is_one_gelu(self):
        mod = onnx_import.import_model(self.gelu_tanh_graph())
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT")], ["GELU"])
        x = rng((4, 8), 13)
        ref = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        np.testing.assert_allclose(mod.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-6)

    @unittest.skipUnless(have("GELU_ERF"), "this libbib has no GELU_ERF")
    def test_gelu_erf_pattern_is_one_gelu_erf(self):
        nodes = [
            helper.make_node("Div", ["x", "sqrt2"], ["a"]),
            helper.make_node("Erf", ["a"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["c"]),
            helper.make_node("Mul", ["x", "c"], ["d"]),
            helper.make_node("Mul", ["d", "half"], ["y"]),
        ]
        m = model(
            nodes,
            [helper.make_tensor_value_info("x", F, [4, 8])],
            [helper.make_tensor_value_info("y", F, [4, 8])],
            [init("sqrt2", np.float32(math.sqrt(2))), init("one", np.float32(1)), init("half", np.float32(0.5))],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT")], ["GELU_ERF"])


    def sliced_linear(self, axis):
        w, b = rng((8, 12), 25), rng((12,), 26)
        i64 = lambda v: np.array(v, np.int64)  # noqa: E731
        nodes = [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Add", ["h", "b"], ["hb"]),
            helper.make_node("Slice", ["hb", "s0", "e0", "ax"], ["y0"]),
            helper.make_node("Slice", ["hb", "s1", "e1", "ax"], ["y1"]),
        ]
        stop = 4 if axis == -1 else 2
        m = model(
            nodes,
            [helper.make_tensor_value_info("x", F, [3, 8])],
            [helper.make_tensor_value_info("y0", F, [3, 4] if axis == -1 else [2, 12]),
             helper.make_tensor_value_info("y1", F, [3, 8] if axis == -1 else [1, 12])],
            [init("w", w), init("b", b), init("s0", i64([0])), init("e0", i64([stop])), init("s1", i64([stop])),
             init("e1", i64([1 << 40])), init("ax", i64([axis]))],
        )
        return m, w, b

    def test_a_linear_read_by_column_slices_is_one_linear_per_slice(self):
        m, w, b = self.sliced_linear(-1)
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT", "FREE")], ["LINEAR", "LINEAR"])
        x = rng((3, 8), 27)
        r = mod.run({"x": x})
        full = onnx_import.import_model(model(
            [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
            [helper.make_tensor_value_info("x", F, [3, 8])], [helper.make_tensor_value_info("y", F, [3, 12])],
            [init("w", w), init("b", b)])).run({"x": x})["y"]
        self.assertEqual(r["y0"].tobytes(), np.ascontiguousarray(full[:, :4]).tobytes())
        self.assertEqual(r["y1"].tobytes(), np.ascontiguousarray(full[:, 4:]).tobytes())

    def test_a_linear_sliced_along_another_axis_is_emitted_whole(self):
        m, w, b = self.sliced_linear(0)
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT", "FREE")], ["LINEAR", "SLICE", "SLICE"])
        x = rng((3, 8), 28)
        r = mod.run({"x": x})
        np.testing.assert_allclose(np.concatenate([r["y0"], r["y1"]]), x @ w + b, rtol=1e-5, atol=1e-5)

    def attention_graph(self, divisor, d=8):
        nodes = [
            helper.make_node("Transpose", ["q"], ["qt"], perm=[1, 0, 2]),
            helper.make_node("Div", ["qt", "c"], ["qs"]),
            helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 2, 0]),
            helper.make_node("MatMul", ["qs", "kt"], ["s"]),
            helper.make_node("Softmax", ["s"], ["p"], axis=-1),
            helper.make_node("Transpose", ["v"], ["vt"], perm=[1, 0, 2]),
            helper.make_node("MatMul", ["p", "vt"], ["o"]),
            helper.make_node("Transpose", ["o"], ["y"], perm=[1, 0, 2]),
        ]
        return model(
            nodes,
            [helper.make_tensor_value_info(n, F, [5, 3, d]) for n in "qkv"],
            [helper.make_tensor_value_info("y", F, [5, 3, d])],
            [init("c", np.float32(divisor))],
        )

    def test_torch_multi_head_attention_is_one_attention(self):
        mod = onnx_import.import_model(self.attention_graph(math.sqrt(8)))
        self.assertEqual([o for o in ops(mod) if o not in ("LDI", "HALT")], ["ATTENTION"])
        q, k, v = rng((5, 3, 8), 19), rng((5, 3, 8), 20), rng((5, 3, 8), 21)
        s = np.einsum("shd,thd->hst", q, k) / np.sqrt(8)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ref = np.einsum("hst,thd->shd", p, v)
        np.testing.assert_allclose(mod.run({"q": q, "k": k, "v": v})["y"], ref, rtol=1e-4, atol=1e-5)

    def test_attention_with_another_scale_is_not_attention(self):
        try:
            mod = onnx_import.import_model(self.attention_graph(3.0))
        except onnx_import.Refused as e:
            self.assertIn("PERMUTE", e.text)  # the Transposes one by one need it
            return
        self.assertNotIn("ATTENTION", ops(mod))


    @unittest.skipUnless(have("CONV") and have("BATCHNORM_RELU"), "this libbib has no CONV or BATCHNORM_RELU")
    def test_conv_bias_relu_is_conv_then_batchnorm_relu(self):
        w, b = rng((4, 3, 3, 3), 22), rng((4,), 23)
        m = model(
            [
                helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["y"]),
            ],
            [helper.make_tensor_value_info("x", F, ["N", 3, 5, 6])],
            [helper.make_tensor_value_info("y", F, ["N", 4, 5, 6])],
            [init("w", w), init("b", b)],
        )
        mod = onnx_import.import_model(m)
        body = [o for o in ops(mod) if o not in ("LDI", "LDI64", "HALT", "DIM", "MUL", "FREE")]
        self.assertEqual(body, ["CONV", "BATCHNORM_RELU"])
        x = rng((2, 3, 5, 6), 24)
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        ref = np.zeros((2, 4, 5, 6), np.float64)
        for i in range(5):
            for j in range(6):
                ref[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i : i + 3, j : j + 3], w)
        ref = np.maximum(ref + b[None, :, None, None], 0)
        np.testing.assert_allclose(mod.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)


    @unittest.skipUnless(have("CONV") and have("BATCHNORM"), "this libbib has no CONV or BATCHNORM")
    def test_conv_bias_is_one_batchnorm_pass_with_the_bytes_of_an_add(self):
        # The bias as BATCHNORM (scale 1, mean +0, var 1): the bytes of the
        # bias-free convolution plus the bias in float32, NaN and Inf included.
        w, b = rng((4, 3, 3, 3), 25), rng((4,), 26)
        b[1] = -0.0

        def conv(inputs):
            return model(
                [helper.make_node("Conv", ["x", "w"] + inputs, ["y"], pads=[1, 1, 1, 1])],
                [helper.make_tensor_value_info("x", F, ["N", 3, 5, 6])],
                [helper.make_tensor_value_info("y", F, ["N", 4, 5, 6])],
                [init("w", w)] + ([init("b", b)] if inputs else []),
            )

        biased = onnx_import.import_model(conv(["b"]))
        body = [o for o in ops(biased) if o not in ("LDI", "LDI64", "HALT", "DIM", "MUL", "FREE")]
        self.assertEqual(body, ["CONV", "BATCHNORM"])
        x = rng((2, 3, 5, 6), 27)
        x[0, 0, 2, 2], x[1, 2, 0, 0] = np.inf, np.nan
        c = onnx_import.import_model(conv([])).run({"x": x})["y"]
        want = (c + b[None, :, None, None]).astype(np.float32)
        want[np.isnan(want)] = np.frombuffer(np.uint32(0x7FC00000).tobytes(), np.float32)[0]
        self.assertEqual(biased.run({"x": x})["y"].tobytes(), want.tobytes())


    @unittest.skipUnless(have("BATCHNORM"), "this libbib has no BATCHNORM")
    def test_per_channel_constants_are_one_batchnorm_pass_with_the_bytes_of_the_binary_op(self):
        # Add, Sub and Mul of [N,C,H,W] and a constant [C,1,1] (either side
        # for Add and Mul): one BATCHNORM, the bytes of numpy's float32 op
        # with NaN canonical; -0, Inf and NaN in both operands.
        c = np.array([1.5, -0.0, 0.0, np.inf, -2.25, np.nan], np.float32).reshape(6, 1, 1)
        x = rng((2, 6, 3, 4), 28)
        x[0, :, 0, 0] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45]
        x[1, 1, :, 0] = [-0.0, 0.0, -0.0]
        canon = np.frombuffer(np.uint32(0x7FC00000).tobytes(), np.float32)[0]
        for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply)):
            for const_first in ((False, True) if op != "Sub" else (False,)):
                with self.subTest(op=op, const_first=const_first):
                    ins = ["c", "x"] if const_first else ["x", "c"]
                    m = model([helper.make_node(op, ins, ["y"])],
                              [helper.make_tensor_value_info("x", F, ["N", 6, 3, 4])],
                              [helper.make_tensor_value_info("y", F, ["N", 6, 3, 4])],
                              [init("c", c)])
                    mod = onnx_import.import_model(m)
                    self.assertIn("BATCHNORM", ops(mod))
                    with np.errstate(all="ignore"):
                        want = fn(c, x) if const_first else fn(x, c)
                    want[np.isnan(want)] = canon
                    self.assertEqual(mod.run({"x": x})["y"].tobytes(), want.astype(np.float32).tobytes())


    @unittest.skipUnless(have("CONV") and have("WHERE"), "this libbib has no CONV or WHERE")
    def test_conv_transpose_inserts_exact_zeros_so_an_inf_stays_where_it_belongs(self):
        # y[2i + k] += x[i] * w[k]: the Inf of x[1] reaches y[2] and y[3] only.
        m = model(
            [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2])],
            [helper.make_tensor_value_info("x", F, [1, 1, 3])],
            [helper.make_tensor_value_info("y", F, [1, 1, 6])],
            [init("w", np.ones((1, 1, 2), np.float32))],
        )
        y = onnx_import.import_model(m).run({"x": np.array([[[1, np.inf, 2]]], np.float32)})["y"]
        np.testing.assert_array_equal(y, [[[1, 1, np.inf, np.inf, 2, 2]]])


    @unittest.skipUnless(have("CONV") and have("PERMUTE"), "this libbib has no CONV or PERMUTE")
    def test_conv_transpose_by_phases_has_the_bytes_of_the_zero_inserted_form(self):
        # A strided ConvTranspose is one CONV per output phase: for finite
        # weights, the bytes of the zero-inserted form (the lowering without
        # PERMUTE), NaN, Inf and -0 in x included; and close to torch's.
        import torch

        cases = [  # x shape, w shape, attributes
            ((1, 3, 5, 6), (3, 4, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
            ((2, 4, 4, 5), (4, 3, 3, 3), dict(strides=[2, 3], pads=[0, 1, 2, 0], output_padding=[1, 0])),
            ((1, 4, 6, 3), (4, 2, 5, 2), dict(strides=[3, 2], dilations=[2, 1], group=2)),
            ((1, 2, 3, 3), (2, 2, 1, 1), dict(strides=[3, 2])),
            ((1, 2, 4, 4), (2, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
            ((1, 2, 4, 4), (2, 3, 3, 3), dict(strides=[2, 2], output_shape=[9, 8])),
            ((2, 3, 7), (3, 2, 5), dict(strides=[4], pads=[3, 1], dilations=[3])),
            ((1, 2, 9), (2, 2, 2), dict(strides=[2])),
        ]
        for xs, ws, attrs in cases:
            with self.subTest(x=xs, w=ws, **{k: str(v) for k, v in attrs.items()}):
                w, b = rng(ws, 30), rng((ws[1] * attrs.get("group", 1),), 31)
                x = rng(xs, 32)
                x.flat[[1, 5, 9]] = [np.nan, np.inf, -0.0]
                nsp = len(xs) - 2

                def build():
                    m = model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)],
                              [helper.make_tensor_value_info("x", F, list(xs))],
                              [helper.make_tensor_value_info("y", F, ["d%d" % a for a in range(len(xs))])],
                              [init("w", w), init("b", b)])
                    return onnx_import.import_model(m)

                phases = build()
                self.assertIn("PERMUTE", ops(phases))
                real_have = onnx_import.Importer.have
                with unittest.mock.patch.object(onnx_import.Importer, "have",
                                                lambda self, m: m != "PERMUTE" and real_have(self, m)):
                    inserted = build()
                self.assertNotIn("PERMUTE", ops(inserted))
                got = phases.run({"x": x})["y"]
                self.assertEqual(got.tobytes(), inserted.run({"x": x})["y"].tobytes())
                pads = attrs.get("pads", [0] * (2 * nsp))
                if "auto_pad" in attrs or "output_shape" in attrs or pads[:nsp] != pads[nsp:]:
                    continue  # torch pads both ends alike
                fn = torch.nn.functional.conv_transpose1d if nsp == 1 else torch.nn.functional.conv_transpose2d
                clean = np.nan_to_num(x, nan=0.0, posinf=0.0)
                want = fn(torch.from_numpy(clean), torch.from_numpy(w), torch.from_numpy(b), attrs["strides"],
                          pads[:nsp], attrs.get("output_padding", [0] * nsp), attrs.get("group", 1),
                          attrs.get("dilations", [1] * nsp)).numpy()
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(phases.run({"x": clean})["y"], want, rtol=1e-5, atol=1e-5)


class Recurrent(unittest.TestCase):
    def test_gru_with_linear_before_reset_follows_onnx_s_formula(self):
        hid, inp, seq, batch = 3, 2, 4, 2
        w, r, b = rng((1, 3 * hid, inp), 31), rng((1, 3 * hid, hid), 32), rng((1, 6 * hid), 33)
        m = model(
            [helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=hid, linear_before_reset=1)],
            [helper.make_tensor_value_info("x", F, [seq, batch, inp])],
            [helper.make_tensor_value_info("y", F, [seq, 1, batch, hid]),
             helper.make_tensor_value_info("yh", F, [1, batch, hid])],
            [init("w", w), init("r", r), init("b", b)],
        )
        x = rng((seq, batch, inp), 34)
        out = onnx_import.import_model(m).run({"x": x})
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        wz, wr, wh = np.split(w[0], 3)
        rz, rr, rh = np.split(r[0], 3)
        bwz, bwr, bwh, brz, brr, brh = np.split(b[0], 6)
        h = np.zeros((batch, hid), np.float32)
        ys = []
        for t in range(seq):
            z = sig(x[t] @ wz.T + h @ rz.T + bwz + brz)
            rg = sig(x[t] @ wr.T + h @ rr.T + bwr + brr)
            c = np.tanh(x[t] @ wh.T + rg * (h @ rh.T + brh) + bwh)
            h = (1 - z) * c + z * h
            ys.append(h)
        np.testing.assert_allclose(out["y"][:, 0], np.stack(ys), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["yh"][0], h, rtol=1e-5, atol=1e-6)

    def test_an_lstm_over_a_dynamic_batch_gives_each_row_its_own_bytes(self):
        # The steps are unrolled at import (a static sequence); the batch is
        # a symbol, its zero state made at run time.
        hid, inp, seq = 3, 2, 4
        w, r, b = rng((1, 4 * hid, inp), 41), rng((1, 4 * hid, hid), 42), rng((1, 8 * hid), 43)
        m = model(
            [helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=hid)],
            [helper.make_tensor_value_info("x", F, [seq, "B", inp])],
            [helper.make_tensor_value_info("y", F, [seq, 1, "B", hid])],
            [init("w", w), init("r", r), init("b", b)],
        )
        mod = onnx_import.import_model(m)
        x = rng((seq, 5, inp), 44)
        y5 = mod.run({"x": x})["y"]
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        wi, wo, wf, wc = np.split(w[0], 4)
        ri, ro, rf, rc = np.split(r[0], 4)
        bi, bo, bf, bc = (u + v for u, v in zip(np.split(b[0][:4 * hid], 4), np.split(b[0][4 * hid:], 4)))
        h = c = np.zeros((5, hid), np.float32)
        for t in range(seq):
            i = sig(x[t] @ wi.T + h @ ri.T + bi)
            f = sig(x[t] @ wf.T + h @ rf.T + bf)
            c = f * c + i * np.tanh(x[t] @ wc.T + h @ rc.T + bc)
            h = sig(x[t] @ wo.T + h @ ro.T + bo) * np.tanh(c)
            np.testing.assert_allclose(y5[t, 0], h, rtol=1e-5, atol=1e-6)
        for row in range(5):
            y1 = mod.run({"x": np.ascontiguousarray(x[:, row:row + 1])})["y"]
            self.assertEqual(y1.tobytes(), np.ascontiguousarray(y5[:, :, row:row + 1]).tobytes(), "row %d" % row)


    def test_a_reverse_gru_reads_the_sequence_from_its_end(self):
        # direction 'reverse': the steps run from the last to the first; Y
        # keeps each state at its own step, Y_h is the state after step 0.
        hid, inp, seq, batch = 3, 2, 4, 2
        w, r, b = rng((1, 3 * hid, inp), 61), rng((1, 3 * hid, hid), 62), rng((1, 6 * hid), 63)
        m = model(
            [helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "yh"], hidden_size=hid, direction="reverse")],
            [helper.make_tensor_value_info("x", F, [seq, "B", inp])],
            [helper.make_tensor_value_info("y", F, [seq, 1, "B", hid]),
             helper.make_tensor_value_info("yh", F, [1, "B", hid])],
            [init("w", w), init("r", r), init("b", b)],
        )
        x = rng((seq, batch, inp), 64)
        out = onnx_import.import_model(m).run({"x": x})
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        wz, wr, wh = np.split(w[0], 3)
        rz, rr, rh = np.split(r[0], 3)
        bwz, bwr, bwh, brz, brr, brh = np.split(b[0], 6)
        h = np.zeros((batch, hid), np.float32)
        ys = [None] * seq
        for t in reversed(range(seq)):
            z = sig(x[t] @ wz.T + h @ rz.T + bwz + brz)
            rg = sig(x[t] @ wr.T + h @ rr.T + bwr + brr)
            c = np.tanh(x[t] @ wh.T + (rg * h) @ rh.T + bwh + brh)
            h = (1 - z) * c + z * h
            ys[t] = h
        np.testing.assert_allclose(out["y"][:, 0], np.stack(ys), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["yh"][0], h, rtol=1e-5, atol=1e-6)

    @staticmethod
    def reference(op, x, w, r, b, h0, c0, dirs, hidden):
        """ONNX's equations for RNN (tanh), GRU and LSTM (no peepholes) in
        float64, layout 0: x [seq, batch, input], h0 and c0 [directions,
        batch, hidden]; Y [seq, directions, batch, hidden], Y_h and Y_c
        [directions, batch, hidden]."""
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        seq, batch = x.shape[:2]
        y = np.zeros((seq, len(dirs), batch, hidden))
        yh, yc = np.zeros((len(dirs), batch, hidden)), np.zeros((len(dirs), batch, hidden))
        for d, backward in enumerate(dirs):
            wd, rd = w[d].astype(np.float64), r[d].astype(np.float64)
            wb, rb = np.split(b[d].astype(np.float64), 2)
            h, c = h0[d].astype(np.float64), c0[d].astype(np.float64)
            for t in (reversed(range(seq)) if backward else range(seq)):
                xt = x[t].astype(np.float64)
                if op == "RNN":
                    h = np.tanh(xt @ wd.T + h @ rd.T + wb + rb)
                elif op == "GRU":
                    wz, wr, wh = np.split(wd, 3)
                    rz, rr, rh = np.split(rd, 3)
                    bz, br, bh = np.split(wb, 3)
                    cz, cr, ch = np.split(rb, 3)
                    z = sig(xt @ wz.T + h @ rz.T + bz + cz)
                    rg = sig(xt @ wr.T + h @ rr.T + br + cr)
                    cand = np.tanh(xt @ wh.T + (rg * h) @ rh.T + ch + bh)
                    h = (1 - z) * cand + z * h
                else:
                    gi, go, gf, gc = np.split(xt @ wd.T + h @ rd.T + wb + rb, 4, axis=1)
                    c = sig(gf) * c + sig(gi) * np.tanh(gc)
                    h = sig(go) * np.tanh(c)
                y[t, d] = h
            yh[d], yc[d] = h, c
        return y, yh, yc

    def test_layout_1_takes_the_initial_state_as_batch_directions_hidden(self):
        # layout 1: X [batch, seq, input], initial_h and initial_c [batch,
        # directions, hidden], Y [batch, seq, directions, hidden], Y_h and
        # Y_c [batch, directions, hidden]. The state of direction d is
        # h0[:, d], not h0[d]: with a batch of 2 and two directions the
        # latter is the right shape and the wrong numbers.
        hid, inp, seq, batch = 3, 2, 4, 2
        gates = {"RNN": 1, "GRU": 3, "LSTM": 4}
        seed = 100
        for op in ("RNN", "GRU", "LSTM"):
            for direction, dirs in (("forward", [False]), ("bidirectional", [False, True])):
                for given in ("constant", "input"):
                    nd, g = len(dirs), gates[op]
                    seed += 10
                    w, r = rng((nd, g * hid, inp), seed), rng((nd, g * hid, hid), seed + 1)
                    b = rng((nd, 2 * g * hid), seed + 2)
                    x = rng((batch, seq, inp), seed + 3)
                    h0, c0 = rng((batch, nd, hid), seed + 4), rng((batch, nd, hid), seed + 5)
                    states = ["h0", "c0"] if op == "LSTM" else ["h0"]
                    outs = ["y", "yh", "yc"] if op == "LSTM" else ["y", "yh"]
                    node = helper.make_node(op, ["x", "w", "r", "b", ""] + states, outs,
                                            hidden_size=hid, direction=direction, layout=1)
                    inits = [init("w", w), init("r", r), init("b", b)]
                    inputs = [helper.make_tensor_value_info("x", F, ["B", seq, inp])]
                    feed = {"x": x}
                    for name, v in zip(states, (h0, c0)):
                        if given == "constant":
                            inits.append(init(name, v))
                        else:
                            inputs.append(helper.make_tensor_value_info(name, F, ["B", nd, hid]))
                            feed[name] = v
                    if given == "constant":
                        inputs = [helper.make_tensor_value_info("x", F, [batch, seq, inp])]
                    bs = batch if given == "constant" else "B"
                    m = model([node], inputs,
                              [helper.make_tensor_value_info("y", F, [bs, seq, nd, hid])]
                              + [helper.make_tensor_value_info(o, F, [bs, nd, hid]) for o in outs[1:]],
                              inits, opset=14)
                    with self.subTest(op=op, direction=direction, initial_state=given):
                        out = onnx_import.import_model(m).run(feed)
                        y, yh, yc = self.reference(op, x.transpose(1, 0, 2), w, r, b,
                                                   h0.transpose(1, 0, 2), c0.transpose(1, 0, 2), dirs, hid)
                        np.testing.assert_allclose(out["y"], y.transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
                        np.testing.assert_allclose(out["yh"], yh.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)
                        if op == "LSTM":
                            np.testing.assert_allclose(out["yc"], yc.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)



I64 = TensorProto.INT64


def i64(v):
    return np.array(v, np.int64)


class Rounding(unittest.TestCase):
    def test_floor_ceil_and_round_give_numpys_bits_and_fold_constants(self):
        # Round halves to even, as ONNX and np.round; -0 is kept.
        x = np.array([[-2.5, -1.5, -0.5, -0.0, 0.3, 0.5, 1.5, 2.5, -0.7, 8388607.5, -np.inf, 3e9]], np.float32)
        for op, fn in (("Floor", np.floor), ("Ceil", np.ceil), ("Round", np.round)):
            m = model(
                [helper.make_node(op, ["x"], ["a"]), helper.make_node(op, ["c"], ["b"]),
                 helper.make_node("Add", ["a", "b"], ["y"])],
                [helper.make_tensor_value_info("x", F, ["N", 12])],
                [helper.make_tensor_value_info("y", F, ["N", 12])],
                [init("c", np.float32(-1.5))],
            )
            mod = onnx_import.import_model(m)
            self.assertEqual(ops(mod).count(op.upper()), 1, op)  # the constant is folded
            for be in ("cpu", "vulkan"):
                y = mod.run({"x": x}, backend=be)["y"]
                self.assertEqual(y.tobytes(), (fn(x) + fn(np.float32(-1.5))).tobytes(), (op, be))


class SinCos(unittest.TestCase):
    def test_sin_and_cos_of_positions_times_frequencies_as_rotary_embeddings_take_them(self):
        # cos and sin of t * f, as a rotary position embedding computes them:
        # within 1 ULP of float64, the same bytes on cpu and vulkan.
        t = np.arange(64, dtype=np.float32).reshape(64, 1)
        f = (1.0 / 10000 ** (np.arange(0, 16, 2, dtype=np.float32) / 16)).astype(np.float32).reshape(1, 8)
        m = model(
            [helper.make_node("Mul", ["t", "f"], ["a"]), helper.make_node("Sin", ["a"], ["s"]),
             helper.make_node("Cos", ["a"], ["c"])],
            [helper.make_tensor_value_info("t", F, ["S", 1])],
            [helper.make_tensor_value_info("s", F, ["S", 8]), helper.make_tensor_value_info("c", F, ["S", 8])],
            [init("f", f)],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o in ("SIN", "COS")], ["SIN", "COS"])
        a = (t * f).astype(np.float64)
        outs = [mod.run({"t": t}, backend=be) for be in ("cpu", "vulkan")]
        for k, fn in (("s", np.sin), ("c", np.cos)):
            self.assertEqual(outs[0][k].tobytes(), outs[1][k].tobytes(), k)
            ulp = np.spacing(np.abs(fn(a)).astype(np.float32)).astype(np.float64)
            self.assertLessEqual((np.abs(outs[0][k] - fn(a)) / ulp).max(), 1.0, k)


class Tan(unittest.TestCase):
    def test_tan_is_sin_over_cos_within_3_ulp_even_beside_the_poles(self):
        m = model([helper.make_node("Tan", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, ["N"])],
                  [helper.make_tensor_value_info("y", F, ["N"])])
        mod = onnx_import.import_model(m)
        self.assertEqual([o for o in ops(mod) if o in ("SIN", "COS", "TDIV")], ["SIN", "COS", "TDIV"])
        r = np.random.default_rng(110)
        half_pi = np.float32(np.pi / 2)
        x = np.concatenate([r.integers(0, 0x7F800000, 200000, dtype=np.uint32).view(np.float32),
                            r.uniform(-10, 10, 100000).astype(np.float32),
                            half_pi + np.arange(-500, 500, dtype=np.float32) * np.spacing(half_pi),
                            np.array([3e38, 1e-45, 1e-30], np.float32)])
        x[::2] = -x[::2]
        outs = [mod.run({"x": x}, backend=be)["y"] for be in ("cpu", "vulkan")]
        self.assertEqual(outs[0].tobytes(), outs[1].tobytes())
        want = np.tan(x.astype(np.float64))
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        self.assertLessEqual((np.abs(outs[0] - want) / ulp).max(), 3.0)
        zeros = np.array([0.0, -0.0], np.float32)
        self.assertEqual(mod.run({"x": zeros})["y"].tobytes(), zeros.tobytes())
        special = mod.run({"x": np.array([np.inf, -np.inf, np.nan], np.float32)})["y"]
        self.assertTrue(np.isnan(special).all())


class Pad(unittest.TestCase):
    def pad_model(self, mode, pads, value=None, opset=17, shape=("N", 3, 5, 6)):
        inputs = ["x", "pads"] + (["value"] if value is not None else [])
        inits = [init("pads", i64(pads))] + ([init("value", np.float32(value))] if value is not None else [])
        rank = len(shape)
        out = [d if isinstance(d, str) else d + pads[k] + pads[k + rank] for k, d in enumerate(shape)]
        return model(
            [helper.make_node("Pad", inputs, ["y"], mode=mode)],
            [helper.make_tensor_value_info("x", F, list(shape))],
            [helper.make_tensor_value_info("y", F, out)],
            inits, opset,
        )

    def check(self, m, want, xs):
        mod = onnx_import.import_model(m)
        for x in xs:
            y = mod.run({"x": x})["y"]
            np.testing.assert_array_equal(y, want(x))
        return mod

    def test_each_mode_equals_numpy_on_a_dynamic_batch(self):
        # pads: all begins, then all ends; axis 0 (the batch) is not padded.
        pads = [0, 1, 2, 3, 0, 2, 1, 0]
        width = [(0, 0), (1, 2), (2, 1), (3, 0)]
        xs = [rng((n, 3, 5, 6), n) for n in (1, 4)]
        self.check(self.pad_model("constant", pads, 1.5), lambda x: np.pad(x, width, constant_values=1.5), xs)
        self.check(self.pad_model("constant", pads), lambda x: np.pad(x, width), xs)
        for mode, np_mode in (("reflect", "reflect"), ("edge", "edge")):
            mod = self.check(self.pad_model(mode, pads), lambda x: np.pad(x, width, mode=np_mode), xs)
            self.assertIn("GATHER_AXIS", ops(mod))

    def test_negative_pads_crop(self):
        pads = [0, 0, -1, 2, 0, 0, 1, -2]
        want = lambda x: np.pad(x[:, :, 1:, :-2], [(0, 0), (0, 0), (0, 1), (2, 0)])  # noqa: E731
        self.check(self.pad_model("constant", pads), want, [rng((2, 3, 5, 6), 9)])

    def test_before_opset_11_pads_are_attributes(self):
        m = model(
            [helper.make_node("Pad", ["x"], ["y"], mode="constant", pads=[0, 2, 0, 1], value=-3.0)],
            [helper.make_tensor_value_info("x", F, [2, 4])],
            [helper.make_tensor_value_info("y", F, [2, 7])],
            opset=9,
        )
        self.check(m, lambda x: np.pad(x, [(0, 0), (2, 1)], constant_values=-3.0), [rng((2, 4), 10)])

    def test_zero_pads_then_averagepool_is_torchs_avgpool(self):
        # nn.AvgPool2d(3, 1, padding=1) as torch exports it: Pad, then
        # AveragePool without pads, so the padded zeros count.
        m = model(
            [helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant"),
             helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3])],
            [helper.make_tensor_value_info("x", F, ["N", 2, 4, 4])],
            [helper.make_tensor_value_info("y", F, ["N", 2, 4, 4])],
            [init("pads", i64([0, 0, 1, 1, 0, 0, 1, 1]))],
        )
        x = rng((2, 2, 4, 4), 11)
        p = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
        want = np.zeros_like(x)
        for i in range(4):
            for j in range(4):
                want[:, :, i, j] = p[:, :, i:i + 3, j:j + 3].reshape(2, 2, 9).sum(-1) / np.float32(9)
        y = onnx_import.import_model(m).run({"x": x})["y"]
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)

    def test_refusals_name_the_node_and_the_reason(self):
        for m, text in (
            (self.pad_model("wrap", [0, 0, 1, 0, 0, 0, 1, 0]), "mode 'wrap'"),
            (self.pad_model("constant", [1, 0, 0, 0, 0, 0, 0, 0]), "padding the dynamic axis 0"),
            (self.pad_model("reflect", [0, 0, 5, 0, 0, 0, 0, 0]), "mode 'reflect' pads 5 and 0 on axis 2 of size 5"),
        ):
            with self.assertRaises(onnx_import.Refused) as cm:
                onnx_import.import_model(m)
            self.assertIn("(Pad)", str(cm.exception))
            self.assertIn(text, str(cm.exception))


class QuantizeDequantize(unittest.TestCase):
    """QDQ models (onnxruntime's quantizer writes them): activations
    quantized and dequantized in float32 as the ops define, int8 weights
    with a scale per output channel folded to float32 at import."""

    @staticmethod
    def quantize(x, scale, zp, lo, hi):
        # The op's definition: round half to even of a float32 division,
        # plus the zero point, saturated.
        return np.clip(np.rint(x / scale) + zp, lo, hi)

    def test_a_qdq_linear_layer_against_the_ops_definitions(self):
        w = np.random.default_rng(5).integers(-127, 128, (6, 4)).astype(np.int8)
        w_scale = np.array([0.02, 0.05, 0.01, 0.03], np.float32)  # per column: axis 1
        x_scale, x_zp = np.float32(0.05), np.uint8(128)
        m = model(
            [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["y"])],
            [helper.make_tensor_value_info("x", F, ["N", 6])],
            [helper.make_tensor_value_info("y", F, ["N", 4]), helper.make_tensor_value_info("xq", TensorProto.UINT8, ["N", 6])],
            [init("xs", x_scale), init("xz", x_zp), init("w", w), init("ws", w_scale)])
        mod = onnx_import.import_model(m)
        self.assertEqual(ops(mod).count("CAST"), 2)  # the activations' two; the weights fold
        x = rng((5, 6), 6) * 4
        x[0, :3] = [0.025, 0.075, -0.025]  # halves: to even
        x[1, :2] = [100.0, -100.0]  # saturated
        q = self.quantize(x, x_scale, np.float32(x_zp), 0, 255)
        xd = (q.astype(np.float32) - np.float32(x_zp)) * x_scale
        wd = (w.astype(np.float32) - np.float32(0)) * w_scale
        for backend in ("cpu", "vulkan"):
            r = mod.run({"x": x}, backend=backend, strict_device=backend != "cpu")
            self.assertEqual(r["xq"].tolist(), q.astype(np.int64).tolist())
            np.testing.assert_allclose(r["y"], xd @ wd, rtol=1e-5, atol=1e-6)

    def test_int8_with_a_scale_per_channel_of_a_dynamic_input(self):
        # axis 1 of [N, C, L]: a scale and zero point per channel, int8.
        scale = np.array([0.1, 0.2, 0.5], np.float32)
        zp = np.array([-3, 0, 7], np.int8)
        m = model(
            [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
            [helper.make_tensor_value_info("x", F, ["N", 3, 5])],
            [helper.make_tensor_value_info("y", F, ["N", 3, 5])],
            [init("s", scale), init("z", zp)])
        mod = onnx_import.import_model(m)
        x = rng((2, 3, 5), 7) * 20
        s3, z3 = scale.reshape(1, 3, 1), zp.astype(np.float32).reshape(1, 3, 1)
        want = (self.quantize(x, s3, z3, -128, 127).astype(np.float32) - z3) * s3
        self.assertEqual(mod.run({"x": x})["y"].tobytes(), want.astype(np.float32).tobytes())

    def test_a_scale_of_one_element_along_a_longer_axis_is_per_tensor(self):
        # onnxruntime takes a [1] scale as one for the tensor, as does the
        # constant fold: the same values whether x is given or constant.
        x = np.array([[3, 250, 0, 128]], np.uint8)
        want = ((x.astype(np.float32) - np.float32(128)) * np.float32(0.25)).astype(np.float32)
        for given in (True, False):
            m = model([helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
                      [helper.make_tensor_value_info("q", TensorProto.UINT8, [1, 4])] if given else [],
                      [helper.make_tensor_value_info("y", F, [1, 4])],
                      [init("s", np.array([0.25], np.float32)), init("z", np.array([128], np.uint8))]
                      + ([] if given else [init("q", x)]))
            mod = onnx_import.import_model(m)
            y = mod.run({"q": x.astype(np.int32)} if given else {})["y"]
            self.assertEqual(y.tobytes(), want.tobytes(), "given" if given else "constant")

    def test_what_is_not_supported_is_refused_by_name(self):
        m = model([helper.make_node("DequantizeLinear", ["q", "s"], ["y"])],
                  [helper.make_tensor_value_info("q", TensorProto.UINT8, [4]),
                   helper.make_tensor_value_info("s", F, [])],
                  [helper.make_tensor_value_info("y", F, [4])])
        with self.assertRaises(onnx_import.NeedsConstant) as cm:
            onnx_import.import_model(m)
        self.assertIn("(the scale) must be a constant", str(cm.exception))


class TriluCumSum(unittest.TestCase):
    def test_trilu_keeps_a_triangle_of_the_last_two_axes(self):
        for upper in (0, 1):
            for k in (-1, 0, 2):
                m = model(
                    [helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)],
                    [helper.make_tensor_value_info("x", F, ["N", 4, 5])],
                    [helper.make_tensor_value_info("y", F, ["N", 4, 5])],
                    [init("k", i64(k))],
                )
                x = rng((3, 4, 5), k + 5)
                want = np.triu(x, k) if upper else np.tril(x, k)
                y = onnx_import.import_model(m).run({"x": x})["y"]
                self.assertEqual(y.tobytes(), want.tobytes(), "upper=%d k=%d" % (upper, k))

    def cumsum_model(self, elem, exclusive, reverse, axis):
        return model(
            [helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
            [helper.make_tensor_value_info("x", elem, ["N", 7])],
            [helper.make_tensor_value_info("y", elem, ["N", 7])],
            [init("axis", np.array(axis, np.int32))],
        )

    @staticmethod
    def without_cumsum():
        # A library without CUMSUM (and CUMSUM_AXIS): the log-step scan of
        # SLICE, CONCAT, TADD.
        real = onnx_import.Importer.have
        return unittest.mock.patch.object(onnx_import.Importer, "have",
                                          lambda self, m: not m.startswith("CUMSUM") and real(self, m))

    @staticmethod
    def numpy_cumsum(x, axis, exclusive, reverse):
        v = np.flip(x, axis) if reverse else x
        c = np.cumsum(v, axis, dtype=x.dtype)  # float32: one add after another
        if exclusive:
            c = np.concatenate([np.zeros_like(np.take(c, [0], axis)), np.delete(c, -1, axis)], axis)
        return np.flip(c, axis) if reverse else c

    def test_cumsum_of_integers_is_exact_in_every_mode(self):
        x = np.random.default_rng(3).integers(-1000, 1000, (3, 7)).astype(np.int32)
        for lowering in ("CUMSUM", "log-step"):
            for exclusive in (0, 1):
                for reverse in (0, 1):
                    m = self.cumsum_model(TensorProto.INT32, exclusive, reverse, -1)
                    with self.without_cumsum() if lowering != "CUMSUM" else contextlib.nullcontext():
                        mod = onnx_import.import_model(m)
                    self.assertEqual("CUMSUM" in ops(mod), lowering == "CUMSUM")
                    want = self.numpy_cumsum(x, 1, exclusive, reverse)
                    self.assertEqual(mod.run({"x": x})["y"].tolist(), want.tolist(),
                                     "%s exclusive=%d reverse=%d" % (lowering, exclusive, reverse))

    def test_cumsum_of_floats_has_numpy_cumsums_bits_in_every_mode(self):
        # Along the last axis (CUMSUM) and the first, a dynamic one
        # (CUMSUM_AXIS: the CPU executor's column form, Vulkan's row form on
        # the axis moved), on cpu and vulkan: -0 first, sums that round, a NaN.
        x = rng((5, 7), 9)
        x[:, 0] = -0.0
        x[1, 3], x[2, 6], x[3, 2] = 1e8, -1e8, np.nan
        for axis in (1, 0):
            for exclusive in (0, 1):
                for reverse in (0, 1):
                    mod = onnx_import.import_model(self.cumsum_model(F, exclusive, reverse, axis))
                    self.assertIn("CUMSUM_AXIS" if axis == 0 else "CUMSUM", ops(mod))
                    want = self.numpy_cumsum(x, axis, exclusive, reverse)
                    for backend in ("cpu", "vulkan"):
                        y = mod.run({"x": x}, backend=backend, strict_device=backend != "cpu")["y"]
                        self.assertEqual(y.tobytes(), want.tobytes(),
                                         "axis=%d exclusive=%d reverse=%d on %s" % (axis, exclusive, reverse, backend))

    def test_cumsum_of_floats_is_close_to_numpy_and_the_same_for_each_row_alone(self):
        for lowering in ("CUMSUM", "log-step"):
            with self.without_cumsum() if lowering != "CUMSUM" else contextlib.nullcontext():
                mod = onnx_import.import_model(self.cumsum_model(F, 0, 0, 1))
            x = rng((4, 7), 8)
            y = mod.run({"x": x})["y"]
            np.testing.assert_allclose(y, np.cumsum(x.astype(np.float64), 1), rtol=1e-5, atol=1e-6)
            for i in range(4):
                self.assertEqual(mod.run({"x": x[i:i + 1]})["y"].tobytes(), y[i:i + 1].tobytes())

    def test_a_running_sum_along_a_dynamic_axis_is_refused_without_cumsum(self):
        with self.without_cumsum(), self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(self.cumsum_model(F, 0, 0, 0))
        self.assertIn("a running sum along the dynamic axis 0", str(cm.exception))


class DynamicDims(unittest.TestCase):
    """Shape arithmetic on dynamic dims: folded while it stays a product,
    refused by name (never a traceback) when it does not."""

    def dims_model(self, nodes, inits, out_type=F, out_shape=None):
        return model(
            [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["S"], axis=0)] + nodes,
            [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
            [helper.make_tensor_value_info("y", out_type, out_shape)],
            [init("one", i64(1))] + inits,
        )

    def refused(self, m):
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        return str(cm.exception)

    def test_dims_are_sums_of_products_of_symbols(self):
        from bib.onnx_common import Sym, dim_div, dim_mul, dim_sign, dim_sub, dim_sum
        P, S = Sym(1, ("P",)), Sym(1, ("S",))
        t = dim_sum(P, S)
        self.assertEqual(repr(t), "P + S")
        self.assertEqual(dim_sub(t, S), P)
        self.assertEqual(dim_sub(t, dim_sum(S, P)), 0)
        self.assertEqual(repr(dim_mul(t, 4)), "4*P + 4*S")
        self.assertEqual(repr(dim_sum(dim_mul(P, S), -1)), "P*S - 1")
        self.assertEqual(repr(dim_sub(dim_mul(P, -2), S)), "-2*P - S")
        self.assertEqual(dim_div(dim_mul(t, 4), 4), t)
        self.assertEqual(dim_div(t, t), 1)
        self.assertIsNone(dim_div(t, P))
        self.assertIsNone(dim_div(dim_sum(dim_mul(P, 2), 1), 2))
        self.assertEqual([dim_sign(d) for d in (t, dim_sub(0, S), dim_sub(S, 1), 0, -3)], [1, -1, None, 0, -1])

    def test_an_input_dim_named_as_a_sum_of_others_is_that_sum(self):
        dims = {"a": ["P"], "b": ["S"], "c": ["P + S"], "d": ["S-1"], "e": ["past + 1"], "f": ["P*S"]}
        m = model([helper.make_node("Identity", [n], ["y" + n]) for n in dims],
                  [helper.make_tensor_value_info(n, F, d) for n, d in dims.items()],
                  [helper.make_tensor_value_info("y" + n, F, d) for n, d in dims.items()])
        imp = onnx_import.Importer(m)
        sums = imp.dim_sums(set())
        self.assertEqual({k: repr(v) for k, v in sums.items()}, {"P + S": "P + S", "S-1": "S - 1"})

    def test_a_sum_naming_a_bound_input_s_dim_takes_its_size(self):
        # past is bound at import ([1, 3]), so "P + S" is S + 3: a mask of
        # that length lines up with the cache grown from it.
        m = model([helper.make_node("Concat", ["past", "x"], ["cache"], axis=1),
                   helper.make_node("Add", ["cache", "mask"], ["y"])],
                  [helper.make_tensor_value_info("past", F, [1, "P"]), helper.make_tensor_value_info("x", F, [1, "S"]),
                   helper.make_tensor_value_info("mask", F, [1, "P + S"])],
                  [helper.make_tensor_value_info("y", F, [1, "P + S"])])
        past = rng((1, 3), 3)
        mod = onnx_import.import_model(m, bind={"past": past})
        x, mask = rng((1, 2), 1), rng((1, 5), 2)
        np.testing.assert_array_equal(mod.run({"x": x, "mask": mask})["y"], np.concatenate([past, x], 1) + mask)
        with self.assertRaises(bib.Error):  # a mask that is not S + 3 long
            mod.run({"x": x, "mask": rng((1, 4), 2)})

    def test_a_dim_that_may_be_negative_is_not_folded_unequal_to_a_negative_constant(self):
        # Equal(-S, -1) is true for S = 1: not known at import time.
        m = self.dims_model([helper.make_node("Neg", ["S"], ["nS"]),
                             helper.make_node("Equal", ["nS", "m1"], ["e"]),
                             helper.make_node("Cast", ["e"], ["y"], to=F)],
                            [init("m1", i64(-1))], F, [])
        try:
            mod = onnx_import.import_model(m)
        except onnx_import.Refused as e:
            self.assertIn("(Equal)", str(e))
            return
        for s in (1, 2):
            self.assertEqual(float(mod.run({"x": rng((1, s, 4), s)})["y"]), float(s == 1))

    def test_a_bound_of_minus_s_takes_onnx_s_axis_when_s_is_0(self):
        # cache[:, -S:] with S = 0 is the whole cache in ONNX (-0 is 0):
        # SLICE takes the bound as loaded, so the run gives that or refuses
        # it, never the empty slice the import-time size assumed.
        m = model(
            [helper.make_node("Concat", ["past", "x"], ["cache"], axis=1),
             helper.make_node("Shape", ["x"], ["sx"]), helper.make_node("Gather", ["sx", "one"], ["S"], axis=0),
             helper.make_node("Neg", ["S"], ["nS"]), helper.make_node("Unsqueeze", ["nS", "ax0"], ["starts"]),
             helper.make_node("Slice", ["cache", "starts", "end", "ax1"], ["y"])],
            [helper.make_tensor_value_info("past", F, ["N", "P", 4]), helper.make_tensor_value_info("x", F, ["N", "S", 4])],
            [helper.make_tensor_value_info("y", F, ["N", "Y", 4])],
            [init("one", i64(1)), init("ax0", i64([0])), init("ax1", i64([1])), init("end", i64([2**63 - 1]))])
        mod = onnx_import.import_model(m)
        past, x = rng((1, 3, 4), 1), rng((1, 2, 4), 2)
        np.testing.assert_array_equal(mod.run({"past": past, "x": x})["y"], x)
        try:
            y = mod.run({"past": past, "x": np.zeros((1, 0, 4), np.float32)})["y"]
        except bib.Error as e:  # the output's declared S = 0 refuses SLICE's 3 rows
            self.assertIn("given f32[1,3,4]", e.message)
            return
        np.testing.assert_array_equal(y, past)

    def test_sums_and_differences_of_dynamic_dims_are_loaded_at_run_time(self):
        for op, size in (("Sub", lambda s: s - 1), ("Add", lambda s: s + 1)):
            m = self.dims_model([helper.make_node(op, ["S", "k"], ["S2"]),
                                 helper.make_node("Unsqueeze", ["S2", "ax"], ["S3"]),
                                 helper.make_node("ConstantOfShape", ["S3"], ["y"])],
                                [init("k", i64(1)), init("ax", i64([0]))], F, ["M"])
            mod = onnx_import.import_model(m)
            for s in (1, 4):
                y = mod.run({"x": rng((2, s, 4), s)})["y"]
                np.testing.assert_array_equal(y, np.zeros(size(s), np.float32))

    def test_an_inexact_division_of_dynamic_dims_is_refused(self):
        m = self.dims_model([helper.make_node("Div", ["S", "k"], ["S2"]),
                             helper.make_node("Unsqueeze", ["S2", "ax"], ["S3"]),
                             helper.make_node("ConstantOfShape", ["S3"], ["y"])],
                            [init("k", i64(2)), init("ax", i64([0]))], F, ["M"])
        msg = self.refused(m)
        self.assertIn("(Div)", msg)
        self.assertIn("a division of dynamic dimensions (S by 2)", msg)

    def test_a_cache_grown_by_concat_has_the_sum_of_the_lengths(self):
        # A decoder's cache: past [N, P, 4] and the new entries x [N, S, 4]
        # give cache [N, P + S, 4]. Reshaped to [N, -1] its width is
        # 4P + 4S, loaded at run time; cache[:, -S:] is x again; and a mask
        # declared [N, "P + S"] (as exporters name it) lines up with it.
        m = model(
            [helper.make_node("Concat", ["past", "x"], ["cache"], axis=1),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Gather", ["sx", "one"], ["S"], axis=0),
             helper.make_node("Neg", ["S"], ["nS"]),
             helper.make_node("Unsqueeze", ["nS", "ax0"], ["starts"]),
             helper.make_node("Slice", ["cache", "starts", "end", "ax1"], ["last"]),
             helper.make_node("Reshape", ["cache", "flat_shape"], ["flat"]),
             helper.make_node("Unsqueeze", ["mask", "ax2"], ["mask3"]),
             helper.make_node("Mul", ["cache", "mask3"], ["masked"])],
            [helper.make_tensor_value_info("past", F, ["N", "P", 4]),
             helper.make_tensor_value_info("x", F, ["N", "S", 4]),
             helper.make_tensor_value_info("mask", F, ["N", "P + S"])],
            [helper.make_tensor_value_info("flat", F, ["N", "W"]),
             helper.make_tensor_value_info("last", F, ["N", "S", 4]),
             helper.make_tensor_value_info("masked", F, ["N", "P + S", 4])],
            [init("one", i64(1)), init("ax0", i64([0])), init("ax1", i64([1])), init("ax2", i64([2])),
             init("end", i64([2**63 - 1])), init("flat_shape", i64([0, -1]))],
        )
        mod = onnx_import.import_model(m)
        self.assertIn("ADD", ops(mod))
        for n, p, s in ((1, 3, 2), (2, 0, 1), (3, 5, 4)):
            past, x, mask = rng((n, p, 4), p), rng((n, s, 4), s + 10), rng((n, p + s), 20)
            r = mod.run({"past": past, "x": x, "mask": mask})
            cache = np.concatenate([past, x], 1)
            np.testing.assert_array_equal(r["flat"], cache.reshape(n, -1))
            np.testing.assert_array_equal(r["last"], x)
            np.testing.assert_array_equal(r["masked"], cache * mask[:, :, None])
        with self.assertRaises(bib.Trap) as cm:  # a mask that is not P + S long
            mod.run({"past": rng((1, 3, 4), 1), "x": rng((1, 2, 4), 2), "mask": rng((1, 4), 3)})
        self.assertIn("(mask) is [1,4]", cm.exception.message)

    def test_the_first_s_rows_of_a_table_follow_a_dynamic_dim(self):
        # x + pos[:, :x.shape[1]]: a learned positional table sliced by the
        # sequence length (GPT-2's pattern), for any length up to the table's.
        pos = rng((1, 16, 4), 50)
        m = self.dims_model([helper.make_node("Unsqueeze", ["S", "zero1"], ["S1"]),
                             helper.make_node("Slice", ["pos", "zero1", "S1", "ax"], ["p"]),
                             helper.make_node("Add", ["x", "p"], ["y"])],
                            [init("pos", pos), init("zero1", i64([0])), init("ax", i64([1]))], F, ["N", "S", 4])
        mod = onnx_import.import_model(m)
        for n, s in ((2, 5), (1, 16), (3, 1)):
            x = rng((n, s, 4), s)
            np.testing.assert_array_equal(mod.run({"x": x})["y"], x + pos[:, :s])
        with self.assertRaises(bib.Trap) as cm:  # longer than the table: the Add refuses the shapes
            mod.run({"x": rng((1, 17, 4), 1)})
        self.assertIn("do not broadcast", cm.exception.message)

    def test_fixed_bounds_on_a_dynamic_axis(self):
        # x[:, :1], x[:, -1:], x[:, 1:3] over a sequence of any length that
        # reaches the bounds; a shorter one is refused at the output.
        for starts, ends, want in (([0], [1], lambda x: x[:, :1]), ([-1], [2**63 - 1], lambda x: x[:, -1:]),
                                   ([1], [3], lambda x: x[:, 1:3])):
            m = model(
                [helper.make_node("Slice", ["x", "s", "e", "ax"], ["y"])],
                [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
                [helper.make_tensor_value_info("y", F, ["N", want(np.zeros((1, 9, 4))).shape[1], 4])],
                [init("s", i64(starts)), init("e", i64(ends)), init("ax", i64([1]))],
            )
            mod = onnx_import.import_model(m)
            for n, s in ((2, 3), (1, 9)):
                x = rng((n, s, 4), s)
                np.testing.assert_array_equal(mod.run({"x": x})["y"], want(x))
        with self.assertRaises(bib.Error) as cm:  # x[:, 1:3] of 2 rows has 1
            mod.run({"x": rng((1, 2, 4), 2)})
        self.assertIn("output 'y' (t1): expected f32[N,2,4] where N = 1, given f32[1,1,4]", cm.exception.message)
        m = model([helper.make_node("Slice", ["x", "s", "e", "ax", "st"], ["y"])],
                  [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
                  [helper.make_tensor_value_info("y", F, ["N", "T", 4])],
                  [init("s", i64([0])), init("e", i64([2**63 - 1])), init("ax", i64([1])), init("st", i64([2]))])
        self.assertIn("on the dynamic axis 1", self.refused(m))

    def test_a_range_as_long_as_a_dynamic_dim_is_refused(self):
        m = self.dims_model([helper.make_node("Range", ["one", "S", "one"], ["y"])], [], I64, ["S"])
        msg = self.refused(m)
        self.assertIn("(Range)", msg)
        self.assertIn("is the dynamic dimension S", msg)
        # From 1, or by 2, it is refused; Range(0, S, 1) is positions.
        m = self.dims_model([helper.make_node("Range", ["zero", "S", "two"], ["y"])],
                            [init("zero", i64(0)), init("two", i64(2))], I64, ["S"])
        self.assertIn("is the dynamic dimension S", self.refused(m))

    def test_positions_of_a_dynamic_sequence_as_values_are_exact(self):
        # y = arange(S) as int64 (i32 in BIB) and as float, read as values
        # (an output, an Add): made at run time in base 256, exact at the
        # digit carries (255, 256, 65536, ...), no bound.
        m = self.dims_model([helper.make_node("Range", ["zero", "S", "one"], ["y"])], [init("zero", i64(0))],
                            I64, ["S"])
        mod = onnx_import.import_model(m)
        for s in (1, 255, 256, 257, 65535, 65536, 65537 + 300):
            y = mod.run({"x": np.zeros((1, s, 4), np.float32)})["y"]
            self.assertEqual(y.dtype, np.int32)
            np.testing.assert_array_equal(y, np.arange(s))
        # torch.arange(x.shape[1], dtype=torch.float): a Range of floats to
        # the dim cast to float, plus a row.
        m = model([helper.make_node("Shape", ["x"], ["s"]),
                   helper.make_node("Gather", ["s", "one"], ["S"], axis=0),
                   helper.make_node("Cast", ["S"], ["Sf"], to=F),
                   helper.make_node("Range", ["zerof", "Sf", "onef"], ["r"]),
                   helper.make_node("Unsqueeze", ["r", "ax1"], ["col"]),
                   helper.make_node("Mul", ["col", "w"], ["y"])],
                  [helper.make_tensor_value_info("x", F, ["N", "S", 4])],
                  [helper.make_tensor_value_info("y", F, ["S", 3])],
                  [init("one", i64(1)), init("zerof", np.float32(0)), init("onef", np.float32(1)),
                   init("ax1", i64([1])), init("w", np.array([1, 0.5, -3], np.float32))])
        mod = onnx_import.import_model(m)
        for s in (3, 70000):
            y = mod.run({"x": np.zeros((1, s, 4), np.float32)})["y"]
            np.testing.assert_array_equal(y, np.arange(s, dtype=np.float32)[:, None] * np.float32([1, 0.5, -3]))

    def test_a_range_to_a_dynamic_dim_cast_to_float_is_refused_naming_the_dim(self):
        # torch.arange(1, x.shape[1], dtype=float): the limit is Cast(S); from
        # 0 by 1 it is positions (the test above).
        m = self.dims_model([helper.make_node("Cast", ["S"], ["Sf"], to=F),
                             helper.make_node("Range", ["onef", "Sf", "onef"], ["y"])],
                            [init("onef", np.float32(1))], F, ["S"])
        msg = self.refused(m)
        self.assertIn("(Range): input 'Sf' (limit) is the dynamic dimension S cast to float", msg)

    def test_positions_of_a_dynamic_sequence_index_a_table(self):
        # wpe(torch.arange(x.shape[1]).unsqueeze(0)), GPT-2's positions: the
        # table's first S rows.
        wpe = rng((16, 4), 51)
        m = self.dims_model([helper.make_node("Range", ["zero", "S", "one"], ["r"]),
                             helper.make_node("Unsqueeze", ["r", "ax0"], ["pos"]),
                             helper.make_node("Gather", ["wpe", "pos"], ["e"], axis=0),
                             helper.make_node("Add", ["x", "e"], ["y"])],
                            [init("zero", i64(0)), init("ax0", i64([0])), init("wpe", wpe)], F, ["N", "S", 4])
        mod = onnx_import.import_model(m)
        self.assertNotIn("TMUL", ops(mod))  # a SLICE of the table, the positions never made
        for n, s in ((2, 5), (1, 16)):
            x = rng((n, s, 4), s)
            np.testing.assert_array_equal(mod.run({"x": x})["y"], x + wpe[None, :s])
        # Their shape read (a Shape of them) does not make them either.
        m.graph.node.append(helper.make_node("Shape", ["r"], ["rs"]))
        m.graph.node.append(helper.make_node("Reshape", ["x", "rs3"], ["x3"]))
        m.graph.initializer.append(init("rs3", i64([0, -1, 4])))
        self.assertNotIn("TMUL", ops(onnx_import.import_model(m)))

    def test_a_dynamic_dim_cast_to_float_is_loaded_at_run_time(self):
        # y = x.sum(1) / x.shape[1]
        m = self.dims_model([helper.make_node("Cast", ["S"], ["Sf"], to=F),
                             helper.make_node("ReduceSum", ["x", "ax"], ["t"], keepdims=0),
                             helper.make_node("Div", ["t", "Sf"], ["y"])],
                            [init("ax", i64([1]))], F, ["N", 4])
        mod = onnx_import.import_model(m)
        self.assertIn("ITOF", ops(mod))
        for n, s in ((2, 3), (1, 7)):
            x = rng((n, s, 4), s)
            want = x.sum(1, dtype=np.float32) / np.float32(s)
            np.testing.assert_allclose(mod.run({"x": x})["y"], want, rtol=1e-5, atol=1e-6)

    def test_the_element_count_of_var_is_folded(self):
        # torch's unbiased var: ReduceProd of the reduced dims, Cast, Sub 1.
        m = model(
            [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "axes"], ["d"], axis=0),
             helper.make_node("ReduceProd", ["d"], ["n"], keepdims=0),
             helper.make_node("Cast", ["n"], ["nf"], to=F),
             helper.make_node("ReduceMean", ["x"], ["m"], axes=[1, 2], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["c"]),
             helper.make_node("Mul", ["c", "c"], ["c2"]),
             helper.make_node("ReduceSum", ["c2", "axes"], ["ss"], keepdims=0),
             helper.make_node("Sub", ["nf", "onef"], ["n1"]),
             helper.make_node("Div", ["ss", "n1"], ["y"])],
            [helper.make_tensor_value_info("x", F, ["N", 3, 4])],
            [helper.make_tensor_value_info("y", F, ["N"])],
            [init("axes", i64([1, 2])), init("onef", np.float32(1))],
        )
        mod = onnx_import.import_model(m)
        self.assertNotIn("REDUCE_PROD", ops(mod))
        x = rng((5, 3, 4), 12)
        np.testing.assert_allclose(mod.run({"x": x})["y"], x.reshape(5, 12).var(1, ddof=1), rtol=1e-5)

    def test_split_sizes_on_a_dynamic_axis_check_the_axis_even_when_another_is_0(self):
        # Split of S by [2, 3]: S must be 5. With B = 0 the element counts
        # agree whatever S is, so the RESHAPE cannot see it; the axis is
        # checked itself (a TRAP whose code is 5).
        m = model(
            [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)],
            [helper.make_tensor_value_info("x", F, ["B", "S", 4])],
            [helper.make_tensor_value_info("a", F, ["B", 2, 4]), helper.make_tensor_value_info("b", F, ["B", 3, 4])],
            [init("sizes", np.array([2, 3], np.int64))],
            opset=13,
        )
        mod = onnx_import.import_model(m)
        x = rng((2, 5, 4), 7)
        out = mod.run({"x": x})
        np.testing.assert_array_equal(out["a"], x[:, :2])
        np.testing.assert_array_equal(out["b"], x[:, 2:])
        with self.assertRaises(bib.Trap) as cm:
            mod.run({"x": rng((2, 7, 4), 8)})
        self.assertIn("RESHAPE", cm.exception.message)
        if library_takes_zero_dims():
            out = mod.run({"x": np.zeros((0, 5, 4), np.float32)})
            self.assertEqual((out["a"].shape, out["b"].shape), ((0, 2, 4), (0, 3, 4)))
            with self.assertRaises(bib.Trap) as cm:
                mod.run({"x": np.zeros((0, 7, 4), np.float32)})
            self.assertIn("TRAP with code 5", cm.exception.message)

    def test_a_dynamic_dim_as_slice_axes_or_steps_or_gather_indices_is_refused_by_name(self):
        # n = x.shape[1], the dynamic S: as Slice's axes or steps, or as the
        # indices of a Gather (pe[x.size(1)]), it is refused naming the
        # input, reason shape, not an importer bug.
        pre = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
               helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"])]
        inits = [init("one", np.array(1, np.int64)), init("ax0", np.array([0], np.int64)),
                 init("z1", np.array([0], np.int64)), init("t1", np.array([2], np.int64)),
                 init("tab", np.arange(12, dtype=np.float32).reshape(3, 4))]
        t = [helper.make_tensor_value_info("t", F, [6, 4])]
        cases = [
            ("Slice", ["t", "z1", "t1", "ax0", "n1"], t, "input 'n1' (the steps) is the dynamic dimension S"),
            ("Slice", ["t", "z1", "t1", "n1"], t, "input 'n1' (the axes) is the dynamic dimension S"),
            ("Gather", ["t", "n1"], t, "input 'n1' (the indices) is the dynamic dimension S"),
            ("Gather", ["t", "n"], t, "input 'n' (the indices) is the dynamic dimension S"),
            ("Gather", ["tab", "n1"], [], "input 'n1' (the indices) is the dynamic dimension S"),
        ]
        for op, ins, extra, why in cases:
            with self.subTest(op=op, inputs=ins):
                g = helper.make_graph(pre + [helper.make_node(op, ins, ["y"], name="k")], "g",
                                      [helper.make_tensor_value_info("x", F, [2, "S"])] + extra,
                                      [onnx.ValueInfoProto(name="y")], initializer=inits)
                m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
                m.ir_version = 8
                with self.assertRaises(onnx_import.Refused) as cm:
                    onnx_import.import_model(m)
                self.assertEqual(cm.exception.reason, "shape")
                self.assertIn("node 'k' (%s): %s" % (op, why), cm.exception.text)


class Einsum(unittest.TestCase):
    """Einsum as permutes, sums and MATMUL, against numpy.einsum (MATMUL's
    one fma chain per output: to rounding)."""

    CASES = [
        ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
        ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]), ("ij,jk->ik", [(4, 5), (5, 6)]),
        ("bi,bi->b", [(3, 7), (3, 7)]), ("i,j->ij", [(4,), (5,)]), ("ij->ji", [(4, 5)]), ("ij->i", [(4, 5)]),
        ("ij,jk", [(4, 5), (5, 6)]), ("i,i->", [(5,), (5,)]), ("bij->", [(2, 3, 4)]),
        ("abc,cd->abd", [(2, 3, 4), (4, 5)]), ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
        ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)]), ("...ij,...jk->...ik", [(1, 3, 4, 5), (2, 1, 5, 6)]),
        ("...ij,...jk", [(2, 4, 5), (2, 5, 6)]), ("...i,...i->...", [(2, 3, 5), (2, 3, 5)]),
        ("i...->...", [(3, 4, 5)]), ("bij,bjk->bik", [(3, 4, 5), (1, 5, 6)]),
    ]

    def build(self, eq, shapes):
        ins = [helper.make_tensor_value_info("x%d" % k, F, list(s)) for k, s in enumerate(shapes)]
        xs = [np.zeros(s, np.float32) for s in shapes]
        return model([helper.make_node("Einsum", [i.name for i in ins], ["y"], equation=eq)], ins,
                     [helper.make_tensor_value_info("y", F, np.einsum(eq, *xs).shape)])

    def test_equations_against_numpy(self):
        for eq, shapes in self.CASES:
            with self.subTest(eq=eq, shapes=shapes):
                mod = onnx_import.import_model(self.build(eq, shapes))
                xs = [rng(s, k) for k, s in enumerate(shapes)]
                y = mod.run({"x%d" % k: x for k, x in enumerate(xs)})["y"]
                want = np.einsum(eq, *xs)
                self.assertEqual(y.shape, want.shape)
                np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)

    def test_a_diagonal_or_a_trace_against_numpy(self):
        # An index repeated in one operand takes the diagonal: exactly
        # numpy's elements; a trace (then summed) and products to rounding.
        for eq, shapes in (("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ii->", [(5, 5)]), ("bii->bi", [(3, 4, 4)]),
                           ("ibi->bi", [(4, 3, 4)]), ("iii->i", [(3, 3, 3)]), ("iij->ji", [(3, 3, 2)]),
                           ("iij,jk->ik", [(3, 3, 4), (4, 2)]), ("ij,kk->ij", [(2, 3), (4, 4)]),
                           ("...ii->...i", [(2, 3, 4, 4)]), ("ii->i", [(1, 1)])):
            with self.subTest(eq=eq, shapes=shapes):
                mod = onnx_import.import_model(self.build(eq, shapes))
                xs = [rng(s, k + 90) for k, s in enumerate(shapes)]
                y = mod.run({"x%d" % k: x for k, x in enumerate(xs)})["y"]
                want = np.einsum(eq, *xs)
                self.assertEqual(y.shape, want.shape)
                if "," in eq or eq.endswith("->") or eq == "ii":
                    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
                else:
                    self.assertEqual(y.tobytes(), np.ascontiguousarray(want).tobytes())

    def test_a_repeated_index_of_two_sizes_or_a_dynamic_size_is_refused(self):
        for dims, text in (([2, "S", "S"], "index 'i' repeated in one operand (a diagonal) has the dynamic size S"),
                           ([2, "S", "T"], "index 'i' repeated in one operand has the sizes S and T")):
            with self.subTest(dims=dims):
                m = model([helper.make_node("Einsum", ["x0"], ["y"], equation="bii->bi")],
                          [helper.make_tensor_value_info("x0", F, dims)],
                          [helper.make_tensor_value_info("y", F, [2, "S"])])
                with self.assertRaises(onnx_import.Refused) as cm:
                    onnx_import.import_model(m)
                self.assertIn("(Einsum): equation 'bii->bi': " + text, str(cm.exception))
                self.assertEqual(cm.exception.reason, "shape")


class CastToDouble(unittest.TestCase):
    def build(self, reader, **attrs):
        return model([helper.make_node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
                      helper.make_node(reader, ["d"], ["y"], **attrs)],
                     [helper.make_tensor_value_info("x", F, ["N", 4])],
                     [helper.make_tensor_value_info("y", TensorProto.BOOL if reader.startswith("Is") else F,
                                                    ["N", 4])])

    def test_a_double_read_only_by_isinf_or_isnan_is_the_float_itself(self):
        x = np.array([[np.inf, -np.inf, np.nan, 3.4e38], [-0.0, 1e-45, -np.nan, 1.0]], np.float32)
        for reader, want in (("IsInf", np.isinf(x)), ("IsNaN", np.isnan(x))):
            with self.subTest(reader=reader):
                mod = onnx_import.import_model(self.build(reader))
                self.assertNotIn("CAST", ops(mod))
                np.testing.assert_array_equal(mod.run({"x": x})["y"], want.astype(np.int32))

    def test_a_double_read_by_another_op_is_refused(self):
        m = self.build("Cast", to=F)
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        self.assertIn("(Cast): attribute 'to' = DOUBLE from FLOAT: BIB tensors are f32 or i32", str(cm.exception))


class GridSample(unittest.TestCase):
    def build(self, xshape, gshape, **attrs):
        return model([helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)],
                     [helper.make_tensor_value_info("x", F, xshape), helper.make_tensor_value_info("g", F, gshape)],
                     [helper.make_tensor_value_info("y", F, [xshape[0], xshape[1], gshape[1], gshape[2]])], opset=16)

    def test_points_on_pixel_centres_read_the_pixels_and_points_outside_read_zero(self):
        # align_corners = 1 on a 3 x 5 image: x = -1, -0.5, 0, 0.5, 1 and
        # y = -1, 0, 1 are the pixel centres exactly, for every mode; past
        # the edge by a whole pixel and more, zeros padding reads 0.
        x = rng((2, 3, 3, 5), 100)
        xs, ys = np.array([-1, -0.5, 0, 0.5, 1], np.float32), np.array([-1, 0, 1], np.float32)
        g = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None]), -1)[None].repeat(2, 0)
        for mode in ("bilinear", "nearest", "bicubic"):
            with self.subTest(mode=mode):
                mod = onnx_import.import_model(self.build(["N", 3, 3, 5], ["N", 3, 5, 2], mode=mode, align_corners=1))
                self.assertEqual(mod.run({"x": x, "g": g})["y"].tobytes(), x.tobytes())
                far = np.full((2, 3, 5, 2), 3.0, np.float32)
                far[0, 0, 0] = [-3.0, 0.0]
                np.testing.assert_array_equal(mod.run({"x": x, "g": far})["y"], np.zeros_like(x))

    def test_reflection_over_one_aligned_pixel_reads_it_everywhere(self):
        x = np.array([[[[2.5]]]], np.float32)
        g = np.array([[[[-7.0, 0.3], [np.inf, -np.inf], [1.0, 0.9], [np.nan, 0.0]]]], np.float32)
        for mode in ("bilinear", "nearest"):
            with self.subTest(mode=mode):
                mod = onnx_import.import_model(self.build([1, 1, 1, 1], [1, 1, 4, 2], mode=mode,
                                                          padding_mode="reflection", align_corners=1))
                np.testing.assert_array_equal(mod.run({"x": x, "g": g})["y"], np.full((1, 1, 1, 4), 2.5, np.float32))

    def test_a_dynamic_height_is_refused(self):
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(self.build([1, 3, "H", 5], [1, 3, 5, 2]))
        self.assertIn("(GridSample): a dynamic height or width [1,3,H,5]", str(cm.exception))
        self.assertEqual(cm.exception.reason, "shape")


class TopK(unittest.TestCase):
    def build(self, k, dims=("N", 4, 5), **attrs):
        shape = list(dims)
        shape[attrs.get("axis", -1)] = k
        return model([helper.make_node("TopK", ["x", "k"], ["v", "i"], **attrs)],
                     [helper.make_tensor_value_info("x", F, list(dims))],
                     [helper.make_tensor_value_info("v", F, shape), helper.make_tensor_value_info("i", I64, shape)],
                     [init("k", i64([k]))])

    def test_k_1_is_the_arg_max_or_min_and_its_value(self):
        x = rng((3, 4, 5), 61)
        x[0, 1, 2] = x[0, 1, 4] = 9  # a tie: the lower index
        x[1, 2, 3] = x[1, 3, 3] = -9
        for axis in (-1, 1, 0):
            for largest in (1, 0):
                with self.subTest(axis=axis, largest=largest):
                    mod = onnx_import.import_model(self.build(1, axis=axis, largest=largest, sorted=1))
                    r = mod.run({"x": x})
                    pick = np.argmax if largest else np.argmin
                    i = np.expand_dims(pick(x, axis=axis), axis)
                    np.testing.assert_array_equal(r["i"], i)
                    np.testing.assert_array_equal(r["v"], np.take_along_axis(x, i, axis))

    @staticmethod
    def oracle(x, k, axis, largest):
        """(values, indices) of x's k first elements along axis, sorted in
        Python: a NaN first, then by value (+0 before -0 for the largest,
        -0 before +0 for the smallest), a tie the lower index."""
        rows = np.moveaxis(x, axis, -1)
        idx = np.empty(rows.shape[:-1] + (k,), np.int64)
        for pos in np.ndindex(rows.shape[:-1]):
            row = rows[pos]

            def key(i):
                v = float(row[i])
                if math.isnan(v):
                    return (0, 0.0, 0, i)
                negative = math.copysign(1.0, v) < 0
                return (1, -v, int(negative), i) if largest else (1, v, int(not negative), i)

            idx[pos] = sorted(range(len(row)), key=key)[:k]
        idx = np.moveaxis(idx, -1, axis)
        return np.take_along_axis(x, idx, axis), idx

    def special(self, seed):
        # Ties, NaN (two in a row), -0 and +0, infinities.
        x = rng((3, 4, 5), seed)
        x[0, 1, 2] = x[0, 1, 4] = x[0, 3, 4] = 9
        x[1, 2, 3] = x[1, 3, 3] = x[1, 2, 0] = -9
        x[2, 0, 1] = x[2, 0, 3] = x[0, 0, 1] = np.nan
        x[2, 1, :] = [0.0, -0.0, 0.0, -0.0, np.inf]
        x[2, 2, :] = [-np.inf, -0.0, 0.0, -np.inf, np.nan]
        x[2, 3, 2] = x[1, 3, 2] = -0.0
        return x

    @staticmethod
    def without(*prefixes):
        real = onnx_import.Importer.have
        return unittest.mock.patch.object(onnx_import.Importer, "have",
                                          lambda self, m: not m.startswith(prefixes) and real(self, m))

    @classmethod
    def without_argsort(cls):
        # The lowerings of a library without ARGSORT: the pairs and the rounds.
        return cls.without("ARGSORT", "TOPK")

    def test_k_above_1_is_the_sorted_order_a_tie_the_lower_index(self):
        # By TOPK, by ARGSORT where TOPK is missing (on cpu and vulkan), and
        # by the pairs where both are.
        x = self.special(62)
        for lowering in ("topk", "argsort", "pairs"):
            for axis in (-1, 1, 0):
                n = x.shape[axis]
                for k in sorted({2, n - 1, n}):
                    for largest in (1, 0):
                        with self.subTest(lowering=lowering, axis=axis, k=k, largest=largest):
                            m = self.build(k, dims=("N", 4, 5) if axis else (3, 4, 5), axis=axis, largest=largest,
                                           sorted=1)
                            missing = {"topk": (), "argsort": ("TOPK",), "pairs": ("TOPK", "ARGSORT")}[lowering]
                            with self.without(*missing) if missing else contextlib.nullcontext():
                                mod = onnx_import.import_model(m)
                            if lowering != "pairs":
                                which = "DESC" if largest else "ASC"
                                self.assertIn(lowering.upper() + "_" + which, ops(mod))
                            else:  # each element's place: a SUM over the pairs
                                self.assertTrue({"SUM", "REDUCE_SUM"} & set(ops(mod)))
                            v, i = self.oracle(x, k, axis, largest)
                            for backend in ("cpu", "vulkan") if lowering != "pairs" else ("cpu",):
                                r = mod.run({"x": x}, backend=backend, strict_device=backend != "cpu")
                                np.testing.assert_array_equal(r["i"], i)
                                self.assertEqual(r["v"].tobytes(), v.tobytes())

    def test_one_round_per_element_beyond_the_pairs_gives_the_same_order(self):
        # Past TOPK_PAIRS_MAX elements the k are picked one round each:
        # forced here on the small tensor (rows where every element left is
        # the -Inf / +Inf fill included), then on a long axis.
        from bib.onnx_math import MathOps

        x = self.special(66)
        with unittest.mock.patch.object(MathOps, "TOPK_PAIRS_MAX", 0), self.without_argsort():
            for axis in (-1, 1):
                n = x.shape[axis]
                for k in (2, n):
                    for largest in (1, 0):
                        with self.subTest(axis=axis, k=k, largest=largest):
                            mod = onnx_import.import_model(self.build(k, axis=axis, largest=largest))
                            self.assertNotIn("REDUCE_SUM", ops(mod))
                            r = mod.run({"x": x})
                            v, i = self.oracle(x, k, axis, largest)
                            np.testing.assert_array_equal(r["i"], i)
                            self.assertEqual(r["v"].tobytes(), v.tobytes())
        x = rng((2, 5000), 67)
        x[0, 100:110] = x[0, 4000]
        m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])],
                  [helper.make_tensor_value_info("x", F, ["N", 5000])],
                  [helper.make_tensor_value_info("v", F, ["N", 12]),
                   helper.make_tensor_value_info("i", I64, ["N", 12])],
                  [init("k", i64([12]))])
        with self.without_argsort():
            mod = onnx_import.import_model(m)
        r = mod.run({"x": x})
        v, i = self.oracle(x, 12, 1, 1)
        np.testing.assert_array_equal(r["i"], i)
        self.assertEqual(r["v"].tobytes(), v.tobytes())
        on_vulkan = mod.run({"x": x}, backend="vulkan", strict_device=True)
        for name in ("v", "i"):
            self.assertEqual(on_vulkan[name].tobytes(), r[name].tobytes())
        # TOPK gives the same (the CPU executor selects the 12 of 5,000).
        mod = onnx_import.import_model(m)
        self.assertIn("TOPK_DESC", ops(mod))
        by_topk = mod.run({"x": x})
        for name in ("v", "i"):
            self.assertEqual(by_topk[name].tobytes(), r[name].tobytes())

    def test_a_few_of_many_take_rounds_within_the_default_memory_cap(self):
        # A top-5 of 1,000 classes for 256 rows: the pairs would hold 256 x
        # 1,000 x 1,000 comparisons (1 GB), past the default 256 MiB cap.
        x = rng((256, 1000), 68)
        x[3, 10:20] = x[3, 500]
        m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])],
                  [helper.make_tensor_value_info("x", F, ["N", 1000])],
                  [helper.make_tensor_value_info("v", F, ["N", 5]),
                   helper.make_tensor_value_info("i", I64, ["N", 5])],
                  [init("k", i64([5]))])
        with self.without_argsort():
            mod = onnx_import.import_model(m)
        self.assertNotIn("REDUCE_SUM", ops(mod))
        r = mod.run({"x": x})
        v, i = self.oracle(x, 5, 1, 1)
        np.testing.assert_array_equal(r["i"], i)
        self.assertEqual(r["v"].tobytes(), v.tobytes())

    def test_too_many_rounds_beyond_the_pairs_are_refused(self):
        from bib.onnx_math import MathOps

        with unittest.mock.patch.object(MathOps, "TOPK_PAIRS_MAX", 4), \
                unittest.mock.patch.object(MathOps, "TOPK_ROUNDS_MAX", 3), self.without_argsort():
            with self.assertRaises(onnx_import.Refused) as cm:
                onnx_import.import_model(self.build(4))
        self.assertIn("(TopK): TopK with k = 4 along axis 2 of 5: above 4 elements BIB picks them one round each, "
                      "at most 3 rounds", str(cm.exception))
        self.assertEqual(cm.exception.reason, "shape")

    def test_k_1_is_the_first_column_of_a_larger_k(self):
        x = self.special(63)
        for largest in (1, 0):
            with self.subTest(largest=largest):
                one = onnx_import.import_model(self.build(1, largest=largest)).run({"x": x})
                five = onnx_import.import_model(self.build(5, largest=largest)).run({"x": x})
                np.testing.assert_array_equal(one["i"], five["i"][..., :1])
                self.assertEqual(one["v"].tobytes(), np.ascontiguousarray(five["v"][..., :1]).tobytes())

    def test_k_above_1_gives_the_same_bytes_on_every_executor(self):
        x = self.special(64)
        mod = onnx_import.import_model(self.build(4, axis=1, largest=0))
        runs = [mod.run({"x": x}, backend=b, strict_device=True) for b in ("cpu", "vulkan")]
        for name in ("v", "i"):
            self.assertEqual(runs[0][name].tobytes(), runs[1][name].tobytes())

    def test_a_rows_result_does_not_depend_on_the_batch(self):
        x = self.special(65)
        mod = onnx_import.import_model(self.build(3, largest=0))
        whole = mod.run({"x": x})
        for b in range(x.shape[0]):
            row = mod.run({"x": x[b:b + 1]})
            for name in ("v", "i"):
                self.assertEqual(row[name].tobytes(), np.ascontiguousarray(whole[name][b:b + 1]).tobytes())

    def test_k_larger_than_the_axis_or_not_positive_is_refused(self):
        # k a graph input bound at import: shape inference cannot see it.
        m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])],
                  [helper.make_tensor_value_info("x", F, ["N", 4, 5]), helper.make_tensor_value_info("k", I64, [1])],
                  [helper.make_tensor_value_info("v", F, ["N", 4, "K"]),
                   helper.make_tensor_value_info("i", I64, ["N", 4, "K"])])
        for k, text in ((6, "(TopK): k = 6 is larger than axis 2 (of size 5)"),
                        (0, "(TopK): k = 0: TopK takes a positive k")):
            with self.subTest(k=k):
                with self.assertRaises(onnx_import.Refused) as cm:
                    onnx_import.import_model(m, bind={"k": i64([k])})
                self.assertIn(text, str(cm.exception))

    def test_k_above_1_along_a_dynamic_axis_is_refused(self):
        m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=0)],
                  [helper.make_tensor_value_info("x", F, ["N", 4, 5])],
                  [helper.make_tensor_value_info("v", F, [2, 4, 5]),
                   helper.make_tensor_value_info("i", I64, [2, 4, 5])],
                  [init("k", i64([2]))])
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        self.assertIn("(TopK): TopK with k = 2 along a dynamic axis 0 (N)", str(cm.exception))
        self.assertEqual(cm.exception.reason, "shape")


class GatherND(unittest.TestCase):
    @staticmethod
    def oracle(data, idx, b):
        # ONNX's definition written out: each index tuple picks a slice of
        # the data (negative components count from the end), per batch.
        batch = int(np.prod(idx.shape[:b]))
        d = data.reshape((batch,) + data.shape[b:])
        i = idx.reshape((batch, -1, idx.shape[-1]))
        out = np.stack([np.stack([d[n][tuple(t)] for t in i[n]]) for n in range(batch)])
        return out.reshape(idx.shape[:-1] + data.shape[b + idx.shape[-1]:])

    def build(self, data_shape, idx_shape, b, elem=F):
        out_shape = list(idx_shape[:-1]) + list(data_shape[b + idx_shape[-1]:])
        return model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=b)],
                     [helper.make_tensor_value_info("x", elem, list(data_shape)),
                      helper.make_tensor_value_info("i", I64, list(idx_shape))],
                     [helper.make_tensor_value_info("y", elem, out_shape)])

    def test_tuples_of_one_two_and_three_components_negative_ones_and_batches(self):
        gen = np.random.default_rng(9)
        data = rng((3, 4, 5), 9)
        for idx_shape, b in (((6, 1), 0), ((2, 3, 2), 0), ((4, 3), 0), ((3, 2), 1), ((3, 2, 2), 1), ((3, 4, 1), 2)):
            k = idx_shape[-1]
            dims = data.shape[b:b + k]
            idx = np.stack([gen.integers(-d, d, idx_shape[:-1]) for d in dims], -1).astype(np.int64)
            for n in range(b):  # batch axes of the indices follow the data's
                assert idx.shape[n] == data.shape[n]
            with self.subTest(idx_shape=idx_shape, b=b):
                mod = onnx_import.import_model(self.build(data.shape, idx_shape, b))
                want = self.oracle(data, idx, b)
                for backend in ("cpu", "vulkan"):
                    y = mod.run({"x": data, "i": idx.astype(np.int32)}, backend=backend,
                                strict_device=backend != "cpu")["y"]
                    self.assertEqual(y.tobytes(), want.tobytes())

    def test_integers_over_a_dynamic_number_of_tuples_and_an_index_outside_traps(self):
        data = np.arange(24, dtype=np.int32).reshape(4, 6)
        mod = onnx_import.import_model(self.build((4, 6), ("M", 2), 0, TensorProto.INT32))
        for idx in (np.array([[0, 0], [3, 5], [-1, -6]]), np.array([[2, 1]])):
            y = mod.run({"x": data, "i": idx.astype(np.int32)})["y"]
            self.assertEqual(y.tolist(), self.oracle(data, idx, 0).tolist())
        with self.assertRaises(bib.Trap):
            mod.run({"x": data, "i": np.array([[4, 0]], np.int32)})

    def test_an_empty_batch_gives_an_empty_result(self):
        mod = onnx_import.import_model(self.build((0, 4), (0, 1), 1))
        y = mod.run({"x": np.zeros((0, 4), np.float32), "i": np.zeros((0, 1), np.int32)})["y"]
        self.assertEqual(y.shape, (0,))


class Scatter(unittest.TestCase):
    """ScatterElements, Scatter and ScatterND against a Python loop that
    applies the updates in index order (ONNX's reference), the indices
    given at run time."""

    @staticmethod
    def oracle(data, targets, updates, reduction):
        """data with updates[j] applied at targets[j] (tuples of data
        positions), in the order of j."""
        out = data.copy()
        for t, u in zip(targets, updates):
            if reduction == "none":
                out[t] = u
            elif reduction == "add":
                out[t] = out[t] + u
            else:
                out[t] = out[t] * u
        return out

    def elements(self, data, idx, updates, axis, reduction):
        targets, ups = [], []
        for pos in np.ndindex(idx.shape):
            t = list(pos)
            t[axis] = idx[pos] % data.shape[axis]
            targets.append(tuple(t))
            ups.append(updates[pos])
        return self.oracle(data, targets, ups, reduction)

    def build_elements(self, data, idx, axis, **attrs):
        dt = F if data.dtype == np.float32 else I64
        return model([helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], axis=axis, **attrs)],
                     [helper.make_tensor_value_info("data", dt, list(data.shape)),
                      helper.make_tensor_value_info("idx", I64, list(idx.shape)),
                      helper.make_tensor_value_info("upd", dt, list(idx.shape))],
                     [helper.make_tensor_value_info("y", dt, list(data.shape))], opset=16)

    def test_scatter_elements_the_last_duplicate_wins_and_negative_indices_count_from_the_end(self):
        data = rng((3, 4, 5), 70)
        for axis in (0, 1, 2, -1):
            n = data.shape[axis]
            shape = list(data.shape)
            shape[axis] = 6  # more updates than positions: duplicates
            idx = np.random.default_rng(71 + axis).integers(-n, n, shape)
            updates = rng(shape, 72 + axis)
            with self.subTest(axis=axis):
                mod = onnx_import.import_model(self.build_elements(data, idx, axis))
                y = mod.run({"data": data, "idx": idx.astype(np.int32), "upd": updates})["y"]
                self.assertEqual(y.tobytes(), self.elements(data, idx, updates, axis, "none").tobytes())

    def test_scatter_elements_of_integers(self):
        data = np.arange(12, dtype=np.int64).reshape(3, 4) * 1000
        idx = np.array([[3, 0], [1, 1], [-1, 2]], np.int64)
        updates = np.array([[-1, -2], [-3, -4], [-5, -6]], np.int64)
        mod = onnx_import.import_model(self.build_elements(data, idx, 1))
        y = mod.run({"data": data.astype(np.int32), "idx": idx.astype(np.int32), "upd": updates.astype(np.int32)})
        np.testing.assert_array_equal(y["y"], self.elements(data, idx, updates, 1, "none"))

    def test_scatter_elements_add_and_mul(self):
        data = rng((4, 6), 73)
        data[0, 2] = -0.0
        for reduction in ("add", "mul"):
            # Distinct indices: each update applied once, exactly numpy's
            # bits (-0 + -0 stays -0: the sum's other terms are -0).
            idx = np.array([[2, 0, 5], [1, 4, 3], [0, 1, 2], [5, 4, 3]], np.int64)
            updates = rng((4, 3), 74)
            updates[0, 0] = -0.0
            with self.subTest(reduction=reduction, duplicates=False):
                mod = onnx_import.import_model(self.build_elements(data, idx, 1, reduction=reduction))
                y = mod.run({"data": data, "idx": idx.astype(np.int32), "upd": updates})["y"]
                self.assertEqual(y.tobytes(), self.elements(data, idx, updates, 1, reduction).tobytes())
            # Duplicates: the updates are combined first, in SUM's (PROD's)
            # tree, so the last bits may differ from one at a time.
            idx = np.array([[2, 2, 2, 0], [1, 1, 3, 1], [0, 0, 0, 0], [5, 4, 5, 4]], np.int64)
            updates = rng((4, 4), 75)
            with self.subTest(reduction=reduction, duplicates=True):
                mod = onnx_import.import_model(self.build_elements(data, idx, 1, reduction=reduction))
                y = mod.run({"data": data, "idx": idx.astype(np.int32), "upd": updates})["y"]
                np.testing.assert_allclose(y, self.elements(data, idx, updates, 1, reduction), rtol=1e-6)

    def test_scatter_before_opset_11_is_scatter_elements(self):
        data, idx, updates = rng((3, 3), 76), np.array([[1, 0, 2], [0, 2, 1]], np.int64), rng((2, 3), 77)
        m = model([helper.make_node("Scatter", ["data", "idx", "upd"], ["y"], axis=0)],
                  [helper.make_tensor_value_info("data", F, [3, 3]), helper.make_tensor_value_info("idx", I64, [2, 3]),
                   helper.make_tensor_value_info("upd", F, [2, 3])],
                  [helper.make_tensor_value_info("y", F, [3, 3])], opset=10)
        y = onnx_import.import_model(m).run({"data": data, "idx": idx.astype(np.int32), "upd": updates})["y"]
        self.assertEqual(y.tobytes(), self.elements(data, idx, updates, 0, "none").tobytes())

    def build_nd(self, data, idx, **attrs):
        ushape = list(idx.shape[:-1]) + list(data.shape[idx.shape[-1]:])
        return model([helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], **attrs)],
                     [helper.make_tensor_value_info("data", F, list(data.shape)),
                      helper.make_tensor_value_info("idx", I64, list(idx.shape)),
                      helper.make_tensor_value_info("upd", F, ushape)],
                     [helper.make_tensor_value_info("y", F, list(data.shape))], opset=16), ushape

    def test_scatter_nd_rows_and_elements(self):
        data = rng((4, 3, 5), 78)
        cases = (np.array([[2], [-1], [2]], np.int64),                      # rows, a duplicate
                 np.array([[[0, 1], [3, -3]], [[2, 2], [0, 1]]], np.int64),  # [2,2] tuples of 2 axes
                 np.array([[1, 2, 4], [-4, 0, -1], [1, 2, 4]], np.int64))   # single elements
        for idx in cases:
            for reduction in ("none", "add", "mul"):
                with self.subTest(idx=idx.tolist(), reduction=reduction):
                    m, ushape = self.build_nd(data, idx, reduction=reduction)
                    updates = rng(ushape, 79)
                    y = onnx_import.import_model(m).run({"data": data, "idx": idx.astype(np.int32), "upd": updates})
                    k = idx.shape[-1]
                    flat = idx.reshape(-1, k)
                    targets = [tuple(int(t[a]) % data.shape[a] for a in range(k)) for t in flat]
                    want = self.oracle(data, targets, updates.reshape((len(flat),) + data.shape[k:]), reduction)
                    if reduction == "none":
                        self.assertEqual(y["y"].tobytes(), want.tobytes())
                    else:
                        np.testing.assert_allclose(y["y"], want, rtol=1e-6)

    def test_the_same_bytes_on_every_executor_and_whatever_the_batch(self):
        data = rng((4, 6), 80)
        idx = np.array([[2, 2, 0], [5, 1, 1], [0, -6, 3], [4, 4, 4]], np.int64)
        updates = rng((4, 3), 81)
        for reduction in ("none", "add", "mul"):
            with self.subTest(reduction=reduction):
                mod = onnx_import.import_model(self.build_elements(data, idx, 1, reduction=reduction))
                feed = {"data": data, "idx": idx.astype(np.int32), "upd": updates}
                runs = [mod.run(feed, backend=b, strict_device=True)["y"] for b in ("cpu", "vulkan")]
                self.assertEqual(runs[0].tobytes(), runs[1].tobytes())
                m = self.build_elements(data[:1], idx[:1], 1, reduction=reduction)
                one = onnx_import.import_model(m)
                for b in range(4):
                    row = one.run({"data": data[b:b + 1], "idx": idx[b:b + 1].astype(np.int32),
                                   "upd": updates[b:b + 1]})["y"]
                    self.assertEqual(row.tobytes(), runs[0][b:b + 1].tobytes())

    def test_an_index_outside_the_axis_traps_or_is_refused(self):
        data, updates = rng((2, 4), 82), rng((2, 1), 83)
        mod = onnx_import.import_model(self.build_elements(data, np.zeros((2, 1), np.int64), 1))
        for bad in (4, -5):
            with self.subTest(index=bad):
                with self.assertRaises(bib.Trap) as cm:
                    mod.run({"data": data, "idx": np.array([[0], [bad]], np.int32), "upd": updates})
                self.assertIn("GATHER_AXIS", cm.exception.message)
        m = model([helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], axis=1)],
                  [helper.make_tensor_value_info("data", F, [2, 4]), helper.make_tensor_value_info("upd", F, [2, 1])],
                  [helper.make_tensor_value_info("y", F, [2, 4])], [init("idx", i64([[0], [4]]))])
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        self.assertIn("(ScatterElements): an index outside [-4, 4) on the data's axis 1", str(cm.exception))

    def test_too_many_pairs_are_refused(self):
        data, idx = rng((2, 5000), 85), np.zeros((2, 4000), np.int64)
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(self.build_elements(data, idx, 1))
        self.assertIn("(ScatterElements): a scatter of 4000 updates along an axis of 5000: 20000000 pairs to "
                      "compare, above the 16777216 BIB takes", str(cm.exception))
        self.assertEqual(cm.exception.reason, "shape")

    def test_indices_that_cover_part_of_another_axis_are_refused(self):
        data, idx = rng((3, 4), 84), np.zeros((2, 2), np.int64)
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(self.build_elements(data, idx, 1))
        self.assertIn("(ScatterElements): indices [2,2] cover part of the data [3,4] on an axis other than 1",
                      str(cm.exception))
        self.assertEqual(cm.exception.reason, "shape")


@unittest.skipIf(torch is None, "torch is missing for this python3")
class TorchExports(unittest.TestCase):
    """Modules as torch.onnx.export writes them with dynamic axes: imported,
    run on the CPU and on Vulkan at sizes other than the example's, the
    bytes the same on both and the values torch's."""

    def export(self, module, args, dynamic, opset=17):
        path = os.path.join(tempfile.mkdtemp(), "m.onnx")
        names = ["in%d" % k for k in range(len(args))]
        module.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, path, opset_version=opset, input_names=names, output_names=["y"],
                              dynamic_axes=dynamic, do_constant_folding=True)
        return path

    def run_both(self, mod, args):
        feed = {}
        for k, a in enumerate(args):
            if "in%d" % k in mod.onnx_inputs:  # torch drops an input it does not read
                a = a.numpy()
                feed[mod.onnx_inputs["in%d" % k]] = a.astype(np.int32) if a.dtype == np.int64 else a
        ys = [mod.run(feed, backend=b, strict_device=True)[mod.onnx_outputs["y"]] for b in ("cpu", "vulkan")]
        self.assertEqual(ys[0].tobytes(), ys[1].tobytes(), "cpu and vulkan differ")
        return ys[0]

    def check(self, module, args, dynamic, runs, opset=17, rtol=1e-5):
        mod = onnx_import.import_model(self.export(module, args, dynamic, opset))
        for run_args in runs:
            with torch.no_grad():
                want = module(*run_args).numpy()
            y = self.run_both(mod, run_args)
            self.assertEqual(y.shape, want.shape)
            np.testing.assert_allclose(y, want, rtol=rtol, atol=1e-6)
        return mod

    def refused(self, module, args, dynamic, opset=17):
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(self.export(module, args, dynamic, opset))
        self.assertNotEqual(cm.exception.reason, "bug")
        return str(cm.exception)

    BATCH = {"in0": {0: "B"}, "y": {0: "B"}}

    def test_a_decoder_layer_with_a_kv_cache(self):
        # The cache grows by Concat to P + S; the causal mask's diagonal is
        # T - S = P (Trilu with a dynamic k); the attention mask input is
        # named "P + S", as exporters name it; the position ids are
        # mask.cumsum(-1)[:, -S:] - 1 (a Slice from -S); the positions of the
        # new entries index a table (arange(P, P + S)). One module, run at
        # several P and S, P = 0 (the first step) included.
        class Layer(torch.nn.Module):
            def __init__(self, e=32, h=4):
                super().__init__()
                self.h, self.d = h, e // h
                self.qkv, self.o = torch.nn.Linear(e, 3 * e), torch.nn.Linear(e, e)
                self.wpe = torch.nn.Embedding(64, e)

            def forward(self, x, pk, pv, am):
                B, S, E = x.shape
                P = pk.shape[2]
                x = x + self.wpe(torch.arange(P, P + S))[None]
                q, k, v = (t.view(B, S, self.h, self.d).transpose(1, 2) for t in self.qkv(x).split(E, dim=-1))
                k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
                T = k.shape[2]
                att = (q @ k.transpose(-1, -2)) / self.d ** 0.5
                att = att.masked_fill(~torch.ones(S, T, dtype=torch.bool).tril(T - S), float("-inf"))
                att = att + (1.0 - am[:, None, None, :].to(att.dtype)) * torch.finfo(att.dtype).min
                pos = am.long().cumsum(-1)[:, -S:] - 1
                y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, S, E)
                return self.o(y) + pos[..., None].float(), k, v

        torch.manual_seed(0)
        layer = Layer().eval()
        path = os.path.join(tempfile.mkdtemp(), "m.onnx")
        args = (torch.randn(1, 3, 32), torch.randn(1, 4, 5, 8), torch.randn(1, 4, 5, 8), torch.ones(1, 8, dtype=torch.int64))
        cache = {0: "B", 2: "P + S"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(layer, args, path, opset_version=17, input_names=["x", "pk", "pv", "am"],
                              output_names=["y", "k", "v"],
                              dynamic_axes={"x": {0: "B", 1: "S"}, "pk": {0: "B", 2: "P"}, "pv": {0: "B", 2: "P"},
                                            "am": {0: "B", 1: "P + S"}, "y": {0: "B", 1: "S"}, "k": cache, "v": cache})
        mod = onnx_import.import_model(path)
        for b, s, p in ((1, 3, 5), (2, 1, 7), (1, 4, 0), (3, 2, 1)):
            run_args = (torch.randn(b, s, 32), torch.randn(b, 4, p, 8), torch.randn(b, 4, p, 8),
                        torch.ones(b, p + s, dtype=torch.int64))
            run_args[3][0, 0] = 0 if p + s > 1 else 1
            with torch.no_grad():
                want = [t.numpy() for t in layer(*run_args)]
            feed = {mod.onnx_inputs[n]: a.numpy().astype(np.int32) if n == "am" else a.numpy()
                    for n, a in zip(("x", "pk", "pv", "am"), run_args)}
            for backend in ("cpu", "vulkan"):
                r = mod.run(feed, backend=backend, strict_device=True)
                got = [r[mod.onnx_outputs[n]] for n in ("y", "k", "v")]
                if backend == "cpu":
                    first = [g.tobytes() for g in got]
                    for g, w in zip(got, want):
                        self.assertEqual(g.shape, w.shape)
                        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)
                else:
                    self.assertEqual([g.tobytes() for g in got], first, "cpu and vulkan differ")

    def test_a_class_token_repeated_over_a_dynamic_batch(self):
        # ViT / DeiT: cat([cls.repeat(x.shape[0], 1, 1), x], 1): Tile with
        # the batch as a repeat.
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cls = torch.nn.Parameter(torch.randn(1, 1, 8))

            def forward(self, x):
                return torch.cat([self.cls.repeat(x.shape[0], 1, 1), x], 1)

        torch.manual_seed(0)
        self.check(M(), (torch.randn(2, 4, 8),), self.BATCH, [(torch.randn(5, 4, 8),), (torch.randn(1, 4, 8),)])

    def test_a_class_token_expanded_to_a_dynamic_batch(self):
        # cls.expand(x.shape[0], -1, -1): torch resolves the -1 entries with
        # Where(Equal(sizes, -1), 1, sizes), folded with the batch a dim.
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cls = torch.nn.Parameter(torch.randn(1, 1, 8))

            def forward(self, x):
                return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)

        torch.manual_seed(0)
        for opset in (13, 17):
            self.check(M(), (torch.randn(2, 4, 8),), self.BATCH, [(torch.randn(5, 4, 8),)], opset)

    def test_bert_token_types_expanded_to_a_dynamic_batch_and_sequence(self):
        # Hugging Face's BertEmbeddings: token_type_ids[:, :t].expand(b, t).
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.we = torch.nn.Embedding(50, 16)
                self.pe = torch.nn.Embedding(32, 16)
                self.te = torch.nn.Embedding(2, 16)
                self.register_buffer("position_ids", torch.arange(32).expand((1, -1)))
                self.register_buffer("token_type_ids", torch.zeros(1, 32, dtype=torch.long))

            def forward(self, ids):
                b, t = ids.shape
                tt = self.token_type_ids[:, :t].expand(b, t)
                return self.we(ids) + self.te(tt) + self.pe(self.position_ids[:, 0:t])

        torch.manual_seed(0)
        dyn = {"in0": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}}
        self.check(M(), (torch.randint(0, 50, (2, 6)),), dyn, [(torch.randint(0, 50, (3, 9)),)])

    SEQ = {"in0": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}}

    def test_positions_expanded_to_a_dynamic_batch_index_an_embedding(self):
        # BERT-style position ids: arange(S).unsqueeze(0).expand_as(ids),
        # then an embedding of them (a GATHER_AXIS of run-time positions).
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.we = torch.nn.Embedding(50, 8)
                self.pe = torch.nn.Embedding(16, 8)

            def forward(self, ids):
                pos = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids)
                return self.we(ids) + self.pe(pos)

        torch.manual_seed(0)
        self.check(M(), (torch.randint(0, 50, (2, 6)),), self.SEQ,
                   [(torch.randint(0, 50, (3, 9)),), (torch.randint(0, 50, (1, 16)),)])

    def test_rotary_angles_of_dynamic_positions(self):
        # RoPE's angles: positions as floats times the inverse frequencies,
        # as t[:, None] * inv_freq, torch.outer(t, inv_freq) and as Hugging
        # Face's batched inv_freq[None, :, None] @ position_ids[:, None, :].float().
        inv = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))

        class Outer(torch.nn.Module):
            def forward(self, x):
                t = torch.arange(x.shape[1]).float()
                return x * (t[:, None] * inv[None, :]).repeat(1, 2)

        class HF(torch.nn.Module):
            def forward(self, x):
                pid = torch.arange(x.shape[1]).unsqueeze(0).expand(x.shape[0], -1)
                f = (inv[None, :, None].expand(pid.shape[0], -1, 1) @ pid[:, None, :].float()).transpose(1, 2)
                return x * torch.cat((f, f), dim=-1)

        class TorchOuter(torch.nn.Module):
            def forward(self, x):
                return x * torch.outer(torch.arange(x.shape[1]).float(), inv).repeat(1, 2)  # Einsum 'i,j->ij'

        for m in (Outer(), HF(), TorchOuter()):
            self.check(m, (torch.randn(2, 6, 8),), self.SEQ, [(torch.randn(3, 9, 8),), (torch.randn(1, 300, 8),)])

    def test_rotary_position_embedding_applied_as_llama_applies_it(self):
        # HF LLaMA's rotary embedding: angles from the positions, cos and sin
        # of them (SIN, COS), then q * cos + rotate_half(q) * sin, over a
        # dynamic batch and sequence; against torch's float32 cos and sin.
        inv = 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16))

        class Rope(torch.nn.Module):
            def forward(self, q):
                pid = torch.arange(q.shape[2]).unsqueeze(0).expand(q.shape[0], -1)
                f = (inv[None, :, None].expand(pid.shape[0], -1, 1) @ pid[:, None, :].float()).transpose(1, 2)
                emb = torch.cat((f, f), dim=-1)
                cos, sin = emb.cos()[:, None], emb.sin()[:, None]
                half = q.shape[-1] // 2
                rot = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
                return q * cos + rot * sin

        dyn = {"in0": {0: "B", 2: "S"}, "y": {0: "B", 2: "S"}}
        mod = self.check(Rope(), (torch.randn(2, 4, 6, 16),), dyn,
                         [(torch.randn(3, 4, 9, 16),), (torch.randn(1, 4, 700, 16),)], rtol=2e-5)
        self.assertIn("SIN", ops(mod))
        self.assertIn("COS", ops(mod))

    def test_a_causal_mask_compared_from_dynamic_positions(self):
        # arange(S)[:, None] >= arange(S)[None, :]: exact comparisons of
        # positions made at run time.
        class M(torch.nn.Module):
            def forward(self, x):
                i = torch.arange(x.shape[1])
                return x.masked_fill(~(i[:, None] >= i[None, :]), -1e9).softmax(-1)

        dyn = {"in0": {0: "B", 1: "S", 2: "S"}, "y": {0: "B", 1: "S", 2: "S"}}
        self.check(M(), (torch.randn(2, 6, 6),), dyn, [(torch.randn(3, 9, 9),), (torch.randn(1, 1, 1),)])

    def test_triangles_of_a_dynamic_length(self):
        # Causal masks built in the model: triu / tril of ones or of -inf
        # on a dynamic t, diagonals 1, 0 and -1.
        class M(torch.nn.Module):
            def __init__(self, kind, k):
                super().__init__()
                self.kind, self.k = kind, k

            def forward(self, s):
                t = s.shape[-1]
                if self.kind == "bool":
                    m = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=self.k)
                    return s.masked_fill(m, float("-inf")).softmax(-1)
                if self.kind == "inf":
                    return (s + torch.triu(torch.full((t, t), float("-inf")), diagonal=self.k)).softmax(-1)
                return s * torch.tril(torch.ones(t, t), diagonal=self.k)

        dyn = {"in0": {0: "B", 1: "S", 2: "S"}, "y": {0: "B", 1: "S", 2: "S"}}
        for kind, k in (("bool", 1), ("inf", 1), ("tril", 0), ("tril", -1)):
            self.check(M(kind, k), (torch.randn(2, 6, 6),), dyn, [(torch.randn(3, 4, 4),), (torch.randn(1, 9, 9),)])

    def test_a_gpt_style_decoder_with_a_dynamic_batch_and_sequence(self):
        # Token and learned position embeddings, causal self-attention with
        # the mask built in forward (triu of -inf, and masked_fill of a
        # tril == 0), layer norms, an MLP, the head.
        class Block(torch.nn.Module):
            def __init__(self, d, h, fill):
                super().__init__()
                self.h, self.fill = h, fill
                self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
                self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
                self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

            def forward(self, x):
                b, t, d = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
                q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
                att = q @ k.transpose(-2, -1) / math.sqrt(d // self.h)
                if self.fill:
                    att = att.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf"))
                else:
                    att = att + torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
                y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
                x = x + self.proj(y)
                return x + self.mlp(self.ln2(x))

        class GPT(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.wte, self.wpe = torch.nn.Embedding(40, 16), torch.nn.Embedding(32, 16)
                self.blocks = torch.nn.Sequential(Block(16, 2, False), Block(16, 2, True))
                self.ln, self.head = torch.nn.LayerNorm(16), torch.nn.Linear(16, 40, bias=False)

            def forward(self, ids):
                pos = torch.arange(ids.shape[1])
                return self.head(self.ln(self.blocks(self.wte(ids) + self.wpe(pos))))

        torch.manual_seed(0)
        self.check(GPT(), (torch.randint(0, 40, (2, 5)),), self.SEQ,
                   [(torch.randint(0, 40, (3, 7)),), (torch.randint(0, 40, (1, 32)),)], rtol=1e-4)

    def test_einsum_equations_with_dynamic_axes(self):
        # torch.einsum as attention and outer products write it, the batch
        # and the sequence dynamic.
        for eq, shapes, dyn in (
                ("bij,bjk->bik", [(2, 4, 5), (2, 5, 3)], {"in0": {0: "B", 1: "S"}, "in1": {0: "B"}}),
                ("bhqd,bhkd->bhqk", [(2, 2, 4, 8), (2, 2, 4, 8)], {"in0": {0: "B", 2: "S"}, "in1": {0: "B", 2: "S"}}),
                ("bhqk,bhkd->bhqd", [(2, 2, 4, 4), (2, 2, 4, 8)], {"in0": {0: "B", 2: "S", 3: "S"},
                                                                    "in1": {0: "B", 2: "S"}}),
                ("bi,bi->b", [(3, 6), (3, 6)], {"in0": {0: "B"}, "in1": {0: "B"}}),
                ("i,j->ij", [(5,), (4,)], {"in0": {0: "S"}}),
                ("bij->bji", [(2, 3, 4)], {"in0": {0: "B", 1: "S"}}),
                ("bij->bi", [(2, 3, 4)], {"in0": {0: "B", 1: "S"}}),
                ("bii->bi", [(2, 4, 4)], {"in0": {0: "B"}}),
                ("bii->b", [(2, 4, 4)], {"in0": {0: "B"}})):
            class M(torch.nn.Module):
                def forward(self, *xs):
                    return torch.einsum(eq, *xs)

            def sizes(k, shape, b, s):
                return [{"B": b, "S": s}[dyn.get("in%d" % k, {})[a]] if a in dyn.get("in%d" % k, {}) else d
                        for a, d in enumerate(shape)]

            with self.subTest(eq=eq):
                dyn = dict(dyn, y={})
                args = tuple(torch.randn(*s) for s in shapes)
                runs = [tuple(torch.randn(*sizes(k, s, b, t)) for k, s in enumerate(shapes))
                        for b, t in ((3, 7), (1, 2))]
                self.check(M(), args, dyn, runs, rtol=1e-4)

    def test_position_ids_from_an_attention_mask_over_a_dynamic_length(self):
        # Hugging Face decoders: mask.long().cumsum(-1) - 1, a running sum
        # along the dynamic sequence axis (CUMSUM; refused before it), and a
        # float cumsum down a dynamic batch (the axis moved last and back),
        # with numpy.cumsum's bytes.
        class Positions(torch.nn.Module):
            def forward(self, mask):
                return mask.long().cumsum(-1) - 1

        class Down(torch.nn.Module):
            def forward(self, x):
                return torch.cumsum(x, 0)

        masks = [torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]), torch.ones(3, 9, dtype=torch.int64)]
        mod = onnx_import.import_model(self.export(Positions(), (masks[0],), {"in0": {0: "B", 1: "T"},
                                                                              "y": {0: "B", 1: "T"}}))
        self.assertIn("CUMSUM", ops(mod))
        for mask in masks:
            self.assertEqual(self.run_both(mod, (mask,)).tolist(), Positions()(mask).tolist())
        mod = onnx_import.import_model(self.export(Down(), (torch.randn(3, 4),), self.BATCH))
        for b in (5, 1):
            x = torch.randn(b, 4)
            self.assertEqual(self.run_both(mod, (x,)).tobytes(), np.cumsum(x.numpy(), 0).tobytes())

    def test_topk_1_over_a_dynamic_batch(self):
        # A greedy decoder's next token: torch.topk(logits, 1), its values
        # and int64 indices, largest and smallest.
        for largest in (True, False):
            class M(torch.nn.Module):
                def forward(self, x):
                    v, i = torch.topk(x, 1, dim=-1, largest=largest)
                    return v * 100 + i.float()

            with self.subTest(largest=largest):
                self.check(M(), (torch.randn(2, 3, 10),), {"in0": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}},
                           [(torch.randn(4, 7, 10),)])

    def test_topk_sort_and_argsort_over_a_dynamic_batch(self):
        # torch.topk with k > 1, torch.sort and torch.argsort all export
        # TopK (sort with k = the axis's size, from Shape).
        fns = {"topk": lambda x: (lambda v, i: v * 100 + i.float())(*torch.topk(x, 4, dim=-1)),
               "topk_smallest_dim1": lambda x: (lambda v, i: v * 100 + i.float())(
                   *torch.topk(x, 2, dim=1, largest=False)),
               "sort": lambda x: (lambda v, i: v * 100 + i.float())(*torch.sort(x, dim=-1)),
               "sort_descending": lambda x: torch.sort(x, dim=-1, descending=True)[0],
               "argsort": lambda x: torch.argsort(x, dim=-1).float()}
        for name, fn in fns.items():
            class M(torch.nn.Module):
                def forward(self, x):
                    return fn(x)

            with self.subTest(name=name):
                self.check(M(), (torch.randn(2, 3, 10),), self.BATCH,
                           [(torch.randn(4, 3, 10),), (torch.randn(1, 3, 10),)])

    def test_scatter_index_put_and_setitem(self):
        # A mixture of experts' routing mask (zeros scattered with 1 at the
        # top-2 experts: TopK, then ScatterElements with indices found at
        # run time) over a dynamic batch; x[:, 0] = v and x[i] = rows
        # (ScatterND, of constant and of run-time indices); scatter_add.
        class Route(torch.nn.Module):
            def forward(self, x):
                return torch.zeros_like(x).scatter(1, torch.topk(x, 2, dim=-1)[1], 1.0) * x

        self.check(Route(), (torch.randn(2, 8),), self.BATCH, [(torch.randn(5, 8),), (torch.randn(1, 8),)])

        class SetColumn(torch.nn.Module):
            def forward(self, x, v):
                y = x.clone()
                y[:, 0] = v
                return y

        class PutRows(torch.nn.Module):
            def forward(self, x, i, v):
                return x.index_put((i,), v)

        class ScatterAdd(torch.nn.Module):
            def forward(self, x, i, v):
                return x.scatter_add(1, i, v)

        args = (torch.randn(3, 8), torch.randn(3))
        self.check(SetColumn(), args, {}, [args])
        args = (torch.randn(4, 5), torch.tensor([3, -4]), torch.randn(2, 5))
        self.check(PutRows(), args, {}, [args, (torch.randn(4, 5), torch.tensor([1, 2]), torch.randn(2, 5))])
        args = (torch.randn(3, 8), torch.tensor([[0, 1, 7, 1]] * 3), torch.randn(3, 4))
        self.check(ScatterAdd(), args, {}, [args], opset=16)

    def test_nan_to_num_and_a_constant_boolean_mask(self):
        # nan_to_num casts to double for IsInf; x[:, mask] is a NonZero
        # of the constant mask.
        class NanToNum(torch.nn.Module):
            def forward(self, x):
                return torch.nan_to_num(x, posinf=7.0)

        class Mask(torch.nn.Module):
            def forward(self, x):
                return x[:, torch.tensor([True, False, True, True, False, False, True, False])]

        x = torch.randn(5, 8)
        x[0, 1], x[1, 2], x[2, 3] = float("nan"), float("inf"), float("-inf")
        self.check(NanToNum(), (torch.randn(2, 8),), self.BATCH, [(x,)])
        self.check(Mask(), (torch.randn(2, 8),), self.BATCH, [(x,), (torch.randn(1, 8),)])

    def test_grid_sample_every_mode_padding_and_alignment(self):
        # A spatial transformer's sampler: the grid reaches past the image
        # (to +-1.6) so that every padding mode matters, the batch dynamic.
        # Each combination against torch on the CPU; three of them also on
        # Vulkan (the same bytes) and one image at a time (the same bytes
        # as in the batch).
        g = torch.Generator().manual_seed(5)

        def grid(b):
            return torch.rand(b, 5, 7, 2, generator=g) * 3.2 - 1.6

        both = {("bilinear", "zeros", False), ("nearest", "border", True), ("bicubic", "reflection", False)}
        for mode in ("bilinear", "nearest", "bicubic"):
            for padding in ("zeros", "border", "reflection"):
                for align in (False, True):
                    class M(torch.nn.Module):
                        def forward(self, x, gr):
                            return TF.grid_sample(x, gr, mode=mode, padding_mode=padding, align_corners=align)

                    with self.subTest(mode=mode, padding=padding, align=align):
                        dyn = {"in0": {0: "B"}, "in1": {0: "B"}, "y": {0: "B"}}
                        mod = onnx_import.import_model(self.export(M(), (torch.randn(2, 2, 6, 8), grid(2)), dyn,
                                                                   opset=16))
                        x, gr = torch.randn(3, 2, 6, 8, generator=g), grid(3)
                        feed = {mod.onnx_inputs["in0"]: x.numpy(), mod.onnx_inputs["in1"]: gr.numpy()}
                        y = mod.run(feed)[mod.onnx_outputs["y"]]
                        np.testing.assert_allclose(y, M()(x, gr).numpy(), rtol=1e-4, atol=1e-5)
                        if (mode, padding, align) in both:
                            self.assertEqual(self.run_both(mod, (x, gr)).tobytes(), y.tobytes())
                            for b in range(3):
                                one = mod.run({mod.onnx_inputs["in0"]: x[b:b + 1].numpy(),
                                               mod.onnx_inputs["in1"]: gr[b:b + 1].numpy()})
                                self.assertEqual(one[mod.onnx_outputs["y"]].tobytes(), y[b:b + 1].tobytes())

    def test_interpolate_with_a_dynamic_batch(self):
        # Only the resized axes must be static: the batch stays a dim, and
        # so do sizes torch builds from Shape(x)[:2].
        for kw in ({"scale_factor": 2, "mode": "nearest"},
                   {"size": (12, 12), "mode": "bilinear", "align_corners": False}):
            class M(torch.nn.Module):
                def forward(self, x):
                    return TF.interpolate(x, **kw)

            self.check(M(), (torch.randn(2, 3, 8, 8),), self.BATCH, [(torch.randn(5, 3, 8, 8),)])

    def test_resizing_a_dynamic_axis_is_refused_by_name(self):
        class M(torch.nn.Module):
            def forward(self, x):
                return TF.interpolate(x, scale_factor=2, mode="nearest")

        msg = self.refused(M(), (torch.randn(2, 3, 8, 8),), {"in0": {0: "B", 3: "W"}, "y": {0: "B", 3: "W2"}})
        self.assertIn("(Resize): resizing the dynamic axis 3 (of size W)", msg)

    def test_cosine_similarity_and_norm(self):
        # ReduceSum with explicit axes and noop_with_empty_axes=0 written out.
        class M(torch.nn.Module):
            def forward(self, a, b):
                return TF.cosine_similarity(a, b, dim=-1) + torch.norm(a, dim=-1)

        dyn = {"in0": {0: "B"}, "in1": {0: "B"}, "y": {0: "B"}}
        self.check(M(), (torch.randn(4, 8), torch.randn(4, 8)), dyn, [(torch.randn(3, 8), torch.randn(3, 8))])

    def test_split_sizes_traced_on_a_dynamic_axis_are_checked_at_run_time(self):
        # x.split(x.shape[1] // 2) is traced to the sizes [3, 3]: right for a
        # sequence of 6 only; another length stops the run.
        class M(torch.nn.Module):
            def forward(self, x):
                return x.split(x.shape[1] // 2, 1)[0] * 2

        dyn = {"in0": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}}
        mod = self.check(M(), (torch.randn(2, 6, 8),), dyn, [(torch.randn(3, 6, 8),)])
        for s in (4, 9):
            for backend in ("cpu", "vulkan"):
                with self.assertRaises(bib.Trap, msg="S=%d on %s" % (s, backend)) as cm:
                    mod.run({mod.onnx_inputs["in0"]: rng((3, s, 8), s)}, backend=backend, strict_device=True)
                self.assertIn("(RESHAPE t1, t0, r2, 3): shape mismatch: t0 (in0) is [3,%d,8]" % s,
                              cm.exception.message)

    def test_bidirectional_lstm_gru_and_rnn(self):
        # Two layers, each bidirectional (the second reads the first's Y):
        # Y [seq, 2, B, hidden], the directions side by side, and Y_h, Y_c
        # [2, B, hidden] per layer, all read; batch-major so that one output
        # holds them all.
        class M(torch.nn.Module):
            def __init__(self, kind, states):
                super().__init__()
                self.rnn = getattr(torch.nn, kind)(6, 5, num_layers=2, bidirectional=True)
                self.states = states

            def forward(self, x, h0):
                if self.states:
                    y, h = self.rnn(x, (h0, -h0) if isinstance(self.rnn, torch.nn.LSTM) else h0)
                else:
                    y, h = self.rnn(x)
                hs = list(h) if isinstance(h, tuple) else [h]
                parts = [y.permute(1, 0, 2).flatten(1)] + [v.permute(1, 0, 2).flatten(1) for v in hs]
                return torch.cat(parts, 1)

        dyn = {"in0": {1: "B"}, "in1": {1: "B"}, "y": {0: "B"}}
        for kind, states in (("LSTM", True), ("GRU", False), ("RNN", True)):
            torch.manual_seed(0)
            self.check(M(kind, states), (torch.randn(3, 2, 6), torch.randn(4, 2, 5)), dyn,
                       [(torch.randn(3, 3, 6), torch.randn(4, 3, 5))])

    def test_pad_by_a_dynamic_dim_is_refused_by_name(self):
        class P(torch.nn.Module):
            def forward(self, x):
                return TF.pad(x, (0, 0, 0, x.shape[1]))

        msg = self.refused(P(), (torch.randn(2, 6, 8),), {"in0": {0: "B", 1: "S"}, "y": {0: "B", 1: "S2"}})
        self.assertIn("(Pad): input", msg)
        self.assertIn("holds the dynamic dimension S", msg)

    def test_one_hot_by_a_dynamic_depth(self):
        # one_hot(i, x.shape[1]) with S dynamic: the depth loaded and its
        # positions made at run time; in ONNX, negative indices count from S.
        class O(torch.nn.Module):
            def forward(self, x, i):
                return TF.one_hot(i, x.shape[1]).float() @ x

        dyn = {"in0": {0: "B", 1: "S"}, "in1": {0: "B"}, "y": {0: "B"}}
        self.check(O(), (torch.randn(2, 6, 8), torch.randint(0, 6, (2, 3))), dyn,
                   [(torch.randn(3, 9, 8), torch.randint(0, 9, (3, 3))),
                    (torch.randn(1, 300, 8), torch.tensor([[299, 0, 257]]))])

        m = model([helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
                   helper.make_node("OneHot", ["i", "s", "v"], ["y"], axis=0)],
                  [helper.make_tensor_value_info("x", F, [2, "S"]), helper.make_tensor_value_info("i", I64, [4])],
                  [helper.make_tensor_value_info("y", F, ["S", 4])], [init("v", np.array([-1.0, 2.5], np.float32))])
        mod = onnx_import.import_model(m)
        i = np.array([0, -1, 7, -8], np.int64)
        for n in (5, 8):
            y = mod.run({"x": np.zeros((2, n), np.float32), "i": i.astype(np.int32)})["y"]
            want = np.where(np.arange(n)[:, None] == np.where(i < 0, i + n, i)[None, :], 2.5, -1.0)
            np.testing.assert_array_equal(y, want.astype(np.float32))


class Names(unittest.TestCase):
    def test_names_that_are_not_identifiers_are_sanitised(self):
        m = model(
            [helper.make_node("Relu", ["onnx::x/1"], ["0out"])],
            [helper.make_tensor_value_info("onnx::x/1", F, [2])],
            [helper.make_tensor_value_info("0out", F, [2])],
        )
        mod = onnx_import.import_model(m)
        self.assertEqual(mod.onnx_inputs, {"onnx::x/1": "onnx__x_1"})
        self.assertEqual(mod.onnx_outputs, {"0out": "_0out"})
        r = mod.run({"onnx__x_1": np.array([-1, 2], np.float32)})
        np.testing.assert_array_equal(r["_0out"], [0, 2])

    def test_sanitise_rule(self):
        taken = set()
        self.assertEqual(onnx_import.sanitize("input.1", taken, "i"), "input.1")
        self.assertEqual(onnx_import.sanitize("a-b", taken, "i"), "a_b")
        self.assertEqual(onnx_import.sanitize("a_b", taken, "i"), "a_b_2")
        self.assertEqual(onnx_import.sanitize(".x", taken, "i"), "_.x")
        self.assertEqual(onnx_import.sanitize("", taken, "input0"), "input0")


class CommandLine(unittest.TestCase):
    def run_tool(self, m, *extra):
        d = tempfile.mkdtemp()
        src = os.path.join(d, "m.onnx")
        onnx.save(m, src)
        out = os.path.join(d, "m.bib")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([TOOL, src, "-o", out] + list(extra), capture_output=True, text=True, env=env)
        return p, d, src, out

    def test_an_unsupported_attribute_is_one_line_naming_node_op_attribute_and_why(self):
        c = np.ones(3, np.float32)
        m = model(
            [
                helper.make_node(
                    "BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], name="bn", training_mode=1
                )
            ],
            [helper.make_tensor_value_info("x", F, [2, 3, 4])],
            [helper.make_tensor_value_info("y", F, [2, 3, 4])],
            [init("s", c), init("b", c), init("m", c), init("v", c)],
        )
        p, _d, src, out = self.run_tool(m)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(
            p.stderr,
            "bib-onnx: %s: node 'bn' (BatchNormalization): attribute 'training_mode' = 1: BIB runs inference only\n"
            % src,
        )
        self.assertFalse(os.path.exists(out))

    def test_an_unknown_op_is_refused_by_name(self):
        m = model(
            [helper.make_node("Det", ["x"], ["y"], name="det")],
            [helper.make_tensor_value_info("x", F, [2, 3, 3])],
            [helper.make_tensor_value_info("y", F, [2])],
        )
        p, _d, src, _out = self.run_tool(m)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(
            p.stderr,
            "bib-onnx: %s: node 'det' (Det): the op Det is not supported by bib-onnx (spec/onnx.md lists "
            "the ops)\n" % src,
        )

    def test_an_attribute_the_importer_does_not_read_is_refused(self):
        node = helper.make_node("Relu", ["x"], ["y"], name="r")
        node.attribute.append(helper.make_attribute("alpha", 0.5))
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [2])],
                              [helper.make_tensor_value_info("y", F, [2])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        self.assertEqual(cm.exception.text, "node 'r' (Relu): attribute 'alpha' is not supported")

    def test_a_lowering_whose_shape_disagrees_with_onnx_is_refused_as_a_bug(self):
        m = model(
            [helper.make_node("Relu", ["x"], ["y"], name="r")],
            [helper.make_tensor_value_info("x", F, [2, 6])],
            [helper.make_tensor_value_info("y", F, [2, 6])],
        )
        real = onnx_import.Importer.op_Relu

        def wrong(imp, node):  # a lowering with a bug: the result is [3, 4]
            real(imp, node)
            imp.set(node, 0, imp.reshape(node, imp.vals["y"], [3, 4]))

        onnx_import.Importer.op_Relu = wrong
        try:
            with self.assertRaises(onnx_import.Refused) as cm:
                onnx_import.import_model(m)
        finally:
            onnx_import.Importer.op_Relu = real
        self.assertEqual(cm.exception.reason, "bug")
        self.assertEqual(
            cm.exception.text,
            "node 'r' (Relu): output 'y' has the shape [3,4], ONNX infers [2,6] (an importer bug, please report it)",
        )

    def test_emit_basm_writes_a_program_that_assembles_to_the_same_bytes(self):
        m = model(
            [helper.make_node("Relu", ["x"], ["y"])],
            [helper.make_tensor_value_info("x", F, ["N", 3])],
            [helper.make_tensor_value_info("y", F, ["N", 3])],
        )
        p, d, _src, out = self.run_tool(m, "--emit-basm")
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        with open(out, "rb") as f:
            data = f.read()
        with open(os.path.join(d, "m.basm")) as f:
            text = f.read()
        self.assertIn(".input x t0 f32[N, 3]", text)
        self.assertEqual(bib.assemble(text).bytes, data)

    def test_usage_errors_are_exit_64(self):
        p = subprocess.run([TOOL, "m.onnx"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 64)
        self.assertIn("-o", p.stderr)
        p = subprocess.run([TOOL, "m.onnx", "-o", "m.bib", "--bind", "nothing"], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (64, "bib-onnx: --bind nothing: give NAME=PATH.npy\n"))

    def test_bind_fixes_an_input_at_import_time(self):
        # Reshape's shape as a graph input: refused by name, imported bound.
        m = model(
            [helper.make_node("Reshape", ["x", "shape"], ["y"], name="rs")],
            [
                helper.make_tensor_value_info("x", F, [2, 6]),
                helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
            ],
            [helper.make_tensor_value_info("y", F, [3, 4])],
        )
        p, d, src, out = self.run_tool(m)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(
            p.stderr,
            "bib-onnx: %s: node 'rs' (Reshape): input 'shape' (the shape) must be a constant or an initializer: "
            "BIB takes the shape at import time\n" % src,
        )
        np.save(os.path.join(d, "shape.npy"), np.array([3, 4], np.int64))
        p, d, src, out = self.run_tool(m, "--bind", "shape=%s" % os.path.join(d, "shape.npy"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        x = rng((2, 6), 18)
        np.testing.assert_array_equal(bib.load(out).run({"x": x})["y"], x.reshape(3, 4))

    def test_an_empty_file_or_a_model_without_a_graph_is_not_a_model(self):
        d = tempfile.mkdtemp()
        src = os.path.join(d, "empty.onnx")
        open(src, "wb").close()
        p = subprocess.run([TOOL, src, "-o", os.path.join(d, "o.bib")], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr), (2, "bib-onnx: %s: not an ONNX model (the file is empty)\n" % src))
        self.assertEqual(os.listdir(d), ["empty.onnx"])
        m = onnx.ModelProto()
        m.ir_version = 8
        m.opset_import.append(helper.make_opsetid("", 17))
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m)
        self.assertEqual((cm.exception.reason, cm.exception.text), ("model", "not an ONNX model (it has no graph)"))

    def test_bind_of_a_name_that_is_not_a_graph_input_is_refused(self):
        m = model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [helper.make_tensor_value_info("x", F, [2])],
            [helper.make_tensor_value_info("y", F, [2])],
            [init("w", np.ones(2, np.float32))],
        )
        d = tempfile.mkdtemp()
        np.save(os.path.join(d, "v.npy"), np.ones(2, np.float32))
        p, _d, src, out = self.run_tool(m, "--bind", "typo=%s" % os.path.join(d, "v.npy"))
        self.assertEqual(
            (p.returncode, p.stderr),
            (64, "bib-onnx: %s: bind 'typo': not an input of the graph (its inputs: x)\n" % src),
        )
        self.assertFalse(os.path.exists(out))
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(m, bind={"w": np.zeros(2, np.float32)})
        self.assertEqual(cm.exception.reason, "usage")
        self.assertEqual(cm.exception.text, "bind 'w': an initializer, a constant already (its inputs: x)")

    def test_a_bound_value_must_be_what_the_input_declares(self):
        # Reshape's shape bound: the declared int64 [2] takes integers of
        # that shape; floats (3.7 is not truncated to 3), another rank or
        # length and strings are refused by name, reason usage, exit 64.
        m = model(
            [helper.make_node("Reshape", ["x", "s"], ["y"])],
            [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
            [helper.make_tensor_value_info("y", F, [3, 2])],
        )
        cases = [
            (np.array([3.7, 2.2]), "expected integers for an input of type INT64, given an array of float64"),
            (np.array([3.0, 2.0]), "expected integers for an input of type INT64, given an array of float64"),
            (np.array([[3, 2]]), "expected rank 1 (shape [2]), given rank 2 (shape [1, 2])"),
            (np.array([3, 2, 1]), "expected shape [2], given shape [3] (axis 0 is 3, not 2)"),
            (np.array(["3", "2"]), "expected integers for an input of type INT64, given an array of <U1"),
            (np.array([2 ** 63, 1], np.uint64),
             "expected values of type INT64 (-9223372036854775808 to 9223372036854775807), given 9223372036854775808"),
        ]
        for value, why in cases:
            with self.subTest(value=value):
                with self.assertRaises(onnx_import.Refused) as cm:
                    onnx_import.import_model(m, bind={"s": value})
                self.assertEqual((cm.exception.reason, cm.exception.text), ("usage", "bind 's': " + why))
        np.testing.assert_array_equal(
            onnx_import.import_model(m, bind={"s": np.array([3, 2], np.uint8)}).run({"x": rng((2, 3), 5)})["y"],
            rng((2, 3), 5).reshape(3, 2))
        # A float input takes integers; a bool input 0 and 1 only.
        mf = model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("w", F, ["n"])],
            [helper.make_tensor_value_info("y", F, [2])],
        )
        out = onnx_import.import_model(mf, bind={"w": np.array([1, 2], np.int64)}).run({"x": np.zeros(2, np.float32)})
        np.testing.assert_array_equal(out["y"], [1, 2])
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(mf, bind={"w": np.array([True, False])[:, None]})
        self.assertEqual((cm.exception.reason, cm.exception.text),
                         ("usage", "bind 'w': expected rank 1 (shape [n]), given rank 2 (shape [2, 1])"))
        mb = model(
            [helper.make_node("Where", ["c", "x", "x"], ["y"])],
            [helper.make_tensor_value_info("c", TensorProto.BOOL, [2]), helper.make_tensor_value_info("x", F, [2])],
            [helper.make_tensor_value_info("y", F, [2])],
        )
        with self.assertRaises(onnx_import.Refused) as cm:
            onnx_import.import_model(mb, bind={"c": np.array([0, 2])})
        self.assertEqual((cm.exception.reason, cm.exception.text),
                         ("usage", "bind 'c': expected 0 or 1 for an input of type BOOL, given other values"))
        # On the command line: strings in the .npy are exit 64, one line.
        d = tempfile.mkdtemp()
        np.save(os.path.join(d, "s.npy"), np.array(["3", "2"]))
        p, _d, src, out = self.run_tool(m, "--bind", "s=%s" % os.path.join(d, "s.npy"))
        self.assertEqual(
            (p.returncode, p.stderr),
            (64, "bib-onnx: %s: bind 's': expected integers for an input of type INT64, given an array of <U1\n" % src),
        )
        self.assertFalse(os.path.exists(out))

    def test_a_file_that_is_not_onnx_is_exit_2(self):
        d = tempfile.mkdtemp()
        src = os.path.join(d, "bad.onnx")
        with open(src, "wb") as f:
            f.write(b"\x00not a model")
        p = subprocess.run([TOOL, src, "-o", os.path.join(d, "o.bib")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertTrue(p.stderr.startswith("bib-onnx: %s: " % src), p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1)

    def test_an_importer_failure_is_one_line_naming_the_node_and_a_traceback_only_on_request(self):
        # An exception other than a refusal (a bug of the importer) while a
        # node is lowered: import_model refuses it as a bug naming the node,
        # the tool prints one line (exit 2), the traceback with BIB_ONNX_DEBUG.
        m = model(
            [helper.make_node("Relu", ["x"], ["r"], name="first"), helper.make_node("Neg", ["r"], ["y"], name="n1")],
            [helper.make_tensor_value_info("x", F, ["N", 3])],
            [helper.make_tensor_value_info("y", F, ["N", 3])],
        )
        d = tempfile.mkdtemp()
        src = os.path.join(d, "m.onnx")
        onnx.save(m, src)
        loader = importlib.machinery.SourceFileLoader("bib_onnx_tool", TOOL)
        spec = importlib.util.spec_from_loader("bib_onnx_tool", loader)
        tool = importlib.util.module_from_spec(spec)
        loader.exec_module(tool)

        def broken(self, node):
            return int(node.proto)  # a TypeError

        saved = onnx_import.Importer.op_Neg
        onnx_import.Importer.op_Neg = broken
        try:
            with self.assertRaises(onnx_import.Refused) as cm:
                onnx_import.import_model(m)
            self.assertEqual(cm.exception.reason, "bug")
            self.assertIn("node 'n1' (Neg): TypeError: ", str(cm.exception))
            self.assertIn("(an importer bug, please report it)", str(cm.exception))
            for debug, lines in (("", 1), ("1", None)):
                os.environ["BIB_ONNX_DEBUG"] = debug
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    rc = tool.main([src, "-o", os.path.join(d, "m.bib")])
                self.assertEqual(rc, 2)
                text = err.getvalue()
                self.assertTrue(text.startswith("bib-onnx: %s: node 'n1' (Neg): TypeError: " % src), text)
                if lines:
                    self.assertEqual(text.count("\n"), lines, text)
                else:
                    self.assertIn("Traceback (most recent call last)", text)
                    self.assertIn("in broken", text)
            self.assertFalse(os.path.exists(os.path.join(d, "m.bib")))
        finally:
            onnx_import.Importer.op_Neg = saved
            os.environ.pop("BIB_ONNX_DEBUG", None)


class Writing(unittest.TestCase):
    """-o is written as bib writes its files (spec/cli.md, "Writing")."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.src = os.path.join(self.d, "m.onnx")
        onnx.save(
            model(
                [helper.make_node("Relu", ["x"], ["y"])],
                [helper.make_tensor_value_info("x", F, [2])],
                [helper.make_tensor_value_info("y", F, [2])],
            ),
            self.src,
        )
        self.want = onnx_import.import_model(self.src).bytes

    def tool(self, out, *extra, umask=0o022, fsize=None):
        def child():
            os.umask(umask)
            if fsize is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        return subprocess.run(
            [TOOL, self.src, "-o", out] + list(extra), capture_output=True, text=True, env=env, preexec_fn=child
        )

    def path(self, name):
        return os.path.join(self.d, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def test_a_link_is_followed_and_stays_a_link(self):
        with open(self.path("real.bib"), "wb") as f:
            f.write(b"old")
        os.symlink("real.bib", self.path("out.bib"))
        p = self.tool(self.path("out.bib"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(os.path.islink(self.path("out.bib")))
        self.assertEqual(self.read("real.bib"), self.want)
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "out.bib", "real.bib"])

    def test_a_dangling_link_is_followed_and_stays_a_link(self):
        # The file a link names is made when it does not exist yet; a link
        # into a missing folder is refused before the import, leaving nothing.
        os.symlink("missing.bib", self.path("out.bib"))
        p = self.tool(self.path("out.bib"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(os.path.islink(self.path("out.bib")))
        self.assertEqual(self.read("missing.bib"), self.want)
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "missing.bib", "out.bib"])
        os.symlink("nowhere/x.bib", self.path("far.bib"))
        p = self.tool(self.path("far.bib"))
        self.assertEqual(
            (p.returncode, p.stderr),
            (1, "bib-onnx: cannot write '%s': folder '%s': No such file or directory\n"
             % (self.path("far.bib"), os.path.realpath(self.path("nowhere")))),
        )
        self.assertTrue(os.path.islink(self.path("far.bib")))
        self.assertEqual(sorted(os.listdir(self.d)), ["far.bib", "m.onnx", "missing.bib", "out.bib"])

    def test_a_module_and_a_program_that_are_one_file_are_refused(self):
        # --emit-basm with MODEL.basm a link to MODEL.bib (made or not yet)
        # or a hard link of it: one file named twice, exit 64, nothing
        # written.
        with open(self.path("a.bib"), "wb") as f:
            f.write(b"old")
        os.symlink("a.bib", self.path("a.basm"))
        os.symlink("b.bib", self.path("b.basm"))
        os.link(self.path("a.bib"), self.path("c.basm"))
        os.link(self.path("a.bib"), self.path("c.bib"))
        for name in ("a", "b", "c"):
            out, basm = self.path(name + ".bib"), self.path(name + ".basm")
            p = self.tool(out, "--emit-basm")
            self.assertEqual(
                (p.returncode, p.stderr),
                (64, "bib-onnx: '%s' and '%s' are one file: give --emit-basm another output\n" % (out, basm)),
            )
        self.assertEqual(self.read("a.bib"), b"old")
        self.assertEqual(sorted(os.listdir(self.d)), ["a.basm", "a.bib", "b.basm", "c.basm", "c.bib", "m.onnx"])

    def test_a_fifo_is_written_directly(self):
        os.mkfifo(self.path("fifo"))
        r = os.open(self.path("fifo"), os.O_RDONLY | os.O_NONBLOCK)
        try:
            p = self.tool(self.path("fifo"))
            got = os.read(r, 1 << 20)
        finally:
            os.close(r)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path("fifo")).st_mode))
        self.assertEqual(got, self.want)
        self.assertEqual(sorted(os.listdir(self.d)), ["fifo", "m.onnx"])

    @unittest.skipUnless(os.geteuid() == 0, "mknod of a device needs root")
    def test_a_device_is_written_directly(self):
        os.mknod(self.path("null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        p = self.tool(self.path("null"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(stat.S_ISCHR(os.lstat(self.path("null")).st_mode))
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "null"])

    def test_a_file_named_like_a_temporary_one_is_left_alone(self):
        with open(self.path("out.bib.tmp"), "wb") as f:
            f.write(b"mine")
        p = self.tool(self.path("out.bib"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(self.read("out.bib.tmp"), b"mine")
        self.assertEqual(self.read("out.bib"), self.want)
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "out.bib", "out.bib.tmp"])

    def test_the_model_itself_is_refused_as_output(self):
        before = self.read("m.onnx")
        os.symlink("m.onnx", self.path("link.bib"))
        for out in (self.src, self.path("link.bib")):
            p = self.tool(out)
            self.assertEqual(
                (p.returncode, p.stderr), (64, "bib-onnx: '%s' is the model itself: give another output\n" % out)
            )
        self.assertEqual(self.read("m.onnx"), before)
        self.assertEqual(sorted(os.listdir(self.d)), ["link.bib", "m.onnx"])

    def test_a_folder_is_refused_by_its_name_leaving_nothing(self):
        os.mkdir(self.path("out"))
        p = self.tool(self.path("out"))
        self.assertEqual(
            (p.returncode, p.stderr), (1, "bib-onnx: cannot write '%s': Is a directory\n" % self.path("out"))
        )
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "out"])
        self.assertEqual(os.listdir(self.path("out")), [])

    def test_a_missing_folder_is_refused_before_the_import(self):
        with open(self.src, "wb") as f:
            f.write(b"\x00not a model")  # the import would be exit 2
        out = self.path("missing/m.bib")
        p = self.tool(out)
        self.assertEqual(
            (p.returncode, p.stderr),
            (1, "bib-onnx: cannot write '%s': folder '%s': No such file or directory\n" % (out, self.path("missing"))),
        )
        self.assertEqual(os.listdir(self.d), ["m.onnx"])

    def test_a_new_file_has_the_mode_of_a_plain_create_and_a_replaced_one_keeps_its_mode(self):
        p = self.tool(self.path("new.bib"), "--emit-basm", umask=0o027)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(stat.S_IMODE(os.stat(self.path("new.bib")).st_mode), 0o640)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("new.basm")).st_mode), 0o640)
        os.chmod(self.path("new.bib"), 0o604)
        p = self.tool(self.path("new.bib"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(stat.S_IMODE(os.stat(self.path("new.bib")).st_mode), 0o604)
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "new.basm", "new.bib"])

    def test_a_failed_write_names_the_output_removes_its_temporary_and_keeps_the_old_bytes(self):
        with open(self.path("out.bib"), "wb") as f:
            f.write(b"old")
        p = self.tool(self.path("out.bib"), fsize=len(self.want) // 2)
        self.assertEqual(
            (p.returncode, p.stderr), (1, "bib-onnx: cannot write '%s': File too large\n" % self.path("out.bib"))
        )
        self.assertEqual(self.read("out.bib"), b"old")
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "out.bib"])

    def test_an_interrupt_while_writing_leaves_nothing_behind(self):
        loader = importlib.machinery.SourceFileLoader("bib_onnx_tool", TOOL)
        spec = importlib.util.spec_from_loader(loader.name, loader)
        tool = importlib.util.module_from_spec(spec)
        loader.exec_module(tool)

        def interrupted(_fd):
            raise KeyboardInterrupt

        real = os.fsync
        os.fsync = interrupted
        try:
            with self.assertRaises(KeyboardInterrupt):
                tool.main([self.src, "-o", self.path("out.bib"), "--emit-basm"])
        finally:
            os.fsync = real
        self.assertEqual(os.listdir(self.d), ["m.onnx"])

    def load_tool(self):
        loader = importlib.machinery.SourceFileLoader("bib_onnx_tool", TOOL)
        spec = importlib.util.spec_from_loader(loader.name, loader)
        tool = importlib.util.module_from_spec(spec)
        loader.exec_module(tool)
        return tool

    def test_a_signal_right_after_the_temporary_is_made_leaves_nothing_behind(self):
        # SIGTERM between mkstemp and the noting of the temporary's name:
        # held until the name is noted, then it ends the write, the
        # temporary removed.
        tool = self.load_tool()
        real = tempfile.mkstemp

        def signalled(*args, **kw):
            made = real(*args, **kw)
            os.kill(os.getpid(), signal.SIGTERM)
            return made

        old = signal.signal(signal.SIGTERM, tool._ended)
        tempfile.mkstemp = signalled
        try:
            with self.assertRaises(tool.Ended):
                tool.main([self.src, "-o", self.path("out.bib")])
        finally:
            tempfile.mkstemp = real
            signal.signal(signal.SIGTERM, old)
        self.assertEqual(os.listdir(self.d), ["m.onnx"])

    def test_a_signal_between_the_renames_replaces_both_files(self):
        # SIGTERM after MODEL.bib is renamed into place and before
        # MODEL.basm is: held until both are, so the two stay one pair.
        for name in ("out.bib", "out.basm"):
            with open(self.path(name), "wb") as f:
                f.write(b"old")
        tool = self.load_tool()
        real = os.replace
        calls = []

        def signalled(a, b):
            real(a, b)
            calls.append(b)
            if len(calls) == 1:
                os.kill(os.getpid(), signal.SIGTERM)

        old = signal.signal(signal.SIGTERM, tool._ended)
        os.replace = signalled
        try:
            with self.assertRaises(tool.Ended):
                tool.main([self.src, "-o", self.path("out.bib"), "--emit-basm"])
        finally:
            os.replace = real
            signal.signal(signal.SIGTERM, old)
        self.assertEqual(self.read("out.bib"), self.want)
        self.assertEqual(self.read("out.basm"), onnx_import.import_model(self.src).disassemble().encode())
        self.assertEqual(sorted(os.listdir(self.d)), ["m.onnx", "out.basm", "out.bib"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
