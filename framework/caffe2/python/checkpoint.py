"""Epoch-level checkpointing of jobs, Caffe2's ``caffe2.python.checkpoint``.

A ``Job`` holds four TaskGroups: ``init_group`` (run once, GLOBAL workspace: the state worth
saving), ``epoch_group`` (run in a loop until one of the ``stop_conditions`` is true after an epoch),
``download_group`` and ``exit_group`` (run once each at the end). ``JobRunner(job, manager).train(session)``
runs it; with a ``CheckpointManager`` (one node) or ``MultiNodeCheckpointManager`` (one manager per node
of the job's init group) every blob that exists in the session's workspace after the init group is saved
to ``<db_prefix>/<node>.<epoch>`` after init (epoch 0) and after each epoch, and ``resume_from_epoch=N``
loads epoch N instead of running the init group and goes on with epoch N + 1.

Both Caffe2 trees' spellings are accepted: ``add_stop_condition`` / ``stop_conditions`` (2020) and
``add_stop_signal`` / ``stop_signals`` (2018); ``Job.compile(session_class)`` compiles the groups in place
and returns the job (2020 mutates, 2018 returns a compiled copy: returning ``self`` serves both);
``JobRunner.train(session)`` is also ``JobRunner(...)(session)``.

Our own checkpoint API (save/load a workspace to a file) is ``framework.checkpoint``; this module is the
job machinery of Caffe2 built on it through the Save/Load/DBExists operators.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

from framework import core
from framework.caffe2.python import context
from framework.caffe2.python.checkpoint_runner import JobRunner, UploadTaskGroupBuilder, epoch_limiter
from framework.caffe2.python.net_builder import ops
from framework.caffe2.python.task import Node, Task, TaskGroup, TaskOutput, WorkspaceType, final_output

__all__ = [
    "CheckpointManager",
    "Job",
    "JobRunner",
    "MultiNodeCheckpointManager",
    "UploadTaskGroupBuilder",
    "db_name",
    "epoch_limiter",
    "get_ckpt_filename",
]

logger = logging.getLogger(__name__)


@context.define_context()
class Job:
    """The four task groups of a job (see module doc). A context: ``with Job() as job:`` makes it
    ``Job.current()`` and collects the Tasks created inside into its epoch group."""

    def __init__(
        self,
        init_group: TaskGroup | None = None,
        epoch_group: TaskGroup | None = None,
        download_group: TaskGroup | None = None,
        exit_group: TaskGroup | None = None,
        stop_conditions: list[TaskOutput] | None = None,
        nodes_to_checkpoint: list[str] | None = None,
        stop_signals: list[TaskOutput] | None = None,
    ) -> None:
        self.init_group = init_group or TaskGroup(workspace_type=WorkspaceType.GLOBAL)
        self.epoch_group = epoch_group or TaskGroup()
        self.download_group = download_group or TaskGroup()
        self.exit_group = exit_group or TaskGroup()
        self.stop_conditions = list(stop_conditions or stop_signals or [])
        self._nodes_to_checkpoint = nodes_to_checkpoint

    @property
    def stop_signals(self) -> list[TaskOutput]:
        """The 2018 name of ``stop_conditions`` (the same list)."""
        return self.stop_conditions

    def nodes_to_checkpoint(self) -> list[str]:
        """The nodes given at construction, else those the init group's tasks run on."""
        return self._nodes_to_checkpoint or self.init_group.used_nodes()

    def compile(self, session_class: Any) -> Job:
        """Fix the nodes to checkpoint and compile every group with ``session_class.compile`` (which
        freezes it: no Task can be added after); returns ``self``."""
        self._nodes_to_checkpoint = self.nodes_to_checkpoint()
        for group in (self.init_group, self.epoch_group, self.download_group, self.exit_group):
            session_class.compile(group)
        return self

    def __enter__(self) -> Job:
        self.epoch_group.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self.epoch_group.__exit__(*args)

    def add_stop_condition(self, output: Any) -> None:
        """Stop the epoch loop once ``output`` (a TaskOutput, or a blob: then fetched by a new Task of
        the epoch group) is true after an epoch."""
        if isinstance(output, core.BlobReference):
            output = Task(outputs=[output], group=self.epoch_group).outputs()[0]
        if not isinstance(output, TaskOutput):
            raise TypeError(f"a stop condition is a TaskOutput or a BlobReference, got {type(output).__name__}")
        self.stop_conditions.append(output)

    add_stop_signal = add_stop_condition


def get_ckpt_filename(node_name: str, epoch: int) -> str:
    """``<node_name>.<epoch>``: the file name of a node's checkpoint of an epoch."""
    return f"{node_name}.{epoch}"


def db_name(epoch: int, node_name: str, db_prefix: str, path_prefix: str | None = None) -> str:
    """The checkpoint's path: ``path_prefix + file name`` when ``path_prefix`` is given (plain string
    concatenation, as Caffe2), else ``os.path.join(db_prefix, file name)``."""
    filename = get_ckpt_filename(node_name, epoch)
    return path_prefix + filename if path_prefix else os.path.join(db_prefix, filename)


class CheckpointManager:
    """Saves and loads one node's global workspace at epoch boundaries (see module doc).

    ``init`` builds the Task that records which blobs to checkpoint (every blob of the session's
    workspace, parents' excluded, or the list stored in the checkpoint of ``retrieve_from_epoch``);
    ``save(epoch)`` / ``load(epoch)`` build Tasks that write / read them, each timed (the duration
    is reported to the ``metadata_handler``, if any, with ``report_checkpoint_stats``). Paths are used
    as given (``absolute_path``), not under the workspace's root folder.
    """

    BLOB_NAMES = "blob_names"

    def __init__(self, db_prefix: str, node_name: str, db_type: str, metadata_handler: Any = None) -> None:
        self._db_prefix = db_prefix
        self._node_name = node_name
        self._db_type = db_type
        self._metadata_handler = metadata_handler
        # the name list is the first blob of every checkpoint file
        self._net = core.Net("!!checkpoint_mngr")
        self._blob_names = self._net.AddExternalInput(self.BLOB_NAMES)
        self._names_output: TaskOutput | None = None
        self._path_prefix: str | None = None
        self._path_type: str | None = None
        self._current_db_name: str | None = None
        self._current_checkpoint_duration: TaskOutput | None = None

    def init(
        self,
        nodes: list[Any] | None = None,
        retrieve_from_epoch: int | None = None,
        path_prefix: str | None = None,
        path_type: str | None = None,
    ) -> Task:
        """The Task that fills ``blob_names``, run once after the job's init group."""
        if nodes is not None and len(nodes) != 1:
            raise ValueError(f"CheckpointManager only supports a single node, got {list(nodes)}")
        with Task(outputs=[self._blob_names]) as task:
            if retrieve_from_epoch is None:
                ops.GetAllBlobNames([], self._blob_names, include_shared=False)
            else:
                full_db_name = db_name(retrieve_from_epoch, self._node_name, self._db_prefix, path_prefix)
                logger.info("Initializing checkpoints from = %s", full_db_name)
                ops.Load(
                    [], self._blob_names, db=full_db_name, db_type=path_type or self._db_type,
                    absolute_path=True, keep_device=True,
                )  # fmt: skip
        self._names_output = task.outputs()[0]
        return task

    def blob_list(self) -> list[str]:
        """The names ``init``'s Task found (after it ran)."""
        if self._names_output is None:
            raise RuntimeError("CheckpointManager.init must be run before the blob list is known")
        return [n.decode() if isinstance(n, bytes) else str(n) for n in self._names_output.fetch().tolist()]

    def _timed_task(self, cp_op_name: str, add_op: Callable[[], None]) -> Task:
        """A Task named ``cp_op_name`` running ``add_op``'s ops between a TimerBegin (task init) and a
        TimerGetAndEnd (task exit) whose nanoseconds become ``_current_checkpoint_duration``."""
        with Task(name=cp_op_name) as task:
            with ops.task_init():
                timer = ops.TimerBegin([], counter_name=self._node_name)
            add_op()
            with ops.task_exit():
                time_span_blob = ops.TimerGetAndEnd(timer)
            self._current_checkpoint_duration = final_output(time_span_blob)
        return task

    def collect_checkpoint_stats(self, stats: dict[str, Any]) -> None:
        """Add ``{db name: nanoseconds}`` of the last timed checkpoint operation to ``stats``."""
        if self._current_db_name and self._current_checkpoint_duration:
            stats[self._current_db_name] = self._current_checkpoint_duration.fetch()[0]
        else:
            logger.info("Failed to collect checkpoint stats: %s", self._current_db_name)

    def load(self, epoch: int, path_prefix: str | None = None, path_type: str | None = None) -> Task:
        """The Task that loads every blob of ``blob_list()`` from the checkpoint of ``epoch``."""
        self._current_db_name = db_name(epoch, self._node_name, self._db_prefix, path_prefix)
        db, db_type = self._current_db_name, path_type or self._db_type
        logger.info("Loading checkpoints from = %s", db)

        def add_op() -> None:
            ops.Load([], self.blob_list(), db=db, db_type=db_type, absolute_path=True, keep_device=True)

        return self._timed_task("checkpoint_load", add_op)

    def load_blobs_from_checkpoint(self, blob_names: list[str], epoch: int) -> Task:
        """The Task that loads only ``blob_names`` from the checkpoint of ``epoch``."""
        self._current_db_name = db_name(epoch, self._node_name, self._db_prefix)
        db = self._current_db_name
        logger.info("Load from %s", db)

        def add_op() -> None:
            ops.Load([], blob_names, db=db, db_type=self._db_type, absolute_path=True, allow_incomplete=True)

        return self._timed_task("checkpoint_partial_load", add_op)

    def check_db_exists(self, epoch: int) -> Task:
        """A Task whose one output tells whether the checkpoint of ``epoch`` exists."""
        path = db_name(epoch, self._node_name, self._db_prefix)
        logger.info("Check existence of %s", path)
        with Task() as task:
            existence = ops.Const(False)
            ops.DBExists([], [existence], db_name=path, db_type=self._db_type, absolute_path=True)
            task.add_output(existence)
        return task

    def report_checkpoint_stats(self, action_name: str) -> None:
        """Hand this node's last checkpoint duration to the metadata handler's ``report``."""
        stats: dict[str, Any] = {}
        self.collect_checkpoint_stats(stats)
        if self._metadata_handler:
            self._metadata_handler.report(action_name, stats)

    def save(self, epoch: int) -> Task:
        """The Task that saves every blob of ``blob_list()`` as the checkpoint of ``epoch``."""
        self._current_db_name = db_name(epoch, self._node_name, self._db_prefix)
        db = self._current_db_name
        logger.info("Saving to %s", db)

        def add_op() -> None:
            ops.Save(self.blob_list(), [], db=db, db_type=self._db_type, absolute_path=True)

        return self._timed_task("checkpoint_save", add_op)

    def write_checkpoint_metadata(self, epoch: int) -> None:
        if self._metadata_handler is not None:
            self._metadata_handler.write(epoch=epoch)

    def get_resume_from_epoch_id(self, user_epoch: int | None = None) -> int | None:
        """The epoch to resume from: the metadata handler's ``last_epoch``, else ``user_epoch``."""
        if self._metadata_handler is not None:
            return self._metadata_handler.last_epoch(user_epoch=user_epoch)
        return user_epoch

    def set_params(self, nodes: Any, path_prefix: str | None = None, path_type: str | None = None) -> None:
        if path_prefix:
            self._path_prefix = path_prefix
        if path_type:
            self._path_type = path_type
        if self._metadata_handler:
            self._metadata_handler.set_params(
                db_prefix=self._db_prefix, db_type=self._db_type, node_names=[str(self._node_name)],
                path_prefix=self._path_prefix, path_type=self._path_type,
            )  # fmt: skip

    def cp_accessible(self, epoch: int | None = None) -> bool:
        """Whether the checkpoint (folder, for ``epoch=None``) can be reached: the metadata handler's
        answer, else True."""
        if self._metadata_handler is not None:
            return self._metadata_handler.cp_accessible(epoch)
        return True


class MultiNodeCheckpointManager:
    """One ``CheckpointManager`` per node (named after it) created by ``init(nodes)``; ``init``,
    ``save`` and ``load`` build GLOBAL TaskGroups holding each node's Task. Re-initializing with the
    same nodes keeps the managers (and returns an empty group)."""

    def __init__(self, db_prefix: str, db_type: str, metadata_handler: Any = None) -> None:
        self._node_managers: list[tuple[Any, CheckpointManager]] | None = None
        self._db_prefix = db_prefix
        self._db_type = db_type
        self._metadata_handler = metadata_handler
        self._path_prefix: str | None = None
        self._path_type: str | None = None
        self._node_names: list[str] = []

    def _task_group(self, func: Callable[..., Any], *args: Any, **kw: Any) -> TaskGroup:
        if self._node_managers is None:
            raise RuntimeError("MultiNodeCheckpointManager.init must be called first")
        with TaskGroup(WorkspaceType.GLOBAL) as task_group:
            for node, manager in self._node_managers:
                with Node(node):
                    func(manager, *args, **kw)
        return task_group

    def _make_managers(self, nodes: list[Any]) -> None:
        self._node_managers = []
        for node in nodes:
            with Node(node):
                manager = CheckpointManager(db_prefix=self._db_prefix, node_name=str(node), db_type=self._db_type)
            self._node_managers.append((node, manager))

    def _check_nodes(self, nodes: list[Any]) -> None:
        known = [node for node, _ in self._node_managers or []]
        if known != list(nodes):
            raise ValueError(f"this manager was initialized for nodes {known}, not {list(nodes)}")

    def init(
        self,
        nodes: list[Any],
        retrieve_from_epoch: int | None = None,
        path_prefix: str | None = None,
        path_type: str | None = None,
    ) -> TaskGroup:
        if self._node_managers is not None:
            self._check_nodes(nodes)
            return TaskGroup(WorkspaceType.GLOBAL)
        self._make_managers(nodes)
        return self._task_group(
            CheckpointManager.init, retrieve_from_epoch=retrieve_from_epoch, path_prefix=path_prefix,
            path_type=path_type,
        )  # fmt: skip

    def load(self, epoch: int, path_prefix: str | None = None, path_type: str | None = None) -> TaskGroup:
        return self._task_group(CheckpointManager.load, epoch, path_prefix=path_prefix, path_type=path_type)

    def load_blobs_locally(self, nodes: list[Any], blob_names: list[str], epoch: int, session: Any) -> bool:
        """Load ``blob_names`` from every node's checkpoint of ``epoch`` into ``session``'s workspace;
        False (nothing more loaded) as soon as one node's checkpoint does not exist."""
        if self._node_managers is not None:
            self._check_nodes(nodes)
        else:
            self._make_managers(nodes)
        for _, manager in self._node_managers:
            existence_task = manager.check_db_exists(epoch)
            session.run(existence_task)
            if not existence_task.outputs()[0].fetch():
                logger.info("DB %s does not exist!", db_name(epoch, manager._node_name, manager._db_prefix))
                return False
            session.run(manager.load_blobs_from_checkpoint(blob_names, epoch))
        logger.info("Successfully loaded from checkpoints.")
        return True

    def get_ckpt_db_name(self, node_name: str, epoch: int) -> str | None:
        """The checkpoint path of ``node_name`` for ``epoch`` (None: not one of this manager's nodes)."""
        for node, manager in self._node_managers or []:
            if str(node) == node_name:
                return db_name(epoch, manager._node_name, manager._db_prefix)
        return None

    def report_checkpoint_stats(self, action_name: str) -> None:
        """Hand every node's last checkpoint duration, together, to the metadata handler's ``report``."""
        stats: dict[str, Any] = {}
        for _, manager in self._node_managers or []:
            manager.collect_checkpoint_stats(stats)
        logger.debug("checkpoint stats: %s", stats)
        if self._metadata_handler:
            self._metadata_handler.report(action_name, stats)

    def save(self, epoch: int) -> TaskGroup:
        return self._task_group(CheckpointManager.save, epoch)

    write_checkpoint_metadata = CheckpointManager.write_checkpoint_metadata
    get_resume_from_epoch_id = CheckpointManager.get_resume_from_epoch_id
    cp_accessible = CheckpointManager.cp_accessible

    def set_params(self, nodes: list[Any], path_prefix: str | None = None, path_type: str | None = None) -> None:
        self._node_names = [str(node) for node in nodes]
        if path_prefix:
            self._path_prefix = path_prefix
        if path_type:
            self._path_type = path_type
        if self._metadata_handler:
            self._metadata_handler.set_params(
                db_prefix=self._db_prefix, db_type=self._db_type, node_names=self._node_names,
                path_prefix=self._path_prefix, path_type=self._path_type,
            )  # fmt: skip
