"""Caffe2's feature-map merges (``feature_maps_ops.h``): several per-feature tensors of a batch into one
multi-feature tensor, example by example. One table of layouts, one forward class, one gradient class.

Per input k (repeated for every input), and what each example contributes, in input order:

============================ ======================================================== ========================
op                           inputs per feature                                       outputs
============================ ======================================================== ========================
MergeSingleScalarFeatureTensors (values[N], presence[N])                              lengths, keys, values
MergeSingleListFeatureTensors   (lengths[N], values, presence[N])                     lengths, keys,
                                                                                      values_lengths, values_values
MergeSingleMapFeatureTensors    (lengths[N], keys, values, presence[N])               lengths, keys, values_lengths,
                                                                                      values_keys, values_values
MergeMultiScalarFeatureTensors  (lengths[N], keys, values)                            lengths, keys, values
MergeMultiListFeatureTensors    (lengths[N], keys, values_lengths, values_values)     as SingleList
MergeMultiMapFeatureTensors     (lengths[N], keys, values_lengths, values_keys,       as SingleMap
                                values_values)
MergeDenseFeatureTensors        (dense[N, F], presence[N, F]) once                    lengths, keys, values
============================ ======================================================== ========================

Single* and Dense take the feature ids from the ``feature_ids`` argument (the key of input k, or of column
f); a Single list/map input holds values only for the examples present. Output ``lengths`` (int32) counts
each example's features, ``keys`` are int64. Gradients, as Caffe2's makers: ``<Op>Gradient`` from the
inputs' lengths / presence and the gradient of the merged values, giving the gradient of each input's
values (``T()`` for an absent Single scalar: 0, False or b""); MergeDenseFeatureTensors has none.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INTS, UNKNOWN, Arg
from framework.ops.sparse.gather import range_positions

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)

# layout -> (tensors per input, roles, value-array roles, outputs, the roles its gradient op reads)
LAYOUTS = {
    "SingleScalar": (2, ["values", "presence"], ["values"], 3, ["presence"]),
    "SingleList": (3, ["lengths", "values", "presence"], ["values"], 4, ["lengths", "presence"]),
    "SingleMap": (4, ["lengths", "keys", "values", "presence"], ["keys", "values"], 5, ["lengths", "presence"]),
    "MultiScalar": (3, ["lengths", "keys", "values"], ["values"], 3, ["lengths"]),
    "MultiList": (
        4,
        ["lengths", "keys", "values_lengths", "values_values"],
        ["values_values"],
        4,
        ["lengths", "values_lengths"],
    ),
    "MultiMap": (
        5,
        ["lengths", "keys", "values_lengths", "values_keys", "values_values"],
        ["values_keys", "values_values"],
        5,
        ["lengths", "values_lengths"],
    ),
    "Dense": (2, ["dense", "presence"], ["dense"], 3, []),
}
OUT_NAMES = {
    3: ["lengths", "keys", "values"],
    4: ["lengths", "keys", "values_lengths", "values_values"],
    5: ["lengths", "keys", "values_lengths", "values_keys", "values_values"],
}


def _vec(op: Operator, x: np.ndarray, what: str, n: int | None = None, kind: str = "iu") -> np.ndarray:
    if x.ndim != 1 or x.dtype.kind not in kind or (n is not None and x.size != n):
        size = f" of {n} entries" if n is not None else ""
        raise ShapeError(
            f"{op.describe()}: {what} must be a 1-D {'bool' if kind == 'b' else 'integer'} "
            f"vector{size}, got {x.dtype} {list(x.shape)}"
        )
    return x


def _lengths(op: Operator, x: np.ndarray, what: str, n: int | None = None) -> np.ndarray:
    """A 1-D integer lengths vector, every entry >= 0, whose total is within the allocation limit."""
    x = _vec(op, x, what, n).astype(np.int64)
    if x.size and int(x.min()) < 0:
        raise ShapeError(f"{op.describe()}: {what} holds a negative length {int(x.min())}")
    check_elements((int(x.sum()),), 8, f"{what} of {op.describe()}")
    return x


def _first_dim(op: Operator, x: np.ndarray, what: str) -> int:
    if x.ndim < 1:
        raise ShapeError(f"{op.describe()}: {what} must be a vector, got a scalar")
    return x.shape[0]


def records(op: Operator, layout: str, t: dict, k: int, n: int, fid: list):
    """(example, key, value start, value length) of every feature input k contributes."""
    if layout == "Dense":
        dense, pres = t["dense"], t["presence"]
        if dense.ndim != 2 or pres.shape != dense.shape or pres.dtype != np.bool_:
            raise ShapeError(f"{op.describe()}: dense and presence must be N x F (bool presence)")
        if len(fid) != dense.shape[1]:
            raise ShapeError(f"{op.describe()}: feature_ids has {len(fid)} ids for {dense.shape[1]} columns")
        e, f = np.nonzero(pres)
        return (
            e,
            np.asarray(fid, I64)[f] if len(fid) else np.zeros(0, I64),
            e * dense.shape[1] + f,
            np.ones(e.size, np.int64),
        )
    if layout.startswith("Single"):
        pres = _vec(op, t["presence"], f"presence of feature input {k}", n, "b")
        e = np.flatnonzero(pres)
        key = np.full(e.size, fid[k], I64)
        if layout == "SingleScalar":
            return e, key, e, np.ones(e.size, np.int64)
        vlen = _lengths(op, t["lengths"], f"lengths of feature input {k}", n)[e]
        return e, key, np.cumsum(vlen) - vlen, vlen
    lengths = _lengths(op, t["lengths"], f"lengths of feature input {k}", n)
    e = np.repeat(np.arange(n), lengths)
    if layout == "MultiScalar" or "keys" not in t:
        return e, None, np.arange(e.size), np.ones(e.size, np.int64)
    vlen = _lengths(op, t["values_lengths"], f"values_lengths of feature input {k}", e.size)
    return e, None, np.cumsum(vlen) - vlen, vlen


class MergeFeatures(Operator):
    """Forward of every Merge*FeatureTensors (see module doc)."""

    layout = ""

    def run(self) -> None:
        per, roles, vroles, n_out, _ = LAYOUTS[self.layout]
        if len(self.inputs) % per:
            raise ShapeError(f"{self.describe()}: inputs come in groups of {per} ({', '.join(roles)})")
        groups = [dict(zip(roles, (self.input(i) for i in range(g, g + per)))) for g in range(0, len(self.inputs), per)]
        fid = list(getattr(self.args, "feature_ids", []))
        if self.layout.startswith("Single") and len(fid) != len(groups):
            raise self.arg_error(f"feature_ids has {len(fid)} ids for {len(groups)} feature inputs")
        first = groups[0]["dense"] if self.layout == "Dense" else groups[0][roles[0]]
        n = _first_dim(self, first, f"input 0 ('{self.input_names[0]}')")
        recs, bases, value_arrays = [], [], {r: [] for r in vroles}
        base = 0
        for k, t in enumerate(groups):
            e, key, vstart, vlen = records(self, self.layout, t, k, n, fid)
            if key is None:
                key = _vec(self, t["keys"], f"keys of feature input {k}", e.size).astype(I64)
            arrays = [t[r].reshape(-1) for r in vroles]
            size = arrays[0].size
            if any(a.size != size for a in arrays) or (vlen.size and int((vstart + vlen).max()) > size):
                raise ShapeError(f"{self.describe()}: feature input {k} has {size} values, its lengths need more")
            for r, a in zip(vroles, arrays):
                value_arrays[r].append(a)
            recs.append((e, np.full(e.size, k), key, vstart + base, vlen))
            bases.append(base)
            base += size
        e, k, key, vstart, vlen = (np.concatenate(c) for c in zip(*recs))
        order = np.argsort(e * len(groups) + k, kind="stable")
        pos = range_positions(np.stack([vstart[order], vlen[order]], axis=1))
        outs = [np.bincount(e, minlength=n).astype(I32) if e.size else np.zeros(n, I32), key[order]]
        if n_out > 3:
            outs.append(vlen[order].astype(I32))
        for r in vroles:
            arrays = value_arrays[r]
            dtypes = {a.dtype for a in arrays}
            if len(dtypes) != 1:
                raise TypeMismatchError(f"{self.describe()}: the {r} of all feature inputs must share one type")
            outs.append(np.concatenate(arrays)[pos])
        for i, v in enumerate(outs):
            self.output(i, v.shape, v.dtype)[...] = v


class MergeFeaturesGradient(Operator):
    """The gradient of the merged values routed back to each feature input's values."""

    layout = ""

    def run(self) -> None:
        _, _, vroles, _, groles = LAYOUTS[self.layout]
        per = len(groles)
        dy = self.input(len(self.inputs) - 1).reshape(-1)
        groups = [
            dict(zip(groles, (self.input(i) for i in range(g, g + per)))) for g in range(0, len(self.inputs) - 1, per)
        ]
        if len(self.outputs) != len(groups):
            raise ShapeError(
                f"{self.describe()}: {len(groups)} feature inputs need {len(groups)} outputs (one values gradient "
                f"each), got {len(self.outputs)}"
            )
        n = _first_dim(self, groups[0][groles[0]], f"input 0 ('{self.input_names[0]}')")
        recs, sizes = [], []
        base = 0
        for k, t in enumerate(groups):
            full = dict(t)
            if self.layout.startswith("Multi") and self.layout != "MultiScalar":
                full["keys"] = np.zeros(int(_lengths(self, t["lengths"], f"lengths of input {k}", n).sum()), I64)
            e, _, vstart, vlen = records(self, self.layout, full, k, n, [0] * len(groups))
            size = n if self.layout == "SingleScalar" else int(vlen.sum())
            if self.layout.startswith("Multi") and self.layout != "MultiScalar":
                size = int(_lengths(self, t["values_lengths"], f"values_lengths of input {k}").sum())
            recs.append((e, np.full(e.size, k), vstart + base, vlen))
            sizes.append(size)
            base += size
        e, k, vstart, vlen = (np.concatenate(c) for c in zip(*recs))
        order = np.argsort(e * len(groups) + k, kind="stable")
        pos = range_positions(np.stack([vstart[order], vlen[order]], axis=1))
        if pos.size != dy.size:
            raise ShapeError(
                f"{self.describe()}: the merged values gradient has {dy.size} entries, expected {pos.size}"
            )
        # an absent Single scalar gets T() as in Caffe2: 0, False, or the empty string
        full = np.full(base, b"", object) if dy.dtype == object else np.zeros(base, dy.dtype)
        full[pos] = dy
        start = 0
        for i, size in enumerate(sizes):
            self.output(i, (size,), dy.dtype)[...] = full[start : start + size]
            start += size


def _register(layout: str) -> None:
    per, roles, vroles, n_out, groles = LAYOUTS[layout]
    name = f"Merge{layout}FeatureTensors"
    args = [Arg("feature_ids", INTS, [], "the feature id of each input (Single*) or column (Dense)")]
    register_op(
        name,
        inputs=(lambda n, per=per: n > 0 and n % per == 0) if layout != "Dense" else 2,
        outputs=n_out,
        args=args if layout.startswith("Single") or layout == "Dense" else [],
        input_docs=[
            (f"in{j}_{r}", f"feature input {j}: {r} (and so on for more inputs)") for j in (1, 2) for r in roles
        ]
        if layout != "Dense"
        else [(f"in_{r}", r) for r in roles],
        output_docs=[(f"out_{o}", o) for o in OUT_NAMES[n_out]],
        infer=lambda a, ins: [UNKNOWN] * a.num_outputs,
        category="sparse",
    )(
        type(
            name,
            (MergeFeatures,),
            {
                "layout": layout,
                "__doc__": f"Merge per-feature {layout} tensors of a batch "
                "into one multi-feature tensor, example by example (see the module doc).",
            },
        )
    )
    if layout == "Dense":
        no_gradient(name)
        return
    gname = f"{name}Gradient"
    gper = len(groles)
    register_op(
        gname,
        inputs=lambda n, gper=gper: n > gper and (n - 1) % gper == 0,
        outputs=(1, float("inf")),
        input_docs=[(f"in_{r}", f"feature input k: {r}") for r in groles] + [("out_values_grad", "gradient")],
        output_docs=[("in_values_grad", "gradient of feature input k's values")],
        infer=lambda a, ins: [UNKNOWN] * a.num_outputs,
        category="sparse",
        private=True,
    )(type(gname, (MergeFeaturesGradient,), {"layout": layout, "__doc__": f"Gradient of {name}."}))
    value_role = roles.index(vroles[-1])

    def make(g, per=per, groles=groles, roles=roles, value_role=value_role, n_out=n_out, gname=gname):
        groups = len(g.def_.input) // per
        ins = [g.I(per * k + roles.index(r)) for k in range(groups) for r in groles] + [g.GO(n_out - 1)]
        outs = [g.GI(per * k + value_role) for k in range(groups)]
        return [g.op(gname, ins, outs)]

    gradient(name, copy_arguments=False)(make)


for _layout in LAYOUTS:
    _register(_layout)
