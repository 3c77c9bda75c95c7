"""Image input pipeline: ImageInput vs a PyTorch DataLoader doing the same work, and training fed by it.

1. Decode throughput: batches of 32 JPEGs (128x128, quality 90) decoded, shorter side scaled to
   112, randomly cropped to 96x96, randomly mirrored, normalized per channel, NCHW float32:
   - ``framework``: ImageInput over a minidb (``decode_threads`` = T);
   - ``torch``: a ``torch.utils.data.Dataset`` over the same encoded bytes doing the same steps
     with Pillow + numpy (no torchvision CPU wheel exists for torch 2.13), ``DataLoader(batch_size=32,
     num_workers=T)`` (T = 0: in the main process), persistent workers.
   Contenders are timed in interleaved rounds (a round = 8 batches), medians -> images/s. Each
   round starts after 0.5 s idle, and the torch round first takes the ``2 * num_workers`` batches
   its workers prefetched (untimed): rounds time steady decoding, not prefetched work.
2. Training: the models/image_cnn CNN (32x32 JPEGs, crop 28, batch 32, momentum SGD):
   - ``framework``: a prefetch thread running ImageInput + EnqueueBlobs (as the plan's concurrent
     step) while the main thread runs DequeueBlobs then the train net; reports images/s and the
     share of the step spent waiting in DequeueBlobs (target: <= 10%);
   - ``framework, fed``: the same train net on a batch already in memory (no input pipeline);
   - ``torch``: the same CNN (nn.Conv2d/MaxPool2d/Linear, SGD momentum) fed by the DataLoader.

Run: ``python -m bench.image_pipeline [--rounds 9] [--threads 2]``; prints markdown rows.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

from bench.common import markdown_table, pin_blas_threads

BATCH = 32
MEAN = [104.0, 117.0, 124.0]  # BGR, as Caffe2's ImageInput
STD = [58.0, 57.0, 57.0]


def make_jpegs(n: int, size: int, seed: int = 0) -> list[bytes]:
    """``n`` smooth random colour images, JPEG-encoded."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    yy, xx = np.mgrid[:size, :size] / size
    for _ in range(n):
        a = rng.uniform(0, 255, (3, 3))
        img = np.stack([a[c, 0] * yy + a[c, 1] * xx + a[c, 2] * (1 - yy) for c in range(3)], -1) / 2
        img += rng.normal(0, 20, img.shape)
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def write_db(path: str, jpegs: list[bytes], labels: list[int]) -> None:
    from framework.db.image_db import image_record, write_records

    write_records(path, (image_record(j, lab) for j, lab in zip(jpegs, labels)), "minidb")


def framework_reader(path: str, threads: int, scale: int, crop: int, order: str = "NCHW", seed: int = 1):
    """(workspace, ImageInput operator) reading ``path``."""
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.ops import create_operator

    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateDB", [], ["reader"], db=path, db_type="minidb"))
    op_def = CreateOperator(
        "ImageInput", ["reader"], ["data", "label"], batch_size=BATCH, scale=scale, crop=crop, mirror=1,
        mean_per_channel=MEAN, std_per_channel=STD, order=order, decode_threads=max(threads, 1),
    )  # fmt: skip
    op_def.device_option.random_seed = seed
    return ws, create_operator(op_def, ws)


class TorchImages:
    """A torch Dataset doing ImageInput's steps with Pillow + numpy (decode, BGR, scale, crop, mirror, normalize)."""

    def __init__(self, jpegs: list[bytes], labels: list[int], scale: int, crop: int) -> None:
        self.jpegs, self.labels, self.scale, self.crop = jpegs, labels, scale, crop
        self.mean = np.array(MEAN, np.float32)
        self.inv_std = (1 / np.array(STD, np.float32)).astype(np.float32)

    def __len__(self) -> int:
        return 1 << 30  # an endless stream, as a DB reader that wraps around

    def __getitem__(self, i: int):
        import torch
        from PIL import Image

        k = i % len(self.jpegs)
        rng = np.random.default_rng(i)
        with Image.open(io.BytesIO(self.jpegs[k])) as im:
            im = im.convert("RGB")
            w, h = im.size
            s = self.scale
            sw, sh = (s, int(h * s / w)) if h > w else (int(w * s / h), s)
            if (sw, sh) != (w, h):
                im = im.resize((sw, sh), Image.Resampling.BOX if sw <= w else Image.Resampling.BILINEAR)
            a = np.asarray(im)[:, :, ::-1]
        y, x = rng.integers(0, a.shape[0] - self.crop + 1), rng.integers(0, a.shape[1] - self.crop + 1)
        win = a[y : y + self.crop, x : x + self.crop]
        if rng.random() < 0.5:
            win = win[:, ::-1]
        chw = ((win.astype(np.float32) - self.mean) * self.inv_std).transpose(2, 0, 1)
        return torch.from_numpy(np.ascontiguousarray(chw)), self.labels[k]


def torch_loader(jpegs, labels, threads: int, scale: int, crop: int):
    import torch

    ds = TorchImages(jpegs, labels, scale, crop)
    kw = dict(num_workers=threads, persistent_workers=True, prefetch_factor=2) if threads else {}
    return iter(torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False, **kw))


def rounds_of(
    contenders: dict, rounds: int, inner: int, untimed: dict | None = None, settle: float = 0.0
) -> dict[str, float]:
    """Median seconds per call, contenders interleaved round by round (order rotated). Before each
    timed round: ``settle`` seconds idle (background work of the previous contender, e.g. DataLoader
    workers refilling their prefetch queue, ends outside every timing), then ``untimed[name]``
    calls of that contender (batches a loader prefetched while idle are taken untimed, so a round
    times its steady production rate)."""
    untimed = untimed or {}
    for fn in contenders.values():
        fn()
    names = list(contenders)
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            time.sleep(settle)
            for _ in range(untimed.get(name, 0)):
                contenders[name]()
            t0 = time.perf_counter()
            for _ in range(inner):
                contenders[name]()
            samples[name].append((time.perf_counter() - t0) / inner)
    return {k: statistics.median(v) for k, v in samples.items()}


def decode_rows(tmp: str, threads_list: list[int], rounds: int, n_images: int = 256) -> list[list[str]]:
    jpegs = make_jpegs(n_images, 128)
    labels = [i % 10 for i in range(len(jpegs))]
    path = os.path.join(tmp, "decode.minidb")
    write_db(path, jpegs, labels)
    rows = []
    for t in threads_list:
        _, op = framework_reader(path, t, 112, 96)
        loader = torch_loader(jpegs, labels, t, 112, 96)
        med = rounds_of(
            {"framework": op.run, "torch": lambda loader=loader: next(loader)}, rounds, inner=8,
            untimed={"torch": 2 * t}, settle=0.5,
        )  # fmt: skip
        f, p = BATCH / med["framework"], BATCH / med["torch"]
        rows.append(
            [
                f"decode+augment 128px JPEG -> 96x96, batch 32, {t} thread(s)",
                f"{f:.0f} img/s",
                f"{p:.0f} img/s",
                f"{p / f:.2f}x",
                f"ImageInput decode_threads={max(t, 1)} vs DataLoader num_workers={t}",
            ]
        )
    return rows


def _torch_cnn():
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 4),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    return model, opt


def train_rows(tmp: str, threads: int, steps: int) -> list[list[str]]:
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "image_cnn"))
    import generate  # models/image_cnn/generate.py
    import make_images

    from framework.memory.workspace import Workspace

    folder = os.path.join(tmp, "shapes")
    make_images.make_images(folder, per_class=64, seed=0)
    files = sorted((os.path.join(r, f), r) for r, _, fs in os.walk(folder) for f in fs)
    classes = sorted({r for _, r in files})
    jpegs = [open(f, "rb").read() for f, _ in files]
    labels = [classes.index(r) for _, r in files]
    order = np.random.default_rng(0).permutation(len(jpegs))
    jpegs, labels = [jpegs[i] for i in order], [labels[i] for i in order]
    os.makedirs(os.path.join(tmp, "data", "images"), exist_ok=True)
    write_db(os.path.join(tmp, "data", "images", "train.minidb"), jpegs, labels)
    write_db(os.path.join(tmp, "data", "images", "test.minidb"), jpegs[:120], labels[:120])

    plan = generate.build_plan(iters=steps)
    nets = {n.name: n for n in plan.network}
    ws = Workspace(root_folder=tmp)
    ws.run_net_once(nets["init"])
    train = nets["train"]
    deq_def = type(train)()
    deq_def.name = "dequeue"
    deq_def.op.add().CopyFrom(train.op[0])  # DequeueBlobs
    rest = type(train)()
    rest.CopyFrom(train)
    del rest.op[0]
    rest.name = "train_rest"
    for op in nets["prefetch"].op:
        if op.type == "ImageInput":
            for a in op.arg:
                if a.name == "decode_threads":
                    a.i = max(threads, 1)
    prefetch = ws.create_net(nets["prefetch"])
    deq, step = ws.create_net(deq_def), ws.create_net(rest)
    stop = threading.Event()

    def producer():
        while not stop.is_set():
            prefetch.run()
            if bool(ws.fetch_blob("queue_closed")):
                return

    th = threading.Thread(target=producer, daemon=True)
    th.start()
    waits, totals = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        deq.run()
        t1 = time.perf_counter()
        step.run()
        t2 = time.perf_counter()
        waits.append(t1 - t0)
        totals.append(t2 - t0)
    stop.set()
    ws.run_net_once(nets["close"])
    th.join()
    warm = max(steps // 10, 3)
    fw_ips = BATCH * (len(totals) - warm) / sum(totals[warm:])
    wait_share = sum(waits[warm:]) / sum(totals[warm:])
    fed = [time.perf_counter()]
    for _ in range(steps // 2):
        step.run()
        fed.append(time.perf_counter())
    fed_ips = BATCH * (steps // 2) / (fed[-1] - fed[0])

    torch.set_num_threads(1)
    model, opt = _torch_cnn()
    loader = torch_loader(jpegs, labels, threads, 32, 28)
    lossf = torch.nn.CrossEntropyLoss()
    tt = []
    for _ in range(steps):
        t0 = time.perf_counter()
        x, y = next(loader)
        opt.zero_grad()
        lossf(model(x), torch.as_tensor(y)).backward()
        opt.step()
        tt.append(time.perf_counter() - t0)
    pt_ips = BATCH * (len(tt) - warm) / sum(tt[warm:])
    return [
        [
            f"train image_cnn from 32px JPEGs (crop 28, batch 32), {threads} decode thread(s)",
            f"{fw_ips:.0f} img/s",
            f"{pt_ips:.0f} img/s",
            f"{pt_ips / fw_ips:.2f}x",
            f"train step waits {100 * wait_share:.1f}% of its time in DequeueBlobs (target <= 10%); "
            f"train net fed from memory {fed_ips:.0f} img/s; torch: DataLoader num_workers={threads}",
        ]
    ]


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--train-threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=120)
    args = ap.parse_args(argv)
    pin_blas_threads(1)
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        rows = decode_rows(tmp, args.threads, args.rounds)
        if args.steps:
            rows += train_rows(tmp, args.train_threads, args.steps)
    text = markdown_table(rows, ["benchmark", "framework", "PyTorch DataLoader", "torch / framework", "notes"])
    print(text)
    return text


if __name__ == "__main__":
    main()
