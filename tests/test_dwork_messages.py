"""dwork messages: the generated code matches the .proto, the seed's well-formedness rules,
garbage refused with IllFormed only, and the load client's graph shapes."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import pytest

from implementations.dwork import messages as m
from loadtests.adapters.dwork import graph

PACKAGE = Path(m.__file__).resolve().parent


def test_committed_generated_code_matches_the_proto(tmp_path: Path) -> None:
    from grpc_tools import protoc

    code = protoc.main(
        [
            "protoc",
            f"-I{PACKAGE / 'proto'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            str(PACKAGE / "proto" / "TaskMsg.proto"),
        ]
    )
    assert code == 0
    for name in ("TaskMsg_pb2.py", "TaskMsg_pb2.pyi"):  # the code, and its types for mypy
        fresh = (tmp_path / name).read_text()
        assert fresh == (PACKAGE / name).read_text(), (
            f"implementations/dwork/{name} is stale: regenerate it with python -m grpc_tools.protoc "
            "-Iproto --python_out=. --pyi_out=. proto/TaskMsg.proto (in implementations/dwork)"
        )


TASK = m.TaskMsg(name="t1", deps=["t0"], body=b"c:1|x")
WELL_FORMED = {
    m.T.Create: {"task": [TASK]},
    m.T.Steal: {"location": "w1"},
    m.T.Complete: {"task": [TASK], "location": "w1"},
    m.T.Transfer: {"task": [TASK], "location": "w1"},
    m.T.Lookup: {"name": "t1"},
    m.T.Exit: {"location": "w1"},
    m.T.OK: {},
}
EXTRA = {"task": [TASK], "name": "x", "n": 2, "location": "w9"}


@pytest.mark.parametrize("t", list(WELL_FORMED), ids=m.type_name)
def test_each_request_well_formed_and_with_any_unlisted_component(t: int) -> None:
    fields = WELL_FORMED[t]
    parsed = m.parse_request(m.query(t, **fields).SerializeToString())
    assert parsed.type == t
    for component, value in EXTRA.items():
        if component in fields or (t == m.T.Steal and component == "n"):
            continue
        with pytest.raises(m.IllFormed, match="must not carry"):
            m.parse_request(m.query(t, **fields, **{component: value}).SerializeToString())
    for component in fields:
        fewer = {k: v for k, v in fields.items() if k != component}
        with pytest.raises(m.IllFormed, match="needs"):
            m.parse_request(m.query(t, **fewer).SerializeToString())


def test_steal_n_replies_as_requests_and_bad_bytes() -> None:
    assert m.parse_request(m.query(m.T.Steal, location="w", n=3).SerializeToString()).n == 3
    cases = {
        "at least one": m.query(m.T.Steal, location="w", n=0).SerializeToString(),
        "a reply": m.query(m.T.NotFound).SerializeToString(),
        "known\\) type": b"",
        "parse": b"\xff\xff\xff",
    }
    for why, data in cases.items():
        with pytest.raises(m.IllFormed, match=why):
            m.parse_request(data)
    with pytest.raises(m.IllFormed, match="known"):
        m.parse_request(b"\x08\x63")  # type = 99, not in the enum


def test_random_garbage_only_ever_raises_ill_formed() -> None:
    rng = random.Random(4)
    good = bytearray(m.query(m.T.Complete, task=[TASK], location="w1").SerializeToString())
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randrange(len(data) + 1)] if rng.random() < 0.3 else data
        with contextlib.suppress(m.IllFormed):
            m.parse_request(bytes(data))


@pytest.mark.parametrize(
    ("shape", "deps", "leaves"),
    [
        ("chain", [[], ["r/0"], ["r/1"], ["r/2"]], ["r/3"]),
        ("fanout", [[], ["r/0"], ["r/0"], ["r/0"]], ["r/1", "r/2", "r/3"]),
        ("fanin", [[], [], [], ["r/0", "r/1", "r/2"]], ["r/3"]),
    ],
)
def test_graph_shapes(shape: str, deps: list[list[str]], leaves: list[str]) -> None:
    tasks, got_leaves = graph("r", shape, 4, b"r|x", "client-1")
    assert [list(t.deps) for t in tasks] == deps
    assert got_leaves == leaves
    assert all(t.body == b"r|x" and t.origin == "client-1" for t in tasks)
