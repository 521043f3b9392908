"""dwork: a task scheduler with dependencies spoken to with QueryMsg protocol buffers over
ZeroMQ (the seed's messaging API). Roles: ``scheduler``, ``worker``, ``monitor``; the
messages are in ``proto/TaskMsg.proto``, compiled to ``TaskMsg_pb2.py`` and its types
``TaskMsg_pb2.pyi`` (committed; ``tests/test_dwork_messages.py`` regenerates both with
grpcio-tools and compares).
"""
