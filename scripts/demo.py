#!/usr/bin/env python3
"""demo.py - one real sandgate session, printed as a readable transcript.

    scripts/demo.py [PATH/TO/sandgate]        (or SANDGATE_BIN=...)

Starts `sandgate serve` on the embedded local profile with a fresh state
directory and walks through a session: initialize, write/read/edit a file,
grep, a command, a background process read by offsets with long polls, an
export, and shutdown.  Every frame is printed as one line of compact JSON,
`→` for what the host sends and `←` for what sandgate writes, with long
strings and lists elided.  The demo checks what it sees and exits non-zero
on the first surprise.  Python 3 standard library only.
"""

import base64
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = "/workspace"
TOKEN = "demo-token"
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
    return {k: rec.get(k) for k in ("id", "status", "exit_code", "signal") if k in rec}


def show(arrow, obj):
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

    def request(self, method, data):
        """Send one request and return its reply's data (events are printed)."""
        self.next_id += 1
        rid = self.next_id
        frame = {"id": rid, "method": method, "token": TOKEN, "data": data}
        show("→", frame)
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + WAIT_S
        while True:
            msg = self._next_message(max(0.1, deadline - time.monotonic()))
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise DemoFailed("%s failed: %s" % (method, msg["error"]))
                return msg["data"]

    def tool(self, name, args, expect_error=False):
        data = {"tool": name, "call": {"id": "call-%d" % (self.next_id + 1),
                                       "arguments": json.dumps(args)},
                "executor": {"thread_id": "demo-session", "agent": "demo"}}
        res = self.request("execute", data)
        if res.get("is_error") != expect_error:
            raise DemoFailed("%s: is_error is %s: %s" % (name, res.get("is_error"),
                                                           str(res.get("content"))[:300]))
        return res

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
    init = s.request("initialize", {"version": 4, "root": ROOT, "session": "demo-session",
                                    "identity": "demo", "remove_workspace_on_exit": True})
    expect(init.get("version") == 4, "protocol version 4")
    env = init.get("environment", {})
    print("  backend=%s profile=%s id=%s" % (env.get("backend"), env.get("profile"), env.get("id")))

    note("write, read and edit a file")
    text = "alpha\nbeta\ngamma\n"
    r = s.tool("write_file", {"path": "notes/today.txt", "content": text})
    expect(r["metadata"].get("bytes_written") == len(text), "bytes_written")
    r = s.tool("read_file", {"path": "notes/today.txt"})
    expect(r["content"] == text, "read back what was written")
    s.tool("edit_file", {"path": "notes/today.txt", "old_string": "beta",
                         "new_string": "BETA"})
    r = s.tool("read_file", {"path": "notes/today.txt"})
    expect("BETA" in r["content"], "the edit is visible")

    note("grep and a path outside the workspace")
    r = s.tool("grep", {"pattern": "^(alpha|BETA)$", "path": "notes"})
    expect(len(r["content"].splitlines()) == 2, "two matching lines")
    data = {"tool": "read_file", "call": {"id": "call-escape",
                                          "arguments": json.dumps({"path": "../etc/passwd"})}}
    try:
        s.request("execute", data)
        raise DemoFailed("../etc/passwd was readable")
    except DemoFailed as e:
        expect("path_escape" in str(e), "refused with path_escape: %s" % e)
        print("  (refused, as it must be)")

    note("a command")
    r = s.tool("run_command", {"command": "wc -l notes/today.txt && echo \"cwd is $PWD\""})
    expect(r["metadata"].get("exit_code") == 0, "exit code 0")
    r = s.tool("run_command", {"command": "exit 3"}, expect_error=True)
    expect(r["metadata"].get("exit_code") == 3, "exit code 3 is a tool error")

    note("a background process, read by byte offsets with long polls")
    rec = s.request("process/start", {"command": "for i in 1 2 3; do echo tick $i; sleep 0.3; done",
                                      "operation_id": "op-demo"})
    pid = rec["id"]
    offset, output = 0, ""
    for _ in range(50):
        r = s.request("process/read", {"id": pid, "OffsetBytes": offset, "MaxBytes": 0,
                                       "Wait": 2_000_000_000, "MinDwell": 0})
        output += r["Output"]
        offset = r["EndOffset"]
        if r["Process"]["status"] != "running" and offset >= r["TotalBytes"]:
            break
    expect(output == "tick 1\ntick 2\ntick 3\n", "the process's whole output: %r" % output)
    listing = s.request("process/list", {})
    expect(any(p.get("operation_id") == "op-demo" for p in listing["processes"]),
           "the list keeps operation_id")

    note("export the file: an immutable snapshot, read in chunks")
    ex = s.request("export/open", {"path": "notes/today.txt"})
    got, off = b"", 0
    while True:
        r = s.request("export/read", {"token": ex["token"], "offset": off, "length": 8})
        chunk = base64.b64decode(r["data"])
        got += chunk
        off += len(chunk)
        if r["eof"]:
            break
    expect(hashlib.sha256(got).hexdigest() == ex["sha256"], "sha256 of the exported bytes")
    s.request("export/close", {"token": ex["token"]})

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
