"""The dwork load client: each request creates one small task graph and waits for it.

A request's body (its id first) becomes the body of every task of a graph named after the
request (``<rid>/0`` ...). The graph's shape rotates with the request counter (option
``shape = "mixed"``) or is fixed: ``chain`` (each task waits for the one before),
``fanout`` (one root, the others wait for it), ``fanin`` (the last waits for all others).
The Create goes out Lazy Pirate style (timeout, fresh socket, resend: creating the same
tasks again changes nothing). The request then polls Lookup on the graph's leaves until
all are done, and its reply is the result a worker completed the first leaf with (echo:
the body), so ``correct_reply`` checks what came back through a worker, ``no_lost`` that
each graph ended in a reply or an abandon, and the latency is the graph's makespan.
A graph not done within ``graph_timeout_ms`` is abandoned, and so is one the scheduler no
longer knows (Lookup answered NotFound after the Create was OK: the scheduler was restarted
and kept nothing, as it does; waiting on was waiting for nothing, and a killed scheduler
left every client polling its lost graph for the whole 30 s, none sending a new one).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import zmq

from implementations.dwork import messages as m
from implementations.dwork.client import ApiClient, Timeout
from loadtests.adapters.base import Abandoned, ClientAdapter, Reply, RequestLog

SHAPES = ("chain", "fanout", "fanin")


def graph(prefix: str, shape: str, size: int, body: bytes, origin: str) -> tuple[list[m.TaskMsg], list[str]]:
    """The tasks of one graph and the names of its leaves (the tasks nothing waits for)."""
    names = [f"{prefix}/{i}" for i in range(size)]
    if shape == "chain":
        deps: list[list[str]] = [[]] + [[names[i - 1]] for i in range(1, size)]
        leaves = [names[-1]]
    elif shape == "fanout":
        deps = [[]] + [[names[0]] for _ in range(1, size)]
        leaves = names[1:] or names
    elif shape == "fanin":
        deps = [[] for _ in range(size - 1)] + [names[:-1]]
        leaves = [names[-1]]
    else:
        raise ValueError(f"unknown graph shape {shape!r} (one of {', '.join(SHAPES)} or mixed)")
    tasks = [m.TaskMsg(name=n, origin=origin, deps=d, body=body) for n, d in zip(names, deps, strict=True)]
    return tasks, leaves


class DworkClient(ClientAdapter):
    DEFAULTS: dict[str, Any] = {
        "timeout_ms": 2500,
        "retries": 3,
        "shape": "mixed",
        "tasks": 4,
        "poll_ms": 10,
        "graph_timeout_ms": 30000,
    }
    SUMMARY = "dwork API client: each request is a small task graph, polled until done"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> list[tuple[str, str]]:
        problems = super().check_options(options)
        shape = options.get("shape", "mixed")
        if isinstance(shape, str) and shape not in (*SHAPES, "mixed"):
            problems.append(("shape", f"{shape!r} is not one of {', '.join(SHAPES)}, mixed"))
        tasks = options.get("tasks", 4)
        if isinstance(tasks, int) and tasks < 2:
            problems.append(("tasks", f"a graph needs at least 2 tasks, got {tasks}"))
        return problems

    def __init__(
        self, endpoints: str | Sequence[str], options: dict[str, Any], cid: str, context: zmq.Context
    ) -> None:
        super().__init__(endpoints, options, cid, context)
        self.api = ApiClient(context, self.endpoint, int(self.options["timeout_ms"]))
        self.count = 0

    def request(self, body: list[bytes], log: RequestLog) -> Reply:
        self.count += 1
        shape = self.options["shape"]
        if shape == "mixed":
            shape = SHAPES[self.count % len(SHAPES)]
        tasks, leaves = graph(log.rid, shape, int(self.options["tasks"]), body[0], self.cid)
        create = m.query(m.T.Create, task=tasks)
        for attempt in range(self.options["retries"] + 1):
            log.sent()
            try:
                reply = self.api.call(create)
            except (Timeout, m.IllFormed) as exc:
                reason = str(exc)
            else:
                if reply.type == m.T.OK:
                    break
                reason = f"Create answered {m.type_name(reply.type)}"
            if attempt < self.options["retries"]:
                log.retried(reason)
        else:
            raise Abandoned(f"graph not created after {self.options['retries'] + 1} attempts ({reason})")
        return self.wait(leaves, log)

    def wait(self, leaves: list[str], log: RequestLog) -> Reply:
        deadline = time.monotonic() + self.options["graph_timeout_ms"] / 1000
        results: dict[str, m.QueryMsg] = {}
        while time.monotonic() < deadline:
            for name in leaves:
                if name in results:
                    continue
                try:
                    reply = self.api.call(m.query(m.T.Lookup, name=name))
                except (Timeout, m.IllFormed):
                    continue
                if reply.type == m.T.NotFound:
                    raise Abandoned(f"graph forgotten: the scheduler answers Lookup {name} with NotFound")
                if reply.type == m.T.OK and reply.name == "done":
                    results[name] = reply
            if len(results) == len(leaves):
                first = results[leaves[0]]
                bodies = {r.task[0].body if r.task else b"" for r in results.values()}
                # Every leaf must come back with the same echo; a stray one shows as a wrong reply.
                body = first.task[0].body if len(bodies) == 1 and first.task else b"<leaves disagree>"
                return Reply([body], worker=first.location or None)
            time.sleep(self.options["poll_ms"] / 1000)
        raise Abandoned(f"graph not complete in {self.options['graph_timeout_ms']} ms")

    def close(self) -> None:
        self.api.close()


ADAPTER = DworkClient
