"""Checkers of Titanic (9/TSP, ``implementations/titanic``): a durable request store.

All four are decided from the load clients' history (``loadtests/adapters/titanic.py``
records each ticket and every status a Titanic service answered), the echo workers'
``exec`` where the run has them, and the fault plan; the Titanic server itself writes
nothing, so a user's server is judged the same way.

- ``titanic_durable``: every acknowledged request (a ``ticket``: titanic.request answered
  200 with a uuid) has its reply obtained: never ``400`` (unknown) from titanic.reply for a
  uuid that was acknowledged and not closed, never abandoned for want of a reply past the
  client's ``reply_deadline_s``, and (where workers record ``exec``) executed. A ticket
  still waiting when the load ended is indeterminate. Faults excuse nothing: surviving
  kills of the server, the broker and the workers is the promise. A run whose plan has
  faults but where no acknowledged request was outstanding while one acted (acknowledged
  before it ended, reply obtained after it began: stored before a kill, or while a worker
  was down) shows nothing about durability: unknown.
- ``titanic_executed_once``: how many times the request behind each ticket was executed
  (``exec`` of its request id). A request submitted once (one ``send``) and executed twice
  ran its uuid twice; a request resent after a lost answer may be stored twice, so its
  executions are compared with its sends. Counted always; a violation only where the
  manifest promises ``titanic_execution = "exactly_once"``.
- ``titanic_no_phantom_reply``: titanic.reply about a uuid nobody was ever given (the
  client's ``probe = "forged"`` questions) answers 400, never a reply (200) or pending (300).
- ``titanic_closed_stay_closed``: titanic.reply about a uuid whose titanic.close was
  answered 200 (``probe = "closed"``) answers 400, also after restarts of the server.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from reports.checkers.toolkit import (
    EACH_REQUEST,
    CheckContext,
    CheckResult,
    checker,
    client_budget_ns,
    count,
    events_of,
    problems_in,
    result,
    run_time,
)

REPLY, CLOSE = "titanic.reply", "titanic.close"
#: What a correct server answers about a uuid it does not hold; 500 (retry later) is not judged.
UNKNOWN_UUID, SERVER_ERROR = 400, 500
FORGOTTEN = "forgotten: titanic.reply answered 400 for an acknowledged uuid"
ABANDONED = "abandoned: no reply within the client's deadline"
UNEXECUTED = "reply obtained but the request was never executed"
RAN_AGAIN = "a request submitted n times executed more than n times (a uuid ran again)"


def _tickets(ctx: CheckContext) -> DataFrame:
    """One row per acknowledged request (its ticket): who, when, what became of its uuid,
    how often it was sent and executed. One aggregation by request id over every event
    that carries one (a client's answers about its own ticket carry its rid; probes do not)."""
    ev, ts = F.col("ev"), F.col("ts")
    own_answer = (ev == "ticket_answer") & F.col("probe").isNull()
    reply, close = own_answer & (F.col("service") == REPLY), own_answer & (F.col("service") == CLOSE)
    is_exec = ev == "exec"
    return (
        events_of(ctx, "ticket", "ticket_answer", "abandon", "exec", "send")
        .filter(F.col("rid").isNotNull())
        .groupBy("rid")
        .agg(
            F.min(F.when(ev == "ticket", ts)).alias("ack_ts"),
            F.min(F.when(ev == "ticket", F.col("uuid"))).alias("uuid"),
            F.min(F.when(ev == "ticket", F.col("src"))).alias("src"),
            F.min(F.when(ev == "ticket", F.col("cid"))).alias("cid"),
            F.min(F.when(ev == "ticket", F.col("seq"))).alias("seq"),
            F.min(F.when(reply & (F.col("code") == 200), ts)).alias("got_ts"),
            F.min(F.when(reply & (F.col("code") == UNKNOWN_UUID), ts)).alias("forgot_ts"),
            F.min(F.when(close & (F.col("code") == 200), ts)).alias("closed_ts"),
            F.min(F.when(ev == "abandon", ts)).alias("abandon_ts"),
            F.min(F.when(ev == "abandon", F.col("reason"))).alias("abandon_reason"),
            F.sum((ev == "send").cast("int")).alias("sends"),
            F.sum(is_exec.cast("int")).alias("execs"),
            F.sort_array(F.collect_list(F.when(is_exec, ts))).alias("exec_ts"),
        )
        .filter(F.col("ack_ts").isNotNull())
    )


def _process_faults(ctx: CheckContext) -> list[tuple[int, int]]:
    """(start, stop or start) of the faults that stop a process serving (kill, restart,
    freeze; not a slowdown, not a link): what durability must survive."""
    return [(f.start_ns, f.stop_ns or f.start_ns) for f in ctx.faults if f.outage and not f.on_link]


@checker(
    "titanic_durable",
    "every acknowledged Titanic request (ticket) gets its reply: never 400 (unknown) for an "
    "acknowledged, unclosed uuid, never abandoned past the reply deadline, executed where workers "
    "record exec; across kills of the server, broker and workers (faults excuse nothing)",
    reads=("exec",),
    on_damage=EACH_REQUEST,
)
def titanic_durable(ctx: CheckContext) -> CheckResult:
    tickets = _tickets(ctx)
    cutoff = run_time(ctx, "load_stopped_ns") - client_budget_ns(ctx)
    forgot = F.col("forgot_ts").isNotNull() & (
        F.col("closed_ts").isNull() | (F.col("forgot_ts") < F.col("closed_ts"))
    )
    unanswered = F.col("got_ts").isNull() & ~forgot
    abandoned = unanswered & F.col("abandon_ts").isNotNull()
    open_ = unanswered & F.col("abandon_ts").isNull()
    has_exec = "exec" in ctx.event_kinds()
    unexecuted = F.col("got_ts").isNotNull() & (F.col("execs") == 0) & F.lit(has_exec)
    cols: list[Column | str] = [F.col("ack_ts").alias("ts"), "src", "cid", "seq", "rid", "uuid"]
    spans = _process_faults(ctx)
    # Obtained across a fault: a fault acted while the request waited between its ticket
    # and its reply, whether it began before the ticket (stored while a worker was down)
    # or after it (one array of the few fault spans, tested per row; no join).
    span_type = "array<struct<lo:long,hi:long>>"
    outages = (
        F.array(
            *(
                F.struct(F.lit(lo).cast("long").alias("lo"), F.lit(hi).cast("long").alias("hi"))
                for lo, hi in spans
            )
        )
        if spans
        else F.array().cast(span_type)
    )
    crossing = F.exists(outages, lambda s: (s["lo"] <= F.col("got_ts")) & (s["hi"] >= F.col("ack_ts"))).cast(
        "int"
    )
    found = problems_in(
        tickets,
        (FORGOTTEN, forgot, [*cols, "forgot_ts", "closed_ts"]),
        (ABANDONED, abandoned, [*cols, "abandon_ts", "abandon_reason"]),
        (UNEXECUTED, unexecuted, [*cols, "got_ts"]),
        totals=(
            F.count("*").alias("tickets"),
            F.sum(F.col("got_ts").isNotNull().cast("int")).alias("obtained"),
            F.sum((open_ & (F.col("ack_ts") > cutoff)).cast("int")).alias("indeterminate"),
            F.sum((open_ & (F.col("ack_ts") <= cutoff)).cast("int")).alias("open"),
            F.sum(crossing).alias("crossed"),
            F.sum(F.col("closed_ts").isNotNull().cast("int")).alias("closed"),
        ),
    )
    row = found.totals
    figures = {
        "tickets": count(row["tickets"]),
        "replies_obtained": count(row["obtained"]),
        "closed": count(row["closed"]),
        "forgotten": found.n(FORGOTTEN),
        "abandoned": found.n(ABANDONED),
        "obtained_unexecuted": found.n(UNEXECUTED),
        "indeterminate": count(row["indeterminate"]),
        "open_no_end": count(row["open"]),  # no reply and no abandon: no_lost judges these
        "obtained_across_a_fault": count(row["crossed"]),
        "process_faults": len(spans),
        "exec_recorded": has_exec,
    }
    summary = (
        f"{figures['tickets']} acknowledged: {figures['replies_obtained']} replies obtained "
        f"({figures['obtained_across_a_fault']} across a fault), {figures['forgotten']} forgotten, "
        f"{figures['abandoned']} abandoned past the deadline, {figures['indeterminate']} indeterminate"
    )
    if not has_exec:
        summary += "; executions not checked (no exec events)"
    if figures["tickets"] == 0:
        return result(
            "no request was acknowledged",
            figures,
            unknown="no ticket event: no titanic.request was answered 200 (see logs/ of the titanic role "
            "and logs/locust.log)",
        )
    bad = (FORGOTTEN, ABANDONED, UNEXECUTED)
    judged = result(summary, figures, violations=found.n(*bad), examples=found.shown(*bad))
    if judged.violations == 0 and spans and figures["obtained_across_a_fault"] == 0:
        return result(
            summary + "; none was outstanding while a fault acted",
            figures,
            unknown="the plan has faults on processes but no acknowledged request was waiting for its reply "
            "while one acted, so durability across them was not exercised: more load, longer work_ms or a "
            "fault while requests are stored",
        )
    return judged


@checker(
    "titanic_executed_once",
    "how many times the request behind each Titanic ticket was executed (exec of its request id, "
    "compared with its sends); violations only where the manifest promises "
    'titanic_execution = "exactly_once"',
    needs=("exec",),
    on_damage=EACH_REQUEST,
)
def titanic_executed_once(ctx: CheckContext) -> CheckResult:
    mode = str(ctx.promises.get("titanic_execution", "at_least_once"))
    twice = F.col("execs") > F.col("sends")
    ran_again: list[Column | str] = [
        F.col("ack_ts").alias("ts"),
        "src",
        "cid",
        "seq",
        "rid",
        "sends",
        "execs",
        "exec_ts",
    ]
    # Its examples are read only where they are violations (a second query).
    found = problems_in(
        _tickets(ctx),
        *([(RAN_AGAIN, twice, ran_again)] if mode == "exactly_once" else []),
        totals=(
            F.count("*").alias("requests"),
            *(F.sum((F.col("execs") == k).cast("int")).alias(f"x{k}") for k in (0, 1, 2)),
            F.sum((F.col("execs") >= 3).cast("int")).alias("x3"),
            F.sum((F.col("execs") > 1).cast("int")).alias("multi"),
            F.count_if(twice).alias("ran_again"),
        ),
    )
    row = found.totals
    figures: dict[str, Any] = {
        "mode": mode,
        "ticketed_requests": count(row["requests"]),
        "histogram": {k: count(row[f"x{k[0]}"]) for k in ("0", "1", "2", "3+")},
        "executed_more_than_once": count(row["multi"]),
        "uuid_ran_again": count(row.get("ran_again")),
    }
    h = figures["histogram"]
    summary = (
        f"{figures['ticketed_requests']} acknowledged requests executed 0/1/2/3+ times: "
        f"{h['0']}/{h['1']}/{h['2']}/{h['3+']}; {figures['uuid_ran_again']} ran more often than submitted "
        f"({mode})"
    )
    if figures["ticketed_requests"] == 0:
        return result("no request was acknowledged", figures, unknown="no ticket event in the history")
    bad = (RAN_AGAIN,) if mode == "exactly_once" else ()
    return result(summary, figures, violations=found.n(*bad), examples=found.shown(*bad))


def _probe_check(ctx: CheckContext, probe: str, what: str) -> CheckResult:
    answers = events_of(ctx, "ticket_answer").filter((F.col("probe") == probe) & (F.col("service") == REPLY))
    bad = ~F.col("code").isin(UNKNOWN_UUID, SERVER_ERROR)
    label = f"titanic.reply about {what} did not answer 400"
    found = problems_in(
        answers,
        (label, bad, ["ts", "src", "cid", "uuid", "code", "detail"]),
        totals=(F.count("*").alias("n"), F.sum((F.col("code") == SERVER_ERROR).cast("int")).alias("errors")),
    )
    row = found.totals
    figures = {
        "probes_answered": count(row["n"]),
        "answered_500": count(row["errors"]),
        "wrong": found.n(label),
    }
    summary = (
        f"{figures['probes_answered']} questions about {what}: {figures['wrong']} not answered 400 "
        f"({figures['answered_500']} answered 500, not judged)"
    )
    if figures["probes_answered"] == figures["answered_500"]:
        return result(
            summary,
            figures,
            unknown=f"no titanic.reply question about {what} was answered: give the titanic client option "
            "probe_every (ask every N requests), e.g. [client] options = { probe_every = 5 }",
        )
    return result(summary, figures, violations=found.n(label), examples=found.shown(label))


@checker(
    "titanic_no_phantom_reply",
    "titanic.reply about a uuid nobody was ever given (the client's forged probes) answers 400, "
    "never a reply or pending",
    on_damage=EACH_REQUEST,
)
def titanic_no_phantom_reply(ctx: CheckContext) -> CheckResult:
    return _probe_check(ctx, "forged", "a uuid never issued")


@checker(
    "titanic_closed_stay_closed",
    "titanic.reply about a uuid whose titanic.close was answered 200 (the client's closed probes) "
    "answers 400, also after restarts",
    on_damage=EACH_REQUEST,
)
def titanic_closed_stay_closed(ctx: CheckContext) -> CheckResult:
    return _probe_check(ctx, "closed", "a closed uuid")
