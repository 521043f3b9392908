"""A user's own Lazy Pirate client, as zchaos's load through the external-client protocol.

It imports nothing of zchaos (only zmq and json): this is what a user writes, in any
language. zchaos starts it once per Locust user and speaks JSON lines on its stdin and
stdout (README, "Your own implementation"). For each request it runs the Lazy Pirate
rule of the zguide: send on a REQ socket, wait ``timeout_ms``; on a timeout close the
socket (so a late reply can never be taken for a later request), open a new one, resend,
at most ``retries`` times, then give up. Given several endpoints it moves to the next
one on each resend and says which endpoint answered.

Test knobs (options in the init line, 0 = off): ``garbage_at`` writes a line that is not
JSON after the N-th request, ``exit_at`` exits with code 3 on receiving the N-th request,
``hang_at`` hangs on receiving the N-th request: it reads nothing more (``stop`` included),
answers nothing and ignores SIGTERM and SIGINT, until it is killed; ``crash_at_start``
raises an exception (a traceback on stderr) before it is ready. ``chatty`` says
"I: connecting to ENDPOINT..." on stdout whenever it opens a socket, as the guide's
flcliapi does: a line that corrupts the protocol unless ``own_fd`` keeps the protocol on
a descriptor of its own (``protocol_out`` below).
"""

import json
import os
import signal
import sys
import time

import zmq

OUT = sys.stdout


def protocol_out():
    """Keep the protocol on a descriptor of its own: a copy of stdout for zchaos's lines,
    and stdout (fd 1, for Python and C libraries alike) pointed at stderr, the run's log."""
    global OUT
    OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)


def say(message):
    print(json.dumps(message), file=OUT, flush=True)


def hang():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        time.sleep(1)


def main():
    init = json.loads(input())
    options = init["options"]
    timeout_ms = int(options.get("timeout_ms", 2500))
    retries = int(options.get("retries", 3))
    garbage_at = int(options.get("garbage_at", 0))
    exit_at = int(options.get("exit_at", 0))
    hang_at = int(options.get("hang_at", 0))
    chatty = bool(options.get("chatty", 0))
    if options.get("own_fd", 0):
        protocol_out()
    if options.get("crash_at_start", 0):
        raise RuntimeError("crashed at start (crash_at_start)")
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
        if count == hang_at:
            hang()
        rid, body = message["rid"], message["body"].encode()
        for attempt in range(1, retries + 2):
            if socket is None:
                if chatty:
                    print(f"I: connecting to {endpoints[current]}...", flush=True)
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
            print("this is not JSON", file=OUT, flush=True)
    if socket is not None:
        socket.close()
    context.term()


if __name__ == "__main__":
    main()
