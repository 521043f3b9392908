"""dwork: a task scheduler with dependencies spoken to with QueryMsg protocol buffers over
ZeroMQ (the seed's messaging API). Roles: ``scheduler``, ``worker``, ``monitor``; the
messages are in ``proto/TaskMsg.proto``, compiled to ``TaskMsg_pb2.py`` (committed;
``tests/test_dwork_messages.py`` regenerates it with grpcio-tools and compares).
"""
