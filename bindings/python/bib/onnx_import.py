"""ONNX to BIB: the importer behind tools/bib-onnx (spec/onnx.md).

    from bib import onnx_import
    module = onnx_import.import_model("model.onnx")      # a bib.Module
    module.save("model.bib")

The model is read with onnx.load and checked with onnx.shape_inference; the
importer keeps its own shapes (ints, or products of symbols for the dynamic
dims) and lowers node by node, in graph order, through the binding's Builder:
the graph's inputs and outputs become the module's .input and .output, its
initializers constant tensors. Everything that is known at import time
(Constant, Shape, shape arithmetic, Cast of constants, ...) is folded with
numpy; fused patterns (layer norm, GELU, MatMul+Add) become one instruction.

A node that cannot be lowered exactly raises Refused, whose text names the
node, its op, the attribute or input at fault and why: the importer never
writes a program that computes something else than the model.
"""

import re
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper, shape_inference

from . import Builder, Error, UsageError, _capi, opcode

MAX_RANK = _capi.MAX_RANK

MIN_OPSET = 1
MAX_OPSET = 17


class Refused(Exception):
    """A model or node the importer cannot lower. reason is a short class of
    the cause (for the node-test table): 'op', 'attribute', 'dtype', 'shape',
    'opcode' or 'model'; 'bug' when the module built does not verify (the
    node-test runner counts that as a failure)."""

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


# ---- dimensions: ints, or a coefficient times a product of symbols ------------------


class Sym:
    """coef * product of named symbols (a dynamic dimension, or a product
    that involves one). Immutable; compare with ==."""

    __slots__ = ("coef", "names")

    def __init__(self, coef, names):
        self.coef = coef
        self.names = tuple(sorted(names))

    def __eq__(self, other):
        return isinstance(other, Sym) and self.coef == other.coef and self.names == other.names

    def __hash__(self):
        return hash((self.coef, self.names))

    def __repr__(self):
        parts = ([str(self.coef)] if self.coef != 1 else []) + list(self.names)
        return "*".join(parts)


def dim_mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    sa = a if isinstance(a, Sym) else Sym(a, ())
    sb = b if isinstance(b, Sym) else Sym(b, ())
    if sa.coef * sb.coef == 0:
        return 0
    return Sym(sa.coef * sb.coef, sa.names + sb.names)


def dim_div(a, b):
    """a / b when it is exact (None when it is not known to be)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b != 0 and a % b == 0 else None
    sa = a if isinstance(a, Sym) else Sym(a, ())
    sb = b if isinstance(b, Sym) else Sym(b, ())
    names = list(sa.names)
    for n in sb.names:
        if n not in names:
            return None
        names.remove(n)
    if sb.coef == 0 or sa.coef % sb.coef != 0:
        return None
    coef = sa.coef // sb.coef
    return coef if not names else Sym(coef, names)


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


# ---- the importer ---------------------------------------------------------------------------


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


class Importer:
    """One import: the values by ONNX name, the code emitted so far (as
    (mnemonic, a, b, c, d) with scratch and symbol registers still named),
    the declarations; finish() builds the module."""

    def __init__(self, model, bind=None):
        self.model = model
        self.graph = model.graph
        self.bind = dict(bind or {})
        self.opset = 0
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = o.version
        if self.opset == 0:
            domains = sorted({n.domain for n in self.graph.node if n.domain not in ("", "ai.onnx")})
            raise Refused("the model imports no opset of ONNX's default domain (its nodes are in %s)"
                          % (", ".join(domains) or "no domain"), "model")
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise Refused(
                "opset %d of the default domain: bib-onnx reads opsets %d to %d" % (self.opset, MIN_OPSET, MAX_OPSET),
                "model",
            )
        self.vals = {}
        self.code = []  # (mnemonic, a, b, c, d)
        self.treg = 0
        self.sym_source = {}  # symbol -> (tensor reg, axis)
        self.scratch_max = 0
        self.consts = []  # (name, reg, array)
        self.inputs = []  # (name, reg, dtype, shape)
        self.input_onnx_names = []
        self.outputs = []
        self.names = set()
        self.input_regs = set()
        self.const_regs = set()
        self.keep = set()  # registers never freed (inputs, outputs, constants)
        self._have = {}
        self.fused = {}  # index of the node that a fused group ends at -> callable
        self.skip = set()  # indices of nodes inside a fused group
        self.named = set()  # registers of values emitted late (a lazy LINEAR), freed by name
        self.extra_use = {}  # value -> index of a later node that reads it (a lazy LINEAR's input)

    # -- opcodes this library has
    def have(self, mnemonic):
        if mnemonic not in self._have:
            # A tensor-family opcode of that name (the scalar NEG is not TNEG).
            try:
                self._have[mnemonic] = opcode(mnemonic) >> 16 == 0x0003
            except UsageError:
                self._have[mnemonic] = False
        return self._have[mnemonic]

    def need(self, node, mnemonic, what=None):
        if not self.have(mnemonic):
            raise Refused(
                "%s: %sneeds the opcode %s, which this libbib lacks"
                % (node.where(), (what + " ") if what else "", mnemonic),
                "opcode",
                node.name,
            )

    def need_i32(self, node, mnemonic):
        if not library_i32_arithmetic():
            raise Refused("%s: integer arithmetic: this libbib's %s takes f32 only" % (node.where(), mnemonic),
                          "opcode", node.name)

    # -- registers and code
    def new_treg(self):
        r = self.treg
        self.treg += 1
        return r

    def emit(self, mnemonic, a=0, b=0, c=0, d=0):
        self.code.append((mnemonic, a, b, c, d))

    def scalar(self, k):
        """k scratch scalar registers, after the symbols' (live until the
        next instruction that takes them)."""
        self.scratch_max = max(self.scratch_max, k)
        return ("scratch", 0)

    def load_dims(self, node, dims):
        """Loads each dim (int or Sym) into consecutive scratch registers;
        returns the first register (as a marker resolved at finish)."""
        self.scalar(len(dims))
        for k, d in enumerate(dims):
            self.load_int(("scratch", k), d)
        return ("scratch", 0)

    def load_int(self, reg, d):
        if isinstance(d, int):
            if -(1 << 31) <= d < (1 << 31):
                self.emit("LDI", reg, d)
            else:
                self.emit("LDI64", reg, d & 0xFFFFFFFF, (d >> 32) & 0xFFFFFFFF)
            return
        self.load_int(reg, d.coef)
        for n in d.names:
            self.emit("MUL", reg, reg, ("sym", n))

    def load_f64(self, reg, value):
        bits = np.array([value], np.float64).view(np.uint64)[0]
        self.emit("LDI64", reg, int(bits) & 0xFFFFFFFF, int(bits) >> 32)

    # -- values
    def const_val(self, array, onnx_type=None):
        array = np.asarray(array)
        if array.dtype == object:
            # Shape data: Python ints and Syms; all ints is plain int64 again.
            flat = [int(e) if isinstance(e, (int, np.integer)) else e for e in array.reshape(-1).tolist()]
            if all(isinstance(e, int) for e in flat):
                array = np.array(flat, np.int64).reshape(array.shape)
            else:
                array = np.array(flat + [None], object)[:-1].reshape(array.shape)
        if onnx_type is None:
            onnx_type = _onnx_type_of(array)
        return Val(array.shape, _bib_dtype(onnx_type), onnx_type, array=array)

    def rt(self, shape, dtype, onnx_type=None, reg=None):
        if onnx_type is None:
            onnx_type = TensorProto.FLOAT if dtype == "f32" else TensorProto.INT64
        return Val(shape, dtype, onnx_type, reg=self.new_treg() if reg is None else reg)

    def reg_of(self, node, v, what="input"):
        """The tensor register of v; a constant becomes a constant tensor,
        a lazy LINEAR is emitted whole."""
        if v.reg is not None:
            return v.reg
        if v.lazy is not None:
            a, w, b, act = v.lazy
            v.reg = self.matmul(node, a, w, b, act).reg
            v.lazy = None
            self.named.add(v.reg)  # the value's own register, not the node's temporary
            return v.reg
        arr = v.array
        if arr.dtype == object:
            raise Refused(
                "%s: %s depends on a dynamic dimension and is needed as a tensor at run time" % (node.where(), what),
                "shape",
                node.name,
            )
        if arr.dtype == np.float32:
            data = arr
        elif arr.dtype.kind in "iub":
            if arr.size and (arr.min() < -(1 << 31) or arr.max() >= (1 << 31)):
                raise Refused("%s: %s has values outside int32" % (node.where(), what), "dtype", node.name)
            data = arr.astype(np.int32)
        else:
            raise Refused(
                "%s: %s is %s; BIB tensors are f32 or i32" % (node.where(), what, arr.dtype.name), "dtype", node.name
            )
        if data.ndim > MAX_RANK:
            raise Refused("%s: %s has rank %d (BIB tensors have at most %d)" % (node.where(), what, data.ndim,
                          MAX_RANK), "shape", node.name)
        reg = self.new_treg()
        self.consts.append(("k%d" % len(self.consts), reg, np.require(data, requirements="C")))
        self.const_regs.add(reg)
        self.keep.add(reg)
        v.reg = reg
        v.dtype = "f32" if data.dtype == np.float32 else "i32"
        return reg

    def get(self, node, k, optional=False):
        if k >= len(node.inputs) or node.inputs[k] == "":
            if optional:
                return None
            raise Refused("%s: input %d is missing" % (node.where(), k), "model", node.name)
        return self.vals[node.inputs[k]]

    def const_input(self, node, k, what, optional=False):
        """The numpy value of input k, which must be known at import time."""
        v = self.get(node, k, optional)
        if v is None:
            return None
        if not v.const:
            raise NeedsConstant(
                "%s: input '%s' (%s) must be a constant or an initializer: BIB takes %s at import time"
                % (node.where(), node.inputs[k], what, what),
                node.inputs[k],
                node.name,
            )
        return v.array

    def set(self, node, k, val):
        if k < len(node.outputs) and node.outputs[k]:
            self.vals[node.outputs[k]] = val

    # -- errors
    def refuse(self, node, text, reason="attribute"):
        raise Refused("%s: %s" % (node.where(), text), reason, node.name)

    def f32_only(self, node, *vals):
        for v in vals:
            if v is not None and v.onnx_type != TensorProto.FLOAT:
                self.refuse(
                    node,
                    "input of type %s: this op is lowered for float32 only" % _DTYPE_NAME.get(v.onnx_type, "?"),
                    "dtype",
                )

    # -- the graph
    def declare_inputs(self):
        inits = {i.name for i in self.graph.initializer}
        for init in self.graph.initializer:
            arr = numpy_helper.to_array(init)
            self.vals[init.name] = self.const_val(arr, init.data_type)
        for vi in self.graph.input:
            if vi.name in inits:
                continue
            t = vi.type
            if not t.HasField("tensor_type"):
                raise Refused("graph input '%s': not a tensor (BIB takes tensors)" % vi.name, "dtype")
            et = t.tensor_type.elem_type
            if vi.name in self.bind:
                arr = np.asarray(self.bind[vi.name]).astype(_np_for(et))
                self.vals[vi.name] = self.const_val(arr, et)
                continue
            dtype = _bib_dtype(et)
            if dtype is None:
                raise Refused(
                    "graph input '%s': element type %s (BIB tensors are f32 or i32; integer and bool inputs become i32)"
                    % (vi.name, _DTYPE_NAME.get(et, et)),
                    "dtype",
                )
            reg = self.new_treg()
            shape = []
            if not t.tensor_type.HasField("shape"):
                raise Refused("graph input '%s': its shape is not given (BIB needs the rank)" % vi.name, "shape")
            for axis, d in enumerate(t.tensor_type.shape.dim):
                if d.HasField("dim_value") and d.dim_value >= 0:
                    shape.append(int(d.dim_value))
                else:
                    sym = d.dim_param if d.HasField("dim_param") and d.dim_param else "%s_%d" % (vi.name, axis)
                    if sym not in self.sym_source:
                        self.sym_source[sym] = (reg, axis)
                    shape.append(Sym(1, (sym,)))
            if len(shape) > MAX_RANK:
                raise Refused("graph input '%s': rank %d (BIB tensors have at most %d)" % (vi.name, len(shape),
                              MAX_RANK), "shape")
            if 0 in shape and not library_takes_zero_dims():
                if dtype == "i32":
                    # An empty list of axes or indices: useful only bound.
                    raise NeedsConstant("graph input '%s': shape %s has a zero-size dimension, which this libbib "
                                        "refuses; bind it" % (vi.name, shape_text(shape)), vi.name)
                raise Refused("graph input '%s': shape %s has a zero-size dimension, which this libbib refuses"
                              % (vi.name, shape_text(shape)), "shape")
            name = sanitize(vi.name, self.names, "input%d" % len(self.inputs))
            self.inputs.append((name, reg, dtype, shape))
            self.input_onnx_names.append(vi.name)
            self.input_regs.add(reg)
            self.keep.add(reg)
            self.vals[vi.name] = Val(shape, dtype, et, reg=reg)

    def inferred_shapes(self):
        """The shapes ONNX's shape inference gives, by value name (an int
        per known dim, None for the others)."""
        shapes = {}
        for vi in list(self.graph.value_info) + list(self.graph.output):
            t = vi.type
            if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
                shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]
        return shapes

    def check_shapes(self, node):
        """Each result's shape against ONNX's inference: a difference is an
        importer bug, refused rather than written."""
        for name in node.outputs:
            v = self.vals.get(name)
            want = self.inferred.get(name)
            if v is None or want is None:
                continue
            if len(want) != len(v.shape) or any(w is not None and isinstance(d, int) and w != d
                                                for w, d in zip(want, v.shape)):
                raise Refused(
                    "%s: output '%s' has the shape %s, ONNX infers %s (an importer bug, please report it)"
                    % (node.where(), name, shape_text(v.shape), shape_text(["?" if w is None else w for w in want])),
                    "bug",
                    node.name,
                )

    def run(self):
        self.declare_inputs()
        self.inferred = self.inferred_shapes()
        nodes = [_Node(n, i) for i, n in enumerate(self.graph.node)]
        self.nodes = nodes
        self.consumers = {}
        for n in nodes:
            for name in n.inputs:
                if name:
                    self.consumers.setdefault(name, []).append(n)
        self.graph_outputs = {o.name for o in self.graph.output}
        from . import onnx_patterns

        onnx_patterns.find(self, nodes)
        # Each tensor is freed after its last reader (a fused group reads its
        # inputs where it ends).
        frees = {}
        last_use = {}
        for n in nodes:
            for name in n.inputs:
                if name:
                    last_use[name] = self.group_end.get(n.index, n.index)
        for name, i in self.extra_use.items():
            last_use[name] = max(last_use.get(name, -1), i)
        for name, i in last_use.items():
            frees.setdefault(i, []).append(name)
        for n in nodes:
            if n.index in self.skip:
                continue
            first = self.treg
            if n.index in self.fused:
                self.fused[n.index]()
            else:
                self.lower(n)
            self.check_shapes(n)
            # The node's temporaries (not its outputs) are freed at once.
            results = {self.vals[o].reg for o in n.outputs if o and o in self.vals}
            for reg in range(first, self.treg):
                if reg not in results and reg not in self.keep and reg not in self.named:
                    self.emit("FREE", reg)
                    self.keep.add(reg)
            for name in frees.get(n.index, []):
                v = self.vals.get(name)
                if name in self.graph_outputs or v is None or v.const or v.reg is None or v.reg in self.keep:
                    continue
                # Another name for the same register (Identity, a fused
                # group's inner value) that is read later or is an output
                # keeps it: the last of them frees it.
                if any(
                    o != name and other.reg == v.reg and (o in self.graph_outputs or last_use.get(o, -1) > n.index)
                    for o, other in self.vals.items()
                ):
                    continue
                self.emit("FREE", v.reg)
                self.keep.add(v.reg)  # freed once
        self.declare_outputs()

    def lower(self, node):
        if node.proto.domain not in ("", "ai.onnx"):
            self.refuse(node, "domain '%s' is not ONNX's default domain" % node.proto.domain, "op")
        fn = getattr(self, "op_" + node.op, None)
        if fn is None:
            self.refuse(node, "the op %s is not supported by bib-onnx (spec/onnx.md lists the ops)" % node.op, "op")
        # Constants in, constants out: fold it with numpy when the op can.
        ins = [self.vals.get(i) if i else None for i in node.inputs]
        for i, name in zip(ins, node.inputs):
            if name and i is None:
                self.refuse(node, "input '%s' is not defined before the node" % name, "model")
        folder = getattr(self, "fold_" + node.op, None)
        if folder is not None and all(v is None or v.const for v in ins) and node.op != "Constant":
            out = folder(node, [None if v is None else v.array for v in ins])
            if out is not None:
                for k, arr in enumerate(out):
                    if isinstance(arr, Val):
                        self.set(node, k, arr)
                    else:
                        self.set(node, k, self.const_val(arr))
                return
        fn(node)
        unknown = sorted(set(node.attrs) - node.used_attrs)
        if unknown:
            self.refuse(node, "attribute '%s' is not supported" % unknown[0])

    def declare_outputs(self):
        used = set()
        for o in self.graph.output:
            v = self.vals.get(o.name)
            if v is None:
                raise Refused("graph output '%s' is not computed by any node" % o.name, "model")
            if v.dtype is None:
                raise Refused("graph output '%s': type %s" % (o.name, _DTYPE_NAME.get(v.onnx_type)), "dtype")
            fake = _Node(onnx.helper.make_node("Identity", [o.name], [o.name], name="output " + o.name), -1)
            src = self.reg_of(fake, v, "the output")
            if src in self.input_regs or src in self.const_regs or src in used:
                reg = self.new_treg()
                self.emit("COPY", reg, src)
            else:
                reg = src
            used.add(reg)
            self.keep.add(reg)
            shape = [d if isinstance(d, int) else (d if d.coef == 1 and len(d.names) == 1 else None) for d in v.shape]
            name = sanitize(o.name, self.names, "output%d" % len(self.outputs))
            self.outputs.append((name, reg, v.dtype, shape))

    def finish(self, name=None):
        b = Builder()
        syms = {}

        def dims(shape):
            out = []
            for d in shape:
                if isinstance(d, int):
                    out.append(d)
                elif d is None:
                    out.append(Builder.DIM_ANY)
                else:
                    s = d.names[0]
                    if s not in syms:
                        syms[s] = b.dim(sanitize(s, set(), "n"))
                    out.append(syms[s])
            return out

        for n, reg, dtype, shape in self.inputs:
            b.tensor_input(n, reg, dtype, dims(shape))
        for n, reg, arr in self.consts:
            b.tensor_const(n, reg, arr)
        for n, reg, dtype, shape in self.outputs:
            b.tensor_output(n, reg, dtype, dims(shape))
        b.tensor_regs(max(self.treg, 1))
        sym_list = sorted(self.sym_source)
        sym_reg = {s: k for k, s in enumerate(sym_list)}
        base = len(sym_list)
        nregs = max(base + self.scratch_max, 1)

        def word(x):
            if isinstance(x, tuple):
                if x[0] == "scratch":
                    return base + x[1]
                if x[0] == "sym":
                    return sym_reg[x[1]]
            return x

        main = b.declare("main")
        b.begin(main, 0, nregs)
        for s in sym_list:
            reg, axis = self.sym_source[s]
            b.emit("DIM", sym_reg[s], reg, axis)
        for mnemonic, a1, a2, a3, a4 in self.code:
            b.emit(mnemonic, word(a1), word(a2), word(a3), word(a4))
        b.emit("LDI", 0, 0)
        b.emit("HALT", 0)
        b.end()
        return b.finish(name)

    # ---- helpers for lowering ----------------------------------------------------------

    def reshape(self, node, v, shape):
        """A RESHAPE view of v (a constant is reshaped at import)."""
        if v.const:
            return self.const_val(v.array.reshape([int(d) for d in shape]) if v.array.dtype != object
                                  else v.array.reshape(shape), v.onnx_type)
        if list(shape) == list(v.shape):
            return v
        if len(shape) > MAX_RANK:
            self.refuse(node, "a result of rank %d (BIB tensors have at most %d)" % (len(shape), MAX_RANK), "shape")
        out = self.rt(shape, v.dtype, v.onnx_type)
        r = self.load_dims(node, shape)
        self.emit("RESHAPE", out.reg, v.reg, r, len(shape))
        return out

    def unary(self, node, mnemonic, v):
        self.need(node, mnemonic)
        out = self.rt(v.shape, v.dtype, v.onnx_type)
        self.emit(mnemonic, out.reg, self.reg_of(node, v), 0, 0)
        return out

    def scale(self, node, v, s):
        out = self.rt(v.shape, "f32")
        self.scalar(1)
        self.load_f64(("scratch", 0), float(np.float32(s)))
        self.emit("SCALE", out.reg, self.reg_of(node, v), ("scratch", 0))
        return out

    def scalar_const(self, value):
        return self.const_val(np.array([value], np.float32))

    def binary(self, node, mnemonic, a, b, commutes=False, out_type=None):
        """mnemonic(a, b) with numpy broadcasting, on the forms BIB's BINARY
        takes: same shape, b a row over a's last axis, or b one element."""
        self.need(node, mnemonic)
        out_shape = broadcast_shapes(a.shape, b.shape)
        if out_shape is None:
            self.refuse(node, "shapes %s and %s do not broadcast" % (shape_text(a.shape), shape_text(b.shape)), "shape")
        dtype = "i32" if out_type in (TensorProto.BOOL,) else a.dtype

        def fits(x, y):
            # x carries the result's shape (up to leading 1s); y is the same,
            # a row over its last axis, or one element.
            if len(x.shape) > len(out_shape) or broadcast_shapes(x.shape, out_shape) != out_shape:
                return None
            if dims_prod(x.shape) != dims_prod(out_shape):
                return None
            if list(y.shape) == list(x.shape):
                return y
            if dims_prod(y.shape) == 1:
                return y
            last = x.shape[-1] if x.shape else 1
            ylead = [d for d in y.shape[:-1]]
            if y.shape and y.shape[-1] == last and all(d == 1 for d in ylead) and len(y.shape) <= len(x.shape):
                return self.reshape(node, y, [last])
            return None

        if library_broadcasts():
            out = self.rt(out_shape, dtype, out_type or a.onnx_type)
            self.emit(mnemonic, out.reg, self.reg_of(node, a), self.reg_of(node, b))
            return out
        order = [(a, b)]
        if commutes:
            order.append((b, a))
        for x, y in order:
            y2 = fits(x, y)
            if y2 is not None:
                out = self.rt(x.shape, dtype, out_type or a.onnx_type)
                self.emit(mnemonic, out.reg, self.reg_of(node, x), self.reg_of(node, y2))
                return self.reshape(node, out, out_shape)
        if self.have("EXPAND"):
            ea = self.expand(node, a, out_shape)
            eb = self.expand(node, b, out_shape)
            out = self.rt(out_shape, dtype, out_type or a.onnx_type)
            self.emit(mnemonic, out.reg, self.reg_of(node, ea), self.reg_of(node, eb))
            return out
        self.refuse(
            node,
            "broadcasting %s with %s: BIB's %s takes the same shape, a row over the last axis or one element"
            % (shape_text(a.shape), shape_text(b.shape), mnemonic),
            "shape",
        )

    def expand(self, node, v, shape):
        if list(v.shape) == list(shape):
            return v
        if v.const and is_static(shape):
            return self.const_val(np.ascontiguousarray(np.broadcast_to(v.array, shape)), v.onnx_type)
        self.need(node, "EXPAND")
        out = self.rt(shape, v.dtype, v.onnx_type)
        r = self.load_dims(node, shape)
        self.emit("EXPAND", out.reg, self.reg_of(node, v), r, len(shape))
        return out

    def axis_of(self, node, axis, rank, what="axis"):
        if not -rank <= axis < max(rank, 1):
            self.refuse(node, "%s %d is outside a rank-%d input" % (what, axis, rank), "attribute")
        return axis + rank if axis < 0 else axis

    # ---- ops -----------------------------------------------------------------------------

    def op_Constant(self, node):
        for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
            if key in node.attrs:
                v = node.attr(key)
                if key == "value":
                    arr = numpy_helper.to_array(v)
                    self.set(node, 0, self.const_val(arr, v.data_type))
                elif key.startswith("value_float"):
                    self.set(node, 0, self.const_val(np.array(v, np.float32)))
                else:
                    self.set(node, 0, self.const_val(np.array(v, np.int64)))
                return
        self.refuse(node, "attribute '%s' is not supported (sparse or string constants)" % next(iter(node.attrs), "?"))

    def op_Identity(self, node):
        self.set(node, 0, self.get(node, 0))

    def op_Dropout(self, node):
        x = self.get(node, 0)
        node.attr("seed")  # random state and ratio matter in training only
        node.attr("ratio")
        if node.attr("is_test", 1) == 0:
            self.refuse(node, "attribute 'is_test' = 0: BIB runs inference only")
        if len(node.inputs) > 2 and node.inputs[2]:
            t = self.const_input(node, 2, "training_mode")
            ratio = self.const_input(node, 1, "the ratio", optional=True)
            if bool(np.asarray(t)) and (ratio is None or float(np.asarray(ratio)) != 0.0):
                # Training with a ratio of 0 drops nothing: the identity.
                self.refuse(node, "input 'training_mode' is true: BIB runs inference only")
        self.set(node, 0, x)
        if len(node.outputs) > 1 and node.outputs[1]:
            if not is_static(x.shape):
                self.refuse(node, "output 'mask' of a dynamic shape", "shape")
            self.set(node, 1, self.const_val(np.ones([int(d) for d in x.shape], np.bool_), TensorProto.BOOL))

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
        if not is_static(x.shape):
            self.refuse(node, "a dynamic input shape", "shape")
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
        if sizes is not None and sizes.size:
            out = [int(v) for v in sizes.reshape(-1)]
            factors = [o / i for o, i in zip(out, x.shape)]
        elif scales is not None and scales.size:
            factors = [float(v) for v in scales.reshape(-1)]
            out = [int(np.floor(i * f)) for i, f in zip(x.shape, factors)]
        else:
            self.refuse(node, "neither scales nor sizes", "attribute")
        if len(out) != rank:
            self.refuse(node, "%d scales for a rank-%d input" % (len(out), rank), "shape")
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
            axes = self.const_input(node, k, "the axes").reshape(-1).tolist()
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
            axes = self.const_input(node, 1, "the axes").reshape(-1).tolist()
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
        out = self.rt(shape, dtype, et)
        r = self.load_dims(node, shape)
        self.emit("ALLOC", out.reg, 1 if dtype == "f32" else 2, r, len(shape))
        self.scalar(len(shape) + 1)
        slot = ("scratch", len(shape))
        if dtype == "f32":
            self.load_f64(slot, float(arr[0]))
        else:
            self.load_int(slot, int(arr[0]))
        self.emit("FILL", out.reg, slot)
        self.set(node, 0, out)

    def op_Cast(self, node):
        x = self.get(node, 0)
        to = node.attr("to")
        self.cast(node, x, to)

    def op_CastLike(self, node):
        x = self.get(node, 0)
        like = self.get(node, 1)
        self.cast(node, x, like.onnx_type)

    def cast(self, node, x, to):
        if x.const:
            if x.array.dtype == object:
                if to in (TensorProto.INT64, TensorProto.INT32):
                    self.set(node, 0, self.const_val(x.array, to))
                    return
                self.refuse(node, "a cast of dynamic dimensions to %s" % _DTYPE_NAME.get(to), "dtype")
            self.set(node, 0, self.const_val(x.array.astype(_np_for(to)), to))
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
            self.need(node, "CONCAT")
            shape = list(acc.shape)
            shape[axis] = dim_add(acc.shape[axis], v.shape[axis], self, node)
            out = self.rt(shape, acc.dtype, acc.onnx_type)
            self.emit("CONCAT", out.reg, self.reg_of(node, acc), self.reg_of(node, v), axis)
            acc = out
        if acc is vals[0] and len(vals) == 1 and not acc.const:
            acc = self.unary(node, "COPY", acc)
        self.set(node, 0, acc)

    def slice(self, node, x, starts, ends, axes, steps):
        rank = len(x.shape)
        triples = [(0, x.shape[k], 1) for k in range(rank)]
        shape = list(x.shape)
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = self.axis_of(node, int(a), rank)
            n = x.shape[a]
            if st == 0:
                self.refuse(node, "step 0 on axis %d" % a, "attribute")
            if not isinstance(n, int):
                if st == 1 and s >= 0 and e >= (1 << 31) - 1:
                    if s == 0:
                        continue
                self.refuse(node, "slicing the dynamic axis %d" % a, "shape")
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
        if x.lazy is not None and all(t == (0, x.shape[k], 1) for k, t in enumerate(triples[:-1])) \
                and triples[-1][2] == 1:
            # Columns s:e of a . W + b are a . W[:, s:e] + b[s:e], the same
            # fma chains: one LINEAR of those columns, no copy.
            a, w, b, act = x.lazy
            s0, e0, _ = triples[-1]
            ws = self.const_val(np.ascontiguousarray(w.array[:, s0:e0]))
            bs = self.const_val(np.ascontiguousarray(b.array[s0:e0]))
            return self.matmul(node, a, ws, bs, act)
        if x.const and x.array.dtype != object:
            idx = tuple(slice(s, e if e >= 0 else None, st) for s, e, st in triples)
            return self.const_val(np.ascontiguousarray(x.array[idx]), x.onnx_type)
        if x.const:
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
            a = self.const_input(node, 3, "the axes", optional=True)
            axes = a.reshape(-1).tolist() if a is not None else list(range(len(starts)))
            s = self.const_input(node, 4, "the steps", optional=True)
            steps = s.reshape(-1).tolist() if s is not None else [1] * len(starts)
        self.set(node, 0, self.slice(node, x, starts, ends, axes, steps))

    def op_Split(self, node):
        x = self.get(node, 0)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", 0), rank)
        split = node.attr("split")
        if split is None and len(node.inputs) > 1 and node.inputs[1]:
            split = self.const_input(node, 1, "the split sizes").reshape(-1).tolist()
        n = x.shape[axis]
        outs = len(node.outputs)
        if split is None:
            if not isinstance(n, int):
                self.refuse(node, "splitting the dynamic axis %d" % axis, "shape")
            if n % outs:
                self.refuse(node, "axis %d of size %d does not split into %d equal parts" % (axis, n, outs), "shape")
            split = [n // outs] * outs
        start = 0
        for k, size in enumerate(split):
            self.set(node, k, self.slice(node, x, [start], [start + int(size)], [axis], [1]))
            start += int(size)

    def op_Gather(self, node):
        x, idx = self.get(node, 0), self.get(node, 1)
        rank = len(x.shape)
        axis = self.axis_of(node, node.attr("axis", 0), rank)
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
        cond = np.asarray(self.const_input(node, 1, "the condition")).reshape(-1).astype(bool)
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
        # along the new axis, values[0] elsewhere.
        idx, values = self.get(node, 0), self.get(node, 2)
        depth = int(np.asarray(self.const_input(node, 1, "the depth")).reshape(-1)[0])
        rank = len(idx.shape) + 1
        axis = self.axis_of(node, node.attr("axis", -1), rank)
        if idx.dtype == "f32":
            self.need(node, "CAST")
            i = self.rt(idx.shape, "i32")
            self.emit("CAST", i.reg, self.reg_of(node, idx), 2)
            idx = i
        self.need_i32(node, "TADD")
        neg = self.binary(node, "TLT", idx, self.const_val(np.array([0], np.int64)), out_type=TensorProto.BOOL)
        idx = self.where(node, neg, self.binary(node, "TADD", idx, self.const_val(np.array([depth], np.int64))), idx)
        shape = list(idx.shape)
        shape.insert(axis, 1)
        col = self.reshape(node, idx, shape)
        along = [depth if k == axis else 1 for k in range(rank)]
        iota = self.const_val(np.arange(depth, dtype=np.int64).reshape(along))
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
        reps = [int(r) for r in self.const_input(node, 1, "the repeats").reshape(-1).tolist()]
        if len(reps) != len(x.shape):
            self.refuse(node, "%d repeats for a rank-%d input" % (len(reps), len(x.shape)), "shape")
        # One axis at a time: [pre, d, post] viewed as [pre, 1, d, post],
        # expanded to [pre, r, d, post], viewed as [pre, r*d, post].
        v = x
        for k, r in enumerate(reps):
            if r == 1:
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
        axes = self.axes_of(node, 1, rank)
        if axes is None or axes == []:
            if node.attr("noop_with_empty_axes", 0):
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

    def op_GlobalAveragePool(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.set(node, 0, self.reduce(node, "MEAN", x, list(range(2, len(x.shape))), 1))

    def op_GlobalMaxPool(self, node):
        x = self.get(node, 0)
        self.f32_only(node, x)
        self.set(node, 0, self.reduce(node, "MAX", x, list(range(2, len(x.shape))), 1))

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
                self.need(node, "CONCAT", "a scale or bias given at run time")
                gb = self.rt([2, n], "f32")
                g2, b2 = self.reshape(node, g, [1, n]), self.reshape(node, bt, [1, n])
                self.emit("CONCAT", gb.reg, self.reg_of(node, g2), self.reg_of(node, b2), 0)
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

    def op_Conv(self, node, relu=False):
        x, w = self.get(node, 0), self.get(node, 1)
        bias = self.get(node, 2, optional=True)
        self.f32_only(node, x, w, bias)
        nsp = len(x.shape) - 2
        if nsp not in (1, 2):
            self.refuse(node, "a %d-D convolution (BIB has 1-D and 2-D)" % nsp, "shape")
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
        if relu and bias is not None and bias.const and self.have("BATCHNORM_RELU"):
            # The bias and the ReLU in one pass: x / sqrt(1 + 0) * 1 + bias
            # is exactly x + bias.
            one, zero = np.ones(o, np.float32), np.zeros(o, np.float32)
            p = self.const_val(np.stack([one, np.asarray(bias.array, np.float32).reshape(o), zero, one]))
            self.set(node, 0, self.batchnorm(node, out, p, 0.0, True))
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
        x, w = self.get(node, 0), self.get(node, 1)
        bias = self.get(node, 2, optional=True)
        self.f32_only(node, x, w, bias)
        nsp = len(x.shape) - 2
        if nsp not in (1, 2):
            self.refuse(node, "a %d-D transposed convolution (BIB has 1-D and 2-D)" % nsp, "shape")
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

    # ---- folding of constants (numpy, exact operations only) -------------------------

    def fold_Add(self, node, a):
        return [_fold2(np.add, a)]

    def fold_Sub(self, node, a):
        return [_fold2(np.subtract, a)]

    def fold_Mul(self, node, a):
        return [_fold2(np.multiply, a)]

    def fold_Div(self, node, a):
        x, y = a
        if x.dtype == object or y.dtype == object:
            q = _obj_div(x, y) if x.dtype == object else None
            return None if q is None else [np.array(q, object)]
        if x.dtype.kind in "iu":
            return [np.trunc(x / y).astype(x.dtype)]
        return [np.divide(x, y).astype(x.dtype)]

    def fold_Neg(self, node, a):
        return [np.negative(a[0])] if a[0].dtype != object else None

    def fold_Sqrt(self, node, a):
        return [np.sqrt(a[0])] if a[0].dtype == np.float32 else None

    def fold_Equal(self, node, a):
        return [np.equal(a[0], a[1])] if a[0].dtype != object else None

    def fold_Where(self, node, a):
        return [np.where(a[0], a[1], a[2])]

    def fold_Not(self, node, a):
        return [np.logical_not(a[0])]

    def fold_Range(self, node, a):
        return [np.arange(a[0], a[1], a[2]).astype(a[0].dtype)]

    def op_Range(self, node):
        # Range is folded (fold_Range); here one of its inputs is not known
        # at import time, which is refused naming it.
        self.const_input(node, 0, "start")
        self.const_input(node, 1, "limit")
        self.const_input(node, 2, "delta")

    def fold_Min(self, node, a):
        return [np.minimum.reduce(a)] if all(x.dtype != object for x in a) else None

    def fold_Max(self, node, a):
        return [np.maximum.reduce(a)] if all(x.dtype != object for x in a) else None


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


def _fold2(fn, a):
    x, y = a
    if x.dtype == object or y.dtype == object:
        try:
            if fn is np.multiply:
                return np.array(np.frompyfunc(dim_mul, 2, 1)(x, y), object)
            if fn is np.add:
                return np.array(np.frompyfunc(_dim_add_strict, 2, 1)(x, y), object)
            if fn is np.subtract:
                return np.array(np.frompyfunc(_dim_sub_strict, 2, 1)(x, y), object)
        except ValueError:
            return None
        return None
    r = fn(x, y)
    return r.astype(np.result_type(x.dtype, y.dtype)) if r.dtype != np.result_type(x.dtype, y.dtype) else r


def _dim_add_strict(p, q):
    if isinstance(p, int) and isinstance(q, int):
        return p + q
    if q == 0:
        return p
    if p == 0:
        return q
    raise ValueError("symbolic sum")


def _dim_sub_strict(p, q):
    if p == q:
        return 0
    if isinstance(q, int):
        return _dim_add_strict(p, -q)
    raise ValueError("symbolic difference")


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


def dim_add(a, b, imp, node):
    try:
        return _dim_add_strict(a, b)
    except ValueError:
        imp.refuse(node, "a sum of dynamic dimensions (%s + %s)" % (a, b), "shape")


def _onnx_type_of(arr):
    if arr.dtype == object:
        return TensorProto.INT64
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[arr.dtype]


# ---- entry points ----------------------------------------------------------------------------


def load_model(path):
    """onnx.load with its failures as Refused('model')."""
    try:
        with warnings.catch_warnings():  # protobuf's warning says it again
            warnings.simplefilter("ignore")
            model = onnx.load(path)
    except Exception as e:  # protobuf's DecodeError, OSError
        raise Refused("cannot read '%s' as an ONNX model: %s" % (path, e), "model") from None
    return model


def import_model(model, bind=None, name=None):
    """A bib.Module from an onnx.ModelProto (or a path). bind maps graph
    input names to arrays fixed at import time. Raises Refused."""
    if not isinstance(model, onnx.ModelProto):
        model = load_model(model)
    try:
        model = shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as e:
        why = str(e).strip().splitlines()[-1]
        raise Refused("ONNX shape inference fails on the model: %s" % why, "model") from None
    imp = Importer(model, bind)
    imp.run()
    try:
        module = imp.finish(name)
    except Error as e:
        raise Refused("the module does not verify (an importer bug, please report it): %s" % e.message,
                      "bug") from None
    # The BIB name of each graph input and output, by ONNX name.
    module.onnx_inputs = {vi: n for vi, (n, _r, _d, _s) in zip(imp.input_onnx_names, imp.inputs)}
    module.onnx_outputs = {o.name: n for o, (n, _r, _d, _s) in zip(imp.graph.output, imp.outputs)}
    return module
