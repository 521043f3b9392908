"""dwork's QueryMsg: parsing, the seed's well-formedness rules, and building messages.

The seed: "Components of QueryMsg not explicitly listed below must be absent from the
message, or else the message is ill-formed and will be rejected." ``parse_request``
applies that table (``ALLOWED``) and answers with ``IllFormed`` (the scheduler replies
with ``Error``). It never raises anything else, whatever bytes it is given.

Choices where the seed is open:
- Steal's ``n`` must be at least 1 (absent: 1). A task name is 1-256 characters.
- Lookup (the seed gives no request/reply pair): request ``name`` = the task; reply OK with
  ``name`` = its state (waiting, ready, assigned, done), ``location`` = the host it is
  assigned to or that completed it (absent before that), and, once done, ``task`` = the
  task as its worker completed it (its ``body`` is the result); NotFound if unknown.
- The status query (type OK) takes no component.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError

from implementations.dwork import TaskMsg_pb2 as pb

QueryMsg = pb.QueryMsg
TaskMsg = pb.TaskMsg
T = pb.QueryMsg

#: request type -> (components it requires, components it may carry)
ALLOWED: dict[int, tuple[frozenset[str], frozenset[str]]] = {
    T.Create: (frozenset({"task"}), frozenset()),
    T.Steal: (frozenset({"location"}), frozenset({"n"})),
    T.Complete: (frozenset({"task", "location"}), frozenset()),
    T.Transfer: (frozenset({"task", "location"}), frozenset()),
    T.Lookup: (frozenset({"name"}), frozenset()),
    T.Exit: (frozenset({"location"}), frozenset()),
    T.OK: (frozenset(), frozenset()),
}
MAX_NAME = 256
MAX_TASKS = 10_000


class IllFormed(ValueError):
    """A request the scheduler answers with Error."""


def type_name(t: int) -> str:
    return T.Type.Name(t) if t in T.Type.values() else str(t)


def present(msg: QueryMsg) -> set[str]:
    """The components of ``msg`` that are set."""
    found = {c for c in ("name", "n", "location") if msg.HasField(c)}
    if len(msg.task):
        found.add("task")
    return found


def parse_request(data: bytes) -> QueryMsg:
    """The request in ``data``, well-formed by the seed's rules; IllFormed otherwise."""
    msg = QueryMsg()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise IllFormed(f"cannot parse a QueryMsg: {exc}") from None
    if not msg.IsInitialized():  # the required type is missing, or not one the enum knows
        raise IllFormed("a QueryMsg without a (known) type")
    if msg.type not in ALLOWED:
        raise IllFormed(f"{type_name(msg.type)} is a reply, not a request")
    required, optional = ALLOWED[msg.type]
    have = present(msg)
    if not required <= have:
        raise IllFormed(f"{type_name(msg.type)} needs {sorted(required - have)}")
    extra = have - required - optional
    if extra:
        raise IllFormed(f"{type_name(msg.type)} must not carry {sorted(extra)}")
    if msg.HasField("n") and msg.n < 1:
        raise IllFormed(f"n = {msg.n}: ask for at least one task")
    if len(msg.task) > MAX_TASKS:
        raise IllFormed(f"{len(msg.task)} tasks in one message (limit {MAX_TASKS})")
    for text in [t.name for t in msg.task] + [d for t in msg.task for d in t.deps] + [msg.name, msg.location]:
        if len(text) > MAX_NAME:
            raise IllFormed(f"name of {len(text)} characters (limit {MAX_NAME})")
    if any(not t.name for t in msg.task):
        raise IllFormed("a task without a name")
    if msg.HasField("location") and not msg.location:
        raise IllFormed("empty location")
    return msg


def query(t: QueryMsg.Type, **fields: Any) -> QueryMsg:
    """A QueryMsg of type ``t`` with ``fields`` (``task`` a list of TaskMsg)."""
    tasks = fields.pop("task", ())
    msg = QueryMsg(type=t, **fields)
    msg.task.extend(tasks)
    return msg


def parse_reply(data: bytes) -> QueryMsg:
    """A reply (for clients and workers); IllFormed if it is not a QueryMsg."""
    msg = QueryMsg()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise IllFormed(f"cannot parse a QueryMsg: {exc}") from None
    if not msg.IsInitialized():
        raise IllFormed("a QueryMsg without a (known) type")
    return msg
