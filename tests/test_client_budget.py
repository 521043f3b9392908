"""A client's budget (run.json ``client_budget_s``, how long the checks excuse a request's
trouble after a fault) is the adapter's own worst case over its merged options: the
adapter's defaults count, not only what the manifest spelled out."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq

from contract.history import HistoryWriter
from harness.manifest import ClientKind
from harness.runner import client_budget_s, planned_meta
from harness.scenario import load_scenario
from loadtests.adapters import adapter_class, adapter_names
from loadtests.adapters.base import Abandoned, RequestLog
from tests.procs import ROOT

LAZY_MANIFEST = ROOT / "implementations" / "lazy_pirate" / "manifest.toml"


def _kind(adapter: str, options: dict) -> ClientKind:
    return ClientKind(name="client", adapter=adapter, endpoints=("frontend",), options=options)


def test_a_manifest_giving_only_timeout_ms_records_the_adapters_default_retries(tmp_path: Path) -> None:
    """The Lazy Pirate client resends 3 times by default: 1 s x 4 attempts, not 1 s."""
    text = LAZY_MANIFEST.read_text()
    start = text.index("options = {", text.index("[client]"))
    end = text.index("}", start) + 1
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(text[:start] + "options = { timeout_ms = 1000 }" + text[end:])
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'implementation = "{manifest}"\nduration_s = 5\n[load]\nusers = 1\n')
    meta = planned_meta(load_scenario(scenario), [])
    defaults = adapter_class("lazy_pirate").DEFAULTS
    assert meta["client_budget_s"] == 1.0 * (defaults["retries"] + 1) == 4.0
    # one attempt of it: its timeout (what was in flight as a fault began: availability's lead)
    assert meta["client_attempt_s"] == 1.0


def test_one_attempt_is_the_timeout_or_a_no_resend_clients_deadline() -> None:
    lazy = adapter_class("lazy_pirate")
    assert lazy.attempt_s({"timeout_ms": 2500, "retries": 3}) == 2.5
    assert lazy.attempt_s({"timeout_ms": 2500, "retries": 3, "reply_deadline_s": 8.0}) == 8.0


def test_a_reply_deadline_is_the_budget_of_a_client_that_never_resends() -> None:
    assert client_budget_s(_kind("lazy_pirate", {"reply_deadline_s": 12.0, "timeout_ms": 100})) == 12.0
    assert client_budget_s(_kind("mdp_async", {"reply_deadline_s": 7.5})) == 7.5


def test_every_adapter_has_a_positive_budget_with_its_defaults_alone() -> None:
    for name in adapter_names():
        budget = adapter_class(name).budget_s({})
        assert budget > 0, name


@pytest.mark.parametrize("adapter", ["lazy_pirate", "mdp_sync"])
def test_the_budget_is_what_the_adapter_spends_on_a_server_that_never_answers(
    adapter: str, zctx: zmq.Context, tmp_path: Path
) -> None:
    """Attempts made x timeout_ms: the budget counts every attempt the adapter really makes."""
    silent = zctx.socket(zmq.ROUTER)  # takes every request, answers none
    silent.linger = 0
    endpoint = f"tcp://127.0.0.1:{silent.bind_to_random_port('tcp://127.0.0.1')}"
    options = {"timeout_ms": 50}
    client = adapter_class(adapter)(endpoint, options, "client-1", zctx)
    with HistoryWriter(tmp_path / "c.jsonl", "client-1") as writer:
        log = RequestLog(writer, "client-1", 1, "client-1:1")
        with pytest.raises(Abandoned):
            client.request([b"client-1:1|x"], log)
    client.close()
    assert log.attempts > 1, "the adapter's default retries were not used"
    assert adapter_class(adapter).budget_s(options) == log.attempts * options["timeout_ms"] / 1000
