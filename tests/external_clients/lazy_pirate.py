"""A user's own Lazy Pirate client, as zchaos's load through the external-client protocol.

It imports nothing of zchaos (only zmq and json): this is what a user writes, in any
language. zchaos starts it once per Locust user and speaks JSON lines on its stdin and
stdout (README, "Your own implementation"). For each request it runs the Lazy Pirate
rule of the zguide: send on a REQ socket, wait ``timeout_ms``; on a timeout close the
socket (so a late reply can never be taken for a later request), open a new one, resend,
at most ``retries`` times, then give up. Given several endpoints it moves to the next
one on each resend and says which endpoint answered.

Test knobs (options in the init line, 0 = off): ``garbage_at`` writes a line that is not
JSON after the N-th request, ``exit_at`` exits with code 3 on receiving the N-th request.
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
    garbage_at = int(options.get("garbage_at", 0))
    exit_at = int(options.get("exit_at", 0))
    endpoints = init["endpoints"]
    context = zmq.Context()
    current = 0
    socket = None
    say({"type": "init_ok"})
    count = 0
    while True:
        try:
            message = json.loads(input())
        except EOFError:
            break
        if message["type"] == "stop":
            break
        count += 1
        if count == exit_at:
            raise SystemExit(3)
        rid, body = message["rid"], message["body"].encode()
        for attempt in range(1, retries + 2):
            if socket is None:
                socket = context.socket(zmq.REQ)
                socket.linger = 0
                socket.connect(endpoints[current])
            socket.send(body)
            if socket.poll(timeout_ms, zmq.POLLIN):
                reply = socket.recv()
                say({"type": "reply", "rid": rid, "body": reply.decode(), "endpoint": endpoints[current]})
                break
            socket.close()
            socket = None
            current = (current + 1) % len(endpoints)
            if attempt <= retries:
                say({"type": "retry", "rid": rid, "attempt": attempt + 1, "reason": "timeout"})
        else:
            say({"type": "abandon", "rid": rid, "reason": f"no reply after {retries + 1} attempts"})
        if count == garbage_at:
            print("this is not JSON", flush=True)
    if socket is not None:
        socket.close()
    context.term()


if __name__ == "__main__":
    main()
