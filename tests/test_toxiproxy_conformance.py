"""Conformance of a Toxiproxy server with Toxiproxy 2.12, over HTTP and real sockets only.

Runs against zchaos's own server (started here on a free port) or, unchanged, against the
server at ``TOXIPROXY_URL`` (e.g. a real ``toxiproxy-server``). Upstreams are an echo and
a sink on 127.0.0.1 run by this file. Timing bounds are wide (shared 2-core machines):
they tell "delayed" from "not delayed", not exact figures.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import requests

from chaos.toxiproxy_client import toxiproxy_server

pytestmark = pytest.mark.timeout(60)

IO_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """zchaos's server as a subprocess (its own process group, stopped at the end), or TOXIPROXY_URL."""
    with toxiproxy_server(use_path=False) as info:
        yield info.url


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    with requests.Session() as s:
        s.headers["User-Agent"] = "zchaos-conformance"
        yield s


class Echo:
    """A TCP echo server on 127.0.0.1 (one thread per connection)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)


@pytest.fixture(scope="module")
def echo() -> Iterator[Echo]:
    e = Echo()
    yield e
    e.close()


def url(base: str, *parts: str) -> str:
    return base + "/" + "/".join(parts)


@pytest.fixture
def proxy(server_url: str, http: requests.Session, echo: Echo) -> Iterator[dict]:
    """A fresh proxy onto the echo server; deleted afterwards."""
    name = f"conf-{uuid.uuid4().hex[:8]}"
    r = http.post(
        url(server_url, "proxies"),
        json={"name": name, "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{echo.port}"},
    )
    assert r.status_code == 201, r.text
    p = r.json()
    yield p
    http.delete(url(server_url, "proxies", name))


def port_of(p: dict) -> int:
    return int(p["listen"].rsplit(":", 1)[1])


def connect(p: dict) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port_of(p)), timeout=IO_TIMEOUT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def round_trip(s: socket.socket, payload: bytes = b"ping") -> float:
    t0 = time.perf_counter()
    s.sendall(payload)
    assert recv_exactly(s, len(payload)) == payload
    return time.perf_counter() - t0


def nothing_arrives(s: socket.socket, within_s: float) -> bool:
    """True when no byte (and no EOF) arrives for ``within_s`` seconds (the assertion of a blackhole)."""
    s.settimeout(within_s)
    try:
        s.recv(1)
    except TimeoutError:
        return True
    finally:
        s.settimeout(IO_TIMEOUT_S)
    return False


def wait_eof(s: socket.socket) -> float:
    """Seconds until EOF (b""); fails on data."""
    t0 = time.perf_counter()
    data = s.recv(65536)
    assert data == b"", f"expected EOF, got {data!r}"
    return time.perf_counter() - t0


def add_toxic(http: requests.Session, base: str, p: dict, **body: object) -> dict:
    r = http.post(url(base, "proxies", p["name"], "toxics"), json=body)
    assert r.status_code == 200, r.text
    return r.json()


def assert_api_error(r: requests.Response, status: int, message: str, prefix: bool = False) -> None:
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert r.text.endswith("}\n")
    body = json.loads(r.text)
    assert list(body) == ["error", "status"]
    assert body["status"] == status
    if prefix:
        assert body["error"].startswith(message), body
    else:
        assert body["error"] == message


# -- the API ---------------------------------------------------------------------------


def test_version(server_url: str, http: requests.Session) -> None:
    r = http.get(url(server_url, "version"))
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json;charset=utf-8"
    assert r.text.endswith("\n")
    assert json.loads(r.text)["version"]
    assert r.headers["X-Toxiproxy-Request-Id"]


def test_unknown_path_wrong_method_and_browsers(server_url: str, http: requests.Session) -> None:
    r = http.get(url(server_url, "no", "such", "path"))
    assert (r.status_code, r.text) == (404, "404 page not found\n")
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
    r = http.put(url(server_url, "proxies"))
    assert (r.status_code, r.text) == (405, "")
    r = http.get(url(server_url, "proxies"), headers={"User-Agent": "Mozilla/5.0 (X11)"})
    assert (r.status_code, r.text) == (403, "User agent not allowed\n")


def test_proxy_crud(server_url: str, http: requests.Session, echo: Echo) -> None:
    name = f"crud-{uuid.uuid4().hex[:8]}"
    body = {"name": name, "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{echo.port}"}
    r = http.post(url(server_url, "proxies"), json=body)
    assert r.status_code == 201
    assert r.headers["Content-Type"] == "application/json"
    p = r.json()
    assert list(p) == ["name", "listen", "upstream", "enabled", "Logger", "toxics"]  # dicts keep JSON order
    assert p["enabled"] is True and p["toxics"] == [] and p["Logger"] == {}
    assert p["listen"].startswith("127.0.0.1:") and port_of(p) != 0
    with connect(p) as s:
        round_trip(s)

    r = http.get(url(server_url, "proxies"))
    assert r.status_code == 200 and r.json()[name] == p
    assert http.get(url(server_url, "proxies", name)).json() == p

    assert_api_error(http.post(url(server_url, "proxies"), json=body), 409, "proxy already exists")
    r = http.post(url(server_url, "proxies"), json={"upstream": "127.0.0.1:1"})
    assert_api_error(r, 400, "missing required field: name")
    r = http.post(url(server_url, "proxies"), json={"name": "x-" + name})
    assert_api_error(r, 400, "missing required field: upstream")
    r = http.post(url(server_url, "proxies"), data=b"{not json")
    assert_api_error(r, 400, "bad request body: ", prefix=True)
    # Listening on a port that is taken is the raw Go error, 500; nothing is created.
    r = http.post(url(server_url, "proxies"), json={**body, "name": "dup-" + name, "listen": p["listen"]})
    assert r.status_code == 500 and "address already in use" in r.json()["error"]
    assert "dup-" + name not in http.get(url(server_url, "proxies")).json()

    with connect(p) as open_conn:
        round_trip(open_conn)
        r = http.delete(url(server_url, "proxies", name))
        assert (r.status_code, r.content) == (204, b"")
        assert wait_eof(open_conn) < IO_TIMEOUT_S  # deleting stops the proxy and its connections
    assert_api_error(http.get(url(server_url, "proxies", name)), 404, "proxy not found")
    assert_api_error(http.delete(url(server_url, "proxies", name)), 404, "proxy not found")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port_of(p)), timeout=IO_TIMEOUT_S).close()


def test_disabled_proxy_keeps_its_listen_until_enabled(
    server_url: str, http: requests.Session, echo: Echo
) -> None:
    name = f"dis-{uuid.uuid4().hex[:8]}"
    body = {"name": name, "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{echo.port}", "enabled": False}
    r = http.post(url(server_url, "proxies"), json=body)
    try:
        assert r.status_code == 201 and r.json()["listen"] == "127.0.0.1:0" and r.json()["enabled"] is False
        r = http.patch(url(server_url, "proxies", name), json={"enabled": True})
        assert r.status_code == 200 and r.json()["enabled"] is True and port_of(r.json()) != 0
        with connect(r.json()) as s:
            round_trip(s)
    finally:
        http.delete(url(server_url, "proxies", name))


def test_update_disable_enable_and_noop(server_url: str, http: requests.Session, proxy: dict) -> None:
    purl = url(server_url, "proxies", proxy["name"])
    with connect(proxy) as s:
        round_trip(s)
        # A no-op update leaves open connections alone.
        r = http.patch(purl, json={})
        assert r.status_code == 200 and r.json() == proxy
        round_trip(s)
        # Disabling closes them cleanly (EOF, not RST) and refuses new ones.
        r = http.patch(purl, json={"enabled": False})
        assert r.status_code == 200 and r.json()["enabled"] is False
        assert wait_eof(s) < IO_TIMEOUT_S
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=IO_TIMEOUT_S).close()
    # The deprecated POST still updates.
    r = http.post(purl, json={"enabled": True})
    assert r.status_code == 200 and r.json()["enabled"] is True
    with connect(r.json()) as s:
        round_trip(s)
    assert_api_error(http.patch(purl + "-missing", json={}), 404, "proxy not found")
    assert_api_error(http.patch(purl, data=b"[1"), 400, "bad request body: ", prefix=True)
    r = http.patch(purl, json={"listen": "bad::addr"})
    assert r.status_code == 500 and "too many colons" in r.json()["error"]


def test_toxic_crud_and_json(server_url: str, http: requests.Session, proxy: dict) -> None:
    turl = url(server_url, "proxies", proxy["name"], "toxics")
    assert http.get(turl).json() == []
    r = http.post(turl, json={"type": "latency", "attributes": {"latency": 50}})
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    toxic = r.json()
    assert list(toxic) == ["attributes", "name", "type", "stream", "toxicity"]
    assert toxic == {
        "attributes": {"latency": 50, "jitter": 0},
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1,
    }
    r = http.post(
        turl, json={"type": "latency", "stream": "UPSTREAM", "toxicity": 0.5, "attributes": {"bogus": 1}}
    )
    assert r.status_code == 200
    assert (r.json()["name"], r.json()["stream"], r.json()["toxicity"]) == (
        "latency_UPSTREAM",
        "UPSTREAM",
        0.5,
    )
    add_toxic(http, server_url, proxy, type="noop", name="n1", stream="upstream")
    # The list: the upstream chain first, then downstream, each in the order added.
    assert [t["name"] for t in http.get(turl).json()] == ["latency_UPSTREAM", "n1", "latency_downstream"]
    assert [t["name"] for t in http.get(url(server_url, "proxies", proxy["name"])).json()["toxics"]] == [
        "latency_UPSTREAM",
        "n1",
        "latency_downstream",
    ]
    # Updates merge attributes and keep toxicity; name, type and stream do not change.
    r = http.patch(turl + "/latency_downstream", json={"attributes": {"jitter": 7}, "type": "timeout"})
    assert r.status_code == 200
    assert r.json()["attributes"] == {"latency": 50, "jitter": 7} and r.json()["type"] == "latency"
    r = http.post(turl + "/latency_UPSTREAM", json={"toxicity": 0.25})
    assert r.json()["toxicity"] == 0.25 and r.json()["attributes"] == {"latency": 0, "jitter": 0}
    assert http.get(turl + "/latency_downstream").json()["attributes"]["jitter"] == 7
    r = http.delete(turl + "/n1")
    assert (r.status_code, r.content) == (204, b"")
    assert_api_error(http.get(turl + "/n1"), 404, "toxic not found")
    assert_api_error(http.delete(turl + "/n1"), 404, "toxic not found")
    assert_api_error(http.patch(turl + "/n1", json={}), 404, "toxic not found")


def test_bad_toxic_input_gets_go_errors_and_server_keeps_serving(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    turl = url(server_url, "proxies", proxy["name"], "toxics")
    assert_api_error(http.post(turl, json={"type": "nonsense"}), 400, "invalid toxic type")
    r = http.post(turl, json={"type": "latency", "attributes": {"latency": 1.5}})
    assert_api_error(r, 400, "bad request body: json: cannot unmarshal number 1.5", prefix=True)
    r = http.post(turl, json={"type": "latency", "attributes": {"latency": "100"}})
    assert_api_error(r, 400, "bad request body: json: cannot unmarshal string", prefix=True)
    r = http.post(turl, json={"type": "latency", "stream": "sideways"})
    assert_api_error(r, 400, "stream was invalid, can be either upstream or downstream")
    assert_api_error(http.post(turl, data=b"nope"), 400, "bad request body: ", prefix=True)
    add_toxic(http, server_url, proxy, type="timeout", name="t", stream="upstream")
    # Names are unique across both directions.
    assert_api_error(http.post(turl, json={"type": "latency", "name": "t"}), 409, "toxic already exists")
    missing = url(server_url, "proxies", "no-such-proxy", "toxics")
    assert_api_error(http.post(missing, json={"type": "latency"}), 404, "proxy not found")
    assert_api_error(http.get(missing), 404, "proxy not found")
    assert [t["name"] for t in http.get(turl).json()] == ["t"]
    assert http.get(url(server_url, "version")).status_code == 200


# Numbers outside the Go field's type: Go's decoder fails the literal (ParseFloat(s, 32),
# ParseInt(s, 64) out of range), the request is a 400 and nothing is stored. Bodies are raw
# text, since Python's json writes 1e400 as Infinity.
TOO_BIG = [
    ("latency", '"toxicity": 1e39', "number 1e39", "toxicity of type float32"),
    ("latency", '"toxicity": 1e400', "number 1e400", "toxicity of type float32"),
    ("latency", '"toxicity": -1e39', "number -1e39", "toxicity of type float32"),
    ("latency", '"attributes": {"latency": 1e400}', "number 1e400", "latency of type int64"),
    (
        "latency",
        '"attributes": {"jitter": 9223372036854775808}',
        "number 9223372036854775808",
        "jitter of type int64",
    ),
    (
        "bandwidth",
        '"attributes": {"rate": -9223372036854775809}',
        "number -9223372036854775809",
        "rate of type int64",
    ),
    (
        "slicer",
        '"attributes": {"delay": 9223372036854775808}',
        "number 9223372036854775808",
        "delay of type int",
    ),
]


def assert_type_error(r: requests.Response, literal: str, field_and_type: str) -> None:
    assert_api_error(
        r, 400, f"bad request body: json: cannot unmarshal {literal} into Go struct field ", True
    )
    assert r.json()["error"].endswith(f"{field_and_type}"), r.text


def assert_proxy_reads_work(server_url: str, http: requests.Session, p: dict) -> list[dict]:
    """Every read of the proxy answers 200 (a stored infinity made them 500); its toxics."""
    assert http.get(url(server_url, "proxies")).status_code == 200
    assert http.get(url(server_url, "proxies", p["name"])).status_code == 200
    r = http.get(url(server_url, "proxies", p["name"], "toxics"))
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(("ttype", "field", "literal", "field_and_type"), TOO_BIG)
def test_out_of_range_number_in_a_new_toxic_is_400_and_stores_nothing(
    server_url: str,
    http: requests.Session,
    proxy: dict,
    ttype: str,
    field: str,
    literal: str,
    field_and_type: str,
) -> None:
    turl = url(server_url, "proxies", proxy["name"], "toxics")
    r = http.post(turl, data=f'{{"type": "{ttype}", "name": "big", {field}}}')
    assert_type_error(r, literal, field_and_type)
    assert assert_proxy_reads_work(server_url, http, proxy) == []
    assert_api_error(http.get(turl + "/big"), 404, "toxic not found")


def test_toxicity_out_of_float32_names_the_wrapper_field(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    r = http.post(
        url(server_url, "proxies", proxy["name"], "toxics"), data=b'{"type":"latency","toxicity":1e400}'
    )
    assert_api_error(
        r,
        400,
        "bad request body: json: cannot unmarshal number 1e400 into Go struct field"
        " ToxicWrapper.toxicity of type float32",
    )


@pytest.mark.parametrize("method", ["PATCH", "POST"])
@pytest.mark.parametrize(("ttype", "field", "literal", "field_and_type"), TOO_BIG)
def test_out_of_range_number_in_an_update_is_400_and_changes_nothing(
    server_url: str,
    http: requests.Session,
    proxy: dict,
    method: str,
    ttype: str,
    field: str,
    literal: str,
    field_and_type: str,
) -> None:
    before = add_toxic(http, server_url, proxy, type=ttype, name="odd", toxicity=1.5)
    turl = url(server_url, "proxies", proxy["name"], "toxics", "odd")
    assert_type_error(http.request(method, turl, data=f"{{{field}}}"), literal, field_and_type)
    assert assert_proxy_reads_work(server_url, http, proxy) == [before]
    r = http.request(method, turl, json={"toxicity": -0.5})
    assert (r.status_code, r.json()["toxicity"]) == (200, -0.5), r.text


def test_toxicity_outside_0_1_and_negative_attributes_are_accepted(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    """As the real server does (measured side by side): only the Go type's range is checked."""
    made = add_toxic(http, server_url, proxy, type="latency", toxicity=1.5, attributes={"latency": -5})
    assert (made["toxicity"], made["attributes"]) == (1.5, {"latency": -5, "jitter": 0})
    turl = url(server_url, "proxies", proxy["name"], "toxics", made["name"])
    r = http.patch(turl, json={"toxicity": -0.5, "attributes": {"jitter": -1}})
    assert r.status_code == 200, r.text
    assert (r.json()["toxicity"], r.json()["attributes"]) == (-0.5, {"latency": -5, "jitter": -1})
    assert assert_proxy_reads_work(server_url, http, proxy) == [r.json()]


# Go's decoder keeps the first type error in the order of the body's keys; a new toxic's
# attribute values are read in a second pass, once its type is known.
FIRST_ERROR = [
    (
        "POST",
        b'{"type": "latency", "toxicity": 1e400, "name": 5}',
        "number 1e400",
        "toxicity of type float32",
    ),
    ("POST", b'{"type": "latency", "name": 5, "toxicity": 1e400}', "number", "name of type string"),
    (
        "POST",
        b'{"attributes": {"latency": 1.5}, "type": "latency", "toxicity": 1e39}',
        "number 1e39",
        "toxicity of type float32",
    ),
    ("PATCH", b'{"attributes": {"jitter": 1.5, "latency": 2.5}}', "number 1.5", "jitter of type int64"),
    (
        "PATCH",
        b'{"toxicity": 1e400, "attributes": {"latency": 1.5}}',
        "number 1e400",
        "toxicity of type float32",
    ),
    ("PATCH", b'{"attributes": {"latency": 1.5}, "toxicity": 1e400}', "number 1.5", "latency of type int64"),
]


@pytest.mark.parametrize(("method", "body", "literal", "field_and_type"), FIRST_ERROR)
def test_the_first_bad_field_in_the_body_is_the_one_named(
    server_url: str,
    http: requests.Session,
    proxy: dict,
    method: str,
    body: bytes,
    literal: str,
    field_and_type: str,
) -> None:
    before = add_toxic(http, server_url, proxy, type="latency", name="odd")
    toxics = url(server_url, "proxies", proxy["name"], "toxics")
    assert_type_error(
        http.request(method, toxics + ("/odd" if method == "PATCH" else ""), data=body),
        literal,
        field_and_type,
    )
    assert assert_proxy_reads_work(server_url, http, proxy) == [before]


# Go's JSON scanner messages (encoding/json), behind "bad request body: ".
SYNTAX = [
    (b"{bad", "invalid character 'b' looking for beginning of object key string"),
    (b"nul", "unexpected EOF"),
    (b"\xef\xbb\xbf{}", "invalid character 'ï' looking for beginning of value"),
    (b'{"type": "latency",}', "invalid character '}' looking for beginning of object key string"),
    (b'{"type" "latency"}', "invalid character '\"' after object key"),
    (b'{"toxicity": 1.}', "invalid character '}' after decimal point in numeric literal"),
    (b'{"type": "latency"', "unexpected EOF"),
    (b"", "EOF"),
]


@pytest.mark.parametrize(("body", "error"), SYNTAX, ids=[repr(b) for b, _ in SYNTAX])
def test_json_syntax_errors_in_go_words(
    server_url: str, http: requests.Session, proxy: dict, body: bytes, error: str
) -> None:
    toxics = url(server_url, "proxies", proxy["name"], "toxics")
    odd = add_toxic(http, server_url, proxy, type="latency", name="odd")
    for method, target in (
        ("POST", url(server_url, "proxies")),
        ("POST", toxics),
        ("PATCH", toxics + "/odd"),
        ("PATCH", url(server_url, "proxies", proxy["name"])),
    ):
        assert_api_error(http.request(method, target, data=body), 400, f"bad request body: {error}")
    assert assert_proxy_reads_work(server_url, http, proxy) == [odd]


def test_populate_ignores_toxics_even_with_numbers_out_of_range(
    server_url: str, http: requests.Session, echo: Echo
) -> None:
    name = f"pop-{uuid.uuid4().hex[:8]}"
    body = (
        f'[{{"name": "{name}", "upstream": "127.0.0.1:{echo.port}", "listen": "127.0.0.1:0",'
        ' "toxics": [{"type": "latency", "toxicity": 1e400, "attributes": {"latency": 1e400}}]}]'
    )
    try:
        r = http.post(url(server_url, "populate"), data=body)
        assert r.status_code == 201, r.text
        (made,) = r.json()["proxies"]
        assert made["name"] == name and made["toxics"] == []
        assert assert_proxy_reads_work(server_url, http, made) == []
    finally:
        http.delete(url(server_url, "proxies", name))


def test_populate(server_url: str, http: requests.Session, echo: Echo) -> None:
    a, b = (f"pop-{uuid.uuid4().hex[:8]}" for _ in range(2))
    up = f"127.0.0.1:{echo.port}"
    try:
        r = http.post(url(server_url, "populate"), json=[])
        assert (r.status_code, r.json()) == (201, {"proxies": None})
        r = http.post(url(server_url, "populate"), json=[{"name": a, "upstream": up}, {"upstream": up}])
        assert r.status_code == 400 and r.headers["Content-Type"] == "application/json"
        assert r.json() == {
            "error": "missing required field: name at proxy 2",
            "status": 400,
            "proxies": None,
        }
        assert a not in http.get(url(server_url, "proxies")).json()
        specs = [
            {"name": a, "upstream": up, "listen": "127.0.0.1:0"},
            {"name": b, "upstream": up, "listen": "127.0.0.1:0", "enabled": False},
        ]
        r = http.post(url(server_url, "populate"), json=specs)
        assert r.status_code == 201
        made = {p["name"]: p for p in r.json()["proxies"]}
        assert made[a]["enabled"] is True and made[b]["enabled"] is False
        with connect(made[a]) as s:
            round_trip(s)
        # Port 0 never equals the bound listen: the proxy is replaced (new port, toxics lost).
        add_toxic(http, server_url, made[a], type="noop")
        again = {
            p["name"]: p for p in http.post(url(server_url, "populate"), json=specs[:1]).json()["proxies"]
        }
        assert again[a]["toxics"] == []
        # The same listen and upstream: returned untouched.
        same = [{"name": a, "upstream": up, "listen": again[a]["listen"]}]
        add_toxic(http, server_url, again[a], type="noop")
        r = http.post(url(server_url, "populate"), json=same)
        assert (
            r.json()["proxies"][0]["listen"] == again[a]["listen"]
            and len(r.json()["proxies"][0]["toxics"]) == 1
        )
    finally:
        for n in (a, b):
            http.delete(url(server_url, "proxies", n))


def test_reset_enables_and_clears_toxics(server_url: str, http: requests.Session, proxy: dict) -> None:
    purl = url(server_url, "proxies", proxy["name"])
    add_toxic(http, server_url, proxy, type="latency", attributes={"latency": 1000})
    http.patch(purl, json={"enabled": False})
    r = http.post(url(server_url, "reset"))
    assert (r.status_code, r.content) == (204, b"")
    after = http.get(purl).json()
    assert after["enabled"] is True and after["toxics"] == []
    with connect(after) as s:
        assert round_trip(s) < 0.9


# -- toxics on real connections -------------------------------------------------------


def test_latency_adds_up_over_directions_and_applies_live(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    with connect(proxy) as s:
        base = min(round_trip(s) for _ in range(3))
        add_toxic(http, server_url, proxy, type="latency", attributes={"latency": 300})
        # Delays are lower bounds whatever the load; the upper bounds only say "not much more".
        assert 0.295 <= round_trip(s) < base + 2.0  # added to an open connection
        add_toxic(http, server_url, proxy, type="latency", stream="upstream", attributes={"latency": 200})
        assert 0.495 <= round_trip(s) < base + 2.5
        http.delete(url(server_url, "proxies", proxy["name"], "toxics", "latency_downstream"))
        http.delete(url(server_url, "proxies", proxy["name"], "toxics", "latency_upstream"))
        assert min(round_trip(s) for _ in range(3)) < 0.28


def test_latency_jitter_stays_in_its_band(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="latency", attributes={"latency": 200, "jitter": 100})
    with connect(proxy) as s:
        rtts = [round_trip(s) for _ in range(6)]
    assert all(0.09 <= r < 1.5 for r in rtts), rtts


def test_bandwidth_rate_and_zero_blocks(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="bandwidth", attributes={"rate": 100})  # 100 KB/s
    with connect(proxy) as s:
        elapsed = round_trip(s, b"b" * 50_000)
    assert 0.4 <= elapsed < 3.0, elapsed
    http.patch(
        url(server_url, "proxies", proxy["name"], "toxics", "bandwidth_downstream"),
        json={"attributes": {"rate": 0}},
    )
    with connect(proxy) as s:
        s.sendall(b"blocked")
        assert nothing_arrives(s, 0.5)
        # Removing the toxic lets the held data through and keeps the connection.
        http.delete(url(server_url, "proxies", proxy["name"], "toxics", "bandwidth_downstream"))
        assert recv_exactly(s, 7) == b"blocked"
        round_trip(s)


def test_timeout_zero_blackholes_and_its_removal_closes(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    with connect(proxy) as s:
        round_trip(s)
        add_toxic(http, server_url, proxy, type="timeout", attributes={"timeout": 0})
        s.sendall(b"lost")
        assert nothing_arrives(s, 0.5)
        http.delete(url(server_url, "proxies", proxy["name"], "toxics", "timeout_downstream"))
        assert wait_eof(s) < IO_TIMEOUT_S


def test_timeout_closes_after_silence(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="timeout", stream="upstream", attributes={"timeout": 500})
    with connect(proxy) as s:
        t0 = time.perf_counter()
        assert wait_eof(s) >= 0  # EOF, not data
    assert 0.4 <= time.perf_counter() - t0 < 4.0


def test_reset_peer_present_at_start_sends_rst(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="reset_peer", stream="upstream", attributes={"timeout": 0})
    with connect(proxy) as s:
        s.sendall(b"boom")
        with pytest.raises(ConnectionResetError):
            while s.recv(1024):
                pass


def test_reset_peer_added_to_open_connection_closes_with_fin(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    with connect(proxy) as s:
        round_trip(s)
        add_toxic(http, server_url, proxy, type="reset_peer", stream="upstream", attributes={"timeout": 200})
        t0 = time.perf_counter()
        s.sendall(b"boom")
        assert wait_eof(s) < IO_TIMEOUT_S
        assert 0.15 <= time.perf_counter() - t0 < 4.0


def test_slicer_cuts_data_into_small_delayed_pieces(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    attrs = {"average_size": 20, "size_variation": 5, "delay": 60_000}
    add_toxic(http, server_url, proxy, type="slicer", attributes=attrs)
    payload = bytes(range(100))
    with connect(proxy) as s:
        t0 = time.perf_counter()
        s.sendall(payload)
        reads = []
        while sum(map(len, reads)) < len(payload):
            reads.append(s.recv(65536))
            assert reads[-1]
        elapsed = time.perf_counter() - t0
    assert b"".join(reads) == payload
    assert len(reads) >= 3, [len(r) for r in reads]
    assert sorted(map(len, reads))[len(reads) // 2] <= 25  # a late reader may see two slices at once
    assert elapsed >= 0.15


def test_limit_data_passes_exact_byte_count(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="limit_data", attributes={"bytes": 25})
    with connect(proxy) as s:
        s.sendall(b"x" * 100)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got == b"x" * 25


def test_slow_close_delays_the_close(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="slow_close", attributes={"delay": 700})
    with connect(proxy) as s:
        round_trip(s)  # data passes normally
        s.shutdown(socket.SHUT_WR)  # ends the upstream direction; the downstream close is held back
        assert 0.6 <= wait_eof(s) < 4.0


def test_noop_and_toxicity_zero_pass_data(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="noop")
    add_toxic(http, server_url, proxy, type="timeout", name="never", toxicity=0, attributes={"timeout": 0})
    with connect(proxy) as s:
        for _ in range(3):
            round_trip(s, b"z" * 1000)


def test_unreachable_upstream_closes_the_client(server_url: str, http: requests.Session) -> None:
    with socket.create_server(("127.0.0.1", 0)) as tmp:
        dead = tmp.getsockname()[1]
    name = f"dead-{uuid.uuid4().hex[:8]}"
    r = http.post(
        url(server_url, "proxies"),
        json={"name": name, "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{dead}"},
    )
    try:
        # Closing with unread data may reset; either way the client is cut off.
        with connect(r.json()) as s, contextlib.suppress(ConnectionResetError):
            assert s.recv(1) == b""
    finally:
        http.delete(url(server_url, "proxies", name))


def test_toxicity_is_rolled_per_connection(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="timeout", toxicity=0.5, attributes={"timeout": 0})
    conns = [connect(proxy) for _ in range(24)]
    try:
        for s in conns:
            s.sendall(b"?")
        passed = []
        deadline = time.monotonic() + 1.5
        pending = list(conns)
        while pending and time.monotonic() < deadline:
            ready, _, _ = select.select(pending, [], [], max(deadline - time.monotonic(), 0))
            for s in ready:
                assert s.recv(1) == b"?"
                passed.append(s)
                pending.remove(s)
        # P(outside 2..22 of 24 at p=0.5) is about 2e-5.
        assert 2 <= len(passed) <= 22, len(passed)
        for s in passed:  # the roll holds for the connection, not per chunk
            round_trip(s, b"again")
    finally:
        for s in conns:
            s.close()


def test_latency_is_measured_from_each_read_so_delays_pipeline(
    server_url: str, http: requests.Session, proxy: dict
) -> None:
    add_toxic(http, server_url, proxy, type="latency", attributes={"latency": 300})
    with connect(proxy) as s:
        t0 = time.perf_counter()
        for i in range(5):
            s.sendall(bytes([65 + i]))
            time.sleep(0.05)  # pacing, so that each byte is a read of its own
        assert recv_exactly(s, 5) == b"ABCDE"
        elapsed = time.perf_counter() - t0
    # One 300 ms delay plus the 200 ms of pacing, not five delays in a row (1.5 s).
    assert 0.5 <= elapsed < 1.3, elapsed


def test_limit_data_count_survives_an_update(server_url: str, http: requests.Session, proxy: dict) -> None:
    add_toxic(http, server_url, proxy, type="limit_data", attributes={"bytes": 50})
    with connect(proxy) as s:
        round_trip(s, b"a" * 30)
        r = http.patch(
            url(server_url, "proxies", proxy["name"], "toxics", "limit_data_downstream"),
            json={"attributes": {"bytes": 60}},
        )
        assert r.json()["attributes"] == {"bytes": 60}
        s.sendall(b"b" * 40)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got == b"b" * 30
