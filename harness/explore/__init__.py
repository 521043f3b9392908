"""``zchaos explore``: zchaos looks for the bugs nobody wrote a scenario for (issue 36).

- ``generate.py``: scenarios made from a manifest's topology and the fault cards' explore
  ranges, and mutations of them; every one a normal scenario (TOML data that
  harness/scenario.py ``parse_scenario`` reads), so each run can be replayed and written out;
- ``signature.py``: what one run showed, as a set of behaviour features from its verdict,
  and the finding (check, kind of problem, fault kinds) a violated run is deduplicated by;
- ``loop.py``: the exploration itself: the runs (one Spark session for all), the corpus,
  findings written as standalone scenarios, ``explore.json`` and the terminal's progress.
"""
