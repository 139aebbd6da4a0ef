#!/usr/bin/env python3
"""A small OCI registry on 127.0.0.1 for the singularity backend's tests.

    registry.py STATE.json

Serves the distribution API's manifest endpoints the way registries do
(Docker Hub included) as far as sandgate and the fake apptainer use them:

  GET /token?service=S&scope=repository:REPO:pull   {"token": "..."}
  HEAD|GET /v2/REPO/manifests/TAG|sha256:HEX        the manifest, with
      Docker-Content-Digest: sha256 of its bytes; 404 MANIFEST_UNKNOWN

Every /v2/ request without the bearer token is answered 401 with
`WWW-Authenticate: Bearer realm="http://127.0.0.1:PORT/token",
service="fake-registry",scope="repository:REPO:pull"`, so clients must do
the anonymous token dance.

STATE.json is read on every request, so a test moves a tag by rewriting
it: {"REPO": {"manifests": ["<json text>", ...], "tags": {"TAG": N}}},
a tag naming the index of its manifest.  Each request is appended to
STATE.json.log as "METHOD PATH".  Prints "LISTENING PORT" once it listens
and serves until stdin closes.
"""
import hashlib
import http.server
import json
import re
import sys
import threading

TOKEN = "fake-registry-token"
STATE = sys.argv[1]


def load():
    with open(STATE) as f:
        return json.load(f)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=(), head=False):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def error(self, status, code, head, extra=()):
        body = json.dumps({"errors": [{"code": code, "message": code.lower()}]}).encode()
        self.send(status, body, [("Content-Type", "application/json")] + list(extra), head)

    def handle_any(self, head):
        with open(STATE + ".log", "a") as f:
            f.write("%s %s\n" % (self.command, self.path))
        port = self.server.server_address[1]
        if self.path.startswith("/token"):
            return self.send(200, json.dumps({"token": TOKEN}).encode(),
                             [("Content-Type", "application/json")], head)
        m = re.match(r"^/v2/(.+)/manifests/([^/]+)$", self.path)
        if not m:
            return self.error(404, "NAME_UNKNOWN", head)
        repo, ref = m.group(1), m.group(2)
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            challenge = ('Bearer realm="http://127.0.0.1:%d/token",service="fake-registry",'
                         'scope="repository:%s:pull"' % (port, repo))
            return self.error(401, "UNAUTHORIZED", head, [("WWW-Authenticate", challenge)])
        entry = load().get(repo)
        if not entry:
            return self.error(404, "NAME_UNKNOWN", head)
        texts = [t.encode() for t in entry["manifests"]]
        if ref.startswith("sha256:"):
            found = [t for t in texts if "sha256:" + hashlib.sha256(t).hexdigest() == ref]
        else:
            found = [texts[entry["tags"][ref]]] if ref in entry["tags"] else []
        if not found:
            return self.error(404, "MANIFEST_UNKNOWN", head)
        body = found[0]
        self.send(200, body, [("Content-Type", "application/vnd.oci.image.manifest.v1+json"),
                              ("Docker-Content-Digest",
                               "sha256:" + hashlib.sha256(body).hexdigest())], head)

    def do_GET(self):
        self.handle_any(False)

    def do_HEAD(self):
        self.handle_any(True)


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sys.stdout.write("LISTENING %d\n" % srv.server_address[1])
    sys.stdout.flush()
    sys.stdin.read()
    srv.shutdown()


if __name__ == "__main__":
    main()
