"""A loopback HTTP server speaking the part of the Hugging Face Hub API that huggingface_hub 2.x uses to
read a dataset repo, for tests and demos (no Hub server can run offline; this one serves local folders).

Endpoints (all under `/api/datasets/{owner}/{name}` or `/datasets/{owner}/{name}`):
`GET .../revision/{rev}` (the commit `sha`), `GET .../tree/{rev}[/{path}]?recursive=&expand=&cursor=`
(entries with `type`, `oid`, `size`, `path`, paginated through a `Link: <...>; rel="next"` header),
`POST .../paths-info/{rev}`, and `GET|HEAD /datasets/{repo}/resolve/{rev}/{path}` with `ETag`,
`X-Repo-Commit`, `Content-Length`, `Accept-Ranges` and 206 range responses. Errors are 404s with
`X-Error-Code` `RepoNotFound`, `RevisionNotFound` or `EntryNotFound`, as the Hub sends them.

Files stored with Git LFS (on the Hub, those the repo's `.gitattributes` tracks: its default tracks `*.parquet` and
`*.mp4`, among others) are not served by `resolve`: as on the Hub, it answers `302 Found` with `X-Linked-Size`,
`X-Linked-Etag` (the content's sha256) and a `Location` on the storage's CDN, a signed URL that serves the content
and its byte ranges without any Hub token (`GET|HEAD /cdn/{sha256}?sig=...`). The CDN is another origin, as on the
Hub: the same server under the name `localhost`, on the port the client asked (so a client behind a proxy reaches
it through the proxy). `revoke_links()` makes every URL handed out so far answer 403, as an expired signature does.

    with HubServer() as hub:
        sha = hub.add_revision("lerobot/demo", dataset_dir)   # the folder as branch main
        os.environ["HF_ENDPOINT"] = hub.endpoint               # before importing huggingface_hub
"""

import hashlib
import hmac
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

ROUTE = re.compile(r"^/(?:api/)?datasets/([^/]+/[^/]+)/(revision|tree|paths-info|resolve)/([^/]+)(?:/(.*))?$")
CDN = re.compile(r"^/cdn/([0-9a-f]{64})$")
LFS_SUFFIXES = (".parquet", ".mp4", ".arrow", ".bin", ".npy", ".safetensors", ".tar", ".zip")
"""Files the Hub's default `.gitattributes` stores with Git LFS (a part of its list)."""


class HubServer:
    """The server, on 127.0.0.1 and a free port, in a daemon thread (a context manager).

    Args:
        page_size: tree entries per page (the Hub uses 1000; small pages exercise pagination).
        lfs_suffixes: the names ending so are LFS files, which `resolve` redirects to the CDN.

    Attributes:
        endpoint: `http://127.0.0.1:PORT`, for HF_ENDPOINT or `HfApi(endpoint=...)`.
        requests: every request served, as `(method, path)`, in order (tests count them).
        authorizations: every distinct `Authorization` header received (tests check a token is sent).
        cdn_authorizations: the `Authorization` headers sent to CDN URLs (a client must send none there).
    """

    def __init__(self, page_size: int = 50, lfs_suffixes: tuple[str, ...] = LFS_SUFFIXES):
        self.page_size, self.lfs_suffixes = page_size, lfs_suffixes
        self.repos: dict[str, dict[str, str]] = {}  # repo -> {branch or tag: sha}
        self.commits: dict[str, dict[str, bytes]] = {}  # sha -> {path: content}
        self.oids: dict[str, dict[str, str]] = {}  # sha -> {path: git blob id}, computed once per commit
        self.history: dict[str, set[str]] = {}  # repo -> every sha it had
        self.requests: list[tuple[str, str]] = []
        self.authorizations: set[str] = set()  # every Authorization header received
        self.cdn_authorizations: list[str] = []
        self.lfs_oids: dict[str, dict[str, str]] = {}  # sha -> {path of an LFS file: sha256 of its content}
        self.blobs: dict[str, bytes] = {}  # sha256 -> content of an LFS file
        self._revocations = 0  # signs CDN URLs: a revocation changes every signature
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="dl-hub-server", daemon=True)

    def __enter__(self) -> "HubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def add_revision(self, repo_id: str, folder: Path, branch: str = "main", tags: tuple[str, ...] = ()) -> str:
        """Commit every file under `folder` as the new head of `branch` of dataset repo `repo_id` (created
        if new), tag it, and return its sha (derived from the content, so the same files give the same sha)."""
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*"))
                 if p.is_file()}
        oids = {path: _blob_oid(data) for path, data in files.items()}
        digest = hashlib.sha1(repo_id.encode())
        for path, oid in oids.items():
            digest.update(path.encode() + b"\0" + oid.encode())
        sha = digest.hexdigest()
        with self._lock:
            self.commits[sha], self.oids[sha] = files, oids
            self.lfs_oids[sha] = {path: hashlib.sha256(data).hexdigest() for path, data in files.items()
                                  if self.is_lfs(path)}
            self.blobs.update((blob, files[path]) for path, blob in self.lfs_oids[sha].items())
            refs = self.repos.setdefault(repo_id, {})
            for ref in (branch, *tags):
                refs[ref] = sha
            self.history.setdefault(repo_id, set()).add(sha)
        return sha

    def is_lfs(self, path: str) -> bool:
        """Whether `path` is stored with Git LFS (its `resolve` redirects to the CDN)."""
        return path.endswith(self.lfs_suffixes)

    def revoke_links(self) -> None:
        """Every CDN URL handed out so far answers 403 from now on (as when its signature expires)."""
        with self._lock:
            self._revocations += 1

    def _signature(self, blob: str) -> str:
        """The signature of CDN URLs of `blob` (sha256) until the next revocation."""
        with self._lock:
            return hmac.new(str(self._revocations).encode(), blob.encode(), "sha256").hexdigest()

    def resolve(self, repo_id: str, revision: str) -> str | None:
        """The sha a revision names in a repo, or None."""
        refs = self.repos.get(repo_id, {})
        if revision in refs:
            return refs[revision]
        return revision if revision in self.history.get(repo_id, ()) else None


def _blob_oid(data: bytes) -> str:
    """git's blob id of `data` (what the Hub reports as `oid`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            # without it Nagle's algorithm holds back each response's last segment
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format, *args):  # quiet
            pass

        def do_GET(self):
            self._route(head=False)

        def do_HEAD(self):
            self._route(head=True)

        def do_POST(self):
            self._route(head=False)

        # ----------------------------------------------------------------------------------- routing
        def _route(self, head: bool) -> None:
            url = urlsplit(self.path)
            with hub._lock:
                hub.requests.append((self.command, url.path))
                if self.headers.get("Authorization"):
                    hub.authorizations.add(self.headers["Authorization"])
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if self.command == "POST" else b""
            cdn = CDN.match(url.path)
            if cdn:
                return self._cdn(cdn.group(1), parse_qs(url.query).get("sig", [""])[0], head)
            match = ROUTE.match(url.path)
            if not match:
                return self._error(404, "RepoNotFound", f"no route {url.path}")
            repo_id, action, revision, rest = match.groups()
            repo_id, revision, rest = unquote(repo_id), unquote(revision), unquote(rest or "")
            if repo_id not in hub.repos:
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            sha = hub.resolve(repo_id, revision)
            if sha is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            files = hub.commits[sha]
            if action == "revision":
                return self._json({"id": repo_id, "sha": sha, "private": False, "disabled": False, "gated": False,
                                   "downloads": 0, "likes": 0, "tags": [], "author": repo_id.split("/")[0],
                                   "siblings": [{"rfilename": p} for p in files]})
            if action == "tree":
                return self._tree(repo_id, revision, files, hub.oids[sha], rest, parse_qs(url.query))
            if action == "paths-info":
                wanted = parse_qs(body.decode()).get("paths", [])
                return self._json([e for p in wanted for e in _entries(files, hub.oids[sha], p.strip("/"), exact=True)])
            return self._resolve(sha, files, rest, head)

        def _tree(self, repo_id, revision, files, oids, folder, query) -> None:
            folder = folder.strip("/")
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            if folder and not any(p.startswith(folder + "/") for p in files):
                return self._error(404, "EntryNotFound", f"{folder} does not exist on {revision}")
            entries = _entries(files, oids, folder, recursive=recursive)
            start = int(query.get("cursor", ["0"])[0])
            page = entries[start:start + hub.page_size]
            headers = {}
            if start + hub.page_size < len(entries):
                nxt = f"{hub.endpoint}/api/datasets/{repo_id}/tree/{quote(revision, safe='')}"
                nxt += f"/{quote(folder)}" if folder else ""
                nxt += f"?recursive={str(recursive).lower()}&expand=false&cursor={start + hub.page_size}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            self._json(page, headers)

        def _resolve(self, sha, files, path, head) -> None:
            data = files.get(path)
            if data is None:
                return self._error(404, "EntryNotFound", f"{path} does not exist at {sha}")
            blob = hub.lfs_oids[sha].get(path)
            if blob is not None:
                port = (self.headers.get("Host") or hub.endpoint).rsplit(":", 1)[1]
                return self._send(302, b"", {"Location": f"http://localhost:{port}/cdn/{blob}?sig={hub._signature(blob)}",
                                             "X-Linked-Size": str(len(data)), "X-Linked-Etag": f'"{blob}"',
                                             "ETag": f'"{blob}"', "X-Repo-Commit": sha})
            self._serve(data, {"ETag": f'"{hub.oids[sha][path]}"', "X-Repo-Commit": sha}, head)

        def _cdn(self, blob: str, signature: str, head: bool) -> None:
            if self.headers.get("Authorization"):
                with hub._lock:
                    hub.cdn_authorizations.append(self.headers["Authorization"])
            if blob not in hub.blobs or not hmac.compare_digest(signature, hub._signature(blob)):
                expired = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
                return self._send(403, expired, {"Content-Type": "application/xml"})
            self._serve(hub.blobs[blob], {"ETag": f'"{blob}"'}, head)

        def _serve(self, data: bytes, headers: dict, head: bool) -> None:
            """`data`, or the byte range the request's `Range` header names (206), with `headers`."""
            start, end, status = 0, len(data), 200
            ranged = re.match(r"bytes=(\d*)-(\d*)$", self.headers.get("Range", ""))
            if ranged and (ranged.group(1) or ranged.group(2)):
                if ranged.group(1):
                    start = int(ranged.group(1))
                    end = min(len(data), int(ranged.group(2)) + 1) if ranged.group(2) else len(data)
                else:  # suffix range: the last N bytes
                    start = max(0, len(data) - int(ranged.group(2)))
                if start >= len(data) and len(data):
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                status = 206
            headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            if status == 206:
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
            self._send(status, data[start:end], headers, head=head)

        # ----------------------------------------------------------------------------------- replies
        def _json(self, obj, headers=None) -> None:
            self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

        def _error(self, status: int, code: str, message: str) -> None:
            self._send(status, json.dumps({"error": message}).encode(),
                       {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message})

        def _send(self, status: int, body: bytes, headers: dict, head: bool = False) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

    return Handler


def _entries(files: dict[str, bytes], oids: dict[str, str], folder: str, recursive: bool = False,
             exact: bool = False) -> list[dict]:
    """Tree entries under `folder` (its children, or everything below it when recursive; with `exact`, the
    entry of `folder` itself), folders before files as the Hub lists them."""
    if exact:
        if folder in files:
            return [{"type": "file", "oid": oids[folder], "size": len(files[folder]), "path": folder}]
        if any(p.startswith(folder + "/") for p in files):
            return [{"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0, "path": folder}]
        return []
    prefix = folder + "/" if folder else ""
    dirs, out = set(), []
    for path, data in sorted(files.items()):
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix):].split("/")
        for depth in range(1, len(parts) if recursive else min(2, len(parts))):
            dirs.add(prefix + "/".join(parts[:depth]))
        if recursive or len(parts) == 1:
            out.append({"type": "file", "oid": oids[path], "size": len(data), "path": path})
    folders = [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
               for d in sorted(dirs)]
    return folders + out
