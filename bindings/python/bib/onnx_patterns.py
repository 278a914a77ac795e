"""The node patterns that PyTorch exports for one operation, recognised by
the ONNX importer (onnx_import.py) so that each becomes one BIB instruction:

- layer norm: ReduceMean, Sub, Pow 2 (or Mul by itself), ReduceMean, Add eps,
  Sqrt, Div, then optionally Mul gamma and Add beta -> LAYERNORM_EPS (or
  LAYERNORM: onnx_nn's layernorm chooses);
- GELU, exact: Div by sqrt(2) (or Mul by 1/sqrt(2)), Erf, Add 1, Mul x,
  Mul 0.5 (in either order) -> GELU_ERF;
- GELU, tanh form: Pow 3, Mul 0.044715, Add x, Mul sqrt(2/pi), Tanh, Add 1,
  Mul 0.5 x -> GELU;
- MatMul by a [K,N] weight then Add of a [N] bias, or Gemm with a bias row
  -> LINEAR, and with a following Relu or GELU -> LINEAR_RELU, LINEAR_GELU,
  LINEAR_GELU_ERF; read only by column slices, one LINEAR per slice;
- Conv (with a constant bias) or BatchNormalization then Relu -> CONV,
  BATCHNORM_RELU (the bias as a batch norm of scale 1, mean 0, var 1,
  eps 0, which adds it exactly);
- attention as torch's multi-head attention exports it: q, k, v [S,H,D]
  (H heads, or batch times heads), Transpose q and v to [H,S,D] and k to
  [H,D,T], q scaled by 1/sqrt(D) (Div or Mul, before or after the MatMul),
  MatMul, Softmax over the keys, MatMul by v, Transpose back to [S,H,D]
  -> ATTENTION.

A pattern matches only when each value inside it is read by the pattern
alone (no other node, not a graph output), so that nothing else needs it.
"""

import math

import numpy as np

from .onnx_import import broadcast_shapes, dims_prod, is_static


class _Graph:
    """The graph as the patterns see it before lowering: each value's
    producer and readers, and the nodes already taken by a pattern."""

    def __init__(self, imp, nodes):
        self.imp = imp
        self.nodes = nodes
        self.producer = {}
        for n in nodes:
            for o in n.outputs:
                if o:
                    self.producer[o] = n
        self.consumers = imp.consumers
        self.outputs = imp.graph_outputs
        self.taken = set()

    def prod(self, name, op):
        n = self.producer.get(name)
        if n is None or n.op != op or n.index in self.taken or n.proto.domain not in ("", "ai.onnx"):
            return None
        return n

    def value(self, name):
        """The importer's value of name if known before lowering (an input or
        initializer, also through Identity nodes), else None."""
        seen = 0
        while name not in self.imp.vals and seen < 64:
            n = self.producer.get(name)
            if n is None or n.op != "Identity":
                return None
            name, seen = n.inputs[0], seen + 1
        return self.imp.vals.get(name)

    def const(self, name):
        """The value of a constant input (initializer or Constant node), or None."""
        v = self.imp.vals.get(name)
        if v is not None and v.const:
            return v.array
        n = self.producer.get(name)
        if n is not None and n.op == "Constant" and "value" in n.attrs:
            from onnx import numpy_helper

            return numpy_helper.to_array(n.attrs["value"])
        return None

    def scalar_is(self, name, want, rel=1e-6):
        a = self.const(name)
        if a is None or a.size != 1 or a.dtype == object:
            return False
        x = float(np.asarray(a, np.float64).reshape(-1)[0])
        return abs(x - want) <= rel * abs(want) + 1e-12

    def only_inside(self, group, names):
        """Every value in names is read by nodes of group only."""
        idx = {n.index for n in group}
        for name in names:
            if name in self.outputs:
                return False
            for c in self.consumers.get(name, []):
                if c.index not in idx:
                    return False
        return True

    def other(self, node, name):
        """The input of a two-input node that is not `name` (None if neither is)."""
        a, b = node.inputs[0], node.inputs[1]
        if a == name:
            return b
        if b == name:
            return a
        return None

    def single_consumer(self, name):
        cs = self.consumers.get(name, [])
        return cs[0] if len(cs) == 1 and name not in self.outputs else None


def _trailing_axes(node):
    """The axes of a ReduceMean, or None (axes given as an input)."""
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1:
        return None
    return list(axes) if axes is not None else None


def _layernorm(g, div):
    imp = g.imp
    # div = Div(d, s); s = Sqrt(e); e = Add(v, eps); v = ReduceMean(p); p = Pow(d, 2)
    d, sname = div.inputs
    sqrt = g.prod(sname, "Sqrt")
    if sqrt is None:
        return None
    add = g.prod(sqrt.inputs[0], "Add")
    if add is None:
        return None
    var = None
    eps_name = None
    for k in (0, 1):
        var = g.prod(add.inputs[k], "ReduceMean")
        if var is not None:
            eps_name = add.inputs[1 - k]
            break
    if var is None or g.const(eps_name) is None or g.const(eps_name).size != 1:
        return None
    pw = g.prod(var.inputs[0], "Pow")
    if pw is not None:
        if pw.inputs[0] != d or not g.scalar_is(pw.inputs[1], 2.0, 0):
            return None
    else:
        pw = g.prod(var.inputs[0], "Mul")
        if pw is None or pw.inputs != [d, d]:
            return None
    sub = g.prod(d, "Sub")
    if sub is None:
        return None
    x = sub.inputs[0]
    mean = g.prod(sub.inputs[1], "ReduceMean")
    if mean is None or mean.inputs[0] != x:
        return None
    # x is usually computed, so its rank comes from ONNX's shape inference;
    # without it, only axes counted from the end can be read.
    xv = imp.vals.get(x)
    rank = len(xv.shape) if xv is not None else len(imp.inferred[x]) if x in imp.inferred else None
    axes = [_trailing_axes(mean), _trailing_axes(var)]
    if axes[0] is None or axes[1] is None:
        return None
    if rank is None:
        if any(a >= 0 for ax in axes for a in ax):
            return None
        norm = [sorted(ax) for ax in axes]
        trailing = norm[0] == list(range(-len(norm[0]), 0))
    else:
        norm = [sorted(a - rank if a >= 0 else a for a in ax) for ax in axes]
        trailing = norm[0] == list(range(-len(norm[0]), 0))
    if norm[0] != norm[1] or not trailing or not norm[0]:
        return None
    if mean.attrs.get("keepdims", 1) != 1 or var.attrs.get("keepdims", 1) != 1:
        return None
    group = [mean, sub, pw, var, add, sqrt, div]
    inner = [mean.outputs[0], d, pw.outputs[0], var.outputs[0], add.outputs[0], sqrt.outputs[0]]
    # The affine tail, Mul gamma then Add beta: each may be absent, beta only
    # after gamma.
    params = []
    end = div
    for op in ("Mul", "Add"):
        nxt = g.single_consumer(end.outputs[0])
        name = g.other(nxt, end.outputs[0]) if nxt is not None and nxt.op == op else None
        if name is None or name == end.outputs[0]:
            break
        params.append(name)
        group.append(nxt)
        inner.append(end.outputs[0])
        end = nxt
    gamma, beta = (params + [None, None])[:2]
    if not g.only_inside(group, inner):
        return None
    eps = float(np.asarray(g.const(eps_name), np.float64).reshape(-1)[0])
    n_axes = len(norm[0])

    ordered = sorted(group, key=lambda n: n.index)

    def lower():
        xval = imp.vals[x]
        axis = len(xval.shape) - n_axes
        tail = xval.shape[axis:]
        gv = imp.vals[gamma] if gamma else None
        bv = imp.vals[beta] if beta else None

        def over_tail(v):
            # A scale or bias over the normalized axes only (a constant may
            # broadcast; one given at run time must have their size).
            if v is None:
                return True
            if len(v.shape) > n_axes and any(d != 1 for d in v.shape[:-n_axes]):
                return False
            if v.const:
                return broadcast_shapes(v.shape, tail) == list(tail)
            return dims_prod(v.shape) == dims_prod(tail)

        if axis < 0 or not over_tail(gv) or not over_tail(bv) or (gv is None and not is_static(tail)):
            # Not a layer norm BIB's instruction computes: the nodes one by one.
            for n in ordered:
                imp.lower(n)
            return
        if gv is None:
            gv = imp.const_val(np.ones(tail, np.float32))
        imp.set(end, 0, imp.layernorm(end, xval, gv, bv, eps, axis))

    return group, end, lower


def _gelu_tail(g, f, x, group, inner):
    """What both gelu forms end with past f (their Erf or Tanh): Add 1, then
    Mul x and Mul 0.5 in either order. Appends its nodes to group and the
    values they alone read to inner; returns the end node, or None."""
    u = g.single_consumer(f.outputs[0])
    if u is None or u.op != "Add" or not g.scalar_is(g.other(u, f.outputs[0]) or "", 1.0):
        return None
    group.append(u)
    inner.append(f.outputs[0])
    m1 = g.single_consumer(u.outputs[0])
    if m1 is None or m1.op != "Mul":
        return None
    o = g.other(m1, u.outputs[0])
    group.append(m1)
    inner.append(u.outputs[0])
    if o == x:
        # Mul(x, 1 + f) then Mul 0.5
        m2 = g.single_consumer(m1.outputs[0])
        if m2 is None or m2.op != "Mul" or not g.scalar_is(g.other(m2, m1.outputs[0]) or "", 0.5):
            return None
        group.append(m2)
        inner.append(m1.outputs[0])
        return m2
    half = g.prod(o, "Mul")
    if half is None or g.other(half, x) is None or not g.scalar_is(g.other(half, x), 0.5):
        return None
    group.append(half)
    inner.append(o)
    return m1


def _gelu_erf(g, erf):
    a = erf.inputs[0]
    div = g.prod(a, "Div")
    x = None
    if div is not None and g.scalar_is(div.inputs[1], math.sqrt(2.0)):
        x = div.inputs[0]
        first = div
    else:
        mul = g.prod(a, "Mul")
        if mul is None:
            return None
        for k in (0, 1):
            if g.scalar_is(mul.inputs[k], 1 / math.sqrt(2.0)):
                x = mul.inputs[1 - k]
        first = mul
    if x is None:
        return None
    group = [first, erf]
    inner = [a]
    end = _gelu_tail(g, erf, x, group, inner)
    if end is None or not g.only_inside(group, inner):
        return None
    return group, end, x, "GELU_ERF"


def _gelu_tanh(g, tanh):
    s = tanh.inputs[0]
    ms = g.prod(s, "Mul")
    if ms is None:
        return None
    r = None
    for k in (0, 1):
        if g.scalar_is(ms.inputs[k], math.sqrt(2.0 / math.pi), 1e-5):
            r = ms.inputs[1 - k]
    add = g.prod(r, "Add") if r else None
    if add is None:
        return None
    x = q = None
    for k in (0, 1):
        mq = g.prod(add.inputs[k], "Mul")
        if mq is not None:
            for j in (0, 1):
                if g.scalar_is(mq.inputs[j], 0.044715, 1e-5):
                    x, q, mqn = add.inputs[1 - k], mq.inputs[1 - j], mq
    if x is None:
        return None
    group = [ms, add, mqn, tanh]
    inner = [s, r, mqn.outputs[0]]
    pw = g.prod(q, "Pow")
    if pw is not None and pw.inputs[0] == x and g.scalar_is(pw.inputs[1], 3.0, 0):
        group.append(pw)
        inner.append(q)
    else:
        m3 = g.prod(q, "Mul")
        if m3 is None:
            return None
        sq = g.other(m3, x)
        m2 = g.prod(sq, "Mul") if sq else None
        if m2 is None or m2.inputs != [x, x]:
            return None
        group += [m3, m2]
        inner += [q, sq]
    end = _gelu_tail(g, tanh, x, group, inner)
    if end is None or not g.only_inside(group, inner):
        return None
    return group, end, x, "GELU"


def _activation(g, y, acts):
    """The activation that alone reads y: (its nodes, its end node, kind), or None."""
    imp = g.imp
    cs = g.consumers.get(y, [])
    if y not in g.outputs and len(cs) == 1 and cs[0].op == "Relu" and cs[0].index not in g.taken:
        return [cs[0]], cs[0], "RELU"
    if y in acts and imp.have("LINEAR_" + acts[y][3]):
        ggroup, gend, _x, kind = acts[y]
        if g.only_inside(ggroup, [y]):
            return ggroup, gend, kind
    return None


def _linear(g, mm, acts):
    """MatMul(a, W[K,N]) + b[N], or Gemm(a, W, b) with alpha = beta = 1,
    (then an activation) -> LINEAR*. acts: GELU groups by input name."""
    imp = g.imp
    if mm.op == "Gemm":
        if len(mm.inputs) < 3 or not mm.inputs[2] or mm.attrs.get("transA", 0):
            return None
        if mm.attrs.get("alpha", 1.0) != 1.0 or mm.attrs.get("beta", 1.0) != 1.0:
            return None
        trans = mm.attrs.get("transB", 0)
        w = g.value(mm.inputs[1])
        if w is None or len(w.shape) != 2 or (trans and not w.const):
            return None
        n = w.shape[0] if trans else w.shape[1]
        bname = mm.inputs[2]
        group, end, y = [mm], mm, mm.outputs[0]
    else:
        trans = 0
        w = g.value(mm.inputs[1])
        if w is None or len(w.shape) != 2:
            return None
        n = w.shape[1]
        add = g.single_consumer(mm.outputs[0])
        if add is None or add.op != "Add" or add.index in g.taken:
            return None
        bname = g.other(add, mm.outputs[0])
        if bname is None or bname == mm.outputs[0]:
            return None
        group, end, y = [mm, add], add, add.outputs[0]
    b = g.value(bname)
    if b is None or not b.shape or b.shape[-1] != n or any(d != 1 for d in b.shape[:-1]) or len(b.shape) > 2:
        return None
    act = None
    found = _activation(g, y, acts)
    if found is not None:
        nodes, end, act = found
        group = group + nodes
    if mm.op == "MatMul" and not g.only_inside(group, [mm.outputs[0]]):
        return None
    a_name, w_name = mm.inputs[0], mm.inputs[1]
    # Read only by Slice, Split (and Shape), with a constant weight and
    # bias, as torch's fused q, k, v projection is: each slice of columns
    # becomes a LINEAR of its own (onnx_shapes' slice); the whole product
    # is emitted only if a reader needs it.
    readers = g.consumers.get(end.outputs[0], [])
    lazy = (
        w.const and b.const
        and end.outputs[0] not in g.outputs and readers and all(r.op in ("Slice", "Split", "Shape") for r in readers)
    )
    if lazy:
        imp.extra_use[a_name] = max(r.index for r in readers)

    def lower():
        wv = imp.vals[w_name]
        if trans:
            wv = imp.const_val(np.ascontiguousarray(wv.array.T))
        bias = imp.reshape(end, imp.vals[bname], [n])
        imp.set(end, 0, imp.matmul(end, imp.vals[a_name], wv, bias, act, lazy=lazy))

    return group, end, lower, act


def _scaled(g, name):
    """(x, divisor) when name is Div(x, c) or Mul(x, 1/c) by a constant, else (name, None)."""
    n = g.prod(name, "Div")
    if n is not None:
        c = g.const(n.inputs[1])
        if c is not None and c.size == 1 and c.dtype != object:
            return n.inputs[0], float(np.asarray(c, np.float64).reshape(-1)[0]), n
    n = g.prod(name, "Mul")
    if n is not None:
        for k in (0, 1):
            c = g.const(n.inputs[k])
            if c is not None and c.size == 1 and c.dtype != object and float(c.reshape(-1)[0]) != 0:
                return n.inputs[1 - k], 1.0 / float(np.asarray(c, np.float64).reshape(-1)[0]), n
    return name, None, None


def _perm(node):
    return list(node.attrs.get("perm", [])) if node is not None else None


def _attention(g, sm):
    imp = g.imp
    if sm.attrs.get("axis", -1) not in (-1, 2) or imp.opset < 13:
        return None
    group = [sm]
    scores, post, post_node = _scaled(g, sm.inputs[0])
    if post_node is not None:
        group.append(post_node)
    m1 = g.prod(scores, "MatMul")
    if m1 is None:
        return None
    group.append(m1)
    qs, pre, pre_node = _scaled(g, m1.inputs[0])
    if (pre is None) == (post is None):
        return None
    if pre_node is not None:
        group.append(pre_node)
    qt = g.prod(qs, "Transpose")
    kt = g.prod(m1.inputs[1], "Transpose")
    if _perm(qt) != [1, 0, 2] or _perm(kt) != [1, 2, 0]:
        return None
    m2 = g.single_consumer(sm.outputs[0])
    if m2 is None or m2.op != "MatMul" or m2.inputs[0] != sm.outputs[0]:
        return None
    vt = g.prod(m2.inputs[1], "Transpose")
    out = g.single_consumer(m2.outputs[0])
    if _perm(vt) != [1, 0, 2] or out is None or out.op != "Transpose" or _perm(out) != [1, 0, 2]:
        return None
    group += [qt, kt, m2, vt, out]
    inner = [n.outputs[0] for n in group if n is not out]
    if not g.only_inside(group, inner) or len({n.index for n in group}) != len(group):
        return None
    q, k, v = qt.inputs[0], kt.inputs[0], vt.inputs[0]
    divisor = pre if pre is not None else post
    ordered = sorted(group, key=lambda n: n.index)

    def lower():
        qv, kv, vv = imp.vals[q], imp.vals[k], imp.vals[v]
        d = qv.shape[-1] if qv.shape else None
        fits = (
            len(qv.shape) == len(kv.shape) == len(vv.shape) == 3
            and isinstance(d, int)
            and abs(divisor - math.sqrt(d)) <= 1e-6 * math.sqrt(d)
            and kv.shape[1:] == qv.shape[1:]
            and vv.shape == kv.shape
            and all(v.dtype == "f32" for v in (qv, kv, vv))
            and imp.have("ATTENTION")
        )
        if not fits:
            # Not the shapes ATTENTION takes: the nodes one by one.
            for n in ordered:
                imp.lower(n)
            return
        res = imp.rt(qv.shape, "f32")
        imp.emit("ATTENTION", res.reg, imp.reg_of(out, qv), imp.reg_of(out, kv), imp.reg_of(out, vv))
        imp.set(out, 0, res)

    return group, out, lower


def _with_relu(g, n):
    """Conv or BatchNormalization whose result only a Relu reads: one lowering
    with the ReLU folded in (CONV then BATCHNORM_RELU for the bias)."""
    imp = g.imp
    relu = g.single_consumer(n.outputs[0])
    if relu is None or relu.op != "Relu" or relu.index in g.taken or len([o for o in n.outputs if o]) != 1:
        return None
    if not imp.have("BATCHNORM_RELU"):
        return None

    def lower():
        getattr(imp, "op_" + n.op)(n, relu=True)
        unknown = sorted(set(n.attrs) - n.used_attrs)
        if unknown:
            imp.refuse(n, "attribute '%s' is not supported" % unknown[0])
        imp.set(relu, 0, imp.vals[n.outputs[0]])

    return [n, relu], relu, lower


def find(imp, nodes):
    """Marks the fused groups on the importer: imp.fused[end index] is the
    lowering of a group, imp.skip the indices of its other nodes, and
    imp.group_end[index] the end index of the group a node belongs to."""
    g = _Graph(imp, nodes)
    imp.group_end = {}

    def take(group, end, lower):
        for n in group:
            g.taken.add(n.index)
            imp.group_end[n.index] = end.index
            if n.index != end.index:
                imp.skip.add(n.index)
        imp.fused[end.index] = lower

    for n in nodes:
        if n.op == "Div" and n.index not in g.taken:
            m = _layernorm(g, n)
            if m is not None:
                take(*m)
    for n in nodes:
        if n.op == "Softmax" and n.index not in g.taken:
            m = _attention(g, n)
            if m is not None:
                take(*m)
    for n in nodes:
        if n.op in ("Conv", "BatchNormalization") and n.index not in g.taken:
            m = _with_relu(g, n)
            if m is not None:
                take(*m)
    gelus = {}
    for n in nodes:
        if n.index in g.taken:
            continue
        m = _gelu_erf(g, n) if n.op == "Erf" else _gelu_tanh(g, n) if n.op == "Tanh" else None
        if m is not None:
            group, end, x, kind = m
            if not imp.have(kind):
                continue
            gelus[x] = m
    for n in nodes:
        if n.op in ("MatMul", "Gemm") and n.index not in g.taken:
            m = _linear(g, n, gelus)
            if m is not None:
                group, end, lower, act = m
                if act in ("GELU", "GELU_ERF"):
                    for k in [k for k, v in gelus.items() if v[1] is end]:
                        del gelus[k]
                take(group, end, lower)
    for x, (group, end, _x, kind) in gelus.items():
        if any(n.index in g.taken for n in group):
            continue

        def lower(end=end, x=x, kind=kind):
            imp.set(end, 0, imp.unary(end, kind, imp.vals[x]))

        take(group, end, lower)

