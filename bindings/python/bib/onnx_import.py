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

This module is the driver: the graph walk, registers and values, constant
folding and the entry points. The lowering of each op lives by job in
onnx_math.py (elementwise and math), onnx_shapes.py (shapes and data
movement) and onnx_nn.py (normalizations, convolution, pooling, recurrent
units), mixed into Importer; onnx_common.py holds what they share (Refused,
dims, Val) and onnx_patterns.py the fused patterns.
"""

import re
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper, shape_inference

from . import Builder, Error, UsageError, opcode
from .onnx_common import (
    _bib_dtype, broadcast_shapes, dim_mul, dim_sign, dim_sub, dim_sum, dims_prod, _DTYPE_NAME, _fold2, is_static,
    library_broadcasts, library_i32_arithmetic, library_takes_zero_dims, MAX_OPSET, MAX_RANK, MIN_OPSET, NeedsConstant,
    _Node, _np_for, _obj_div, _onnx_type_of, Refused, sanitize, shape_text, Sym, Val)
from .onnx_math import MathOps
from .onnx_nn import NNOps
from .onnx_shapes import ShapeOps

# The ops that keep Range(0, S, 1) as positions not made yet (a Gather takes
# them as a table's first S rows) or read only their shape; any other reads
# them as a tensor.
_KEEP_POSITIONS = {"Cast", "CastLike", "Unsqueeze", "Reshape", "Squeeze", "Flatten", "Identity", "Gather", "Shape",
                   "Size"}

# ---- the importer ---------------------------------------------------------------------------


class Importer(MathOps, ShapeOps, NNOps):
    """One import: the values by ONNX name, the code emitted so far (as
    (mnemonic, a, b, c, d) with scratch and symbol registers still named),
    the declarations; finish() builds the module."""

    def __init__(self, model, bind=None, data=None):
        self.model = model
        self.graph = model.graph
        # The initializers whose bytes model lacks (_without_large_data), by name.
        self.data = dict(data or {})
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
        self.check_bind()
        self.vals = {}
        self.code = []  # (mnemonic, a, b, c, d)
        self.labels = 0  # jump targets made by new_label
        self.treg = 0
        self.sym_source = {}  # symbol -> (tensor reg, axis)
        self.scratch_max = 0
        self.term_used = False
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
        self.current = None  # the node being lowered, for the report of an importer bug

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

    def new_label(self):
        """A jump target (an operand resolved at finish); emit("LABEL", l)
        places it before the next instruction."""
        self.labels += 1
        return ("label", self.labels)

    def check_dim(self, node, v, axis, n):
        """Stops the run unless axis `axis` of the run-time tensor v is n:
        DIM, JEQI past a TRAP whose code is n."""
        self.scalar(1)
        ok = self.new_label()
        self.emit("DIM", ("scratch", 0), self.reg_of(node, v), axis)
        self.emit("JEQI", ("scratch", 0), n, ok)
        self.emit("TRAP", n)
        self.emit("LABEL", ok)

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
        # A sum: each term after the first in the register kept for it.
        for k, (names, coef) in enumerate(d.terms):
            r = reg if k == 0 else ("term",)
            self.load_int(r, coef)
            for n in names:
                self.emit("MUL", r, r, ("sym", n))
            if k > 0:
                self.emit("ADD", reg, reg, r)
                self.term_used = True

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
        if v.iota is not None:
            # Positions read as values (compared, added, expanded, cast to
            # float): made at run time, once, and freed after the last
            # reader of the value.
            p = self.positions(node, v.iota, v.onnx_type)
            v.reg = self.reshape(node, p, v.shape).reg if list(v.shape) != [v.iota] else p.reg
            v.dtype = p.dtype
            if any(v is x for x in self.vals.values()):
                self.named.add(v.reg)
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

    def const_ints(self, node, k, what, optional=False):
        """Input k as a list of Python ints, known at import time (the flat
        values of const_input). An entry that is a dynamic dimension is
        refused, naming it: BIB takes these values at import time."""
        arr = self.const_input(node, k, what, optional)
        if arr is None:
            return None
        return self.ints_of(node, arr, "input '%s' (%s)" % (node.inputs[k], what), what)

    def ints_of(self, node, values, label, what):
        flat = np.asarray(values).reshape(-1).tolist()
        for v in flat:
            if isinstance(v, Sym):
                self.refuse(node, "%s %s the dynamic dimension %s: BIB takes %s at import time, so it may not "
                            "depend on a dynamic axis" % (label, "is" if len(flat) == 1 else "holds", v, what),
                            "shape")
        return [int(v) for v in flat]

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
    def check_bind(self):
        """Every name bound must be a graph input the module would take: a
        name bound in vain (a typo, an initializer) is refused, not ignored."""
        inits = {i.name for i in self.graph.initializer}
        inputs = [vi.name for vi in self.graph.input if vi.name not in inits]
        for name in self.bind:
            if name in inputs:
                continue
            why = "an initializer, a constant already" if name in inits else "not an input of the graph"
            raise Refused("bind '%s': %s (its inputs: %s)" % (name, why, ", ".join(inputs) or "none"), "usage")
        for vi in self.graph.input:
            if vi.name in self.bind and vi.name not in inits and vi.type.HasField("tensor_type"):
                self.check_bound_value(vi.name, vi.type.tensor_type, self.bind[vi.name])

    @staticmethod
    def check_bound_value(name, tt, value):
        """A bound value must be what the input declares: numbers of an
        integer kind (bool, int, uint) for an integer or bool input, of
        those or a float kind for a float input (floats for an integer input
        are refused, not truncated), values the integer type holds, 0 and 1
        for a bool input, the declared rank and every static dimension;
        anything else is refused (reason usage) naming the input, what it
        declares and what was given."""
        def refuse(expected, given):
            raise Refused("bind '%s': expected %s, given %s" % (name, expected, given), "usage")

        et = tt.elem_type
        tname = _DTYPE_NAME.get(et, str(et))
        try:
            arr = np.asarray(value)
        except Exception as e:  # an object numpy cannot make an array of
            refuse("an array of %s" % tname, "%s (%s)" % (type(value).__name__, e))
        integer = et in (TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
                         TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64)
        floating = et in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
        boolean = et == TensorProto.BOOL
        kinds = "biu" if integer or boolean else "biuf" if floating else None
        if kinds is not None and arr.dtype.kind not in kinds:
            what = "integers" if kinds == "biu" else "numbers"
            refuse("%s for an input of type %s" % (what, tname), "an array of %s" % arr.dtype)
        if integer and arr.size:
            info = np.iinfo(_np_for(et))
            lo, hi = int(arr.min()), int(arr.max())  # exact: numpy may compare uint64 as float
            if lo < info.min or hi > info.max:
                refuse("values of type %s (%d to %d)" % (tname, info.min, info.max),
                       "%d" % (lo if lo < info.min else hi))
        if boolean and arr.dtype.kind != "b" and arr.size and not np.isin(arr, (0, 1)).all():
            refuse("0 or 1 for an input of type BOOL", "other values")
        if tt.HasField("shape"):
            dims = tt.shape.dim
            declared = ["%d" % d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
            shape_txt = "[%s]" % ", ".join(declared)
            if arr.ndim != len(dims):
                refuse("rank %d (shape %s)" % (len(dims), shape_txt), "rank %d (shape %s)"
                       % (arr.ndim, list(arr.shape)))
            for axis, d in enumerate(dims):
                if d.HasField("dim_value") and arr.shape[axis] != d.dim_value:
                    refuse("shape %s" % shape_txt, "shape %s (axis %d is %d, not %d)"
                           % (list(arr.shape), axis, arr.shape[axis], d.dim_value))

    def dim_sums(self, inits):
        """The dim_params of the graph inputs that are sums of the others
        and of integers ("past_sequence_length + sequence_length", "P + 1",
        as exporters name a cache's length): each as that sum, so that the
        axis it names is the one a Concat of the cache and the new entries
        gives. A name that is a dim of a bound input is that dim's size. Such
        an axis is no symbol of its own: a tensor whose length there is not
        the sum fails the kernel that combines them."""
        params, known = [], {}
        for vi in self.graph.input:
            if vi.name in inits:
                continue
            dims = vi.type.tensor_type.shape.dim
            if vi.name not in self.bind:
                params += [d.dim_param for d in dims if d.HasField("dim_param")]
                continue
            shape = np.shape(self.bind[vi.name])
            for d, size in zip(dims, shape) if len(shape) == len(dims) else ():
                if d.HasField("dim_param"):
                    known.setdefault(d.dim_param, int(size))
        plain = {p for p in params if _IDENTIFIER.fullmatch(p)}
        sums = {}
        for p in set(params) - plain:
            text = p.replace(" ", "")
            if not _SUM.fullmatch(text):
                continue
            value = 0
            for sign, term in _SUM_TERM.findall(text):
                if term.isdigit() or term in known:
                    t = int(term) if term.isdigit() else known[term]
                elif term in plain:
                    t = Sym(1, (term,))
                else:
                    break
                value = dim_sum(value, t, -1 if sign == "-" else 1)
            else:
                sums[p] = value
        return sums

    def declare_inputs(self):
        inits = {i.name for i in self.graph.initializer}
        sums = self.dim_sums(inits)
        for init in self.graph.initializer:
            arr = numpy_helper.to_array(self.data.pop(init.name, init))
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
                elif d.dim_param in sums:
                    shape.append(sums[d.dim_param])
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
            self.current = n
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
        self.current = None
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
        if node.op not in _KEEP_POSITIONS:
            # Positions (Range(0, S, 1)) read as values: made now, before the
            # op loads the sizes it passes in scalar registers.
            for v in ins:
                if v is not None and v.iota is not None and v.reg is None:
                    self.reg_of(node, v)
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
            shape = [d if isinstance(d, int) else (d if d.symbol is not None else None) for d in v.shape]
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
                elif d is None or d.symbol is None:
                    out.append(Builder.DIM_ANY)
                else:
                    s = d.symbol
                    if s not in syms:
                        syms[s] = b.dim(sanitize(s, set(), "n"))
                    out.append(syms[s])
            return out

        for n, reg, dtype, shape in self.inputs:
            b.tensor_input(n, reg, dtype, dims(shape))
        # The importer is done with its values: each constant's array goes
        # once the builder holds its copy, so that the weights are not held
        # three times over while the module is written.
        consts, self.consts, self.vals = self.consts, [], {}
        for k, (n, reg, arr) in enumerate(consts):
            b.tensor_const(n, reg, arr)
            consts[k] = arr = None
        for n, reg, dtype, shape in self.outputs:
            b.tensor_output(n, reg, dtype, dims(shape))
        b.tensor_regs(max(self.treg, 1))
        sym_list = sorted(self.sym_source)
        sym_reg = {s: k for k, s in enumerate(sym_list)}
        base = len(sym_list)
        term = base + self.scratch_max  # load_int's second register, for a sum
        nregs = max(term + (1 if self.term_used else 0), 1)

        labels = {}

        def word(x):
            if isinstance(x, tuple):
                if x[0] == "scratch":
                    return base + x[1]
                if x[0] == "sym":
                    return sym_reg[x[1]]
                if x[0] == "term":
                    return term
                if x[0] == "label":
                    if x[1] not in labels:
                        labels[x[1]] = b.label()
                    return labels[x[1]]
            return x

        main = b.declare("main")
        b.begin(main, 0, nregs)
        for s in sym_list:
            reg, axis = self.sym_source[s]
            b.emit("DIM", sym_reg[s], reg, axis)
        for mnemonic, a1, a2, a3, a4 in self.code:
            if mnemonic == "LABEL":
                b.bind(word(a1))
                continue
            b.emit(mnemonic, word(a1), word(a2), word(a3), word(a4))
        b.emit("LDI", 0, 0)
        b.emit("HALT", 0)
        b.end()
        return b.finish(name)

    # ---- helpers for lowering ----------------------------------------------------------

    def reshape(self, node, v, shape):
        """A RESHAPE view of v (a constant is reshaped at import)."""
        if v.iota is not None and v.reg is None:
            out = Val(shape, v.dtype, v.onnx_type)
            out.iota = v.iota
            return out
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

        affine = self.channel_affine(node, mnemonic, a, b, commutes, out_shape, out_type)
        if affine is not None:
            return affine
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

    def channel_affine(self, node, mnemonic, a, b, commutes, out_shape, out_type):
        """TADD, TSUB or TMUL of an f32 [N,C,...] tensor and a constant of
        one value per channel ([C,1,...,1]) as one BATCHNORM pass, where
        BINARY would first expand the constant to the tensor's shape. With
        mean +0 and var 1 (eps 0), ((x - +0) / 1) * s + t is exactly x + t
        for s = 1 (TSUB: t = -b, as x - b is x + (-b)), and x * s for
        t = -0; NaN canonical in both. None where the form does not apply."""
        if mnemonic not in ("TADD", "TSUB", "TMUL") or out_type is not None or not self.have("BATCHNORM"):
            return None
        for x, y in [(a, b)] + ([(b, a)] if commutes else []):
            rank = len(x.shape)
            if (rank < 3 or list(x.shape) != list(out_shape) or x.dtype != "f32" or not y.const
                    or y.array.dtype != np.float32 or len(y.shape) > rank):
                continue
            c = x.shape[1]
            lead = [1] * (rank - len(y.shape)) + [int(d) for d in y.shape]
            if not isinstance(c, int) or c < 2 or lead[1] != c or any(d != 1 for k, d in enumerate(lead) if k != 1):
                continue
            v = np.asarray(y.array, np.float32).reshape(c)
            if mnemonic == "TMUL":
                return self.affine_batchnorm(node, x, v, np.full(c, -0.0, np.float32))
            return self.affine_batchnorm(node, x, np.ones(c, np.float32), -v if mnemonic == "TSUB" else v)
        return None

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

    # ---- folding of constants (numpy, exact operations only) -------------------------

    def fold_dims(self, node, fn, a, what, sign):
        """Arithmetic on shape values (a dynamic dimension among them is a
        Sym): folded exactly, or refused naming the dimension."""
        r = _fold2(fn, a)
        if r is None and any(x.dtype == object for x in a):
            self.refuse(node, "%s of dynamic dimensions (%s %s %s): BIB's shapes are products of dynamic axes and "
                        "constants" % (what, _dims_text(a[0]), sign, _dims_text(a[1])), "shape")
        return None if r is None else [r]

    def fold_Add(self, node, a):
        return self.fold_dims(node, np.add, a, "a sum", "+")

    def fold_Sub(self, node, a):
        return self.fold_dims(node, np.subtract, a, "a difference", "-")

    def fold_Mul(self, node, a):
        return self.fold_dims(node, np.multiply, a, "a product", "*")

    def fold_reduce(self, node, a, fn):
        """A reduction of an integer constant (shape arithmetic, such as the
        element count torch's var and std compute): exact, so folded. A
        float constant is left to the kernel, whose order of operations is
        the contract's."""
        x = a[0]
        if x.dtype.kind not in "iu" and not (x.dtype == object and fn is np.multiply):
            return None
        axes = node.attr("axes")
        if len(a) > 1 and a[1] is not None:
            if a[1].dtype == object:
                return None  # axes of a dynamic dim: op_Reduce* refuses it by name
            axes = a[1].reshape(-1).tolist()
        keep = bool(node.attr("keepdims", 1))
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.ndim))
        axes = tuple(sorted(set(int(k) + x.ndim if k < 0 else int(k) for k in axes)))
        if x.dtype == object:
            out = x
            for k in reversed(axes):
                out = np.frompyfunc(dim_mul, 2, 1).reduce(out, axis=k, keepdims=True, initial=1)
            if not keep:
                out = out.reshape([d for k, d in enumerate(out.shape) if k not in axes])
            return [np.array(out, object)]
        return [np.asarray(fn.reduce(x, axis=axes, keepdims=keep)).astype(x.dtype)]

    def fold_ReduceProd(self, node, a):
        return self.fold_reduce(node, a, np.multiply)

    def fold_ReduceSum(self, node, a):
        return self.fold_reduce(node, a, np.add)

    def fold_ReduceMax(self, node, a):
        return self.fold_reduce(node, a, np.maximum)

    def fold_ReduceMin(self, node, a):
        return self.fold_reduce(node, a, np.minimum)

    def fold_Div(self, node, a):
        x, y = a
        if x.dtype == object or y.dtype == object:
            q = _obj_div(x, y) if x.dtype == object else None
            if q is None:
                self.refuse(node, "a division of dynamic dimensions (%s by %s) that is not exact at import time"
                            % (_dims_text(x), _dims_text(y)), "shape")
            return [np.array(q, object)]
        if x.dtype.kind in "iu":
            return [np.trunc(x / y).astype(x.dtype)]
        return [np.divide(x, y).astype(x.dtype)]

    def fold_Neg(self, node, a):
        if a[0].dtype == object:
            return [np.array(np.frompyfunc(lambda d: dim_sub(0, d), 1, 1)(a[0]), object)]
        return [np.negative(a[0])]

    def fold_Sqrt(self, node, a):
        return [np.sqrt(a[0])] if a[0].dtype == np.float32 else None

    def fold_Equal(self, node, a):
        if a[0].dtype != object and a[1].dtype != object:
            return [np.equal(a[0], a[1])]
        # Shape values with dynamic dims, as torch's Expand of sizes taken
        # from a shape compares them with -1: a dim with no negative term (a
        # size, a sum or product of sizes) is not a negative constant, a dim
        # is itself; anything else (-S, S - 2) is not known
        # at import time (None: op_Equal refuses it as a tensor needed at
        # run time).
        x, y = np.broadcast_arrays(a[0], a[1])
        out = np.empty(x.shape, np.bool_)
        for i in np.ndindex(x.shape):
            p, q = x[i], y[i]
            if isinstance(p, Sym) and isinstance(q, Sym) and p == q:
                out[i] = True
            elif isinstance(p, Sym) or isinstance(q, Sym):
                c, d = (q, p) if isinstance(p, Sym) else (p, q)
                if isinstance(c, Sym) or int(c) >= 0 or dim_sign(d) not in (0, 1):
                    return None
                out[i] = False
            else:
                out[i] = p == q
        return [out]

    def fold_Where(self, node, a):
        return [np.where(a[0], a[1], a[2])]

    def fold_Not(self, node, a):
        return [np.logical_not(a[0])]

    def fold_NonZero(self, node, a):
        # torch's x[:, mask] with a constant mask: the positions are known.
        if a[0].dtype == object or a[0].ndim == 0:
            return None
        return [np.array(np.nonzero(a[0]), np.int64)]

    def op_NonZero(self, node):
        x = self.get(node, 0)
        what = "a scalar" if not x.shape else "an input known only at run time"
        self.refuse(node, "NonZero of %s: its result's size is the count of non-zero values, and BIB's shapes "
                    "come from the input dims" % what, "shape")

    def fold_Range(self, node, a):
        if any(x.dtype == object for x in a):
            return None
        return [np.arange(a[0], a[1], a[2]).astype(a[0].dtype)]

    def op_Range(self, node):
        # Range is folded (fold_Range); here one of its inputs is not known
        # at import time, or is a dynamic dimension. Range(0, S, 1) is the
        # positions of a sequence (torch.arange(x.shape[1])): kept as such
        # for a Gather into a table (op_Gather). Anything else is refused.
        ends = [self.get(node, k) for k in range(3)]
        if ends[1].dim is not None and all(e.const and e.array.size == 1 for e in (ends[0], ends[2])) \
                and float(ends[0].array.reshape(-1)[0]) == 0 and float(ends[2].array.reshape(-1)[0]) == 1:
            # torch.arange(x.shape[1], dtype=torch.float): the limit is the
            # dim cast to float; the positions as floats (exact below 2^24).
            v = Val([ends[1].dim], "f32", ends[0].onnx_type)
            v.iota = ends[1].dim
            self.set(node, 0, v)
            return
        for k, what in enumerate(("start", "limit", "delta")):
            v = self.get(node, k)
            if not v.const and v.dim is not None:
                self.refuse(node, "input '%s' (%s) is the dynamic dimension %s cast to float: BIB takes Range's %s "
                            "at import time, so the length of a Range may not depend on a dynamic axis"
                            % (node.inputs[k], what, v.dim, what), "shape")
        values = [np.asarray(self.const_input(node, k, w)).reshape(-1) for k, w in
                  enumerate(("start", "limit", "delta"))]
        if all(v.size == 1 for v in values):
            start, limit, delta = (v[0] for v in values)
            if isinstance(limit, Sym) and not isinstance(start, Sym) and not isinstance(delta, Sym) \
                    and int(start) == 0 and int(delta) == 1:
                v = Val([limit], "i32", self.vals[node.inputs[0]].onnx_type)
                v.iota = limit
                self.set(node, 0, v)
                return
            n = dim_sub(limit, start)
            if not isinstance(delta, Sym) and int(delta) == 1 and dim_sign(n) in (0, 1) \
                    and self.vals[node.inputs[0]].onnx_type != TensorProto.FLOAT:
                # Range(P, P + S, 1): a cache's next positions (torch.arange(
                # past, past + S)), the positions 0..S-1 plus the start at
                # run time.
                self.need_i32(node, "TADD")
                pos = self.const_or_positions(node, n)
                onnx_type = self.vals[node.inputs[0]].onnx_type
                first = self.filled(node, [1], "i32", onnx_type, start) if isinstance(start, Sym) \
                    else self.const_val(np.array([int(start)], np.int64), onnx_type)
                self.set(node, 0, self.binary(node, "TADD", pos, first, out_type=onnx_type))
                return
        for k, what in enumerate(("start", "limit", "delta")):
            v = self.const_input(node, k, what)
            if v.dtype == object:
                self.refuse(node, "input '%s' (%s) is the dynamic dimension %s: BIB takes Range's %s at import "
                            "time, so the length of a Range may not depend on a dynamic axis"
                            % (node.inputs[k], what, v.reshape(-1)[0], what), "shape")

    def fold_Min(self, node, a):
        return [np.minimum.reduce(a)] if all(x.dtype != object for x in a) else None

    def fold_Max(self, node, a):
        return [np.maximum.reduce(a)] if all(x.dtype != object for x in a) else None


def _dims_text(arr):
    """A shape value for a message: a scalar as itself, a vector as a list."""
    arr = np.asarray(arr)
    return str(arr.reshape(-1)[0]) if arr.size == 1 else shape_text(arr.reshape(-1).tolist())


# ---- entry points ----------------------------------------------------------------------------


def load_model(path):
    """onnx.load with its failures as Refused('model')."""
    try:
        with warnings.catch_warnings():  # protobuf's warning says it again
            warnings.simplefilter("ignore")
            model = onnx.load(path)
    except Exception as e:  # protobuf's DecodeError, OSError
        raise Refused("cannot read '%s' as an ONNX model: %s" % (path, e), "model") from None
    if model.ByteSize() == 0:
        # protobuf reads no bytes as a model with nothing set.
        raise Refused("not an ONNX model (the file is empty)", "model")
    return model


# A dim_param that is a sum of others and integers ("P + S", "past + 1").
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_SUM_TERM = re.compile(r"([+-]?)([A-Za-z_][A-Za-z0-9_.]*|[0-9]+)")
_SUM = re.compile(r"[+-]?(?:[A-Za-z_][A-Za-z0-9_.]*|[0-9]+)(?:[+-](?:[A-Za-z_][A-Za-z0-9_.]*|[0-9]+))+")

# An initializer of this many elements or more goes through shape inference
# without its bytes: ONNX's inference reads the values of small shape-like
# tensors only (shapes, axes, scales), and it serializes and parses the model
# it is given, so a model passed whole is in memory several times over.
_LARGE_ELEMENTS = 1 << 16


def _copy_fields(to, message, skip):
    """Copies every field of message that is set into to, but skip."""
    for field, value in message.ListFields():
        if field.name == skip:
            continue
        if field.label == field.LABEL_REPEATED:
            getattr(to, field.name).extend(value)
        elif field.message_type is not None:
            getattr(to, field.name).CopyFrom(value)
        else:
            setattr(to, field.name, value)


def _without_large_data(model):
    """(lean, data): a copy of model whose large top-level initializers keep
    their name, type and dims but no bytes, and those initializers of model
    by name. Importing a model of one 256 MB initializer peaked at 1.36 GB
    with the whole model given to shape inference, 0.84 GB with this."""
    lean = onnx.ModelProto()
    _copy_fields(lean, model, "graph")
    _copy_fields(lean.graph, model.graph, "initializer")
    data = {}
    for init in model.graph.initializer:
        if int(np.prod(init.dims, dtype=np.int64)) < _LARGE_ELEMENTS or init.data_location == TensorProto.EXTERNAL:
            lean.graph.initializer.add().CopyFrom(init)
            continue
        t = lean.graph.initializer.add()
        t.name = init.name
        t.data_type = init.data_type
        t.dims.extend(init.dims)
        data[init.name] = init
    return lean, data


def import_model(model, bind=None, name=None):
    """A bib.Module from an onnx.ModelProto (or a path). bind maps graph
    input names to arrays fixed at import time; a name there that is not a
    graph input is refused (reason 'usage'). Raises Refused."""
    if not isinstance(model, onnx.ModelProto):
        model = load_model(model)
    if not model.HasField("graph"):
        raise Refused("not an ONNX model (it has no graph)", "model")
    lean, data = _without_large_data(model)
    model = None  # the bytes live on in data's tensors until the importer takes them
    try:
        lean = shape_inference.infer_shapes(lean, strict_mode=True)
    except Exception as e:
        why = str(e).strip().splitlines()[-1]
        raise Refused("ONNX shape inference fails on the model: %s" % why, "model") from None
    imp = Importer(lean, bind, data)
    data = None
    try:
        imp.run()
    except (Refused, Error):
        raise
    except Exception as e:
        # Anything else is the importer's fault, not the model's: refused as
        # a bug naming the node it was lowering (the exception chained, for
        # a traceback).
        where = imp.current.where() if imp.current is not None else "the graph's inputs and outputs"
        raise Refused("%s: %s: %s (an importer bug, please report it)" % (where, type(e).__name__, e), "bug",
                      imp.current.name if imp.current is not None else None) from e
    try:
        module = imp.finish(name)
    except Error as e:
        raise Refused("the module does not verify (an importer bug, please report it): %s" % e.message,
                      "bug") from None
    # The BIB name of each graph input and output, by ONNX name.
    module.onnx_inputs = {vi: n for vi, (n, _r, _d, _s) in zip(imp.input_onnx_names, imp.inputs)}
    module.onnx_outputs = {o.name: n for o, (n, _r, _d, _s) in zip(imp.graph.output, imp.outputs)}
    return module
