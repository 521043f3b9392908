"""A user's own Freelance (model 3) client program, speaking zchaos's external-client
protocol (JSON lines on stdin/stdout); it imports only zmq and json.

One ROUTER socket connected to every endpoint; a server's identity is its endpoint. It
pings the servers, sends each request (``[endpoint, sequence, body]``) to the first one
that answered lately, and on a timeout fails over to the next. With ``match_sequence``
(the default) a reply whose sequence is not the request's is discarded.

Two bugs can be switched on, for the test subjects of the Freelance checks:
``match_sequence = false`` takes whatever reply comes next as the answer to the request
in hand, so a late reply from a server it failed over from (say one that was frozen) is
accepted for a later request (correct_reply); ``failover = false`` sends every attempt to
the first endpoint only, so a dead first server means abandoned requests while the
others are up (freelance_failover_served).
"""

import json
import time

import zmq


def say(message):
    print(json.dumps(message), flush=True)


def main():
    init = json.loads(input())
    options = init["options"]
    timeout_s = int(options.get("timeout_ms", 500)) / 1000
    retries = int(options.get("retries", 2))
    ttl_s = int(options.get("server_ttl_ms", 1000)) / 1000
    match_sequence = bool(options.get("match_sequence", True))
    failover = bool(options.get("failover", True))
    endpoints = init["endpoints"]
    context = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    socket.linger = 0
    socket.router_mandatory = 1
    for endpoint in endpoints:
        socket.connect(endpoint)
    heard = dict.fromkeys(endpoints, 0.0)
    last_ping = dict.fromkeys(endpoints, 0.0)

    def send(endpoint, frames):
        try:
            socket.send_multipart([endpoint.encode(), *frames], zmq.NOBLOCK)
            return True
        except zmq.ZMQError:
            return False  # no connection to that server (yet)

    def receive(wait_s):
        """One message as (endpoint, frames), or None after wait_s; PONGs only refresh."""
        end = time.monotonic() + wait_s
        while True:
            now = time.monotonic()
            for endpoint in endpoints:
                if now - last_ping[endpoint] >= ttl_s / 3 and send(endpoint, [b"PING"]):
                    last_ping[endpoint] = now
            if not socket.poll(max(1, int(min(end - now, ttl_s / 3) * 1000))):
                if time.monotonic() >= end:
                    return None
                continue
            frames = socket.recv_multipart()
            endpoint = frames[0].decode("utf-8", "replace")
            heard[endpoint] = time.monotonic()
            if frames[1:] != [b"PONG"]:
                return endpoint, frames[1:]

    say({"type": "init_ok"})
    sequence = 0
    while True:
        try:
            message = json.loads(input())
        except EOFError:
            break
        if message["type"] == "stop":
            break
        sequence += 1
        rid, body = message["rid"], message["body"].encode()
        control = str(sequence).encode()
        tried = []
        for attempt in range(1, retries + 2):
            if attempt > 1:
                say({"type": "retry", "rid": rid, "attempt": attempt, "reason": "timeout"})
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                alive = [e for e in endpoints if time.monotonic() - heard[e] < ttl_s]
                if not failover:  # BUG when failover is off: the first server or none
                    alive = endpoints[:1]
                fresh = [e for e in alive if e not in tried] or alive
                if fresh and send(fresh[0], [control, body]):
                    tried.append(fresh[0])
                    break
                receive(0.05)
            got = None
            while got is None and time.monotonic() < deadline:
                arrived = receive(deadline - time.monotonic())
                if arrived is None:
                    break
                endpoint, frames = arrived
                if not match_sequence or frames[0] == control:  # BUG when match_sequence is off
                    got = endpoint, frames
            if got is not None:
                say({"type": "reply", "rid": rid, "body": got[1][-1].decode(), "endpoint": got[0]})
                break
            if tried:
                heard[tried[-1]] = 0.0  # silent past the timeout: not alive until it talks again
        else:
            say({"type": "abandon", "rid": rid, "reason": f"no reply after {retries + 1} attempts"})
    socket.close()
    context.term()


if __name__ == "__main__":
    main()
