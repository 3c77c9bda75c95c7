"""framework.caffe2.python.data_workers: fetcher threads + rebatching enqueuer feed a net's DequeueBlobs; every
row fetched arrives once, in batches of exactly batch_size; stop() ends the threads."""

from __future__ import annotations

import threading

import numpy as np

from framework import core, workspace
from framework.caffe2.python import data_workers


def test_rebatched_rows_arrive_once_in_full_batches():
    workspace.ResetWorkspace()
    lock = threading.Lock()
    counter = [0]

    def fetch(worker_id, batch_size):
        with lock:
            start = counter[0]
            counter[0] += 3
        ids = np.arange(start, start + 3, dtype=np.int64)  # chunks of 3, batches of 4: rebatching
        return [ids.astype(np.float32)[:, None] * np.ones((1, 2), np.float32), ids]

    net = core.Net("dw_train")
    coord = data_workers.init_data_input_workers(
        net, ["x", "ids"], fetch, 4, num_worker_threads=2, input_source_name="t1"
    )
    coord.start()
    workspace.CreateNet(net)
    seen = []
    for _ in range(6):
        workspace.RunNet(net.Proto().name)
        x, ids = workspace.FetchBlob("x"), workspace.FetchBlob("ids")
        assert x.shape == (4, 2) and ids.shape == (4,)
        np.testing.assert_array_equal(x[:, 0], ids.astype(np.float32))  # columns stay aligned
        seen += ids.tolist()
    assert len(set(seen)) == len(seen) == 24
    assert coord.stop()
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("data_workers fetcher"))


def test_fetch_errors_stop_the_source_and_dont_rebatch():
    workspace.ResetWorkspace()
    net = core.Net("dw_direct")
    coord = data_workers.init_data_input_workers(
        net,
        ["y"],
        lambda w, b: [np.full((5,), w, np.float32)],
        2,
        num_worker_threads=1,
        input_source_name="t2",
        dont_rebatch=True,
    )
    coord.start()
    workspace.RunNetOnce(net)
    assert workspace.FetchBlob("y").shape == (5,)  # chunks as fetched
    assert coord.stop()
    workspace.ResetWorkspace()
    net2 = core.Net("dw_bad")

    def bad(w, b):
        raise RuntimeError("disk gone")

    coord = data_workers.init_data_input_workers(
        net2, ["z"], bad, 2, num_worker_threads=1, input_source_name="t3", timeout=2
    )
    coord.start()
    try:
        workspace.RunNetOnce(net2)
        raised = False
    except RuntimeError:
        raised = True
    assert raised  # the source stopped: its queue is closed, DequeueBlobs fails instead of hanging
    assert coord.stop()


def test_each_fetcher_thread_takes_the_next_worker_id():
    workspace.ResetWorkspace()
    seen_ids = set()

    def fetch(worker_id, batch_size):
        seen_ids.add(worker_id)
        return [np.zeros((batch_size, 1), np.float32)]

    before = data_workers.global_coordinator._fetcher_id_seq
    net = core.Net("dw_ids")
    coord = data_workers.init_data_input_workers(net, ["z"], fetch, 2, num_worker_threads=3, input_source_name="t_ids")
    # as Caffe2: three fetchers, ids before .. before + 2
    assert data_workers.global_coordinator._fetcher_id_seq == before + 3
    assert data_workers.global_coordinator._worker_ids[-3:] == [before, before + 1, before + 2]
    coord.start()
    workspace.CreateNet(net)
    for _ in range(6):
        workspace.RunNet(net.Proto().name)
    assert coord.stop()
    assert seen_ids <= {before, before + 1, before + 2} and seen_ids
