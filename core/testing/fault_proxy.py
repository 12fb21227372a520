"""A TCP proxy on loopback that puts a slow, unreliable network between a client and a server: added
latency per request, a bandwidth cap shared by every connection, and, on a deterministic schedule,
connections reset or closed in the middle of a response body and requests answered 429 (with `Retry-After`) or 503;
optionally at most so many faults per distinct request, so a client that retries enough always gets through.

It speaks just enough HTTP/1.1 to see request boundaries (a client's bytes after the server has answered
start a new request: no pipelining, as HTTP clients do) and to answer a request itself.

    with S3Server() as s3, FaultProxy(s3.endpoint_url, latency_s=0.02, bandwidth_bps=80e6) as proxy:
        options = s3.storage_options(proxy.endpoint_url)
"""

import socket
import struct
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from urllib.parse import urlsplit

CHUNK = 16 << 10
REQUEST_LINES_KEPT = 1000
"""Request lines a proxy keeps (the latest)."""


@dataclass(frozen=True)
class Faults:
    """Which requests fail, by their 1-based number in arrival order (deterministic for a given order).

    Args:
        throttle_every: every N-th request is answered `429 Too Many Requests` with `Retry-After: 0` (0: never).
        unavailable_every: every N-th request is answered `503 Service Unavailable` (0: never).
        reset_every: every N-th request's response is cut by a TCP reset after `reset_after_bytes` bytes
            of it (headers included) reached the client (0: never).
        truncate_every: every N-th request's response is cut by closing the connection (a FIN: the bytes sent
            before it all reach the client, which sees a body shorter than its Content-Length) after
            `reset_after_bytes` bytes of it (0: never).
        reset_after_bytes: see `reset_every` and `truncate_every`.
        limit: stop injecting after this many faults (None: never stop).
        per_request: fail each distinct request (method, target and `Range` header) at most this many times;
            its later tries go through (None: no bound). With concurrent clients the schedule by arrival order
            can hit one request's every retry; this bound makes a client retrying more than `per_request` times
            per request always succeed, whatever the interleaving.
    """

    throttle_every: int = 0
    unavailable_every: int = 0
    reset_every: int = 0
    truncate_every: int = 0
    reset_after_bytes: int = 2048
    limit: int | None = None
    per_request: int | None = None

    def pick(self, n: int) -> str | None:
        for kind, every in (("429", self.throttle_every), ("503", self.unavailable_every),
                            ("reset", self.reset_every), ("truncate", self.truncate_every)):
            if every and n % every == 0:
                return kind
        return None


class FaultProxy:
    """The proxy, listening on 127.0.0.1 and a free port (a context manager).

    Args:
        target: the server's `http://host:port`.
        latency_s: added before each request is forwarded (s).
        bandwidth_bps: cap on server-to-client bits per second over all connections (None: no cap).
        faults: what to inject (default: nothing).

    Attributes:
        endpoint_url: `http://127.0.0.1:PORT`, what the client uses instead of `target`.
        injected: faults injected so far by kind ("429", "503", "reset", "truncate"); `requests`: requests seen;
            `connections`: client connections accepted (a client and server keeping connections alive make few);
            `request_lines`: the request lines (`GET /path?query HTTP/1.1`) of the last `REQUEST_LINES_KEPT` requests;
            `bytes_served`: bytes sent from the server to clients (headers included).
    """

    def __init__(self, target: str, latency_s: float = 0.0, bandwidth_bps: float | None = None,
                 faults: Faults | None = None):
        url = urlsplit(target)
        self.target = (url.hostname, url.port)
        self.latency_s, self.bandwidth_bps, self.faults = latency_s, bandwidth_bps, faults or Faults()
        self.injected: Counter = Counter()
        self._failed: Counter = Counter()  # faults injected per distinct request
        self.requests = self.connections = self.bytes_served = 0
        self.request_lines: deque[str] = deque(maxlen=REQUEST_LINES_KEPT)
        self._lock = threading.Lock()
        self._next_free = 0.0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="dl-fault-proxy", daemon=True)

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting; connections in flight end with their peers."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()

    # ------------------------------------------------------------------------------------ connections
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.target, timeout=30)
        except OSError:
            client.close()
            return
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(client, server)
        threading.Thread(target=self._downstream, args=(conn,), daemon=True).start()
        self._upstream(conn)

    def _next_fault(self, request: bytes) -> str | None:
        """The fault for the next request, whose first bytes are `request` (None: forward it)."""
        with self._lock:
            self.requests += 1
            self.request_lines.append(request.split(b"\r\n", 1)[0].decode("latin-1"))
            kind = self.faults.pick(self.requests)
            if kind is None or (self.faults.limit is not None and sum(self.injected.values()) >= self.faults.limit):
                return None
            if self.faults.per_request is not None:
                which = _request_identity(request)
                if self._failed[which] >= self.faults.per_request:
                    return None
                self._failed[which] += 1
            self.injected[kind] += 1
            return kind

    def _upstream(self, conn: "_Connection") -> None:
        """Client -> server; each new request may be delayed or answered here."""
        try:
            while True:
                data = conn.client.recv(CHUNK)
                if not data:
                    break
                if conn.new_request:
                    conn.new_request = False
                    fault = self._next_fault(data)
                    if fault in ("429", "503"):
                        conn.answer(fault, head=data.startswith(b"HEAD "))
                        return
                    conn.reset_at = self.faults.reset_after_bytes if fault in ("reset", "truncate") else None
                    conn.cut = fault
                    conn.sent = 0
                    if self.latency_s:
                        time.sleep(self.latency_s)
                conn.server.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    def _downstream(self, conn: "_Connection") -> None:
        """Server -> client at the shared bandwidth cap; cuts a response marked for a reset or a truncation."""
        try:
            while True:
                data = conn.server.recv(CHUNK)
                if not data:
                    break
                conn.new_request = True
                if conn.reset_at is not None and conn.sent + len(data) >= conn.reset_at:
                    self._pace(conn.reset_at - conn.sent)
                    conn.client.sendall(data[: conn.reset_at - conn.sent])
                    if conn.cut == "reset":
                        conn.reset()
                    else:
                        conn.close()
                    return
                self._pace(len(data))
                conn.client.sendall(data)
                conn.sent += len(data)
                with self._lock:
                    self.bytes_served += len(data)
        except OSError:
            pass
        finally:
            conn.close()

    def _pace(self, n: int) -> None:
        if not self.bandwidth_bps or n <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_free)
            self._next_free = start + n * 8 / self.bandwidth_bps
            wait = self._next_free - now
        time.sleep(wait)


def _request_identity(request: bytes) -> bytes:
    """What makes a request the same request again (a retry): its request line and `Range` header."""
    lines = request.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    ranges = [line.split(b":", 1)[1].strip() for line in lines[1:] if line.lower().startswith(b"range:")]
    return b" ".join([lines[0], *ranges])


class _Connection:
    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.new_request = True
        self.reset_at: int | None = None
        self.cut: str | None = None  # how the response is cut at reset_at: "reset" or "truncate"
        self.sent = 0
        self._closed = False

    def answer(self, status: str, head: bool) -> None:
        """Answer the request with `status` (no body for a HEAD request) and close."""
        reason = {"429": "Too Many Requests", "503": "Service Unavailable"}[status]
        body = f"{status} {reason} (injected by dl.testing.fault_proxy)".encode()
        lines = (f"HTTP/1.1 {status} {reason}\r\nRetry-After: 0\r\nContent-Type: text/plain\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            self.client.sendall(lines + (b"" if head else body))
        finally:
            self.close()

    def reset(self) -> None:
        """Close the client side with a TCP RST (SO_LINGER 0), as a dropped connection looks."""
        try:
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
