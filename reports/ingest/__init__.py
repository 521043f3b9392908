"""A run's history read into events, with an account of what was not an event.

``read.read_events`` is the way in: it reads the history's Parquet form when current, else
converts its JSON lines to that form, by pyarrow for a clean history (``arrow``, started in
a thread while Spark starts; reusing the parts that ``follow`` converted while the run went
on) or by Spark's permissive reader for one pyarrow declines (``read``), which accounts for
every line that is not an event (``damage``: located by file and line, attributed to the
request or client it names, files cut mid-line and their writers; then what that leaves in
doubt for the checks).
"""
