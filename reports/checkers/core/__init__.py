"""The generic checks: invariants every request-reply system under test is held to.

Each check is a handful of Spark DataFrame operations over the whole history (nothing but
counts and the first offending events comes back to Python), and reports exact counts, up
to MAX_EXAMPLES offending events (the first of each kind, then the earliest), a one-line
summary and figures:
``delivery`` (no_lost, no_duplicate, in_order, correct_reply, execution_count), ``steady``
(steady_state), ``recovery`` and ``exits`` (no_unexpected_exit). They read the toolkit
(reports/checkers/toolkit) and their own shared frames, one row per request or request id,
with the rule that excuses whole requests (``aggregates``).
"""
