"""A user's own client that makes its own requests (self-driven mode of zchaos's external
client protocol), importing nothing of zchaos: only zmq and json.

zchaos starts it once per Locust user and sends one init line; with ``self_driven = true``
no request lines come. It then makes requests by itself, one at a time, the Lazy Pirate way
(a REQ socket, ``timeout_ms``, a fresh socket and a resend at most ``retries`` times, then
give up), and says each step on stdout: ``send`` as a request leaves, then its ``reply``,
``retry`` or ``abandon``. On ``stop`` (or the end of stdin) it finishes the request it is
on and exits 0.

Request ids are ``<client_id>:<n>``; a body is the id, ``|`` and filler letters (the
system echoes it). ``pause_ms`` between two requests.

Test knobs (option ``bug``): ``swap`` reports every 10th reply with the body of the reply
before it (a client that mixes its replies up); ``phantom`` reports every 10th request as
sent and answered (with its own body) without ever sending it.
"""

import json
import os
import sys

import zmq

OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # anything else printed goes to the log, not the protocol


def say(message):
    print(json.dumps(message), file=OUT, flush=True)


def main():
    init = json.loads(sys.stdin.readline())
    options = init["options"]
    cid = init["client_id"]
    endpoint = init["endpoints"][0]
    timeout_ms = int(options.get("timeout_ms", 2500))
    retries = int(options.get("retries", 3))
    pause_ms = int(options.get("pause_ms", 5))
    bug = str(options.get("bug", "none"))
    context = zmq.Context()
    poller = zmq.Poller()
    stdin = sys.stdin.fileno()
    poller.register(stdin, zmq.POLLIN)
    socket = None
    stopping = False

    def fresh():
        nonlocal socket
        if socket is not None:
            poller.unregister(socket)
            socket.close(linger=0)
        socket = context.socket(zmq.REQ)
        socket.linger = 0
        socket.connect(endpoint)
        poller.register(socket, zmq.POLLIN)

    def stdin_says_stop():
        # zchaos sends only "stop" after init; the end of stdin means the same
        line = sys.stdin.readline()
        return not line or json.loads(line).get("type") == "stop"

    say({"type": "init_ok"})
    fresh()
    n = 0
    last_body = None
    while not stopping:
        n += 1
        rid = f"{cid}:{n}"
        body = f"{rid}|" + "abcdefghijklmnopqrstuvwxyz"[: 1 + n % 26]
        say({"type": "send", "rid": rid, "body": body})
        if bug == "phantom" and n % 10 == 0:
            say({"type": "reply", "rid": rid, "body": body})  # never sent, never answered
            continue
        socket.send_string(body)
        attempt = 1
        while True:
            events = dict(poller.poll(timeout_ms))
            if events.get(stdin) and stdin_says_stop():
                stopping = True  # finish this request first
                poller.unregister(stdin)
                if socket not in events:
                    events = dict(poller.poll(timeout_ms))
            if socket in events:
                got = socket.recv_string()
                shown = last_body if bug == "swap" and n % 10 == 0 and last_body else got
                say({"type": "reply", "rid": rid, "body": shown})
                last_body = got
                break
            if attempt > retries:
                say({"type": "abandon", "rid": rid, "reason": f"no reply after {attempt} sends"})
                fresh()
                break
            attempt += 1
            say({"type": "retry", "rid": rid, "attempt": attempt, "reason": "timeout"})
            fresh()
            socket.send_string(body)
        if not stopping:
            events = dict(poller.poll(pause_ms))
            if events.get(stdin) and stdin_says_stop():
                stopping = True
    socket.close(linger=0)
    context.term()


if __name__ == "__main__":
    main()
