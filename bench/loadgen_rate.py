"""How many requests per second one Locust process makes with zchaos's Lazy Pirate user,
with the history recorded and without, against a bare ``zmq.green`` REQ user measured in
the same run, all against a C-speed echo (a ROUTER proxied onto itself).

    python bench/loadgen_rate.py [--seconds 15] [--users 50] [--rounds 3] [--profile] [--ladder]

The anchor, "bare", is the least a Locust user of a REQ server does: one green REQ socket
per user, send a payload of the same size, receive, fire Locust's request event (Locust's
statistics are how every variant is counted). zchaos's user does what a run needs on top:
request ids and seeded payloads, a timeout on every receive (the Lazy Pirate rule), the
reply checked against the request, and with history on a ``send`` and a ``reply`` event per
request written to its JSON-lines file. Each round runs the three variants one after the
other (in a rotated order); the ratios are taken within a round, so that the machine's
other load moves anchor and subject together, and their median is printed.
``--profile`` runs zchaos's user (history on) once more under cProfile and prints where
its time goes. A variant with a failed request, or a recorded history with a resend or more
requests unanswered than users, stops the benchmark: its rate would not be a fair one.
``--ladder`` adds rungs between the bare user and zchaos's: the bare user plus zchaos's
receive (a ``GreenSocket`` waited on by ``recv_within``; before 2026-11-27 22:50 a
zmq.green socket under a gevent timeout, without zmq.green's wake-up timer), then plus the
request id, the seeded payload and the reply check, then plus
the ``RequestLog`` and ``Reply`` objects and Locust's event with its context, then plus the
history's two writes per request; the rungs run in order, then in reverse, round by round.

Figures (2026-11-27 03:45-03:55 UTC, 50 users, 10 s x 3 rounds, under the shared lock, load
average 2.3): bare 9,000-9,300 requests/s. Before the user's path was cut: history off
x0.41, history on x0.39. After (a request's shared fields encoded once, the C encoder called
directly, a green receive under a gevent timeout instead of zmq.green's poll, the filler
from one draw; the direct formatting of an event's own fields came after): history off
x0.68, history on x0.49.

Figures (2026-11-27 09:38-09:40 UTC, ``flock /tmp/zchaos-heavy.lock python
bench/loadgen_rate.py --seconds 10 --rounds 3``, load average 1.9 before, 2.2 after): bare
7,769 requests/s (rounds 7,769, 7,626, 8,206); history off x0.75 (5,357-6,985), history on
x0.63 (4,222-5,821). Before these cuts the same command gave history off x0.49, history on
x0.52 (08:39, load 2.1, bare 8,605). Again after landing (10:15-10:17 UTC, load 2.4 before,
2.2 after): bare 10,057 (8,698-10,082), history off x0.86 (5,966-10,291), history on x0.68
(5,893-8,042), recording 21% of zchaos's rate. Rounds spread widely on the shared cores.
What was cut: a one-frame request sent by ``send`` and its reply received by ``recv`` (zmq.green's
send_multipart / recv_multipart set attributes and combine flag enums around every frame),
zmq.green's own 11.6 s wake-up timer left off the Lazy Pirate REQ socket (the receive's
timeout looks at the socket once more instead, so a receive makes one timer, as the bare
user's), a request's shared history fields from a per-client template. The target, x0.80
with history on, is not met. What ``--profile`` still shows beyond the bare user, per
request: the two JSON lines (formatting, shape check, one ``write`` each: 10-21% of the rate
between history off and on, now the largest part), then the user's own Python (request id
and payload, the RequestLog, the Reply, the reply check, Locust's event with its context) spread over a
dozen small functions; zmq.green's own work (its state callback, flag enums, the EAGAIN
error of the first receive attempt, the wait) is now the same as the bare user's.

Each line also gives the CPU microseconds of Locust's main thread per request (the green
users all run on it). Figures (2026-11-27 13:04-13:14 UTC, same command, load average 3.3
before, 2.2 after): bare 7,942 requests/s and 128 us CPU per request; history off x0.73,
174 us; history on x0.60, 214 us. In every variant the CPU per request matched the wall time
per request: the rate is bound by that thread's CPU, not by waiting on the echo. What is not
explained yet: outside Locust (timeit, no sockets) the user's own path, from the request id
to the reply event, costs 6 us per request with history off and 13 us with it on, while the
differences to bare measured here are 46 and 86 us; sampled by py-spy, the same zmq.green
send and receive lines took longer in zchaos's Locust process than in a bare user that
receives through the same ``recv_within``. The Python garbage collector is not it (five
young collections in 6 s, none older); gc.freeze and a larger threshold moved nothing
beyond the noise, which is 10-20% between runs minutes apart on these shared cores.

Where the difference goes (2026-11-27 14:59-16:00 UTC, ``flock /tmp/zchaos-heavy.lock python
bench/loadgen_rate.py --seconds 10 --rounds 3 --ladder``, twice, load average 2.5 then 1.1
before, 2.2 and 2.0 after), CPU us per request, first run / second run:

    bare                   126 / 127
    +recv_within           128 / 124   (x1.07 / x0.99 bare)
    +ids, payload, check   151 / 151   (x0.88 / x0.89)
    +log, reply, context   153 / 162   (x0.86 / x0.74)
    +history writes        182 / 202   (x0.64 / x0.63)
    history off            167 / 175   (x0.69 / x0.74)
    history on             211 / 200   (x0.57 / x0.61)

The receive under a gevent timeout costs nothing; no other rung makes a jump of its own:
the request id, payload and check (+24 us) and the history's writes (+29-40 us) are the
largest; zchaos's user with history off is 13-14 us above the rung that copies its pieces.
Ruled out on the way: Locust itself (the same users driven by a plain gevent loop of 50
greenlets, no runner, show the same differences: bare about 100 us, zchaos's user history
off +30-50 us); the greenlet's stack copy (the C stack saved per suspended user greenlet is
2,840 bytes for the bare and for zchaos's user alike: they switch at the same depth); one hot
spot (``perf record -e cpu-clock`` of those greenlets spreads zchaos's extra CPU evenly over
libpython, libzmq and the kernel, and two runs of one user minutes apart differ by as much,
in the same even way: the machine's noise). What the extra is: instructions. Counted by
valgrind (``valgrind --tool=cachegrind --cache-sim=no``, user space of the whole process,
per request as the difference between a 2 s and an 8 s run of the plain gevent loop), a
request takes 224k instructions bare, 242k with recv_within (under valgrind the bare receive
often finds its reply at once and skips zmq.green's timer, which the load never does), 251k
with the ids, payload and check, 271k with the log, reply and context, 275k for zchaos's user
with history off (x1.23 bare) and 301k with it on (x1.34; the count varies by a few percent
between runs). In the load those instructions run at about the bare user's own pace (bare:
224k in 126 us; history off: 275k in 167-175 us), two to three times slower than the same
Python in a timeit loop, whose warm caches and
branch predictors a load of 50 greenlets, libzmq's thread and the machine's other tenants do
not leave: that is why 6 and 13 us in timeit are 46 and 86 us here. The recording adds 26k
instructions in user space (about 15 us at that pace) and the kernel's side of its two writes,
which valgrind does not count: 8-11 us of system time per request (the main thread's
getrusage in the plain gevent loop, three rounds: 8-15 us with history off, 18-22 us on; an
O_APPEND write to ext4 is 1.3 us in a timeit loop), 25-44 us of CPU in all. So x0.80 with
history on leaves about 32 us per request above
bare, not much more than the two writes take: it needs the user's own path brought near
bare's instruction count as well as a cheaper recording (fewer lines is not an option: one
write per event, DESIGN.md); no single piece of the path reaches it, and removing one moves
the rate by less than the noise. Nothing in the user's path was changed by this work.

That conclusion missed the largest lever: the wait itself, which bare and zchaos's user
shared. Figures after zchaos's Lazy Pirate client moved from zmq.green's socket to
``GreenSocket`` (loadtests/adapters/base.py: a plain socket whose wait starts an io watcher
on its ZMQ_FD and a timer that switch straight back to the waiting greenlet, where
zmq.green sets two AsyncResults after every send and receive and makes an AsyncResult, a
timer and a callback round of the hub per wait). 2026-11-27 22:35-22:39 UTC, ``flock
/tmp/zchaos-heavy.lock python bench/loadgen_rate.py --seconds 10 --rounds 3`` on main
(d70a5b8) then on the change, one after the other under one lock, load average 2.7 before,
2.9 between, 2.7 after:

    before   bare 10,033 requests/s  98 us CPU/request; history off x0.74 161 us; on x0.57 177 us
    after    bare  8,396 requests/s 119 us;             history off x1.66  73 us; on x1.16 101 us

The process's set-up was not it, as the lead of the earlier session supposed: the bare
user's request run inside zchaos's own Locust process (its locustfile, context, history
writer and user class; a scratch locustfile, three rounds of 6 s) cost what the bare user
costs (143/130/124 against 132/118/147 us), and ``strace -c -f`` counted the same system
calls per request in bare and zchaos's user (getpid 10, poll 7, epoll_ctl 2, read and write
1.6 each; the history adds its two writes). The ladder after the change (22:57-22:59 UTC,
``--seconds 8 --rounds 2 --ladder``, load average 2.0 before, 2.3 after), CPU us per
request:

    bare                   110
    +recv_within            53   (x2.09 bare: GreenSocket's wait against zmq.green's)
    +ids, payload, check    66   (x1.62)
    +log, reply, context    76   (x1.46)
    +history writes        113   (x1.00)
    history off             85   (x1.31)
    history on             110   (x1.02)

The target, x0.80 with history on, is met in both runs, though the second gave x1.02 where
the first gave x1.16 (rounds spread 10-20% on these shared cores). What is left above the
cheaper wait is now mostly the recording: the two O_APPEND writes per request (25-37 us of
CPU in the load, about a third of zchaos's request, most of it the kernel's side), then the
user's own Python (ids, payload, check, log, reply, Locust's event: 23 us). One write per
event is the history's contract (crash-safe lines, DESIGN.md), so the writes stay.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loadtests.config import ENV_LOAD, ClientLoad, LoadConfig  # noqa: E402

PAYLOAD_BYTES = LoadConfig([], "").payload_bytes

#: The anchor's locustfile (written to a temp folder: Locust takes a file).
BARE_USER = """
import os, time
import zmq.green as zmq
from locust import User, constant, task

PAYLOAD = b"x" * int(os.environ["BENCH_PAYLOAD_BYTES"])
ENDPOINT = os.environ["BENCH_ENDPOINT"]
_context = zmq.Context()


class BareUser(User):
    wait_time = constant(0)

    def on_start(self):
        self.socket = _context.socket(zmq.REQ)
        self.socket.linger = 0
        self.socket.connect(ENDPOINT)

    def on_stop(self):
        self.socket.close()

    @task
    def one_request(self):
        started = time.perf_counter()
        self.socket.send(PAYLOAD)
        reply = self.socket.recv()
        self.environment.events.request.fire(
            request_type="bare", name="request", response_time=(time.perf_counter() - started) * 1000,
            response_length=len(reply), exception=None, context={},
        )
"""

#: A second locustfile given to every variant: the CPU seconds of the Locust process's main
#: thread (every user's greenlet runs on it; libzmq's I/O thread is left out) and its request
#: count, from the moment every user runs (``spawning_complete``) to the end of the load
#: (``test_stop``). CPU microseconds per request is what a request costs the user's own
#: path; when it matches the wall time per request, the rate was bound by that thread's CPU
#: and not by waiting on the echo.
CPU_METER = """
import json, os, time
from locust import events

_marks = []
_env = []


@events.init.add_listener
def _keep(environment, **_kw):
    _env.append(environment)


def _mark():
    _marks.append((time.thread_time(), _env[0].stats.total.num_requests))


events.spawning_complete.add_listener(lambda **_kw: _mark())


@events.test_stop.add_listener
def _end(**_kw):
    _mark()
    with open(os.environ["BENCH_METER_FILE"], "w") as fh:
        json.dump(_marks, fh)
"""

#: ``--ladder``'s locustfile: the bare user with zchaos's user's pieces added one by one, up
#: to ``BENCH_STEP`` (1 or more) of them (the rungs of LADDER), zchaos's own functions where
#: it has them. Step 0, the bare user itself, is BARE_USER.
LADDER_USER = """
import itertools, os, random, time
import zmq.green as zmq
from locust import User, constant, task

from contract.history import HistoryWriter, NullWriter, history_file, payload_for, request_id, rid_of
from loadtests.adapters.base import Reply, RequestLog, client_socket, recv_within, send_message

STEP = int(os.environ["BENCH_STEP"])
SIZE = int(os.environ["BENCH_PAYLOAD_BYTES"])
PAYLOAD = b"x" * SIZE
ENDPOINT = os.environ["BENCH_ENDPOINT"]
HISTORY = os.environ.get("BENCH_HISTORY", "")
LETTERS = bytes(97 + b % 26 for b in range(256))
_context = zmq.Context()
_numbers = itertools.count(1)
_writer = HistoryWriter(history_file(HISTORY, "locust-0"), "locust") if HISTORY else NullWriter("locust")


class LadderUser(User):
    wait_time = constant(0)

    def on_start(self):
        self.socket = client_socket(_context, zmq.REQ)
        self.socket.linger = 0
        self.socket.connect(ENDPOINT)
        self.cid = f"client-{next(_numbers)}"
        self.seq = 0
        self.draw = random.Random(f"1:{self.cid}").getrandbits
        self.fire = self.environment.events.request.fire

    def on_stop(self):
        self.socket.close()

    @task
    def one_request(self):
        if STEP == 1:
            body = [PAYLOAD]
        else:
            self.seq = seq = self.seq + 1
            rid = request_id(self.cid, seq)
            filler = self.draw(64).to_bytes(8, "little").translate(LETTERS)
            body = [payload_for(rid, SIZE, filler)]
        if STEP >= 3:
            log = RequestLog(_writer, self.cid, seq, rid, "lazy_pirate", None)
        started = time.perf_counter()
        send_message(self.socket, body)
        if STEP >= 3:
            log.sent()
        frames = recv_within(self.socket, 2500)
        exception = None
        if STEP >= 2:
            if frames is None or rid_of(frames[0]) != rid:
                exception = RuntimeError("not the reply")
        if STEP >= 3:
            outcome = Reply(frames, endpoint=ENDPOINT)
            frames = outcome.frames
        elapsed = time.perf_counter() - started
        if STEP >= 2 and frames != body:
            exception = RuntimeError("reply differs")
        if STEP >= 3:
            fields = {"ok": exception is None, "latency_us": int(elapsed * 1e6), "endpoint": "e"}
            _writer.emit_shared("reply", log.shared, fields)
        self.fire(
            request_type="ladder", name="request", response_time=elapsed * 1000,
            response_length=sum(map(len, frames)), exception=exception,
            context={"cid": self.cid, "seq": log.seq} if STEP >= 3 else {},
        )
"""

VARIANTS = ("bare", "history off", "history on")
#: --ladder's variants: the rungs of LADDER_USER by their step, then zchaos's own user.
LADDER = {
    "bare": 0,
    "+recv_within": 1,
    "+ids, payload, check": 2,
    "+log, reply, context": 3,
    "+history writes": 4,
    "history off": None,
    "history on": None,
}


class Rate(NamedTuple):
    """One measurement: Locust's requests/s, and the main thread's CPU microseconds per
    request while every user ran."""

    wall: float
    cpu_us: float


def start_echo(ctx: zmq.Context) -> str:
    """A ROUTER proxied onto itself: every request goes straight back to its sender, in C."""
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")

    def serve() -> None:
        try:
            zmq.proxy(router, router)
        except zmq.ContextTerminated:
            router.close(linger=0)

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{port}"


def run_locust(
    variant: str, endpoint: str, args: argparse.Namespace, work: Path, tag: str, profile: Path | None = None
) -> Rate:
    """The rate of one Locust process running ``variant``'s user for ``args.seconds``."""
    prefix = work / f"stats-{tag}"
    meter, marks = work / "cpu_meter.py", work / f"meter-{tag}.json"
    meter.write_text(CPU_METER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_METER_FILE": str(marks)}
    history = str(work / f"history-{tag}") if variant in ("history on", "+history writes") else ""
    if variant == "bare":
        locustfile = work / "bare_user.py"
        locustfile.write_text(BARE_USER)
        env.update(BENCH_ENDPOINT=endpoint, BENCH_PAYLOAD_BYTES=str(PAYLOAD_BYTES))
    elif LADDER.get(variant) is not None:
        locustfile = work / "ladder_user.py"
        locustfile.write_text(LADDER_USER)
        env.update(
            BENCH_ENDPOINT=endpoint, BENCH_PAYLOAD_BYTES=str(PAYLOAD_BYTES),
            BENCH_STEP=str(LADDER[variant]), BENCH_HISTORY=history,
        )  # fmt: skip
    else:
        locustfile = ROOT / "loadtests" / "locustfile.py"
        client = ClientLoad(name="lazy_pirate", adapter="lazy_pirate", endpoints=[endpoint])
        env[ENV_LOAD] = LoadConfig(clients=[client], history_dir=history, wait_ms=0).to_env()
    python = [sys.executable, *(["-m", "cProfile", "-o", str(profile)] if profile else [])]
    subprocess.run(
        [
            *python, "-m", "locust", "-f", f"{locustfile},{meter}", "--headless",
            "--users", str(args.users), "--spawn-rate", str(args.users), "--run-time", f"{args.seconds}s",
            "--csv", str(prefix), "--only-summary", "--loglevel", "ERROR", "--exit-code-on-error", "0",
        ],
        env=env, check=True, cwd=ROOT, timeout=args.seconds + 60,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    with open(f"{prefix}_stats.csv") as fh:
        total = next(row for row in csv.DictReader(fh) if row["Name"] == "Aggregated")
    # A rate only counts if the requests were right: a faster user that times out early or
    # loses replies would otherwise look like a win (one did, with a shrinking receive timeout).
    if int(total["Failure Count"]):
        raise SystemExit(f"{variant}: {total['Failure Count']} of {total['Request Count']} requests failed")
    if history:
        check_history(Path(history), args.users)
    (cpu0, n0), (cpu1, n1) = json.loads(marks.read_text())
    return Rate(wall=float(total["Requests/s"]), cpu_us=(cpu1 - cpu0) / (n1 - n0) * 1e6)


def check_history(history: Path, users: int) -> None:
    """Every request of the recorded history answered, none resent: at most one request per
    user may be left without its reply, the one in flight when the run time ran out."""
    counts = dict.fromkeys(("send", "retry", "reply"), 0)
    for path in history.glob("*.jsonl"):
        with path.open() as fh:
            for line in fh:
                ev = json.loads(line).get("ev")
                if ev in counts:
                    counts[ev] += 1
    if not counts["send"] or counts["retry"] or not 0 <= counts["send"] - counts["reply"] <= users:
        raise SystemExit(f"history on: the recorded history is not a clean run: {counts} ({history})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=15, help="length of each measurement")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the three variants (noise on shared cores)"
    )
    parser.add_argument("--profile", action="store_true", help="profile zchaos's user, history on (cProfile)")
    parser.add_argument(
        "--ladder",
        action="store_true",
        help="the bare user with zchaos's pieces added one by one (LADDER), then zchaos's user",
    )
    args = parser.parse_args()
    variants = tuple(LADDER) if args.ladder else VARIANTS
    ctx = zmq.Context()
    endpoint = start_echo(ctx)
    rates: dict[str, list[Rate]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="zchaos-loadgen-") as tmp:
        work = Path(tmp)
        for n in range(args.rounds):
            # The ladder's rungs in order, then in reverse: a drift of the machine's load
            # over a round moves neighbouring rungs alike. The three variants rotate.
            order = variants[:: 1 - 2 * (n % 2)] if args.ladder else variants[n % 3 :] + variants[: n % 3]
            for variant in order:
                tag = f"{n}-{''.join(c if c.isalnum() else '-' for c in variant)}"
                rates[variant].append(run_locust(variant, endpoint, args, work, tag))
        print(
            f"loadgen rate, one Locust process, {args.users} users, {args.seconds} s x {args.rounds} rounds, "
            f"echo in C, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}:"
        )
        bare = [r.wall for r in rates["bare"]]
        for variant in variants:
            got = [r.wall for r in rates[variant]]
            ratio = statistics.median(r / b for r, b in zip(got, bare, strict=True))
            cpu_us = statistics.median(r.cpu_us for r in rates[variant])
            print(
                f"  {variant:<20} {statistics.median(got):8.0f} requests/s  x{ratio:.2f} bare"
                f"  {cpu_us:5.0f} us CPU/request  (rounds: {', '.join(f'{r:.0f}' for r in got)})"
            )
        off, on = (statistics.median(r.wall for r in rates[v]) for v in VARIANTS[1:])
        print(f"  recording costs {1 - on / off:.1%} of zchaos's rate; target: history on >= x0.80 bare")
        if args.profile:
            prof = work / "user.prof"
            rate = run_locust("history on", endpoint, args, work, "profile", profile=prof)
            print(f"\nzchaos's user, history on, under cProfile: {rate.wall:.0f} requests/s; by own time:")
            pstats.Stats(str(prof)).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
