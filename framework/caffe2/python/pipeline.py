"""Multi-threaded record pipelines, as Caffe2's ``caffe2.python.pipeline``.

``pipe(input, output=None, num_threads=1, processor=None, ...)`` adds a ``Task`` (to the current
``TaskGroup``) whose ``num_threads`` concurrent substeps each loop: read a record from ``input``
(a Reader, or anything with ``reader()``: a Queue, a Dataset...), call ``processor`` on it, write
the result to ``output`` (a Writer, anything with ``writer()``, or a new ``queue_util.Queue`` of
``capacity`` records, returned), until the reader's status (or a processor's stop blob) says stop.
Each thread's loop is an execution step with ``should_stop_blob``: a closed, drained queue ends it.
``num_threads=0`` returns a ``ProcessingReader`` instead (processing in the consumer's step).

A processor takes the input record and returns a record, an ``Output(nets, record, should_stop)``,
``(record, stop_blob)``, ``(nets, record, stop_blob)`` or nets; it may also add ops with the
``net_builder.ops`` syntax (a NetBuilder is active). A ``core.Net`` with input/output records is
wrapped in a ``NetProcessor``, which clones it per thread (``core.clone_and_bind_net``), each clone
bound to that thread's record. ``pipe_and_output(..., final_outputs=...)`` also returns the
TaskOutput of those blobs. Run the group with ``session.LocalSession().run(group)``.

As in Caffe2, setup reaches the TaskGroup through net attributes: a processor with ``setup``
(NetProcessor: its per-thread clones of ``thread_init_nets``) and the queues read or written are
attached to the thread's init net under ``TaskGroup.LOCAL_SETUP`` (``ProcessingReader.read_ex``,
``queue_util``), and run once before the group's tasks (a pipe run alone is wrapped in a group
by ``LocalSession``).
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python import queue_util
from framework.caffe2.python.dataio import Reader, Writer
from framework.caffe2.python.net_builder import NetBuilder, ops, to_execution_step
from framework.caffe2.python.schema import Field, as_record
from framework.caffe2.python.task import Task, TaskGroup

__all__ = [
    "DEFAULT_QUEUE_CAPACITY", "NetProcessor", "Output", "ProcessingReader", "make_processor",
    "normalize_processor_output", "pipe", "pipe_and_output", "processor_name",
]  # fmt: skip

DEFAULT_QUEUE_CAPACITY = 100


class Output:
    """What a processor produced: nets to run, the output record and an optional stop blob. With
    ``nets=None`` the nets are those the active NetBuilder collected (``ops`` syntax)."""

    def __init__(self, nets: Any = None, record: Any = None, should_stop: Any = None) -> None:
        builder = NetBuilder.current(required=False)
        children = list(builder._children) if builder is not None else []
        if nets is not None and children:
            raise ValueError("Cannot both use `ops` syntax and return a list of nets.")
        if nets is None:
            nets = children
        if isinstance(nets, core.Net):
            nets = [nets]
        self.nets = list(nets or [])
        self.record = None if record is None else as_record(record)
        self.should_stop = should_stop


def make_processor(processor: Any) -> Any:
    if processor is None:
        return lambda rec: rec
    if isinstance(processor, core.Net):
        return NetProcessor(processor)
    return processor


def normalize_processor_output(output: Any) -> Output:
    """An Output from any of the forms a processor may return (see module doc)."""
    if isinstance(output, Output):
        return output
    if isinstance(output, Field):
        return Output(record=output)
    if isinstance(output, tuple):
        if len(output) == 2 and isinstance(output[0], Field) and isinstance(output[1], core.BlobReference):
            return Output(None, *output)
        return Output(*output)
    return Output(output)


def processor_name(processor: Any) -> str:
    if hasattr(processor, "name"):
        return processor.name
    name = getattr(processor, "__name__", None)
    if name == "<lambda>":
        return processor.__module__
    if name is not None:
        qual = getattr(processor, "__qualname__", name)
        return qual if "." in qual and "<locals>" not in qual else name
    return processor.__class__.__name__


def _init_output(output: Any, capacity: int | None, init_net: Any, exit_net: Any, schema: Field | None) -> tuple:
    if isinstance(output, Writer):
        if capacity is not None:
            raise ValueError("capacity would not be used.")
        out_queue, writer = None, output
    elif hasattr(output, "writer"):
        if capacity is not None:
            raise ValueError("capacity would not be used.")
        out_queue, writer = output, output.writer()
    elif output is None:
        out_queue = queue_util.Queue(capacity if capacity is not None else DEFAULT_QUEUE_CAPACITY, schema, "pipe_queue")
        writer = out_queue.writer()
    else:
        raise ValueError("output must be a reader, queue or stream.")
    if isinstance(out_queue, queue_util.Queue) and out_queue._schema is None:
        out_queue._schema = schema
    writer.setup_ex(init_net, exit_net)
    return out_queue, writer


def pipe(
    input: Any, output: Any = None, num_threads: int = 1, processor: Any = None, name: str | None = None,
    capacity: int | None = None, group: TaskGroup | None = None, num_runtime_threads: int = 1,
) -> Any:  # fmt: skip
    """Pipe ``input`` into ``output`` through ``processor`` on ``num_threads`` threads, or on
    ``num_runtime_threads`` concurrent instances of one thread's loop (module doc); returns the output
    queue when one was created (or the reader with ``num_threads=0`` / ``num_runtime_threads=0``)."""
    result, _ = _pipe_step(input, output, num_threads, processor, name, capacity, group, None, num_runtime_threads)
    return result


def pipe_and_output(
    input: Any, output: Any = None, num_threads: int = 1, processor: Any = None, name: str | None = None,
    capacity: int | None = None, group: TaskGroup | None = None, final_outputs: Any = None,
    num_runtime_threads: int = 1,
) -> tuple[Any, Any]:  # fmt: skip
    """As ``pipe``, also returning the TaskOutput of ``final_outputs`` (fetch it after the run)."""
    if num_threads <= 0 or num_runtime_threads <= 0:
        raise ValueError("pipe_and_output needs num_threads > 0 and num_runtime_threads > 0")
    result, task = _pipe_step(
        input, output, num_threads, processor, name, capacity, group, final_outputs, num_runtime_threads
    )
    out = None
    if final_outputs is not None:
        out = task.outputs()
        if not isinstance(final_outputs, (list, tuple)):
            out = out[0]
    return result, out


def _pipe_step(
    input: Any, output: Any = None, num_threads: int = 1, processor: Any = None, name: str | None = None,
    capacity: int | None = None, group: TaskGroup | None = None, final_outputs: Any = None,
    num_runtime_threads: int = 1,
) -> tuple[Any, Any]:  # fmt: skip
    if num_threads > 1 and num_runtime_threads > 1:
        raise ValueError("Only one of num_threads or num_runtime_threads must be set.")
    if isinstance(input, Reader):
        reader = input
    elif hasattr(input, "reader"):
        reader = input.reader()
    else:
        raise ValueError("in must be a reader, queue or stream.")
    if processor is not None:
        reader = ProcessingReader(reader, processor)
    if num_threads == 0 or num_runtime_threads == 0:
        if output is not None:
            raise ValueError("num_threads=0 returns a reader; output must be None")
        return reader, None
    if name is None and processor is not None:
        name = processor_name(processor)
    if name is None and output is not None:
        name = f"pipe_into:{processor_name(output)}"
    if name is None:
        name = f"pipe_from:{processor_name(input)}"
    if num_runtime_threads > 1:
        return _runtime_threads_task(name, group, final_outputs, reader, num_runtime_threads, output, capacity)

    with Task(name=name, group=group, outputs=final_outputs) as task:
        global_init_net, global_exit_net = core.Net("init"), core.Net("exit")
        reader.setup_ex(global_init_net, global_exit_net)
        out_queue = writer = None
        steps = []
        for thread_id in range(num_threads):
            with NetBuilder(name=f"t:{thread_id}") as nb:
                init_net, exit_net = core.Net("init"), core.Net("exit")
                read_nets, status, rec = reader.read_record_ex(init_net, exit_net)
                if rec is not None:
                    if writer is None:
                        schema = rec if isinstance(rec, Field) else None
                        out_queue, writer = _init_output(output, capacity, global_init_net, global_exit_net, schema)
                    write_nets = writer.write_record_ex(rec, init_net, exit_net, status)
                else:
                    write_nets = []
                ops.net(init_net)
                ops.net(core.execution_step("body", list(read_nets) + list(write_nets), should_stop_blob=status))
                ops.net(exit_net)
            steps.append(to_execution_step(nb))
        ops.net(global_init_net)
        ops.net(core.execution_step("body", steps, concurrent_substeps=True))
        ops.net(global_exit_net)
    return out_queue, task


def _runtime_threads_task(
    name: str, group: Any, final_outputs: Any, reader: Any, num_instances: int, output: Any, capacity: Any
) -> tuple[Any, Any]:
    """One thread's read-process-write loop run as ``num_instances`` concurrent instances of the Task
    (each in its own child workspace, as Caffe2's runtime threads): the reader's and writer's global
    setup runs once per task, their per-thread setup once per instance."""
    with Task(name=name, group=group, outputs=final_outputs, num_instances=num_instances) as task:
        global_init_net, global_exit_net = core.Net("pipe:init"), core.Net("pipe:exit")
        reader.setup_ex(global_init_net, global_exit_net)
        init_net, exit_net = core.Net("pipe:instance:init"), core.Net("pipe:instance:exit")
        read_nets, status, rec = reader.read_record_ex(init_net, exit_net)
        # each instance starts with its own "not stopped" status
        init_net.ConstantFill([], [status], shape=[], value=False, dtype=core.DataType.BOOL)
        out_queue, write_nets = None, []
        if rec is not None:
            schema = rec if isinstance(rec, Field) else None
            out_queue, writer = _init_output(output, capacity, global_init_net, global_exit_net, schema)
            write_nets = writer.write_record_ex(rec, init_net, exit_net, status)
        with ops.task_init():
            ops.net(global_init_net)
        with ops.task_instance_init():
            ops.net(init_net)
        ops.net(core.execution_step("body", list(read_nets) + list(write_nets), should_stop_blob=status))
        with ops.task_instance_exit():
            ops.net(exit_net)
        with ops.task_exit():
            ops.net(global_exit_net)
    return out_queue, task


class ProcessingReader(Reader):
    """A Reader that reads from ``reader``, calls ``processor`` and returns the processed record."""

    def __init__(self, reader: Any, processor: Any) -> None:
        super().__init__()
        self.reader = reader
        self.processor = make_processor(processor)

    def setup_ex(self, init_net: Any, finish_net: Any) -> None:
        self.reader.setup_ex(init_net, finish_net)

    def read_ex(self, init_net: Any, exit_net: Any) -> tuple[list[Any], Any, Any]:
        read_nets, status, rec = self.reader.read_record_ex(init_net, exit_net)
        with NetBuilder(_stop_blob=status):
            result = normalize_processor_output(self.processor(rec))
        read_nets = list(read_nets) + result.nets
        if result.should_stop is not None:
            stop_net = core.Net("stop_net")
            stop_net.Copy([result.should_stop], [status])
            read_nets.append(stop_net)
        if hasattr(self.processor, "setup"):
            init_net.add_attribute(TaskGroup.LOCAL_SETUP, self.processor)
        self._schema = result.record
        fields = result.record.field_blobs() if result.record is not None else None
        return read_nets, status, fields


class NetProcessor:
    """A processor that runs a clone of ``net`` per thread (``net`` needs an input record and,
    to produce output, an output record). ``thread_init_nets`` are cloned per thread too and run
    once before the pipe (through the TaskGroup's setup); ``blob_maps()`` gives each clone's
    blob renaming."""

    def __init__(self, net: Any, stop_signal: Any = None, thread_init_nets: Any = None, name: str | None = None):
        if not isinstance(net, core.Net):
            raise TypeError("NetProcessor takes a core.Net")
        if stop_signal is not None and not isinstance(stop_signal, core.BlobReference):
            raise TypeError("stop_signal must be a BlobReference")
        self.name = name or net.Name()
        self.thread_init_nets = list(thread_init_nets or [])
        self.net = net
        self._stop_signal = stop_signal
        self._blob_maps: list[dict[str, str]] = []
        self._frozen = False
        self._cloned_init_nets: list[Any] = []

    def setup(self, init_net: Any) -> list[Any]:
        self._frozen = True
        cloned, self._cloned_init_nets = self._cloned_init_nets, []
        return cloned

    def __call__(self, rec: Any) -> Output:
        if self._frozen:
            raise RuntimeError(f"NetProcessor {self.name} was already set up")
        prefix = NetBuilder.current().name + "/"
        blob_remap: dict[str, str] = {}
        for net in self.thread_init_nets:
            new_net, _ = core.clone_and_bind_net(net, net.Name() + prefix, prefix, blob_remap)
            self._cloned_init_nets.append(new_net)
        new_net, remappings = core.clone_and_bind_net(self.net, self.net.Name() + prefix, prefix, blob_remap, rec)
        if self._stop_signal is None:
            stop_signal = None
        elif str(self._stop_signal) in remappings:
            stop_signal = core.BlobReference(remappings[str(self._stop_signal)], new_net)
        else:
            stop_signal = self._stop_signal
        self._blob_maps.append(remappings)
        return Output([new_net], new_net.output_record(), stop_signal)

    def blob_maps(self) -> list[dict[str, str]]:
        self._frozen = True
        return self._blob_maps
