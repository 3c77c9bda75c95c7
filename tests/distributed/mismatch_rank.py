"""Run on 2 ranks by test_mismatch.py: every collective whose ranks hold tensors of different dtypes or
shapes raises the same DistributedError on every rank, naming the op, the blob and each rank's dtype and
shape, before MPI moves a byte (outputs untouched); the world still works afterwards."""

import sys

import numpy as np

from framework.core import CreateOperator, Net
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once


def main():
    ws = Workspace()
    run = lambda t, i, o, **kw: run_operator_once(ws, CreateOperator(t, i, o, **kw))  # noqa: E731
    run("CreateCommonWorld", [], ["cw"])
    rank = ws.get_blob("cw")._obj.rank
    tried = 0

    def expect(op, inputs, outputs, values, words, **kw):
        nonlocal tried
        tried += 1
        for name, v in values.items():
            ws.feed_blob(name, v)
        before = {n: ws.fetch_blob(n).copy() for n in outputs if ws.has_blob(n)}
        try:
            run(op, ["cw", *inputs], outputs, **kw)
        except FrameworkError as e:
            msg = str(e)
            for w in [op, "rank 0", "rank 1", *words]:
                assert w in msg, (w, msg)
        else:
            raise AssertionError(f"{op} on mismatched ranks did not raise")
        for n, v in before.items():
            np.testing.assert_array_equal(ws.fetch_blob(n), v)  # nothing moved

    f32, i32 = np.ones(4, np.float32), np.ones(4, np.int32)
    mine = lambda a, b: a if rank == 0 else b  # noqa: E731
    expect("Allreduce", ["x"], ["x"], {"x": mine(f32, i32)}, ["'x'", "float32 [4]", "int32 [4]"])
    expect("Allreduce", ["x"], ["x"], {"x": mine(f32, np.ones(5, np.float32))}, ["float32 [4]", "float32 [5]"])
    expect("MPIAllreduce", ["x"], ["y"], {"x": mine(f32, i32)}, ["float32 [4]", "int32 [4]"])
    expect("Allreduce", ["a", "b"], ["a", "b"], {"a": f32, "b": mine(f32, np.ones((2, 2), np.float32))}, ["[2, 2]"])
    expect("Broadcast", ["x"], ["x"], {"x": mine(f32, np.ones(8, np.float32))}, ["float32 [8]"])
    expect("MPIBroadcast", ["x"], ["x"], {"x": mine(f32, i32)}, ["int32 [4]"])
    expect("Reduce", ["x"], ["r"], {"x": mine(f32, np.ones(3, np.float32))}, ["float32 [3]"])
    expect("Allgather", ["x"], ["g"], {"x": mine(f32, np.ones(6, np.float32))}, ["float32 [6]"])
    expect(
        "MPIAllgather", ["x"], ["g"], {"x": mine(np.ones((2, 3), np.float64), np.ones((2, 4), np.float64))}, ["[2, 4]"]
    )
    expect("AllreduceBuckets", ["x", "z"], ["x", "z"], {"x": f32, "z": mine(i32, np.ones(4, np.int64))}, ["int64"])
    counts = np.array([2, 2], np.int32)
    expect("ReduceScatter", ["x", "c"], ["x"], {"x": mine(f32, i32), "c": counts}, ["int32 [4]"])

    # The compiled in-place path (a net run twice) checks too
    tried += 1
    ws.feed_blob("p", mine(f32, i32))
    net = Net("mismatch")
    net.Allreduce(["cw", "p"], ["p"])
    ws.create_net(net)
    for _ in range(2):
        try:
            ws.run_net(net.Name())
        except FrameworkError as e:
            assert "rank 0" in str(e) and "int32 [4]" in str(e), str(e)
        else:
            raise AssertionError("the net's Allreduce on mismatched ranks did not raise")

    # The world still works: a matching Allreduce sums
    ws.feed_blob("ok", np.full(3, rank + 1, np.float32))
    run("Allreduce", ["cw", "ok"], ["ok"])
    np.testing.assert_array_equal(ws.fetch_blob("ok"), np.full(3, 3, np.float32))
    print(f"OK rank {rank} tried {tried}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
