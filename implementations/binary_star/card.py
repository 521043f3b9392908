"""The Binary Star family's card: its junk and its checks (its clients are Lazy Pirate's)."""

from __future__ import annotations

from contract.family import Family, Junk
from implementations.junk import req_client_cases

CARD = Family(
    "binary-star",
    "Binary Star: a primary and a backup server that fail over, clients that settle and switch",
    junk=Junk(
        "Binary Star server: REQ clients on its ROUTER frontend (a state digit as a body); "
        "its state PUB takes no input",
        req_client_cases(b"3"),
    ),
    checkers=("binary_star",),
)
