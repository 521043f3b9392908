"""``malformed``: a hostile or broken peer. Junk of a protocol family (chaos/malformed.py)
sent straight to an endpoint the target binds, never through a link's proxy: the sender is
the attacker, not a link. ``family`` defaults to the manifest's ``family`` (else its
name, when that is a family's); the side (client or
worker junk) is the client side for an endpoint the manifest's clients use, the worker side
otherwise."""

from __future__ import annotations

import json
import random
import time
from typing import TYPE_CHECKING, Any

import zmq

from chaos.faults import FIXED, FaultKind, FaultRun, Param, ParamProblem, duration
from chaos.malformed import Wire, families, send_batch
from contract.promises import STOPS_NOTHING

if TYPE_CHECKING:
    from chaos.nemesis import PlannedFault


def run(nemesis: FaultRun, kind: FaultKind, fault: PlannedFault) -> None:
    endpoint, family = fault.params["endpoint"], fault.params["family"]
    if endpoint not in nemesis.endpoints:
        raise RuntimeError(f"the malformed fault needs the address of endpoint {endpoint!r}")
    address, side = nemesis.endpoints[endpoint]
    if nemesis.target_pid(fault) is None:
        return
    rate = fault.params.get("rate_per_s", 20.0)
    period = max(1.0, 1.0 / rate)  # a batch a second, or one message per batch when slower
    per_batch = max(1, round(rate * period))
    service = fault.params.get("service", "echo").encode()
    # Seeded by the plan: the same scenario seed sends the same junk.
    rng = random.Random(f"malformed:{fault.fault_id}:{fault.at_s}:{fault.target}")
    context = zmq.Context()
    wire = Wire(context, address)
    try:
        nemesis.started(fault, detail=f"{family} {side}-side junk to {endpoint} at {address}")
        end = time.monotonic() + fault.params["duration_s"]
        next_at = time.monotonic()
        while True:
            sent = send_batch(wire, family, side, rng, per_batch, service=service)
            detail = {"endpoint": endpoint, "side": side, "family": family, "sent": dict(sent)}
            nemesis.record("malformed_batch", fault, detail=json.dumps(detail))
            next_at += period
            if next_at >= end or not nemesis.wait(next_at - time.monotonic()):
                break
        nemesis.wait(end - time.monotonic())
    finally:
        wire.close()
        context.term()
        nemesis.stopped(fault)


def validate(params: dict[str, Any], target: str, manifest: Any) -> None:
    """An endpoint the target binds, and a family zchaos has junk for: the manifest's
    ``family``, else its name when it is one (``majordomo``, or ``majordomo-async`` as a
    flavour of it)."""
    role, _, _ = target.partition(":")
    role = role[:-1] if role not in manifest.roles and role[:-1] in manifest.roles else role
    if role not in manifest.roles:  # an instance name: worker-2
        role = role.rsplit("-", 1)[0]
    bound = sorted(e for e, r in manifest.endpoints.items() if r == role)
    if params["endpoint"] not in bound:
        raise ParamProblem(
            "endpoint", f"{params['endpoint']!r} is not an endpoint that {target!r} binds (it binds: {bound})"
        )
    known = families()
    family = params.get("family") or manifest.family
    if family is None:
        family = next((f for f in known if manifest.name == f or manifest.name.startswith(f + "-")), None)
        if family is None:
            raise ParamProblem(
                "family",
                f"required: {manifest.name!r} is not a family zchaos has junk for and declares none "
                f'(family = "..." in the manifest, or on this fault); one of {known}',
            )
    elif family not in known:
        raise ParamProblem("family", f"unknown family {family!r} (known: {', '.join(known)})")
    params["family"] = family
    for key in ("duration_s", "rate_per_s"):
        if params[key] <= 0:
            raise ParamProblem(key, f"must be greater than 0, got {params[key]}")


KIND = FaultKind(
    "malformed",
    "send `family` junk (bad frames, unknown commands, strangers' READY/HEARTBEAT/replies) to "
    "the target's `endpoint`, rate_per_s messages a second for duration_s; family: " + ", ".join(families()),
    "process",
    run,
    {
        "duration_s": duration(),
        # explore picks one of the endpoints the target binds (harness/explore/generate.py)
        "endpoint": Param(
            str, doc="an endpoint the target binds (the manifest's [endpoints])", explore=FIXED
        ),
        "family": Param(str, None, "whose junk to send (default: the manifest's family)", explore=FIXED),
        "rate_per_s": Param(
            float, 20.0, "junk messages a second", "messages/s", min=0.01, explore=(5.0, 200.0)
        ),
        "service": Param(str, "echo", "the service named in Majordomo junk", explore=FIXED),
    },
    # an outage by its harm, but it stops none of the target's good traffic: a correct
    # target drops the junk and serves on
    stops=STOPS_NOTHING,
    validate=validate,
)
