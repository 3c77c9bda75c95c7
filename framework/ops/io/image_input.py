"""ImageInput (Caffe2's caffe2/image/image_input_op.h): decode, augment and batch images from a DB.

Each run reads ``batch_size`` records from the reader (input 0, or its own
reader over ``db``/``db_type`` in the old form without inputs), and for each
image: decodes it (Pillow; see ``image_transforms``), converts it to 3 (BGR)
or 1 channel(s), applies the bounding box, scales it (``scale``: shorter side
to exactly this; ``minsize``: only up to at least this; ``warp``: both sides;
``random_scale``: a random shorter side; ``scale_jitter_type`` 1:
Inception-style random crop), crops ``crop`` x ``crop`` (centred with
``is_test``, random otherwise), mirrors at random (``mirror``, training
only), applies colour jitter / lighting (training only) and normalizes with
``(x - mean[c]) / std[c]`` (channel order BGR). Decoding runs on
``decode_threads`` threads (Pillow releases the GIL).

Outputs: ``data`` float32 [N, crop, crop, C] (Caffe2's CPU layout, NHWC);
with ``order`` = "NCHW" or ``use_gpu_transform`` = 1 (Caffe2's GPU path)
[N, C, crop, crop], the latter in ``output_type`` (FLOAT or FLOAT16).
``label``: [N] (single label) or [N, num_labels], int32 or float32 as the
records' label type; further outputs: [N, output_sizes[i]] from the records'
additional TensorProtos.

Departures: random draws come from the op's generator (``random_seed``), one
independent stream per image, so a seeded run is reproducible whatever the
thread timing; an undecodable image becomes a black 224 x 224 image as in
Caffe2 (counted against ``max_decode_error_ratio``, logged); records with
malformed labels or shapes are errors naming the record's key.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from framework.db.reader import DBReader
from framework.errors import OperatorError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.io import image_transforms as T
from framework.ops.io.blobs_queue import QueueRecordReader
from framework.ops.io.image_records import LABEL_TYPES, RecordSpec, label_dtype, parse_protos, parse_record
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, FLOATS, INT, INTS, STRING, Arg, TensorSpec
from framework.proto.framework_pb2 import TensorProto

log = logging.getLogger("framework.ops")
MAX_DECODE_THREADS = 64
_WEIGHTED_SPARSE = 3


def _nchw(args: Any) -> bool:
    return str(args.order).upper() == "NCHW" or bool(args.use_gpu_transform)


def _out_dtype(args: Any) -> np.dtype:
    if args.use_gpu_transform and args.output_type == TensorProto.FLOAT16:
        return np.dtype(np.float16)
    return np.dtype(np.float32)


def _infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    n, crop, c = args.batch_size, args.crop, 3 if args.color else 1
    shape = (n, c, crop, crop) if _nchw(args) else (n, crop, crop, c)
    single = args.label_type in (0, 4)
    label = TensorSpec((n,) if single else (n, args.num_labels), np.dtype(np.float32) if args.label_type == 3 else None)
    sizes = list(args.output_sizes) or [1] * (args.num_outputs - 2)
    return [TensorSpec(shape, _out_dtype(args)), label] + [TensorSpec((n, s), None) for s in sizes]


_ARGS = [
    Arg("batch_size", INT, 0, "images per run, > 0"),
    Arg("color", INT, 1, "1: 3 channels (BGR), 0: grayscale"),
    Arg("scale", INT, -1, "scale the shorter side to exactly this (exclusive with minsize); >= crop"),
    Arg("minsize", INT, -1, "scale up only, so the shorter side is at least this (exclusive with scale); >= crop"),
    Arg("warp", INT, 0, "1: scale both sides to scale/minsize instead of keeping the aspect ratio"),
    Arg("crop", INT, -1, "output height and width (required)"),
    Arg("mirror", INT, 0, "1: mirror each training image with probability 1/2"),
    Arg("mean", FLOAT, 0.0, "mean subtracted from every channel"),
    Arg("mean_per_channel", FLOATS, [], "per-channel means (1 or 3 values, BGR); default: mean"),
    Arg("std", FLOAT, 1.0, "standard deviation every channel is divided by"),
    Arg("std_per_channel", FLOATS, [], "per-channel standard deviations (1 or 3 values, BGR); default: std"),
    Arg("is_test", INT, 0, "1: centre crop, no mirroring or jitter"),
    Arg("use_caffe_datum", INT, 0, "1: records are Caffe1 Datums (single integer label) instead of TensorProtos"),
    Arg(
        "label_type",
        INT,
        0,
        "0 single, 1 multi-label sparse, 2 dense, 3 weighted sparse, 4 single weighted, 5 embedding",
    ),
    Arg("num_labels", INT, 0, "label width for label types 1, 2, 3, 5"),
    Arg("bounding_ymin", INT, -1, "default bounding box (all four >= 0 to apply); records may carry their own"),
    Arg("bounding_xmin", INT, -1, "default bounding box x"),
    Arg("bounding_height", INT, -1, "default bounding box height"),
    Arg("bounding_width", INT, -1, "default bounding box width"),
    Arg("color_jitter", INT, 0, "1: random saturation/brightness/contrast (training, color)"),
    Arg("img_saturation", FLOAT, 0.4, "saturation jitter range"),
    Arg("img_brightness", FLOAT, 0.4, "brightness jitter range"),
    Arg("img_contrast", FLOAT, 0.4, "contrast jitter range"),
    Arg("color_lighting", INT, 0, "1: AlexNet-style PCA lighting noise (training, color)"),
    Arg("color_lighting_std", FLOAT, 0.1, "std of the lighting noise"),
    Arg("scale_jitter_type", INT, 0, "0 none, 1 Inception-style random sized crop (training)"),
    Arg("random_scale", INTS, [-1, -1], "[min, max] random shorter side (minsize per image); [-1, -1]: off"),
    Arg("decode_threads", INT, 4, f"decode/transform threads (capped at {MAX_DECODE_THREADS})"),
    Arg("use_gpu_transform", INT, 0, "Caffe2's GPU path: output NCHW in output_type (runs on the CPU here)"),
    Arg(
        "output_type",
        INT,
        TensorProto.FLOAT,
        "FLOAT or FLOAT16 (name or DataType), with use_gpu_transform",
        dtype_name=True,
    ),
    Arg("order", STRING, "NHWC", "data layout: NHWC (Caffe2's CPU output) or NCHW (extension)"),
    Arg("output_sizes", INTS, [], "widths of the additional outputs (default 1 each)"),
    Arg("max_decode_error_ratio", FLOAT, 1.0, "fail when more than this fraction of a batch fails to decode"),
    Arg("db", STRING, "", "DB path, when the op has no reader input (old form)"),
    Arg("db_type", STRING, "leveldb", "DB type of db"),
]


@register_op(
    "ImageInput",
    inputs=(0, 1),
    outputs=(2, float("inf")),
    args=_ARGS,
    input_docs=[("reader", "a DB reader (CreateDB / CreateBlobsQueueDB)")],
    output_docs=[("data", "the images"), ("label", "the labels"), ("additional", "further TensorProtos")],
    infer=_infer,
    category="data",
)
class ImageInput(Operator):
    __doc__ = __doc__

    def setup(self) -> None:
        a = self.args
        err = self.arg_error
        if a.batch_size <= 0:
            raise err(f"batch_size must be > 0, got {a.batch_size}")
        if a.label_type not in LABEL_TYPES:
            raise err(f"label_type {a.label_type} is not one of {sorted(LABEL_TYPES)}")
        if a.use_caffe_datum and a.label_type not in (0, 4):
            raise err("Caffe datum only supports single integer label (label_type 0 or 4)")
        if a.label_type not in (0, 4) and a.num_labels <= 0:
            raise err(f"num_labels must be > 0 for label_type {a.label_type}")
        rs = list(a.random_scale)
        if len(rs) != 2 or rs[1] < rs[0]:
            raise err(f"random_scale must be [min, max] with min <= max, got {rs}")
        self._random_scaling = rs[0] != -1 and rs[1] != -1
        minsize = rs[0] if self._random_scaling else a.minsize
        if (a.scale > 0) == (minsize > 0):
            raise err("must provide one and only one of scale or minsize")
        if a.crop <= 0:
            raise err(f"must provide the crop value (> 0), got {a.crop}")
        if (a.scale if a.scale > 0 else minsize) < a.crop:
            raise err("the scale/minsize value must be no smaller than the crop value")
        self._minsize = minsize
        mean = list(a.mean_per_channel) or [a.mean]
        std = list(a.std_per_channel) or [a.std]
        if len(mean) != len(std) or len(mean) not in (1, 3):
            raise err(f"mean and std vectors must both have 1 or 3 values, got {len(mean)} and {len(std)}")
        if any(s == 0 for s in std):
            raise err(f"std values must be non-zero, got {std}")
        c = 3 if a.color else 1
        self._mean = np.resize(np.asarray(mean, np.float32), 3)[:c]
        self._inv_std = (np.float32(1) / np.resize(np.asarray(std, np.float32), 3))[:c]
        if a.use_caffe_datum and len(self.outputs) != 2:
            raise err("there can only be 2 outputs with the Caffe datum format")
        extra = len(self.outputs) - 2
        if a.output_sizes and len(a.output_sizes) != extra:
            raise err(f"output_sizes has {len(a.output_sizes)} values for {extra} additional outputs")
        sizes = list(a.output_sizes) or [1] * extra
        if any(s < 0 for s in sizes):
            raise err(f"output_sizes must be >= 0, got {sizes}")
        if a.scale_jitter_type not in (0, 1):
            raise err(f"scale_jitter_type must be 0 or 1, got {a.scale_jitter_type}")
        if a.use_gpu_transform and a.output_type not in (TensorProto.FLOAT, TensorProto.FLOAT16):
            raise err("output_type must be FLOAT or FLOAT16")
        if str(a.order).upper() not in ("NCHW", "NHWC"):
            raise err(f"order must be NCHW or NHWC, got {a.order!r}")
        self._spec = RecordSpec(a.label_type, a.num_labels, bool(a.use_caffe_datum), sizes)
        self._box = (a.bounding_ymin, a.bounding_xmin, a.bounding_height, a.bounding_width)
        if min(self._box) < 0:
            self._box = None
        self._channels = c
        self._threads = max(1, min(int(a.decode_threads), MAX_DECODE_THREADS))
        self._pool: ThreadPoolExecutor | None = None
        self._own_reader: DBReader | None = None
        if not self.inputs and not a.db:
            raise err("without a reader input, the db argument must name the DB")

    def _reader(self) -> Any:
        if not self.inputs:
            if self._own_reader is None:
                path = self.workspace.resolve_read_path(self.args.db)
                self._own_reader = DBReader(path, self.args.db_type, name=f"{self.name or 'ImageInput'}_reader")
            return self._own_reader
        reader = self.inputs[0].held
        if not isinstance(reader, (DBReader, QueueRecordReader)):
            held = "nothing" if reader is None else type(reader).__qualname__
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') holds {held}, "
                "expected a DB reader (made by CreateDB or CreateBlobsQueueDB)"
            )
        return reader

    def run(self) -> None:
        a = self.args
        n, crop, c = a.batch_size, a.crop, self._channels
        reader = self._reader()
        raw = [reader.read() for _ in range(n)]
        source = getattr(reader, "source", "")
        first = None if self._spec.use_caffe_datum else parse_protos(raw[0][1], f"record '{raw[0][0]}' of {source}")
        ldt = label_dtype(first, self._spec, f"record '{raw[0][0]}' of {source}")
        records = [parse_record(v, self._spec, ldt, f"record '{k}' of {source}") for k, v in raw]
        for k, rec in enumerate(records[1:], 1):
            for i, (x, x0) in enumerate(zip(rec.extras, records[0].extras)):
                if x.dtype != x0.dtype:
                    raise TypeMismatchError(
                        f"{self.describe()}: record '{raw[k][0]}' additional tensor {i} is {x.dtype}, "
                        f"the batch's first record had {x0.dtype}"
                    )
        nchw = _nchw(a)
        shape = (n, c, crop, crop) if nchw else (n, crop, crop, c)
        out_dtype = _out_dtype(a)
        # float32 output: images are written straight into it (rolled back if the op fails)
        buf = self.output(0, shape, out_dtype) if out_dtype == np.float32 else np.empty(shape, np.float32)
        seeds = self.rng.integers(0, 2**63 - 1, size=n)
        errors = [0] * n

        def work(i: int) -> None:
            errors[i] = self._transform(records[i], buf[i], nchw, np.random.default_rng(int(seeds[i])))

        if self._threads > 1 and n > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="ImageInput")
            list(self._pool.map(work, range(n)))
        else:
            for i in range(n):
                work(i)
        failed = sum(errors)
        if failed:
            log.warning("%s: %d of %d images failed to decode (black images used)", self.describe(), failed, n)
            if failed / n > a.max_decode_error_ratio:
                raise OperatorError(
                    f"{self.describe()}: {failed} of {n} images failed to decode, more than "
                    f"max_decode_error_ratio {a.max_decode_error_ratio}"
                )
        if out_dtype != np.float32:
            np.copyto(self.output(0, shape, out_dtype), buf, casting="unsafe")
        labels = np.stack([r.label for r in records])
        self.output(1, labels.shape, labels.dtype)[...] = labels
        for i in range(len(self.outputs) - 2):
            col = np.stack([r.extras[i] for r in records]).reshape(n, self._spec.extra_sizes[i])
            self.output(2 + i, col.shape, col.dtype)[...] = col

    def _transform(self, rec: Any, dst: np.ndarray, nchw: bool, rng: np.random.Generator) -> int:
        """Decode and transform one record into ``dst`` (CHW when ``nchw``, else HWC, float32);
        1 if decoding failed.

        An encoded image stays a Pillow image (RGB or L) through box, scaling and cropping, so
        only the crop window is converted to numpy; its channels are then read in BGR order
        through a view.
        """
        a = self.args
        color = bool(a.color)
        failed = 0
        img: Any
        if rec.encoded is not None:
            try:
                img = T.decode_pil(rec.encoded, color)
            except T.ImageDecodeError:
                failed, img = 1, T.to_channels(np.zeros((224, 224, 3), np.uint8), color)
        else:
            img = T.to_channels(rec.raw, color)
        box = rec.box or self._box
        if box is not None:
            img = T.apply_box(img, box)
        jittered = None
        if a.scale_jitter_type == 1 and not a.is_test:
            jittered = T.random_sized_crop(T.as_bgr(img), a.crop, rng)
        if jittered is not None:
            img = jittered
        else:
            target = a.scale if a.scale > 0 else self._minsize
            if self._random_scaling:
                target = int(rng.integers(a.random_scale[0], a.random_scale[1] + 1))
            h, w = T.size_of(img)
            sh, sw = T.scaled_size(h, w, target, bool(a.warp))
            if (a.scale > 0 and (sh, sw) != (h, w)) or sh > h or sw > w:
                img = T.resize_any(img, sw, sh)
        crop = a.crop
        h, w = T.size_of(img)
        y, x = T.crop_offsets(h, w, crop, bool(a.is_test), rng)
        if not isinstance(img, np.ndarray) and h >= crop and w >= crop:
            img, y, x = img.crop((x, y, x + crop, y + crop)), 0, 0
        img = T.as_bgr(img)
        window = img[y : y + crop, x : x + crop]
        if not a.is_test and a.mirror and rng.random() < 0.5:
            window = window[:, ::-1]
        jitter = self._channels == 3 and not a.is_test and (a.color_jitter or a.color_lighting)
        if jitter:
            hwc = np.empty((crop, crop, 3), np.float32)
            hwc[...] = window
            if a.color_jitter:
                T.color_jitter(hwc, a.img_saturation, a.img_brightness, a.img_contrast, rng)
            if a.color_lighting:
                T.color_lighting(hwc, a.color_lighting_std, rng)
            window = hwc
        if nchw:  # one contiguous plane per channel
            for ch in range(self._channels):
                np.subtract(window[:, :, ch], self._mean[ch], out=dst[ch])
                np.multiply(dst[ch], self._inv_std[ch], out=dst[ch])
        else:
            np.subtract(window, self._mean, out=dst)
            np.multiply(dst, self._inv_std, out=dst)
        return failed


no_gradient("ImageInput")
