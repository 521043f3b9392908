"""The checker toolkit: the one door a check module imports from (``from
reports.checkers.toolkit import ...``), never from another family's module.

- **The check**: ``checker`` (register one; the registry fills in its name),
  ``CheckContext``, ``CheckResult``, ``FaultWindow``, ``events_of(ctx, kind, ...)``.
- **Run facts** (``facts``): ``options`` (``options_of`` a run.json), ``run_time`` /
  ``history_end`` / ``kind_count`` / ``load_span`` / ``client_budget_ns`` / ``client_attempt_ns``
  (when things happened), ``outlasts_an_attempt`` (a link delay no client attempt outwaits),
  ``of_the_load`` (a request id of the load's clients, not a stranger's),
  ``process_events`` (the runner's proc_start / proc_exit, read once per report),
  ``worker_instances`` / ``broker_instances`` / ``instance_column`` / ``endpoint_instances``
  (which instance is what).
- **Fault excuses** (``excuses``): ``fault_spans`` (when the faults that concern an instance
  were under way), ``split_excused`` / ``with_excused`` / ``outside`` (applied to a frame),
  ``timers`` / ``timers_of`` (how long after a fault's stop its requests stay excused),
  ``transit_spans`` (when a no-resend request may die on the wire),
  ``small_frame`` (a few rows as a frame; ``frozen``: a small frame's rows made so),
  ``literal_rows`` / ``any_row`` / ``join_rows``
  (as an array each row of a frame asks about, or is joined to, with no broadcast);
  ``planned_windows`` (the plan's faults as windows, before any run).
- **Result building** (``results``): ``result`` (the one builder), ``nothing_to_judge`` (a
  check the plan gave nothing to judge), ``example`` / ``examples`` / ``rows`` (offending
  events), ``problems`` (labelled offender frames in one Spark action; ``problems_in``:
  offenders that are rows of one frame, counted with its totals), ``spread`` / ``ms``,
  ``spread_columns`` / ``spreads_of`` (durations computed in a check's own aggregation).
- **Rules several families share** (``dispatch``): ``registered_dispatch``, ``with_state``,
  ``last_before``.
- **Shared frames** (``shared``): ``per_request`` (one row per request a client sent),
  ``per_rid`` (one per request id), built once per report for every check that reads them
  (``prepare`` plans them first); ``request_details`` / ``rid_senders`` (the texts of the few
  a check shows); ``stranded`` (requests a client that never resends sent to a server that was
  not the serving one and answered nobody: a failover pair's passive one).

The generic checks' own helpers (the whole-request excuse, one-pass totals) are in
``reports.checkers.core.aggregates``.
"""

from reports.checkers import (
    EACH_REQUEST,
    MAX_EXAMPLES,
    SOME_REPLY,
    SUBJECT_EVENTS,
    WHOLE_RUN,
    CheckContext,
    CheckResult,
    FaultWindow,
    OnDamage,
    checker,
    events_of,
    planned_windows,
)
from reports.checkers.toolkit.dispatch import last_before, registered_dispatch, with_state
from reports.checkers.toolkit.excuses import (
    WARMUP_NS,
    Timers,
    any_row,
    fault_spans,
    frozen,
    has_spare,
    join_rows,
    literal_rows,
    merge_spans,
    outside,
    overlaps,
    send_span,
    small_frame,
    split_excused,
    timers,
    timers_of,
    transit_spans,
    with_excused,
    with_meeting,
)
from reports.checkers.toolkit.facts import (
    END_OF_TIME,
    MS,
    NS,
    Span,
    broker_instances,
    client_attempt_ns,
    client_budget_ns,
    endpoint_instances,
    history_end,
    instance_column,
    kind_count,
    load_span,
    of_the_load,
    options,
    options_of,
    outlasts_an_attempt,
    process_events,
    run_time,
    worker_instances,
)
from reports.checkers.toolkit.results import (
    EVENT_KEYS,
    Found,
    count,
    example,
    examples,
    firsts,
    ms,
    nothing_to_judge,
    problems,
    problems_in,
    result,
    rows,
    spread,
    spread_columns,
    spreads_of,
)
from reports.checkers.toolkit.shared import (
    SHARED,
    per_request,
    per_rid,
    prepare,
    request_details,
    rid_senders,
    stranded,
)

__all__ = [
    "EACH_REQUEST",
    "END_OF_TIME",
    "EVENT_KEYS",
    "MAX_EXAMPLES",
    "MS",
    "NS",
    "SHARED",
    "SOME_REPLY",
    "SUBJECT_EVENTS",
    "WARMUP_NS",
    "WHOLE_RUN",
    "CheckContext",
    "CheckResult",
    "FaultWindow",
    "Found",
    "OnDamage",
    "Span",
    "Timers",
    "any_row",
    "broker_instances",
    "checker",
    "client_attempt_ns",
    "client_budget_ns",
    "count",
    "endpoint_instances",
    "events_of",
    "example",
    "examples",
    "fault_spans",
    "firsts",
    "frozen",
    "has_spare",
    "history_end",
    "instance_column",
    "join_rows",
    "kind_count",
    "last_before",
    "literal_rows",
    "load_span",
    "merge_spans",
    "ms",
    "nothing_to_judge",
    "of_the_load",
    "options",
    "options_of",
    "outlasts_an_attempt",
    "outside",
    "overlaps",
    "per_request",
    "per_rid",
    "planned_windows",
    "prepare",
    "problems",
    "problems_in",
    "process_events",
    "registered_dispatch",
    "request_details",
    "result",
    "rid_senders",
    "rows",
    "run_time",
    "send_span",
    "small_frame",
    "split_excused",
    "spread",
    "spread_columns",
    "spreads_of",
    "stranded",
    "timers",
    "timers_of",
    "transit_spans",
    "with_excused",
    "with_meeting",
    "with_state",
    "worker_instances",
]
