"""The frames several checks share, each built and cached once per report
(``CheckContext.shared``) instead of grouping the events again in each check: one row per
request a client sent (``per_request``) and one per request id (``per_rid``), with the
texts of the few a check shows (``request_details``, ``rid_senders``), and the requests
that could not be served where they were sent (``stranded``). A checker names the
ones it reads (``@checker(shares=...)``), so that ``prepare`` plans them before the checks
start. Generic checks and families alike read them (Binary Star's failover timing)."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reports.checkers import CheckContext, events_of
from reports.checkers.toolkit.excuses import transit_spans, with_meeting
from reports.checkers.toolkit.facts import END_OF_TIME, endpoint_instances

#: The client events a request's row sums up.
REQUEST_EVENTS = ("send", "reply", "retry", "abandon", "lost")
#: The Spark setting that plans an aggregation as one step after its shuffle instead of a
#: partial aggregation before it and a final one after.
BYPASS_PARTIAL = "spark.sql.execution.bypassPartialAggregation"
#: The Spark settings that compile each stage of a query into one generated class (whole-stage
#: code generation; Spark plans none while its expressions are not compiled either), which a
#: short history's queries go without (reports/spark.py fit_to, CODEGEN_OFF).
WHOLE_STAGE, FACTORY_MODE = "spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode"
#: How the shared aggregates are planned, whatever the session says (see ``prepare``).
PREPARED = {BYPASS_PARTIAL: "true", WHOLE_STAGE: "true", FACTORY_MODE: "FALLBACK"}


def prepare(ctx: CheckContext, names: Iterable[str]) -> None:
    """Plan the shared aggregates ``names`` (of SHARED) before the checks start, each without
    a partial aggregation: each of their groups (a request, a request id) meets only 2-3
    events, so a partial aggregation before the shuffle reduces almost nothing and costs a
    hash table of every event (at 2M events, warm: per_request 3.4 -> 2.3 s CPU, per_rid
    2.6 -> 1.6 s; bench/checker_scaling.py), and compiled (whole-stage code generation) also
    for a short history, whose other queries Spark interprets: their code names no value of
    the run (no time, no bound; Spark's generated code holds a long literal as it is, a text
    by reference), so a session compiles each once, and later reports find it in Spark's cache
    of generated classes. Interpreted, grouping every client event by request and by request
    id was a warm report's costliest step after the metrics (six CI runs of 1.8k-23k events,
    both frames built and counted, warm, load 9-10: CPU 4.8-5.1 s interpreted, 3.2-3.5 s
    compiled, for the six together; issue 38).

    The settings are the session's: they are set only while these frames are planned
    (``cache`` plans at once; nothing runs yet), before any check runs in another thread (the
    metrics, already running, may plan their query meanwhile: a plan as valid, compiled).
    Frames not prepared are built on first use as before, with Spark's usual two-step
    aggregation."""
    names = sorted(set(names))
    if not names:
        return
    spark = ctx.spark
    saved = {key: spark.conf.get(key, None) for key in PREPARED}
    for key, value in PREPARED.items():
        spark.conf.set(key, value)
    try:
        for name in names:
            ctx.shared(name, SHARED[name])
    finally:
        for key, was in saved.items():
            if was is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, was)


#: Below this many events each client's last request comes from a window over the cached
#: requests (sorted by client), from this many on from a broadcast of one row per client (no
#: sort of every request: a job of its own). The six CI runs of issue 38 (4k-23k events),
#: warm, load 6, the same rows: no_lost's query 0.3-0.9 s with the broadcast, 0.2-0.7 s
#: with the window.
LAST_SEQ_WINDOW_MAX_EVENTS = 50_000


def per_request(ctx: CheckContext, *, last_seq: bool = True) -> DataFrame:
    """One row per request a client sent (``cid``, ``seq``): its first and last send (``ts``,
    ``last_send_ts``), sends, replied / abandoned (0 or 1), retries, abandons, lost (counts),
    the first ``lost`` (``lost_ts``), the first retry, abandon or lost (``problem_ts``), its
    last event (``last_ts``), and its reply's ``latency_us`` and ``reply_ts`` (the latest);
    with ``last_seq``, its client's last request (``last_seq=False``: without it, and without
    the broadcast join that brings it, a Spark job of its own in each query). Its texts
    (writer, request id, reason) are ``request_details``, for the few requests a check shows."""
    per = ctx.shared("per_request", _per_request)
    if not last_seq:
        return per
    if ctx.profile is not None and ctx.profile.events < LAST_SEQ_WINDOW_MAX_EVENTS:
        # A short history's few requests: each client's last by a window over them, a stage of
        # the check's own job, not a broadcast (a job of its own; see the constant).
        return per.withColumn("last_seq", F.max("seq").over(Window.partitionBy("cid")))
    # Each client's last request: a small frame (one row per client) joined to each use,
    # not a window (which would sort every request by client), and from the cached requests:
    # no second scan of the sends, and no shuffle of them (only a row per client and task).
    last = ctx.shared("last_seq", _last_seqs)
    return per.join(F.broadcast(last), per["cid"].eqNullSafe(last["_cid"]), "left").drop("_cid")


def _per_request(ctx: CheckContext) -> DataFrame:
    ev = F.col("ev")
    is_send = ev == "send"
    is_lost = ev == "lost"
    # Only fixed-width values: Spark aggregates in a hash table only then; a minimum of a
    # text (the writer, the request id) makes it sort every event instead, which at 10M
    # events doubled this aggregation's CPU (bench/checker_scaling.py). Those texts serve
    # only the examples: request_details looks them up for the requests shown.
    return (
        events_of(ctx, *REQUEST_EVENTS)
        .groupBy("cid", "seq")
        .agg(
            F.min(F.when(is_send, F.col("ts"))).alias("ts"),
            F.max(F.when(is_send, F.col("ts"))).alias("last_send_ts"),
            F.sum(is_send.cast("int")).alias("sends"),
            F.max((ev == "reply").cast("int")).alias("replied"),
            F.max((ev == "abandon").cast("int")).alias("abandoned"),
            F.sum((ev == "retry").cast("int")).alias("retries"),
            F.sum((ev == "abandon").cast("int")).alias("abandons"),
            F.sum(is_lost.cast("int")).alias("lost"),
            F.min(F.when(is_lost, F.col("ts"))).alias("lost_ts"),
            F.min(F.when(ev.isin("retry", "abandon", "lost"), F.col("ts"))).alias("problem_ts"),
            F.max("ts").alias("last_ts"),
            F.max(F.when(ev == "reply", F.col("latency_us"))).alias("latency_us"),
            F.max(F.when(ev == "reply", F.col("ts"))).alias("reply_ts"),
        )
        .filter(F.col("sends") > 0)
    )


def _last_seqs(ctx: CheckContext) -> DataFrame:
    """Each client's (``_cid``) last request (``last_seq``): the highest ``seq`` it sent, which
    is the highest of its requests with a send (a null ``seq`` counts in neither)."""
    requests = ctx.shared("per_request", _per_request)
    return requests.groupBy(F.col("cid").alias("_cid")).agg(F.max("seq").alias("last_seq"))


def request_details(ctx: CheckContext, requests: DataFrame) -> DataFrame:
    """``requests`` (a few rows of ``per_request``: the ones a check shows) with their texts:
    the writer of their sends (``src``), their request id (``rid``: the sends'; ``any_rid``:
    any of their events'), and the reason of their first ``lost`` (``lost_reason``); each
    the smallest, as in one aggregation over the request's events."""
    ev = F.col("ev")
    is_send = ev == "send"
    # No distinct: a semi join keeps each event once however often its key repeats (a
    # distinct of these few keys was an exchange and a job of its own).
    keys = requests.select(F.col("cid").alias("_cid"), F.col("seq").alias("_seq"))
    mine = F.col("cid").eqNullSafe(F.col("_cid")) & F.col("seq").eqNullSafe(F.col("_seq"))
    details = (
        events_of(ctx, *REQUEST_EVENTS)
        .join(F.broadcast(keys), mine, "left_semi")
        .groupBy(F.col("cid").alias("_cid"), F.col("seq").alias("_seq"))
        .agg(
            F.min(F.when(is_send, F.col("src"))).alias("src"),
            F.min(F.when(is_send, F.col("rid"))).alias("rid"),
            F.min("rid").alias("any_rid"),
            F.min(F.when(ev == "lost", F.col("reason"))).alias("lost_reason"),
        )
    )
    return requests.join(details, mine, "left").drop("_cid", "_seq")


def per_rid(ctx: CheckContext) -> DataFrame:
    """One row per request id (``rid``; null for events without one) that was sent, executed
    or delivered: its sends (with the smallest ``seq`` of them; its client: ``rid_senders``),
    its executions (``execs``, worker ``exec`` events), whether an ok reply answered it
    (``answered``) and its deliveries (replies carrying it, and unexpected messages whose
    ``got_rid`` it is)."""
    return ctx.shared("per_rid", _per_rid)


def _per_rid(ctx: CheckContext) -> DataFrame:
    ev = F.col("ev")
    is_send = ev == "send"
    unexpected = (ev == "unexpected") & F.col("got_rid").isNotNull()
    events = events_of(ctx, "send", "exec", "reply", "unexpected").filter((ev != "unexpected") | unexpected)
    return (
        events.withColumn("key", F.when(ev == "unexpected", F.col("got_rid")).otherwise(F.col("rid")))
        .groupBy("key")
        .agg(
            # No text but the key (see _per_request): the client is rid_senders'.
            F.sum(is_send.cast("int")).alias("sends"),
            F.min(F.when(is_send, F.col("seq"))).alias("seq"),
            F.sum((ev == "exec").cast("int")).alias("execs"),
            F.max((ev == "reply") & F.coalesce(F.col("ok"), F.lit(False))).alias("answered"),
            F.sum(((ev == "reply") | unexpected).cast("int")).alias("deliveries"),
        )
        .withColumnRenamed("key", "rid")
    )


#: The shared aggregates of one group per request or request id, by name (see ``prepare``).
SHARED = {"per_request": _per_request, "per_rid": _per_rid}


def rid_senders(ctx: CheckContext, rids: DataFrame) -> DataFrame:
    """For the request ids in column ``rid`` of ``rids`` (few: those a check shows), the ones
    sent, with the smallest ``cid`` and ``seq`` of their sends."""
    return (
        events_of(ctx, "send")
        .join(rids.select("rid"), "rid", "left_semi")  # a semi join: repeated ids need no distinct
        .groupBy("rid")
        .agg(F.min("cid").alias("cid"), F.min("seq").alias("seq"))
    )


# --- requests sent where nobody served them ---------------------------------------------


def stranded(ctx: CheckContext) -> DataFrame | None:
    """The requests (``cid``, ``seq``) a client stranded: a client of several endpoints (a
    failover client) sent it once, never resent it and got no reply, to an endpoint that
    answered nobody from that send until the request's end (its ``lost``, else ever), where
    that endpoint was not the serving one: another endpoint answered someone meanwhile, the
    server behind it had been killed or restarted before the send, or a cut link moved the
    client there (``_moved_by_a_cut_link``: its request before, to another endpoint, lost where
    a link fault may have dropped it, whoever was asked meanwhile). A Binary Star pair's
    passive server drops what it is sent, and a client that never resends moves on only at
    its deadline. Such a request asked for nothing the system could serve: it is no loss a
    pair owes (``no_lost``) and no request for service to time a recovery from
    (``recovery``, ``bstar_failover_time``). Found by explore on stall-hold-star's correct
    twin: the primary killed and restarted came back passive (its peer took over on hearing
    it start), and clients that joined sent it their first request, which their 16 s
    deadlines declared lost after the load had stopped, nobody having asked the backup; and
    a client that had lost a request in a fault moved to the backup, passive while the
    primary served on, and lost the next one there.

    Not stranded: a request resent; one sent to a server that answered someone else
    meanwhile; one to a silent server while no other answered anyone either, unless a
    restart came before (a server broken from the start, or frozen and thawed, the same
    process, which a correct pair lets serve again unless its peer took over:
    stall-hold-star's planted bug is such a silence). None, with no query, when no client
    kind holds several endpoints."""
    if not _failover_kinds(ctx)[0]:
        return None
    return ctx.shared("stranded", _stranded)


def _failover_kinds(ctx: CheckContext) -> tuple[list[str], bool]:
    """The client kinds that hold several endpoints, and whether they are every kind."""
    kinds = (ctx.meta.get("manifest") or {}).get("clients") or []
    several = [str(k.get("name")) for k in kinds if len(k.get("endpoints") or []) >= 2]
    return several, len(several) == len(kinds)


def _restarted_since(ctx: CheckContext) -> dict[str, int]:
    """endpoint -> when the first kill or restart of a server behind it began."""
    since = {}
    for endpoint, instances in endpoint_instances(ctx).items():
        starts = [
            f.start_ns
            for f in ctx.faults
            if f.outage and not f.on_link and not f.lasting and f.target in instances
        ]
        if starts:
            since[endpoint] = min(starts)
    return since


def _stranded(ctx: CheckContext) -> DataFrame:
    kinds, every_kind = _failover_kinds(ctx)
    endpoints = sorted({str(e) for k in (ctx.meta.get("manifest") or {}).get("clients") or []
                        for e in k.get("endpoints") or []})  # fmt: skip
    sends = events_of(ctx, "send")
    if not every_kind:  # the client kind that wrote each send
        sends = sends.filter(F.col("kind").isin(kinds))
    # A driven client program's send has no endpoint (zchaos handed it the request; the
    # program chose where it went): its lost line may say where it waited.
    waited = events_of(ctx, "lost").select("cid", "seq", F.col("endpoint").alias("_waited"))
    sends = (
        sends.select("cid", "seq", "ts", "endpoint")
        .join(waited, ["cid", "seq"], "left")
        .select("cid", "seq", "ts", F.coalesce("endpoint", "_waited").alias("endpoint"))
        .filter(F.col("endpoint").isin(endpoints))
    )
    since = _restarted_since(ctx)
    restarted = F.lit(False)
    if since:
        at = F.create_map(*(F.lit(x) for endpoint, ns in since.items() for x in (endpoint, ns)))
        restarted = F.coalesce(F.col("ts") >= at[F.col("endpoint")], F.lit(False))
    never = (
        ctx.shared("per_request", _per_request)
        .filter((F.col("replied") == 0) & (F.col("retries") == 0) & (F.col("sends") == 1))
        .select("cid", "seq", F.coalesce("lost_ts", F.lit(END_OF_TIME)).alias("until"))
    )
    # ``restarted``: known not to be the serving one before the send (its server restarted,
    # or the client was moved to it by a fault), whoever answered meanwhile.
    candidates = (
        never.join(sends, ["cid", "seq"])
        .join(_moved_by_a_cut_link(ctx, sends), ["cid", "seq"], "left")
        .withColumn("restarted", restarted | F.coalesce(F.col("_moved"), F.lit(False)))
        .drop("_moved")
    )
    # Whether each endpoint answered anyone from the send to the request's end: the next
    # reply of each endpoint after the send, from one window over the replies by endpoint
    # (a probe sorts before a reply at the same time: a reply then counts).
    probes = candidates.select(
        "cid", "seq", "until", "endpoint", "restarted",
        F.explode(F.array(*(F.lit(e) for e in endpoints))).alias("_e"), F.col("ts").alias("_k"),
        F.lit(0).alias("_o"),
    )  # fmt: skip
    answers = (
        events_of(ctx, "reply")
        .filter(F.col("endpoint").isin(endpoints))
        .select(
            F.lit(None).cast("string").alias("cid"),
            F.lit(None).cast("long").alias("seq"),
            F.lit(None).cast("long").alias("until"),
            F.lit(None).cast("string").alias("endpoint"),
            F.lit(None).cast("boolean").alias("restarted"),
            F.col("endpoint").alias("_e"),
            F.col("ts").alias("_k"),
            F.lit(1).alias("_o"),
        )
    )
    later = Window.partitionBy("_e").orderBy("_k", "_o").rowsBetween(0, Window.unboundedFollowing)
    heard = (
        probes.unionByName(answers)
        .withColumn("_next", F.min(F.when(F.col("_o") == 1, F.col("_k"))).over(later))
        .filter(F.col("_o") == 0)
        .withColumn("_heard", F.coalesce(F.col("_next") <= F.col("until"), F.lit(False)))
        .groupBy("cid", "seq")
        .agg(
            F.max(F.when(F.col("_e") == F.col("endpoint"), F.col("_heard"))).alias("self"),
            F.max(F.when(F.col("_e") != F.col("endpoint"), F.col("_heard"))).alias("other"),
            F.max("restarted").alias("restarted"),
        )
    )
    not_serving = F.coalesce(F.col("other"), F.lit(False)) | F.col("restarted")
    return heard.filter(~F.col("self") & not_serving).select("cid", "seq")


def _moved_by_a_cut_link(ctx: CheckContext, sends: DataFrame) -> DataFrame:
    """The requests (``cid``, ``seq``, ``_moved`` true) a client sent to another endpoint
    than its request before, which it had declared lost where a link fault may have dropped
    it on the wire (``transit_spans``, as ``no_lost`` excuses such a loss): the client moved
    on at its deadline because of the fault, not of the system, to a server that need not
    serve (a pair's passive one drops what it is sent). Explore, stall-hold-star seed 1: a
    reset on the primary's client link took every client's request, each client waited out
    its 14 s deadline, and the next went to the passive backup while nobody asked the
    primary: no other endpoint answered anyone meanwhile, as none was asked. A request the
    system itself held (a server frozen, which then kept it: that subject's planted bug,
    seed 2) moves its client too, and the next request's loss counts."""
    first = sends.groupBy("cid", "seq").agg(
        F.min_by("endpoint", "ts").alias("endpoint"), F.min("ts").alias("ts")
    )
    lost = events_of(ctx, "lost").groupBy("cid", "seq").agg(F.min("ts").alias("lost_ts"))
    before = Window.partitionBy("cid").orderBy("seq")
    previous = (
        first.join(lost, ["cid", "seq"], "left")
        .withColumn("_next_seq", F.lead("seq").over(before))
        .withColumn("_next_endpoint", F.lead("endpoint").over(before))
        .filter(F.col("lost_ts").isNotNull() & (F.col("_next_endpoint") != F.col("endpoint")))
    )
    return (
        with_meeting(previous, transit_spans(ctx), "_on_the_wire", ts="ts", until="lost_ts")
        .filter(F.col("_on_the_wire"))
        .select("cid", F.col("_next_seq").alias("seq"), F.lit(True).alias("_moved"))
    )
