#!/usr/bin/env python3
"""demo.py - one real sandgate session, printed as a readable transcript.

    scripts/demo.py [PATH/TO/sandgate]        (or SANDGATE_BIN=...)

Starts `sandgate serve` on the embedded local profile with a fresh state
directory and walks through a session the way the agent host (Wuu) drives
its execution backend: initialize, the host's workspace tools through
`execute` (write_file, read_file, edit_file, grep, bash), a cancelled
command, a background process read by offsets with long polls and its
`process` events, an artifact exported by present_artifact and downloaded,
and shutdown.  Every frame is printed as one line of compact JSON, `→` for
what the host sends and `←` for what sandgate writes, with long strings and
lists elided.  The demo checks what it sees and exits non-zero on the first
surprise.  Python 3 standard library only.
"""

import base64
import hashlib
import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = "/workspace"
SESSION = "demo-session"
TOKEN = secrets.token_hex(32)  # as the host makes one: 64 hex characters
WAIT_S = 60  # bound on any single reply


class DemoFailed(Exception):
    pass


# Protocol fields in nanoseconds: printed as "2000000000 ns (2 s)", so the
# transcript says which unit the raw number is in.
NS_FIELDS = {"Duration", "Wait", "MinDwell"}


def human_ns(ns):
    if not isinstance(ns, int) or isinstance(ns, bool):
        return ns
    for unit, size in (("s", 10**9), ("ms", 10**6), ("µs", 10**3)):
        if ns >= size:
            return "%d ns (%g %s)" % (ns, round(ns / size, 3), unit)
    return "%d ns" % ns


def elide(v, width=72):
    """A copy of v with long strings and lists shortened, for printing."""
    if isinstance(v, str):
        if len(v) <= width:
            return v
        return "%s…(%d chars)" % (v[:width - 12], len(v))
    if isinstance(v, list):
        items = [elide(x, width) for x in v[:8]]
        if len(v) > 8:
            items.append("…(%d more)" % (len(v) - 8))
        return items
    if isinstance(v, dict):
        return {k: (brief_record(x) if k == "Process"
                    else human_ns(x) if k in NS_FIELDS else elide(x, width))
                for k, x in v.items()}
    return v


def brief_record(rec):
    """A process record inside a read reply or an event, cut to what changes."""
    if not isinstance(rec, dict):
        return rec
    return {k: rec.get(k) for k in ("id", "status", "exit_code", "terminal_cause") if k in rec}


def show(arrow, obj):
    if isinstance(obj, dict) and "token" in obj:
        obj = dict(obj, token=obj["token"][:8] + "…")
    line = json.dumps(elide(obj), ensure_ascii=False, separators=(",", ":"))
    if len(line) > 600:
        line = line[:590] + "…"
    print("%s %s" % (arrow, line), flush=True)


def note(text):
    print("\n# %s" % text, flush=True)


class Session:
    def __init__(self, binary):
        self.state = tempfile.mkdtemp(prefix="sg-demo-state-")
        self.xdg = tempfile.mkdtemp(prefix="sg-demo-xdg-")
        env = dict(os.environ)
        env.pop("SANDGATE_CONFIG", None)  # the embedded local profile, always
        env["XDG_CONFIG_HOME"] = self.xdg
        self.proc = subprocess.Popen(
            [binary, "serve", "--state-dir", self.state],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, bufsize=0)
        self.lines = queue.Queue()
        self.stderr = bytearray()
        self.next_id = 0
        self.calls = 0
        self.events = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self):
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            self.stderr += chunk[: max(0, 65536 - len(self.stderr))]

    def _next_message(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise DemoFailed("sandgate said nothing for %d s" % timeout)
        if line is None:
            raise DemoFailed("sandgate closed its stdout")
        try:
            msg = json.loads(line)
        except ValueError:
            raise DemoFailed("not JSON: %r" % line[:200])
        show("←", msg)
        return msg

    def send(self, method, data=None, rid=None):
        """Write one frame (the host's: token, a string id, method, data);
        its id.  rid names another request's id (a cancel's target)."""
        if rid is None:
            self.next_id += 1
            rid = str(self.next_id)
        frame = {"token": TOKEN, "id": rid, "method": method}
        if data is not None:
            frame["data"] = data
        show("→", frame)
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()
        return rid

    def reply(self, rid):
        """The reply to rid (events and anything else are printed and kept)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            msg = self._next_message(max(0.1, deadline - time.monotonic()))
            if msg.get("method") == "process":
                self.events.append(msg["data"])
            elif msg.get("id") == rid and "method" not in msg:
                return msg

    def request(self, method, data=None):
        """Send one request and return its reply's data."""
        msg = self.reply(self.send(method, data))
        if "error" in msg:
            raise DemoFailed("%s failed: %s" % (method, msg["error"]))
        return msg["data"]

    def execute_data(self, name, args):
        self.calls += 1
        return {"call": {"id": "call_%d" % self.calls, "name": name,
                         "arguments": json.dumps(args), "kind": "function"},
                "permission_mode": "standard", "actor": SESSION,
                "git_attribution_enabled": False}

    def tool(self, name, args):
        """A tool call that must succeed: (its JSON view, the ToolResult)."""
        res = self.request("execute", self.execute_data(name, args))
        parts = res.get("content") or []
        expect(isinstance(parts, list) and parts and parts[0].get("type") == "text",
               "%s: a ToolResult with a text part: %s" % (name, str(res)[:300]))
        text = parts[0]["text"]
        try:
            return json.loads(text), res
        except ValueError:
            return text, res

    def tool_error(self, name, args):
        """A tool call that must fail: the error reply's text."""
        msg = self.reply(self.send("execute", self.execute_data(name, args)))
        expect("error" in msg, "%s %s should have failed" % (name, args))
        return msg["error"]

    def finish(self):
        """EOF on stdin; print what arrives until exit; the exit status."""
        self.proc.stdin.close()
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise DemoFailed("sandgate did not exit within %d s" % WAIT_S)
            if line is None:
                break
            show("←", json.loads(line))
        return self.proc.wait(WAIT_S)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.state, ignore_errors=True)
        shutil.rmtree(self.xdg, ignore_errors=True)


def expect(cond, what):
    if not cond:
        raise DemoFailed(what)


def demo(s):
    note("initialize: bind the connection to a workspace")
    init = s.request("initialize", {"version": 4, "root": ROOT, "session": SESSION,
                                    "identity": "demo", "remove_workspace_on_exit": True})
    expect(init.get("version") == 4, "protocol version 4")
    env = init.get("environment", {})
    print("  backend=%s profile=%s id=%s" % (env.get("backend"), env.get("profile"), env.get("id")))

    note("write, read and edit a file (the host's tools, through execute)")
    text = "alpha\nbeta\ngamma\n"
    view, _ = s.tool("write_file", {"path": "notes/today.txt", "content": text})
    expect(view.get("written_bytes") == len(text), "written_bytes")
    view, res = s.tool("read_file", {"path": "notes/today.txt"})
    expect(res["structured_content"]["text"] == text, "read back what was written")
    s.tool("edit_file", {"path": "notes/today.txt", "old_text": "beta", "new_text": "BETA"})
    view, res = s.tool("read_file", {"path": "notes/today.txt"})
    expect("BETA" in res["structured_content"]["text"], "the edit is visible")

    note("grep, and a path outside the workspace (a failed tool is an error reply)")
    view, _ = s.tool("grep", {"pattern": "^(alpha|BETA)$", "path": "notes"})
    expect(view.get("total") == 2, "two matching lines")
    err = s.tool_error("read_file", {"path": "../etc/passwd"})
    print("  (refused, as it must be: %s)" % err.split(":", 1)[0])

    note("bash: a fresh login shell per call; a non-zero exit is a normal result")
    view, _ = s.tool("bash", {"command": "wc -l notes/today.txt && echo \"cwd is $PWD\""})
    expect(view.get("exit_code") == 0, "exit code 0")
    view, _ = s.tool("bash", {"command": "exit 3"})
    expect(view.get("exit_code") == 3, "exit code 3, in a result")

    note("cancel: the host names the request it gives up on; only that request replies")
    rid = s.send("execute", s.execute_data("bash", {"command": "sleep 30"}))
    time.sleep(0.5)
    s.send("cancel", rid=rid)
    msg = s.reply(rid)
    expect("error" in msg, "the cancelled command ends with an error reply")

    note("a background process, read by byte offsets with long polls")
    view, _ = s.tool("bash", {"command": "for i in 1 2 3; do echo tick $i; sleep 0.3; done",
                              "run_in_background": True})
    pid = view["id"]
    offset, output = 0, ""
    for _ in range(50):
        r = s.request("process/read", {"id": pid, "options": {
            "MaxBytes": 0, "OffsetBytes": offset, "Wait": 2_000_000_000, "MinDwell": 0}})
        output += r["Output"]
        offset = r["EndOffset"]
        if r["Process"]["status"] in ("stopped", "failed") and offset >= r["TotalBytes"]:
            break
    expect(output.replace("\r\n", "\n") == "tick 1\ntick 2\ntick 3\n",
           "the process's whole output: %r" % output)
    listing = s.request("process/list")
    expect(any(p.get("id") == pid for p in listing), "the list (an array) has the process")
    expect(any(e["Type"] == "started" and e["Process"]["id"] == pid for e in s.events),
           "a `started` event for the process")

    note("present_artifact: an immutable snapshot the host downloads in chunks")
    art, _ = s.tool("present_artifact", {"path": "notes/today.txt"})
    got, off = b"", 0
    while True:
        r = s.request("export/read", {"token": art["execution_export"], "offset": off})
        chunk = base64.b64decode(r["data"])
        got += chunk
        off += len(chunk)
        if r["eof"]:
            break
    expect(len(got) == art["size"], "the declared size")
    expect(hashlib.sha256(got).hexdigest() == hashlib.sha256(
        text.replace("beta", "BETA").encode()).hexdigest(), "sha256 of the exported bytes")
    s.request("export/close", {"token": art["execution_export"]})

    note("shutdown: EOF on stdin")
    rc = s.finish()
    print("  sandgate exited with status %d" % rc)
    expect(rc == 0, "exit status 0")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SANDGATE_BIN")
    if not binary:
        print("usage: demo.py PATH/TO/sandgate   (or set SANDGATE_BIN)", file=sys.stderr)
        return 2
    s = Session(binary)
    try:
        demo(s)
    except (DemoFailed, OSError, ValueError, KeyError) as e:
        print("\nDEMO FAILED: %s" % e, file=sys.stderr)
        if s.stderr:
            print("sandgate's stderr:\n%s" % s.stderr.decode("utf-8", "replace")[-3000:],
                  file=sys.stderr)
        return 1
    finally:
        s.cleanup()
    print("\ndemo ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
