"""Seeded synthetic weights for Caffe2's Mask R-CNN 2Go zoo model (int8 and fp32 predict nets).

The zoo's ``model_init.pb`` files are Git LFS objects that cannot be fetched here; its predict nets and its
graph drawing are plain files. ``load_zoo_model(zoo, kind)`` reads the predict net and the blob shapes the
drawing (``fp32/model_def.svg``, drawn on a 1x3x320x427 input) labels each blob with. ``synth_weights`` makes
every blob the net reads but no op writes (besides ``data``/``im_info``):

- fp32: conv/FC weights He-normal (std ``sqrt(2 / fan_in)``), biases N(0, 0.05); ``anchor`` the 15 Detectron
  anchors of stride 16 (sizes 32..512, aspect ratios 0.5/1/2);
- int8: the same fp32 values, quantized as Caffe2's int8 models hold them (``Int8GivenTensorFill``): filters
  in NHWC order ``(M, KH, KW, C / group)``, uint8 codes ``128 + round(w / scale)`` with ``scale = max|w| / 127``;
  biases ``Int8GivenIntTensorFill`` int32 at ``X.scale * W.scale``, where X.scale is the Y_scale of the op that
  makes the conv's input (traced through the net); ``b_zero_generated_*`` biases are zeros. ``scale`` is lowered
  where QNNPACK's requantization scale ``X.scale * W.scale / Y_scale`` would reach 1.
"""

from __future__ import annotations

import html
import re
import subprocess

import numpy as np
from google.protobuf import text_format

from framework.memory.int8_tensor import Int8Tensor
from framework.proto.framework_pb2 import NetDef

_SHAPE = re.compile(r"^\[[0-9, ]*\]$")


def _git_show(zoo: str, path: str) -> str:
    done = subprocess.run(["git", "--git-dir", zoo, "show", f"HEAD:mask_rcnn_2go/model/{path}"], capture_output=True)
    if done.returncode:
        raise SystemExit(
            f"cannot read mask_rcnn_2go/model/{path} from the git dir {zoo} (a clone of facebookarchive/models; "
            f"pass --zoo): {done.stderr.decode().strip()}"
        )
    return done.stdout.decode()


def svg_shapes(svg: str) -> dict[str, tuple[int, ...]]:
    """Blob name -> shape, from a Caffe2 net drawing whose blob nodes are labelled ``name`` then ``[d0, d1..]``."""
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    out = {}
    for a, b in zip(texts, texts[1:]):
        if _SHAPE.match(b) and not _SHAPE.match(a):
            out[a] = tuple(int(d) for d in b.strip("[]").split(",") if d.strip())
    return out


def load_zoo_model(zoo: str, kind: str) -> tuple[NetDef, dict[str, tuple[int, ...]]]:
    """The ``kind`` ("int8"/"fp32") predict NetDef and the fp32 drawing's blob shapes."""
    net = text_format.Parse(_git_show(zoo, f"{kind}/model.pbtxt"), NetDef())
    return net, svg_shapes(_git_show(zoo, "fp32/model_def.svg"))


def _all_ops(net: NetDef):
    for op in net.op:
        yield op
        for arg in op.arg:
            if arg.HasField("n"):
                yield from _all_ops(arg.n)
            for sub in arg.nets:
                yield from _all_ops(sub)


def _args(op) -> dict:
    """{name: value} of ``op``'s arguments (strings decoded), read by the framework's one argument reader."""
    from framework.ops.arg_reader import ArgReader

    reader = ArgReader(op)
    return {a.name: reader.value(a.name) for a in op.arg}


def external_weights(net: NetDef) -> list[str]:
    """Blobs the net (nested nets included) reads before any of its ops writes them, in first-read order."""
    written, out = set(), []
    for op in _all_ops(net):
        for i in op.input:
            if i not in written and i not in out:
                out.append(i)
        written.update(op.output)
    return [n for n in out if n not in ("data", "im_info")]


def anchors() -> np.ndarray:
    """Detectron's 15 anchors at stride 16: sizes 32, 64, 128, 256, 512 by aspect ratios 0.5, 1, 2."""
    rows = []
    ctr = 7.5
    for size in (32, 64, 128, 256, 512):
        for ratio in (0.5, 1.0, 2.0):
            w = np.round(np.sqrt(size * size / ratio))
            h = np.round(w * ratio)
            rows.append([ctr - 0.5 * (w - 1), ctr - 0.5 * (h - 1), ctr + 0.5 * (w - 1), ctr + 0.5 * (h - 1)])
    return np.array(rows, np.float32)


def _cls_bias(rng, shape):
    b = np.full(shape, -1.0, np.float32)
    b[0] = 2.0
    b[rng.choice(np.arange(1, shape[0]), 3, replace=False)] = 1.0
    return b


def _small(std):
    def make(rng, shape):
        fan_in = int(np.prod(shape[1:]))
        return rng.normal(0.0, std / np.sqrt(fan_in), shape).astype(np.float32)

    return make


# The detection heads: small box deltas (as trained regressors give), class scores where background leads
# and three classes pass the 0.05 score threshold on some boxes, so the mask head runs on a photo-like count.
HEADS = {
    "rpn_bbox_pred_w": _small(0.1),
    "rpn_bbox_pred_b": lambda rng, shape: np.zeros(shape, np.float32),
    "bbox_pred_w": _small(0.1),
    "bbox_pred_b": lambda rng, shape: np.zeros(shape, np.float32),
    "cls_score_w": _small(1.0),
    "cls_score_b": _cls_bias,
}


def _fp32_values(names: list[str], shapes: dict, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in names:
        if name == "anchor":
            out[name] = anchors()
            continue
        if name.startswith("b_zero_generated_"):
            continue
        shape = shapes[name]
        if name in HEADS:
            out[name] = HEADS[name](rng, shape)
        elif len(shape) == 1:
            out[name] = rng.normal(0.0, 0.05, shape).astype(np.float32)
        else:
            fan_in = int(np.prod(shape[1:]))
            out[name] = rng.normal(0.0, np.sqrt(2.0 / fan_in), shape).astype(np.float32)
    return out


def _scales(net: NetDef) -> dict[str, float]:
    """The quantization scale of every int8 blob an op makes: its Y_scale, else (scale-keeping ops) its input's."""
    scales: dict[str, float] = {}
    for op in _all_ops(net):
        a = _args(op)
        for o in op.output:
            if "Y_scale" in a:
                scales[o] = float(np.float32(a["Y_scale"]))
            elif op.input and op.input[0] in scales:
                scales[o] = scales[op.input[0]]
    return scales


def _int8_values(net: NetDef, fp32: dict[str, np.ndarray], names: list[str]) -> dict[str, Int8Tensor]:
    scales = _scales(net)
    out: dict[str, Int8Tensor] = {}
    bias_of: dict[str, tuple[str, str, float]] = {}
    for op in _all_ops(net):
        if op.type in ("Int8Conv", "Int8ConvRelu", "Int8FC"):
            bias_of[op.input[2]] = (op.input[0], op.input[1], float(np.float32(_args(op)["Y_scale"])))
    filters = {v[1] for v in bias_of.values()}
    for name in names:  # filters first: a bias needs its filter's scale
        if name not in filters:
            continue
        w = fp32[name[: -len("_int8")]]
        if w.ndim == 4:
            w = w.transpose(0, 2, 3, 1)
        scale = float(np.float32(np.abs(w).max() / 127.0))
        for x, wn, y_scale in bias_of.values():
            if wn == name:
                scale = min(scale, float(np.float32(0.5 * y_scale / scales[x])))
        codes = np.clip(np.rint(w / np.float32(scale)) + 128, 0, 255).astype(np.uint8)
        out[name] = Int8Tensor(codes, scale, 128)
    for b, (x, wn, _) in bias_of.items():
        bscale = float(np.float32(np.float32(scales[x]) * np.float32(out[wn].scale)))
        n = out[wn].data.shape[0]
        if b.startswith("b_zero_generated_"):
            vals = np.zeros(n, np.int32)
        else:
            vals = np.rint(fp32[b[: -len("_int8")]].reshape(n) / bscale).astype(np.int32)
        out[b] = Int8Tensor(vals, bscale, 0)
    for name in names:
        if name not in out:
            out[name] = fp32[name]
    return out


# Output standard deviation each calibrated layer is scaled to (1 elsewhere): box regressions give small
# deltas, as trained regressors do.
TARGET_STD = {"rpn_bbox_pred": 0.1, "bbox_pred": 0.1}
KEEP_BIAS = {"cls_score_b"}  # its bias sets which classes pass the score threshold


def calibrate(fp32_net: NetDef, values: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Scale every Conv/FC's weights and bias, in execution order on the test image, so that its output's
    standard deviation is ``TARGET_STD`` (LSUV-style): He-initialized weights without trained batch norms
    grow the activations by orders of magnitude through the residual sums; a trained net keeps them near
    the ranges the int8 model's Y_scales were calibrated for. Runs the ops one by one in a scratch
    workspace (the If's mask head when there are detections). Returns the scaled values."""
    from framework.caffe2.python import workspace

    values = {k: v.copy() for k, v in values.items()}
    prev = workspace.CurrentWorkspace()
    workspace.SwitchWorkspace("int8_weights_calibration", True)
    try:
        for name, v in values.items():
            workspace.FeedBlob(name, v)
        data, im_info = test_image(seed)
        workspace.FeedBlob("data", data)
        workspace.FeedBlob("im_info", im_info)
        _calibrate_ops(fp32_net.op, values)
    finally:
        workspace.ResetWorkspace()
        workspace.SwitchWorkspace(prev)
    return values


def _calibrate_ops(ops, values: dict[str, np.ndarray]) -> None:
    from framework.caffe2.python import workspace

    for op in ops:
        if op.type == "If":
            if not bool(workspace.FetchBlob(op.input[0]).reshape(-1)[0]):
                else_net = next(a.n for a in op.arg if a.name == "else_net")
                _calibrate_ops(else_net.op, values)
            continue
        workspace.RunOperatorOnce(op)
        if op.type not in ("Conv", "FC"):
            continue
        std = float(np.std(workspace.FetchBlob(op.output[0])))
        if not std > 0:
            continue
        factor = np.float32(TARGET_STD.get(op.output[0], 1.0) / std)
        for name in op.input[1:]:
            if name not in KEEP_BIAS:
                values[name] *= factor
                workspace.FeedBlob(name, values[name])
        workspace.RunOperatorOnce(op)


def synth_weights(
    net: NetDef, shapes: dict, kind: str, seed: int = 0, fp32_net: NetDef | None = None
) -> dict[str, object]:
    """name -> value to feed (numpy array, or ``Int8Tensor`` for the int8 net) for every weight blob;
    ``fp32_net``: the fp32 predict net the values are calibrated on (``calibrate``), default ``net``."""
    fp32_net = fp32_net if fp32_net is not None else net
    fp_names = external_weights(fp32_net)
    fp32 = calibrate(fp32_net, _fp32_values(fp_names, shapes, seed), seed)
    names = external_weights(net)
    if kind == "fp32":
        return {n: fp32[n] for n in names}
    return _int8_values(net, fp32, names)


def test_image(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A 1x3x320x427 BGR image in [0, 255] with smooth structure (blurred noise plus gradients) and its
    ``im_info`` (height, width, scale 1)."""
    rng = np.random.default_rng(seed + 1)
    h, w = 320, 427
    coarse = rng.uniform(0, 255, (3, h // 16 + 2, w // 16 + 2)).astype(np.float32)
    img = np.repeat(np.repeat(coarse, 16, axis=1), 16, axis=2)[:, :h, :w]
    img = 0.7 * img + 0.3 * rng.uniform(0, 255, (3, h, w)).astype(np.float32)
    return img[None].astype(np.float32), np.array([[h, w, 1.0]], np.float32)
