"""The Worker-Manager Protocol (14/WMP): managers, workers and intermediate devices.

The seed defines the dialogue but no wire encoding; ours is in ``SPEC.md`` beside this
file and implemented by ``wire``. Roles: ``manager``, ``worker``, ``device``.
"""
