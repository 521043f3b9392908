"""A report's independent Spark work (the promised checks, the metrics) run a few at a time.

At demo size a report is many small Spark queries, and the driver plans each one in the
thread that asked for it: run one after another they keep one core busy, however many the
machine has. Spark runs jobs submitted from several threads at once (PySpark's pinned
thread mode, the default, gives each Python thread its own JVM thread), so a ``Tasks`` pool
hands the tasks to a few threads: ``ZCHAOS_REPORT_THREADS``, else the cores (the session's
``spark.default.parallelism`` when set, else this machine's) up to MAX_THREADS. One thread
runs them in order in the caller's thread, exactly as before. The pool takes tasks while
its first ones already run, so a report starts its metrics before it has read the fault
windows the checks need.

Each task's Spark operations carry its name as a tag (``SparkSession.addTag``), so a
profile can attribute them, and a cancelled report interrupts the session's operations
(``interruptAll``). Tags and session interrupts, not job groups: they are the same API on a
classic session and on a Spark Connect one (reports/connect.py), where there is no
SparkContext. Not ``interruptTag``: on a classic session a tag is known only to the thread
that added it (Spark keys it by that thread), so the waiting thread's ``interruptTag``
found nothing and the job ran on; a session runs one report at a time, so all its
operations are the report's. The caller's thread alone reports progress, as
tasks end, so lines never interleave. Ctrl-C (any exception in the waiting thread) cancels
the running tasks' jobs, drops the tasks not started, and waits (a few seconds at most)
for the threads to let go of the JVM before it propagates; the threads are daemons, so
none can keep the process alive after that.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contract.errors import SetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

THREADS_ENV = "ZCHAOS_REPORT_THREADS"
#: Threads at most when the environment does not say: one per core keeps each busy (a
#: query's tasks run on the same cores); on 2 shared cores 3 threads were no better than 2
#: (bench/report_threads.py), and more threads only queue more jobs for the same cores.
MAX_THREADS = 2
#: How long an interrupted report waits for its threads' Spark calls to end.
STOP_WAIT_S = 10.0


@dataclass
class Task:
    """One piece of work: ``fn()``'s value, or the exception it raised, and how long it took."""

    name: str
    fn: Callable[[], Any]
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0
    done: bool = False


def report_threads(spark: SparkSession) -> int:
    """How many tasks run at once: ZCHAOS_REPORT_THREADS, else the master's cores up to MAX_THREADS."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if raw:
        try:
            wanted = int(raw)
        except ValueError:
            wanted = 0
        if wanted < 1:
            raise SetupError(f"should be a number of threads, 1 or more, not {raw!r}", where=THREADS_ENV)
        return wanted
    return max(1, min(MAX_THREADS, cores(spark)))


def cores(spark: SparkSession) -> int:
    """The cores the session's work runs on: its ``spark.default.parallelism`` when set (a
    cluster's), else this machine's (a local master's, or a local Connect server's)."""
    raw = spark.conf.get("spark.default.parallelism", None) or ""
    if raw.strip().isdigit() and int(raw) > 0:
        return int(raw)
    return os.cpu_count() or 1


def _run(spark: SparkSession, task: Task) -> None:
    """``task`` run with its tag on this thread's operations, removed after (the caller's
    thread runs several in turn)."""
    spark.addTag(task.name)
    started = time.perf_counter()
    try:
        task.value = task.fn()
    except BaseException as exc:  # the caller decides; a thread must always report back
        task.error = exc
    finally:
        task.seconds = time.perf_counter() - started
        task.done = True
        spark.removeTag(task.name)


class Tasks:
    """Tasks run ``threads`` at a time (started in the order added, each tagged with its
    name), while the caller goes on: more may be added until ``wait``. With one thread
    nothing runs before ``wait``, which runs them in order in the caller's thread.

    Use it as a context manager: an exception in the caller's thread before or during
    ``wait`` (Ctrl-C, a bad history) interrupts the session's operations, drops the tasks
    not started and waits (STOP_WAIT_S at most) for the threads before it propagates."""

    def __init__(self, spark: SparkSession, threads: int) -> None:
        self.spark = spark
        self.threads = threads
        self.tasks: list[Task] = []
        self._todo: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._finished: queue.SimpleQueue[Task] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._reported = 0

    def add(self, *tasks: Task) -> None:
        """Queue ``tasks``; with several threads the first start at once."""
        self.tasks += tasks
        if self.threads <= 1:
            return
        for task in tasks:
            self._todo.put(task)
        while len(self._workers) < min(self.threads, len(self.tasks)):
            worker = threading.Thread(
                target=self._work, name=f"zchaos-report-{len(self._workers)}", daemon=True
            )
            self._workers.append(worker)
            worker.start()

    def _work(self) -> None:
        while (task := self._todo.get()) is not None:
            if not self._stopping.is_set():
                _run(self.spark, task)
            self._finished.put(task)

    def wait(self, on_done: Callable[[Task], None] = lambda _t: None) -> None:
        """Every task added has ended; ``on_done`` is called in this thread as each ends.
        Values and errors stay on the tasks: nothing is raised for them here."""
        if self.threads <= 1:
            _run_here(self.spark, self.tasks[self._reported :], on_done)
            self._reported = len(self.tasks)
            return
        for _ in self._workers:
            self._todo.put(None)  # one stop sign per thread
        while self._reported < len(self.tasks):
            on_done(self._finished.get())
            self._reported += 1
        for w in self._workers:
            w.join()

    def stop(self) -> None:
        """Cancel the tasks under way, drop the others, and wait for the threads (STOP_WAIT_S)."""
        self._stopping.set()
        for _ in self._workers:
            self._todo.put(None)
        _cancel(self.spark, self.tasks, self._workers)

    def __enter__(self) -> Tasks:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_exc: object) -> None:
        if kind is not None:
            self.stop()


def _cancel(spark: SparkSession, tasks: list[Task], workers: list[threading.Thread]) -> None:
    """Interrupt the session's operations until the tasks' threads end (STOP_WAIT_S at most):
    a task between two queries starts its next one, which is interrupted in turn."""
    deadline = time.monotonic() + STOP_WAIT_S
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        if not all(task.done for task in tasks):
            with contextlib.suppress(Exception):  # a Connect server gone: nothing runs there
                spark.interruptAll()
        for w in workers:
            w.join(timeout=0.1)


def _run_here(spark: SparkSession, tasks: list[Task], on_done: Callable[[Task], None]) -> None:
    """The tasks one after another in this thread (each removes its own tag as it ends)."""
    for task in tasks:
        _run(spark, task)
        if isinstance(task.error, KeyboardInterrupt):
            raise task.error
        on_done(task)
