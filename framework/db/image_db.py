"""Image DBs for ImageInput: records of ``TensorProtos[encoded image (STRING), label (INT32)]``.

``image_folder`` lists a folder laid out as torchvision's ImageFolder (one
subfolder per class, classes numbered in sorted order); ``image_record``
stores a file's bytes as they are (JPEG/PNG stay encoded; ImageInput decodes
them); ``framework make-db images`` writes them shuffled.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> write_records(os.path.join(d, "x.minidb"), [b"a", b"b"], "minidb")
2
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from framework.db.base import Mode, open_db
from framework.errors import DBError
from framework.proto.framework_pb2 import TensorProto, TensorProtos

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp", ".gif")


def write_records(
    path: str | os.PathLike, values: Iterable[bytes], db_type: str = "minidb", key_format: str = "{:08d}"
) -> int:
    """Write ``values`` as records keyed ``key_format.format(i)``; the DB appears when complete. Returns the count."""
    n = 0
    with open_db(db_type, os.fspath(path), Mode.NEW) as db:
        txn = db.new_transaction()
        for n, value in enumerate(values, 1):
            txn.put(key_format.format(n - 1), bytes(value))
            if n % 1024 == 0:
                txn.commit()
        txn.commit()
    return n


def image_record(encoded: bytes, label: int) -> bytes:
    """One ImageInput record: the encoded image and its int32 label."""
    rec = TensorProtos()
    rec.protos.add(data_type=TensorProto.STRING, dims=[1], string_data=[encoded])
    rec.protos.add(data_type=TensorProto.INT32, int32_data=[int(label)])
    return rec.SerializeToString()


def image_folder(folder: str | os.PathLike) -> tuple[list[tuple[Path, int]], list[str]]:
    """``([(file, class index)], class names)`` of an ImageFolder layout; DBError if it has no images."""
    root = Path(folder)
    if not root.is_dir():
        raise DBError(f"image folder {root} does not exist or is not a directory")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    items = []
    for k, name in enumerate(classes):
        for f in sorted((root / name).rglob("*")):
            if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS:
                items.append((f, k))
    if not items:
        raise DBError(
            f"image folder {root} holds no images in class subfolders (expected {root}/<class>/<image> "
            f"with extensions {', '.join(IMAGE_EXTENSIONS)})"
        )
    return items, classes
