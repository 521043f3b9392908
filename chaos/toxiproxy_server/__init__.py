"""A Toxiproxy-compatible fault proxy: Toxiproxy 2.12's HTTP API and toxics, in one process.

Run it as ``python -m chaos.toxiproxy_server -host 127.0.0.1 -port 8474`` (the real
server's single-dash flags); ``zchaos toxiproxy`` calls ``main`` too. The facts it
reproduces are in ``toxiproxy-api.md`` of the design notes.

I/O model: one asyncio loop on uvloop, protocol callbacks, and a link without toxics
writes in the read callback. Measured with ``bench/proxy_overhead.py`` (ZeroMQ REQ/REP
over loopback, 2 shared cores under a load average of 5-9 from other work), added median
round trip at 64 B / 64 KiB: uvloop 24-28 / 53-60 µs; the stdlib loop 34-47 / 69 µs with a
much worse tail (64 KiB throughput 0.24 of direct against 0.66); a thread per direction
with blocking sockets (a throwaway forwarder in its own process) 58 / 85 µs. uvloop is
also the model in which live toxic changes (timers, interrupts) stay simple.
``ZCHAOS_PROXY_LOOP=asyncio`` selects the stdlib loop for comparison.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from chaos.toxiproxy_server.api import VERSION, Api, HttpServer
from chaos.toxiproxy_server.log import log
from chaos.toxiproxy_server.metrics import Metrics
from chaos.toxiproxy_server.proxy import ProxyError

__all__ = ["VERSION", "main"]

USAGE = """Usage of toxiproxy-server:
  -config string
    \tJSON file containing proxies to create on startup
  -host string
    \tHost for toxiproxy's API to listen on (default "localhost")
  -port string
    \tPort for toxiproxy's API to listen on (default "8474")
  -proxy-metrics
    \tenable metrics for proxy
  -runtime-metrics
    \tenable runtime-related metrics
  -seed int
    \tSeed for randomizing toxics with (default time.Now().UnixNano())
  -version
    \tshow version
"""

#: Set by zchaos when it starts the server: the pid whose death stops the server.
ENV_PARENT = "ZCHAOS_TOXIPROXY_PARENT"

_VALUE_FLAGS = {"host": "localhost", "port": "8474", "config": "", "seed": "0"}
_BOOL_FLAGS = ("version", "proxy-metrics", "runtime-metrics")


class UsageError(Exception):
    pass


def parse_flags(argv: list[str]) -> dict[str, str | bool]:
    """Go ``flag`` package rules: ``-x v``, ``-x=v``, ``--x``; parsing stops at the first non-flag."""
    opts: dict[str, str | bool] = {**_VALUE_FLAGS, **{b: False for b in _BOOL_FLAGS}}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            break
        name, eq, value = arg.lstrip("-").partition("=")
        if name in ("h", "help"):
            raise UsageError("")
        if name in _BOOL_FLAGS:
            if eq and value.lower() not in ("1", "0", "t", "f", "true", "false"):
                raise UsageError(f'invalid boolean value "{value}" for -{name}: parse error')
            opts[name] = not eq or value.lower() in ("1", "t", "true")
        elif name in _VALUE_FLAGS:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise UsageError(f"flag needs an argument: -{name}")
                value = argv[i]
            if name == "seed" and not value.lstrip("-").isdigit():
                raise UsageError(f'invalid value "{value}" for flag -seed: parse error')
            opts[name] = value
        else:
            raise UsageError(f"flag provided but not defined: -{name}")
        i += 1
    return opts


def _new_loop() -> asyncio.AbstractEventLoop:
    if os.environ.get("ZCHAOS_PROXY_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:
            pass
    return asyncio.new_event_loop()


async def _populate_from_file(api: Api, path: Path) -> None:
    """``-config``: as Toxiproxy, every failure is only logged (with Go's error text) and the
    server starts with what could be made. A directory opens, so it fails when it is read."""
    try:
        body = b"" if path.is_dir() else path.read_bytes()
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        log("error", "Error reading config file", config=str(path), err=f"open {path}: {reason}")
        return
    done: list = []
    try:
        if path.is_dir():
            raise ValueError(f"read {path}: is a directory")
        await api.populate_from(body, done)
    except Exception as exc:
        err = getattr(exc, "message", str(exc))
        log("error", "Failed to populate proxies from file", config=str(path), err=err)
        return
    log("info", "Populated proxies from file", config=str(path), proxies=len(done))


async def serve(opts: dict[str, str | bool]) -> int:
    metrics = Metrics(bool(opts["proxy-metrics"]), bool(opts["runtime-metrics"]))
    api = Api(metrics)
    if opts["config"]:
        await _populate_from_file(api, Path(str(opts["config"])))
    http = HttpServer(api)
    try:
        port = int(str(opts["port"]))
    except ValueError:
        port = -1
    try:
        if not 0 <= port < 65536:
            raise ProxyError(f"listen tcp: address {opts['port']}: invalid port")
        bound = await http.listen(str(opts["host"]), port)
    except ProxyError as exc:
        log("fatal", "Failed to start HTTP server", err=str(exc))
        api.stop_all()
        return 1
    log(
        "info",
        "API HTTP server starting",
        host=opts["host"],
        port=opts["port"],
        address=bound,
        version=VERSION,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    parent = os.environ.get(ENV_PARENT)
    watchdog = loop.create_task(_exit_with_parent(int(parent), stop)) if parent else None
    await stop.wait()
    if watchdog is not None:
        watchdog.cancel()
    log("info", "Shutting down", version=VERSION)
    http.close()
    api.stop_all()
    return 0


async def _exit_with_parent(parent: int, stop: asyncio.Event) -> None:
    """Stop when the process that started us is gone (a SIGKILLed runner must leave no proxy)."""
    while not stop.is_set():
        if os.getppid() != parent:
            log("warn", "Parent process gone, shutting down", parent=parent)
            stop.set()
            return
        await asyncio.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    """Run the server until SIGINT/SIGTERM; the exit code."""
    try:
        opts = parse_flags(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        if str(exc):
            print(str(exc), file=sys.stderr)
        print(USAGE, end="", file=sys.stderr)
        return 0 if not str(exc) else 2
    if opts["version"]:
        print(f"toxiproxy-server version {VERSION}")
        return 0
    loop = _new_loop()
    try:
        return loop.run_until_complete(serve(opts))
    finally:
        # Connection handlers still running are cancelled, so the loop closes cleanly.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(_settle(pending))
        loop.close()


async def _settle(tasks: set[asyncio.Task]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)
