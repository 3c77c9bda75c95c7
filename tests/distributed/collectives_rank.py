"""Run on every rank by test_collectives.py: each collective op against numpy on this rank's data."""

import sys

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once


def data(rank, shape=(3, 4), dtype=np.float32, salt=0):
    return (np.random.default_rng(rank * 100 + salt).standard_normal(shape) * 10).astype(dtype)


def main():
    ws = Workspace()
    run = lambda t, i, o, **kw: run_operator_once(ws, CreateOperator(t, i, o, **kw))  # noqa: E731
    run("CreateCommonWorld", [], ["cw"])
    world = ws.get_blob("cw")._obj
    rank, size = world.rank, world.size
    ranks = range(size)

    # Allreduce, in place, one tensor (zero-copy) and two tensors (summed over inputs and ranks)
    for dtype in (np.float32, np.float64, np.int64):
        x = data(rank, dtype=dtype)
        ws.feed_blob("x", x)
        buf = ws.get_blob("x").get_tensor().data()
        run("Allreduce", ["cw", "x"], ["x"])
        assert ws.get_blob("x").get_tensor().data() is buf or np.shares_memory(ws.fetch_blob("x"), buf)
        np.testing.assert_allclose(ws.fetch_blob("x"), sum(data(r, dtype=dtype) for r in ranks), rtol=1e-6)
    ws.feed_blob("a", data(rank, salt=1))
    ws.feed_blob("b", data(rank, salt=2))
    run("Allreduce", ["cw", "a", "b"], ["a", "b"])
    total = sum(data(r, salt=1) + data(r, salt=2) for r in ranks)
    np.testing.assert_allclose(ws.fetch_blob("a"), total, rtol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("b"), total, rtol=1e-5)
    ws.feed_blob("m", data(rank))
    run("MPIAllreduce", ["cw", "m"], ["m_sum"])
    np.testing.assert_allclose(ws.fetch_blob("m_sum"), sum(data(r) for r in ranks), rtol=1e-6)

    # AllreduceBuckets: each tensor summed on its own; small ones packed, a 1 MiB one in place
    sizes = [(3,), (2, 2), (1 << 18,)]
    for i, shape in enumerate(sizes):
        ws.feed_blob(f"bk{i}", data(rank, shape, salt=20 + i))
    ws.feed_blob("bki", data(rank, (5,), np.int64, salt=30))
    names = [f"bk{i}" for i in range(len(sizes))] + ["bki"]
    for _ in range(2):  # twice: the packing buffer is reused
        run("AllreduceBuckets", ["cw", *names], names)
    for i, shape in enumerate(sizes):
        once = sum(data(r, shape, salt=20 + i) for r in ranks)
        np.testing.assert_allclose(ws.fetch_blob(f"bk{i}"), once * size, rtol=1e-4, atol=1e-3)  # run 2 sums the sums
    np.testing.assert_array_equal(ws.fetch_blob("bki"), sum(data(r, (5,), np.int64, salt=30) for r in ranks) * size)

    # Broadcast from the last rank, and MPIBroadcast from 0
    root = size - 1
    ws.feed_blob("p", data(rank, salt=3))
    ws.feed_blob("q", data(rank, salt=4))
    run("Broadcast", ["cw", "p", "q"], ["p", "q"], root=root)
    np.testing.assert_array_equal(ws.fetch_blob("p"), data(root, salt=3))
    np.testing.assert_array_equal(ws.fetch_blob("q"), data(root, salt=3))
    ws.feed_blob("r", data(rank, dtype=np.int32))
    run("MPIBroadcast", ["cw", "r"], ["r"], root=0)
    np.testing.assert_array_equal(ws.fetch_blob("r"), data(0, dtype=np.int32))

    # Reduce into rank 0
    ws.feed_blob("s", data(rank, salt=5))
    run("Reduce", ["cw", "s"], ["s_red"], root=0)
    if rank == 0:
        np.testing.assert_allclose(ws.fetch_blob("s_red"), sum(data(r, salt=5) for r in ranks), rtol=1e-6)
    run("MPIReduce", ["cw", "s"], ["s2"], root=size - 1)
    if rank == size - 1:
        np.testing.assert_allclose(ws.fetch_blob("s2"), sum(data(r, salt=5) for r in ranks), rtol=1e-6)

    # Allgather (Gloo: 1-D, rank by rank, inputs concatenated) and MPIAllgather (axis 0)
    ws.feed_blob("g1", data(rank, (2, 2), salt=6))
    ws.feed_blob("g2", data(rank, (4,), salt=7))
    run("Allgather", ["cw", "g1", "g2"], ["g"])
    want = np.concatenate([np.concatenate([data(r, (2, 2), salt=6).ravel(), data(r, (4,), salt=7)]) for r in ranks])
    np.testing.assert_array_equal(ws.fetch_blob("g"), want)
    run("MPIAllgather", ["cw", "g1"], ["mg"])
    np.testing.assert_array_equal(ws.fetch_blob("mg"), np.concatenate([data(r, (2, 2), salt=6) for r in ranks]))

    # ReduceScatter: this rank's segment holds the sum
    counts = np.array([(12 // size) + (1 if r < 12 % size else 0) for r in ranks], np.int32)
    ws.feed_blob("counts", counts)
    ws.feed_blob("rs", data(rank, salt=8))
    run("ReduceScatter", ["cw", "rs", "counts"], ["rs"])
    start = int(counts[:rank].sum())
    seg = slice(start, start + int(counts[rank]))
    full = sum(data(r, salt=8) for r in ranks).ravel()
    got = ws.fetch_blob("rs").ravel()
    np.testing.assert_allclose(got[seg], full[seg], rtol=1e-5)
    mask = np.ones(12, bool)
    mask[seg] = False
    np.testing.assert_array_equal(got[mask], data(rank, salt=8).ravel()[mask])

    # point to point around a ring, with and without a header, tag from an input
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    ws.feed_blob("msg", data(rank, (2, 5), np.float64, salt=9))
    ws.feed_blob("tag", np.array([7], np.int32))
    ws.feed_blob("got", np.zeros(0, np.float32))
    if rank % 2 == 0:
        run("SendTensor", ["cw", "msg"], [], dst=nxt, tag=3)
        run("ReceiveTensor", ["cw", "got"], ["got", "src", "tg"], src=prv)
    else:
        run("ReceiveTensor", ["cw", "got"], ["got", "src", "tg"], src=prv)
        run("SendTensor", ["cw", "msg"], [], dst=nxt, tag=3)
    np.testing.assert_array_equal(ws.fetch_blob("got"), data(prv, (2, 5), np.float64, salt=9))
    assert ws.fetch_blob("src")[0] == prv and ws.fetch_blob("tg")[0] == 3
    ws.feed_blob("raw", np.zeros((2, 5), np.float64))
    if rank == 0:
        run("MPISendTensor", ["cw", "msg"], [], dst=1, raw_buffer=1)
    elif rank == 1:
        run("MPIReceiveTensor", ["cw", "raw"], ["raw", "src", "tg"], src=0, raw_buffer=1)
        np.testing.assert_array_equal(ws.fetch_blob("raw"), data(0, (2, 5), np.float64, salt=9))

    # a clone is a separate world; a destroyed world is refused
    run("CloneCommonWorld", ["cw"], ["cw2"])
    run("Barrier", ["cw2"], [])
    run("DestroyCommonWorld", ["cw2"], ["cw2"])
    try:
        run("Barrier", ["cw2"], [])
    except RuntimeError as e:
        assert "was destroyed" in str(e), e
    else:
        raise AssertionError("a destroyed world was used")
    # a net written for Gloo: store handler + CreateCommonWorld(size, rank) + engine GLOO
    run("FileStoreHandlerCreate", [], ["store"], path="/nonexistent/store", prefix="x")
    op = CreateOperator("CreateCommonWorld", ["store"], ["gw"], size=size, rank=rank, engine="GLOO")
    run_operator_once(ws, op)
    try:
        run("CreateCommonWorld", [], ["bad"], size=size + 1)
    except RuntimeError as e:
        assert f"asks for size {size + 1}, but this process is rank {rank} of an MPI job of {size}" in str(e), e
    else:
        raise AssertionError("a size mismatch was accepted")
    print(f"OK rank {rank} of {size}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
