"""The evidence of a violation: what the history keeps of a wrong reply, whose request it
was, and what the verdict and the report show of it."""

from __future__ import annotations

from contract.history import BODY_SHOWN, FRAME_SEPARATOR, owner_of, request_id, rid_in, shown_body
from loadtests.adapters.base import received


def test_a_body_is_kept_bounded_and_escaped() -> None:
    body, length = shown_body([b"client-2:9|ab\\\x00\xff", b"x" * 500])
    assert length == 16 + 500
    assert body.startswith("client-2:9|ab\\\\\\x00\\xff" + FRAME_SEPARATOR + "xxx")
    assert body.count("x") == BODY_SHOWN - 16 + 2  # two from the escapes, the rest from frame 2
    assert shown_body([]) == ("", 0)


def test_whose_request_a_body_carries() -> None:
    assert rid_in([b"MDPC01", b"echo", b"client-1.3:17|qq"]) == "client-1.3:17"
    assert owner_of(request_id("client-1.3", 17)) == ("client-1.3", 17)
    assert owner_of("no-id") is None and owner_of("client-1:x") is None and owner_of(None) is None
    assert received([b"client-4:2|zz"]) == {"body": "client-4:2|zz", "body_len": 13, "got_rid": "client-4:2"}
    assert "got_rid" not in received([b"garbage"])
