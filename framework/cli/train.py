"""``framework train``: train a model folder's nets with a progress bar and checkpoints."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from framework.cli import resume
from framework.cli.common import CLIError, new_workspace
from framework.cli.data import count_records, evaluate_accuracy, find_split
from framework.cli.history import History, history_path, learning_rate
from framework.cli.model_dir import ModelDir
from framework.errors import FrameworkError

DEFAULT_DATA = os.path.join("data", "digits")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model folder (init/train/predict nets)", description=__doc__)
    p.add_argument("model_dir", help="folder with init_net.pbtxt, train_net.pbtxt, predict_net.pbtxt")
    p.add_argument(
        "--data",
        help="folder with the train and test DBs (train.minidb/test.minidb, or .lmdb/.leveldb/.rocksdb); "
        f"default {DEFAULT_DATA} (the digits of `framework make-db digits`)",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument("--iters", type=int, help="training iterations (default: 1 epoch)")
    length.add_argument("--epochs", type=float, help="passes over the training data")
    p.add_argument("--batch-size", type=int, help="override the train net's batch size")
    p.add_argument("--checkpoint", help="checkpoint path (minidb file), saved atomically")
    p.add_argument("--every", type=int, default=0, help="save a checkpoint every N iterations (default: at the end)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint if it exists")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --checkpoint (default: refuse)")
    p.add_argument(
        "--val-every",
        type=int,
        help="validation accuracy on the test split every N iterations (default: once per epoch); "
        "written to NAME.history.jsonl beside checkpoint NAME.minidb and shown in the progress bar",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="seed every op's random stream: the init net's fills and the train net's random ops "
        "(Dropout); runs with one seed are bit-identical",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar (log lines instead)")
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="write TensorBoard event files into DIR: loss, accuracy, learning rate and validation accuracy, "
        "parameter histograms (each validation) and the train net's graph (`tensorboard --logdir DIR`)",
    )
    p.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel over the ranks of an MPI job (run under `framework launch -n N` or mpiexec): "
        "each rank reads its shard; rank 0 writes checkpoints and prints",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework import checkpoint

    md = ModelDir.load(args.model_dir)
    defaulted = args.data is None
    if defaulted:
        args.data = DEFAULT_DATA
    md.point_readers_at(args.data)
    if args.batch_size is not None:
        if args.batch_size < 1:
            raise CLIError(f"--batch-size must be positive, got {args.batch_size}")
        md.set_batch_size(args.batch_size)
    if args.resume and not args.checkpoint:
        raise CLIError("--resume needs --checkpoint PATH")
    if args.every and not args.checkpoint:
        raise CLIError("--every needs --checkpoint PATH")
    if args.resume and args.overwrite:
        raise CLIError("--resume and --overwrite contradict each other", "pick one")
    if args.checkpoint and os.path.exists(args.checkpoint) and not (args.resume or args.overwrite):
        raise CLIError(
            f"checkpoint {args.checkpoint} already exists; training would replace it",
            "pass --resume to continue from it, or --overwrite to replace it",
        )

    rank, size = (0, 1)
    if args.distributed:
        from framework.cli.launch import distributed_setup

        rank, size = distributed_setup(md)
    if args.checkpoint and os.path.dirname(args.checkpoint):
        os.makedirs(os.path.dirname(args.checkpoint), exist_ok=True)
    if args.seed is not None:  # a distinct stream per op (layers of one shape differ), train ops too (Dropout)
        for k, op in enumerate([*md.init_net.op, *md.train_net.op]):
            op.device_option.random_seed = (args.seed * 1000003 + k) % 2**32
    ws = new_workspace()
    ws.run_net_once(md.init_net)
    state = md.state_blobs()
    iter_blob = md.iteration_blob()
    start = 0
    resuming = bool(args.resume and os.path.exists(args.checkpoint))
    if resuming:
        checkpoint.load(ws, args.checkpoint, blobs=state + resume.held(args.checkpoint))
        start = _iteration(ws, iter_blob, 0)
        if rank == 0:
            print(f"resumed from {args.checkpoint} at iteration {start}")

    total = _total_iters(args, md, size)
    if start >= total:
        if rank == 0:
            print(
                f"nothing left to train: the checkpoint is at iteration {start} and this run asks for "
                f"{total} iterations in all (raise --iters or --epochs to train further)"
            )
        return 0
    net = ws.create_net(md.train_net)
    readers = md.reader_blobs()
    if resuming:  # the batches and random numbers continue where the run stopped (framework/cli/resume.py)
        resume.restore(ws, net, readers)

    def save() -> None:
        checkpoint.save(ws, args.checkpoint, blobs=state + resume.capture(ws, net, readers))

    if rank == 0:
        if defaulted:
            print(f"data: {args.data} (the default; --data DIR picks the model's own)")
        if not args.checkpoint:
            print("no --checkpoint: the trained weights will not be saved (pass --checkpoint PATH to keep them)")
    bar = _progress(total, start, args.no_progress) if rank == 0 else _Silent()
    per_epoch = _iters_per_epoch(args, md, size)
    val_every = args.val_every if args.val_every is not None else max(1, round(per_epoch))
    if val_every < 1:
        raise CLIError(f"--val-every must be at least 1, got {args.val_every}")
    test = find_split(args.data, "test")
    history = History(history_path(args.checkpoint) if rank == 0 else None, fresh=not args.resume)
    board = None
    if args.tensorboard and rank == 0:
        from framework.cli.tensorboard import TrainingBoard

        params = [b for b in md.predict_net.external_input if b in state]
        board = TrainingBoard(args.tensorboard, md.train_net, ws, params)
    t0, done, it, val = time.perf_counter(), 0, start, {}
    try:
        for it in range(start, total):
            try:
                net.run()
            except FrameworkError as e:
                if defaulted and done == 0:  # the model is not a digits model: say what to pass
                    from framework.cli import one_line

                    raise CLIError(
                        f"{args.model_dir} fails on the default data folder {args.data}: {one_line(e)}",
                        f"this model needs its own data: pass --data DIR (see {args.model_dir}/README.md)",
                    ) from e
                raise
            done += 1
            last = it + 1 == total
            if rank == 0 and test is not None and ((it + 1) % val_every == 0 or last):
                val = {"val_accuracy": evaluate_accuracy(ws, md, test[0])[0]}
                history.write({"iteration": it + 1, "epoch": (it + 1) / per_epoch, **val})
                if board is not None:
                    board.log(it + 1, val)
                    board.histograms(it + 1)
            if (it + 1) % 10 == 0 or last:
                rate = done / max(time.perf_counter() - t0, 1e-9)
                metrics = _metrics(ws)
                bar.update(it + 1, {**metrics, **({"val": val["val_accuracy"]} if val else {})}, rate)
                lr = learning_rate(ws, md.train_net)
                seconds = time.perf_counter() - t0
                history.write(
                    {"iteration": it + 1, "epoch": (it + 1) / per_epoch, **metrics, "lr": lr, "seconds": seconds}
                )
                if board is not None:
                    board.log(it + 1, {**metrics, "lr": lr})
            if args.every and (it + 1) % args.every == 0 and rank == 0:
                save()
    except KeyboardInterrupt:
        bar.close()
        history.close()
        if board is not None:
            board.close()
        if args.checkpoint and rank == 0:
            save()  # atomic: a second Ctrl-C cannot corrupt it
            print(
                f"interrupted at iteration {start + done}: saved {args.checkpoint}; "
                "continue with the same command and --resume",
                file=sys.stderr,
            )
        raise
    bar.close()
    history.close()
    if board is not None:
        if test is None:  # no validation: the parameters' histograms once, at the end
            board.histograms(total)
        board.close()
        print(f"wrote TensorBoard events to {args.tensorboard} (`tensorboard --logdir {args.tensorboard}`)")
    if rank != 0:
        return 0
    if size > 1:
        print(f"trained on {size} ranks, global batch {size} x {md.batch_size()}")
    if args.checkpoint:
        save()
        at = _iteration(ws, iter_blob, total)
        print(f"saved checkpoint {args.checkpoint} ({len(state)} blobs) at iteration {at}")
    if history.path:
        print(f"wrote {history.path} (plot it with `framework plot {history.path} -o curves.png`)")
    if test is not None:
        acc, n = evaluate_accuracy(ws, md, test[0])
        print(f"test accuracy: {acc:.4f} on {n} held-out examples")
        from framework.cli.clicks import evaluate_auc

        auc = evaluate_auc(ws, md, test[0])
        if auc is not None:
            print(f"test AUC: {auc:.4f}")
    return 0


def _iteration(ws, iter_blob: str | None, default: int) -> int:
    """The iteration counter's value (what --resume will start from), else ``default``."""
    if iter_blob and ws.has_blob(iter_blob):
        return int(np.asarray(ws.fetch_blob(iter_blob)).reshape(-1)[0])
    return default


class _Silent:
    """The progress bar of ranks other than 0."""

    def update(self, *args: object) -> None:
        pass

    def close(self) -> None:
        pass


def _iters_per_epoch(args: argparse.Namespace, md: ModelDir, ranks: int = 1) -> float:
    """Iterations per pass over the training data (each rank reads its own batch)."""
    batch = md.batch_size() or 1
    train = find_split(args.data, "train")
    records = count_records(train[0]) if train else batch
    return max(records / (batch * ranks), 1e-9)


def _total_iters(args: argparse.Namespace, md: ModelDir, ranks: int = 1) -> int:
    if args.iters is not None:
        if args.iters < 1:
            raise CLIError(f"--iters must be at least 1, got {args.iters}")
        return args.iters
    epochs = args.epochs if args.epochs is not None else 1.0
    if epochs <= 0:
        raise CLIError(f"--epochs must be positive, got {epochs}")
    return max(1, math.ceil(epochs * _iters_per_epoch(args, md, ranks)))


def _metrics(ws) -> dict[str, float]:
    out = {}
    for name in ("loss", "accuracy"):
        if ws.has_blob(name):
            try:
                out[name] = float(np.asarray(ws.fetch_blob(name)).reshape(-1)[0])
            except Exception:  # an unfilled blob: nothing to show yet
                pass
    return out


class _progress:  # noqa: N801  (used as a function: `with _progress(...) as bar`)
    """tqdm progress bar, or plain log lines with --no-progress, when stderr is not a terminal and when
    tqdm is missing."""

    def __init__(self, total: int, start: int, plain: bool) -> None:
        self.bar = None
        self.last_log = 0.0
        if not plain and sys.stderr.isatty():  # a bar redrawn into a log file floods it: log lines instead
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=start, unit="it", dynamic_ncols=True)
            except ImportError:
                pass
        self.pos = start
        self.total = total

    def update(self, pos: int, metrics: dict[str, float], rate: float) -> None:
        text = " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
        if self.bar is not None:
            self.bar.update(pos - self.pos)
            self.bar.set_postfix_str(text)
        elif time.perf_counter() - self.last_log > 1.0 or pos == self.total:
            print(f"iter {pos} {text} ({rate:.0f} it/s)", flush=True)
            self.last_log = time.perf_counter()
        self.pos = pos

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
