"""The ONNX importer's shared ground: its errors (Refused), dimensions (ints,
or sums of products of symbols), values (Val), the probes of what this library's
opcodes accept, name sanitizing and the exact helpers of constant folding.
onnx_import.py holds the driver; onnx_math.py, onnx_shapes.py and onnx_nn.py
the lowering of each family of ops."""

import re

import numpy as np
import onnx
from onnx import TensorProto

from . import Builder, Error, _capi

MAX_RANK = _capi.MAX_RANK

MIN_OPSET = 1
MAX_OPSET = 17


class Refused(Exception):
    """A model or node the importer cannot lower. reason is a short class of
    the cause (for the node-test table): 'op', 'attribute', 'dtype', 'shape',
    'opcode' or 'model'; 'usage' when the caller asked for something the
    model does not have (a bound name that is not a graph input); 'bug' when
    the module built does not verify (the node-test runner counts that as a
    failure)."""

    def __init__(self, text, reason="op", node=None):
        super().__init__(text)
        self.text = text
        self.reason = reason
        self.node = node


class NeedsConstant(Refused):
    """An input that must be known at import time (a shape, axes, pads) is a
    graph input; `name` is that input. import_model(bind=...) can give it."""

    def __init__(self, text, name, node=None):
        super().__init__(text, "shape", node)
        self.name = name


# ---- dimensions: ints, or sums of products of symbols ----------------------------------


class Sym:
    """A dynamic dimension, or an expression of them: a sum of terms, each an
    integer coefficient times a product of named symbols (P + S, 2*B*S, B*S
    + B). At least one term names a symbol: arithmetic that cancels every
    symbol gives an int instead. Immutable; compare with ==."""

    __slots__ = ("terms",)

    def __init__(self, coef, names):
        """coef * the product of names (names not empty, coef not 0)."""
        self.terms = ((tuple(sorted(names)), coef),)

    @classmethod
    def of(cls, terms):
        """An int or a Sym from {names: coef} (names a sorted tuple, () for
        the constant term)."""
        terms = {n: c for n, c in terms.items() if c}
        if all(n == () for n in terms):
            return terms.get((), 0)
        s = cls.__new__(cls)
        s.terms = tuple(sorted(terms.items()))
        return s

    @property
    def symbol(self):
        """The name when this is one symbol alone, else None."""
        (names, coef), = self.terms if len(self.terms) == 1 else ((None, 0),)
        return names[0] if coef == 1 and len(names) == 1 else None

    def __eq__(self, other):
        return isinstance(other, Sym) and self.terms == other.terms

    def __hash__(self):
        return hash(self.terms)

    def __repr__(self):
        out = []
        for names, coef in sorted(self.terms, key=lambda t: (not t[0], t[0])):  # the constant last
            head = [] if names and coef in (1, -1) else [str(coef)]
            out.append(("-" if names and coef == -1 else "") + "*".join(head + list(names)))
        return " + ".join(out).replace("+ -", "- ")


def _terms(x):
    return dict(x.terms) if isinstance(x, Sym) else ({(): int(x)} if x else {})


def dim_mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    out = {}
    for na, ca in _terms(a).items():
        for nb, cb in _terms(b).items():
            n = tuple(sorted(na + nb))
            out[n] = out.get(n, 0) + ca * cb
    return Sym.of(out)


def dim_div(a, b):
    """a / b when it is exact (None when it is not known to be)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b != 0 and a % b == 0 else None
    if a == b:
        return 1
    tb = _terms(b)
    if len(tb) != 1:
        return None
    (nb, cb), = tb.items()
    out = {}
    for na, ca in _terms(a).items():
        names = list(na)
        for n in nb:
            if n not in names:
                return None
            names.remove(n)
        if cb == 0 or ca % cb != 0:
            return None
        out[tuple(names)] = ca // cb
    return Sym.of(out)


def dim_sum(a, b, sign=1):
    """a + b (a - b with sign -1), exactly."""
    if isinstance(a, int) and isinstance(b, int):
        return a + sign * b
    out = _terms(a)
    for n, c in _terms(b).items():
        out[n] = out.get(n, 0) + sign * c
    return Sym.of(out)


def dim_sign(d):
    """1, -1 or 0 when d's sign is known whatever its symbols are (each
    symbol is a size, at least 0 and taken as at least 1: every coefficient
    of one sign), None when it is not (S - 1)."""
    if not isinstance(d, Sym):
        d = int(d)
        return (d > 0) - (d < 0)
    signs = {c > 0 for _n, c in d.terms}
    return None if len(signs) > 1 else (1 if signs.pop() else -1)


def dim_sub(a, b):
    return dim_sum(a, b, -1)


def dims_prod(dims):
    p = 1
    for d in dims:
        p = dim_mul(p, d)
    return p


def is_static(shape):
    return all(isinstance(d, int) for d in shape)


def shape_text(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def broadcast_shapes(*shapes):
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        d = 1
        for s in shapes:
            e = s[k - rank + len(s)] if k - rank + len(s) >= 0 else 1
            if e == 1:
                continue
            if d == 1:
                d = e
            elif d != e:
                return None
        out.append(d)
    return out


# ---- values -----------------------------------------------------------------------------

_ONNX_INT = {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT8,
             TensorProto.UINT16, TensorProto.UINT32, TensorProto.BOOL}
_DTYPE_NAME = {v: k for k, v in TensorProto.DataType.items()}


class Val:
    """One ONNX value: a constant (array is a numpy array, object dtype when
    it holds symbolic dims), or a tensor at run time (reg, dtype 'f32' or
    'i32', shape). onnx_type is the ONNX element type it stands for."""

    def __init__(self, shape, dtype, onnx_type, array=None, reg=None):
        self.shape = list(shape)
        self.dtype = dtype
        self.onnx_type = onnx_type
        self.array = array
        self.reg = reg
        # A LINEAR not emitted yet, (a, weight, bias, act): its readers
        # are column slices, each emitted as a LINEAR of its own columns.
        self.lazy = None
        # Range(0, S, 1) of a dynamic dim S, not emitted: the positions
        # 0..S-1, which a Gather into a table takes as its first S rows.
        self.iota = None
        # A dynamic dim cast to float at run time (Cast of Shape(x)[k]):
        # that dim, for the messages of what needs it at import time.
        self.dim = None

    @property
    def const(self):
        return self.array is not None


_PROBES = {}


def _probe(name, dtype, shapes, mnemonic, inputs, want):
    """Whether this libbib runs mnemonic on inputs (by shape) to want: asked
    once per name, on the cpu executor, for what the opcode table cannot say
    (an operand form an existing opcode gained)."""
    if name not in _PROBES:
        try:
            b = Builder()
            for k, shape in enumerate(shapes):
                b.tensor_input("x%d" % k, k, dtype, shape)
            b.tensor_output("z", len(shapes), dtype, list(np.shape(want)))
            main = b.declare("main")
            b.begin(main, 0, 1)
            b.emit(mnemonic, len(shapes), *range(len(shapes))).emit("LDI", 0, 0).emit("HALT", 0).end()
            np_type = np.float32 if dtype == "f32" else np.int32
            feed = {"x%d" % k: np.array(v, np_type) for k, v in enumerate(inputs)}
            r = b.finish().run(feed, backend="cpu")
            _PROBES[name] = r["z"].tolist() == want
        except Error:
            _PROBES[name] = False
    return _PROBES[name]


def library_broadcasts():
    """Whether BINARY opcodes take general numpy broadcasting (ONNX-PLAN.md)."""
    return _probe("broadcast", "f32", [[2, 1], [1, 3]], "TADD", [[[1], [2]], [[10, 20, 30]]],
                  [[11, 21, 31], [12, 22, 32]])


def library_i32_arithmetic():
    """Whether TADD, TSUB, TMUL take i32 operands (wrapping)."""
    return _probe("i32", "i32", [[2], [2]], "TMUL", [[3, -4], [5, 6]], [15, -24])


def library_takes_zero_dims():
    """Whether a tensor declaration may have a zero-size dimension."""
    if "zero" not in _PROBES:
        try:
            b = Builder()
            b.tensor_input("x", 0, "f32", [0])
            main = b.declare("main")
            b.begin(main, 0, 1)
            b.emit("LDI", 0, 0).emit("HALT", 0).end()
            b.finish().vm(backend="cpu")
            _PROBES["zero"] = True
        except Error:
            _PROBES["zero"] = False
    return _PROBES["zero"]


def _bib_dtype(onnx_type):
    if onnx_type == TensorProto.FLOAT:
        return "f32"
    if onnx_type in _ONNX_INT:
        return "i32"
    return None


def _np_for(onnx_type):
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def sanitize(name, taken, fallback):
    """A BIB name for an ONNX name: kept when it is a plain identifier
    ([A-Za-z_][A-Za-z0-9_.]*, at most 255 bytes); otherwise each character
    outside [A-Za-z0-9_.] becomes '_', a name that starts with a digit or a
    dot gets a leading '_', an empty one becomes `fallback`; a name already
    taken gets _2, _3, ... appended."""
    s = name if _IDENT.match(name or "") else re.sub(r"[^A-Za-z0-9_.]", "_", name or "")
    if s and not (s[0].isalpha() or s[0] == "_"):
        s = "_" + s
    s = (s or fallback)[:240]
    base, k = s, 2
    while s in taken:
        s = "%s_%d" % (base, k)
        k += 1
    taken.add(s)
    return s


# ---- nodes ---------------------------------------------------------------------------------


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class _Node:
    """A node with its attributes read once, for the lowering functions."""

    def __init__(self, node, index):
        self.proto = node
        self.index = index
        self.op = node.op_type
        self.name = node.name or "%s_%d" % (node.op_type, index)
        self.inputs = list(node.input)
        self.outputs = list(node.output)
        self.attrs = _attrs(node)
        self.used_attrs = set()

    def attr(self, name, default=None):
        self.used_attrs.add(name)
        v = self.attrs.get(name, default)
        if isinstance(v, bytes):
            v = v.decode()
        return v

    def where(self):
        return "node '%s' (%s)" % (self.name, self.op)


# ---- folding helpers (exact, with the symbolic dims as objects) ----------------------------


def _fold2(fn, a):
    x, y = a
    if x.dtype == object or y.dtype == object:
        try:
            if fn is np.multiply:
                return np.array(np.frompyfunc(dim_mul, 2, 1)(x, y), object)
            if fn is np.add:
                return np.array(np.frompyfunc(dim_sum, 2, 1)(x, y), object)
            if fn is np.subtract:
                return np.array(np.frompyfunc(dim_sub, 2, 1)(x, y), object)
        except ValueError:
            return None
        return None
    r = fn(x, y)
    return r.astype(np.result_type(x.dtype, y.dtype)) if r.dtype != np.result_type(x.dtype, y.dtype) else r


def _obj_div(x, y):
    def d(p, q):
        r = dim_div(p, q)
        if r is None:
            raise ValueError("inexact")
        return r

    try:
        return np.frompyfunc(d, 2, 1)(x, y)
    except ValueError:
        return None


def _onnx_type_of(arr):
    if arr.dtype == object:
        return TensorProto.INT64
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[arr.dtype]
