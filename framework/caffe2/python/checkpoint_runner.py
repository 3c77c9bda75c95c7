"""The runtime loop of Caffe2's checkpointed jobs: ``JobRunner``, ``UploadTaskGroupBuilder`` and
``epoch_limiter`` (exported by ``caffe2.python.checkpoint``; the job and the managers live there)."""

from __future__ import annotations

import logging
from typing import Any

from framework import core
from framework.caffe2.python.task import Task

__all__ = ["JobRunner", "UploadTaskGroupBuilder", "epoch_limiter"]

logger = logging.getLogger("framework.caffe2.python.checkpoint")


class UploadTaskGroupBuilder:
    """Interface: ``build(epoch, checkpoint_manager)`` returns the TaskGroup that uploads the
    checkpoints of ``epoch`` once training finished."""

    def build(self, epoch: int, checkpoint_manager: Any) -> Any:
        raise NotImplementedError("UploadTaskGroupBuilder.build is implemented by subclasses")


class JobRunner:
    """Runs a ``Job`` in a session, checkpointing at epoch boundaries.

    ``train(session)`` (also ``runner(session)``): without ``resume_from_epoch`` (or the manager's
    metadata handler naming one) the init group runs and the checkpoint of epoch 0 is saved; else the
    checkpoint of that epoch is loaded instead. Then the epoch group runs as epochs ``start``,
    ``start + 1``... each followed by its checkpoint, until a stop condition is true after an epoch;
    then the upload group (when a builder is given), the download group and the exit group run.
    Returns the last epoch's number. A checkpoint that cannot be saved is logged and training goes on.
    """

    def __init__(
        self, job: Any, checkpoint_manager: Any = None, resume_from_epoch: int | None = None,
        upload_task_group_builder: UploadTaskGroupBuilder | None = None,
    ) -> None:  # fmt: skip
        self.resume_from_epoch = resume_from_epoch
        self.checkpoint_manager = checkpoint_manager
        self.job = job
        self.upload_task_group_builder = upload_task_group_builder

    def train(self, session: Any) -> int:
        manager = self.checkpoint_manager
        if manager:
            manager.set_params(nodes=self.job.nodes_to_checkpoint())
            self.resume_from_epoch = manager.get_resume_from_epoch_id(self.resume_from_epoch)
            if self.resume_from_epoch is not None:
                logger.info("Resuming from epoch %s", self.resume_from_epoch)
        from_scratch = self.resume_from_epoch is None
        if from_scratch:
            session.run(self.job.init_group)
        if manager:
            logger.info("Preparing checkpoints ...")
            session.run(manager.init(self.job.nodes_to_checkpoint(), retrieve_from_epoch=self.resume_from_epoch))
            if from_scratch:
                self.save_checkpoints(0, session)
            else:
                logger.info("Loading checkpoints for epoch %s ...", self.resume_from_epoch)
                session.run(manager.load(self.resume_from_epoch))
                manager.report_checkpoint_stats("checkpoint_load")
        epoch = 1 if from_scratch else self.resume_from_epoch + 1
        while True:
            logger.info("Starting epoch %d", epoch)
            session.run(self.job.epoch_group)
            stop = [output.fetch() for output in self.job.stop_conditions]
            if manager:
                self.save_checkpoints(epoch, session)
            if any(stop):
                break
            epoch += 1
        logger.info("Finished training")
        if self.upload_task_group_builder:
            session.run(self.upload_task_group_builder.build(epoch, manager))
        session.run(self.job.download_group)
        session.run(self.job.exit_group)
        return epoch

    __call__ = train

    def load_blobs_from_checkpoints(self, blob_names: list[str], epoch: int, session: Any) -> bool:
        """Load only ``blob_names`` from every node's checkpoint of ``epoch`` into the session's
        workspace; False when a checkpoint is missing. Raises ValueError without a manager."""
        if not self.checkpoint_manager:
            raise ValueError("Checkpoint manager is None")
        result = self.checkpoint_manager.load_blobs_locally(self.job.nodes_to_checkpoint(), blob_names, epoch, session)
        self.checkpoint_manager.report_checkpoint_stats("checkpoint_partial_load")
        return result

    def save_checkpoints(self, epoch: int, session: Any) -> None:
        """Save the checkpoint of ``epoch`` (when the manager says it is reachable) and write its
        metadata. A failure is logged as a warning, not raised (training goes on, as Caffe2)."""
        manager = self.checkpoint_manager
        if not manager:
            raise ValueError("Checkpoint manager is None")
        try:
            if manager.cp_accessible(epoch=None):
                session.run(manager.save(epoch))
                manager.write_checkpoint_metadata(epoch)
                manager.report_checkpoint_stats("checkpoint_save")
            else:
                logger.warning("Checkpoint files cannot be accessed!")
        except Exception as ex:
            logger.warning("Unable to write checkpoint for epoch %s. Error=%s", epoch, ex)


def epoch_limiter(job: Any, num_epochs: int) -> None:
    """Make ``job`` stop after ``num_epochs`` epochs: a counter set up by the init group, counted down
    by the epoch group, whose 'finished' output is a stop condition."""
    with job.init_group:
        init_net = core.Net("epoch_counter_init")
        counter = init_net.CreateCounter([], init_count=num_epochs - 1)
        Task(step=init_net)
    with job.epoch_group:
        epoch_net = core.Net("epoch_countdown")
        finished = epoch_net.CountDown(counter)
        output = Task(step=epoch_net, outputs=finished).outputs()[0]
    job.add_stop_condition(output)
