"""A user's own Lazy Pirate client with a deliberate bug in its retry logic (a test subject).

Like lazy_pirate.py beside it, it imports only zmq and json and speaks zchaos's
external-client protocol. Its bug: on a timeout it resends on the same socket (a DEALER
that imitates REQ) instead of closing it, and it takes the next message that arrives as
the reply to the request in hand. A late reply to an earlier request (or an earlier
attempt) is then accepted as the reply to a later one: zchaos's correct_reply check sees
the wrong body come back.
"""

import json

import zmq


def say(message):
    print(json.dumps(message), flush=True)


def main():
    init = json.loads(input())
    options = init["options"]
    timeout_ms = int(options.get("timeout_ms", 2500))
    retries = int(options.get("retries", 3))
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.linger = 0
    socket.connect(init["endpoints"][0])
    say({"type": "init_ok"})
    while True:
        try:
            message = json.loads(input())
        except EOFError:
            break
        if message["type"] == "stop":
            break
        rid, body = message["rid"], message["body"].encode()
        for attempt in range(1, retries + 2):
            socket.send_multipart([b"", body])
            if socket.poll(timeout_ms, zmq.POLLIN):
                reply = socket.recv_multipart()[-1]  # BUG: whatever arrives is taken as this request's reply
                say({"type": "reply", "rid": rid, "body": reply.decode()})
                break
            if attempt <= retries:  # BUG: the same socket, so the lost attempt's reply may still come
                say({"type": "retry", "rid": rid, "attempt": attempt + 1, "reason": "timeout"})
        else:
            say({"type": "abandon", "rid": rid, "reason": f"no reply after {retries + 1} attempts"})
    socket.close()
    context.term()


if __name__ == "__main__":
    main()
