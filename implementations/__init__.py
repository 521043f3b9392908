"""The systems under test, one package per protocol family, each with its manifest.

Every role runs alone as ``python -m implementations.<family>.<role>``; the only thing
they take from zchaos is ``contract.history`` (standard library only), to record the
events the checkers need when the runner asks them to.
"""
