"""Toxiproxy 2.12's HTTP API: routes, handlers, status codes and bodies as the Go server sends them.

A small HTTP/1.1 server on asyncio streams (keep-alive, Content-Length and chunked
bodies); the API is not on the data path, so simplicity wins over speed here. Routing
follows gorilla/mux as Toxiproxy configures it: a path that differs from its cleaned form
is redirected (301), an unknown path is 404 ``404 page not found``, a known path with
another method is 405 with an empty body, and only matched routes go through the
middlewares (the ``Mozilla/`` user-agent block).
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import Any
from urllib.parse import unquote

from chaos.toxiproxy_server import gojson
from chaos.toxiproxy_server.log import log
from chaos.toxiproxy_server.metrics import Metrics
from chaos.toxiproxy_server.proxy import Proxy, ProxyError, bind_listener, resolve_listen
from chaos.toxiproxy_server.toxics import TYPES, Toxic, merge_attributes

VERSION = "2.12.0"
MAX_BODY = 16 << 20
IDLE_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 15.0


class ApiError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def bad_body(err: gojson.DecodeError) -> ApiError:
    return ApiError(f"bad request body: {err}", 400)


class Response:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes = b"", content_type: str | None = None) -> None:
        self.status = status
        self.body = body
        self.headers: list[tuple[str, str]] = []
        if content_type:
            self.headers.append(("Content-Type", content_type))


def json_response(status: int, value: Any) -> Response:
    return Response(status, gojson.encode(value), "application/json")


def http_error(status: int, text: str) -> Response:
    """Go's ``http.Error``: text/plain, nosniff, the message plus a newline."""
    resp = Response(status, text.encode() + b"\n", "text/plain; charset=utf-8")
    resp.headers.append(("X-Content-Type-Options", "nosniff"))
    return resp


def api_error(err: ApiError) -> Response:
    return http_error(err.status, gojson.encode({"error": err.message, "status": err.status}).decode())


REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    301: "Moved Permanently",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Request Entity Too Large",
    500: "Internal Server Error",
}


def _request_id() -> str:
    # xid-like: 20 characters of base32hex, unique per request.
    raw = int(time.time()).to_bytes(4, "big") + os.urandom(8)
    return base64.b32hexencode(raw).decode().lower().rstrip("=")[:20]


def clean_path(path: str) -> str:
    """gorilla/mux's cleanPath: Go's path.Clean, keeping a trailing slash."""
    if not path:
        return "/"
    if path[0] != "/":
        path = "/" + path
    parts: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts:
                parts.pop()
            continue
        parts.append(seg)
    cleaned = "/" + "/".join(parts)
    if path.endswith("/") and cleaned != "/":
        cleaned += "/"
    return cleaned


Handler = Callable[..., Awaitable[Response]]


class Api:
    """The proxy collection and the handlers of the HTTP API."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.proxies: dict[str, Proxy] = {}
        self.lock = asyncio.Lock()
        self.metrics = metrics
        self.routes: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
            (re.compile(r"/reset"), {"POST": self.reset}),
            (re.compile(r"/proxies"), {"GET": self.proxy_index, "POST": self.proxy_create}),
            (re.compile(r"/populate"), {"POST": self.populate}),
            (
                re.compile(r"/proxies/([^/]+)"),
                {
                    "GET": self.proxy_show,
                    "POST": self.proxy_update,
                    "PATCH": self.proxy_update,
                    "DELETE": self.proxy_delete,
                },
            ),
            (re.compile(r"/proxies/([^/]+)/toxics"), {"GET": self.toxic_index, "POST": self.toxic_create}),
            (
                re.compile(r"/proxies/([^/]+)/toxics/([^/]+)"),
                {
                    "GET": self.toxic_show,
                    "POST": self.toxic_update,
                    "PATCH": self.toxic_update,
                    "DELETE": self.toxic_delete,
                },
            ),
            (re.compile(r"/version"), {"GET": self.version}),
        ]
        if metrics is not None and (metrics.proxy_metrics or metrics.runtime_metrics):
            self.routes.append((re.compile(r"/metrics"), {"*": self.metrics_text}))  # any method, as in Go

    # -- dispatch --------------------------------------------------------------------
    async def dispatch(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Response:
        path = target.split("?", 1)[0]
        decoded = unquote(path)
        cleaned = clean_path(decoded)
        if cleaned != decoded:
            resp = Response(301)
            resp.headers.append(("Location", cleaned))
            return resp
        for pattern, methods in self.routes:
            m = pattern.fullmatch(decoded)
            if m is None:
                continue
            handler = methods.get(method) or methods.get("*")
            if handler is None:
                continue
            if headers.get("user-agent", "").startswith("Mozilla/"):
                return http_error(403, "User agent not allowed")
            try:
                async with self.lock:
                    return await handler(*m.groups(), body=body, method=method)
            except ApiError as err:
                return api_error(err)
        if any(p.fullmatch(decoded) for p, _ in self.routes):
            return Response(405)
        return http_error(404, "404 page not found")

    # -- helpers ---------------------------------------------------------------------
    def get_proxy(self, name: str) -> Proxy:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise ApiError("proxy not found", 404)
        return proxy

    @staticmethod
    def decode_object(body: bytes, go_type: str) -> dict[str, Any]:
        try:
            value = gojson.decode_first(body)
        except gojson.DecodeError as err:
            raise bad_body(err) from None
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise bad_body(
                gojson.DecodeError(
                    f"json: cannot unmarshal {gojson.kind_of(value)} into Go value of type {go_type}"
                )
            )
        return value

    @staticmethod
    def proxy_fields(
        obj: dict[str, Any], listen: str, upstream: str, enabled: bool | None
    ) -> tuple[str, str, str, bool | None]:
        try:
            return (
                gojson.as_string(obj, "name", "Proxy", ""),
                gojson.as_string(obj, "listen", "Proxy", listen),
                gojson.as_string(obj, "upstream", "Proxy", upstream),
                gojson.as_bool(obj, "enabled", "Proxy", enabled),
            )
        except gojson.DecodeError as err:
            raise bad_body(err) from None

    async def start_proxy(self, proxy: Proxy) -> None:
        try:
            await proxy.start()
        except ProxyError as err:
            raise ApiError(str(err), 500) from None

    # -- proxies ---------------------------------------------------------------------
    async def proxy_index(self, **_: Any) -> Response:
        return json_response(200, {name: self.proxies[name].to_json() for name in sorted(self.proxies)})

    async def proxy_create(self, *, body: bytes, **_: Any) -> Response:
        obj = self.decode_object(body, "toxiproxy.Proxy")
        name, listen, upstream, enabled = self.proxy_fields(obj, "", "", True)
        if not name:
            raise ApiError("missing required field: name", 400)
        if not upstream:
            raise ApiError("missing required field: upstream", 400)
        if name in self.proxies:
            raise ApiError("proxy already exists", 409)
        proxy = Proxy(name, listen, upstream, self.metrics)
        if enabled:
            await self.start_proxy(proxy)
        self.proxies[name] = proxy
        return json_response(201, proxy.to_json())

    async def proxy_show(self, name: str, **_: Any) -> Response:
        return json_response(200, self.get_proxy(name).to_json())

    async def proxy_update(self, name: str, *, body: bytes, method: str, **_: Any) -> Response:
        if method == "POST":
            log("warn", "Deprecated POST on proxy update; use PATCH", proxy=name)
        proxy = self.get_proxy(name)
        obj = self.decode_object(body, "toxiproxy.Proxy")
        _name, listen, upstream, enabled = self.proxy_fields(obj, proxy.listen, proxy.upstream, proxy.enabled)
        try:
            _host, _port, resolved = resolve_listen(listen)
        except ProxyError as err:
            raise ApiError(str(err), 500) from None
        if proxy.listen != resolved or proxy.upstream != upstream:
            proxy.stop()
            proxy.listen = listen
            proxy.upstream = upstream
        if enabled != proxy.enabled:
            if enabled:
                await self.start_proxy(proxy)
            else:
                proxy.stop()
        return json_response(200, proxy.to_json())

    async def proxy_delete(self, name: str, **_: Any) -> Response:
        proxy = self.get_proxy(name)
        proxy.stop()
        del self.proxies[name]
        return Response(204)

    async def populate(self, *, body: bytes, **_: Any) -> Response:
        done: list[Proxy] = []
        try:
            await self.populate_from(body, done)
        except ApiError as err:
            return json_response(
                err.status,
                {"error": err.message, "status": err.status, "proxies": [p.to_json() for p in done] or None},
            )
        return json_response(201, {"proxies": [p.to_json() for p in done] or None})

    async def populate_from(self, body: bytes, done: list[Proxy]) -> None:
        """Add or replace each proxy of a JSON array (``/populate`` and ``-config``)."""
        go_type = '[]struct { toxiproxy.Proxy; Enabled *bool "json:\\"enabled\\"" }'
        try:
            items = gojson.decode_first(body)
        except gojson.DecodeError as err:
            raise bad_body(err) from None
        if items is None:
            items = []
        if not isinstance(items, list):
            raise bad_body(
                gojson.DecodeError(
                    f"json: cannot unmarshal {gojson.kind_of(items)} into Go value of type {go_type}"
                )
            )
        specs = []
        for item in items:
            if item is None:
                item = {}
            if not isinstance(item, dict):
                raise bad_body(
                    gojson.DecodeError(
                        f"json: cannot unmarshal {gojson.kind_of(item)} into Go value of type struct"
                    )
                )
            specs.append(self.proxy_fields(item, "", "", None))
        for i, (name, _, upstream, _) in enumerate(specs, 1):
            if not name:
                raise ApiError(f"missing required field: name at proxy {i}", 400)
            if not upstream:
                raise ApiError(f"missing required field: upstream at proxy {i}", 400)
        for name, listen, upstream, enabled in specs:
            existing = self.proxies.get(name)
            if existing is not None:
                try:
                    _, _, resolved = resolve_listen(listen)
                except ProxyError as err:
                    raise ApiError(str(err), 500) from None
                if existing.listen == resolved and existing.upstream == upstream:
                    done.append(existing)
                    continue
                existing.stop()
                del self.proxies[name]
            proxy = Proxy(name, listen, upstream, self.metrics)
            if enabled is None or enabled:
                await self.start_proxy(proxy)
            self.proxies[name] = proxy
            done.append(proxy)

    async def reset(self, **_: Any) -> Response:
        for proxy in list(self.proxies.values()):
            await self.start_proxy(proxy)
            proxy.remove_all_toxics()
        return Response(204)

    async def version(self, **_: Any) -> Response:
        return Response(200, f'{{"version": "{VERSION}"}}\n'.encode(), "application/json;charset=utf-8")

    async def metrics_text(self, **_: Any) -> Response:
        assert self.metrics is not None
        return Response(200, self.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8")

    # -- toxics ----------------------------------------------------------------------
    async def toxic_index(self, name: str, **_: Any) -> Response:
        return json_response(200, [t.to_json() for t in self.get_proxy(name).toxic_list()])

    async def toxic_create(self, name: str, *, body: bytes, **_: Any) -> Response:
        proxy = self.get_proxy(name)
        obj = self.decode_object(body, "toxics.ToxicWrapper")

        def attributes_object(o: dict[str, Any]) -> Any:
            _, attrs = gojson.lookup(o, "attributes")
            if attrs is not None and not isinstance(attrs, dict):
                raise gojson.DecodeError(
                    f"json: cannot unmarshal {gojson.kind_of(attrs)} into Go struct field"
                    " ToxicWrapper.attributes of type toxics.NoopToxic"
                )
            return attrs

        try:
            # The wrapper first; the attributes' values in a second pass, once the type is known.
            fields = gojson.read_fields(
                obj,
                {
                    "attributes": attributes_object,
                    "name": lambda o: gojson.as_string(o, "name", "ToxicWrapper", ""),
                    "type": lambda o: gojson.as_string(o, "type", "ToxicWrapper", ""),
                    "stream": lambda o: gojson.as_string(o, "stream", "ToxicWrapper", "downstream"),
                    "toxicity": lambda o: gojson.as_float32(o, "toxicity", "ToxicWrapper", 1.0),
                },
            )
        except gojson.DecodeError as err:
            raise bad_body(err) from None
        tname, ttype, stream = fields["name"], fields["type"], fields["stream"]
        toxicity, attrs = fields["toxicity"], fields["attributes"]
        direction = stream.lower()
        if direction not in ("upstream", "downstream"):
            raise ApiError("stream was invalid, can be either upstream or downstream", 400)
        if not tname:
            tname = f"{ttype}_{stream}"
        kind = TYPES.get(ttype)
        if kind is None:
            raise ApiError("invalid toxic type", 400)
        if proxy.find_toxic(tname) is not None:
            raise ApiError("toxic already exists", 409)
        try:
            attributes = merge_attributes(kind, {k: 0 for k, _ in kind.attributes}, attrs)
        except gojson.DecodeError as err:
            raise bad_body(err) from None
        toxic = Toxic(kind, tname, stream, direction == "upstream", toxicity, attributes)
        proxy.add_toxic(toxic)
        return json_response(200, toxic.to_json())

    def get_toxic(self, name: str, tname: str) -> tuple[Proxy, Toxic]:
        proxy = self.get_proxy(name)
        toxic = proxy.find_toxic(tname)
        if toxic is None:
            raise ApiError("toxic not found", 404)
        return proxy, toxic

    async def toxic_show(self, name: str, tname: str, **_: Any) -> Response:
        return json_response(200, self.get_toxic(name, tname)[1].to_json())

    async def toxic_update(self, name: str, tname: str, *, body: bytes, method: str, **_: Any) -> Response:
        if method == "POST":
            log("warn", "Deprecated POST on toxic update; use PATCH", proxy=name, toxic=tname)
        proxy, toxic = self.get_toxic(name, tname)
        obj = self.decode_object(
            body,
            'struct { Attributes interface {} "json:\\"attributes\\""; '
            'Toxicity float32 "json:\\"toxicity\\"" }',
        )
        try:
            fields = gojson.read_fields(
                obj,
                {
                    "attributes": lambda o: merge_attributes(
                        toxic.type, toxic.attributes, gojson.lookup(o, "attributes")[1]
                    ),
                    "toxicity": lambda o: gojson.as_float32(o, "toxicity", "", toxic.toxicity),
                },
            )
        except gojson.DecodeError as err:
            raise bad_body(err) from None
        toxic.toxicity = fields["toxicity"]
        toxic.attributes = fields["attributes"]
        proxy.update_toxic(toxic)
        return json_response(200, toxic.to_json())

    async def toxic_delete(self, name: str, tname: str, **_: Any) -> Response:
        proxy, toxic = self.get_toxic(name, tname)
        proxy.remove_toxic(toxic)
        return Response(204)

    # -- lifecycle -------------------------------------------------------------------
    def stop_all(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()


class HttpServer:
    """Serves ``Api.dispatch`` over HTTP/1.1 with keep-alive."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.server: asyncio.AbstractServer | None = None
        self.clients: set[asyncio.StreamWriter] = set()

    async def listen(self, host: str, port: int) -> str:
        sock, bound = bind_listener(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        self.server = await asyncio.start_server(self.serve, sock=sock, backlog=socket.SOMAXCONN)
        return bound

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.clients):
            writer.close()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.clients.add(writer)
        try:
            while True:
                try:
                    line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT_S)
                except (TimeoutError, asyncio.LimitOverrunError, ValueError):
                    return
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    continue
                try:
                    request = await asyncio.wait_for(self.read_request(line, reader, writer), READ_TIMEOUT_S)
                except (TimeoutError, asyncio.IncompleteReadError):
                    return
                if isinstance(request, Response):
                    await self.write(writer, request, False)
                    return
                method, target, headers, body, keep_alive = request
                try:
                    resp = await self.api.dispatch(method, target, headers, body)
                except Exception as exc:  # a bug must not take the API down: report it as Go would
                    log("error", "Internal error", err=repr(exc))
                    resp = api_error(ApiError(str(exc), 500))
                await self.write(writer, resp, keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, OSError):
            return
        finally:
            self.clients.discard(writer)
            writer.close()

    @staticmethod
    async def read_request(line: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Any:
        parts = line.decode("latin-1").strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return http_error(400, "400 Bad Request")
        method, target, proto = parts
        headers: dict[str, str] = {}
        while True:
            h = await reader.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            key, _, value = h.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        conn_hdr = headers.get("connection", "").lower()
        keep_alive = conn_hdr != "close" if proto == "HTTP/1.1" else conn_hdr == "keep-alive"
        if headers.get("expect", "").lower() == "100-continue":  # curl waits a second for this otherwise
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = b""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            total = 0
            while True:
                size_line = await reader.readline()
                try:
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    return http_error(400, "400 Bad Request")
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY:
                    return http_error(413, "413 Request Entity Too Large")
                chunks.append(await reader.readexactly(size))
                await reader.readline()
            body = b"".join(chunks)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                return http_error(400, "400 Bad Request")
            if length > MAX_BODY or length < 0:
                return http_error(413, "413 Request Entity Too Large")
            body = await reader.readexactly(length)
        return method, target, headers, body, keep_alive

    @staticmethod
    async def write(writer: asyncio.StreamWriter, resp: Response, keep_alive: bool) -> None:
        lines = [f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Unknown')}"]
        lines += [f"{k}: {v}" for k, v in resp.headers]
        lines.append(f"X-Toxiproxy-Request-Id: {_request_id()}")
        lines.append(f"Date: {formatdate(usegmt=True)}")
        if resp.status != 204:
            lines.append(f"Content-Length: {len(resp.body)}")
        if not keep_alive:
            lines.append("Connection: close")
        writer.write(
            ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (resp.body if resp.status != 204 else b"")
        )
        await writer.drain()
