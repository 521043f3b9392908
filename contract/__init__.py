"""The contracts every part of zchaos shares, and the bottom layer of its imports.

The history schema and its writer, the outcomes and their exit codes, the errors a user
can act on, the run folder and its ``run.json``, port allocation and what a promise means.
Standard library only, and nothing else of zchaos: the systems under test, the fault
injectors, the load clients and the report pipeline all build on it
(docs/architecture.md).
"""
