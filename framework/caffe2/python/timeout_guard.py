"""``caffe2.python.timeout_guard``: end the process when a call does not finish in time.

``with CompleteInTimeOrDie(10.0): workspace.RunNet(...)``: after ``timeout_secs`` a watcher
thread logs the error, prints every thread's stack and sends SIGINT to the process (a
KeyboardInterrupt in the main thread); if the process still runs 10 s later it exits with
code 1. ``EuthanizeIfNecessary(secs)`` arms the same watcher for the process's shutdown.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import traceback
from typing import Iterator


def _stacks(only: int | None = None) -> str:
    code = []
    for thread_id, stack in sys._current_frames().items():
        if only is not None and thread_id != only:
            continue
        code.append(f"\n# ThreadID: {thread_id}")
        for filename, lineno, name, line in traceback.extract_stack(stack):
            code.append(f'File: "{filename}", line {lineno}, in {name}')
            if line:
                code.append(f"  {line.strip()}")
    return "\n".join(code)


class WatcherThread(threading.Thread):
    def __init__(self, timeout_secs: float) -> None:
        super().__init__(daemon=True)
        self.timeout_secs = timeout_secs
        self.completed = False
        self.condition = threading.Condition()
        self.caller_thread = threading.current_thread()

    def run(self) -> None:
        started = time.time()
        with self.condition:
            while time.time() - started < self.timeout_secs and not self.completed:
                self.condition.wait(self.timeout_secs - (time.time() - started))
        if self.completed:
            return
        log = logging.getLogger("timeout_guard")
        log.error(f"Call did not finish in time. Timeout:{self.timeout_secs}s PID: {os.getpid()}")

        def forcequit() -> None:
            time.sleep(10.0)
            print(f"Caller thread was: {self.caller_thread}\n-----After force------")
            print(_stacks(self.caller_thread.ident))
            log.error("Process did not terminate cleanly in 10 s, forcing")
            os._exit(1)

        threading.Thread(target=forcequit, daemon=True).start()
        print(f"Caller thread was: {self.caller_thread}\n-----Before forcing------")
        print(_stacks())
        os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def CompleteInTimeOrDie(timeout_secs: float) -> Iterator[None]:
    watcher = WatcherThread(timeout_secs)
    watcher.start()
    try:
        yield
    finally:
        watcher.completed = True
        with watcher.condition:
            watcher.condition.notify()


def EuthanizeIfNecessary(timeout_secs: float = 120) -> None:
    """Kill the process if it has not ended ``timeout_secs`` from now (stuck shutdowns)."""
    WatcherThread(timeout_secs).start()
