"""The report's ingest with the parts the follower wrote during the run, against the same
history converted whole (the report without parts: its baseline), in the same run.

A synthetic history (clients' send and reply in ``locust-N.jsonl``, workers' exec and done in
``worker-N.jsonl``, about 120 bytes an event, as the runs' histories) is appended over
``--seconds``, flushed a batch at a time as writers do, while the real follower process
(``python -m reports.ingest.follow``, nice 19) converts it; then the follower is stopped as
the runner stops it, and the report's conversion is timed on the run (reusing the parts,
converting the rest: reports/ingest/follow.py ``convert``) and on a copy without the parts
(arrow.convert, today's path before parts), alternately, ``--rounds`` times each. It prints
each time, their medians and the ratio, the events taken from parts, and the CPU the
follower spent during the run (the work moved out of the report, at low priority). Both
conversions are checked to give the same account.

    ./dev bench ingest_follow                           # 2M events over 40 s
    ./dev bench ingest_follow --events 10000000 --seconds 150

Latest figures (2026-11-27 09:42 UTC, under the shared lock, load 1.7; 10M events, 1.1 GB in
8 files, written over 100 s): the follower wrote 171 parts and used 52.8 CPU s during the run
(one thread at nice 19: the second core, idle here); the report took 9,651,250 events from
parts and converted 348,750: 2.83 s (3.65, 2.00; of which 0.86 s checking the files' CRC-32)
against 26.70 s (27.18, 26.22) converting the whole history, 0.11x. At 200k events (one file,
not split: the parts are read back and written again) 0.69 s against 1.06 s in one run, 0.94 s
against 0.81 s in another: the gain is where the history is split by kind (SPLIT_MIN_EVENTS).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reports.ingest import arrow, follow, read  # noqa: E402

CLIENT_FILES, WORKER_FILES, CLIENTS = 4, 4, 100


def batches(events: int, batch: int) -> Iterator[dict[str, list[bytes]]]:
    """The history's lines, in batches of ``batch`` events (a multiple of 4): per file, its
    new lines."""
    ts = 1_800_000_000_000_000_000
    current: dict[str, list[bytes]] = {}
    for n in range(events // 4):  # a request: send, exec, done, reply
        rid = n + 1
        c = n % CLIENTS
        cid = f"client-{c}"
        worker = f"worker-{n % WORKER_FILES + 1}"
        seq = n // CLIENTS + 1
        ts += 50_000
        client, wfile = f"locust-{c % CLIENT_FILES}.jsonl", f"{worker}.jsonl"
        current.setdefault(client, []).append(
            b'{"ts":%d,"src":"%s","ev":"send","cid":"%s","seq":%d,"rid":"r%d","attempt":1}\n'
            % (ts, cid.encode(), cid.encode(), seq, rid)
        )
        current.setdefault(wfile, []).append(
            b'{"ts":%d,"src":"%s","ev":"exec","rid":"r%d","worker":"%s"}\n'
            % (ts + 100_000, worker.encode(), rid, worker.encode())
        )
        current[wfile].append(
            b'{"ts":%d,"src":"%s","ev":"done","rid":"r%d","worker":"%s"}\n'
            % (ts + 900_000, worker.encode(), rid, worker.encode())
        )
        current[client].append(
            b'{"ts":%d,"src":"%s","ev":"reply","cid":"%s","seq":%d,"rid":"r%d","ok":true,"worker":"%s",'
            b'"latency_us":%d}\n'
            % (ts + 1_000_000, cid.encode(), cid.encode(), seq, rid, worker.encode(), 1000)
        )
        if (n + 1) * 4 % batch == 0:
            yield current
            current = {}
    if current:
        yield current


def write_while_followed(hist: Path, events: int, seconds: float) -> tuple[float, str]:
    """Append the history over ``seconds`` with the follower running; its CPU seconds and log."""
    import psutil

    size = max(4, events // max(1, int(seconds * 10)) // 4 * 4)
    count = -(-(events // 4 * 4) // size)
    log = hist.parent / "follower.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reports.ingest.follow", str(hist)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        handles = {}
        t0 = time.monotonic()
        for i, batch in enumerate(batches(events, size)):
            for name, lines in batch.items():
                fh = handles.get(name) or handles.setdefault(name, (hist / name).open("ab"))
                fh.write(b"".join(lines))
                fh.flush()
            pause = t0 + seconds * (i + 1) / count - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # the pace of a run's writers, not a synchronisation
        for fh in handles.values():
            fh.close()
        cpu = psutil.Process(proc.pid).cpu_times()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return cpu.user + cpu.system, log.read_text()


def timed_convert(hist: Path, using) -> tuple[float, arrow.Outcome]:
    shutil.rmtree(hist / read.PARQUET, ignore_errors=True)
    t0 = time.monotonic()
    out = using(
        hist,
        sorted(hist.glob("*.jsonl")),
        parquet=read.PARQUET,
        account_file=read.ACCOUNT_FILE,
        split_min_events=read.SPLIT_MIN_EVENTS,
        bytes_per_event=read.BYTES_PER_EVENT,
    )
    return time.monotonic() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000, help="events in the history")
    parser.add_argument("--seconds", type=float, default=40.0, help="how long the history grows")
    parser.add_argument("--rounds", type=int, default=3, help="conversions of each kind, alternating")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zchaos-ingest-follow-") as tmp:
        run = Path(tmp) / "run"
        hist = run / "history"
        hist.mkdir(parents=True)
        cpu, log = write_while_followed(hist, args.events, args.seconds)
        size = sum(f.stat().st_size for f in hist.glob("*.jsonl"))
        files = len(list(hist.glob("*.jsonl")))
        print(f"history: {args.events:,} events, {arrow.size_text(size)} in {files} files,")
        last = log.strip().splitlines()[-1]
        print(f"  written over {args.seconds:g} s; the follower used {cpu:.1f} CPU s then ({last})")
        whole = Path(tmp) / "whole" / "history"
        shutil.copytree(hist, whole, ignore=shutil.ignore_patterns(follow.PARTS))
        times: dict[str, list[float]] = {"with parts": [], "without parts": []}
        accounts = {}
        for _ in range(args.rounds):
            for name, folder, using in (
                ("with parts", hist, follow.convert),
                ("without parts", whole, arrow.convert),
            ):
                seconds, out = timed_convert(folder, using)
                assert out.declined is None, out.declined
                times[name].append(seconds)
                accounts[name] = json.loads((folder / read.PARQUET / read.ACCOUNT_FILE).read_text())
                if name == "with parts":
                    now = out.events - out.from_parts
                    print(f"  with parts: {out.from_parts:,} events from parts, {now:,} converted now")
        assert accounts["with parts"] == accounts["without parts"], "the two conversions differ"
        t0 = time.monotonic()  # (a second time: the files are in the page cache, as at report time)
        follow.reusable(hist, sorted(hist.glob("*.jsonl")))
        print(f"  within it, the files checked against their parts (CRC-32): {time.monotonic() - t0:.2f} s")
        load = os.getloadavg()[0]
        for name, values in times.items():
            shown = ", ".join(f"{v:.2f}" for v in values)
            print(f"{name:>14}: median {statistics.median(values):.2f} s ({shown})")
        ratio = statistics.median(times["with parts"]) / statistics.median(times["without parts"])
        print(f"ingest with parts / without: {ratio:.2f}x (load {load:.1f})")


if __name__ == "__main__":
    main()
