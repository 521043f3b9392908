"""Built-in brokers wedged by one hostile input (issue 11 part 5): each case against the real
process, then a correct client must still be served."""

from __future__ import annotations

import zmq

from tests.procs import procs
from tests.test_pingpong import Cluster, cluster
from tests.test_sketch import start_sketch

__all__ = ["cluster", "procs"]  # fixtures


def test_sketch_gives_up_on_a_request_no_server_answers_in_time(cluster: Cluster) -> None:
    queue, _ = start_sketch(cluster, 2)
    # 10 MB: never echoed within the 10 ms reply wait, so every send of it times out.
    huge = cluster.context.socket(zmq.REQ)
    huge.linger = 0
    huge.connect(cluster.frontend)
    huge.send(b"big:1|" + b"x" * 10_000_000)
    dropped = cluster.wait_event("request_expired", timeout=15, rid="big:1")
    assert "sends" in dropped["reason"]
    sends = cluster.events("dispatch", rid="big:1")
    assert 1 < len(sends) <= 8, len(sends)
    for n in range(1, 4):
        assert cluster.request(f"c:{n}|x".encode(), timeout_ms=5000) == f"c:{n}|x".encode()
    huge.close()
    assert queue.popen.poll() is None
