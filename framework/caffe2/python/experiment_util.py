"""``caffe2.python.experiment_util``: a CSV log of a training run's progress, as Caffe2's trainers wrote it.

``ModelTrainerLog(expname, runtime_args, external_loggers=None)`` names the run ``<expname>_<YYYYmmdd_HHMMSS>``
(``experiment_id``) and appends to ``<experiment_id>.log`` in the working directory: first ``# <runtime_args>``,
then, from the first ``log(input_count, batch_count, additional_values)``, a header line and one CSV line per
call. Each line holds ``time_spent``, ``cumulative_time_spent``, ``input_count`` (since the last call),
``cumulative_input_count``, ``cumulative_batch_count``, ``inputs_per_sec`` (0.0 when no time passed), then
``additional_values`` sorted by key. Every line also goes to the ``experiment_logger`` logger. External loggers
(``ExternalLogger`` subclasses) get the runtime arguments (a dict, with ``experiment_id`` and ``hostname``
added) once and every line's dict; an external logger that raises is reported as a warning and skipped.
"""

from __future__ import annotations

import abc
import datetime
import logging
import socket
import time
from collections import OrderedDict
from typing import Any

__all__ = ["ExternalLogger", "ModelTrainerLog"]

_log = logging.getLogger("experiment_logger")


class ExternalLogger(abc.ABC):
    """A destination for the run's lines besides the log file."""

    @abc.abstractmethod
    def set_runtime_args(self, runtime_args: dict[str, Any]) -> None:
        """Receive the run's arguments once."""

    @abc.abstractmethod
    def log(self, log_dict: dict[str, Any]) -> None:
        """Receive one line's values by column name."""


class ModelTrainerLog:
    """See module doc."""

    def __init__(self, expname: str, runtime_args: Any, external_loggers: list[ExternalLogger] | None = None) -> None:
        now = datetime.datetime.fromtimestamp(time.time())
        self.experiment_id = f"{expname}_{now.strftime('%Y%m%d_%H%M%S')}"
        self.filename = f"{self.experiment_id}.log"
        self.logstr(f"# {runtime_args}")
        self.headers: list[str] | None = None
        self.start_time = self.last_time = time.time()
        self.last_input_count = 0
        self.external_loggers = list(external_loggers or [])
        if self.external_loggers:
            args = dict(runtime_args) if isinstance(runtime_args, dict) else dict(vars(runtime_args))
            args["experiment_id"] = self.experiment_id
            args["hostname"] = socket.gethostname()
            for logger in self.external_loggers:
                logger.set_runtime_args(args)

    def logstr(self, line: str) -> None:
        with open(self.filename, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        _log.info(line)

    def log(self, input_count: int, batch_count: int, additional_values: dict[str, Any]) -> None:
        now = time.time()
        delta_t, delta_count = now - self.last_time, input_count - self.last_input_count
        self.last_time, self.last_input_count = now, input_count
        row: OrderedDict[str, Any] = OrderedDict()
        row["time_spent"] = delta_t
        row["cumulative_time_spent"] = now - self.start_time
        row["input_count"] = delta_count
        row["cumulative_input_count"] = input_count
        row["cumulative_batch_count"] = batch_count
        row["inputs_per_sec"] = delta_count / delta_t if delta_t > 0 else 0.0
        for key in sorted(additional_values):
            row[key] = additional_values[key]
        if self.headers is None:
            self.headers = list(row)
            self.logstr(",".join(self.headers))
        self.logstr(",".join(str(v) for v in row.values()))
        for logger in self.external_loggers:
            try:
                logger.log(row)
            except Exception as e:
                _log.warning("Failed to call ExternalLogger: %s", e)
