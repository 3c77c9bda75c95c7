"""caffe2.python.checkpoint: Job, CheckpointManager, MultiNodeCheckpointManager, JobRunner, epoch_limiter."""

import logging
import os

import numpy as np
import pytest

from framework import caffe2 as caffe2_hook
from framework import core, workspace
from framework.caffe2.python import checkpoint as c2ckpt
from framework.caffe2.python.checkpoint import (
    CheckpointManager,
    Job,
    JobRunner,
    MultiNodeCheckpointManager,
    UploadTaskGroupBuilder,
    db_name,
    epoch_limiter,
)
from framework.caffe2.python.net_builder import ops
from framework.caffe2.python.session import LocalSession
from framework.caffe2.python.task import Cluster, Node, Task, TaskGroup, WorkspaceType
from framework.db.checkpoint import list_checkpoint


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _counting_job(node, num_epochs, step=1.0):
    """A job whose init group sets ``<node>/acc`` to 0 and whose every epoch adds ``step`` to it."""
    acc = f"{node}/acc"
    with Job() as job:
        with Node(node):
            with job.init_group:
                init = core.Net(f"{node}_init")
                init.ConstantFill([], [acc], shape=[1], value=0.0)
                Task(step=init)
            body = core.Net(f"{node}_epoch")
            body.Add([acc, body.Const(np.array([step], np.float32))], [acc])
            Task(step=body)
            epoch_limiter(job, num_epochs)
    return job, acc


def _ws_session():
    ws = workspace.C.Workspace()
    return ws, LocalSession(ws)


def test_db_name_joins_prefix_or_concatenates_path_prefix():
    assert c2ckpt.get_ckpt_filename("trainer_0", 3) == "trainer_0.3"
    assert db_name(3, "trainer_0", "/ckpt") == os.path.join("/ckpt", "trainer_0.3")
    # a path prefix is concatenated as it is (no separator added)
    assert db_name(3, "trainer_0", "/ckpt", path_prefix="hdfs://x/run_") == "hdfs://x/run_trainer_0.3"


def test_job_runner_saves_every_epoch_and_stops_at_the_limit(tmp_path):
    with Cluster():
        job, acc = _counting_job("n0", num_epochs=3)
        job.compile(LocalSession)
        ws, session = _ws_session()
        epochs = JobRunner(job, CheckpointManager(str(tmp_path), "n0", "minidb")).train(session)
    assert epochs == 3
    np.testing.assert_array_equal(ws.fetch_blob(acc), [3.0])
    for epoch in range(4):
        path = tmp_path / f"n0.{epoch}"
        assert path.exists(), path
        saved = {r["name"] for r in list_checkpoint(str(path))}
        # the blob list comes first and the init group's blobs are saved
        assert {"blob_names", acc} <= saved


def test_each_checkpoint_holds_the_state_of_its_epoch(tmp_path):
    with Cluster():
        job, acc = _counting_job("n0", num_epochs=3, step=2.0)
        job.compile(LocalSession)
        ws, session = _ws_session()
        manager = CheckpointManager(str(tmp_path), "n0", "minidb")
        JobRunner(job, manager).train(session)
        for epoch in range(4):
            session.run(manager.load(epoch))
            np.testing.assert_array_equal(ws.fetch_blob(acc), [2.0 * epoch])


def test_resume_loads_the_epoch_instead_of_running_init(tmp_path):
    with Cluster():
        job, acc = _counting_job("n0", num_epochs=5)
        job.compile(LocalSession)
        _, session = _ws_session()
        JobRunner(job, CheckpointManager(str(tmp_path), "n0", "minidb")).train(session)
        ws, session = _ws_session()
        ws.feed_blob(acc, np.array([100.0], np.float32))  # the init group would reset this to 0
        runner = JobRunner(job, CheckpointManager(str(tmp_path), "n0", "minidb"), resume_from_epoch=2)
        # the 2018 spelling: the runner is callable
        last = runner(session)
    # the epoch counter was restored too (epoch 2 of 5): three more epochs ran after the loaded 2.0
    assert last == 5
    np.testing.assert_array_equal(ws.fetch_blob(acc), [5.0])


def test_a_checkpoint_that_cannot_be_written_does_not_stop_training(tmp_path, caplog):
    missing = str(tmp_path / "no" / "such" / "dir")
    with Cluster():
        job, acc = _counting_job("n0", num_epochs=2)
        job.compile(LocalSession)
        ws, session = _ws_session()
        with caplog.at_level(logging.WARNING):
            epochs = JobRunner(job, MultiNodeCheckpointManager(missing, "minidb")).train(session)
    assert epochs == 2
    np.testing.assert_array_equal(ws.fetch_blob(acc), [2.0])
    assert "Unable to write checkpoint for epoch 0" in caplog.text


def test_multi_node_manager_names_and_partial_loads(tmp_path):
    with Cluster():
        job, acc = _counting_job("trainer_7", num_epochs=2, step=3.0)
        job.compile(LocalSession)
        _, session = _ws_session()
        manager = MultiNodeCheckpointManager(str(tmp_path), "minidb")
        runner = JobRunner(job, manager)
        runner.train(session)
        assert manager.get_ckpt_db_name("trainer_7", 1) == os.path.join(str(tmp_path), "trainer_7.1")
        assert manager.get_ckpt_db_name("other", 1) is None
        ws, session = _ws_session()
        assert runner.load_blobs_from_checkpoints([acc], 1, session) is True
        names = list(ws.blobs)
        # only the blobs asked for come from the file (not its blob list, nor the epoch counter)
        assert acc in names and "blob_names" not in names
        assert not any("epoch_counter" in n or "CreateCounter" in n for n in names)
        np.testing.assert_array_equal(ws.fetch_blob(acc), [3.0])
        # epoch 3 was never written
        assert runner.load_blobs_from_checkpoints([acc], 3, session) is False
    with pytest.raises(ValueError, match="Checkpoint manager is None"):
        JobRunner(job).load_blobs_from_checkpoints([acc], 1, session)


def test_multi_node_manager_refuses_other_nodes_after_init(tmp_path):
    manager = MultiNodeCheckpointManager(str(tmp_path), "minidb")
    with pytest.raises(RuntimeError, match="init must be called first"):
        manager.save(0)
    manager.init(["a", "b"])
    assert isinstance(manager.init(["a", "b"]), TaskGroup)  # same nodes: kept
    with pytest.raises(ValueError, match="initialized for nodes"):
        manager.init(["a"])


def test_single_node_manager_refuses_several_nodes(tmp_path):
    with pytest.raises(ValueError, match="single node"):
        CheckpointManager(str(tmp_path), "n", "minidb").init(["a", "b"])


def test_upload_download_and_exit_groups_run_in_order(tmp_path):
    order = []

    def mark(name):
        def op(inputs, outputs):
            order.append(name)

        return op

    class Upload(UploadTaskGroupBuilder):
        def build(self, epoch, checkpoint_manager):
            order.append(("upload", epoch, checkpoint_manager.get_ckpt_db_name("n0", epoch)))
            return TaskGroup(WorkspaceType.GLOBAL)

    with Cluster():
        job, _ = _counting_job("n0", num_epochs=2)
        with Node("n0"):
            with job.download_group, Task():
                ops.Python(mark("download"))([], [])
            with job.exit_group, Task():
                ops.Python(mark("exit"))([], [])
        _, session = _ws_session()
        JobRunner(job, MultiNodeCheckpointManager(str(tmp_path), "minidb"), upload_task_group_builder=Upload()).train(
            session
        )
    assert order == [("upload", 2, os.path.join(str(tmp_path), "n0.2")), "download", "exit"]
    with pytest.raises(NotImplementedError):
        UploadTaskGroupBuilder().build(0, None)


def test_stop_conditions_and_their_2018_names():
    job = Job()
    blob = core.BlobReference("done")
    job.add_stop_signal(blob)  # a blob becomes the output of a new task of the epoch group
    assert job.stop_signals is job.stop_conditions
    assert len(job.stop_conditions) == 1
    assert job.epoch_group.tasks()[0].output_names() == ["done"]
    with pytest.raises(TypeError, match="TaskOutput or a BlobReference"):
        job.add_stop_condition("done")


def test_metadata_handler_decides_the_resume_epoch_and_hears_reports(tmp_path):
    calls = []

    class Handler:
        def set_params(self, **kw):
            calls.append(("set_params", kw["node_names"]))

        def last_epoch(self, user_epoch=None):
            return None

        def cp_accessible(self, epoch=None):
            return True

        def write(self, epoch):
            calls.append(("write", epoch))

        def report(self, action_name, stats):
            calls.append((action_name, sorted(stats)))

    with Cluster():
        job, _ = _counting_job("n0", num_epochs=1)
        _, session = _ws_session()
        JobRunner(job, CheckpointManager(str(tmp_path), "n0", "minidb", metadata_handler=Handler())).train(session)
    db0, db1 = (os.path.join(str(tmp_path), f"n0.{e}") for e in (0, 1))
    assert calls == [
        ("set_params", ["n0"]),
        ("write", 0),
        ("checkpoint_save", [db0]),
        ("write", 1),
        ("checkpoint_save", [db1]),
    ]


def test_hook_maps_caffe2_checkpoint_here_and_framework_checkpoint_is_unchanged():
    import framework.checkpoint
    import framework.db.checkpoint

    assert framework.checkpoint is framework.db.checkpoint
    assert caffe2_hook.target_of("caffe2.python.checkpoint") == "framework.caffe2.python.checkpoint"
