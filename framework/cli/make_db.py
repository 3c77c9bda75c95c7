"""``framework make-db``: write a data set into train/test DBs of TensorProtos records.

``framework make-db images FOLDER`` takes a folder laid out as torchvision's
ImageFolder (``FOLDER/<class>/<image>``, classes numbered in sorted order) and
writes records of (encoded image, int32 label) for ImageInput, shuffled and
split into train/test, with the class names in ``classes.txt``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from framework.cli.common import CLIError, load_npy
from framework.cli.data import load_digits_split


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("make-db", help="write a data set into train/test DBs", description=__doc__)
    p.add_argument(
        "source",
        choices=["digits", "clicks", "npy", "chars", "images"],
        help="digits: scikit-learn's bundled digits; clicks: synthetic clicks with a planted logistic truth "
        "(for models/dlrm_clicks); npy: your files; chars: character windows of a text "
        "(default: Python's own pydoc_data help topics); images: an ImageFolder layout (FOLDER)",
    )
    p.add_argument("--examples", type=int, default=50000, help="with clicks: examples in all (default 50000)")
    p.add_argument("folder", nargs="?", help="with images: the folder of class subfolders")
    p.add_argument("--out", default=os.path.join("data", "digits"), help="output folder (default data/digits)")
    p.add_argument("--features", help="with npy: features .npy (first axis = examples)")
    p.add_argument("--labels", help="with npy: labels .npy")
    p.add_argument("--text", help="with chars: a UTF-8 text file (default: pydoc_data's help topics)")
    p.add_argument("--seq-len", type=int, default=32, help="with chars: window length (default 32)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="held-out share (default 0.2)")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    p.add_argument(
        "--db-type",
        default="minidb",
        choices=["minidb", "lmdb", "leveldb", "rocksdb"],
        help="DB backend (default minidb)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.ops.io.db_input import write_tensor_protos_db

    if not 0 < args.test_fraction < 1:
        raise CLIError(f"--test-fraction must be between 0 and 1, got {args.test_fraction}")
    if args.source == "images":
        return _images(args)
    planted = None
    if args.source == "digits":
        x_tr, y_tr, x_te, y_te = load_digits_split(args.test_fraction, args.seed)
    elif args.source == "clicks":
        from framework.cli.clicks import make_clicks

        if args.examples < 10:
            raise CLIError(f"--examples must be at least 10, got {args.examples}")
        x, y, p = make_clicks(args.examples, args.seed)
        n_test = int(round(len(x) * args.test_fraction))
        x_te, y_te, planted, x_tr, y_tr = x[:n_test], y[:n_test], p[:n_test], x[n_test:], y[n_test:]
    elif args.source == "chars":
        from framework.cli.chars import char_windows, encode, load_corpus, unigram_entropy

        if args.seq_len < 1:
            raise CLIError(f"--seq-len must be positive, got {args.seq_len}")
        ids = encode(load_corpus(args.text))
        if len(ids) < 2 * args.seq_len + 2:
            raise CLIError(f"the text has {len(ids)} characters: too short for windows of {args.seq_len}")
        x_tr, y_tr, x_te, y_te = char_windows(ids, args.seq_len, args.test_fraction, args.seed)
        print(f"{len(ids)} characters; unigram entropy {unigram_entropy(ids):.3f} nats per character")
    else:
        if not args.features or not args.labels:
            raise CLIError("make-db npy needs --features X.npy and --labels Y.npy")
        x, y = _as_trainable(load_npy(args.features), "features"), _as_trainable(load_npy(args.labels), "labels")
        if len(x) != len(y):
            raise CLIError(f"--features has {len(x)} examples but --labels has {len(y)}")
        order = np.random.default_rng(args.seed).permutation(len(x))
        n_test = int(round(len(x) * args.test_fraction))
        x_te, y_te, x_tr, y_tr = x[order[:n_test]], y[order[:n_test]], x[order[n_test:]], y[order[n_test:]]
    os.makedirs(args.out, exist_ok=True)
    ext = args.db_type
    for split, xs, ys in (("train", x_tr, y_tr), ("test", x_te, y_te)):
        path = os.path.join(args.out, f"{split}.{ext}")
        write_tensor_protos_db(path, [xs, ys], db_type=args.db_type)
        print(f"wrote {path}: {len(xs)} examples, features {list(xs.shape[1:])} {xs.dtype}, labels {ys.dtype}")
    np.save(os.path.join(args.out, "sample.npy"), x_te[:8])
    np.save(os.path.join(args.out, "sample_labels.npy"), y_te[:8])
    print(f"wrote {os.path.join(args.out, 'sample.npy')} (8 held-out examples for `framework predict`)")
    if planted is not None:
        from framework.cli.clicks import roc_auc

        np.save(os.path.join(args.out, "test_probabilities.npy"), planted)
        print(
            f"wrote {os.path.join(args.out, 'test_probabilities.npy')} (the planted click probabilities); "
            f"best possible test AUC {roc_auc(y_te, planted):.4f}"
        )
    return 0


def _as_trainable(a: np.ndarray, what: str) -> np.ndarray:
    """The models train on float32 features and int32 labels: convert (saying so) or refuse with the fix."""
    want = np.float32 if what == "features" else np.int32
    if a.dtype == want:
        return a
    if what == "features" and a.dtype.kind in "fiub":
        print(f"note: --features are {a.dtype}; converted to float32 (what the models' FC and Conv ops take)")
        return a.astype(np.float32)
    if what == "labels" and a.dtype.kind in "iub" or (a.dtype.kind == "f" and np.all(a == np.round(a))):
        if a.size and (a.min() < 0 or a.max() > np.iinfo(np.int32).max):
            raise CLIError(f"--labels hold values outside [0, 2^31): {a.min()}..{a.max()}", "labels are class ids")
        print(f"note: --labels are {a.dtype}; converted to int32 class ids")
        return a.astype(np.int32)
    raise CLIError(
        f"--{what} have dtype {a.dtype}, which cannot be converted to {np.dtype(want).name}",
        "save numeric arrays: features as float32, labels as integer class ids",
    )


def _images(args: argparse.Namespace) -> int:
    from framework.db.image_db import image_folder, image_record, write_records
    from framework.errors import DBError

    if not args.folder:
        raise CLIError("make-db images needs the image folder", "framework make-db images FOLDER --out DIR")
    try:
        items, classes = image_folder(args.folder)
    except DBError as e:
        raise CLIError(str(e)) from None
    order = np.random.default_rng(args.seed).permutation(len(items))
    n_test = int(round(len(items) * args.test_fraction))
    out = args.out if args.out != os.path.join("data", "digits") else os.path.join("data", "images")
    os.makedirs(out, exist_ok=True)
    for split, idx in (("train", order[n_test:]), ("test", order[:n_test])):
        path = os.path.join(out, f"{split}.{args.db_type}")
        n = write_records(path, (image_record(items[i][0].read_bytes(), items[i][1]) for i in idx), args.db_type)
        print(f"wrote {path}: {n} images (encoded, with int32 labels) for ImageInput")
    with open(os.path.join(out, "classes.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{k} {name}\n" for k, name in enumerate(classes)))
    print(f"wrote {os.path.join(out, 'classes.txt')}: {len(classes)} classes ({', '.join(classes[:8])}...)")
    return 0
