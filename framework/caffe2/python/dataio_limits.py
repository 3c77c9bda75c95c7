"""Readers that stop early, as Caffe2's ``dataio``: ``CounterReader`` (0, 1, 2...),
``ReaderWithLimit(reader, num_iter)`` (at most ``num_iter`` batches, shared by all threads through
a Counter), ``CountUntil(n)``, ``ReaderWithTimeLimit(reader, duration)`` (stops once ``duration``
seconds passed since setup, with a Timer). Each exposes ``data_finished()``: a bool blob that
ends true when the underlying reader ran dry (false when the limit stopped it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python.dataio import Reader
from framework.caffe2.python.schema import Struct

_BOOL = core.DataType.BOOL


class CounterReader(Reader):
    """Produces increasing integers (the record ``iter``), never stops by itself."""

    def __init__(self) -> None:
        super().__init__(schema=Struct(("iter", np.int64)))
        self.counter = None
        self.should_stop = None

    def setup_ex(self, global_init_net: Any, global_finish_net: Any) -> None:
        if self.counter is None:
            self.counter = global_init_net.CreateCounter([], init_count=0)
            self.should_stop = global_init_net.ConstantFill([], shape=[], dtype=_BOOL, value=False)

    def read_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, list[Any]]:
        count_net = core.Net("limited_reader_counter")
        value = count_net.CountUp([self.counter], 1)
        return [count_net], self.should_stop, [value]


class ReaderWithLimitBase(Reader):
    """A reader that also stops when ``check_limiter_condition`` says so (subclasses define it and
    ``setup_limiter``); ``data_finished()`` tells why it stopped."""

    def __init__(self, reader: Reader) -> None:
        super().__init__(schema=reader._schema)
        self.reader = reader
        self.net = core.Net("reader_with_limit")
        self._data_finished = self.net.AddExternalInput(self.net.NextName("data_finished"))
        self.should_stop = None

    def setup_ex(self, global_init_net: Any, global_finish_net: Any) -> None:
        global_init_net.ConstantFill([], [self._data_finished], shape=[], value=False, dtype=_BOOL)
        self.reader.setup_ex(global_init_net, global_finish_net)
        self.setup_limiter(global_init_net, global_finish_net)

    def read_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, list[Any]]:
        """The limit check, the inner reader's nets, then a net copying the inner stop flag into
        the returned one (the step checks it after every net) and or-ing it into data_finished."""
        stop_condition_net = core.Net("limited_reader_condition")
        should_stop = self.check_limiter_condition(stop_condition_net)
        nets, local_data_finished, fields = self.reader.read_ex(local_init_net, local_finish_net)
        self._set_schema(self.reader._schema)
        check_done_net = core.Net("limited_reader_post")
        check_done_net.Copy(local_data_finished, should_stop)
        check_done_net.Or([self._data_finished, local_data_finished], [self._data_finished])
        return [stop_condition_net, *nets, check_done_net], should_stop, fields

    def setup_limiter(self, global_init_net: Any, global_finish_net: Any) -> None:
        raise NotImplementedError("Subclass must implement `setup_limiter`")

    def check_limiter_condition(self, stop_condition_net: Any) -> Any:
        raise NotImplementedError("Subclass must implement `check_limiter_condition`")

    def data_finished(self) -> Any:
        return self._data_finished


class ReaderWithLimit(ReaderWithLimitBase):
    """Stops after ``num_iter`` batches (over all threads); ``num_iter=None``: no limit."""

    def __init__(self, reader: Reader, num_iter: int | None = 1) -> None:
        super().__init__(reader)
        self.counter = None
        self.num_iter = num_iter
        if num_iter is not None:
            self.counter = self.net.AddExternalInput(self.net.NextName("counter"))

    def setup_limiter(self, global_init_net: Any, global_finish_net: Any) -> None:
        if self.counter:
            global_init_net.CreateCounter([], [self.counter], init_count=int(self.num_iter))

    def check_limiter_condition(self, stop_condition_net: Any) -> Any:
        if self.counter:
            return stop_condition_net.CountDown([self.counter], 1)
        return stop_condition_net.ConstantFill([], 1, shape=[], value=False, dtype=_BOOL)


def CountUntil(num_iter: int) -> ReaderWithLimit:
    """A CounterReader limited to ``num_iter`` values."""
    return ReaderWithLimit(CounterReader(), num_iter)


class ReaderWithTimeLimit(ReaderWithLimitBase):
    """Stops once ``duration`` seconds passed since setup; ``duration`` <= 0 or None: no limit."""

    def __init__(self, reader: Reader, duration: float | None = 0) -> None:
        super().__init__(reader)
        self.timer = None
        self.duration = duration
        self.duration_ns_blob = None

    def setup_limiter(self, global_init_net: Any, global_finish_net: Any) -> None:
        if self.duration is not None and self.duration > 0:
            self.timer = global_init_net.TimerBegin([], counter_name="epoch_timer")
            start_time = global_init_net.TimerGet(self.timer)
            self.duration_ns_blob = global_init_net.ConstantFill([start_time], value=int(self.duration * 10**9))
            global_finish_net.TimerEnd([self.timer], [])

    def check_limiter_condition(self, stop_condition_net: Any) -> Any:
        if self.duration:
            elapsed = stop_condition_net.TimerGet(self.timer)
            return stop_condition_net.GE([elapsed, self.duration_ns_blob], 1)
        return stop_condition_net.ConstantFill([], 1, shape=[], value=False, dtype=_BOOL)
