"""sgclient - a small protocol v4 client for the end-to-end suite.

It starts `sandgate serve` with pipes, writes requests, and reads every line
the gateway writes on a reader thread.  Replies are matched to requests by
id; `process/event`s are collected in arrival order.  Every message gets a
sequence number and an arrival time, so tests can assert on ordering
("the reply is written before its `started` event") and on latency.

The client is also a protocol checker: a line that is not a JSON object, a
reply without exactly one of `data`/`error`, an `error` that is not a
string, an event that carries an `id`, or a second reply to one request is
recorded in `Gateway.violations`; `GatewayTestCase` fails a test whose
gateway saw any.

Configuration comes from the environment, so the same suite runs unchanged
against every profile (README.md):

  SANDGATE_BIN            the binary (required)
  SANDGATE_TEST_CONFIG    a config file, passed as --config
  SANDGATE_TEST_PROFILE   a profile name, passed as --profile
  SANDGATE_TEST_ROOT      binding.root (default /workspace)
  SANDGATE_TEST_SLACK     multiplier for latency bounds (default 1; raise it
                          for remote backends with long round trips)

Python 3 standard library only.
"""

import base64
import collections
import io
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

BIN = os.environ.get("SANDGATE_BIN", "")
CONFIG = os.environ.get("SANDGATE_TEST_CONFIG") or None
PROFILE = os.environ.get("SANDGATE_TEST_PROFILE") or None
ROOT = os.environ.get("SANDGATE_TEST_ROOT") or "/workspace"
SLACK = float(os.environ.get("SANDGATE_TEST_SLACK") or "1")

# Set in every gateway's own environment; commands must never see it
# (docs/protocol.md section 7.7, run_command).
CANARY_NAME = "SG_E2E_CANARY_SECRET"

# Reply timeout for ordinary requests: generous, because a remote backend's
# first call may be slow; a test that expects speed measures it itself.
DEFAULT_TIMEOUT = 60.0

MiB = 1024 * 1024

METHODS = {
    "initialize", "execute", "cancel",
    "process/start", "process/list", "process/get", "process/read",
    "process/stop",
    "export/open", "export/read", "export/close",
}

TOOLS = {
    "read_file", "write_file", "edit_file", "list_dir", "glob", "grep",
    "run_command", "git", "delete_path", "move_path", "make_dir",
    "stat_path", "present_artifact",
}

SEC = 1_000_000_000  # nanoseconds, for process/read Wait and MinDwell


def code_of(error):
    """The stable code of an error string: the word before the first colon."""
    if not isinstance(error, str):
        return None
    head, sep, _ = error.partition(":")
    return head.strip() if sep else None


def unique(prefix="e2e"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


class Marker:
    """A sleeper whose command line is unique to this call.

    `sleep <secs>` names the process; secs is just under 30 s, so a leaked
    sleeper dies on its own soon.  `needle` is a substring of its command
    line; `regex` matches that command line but not itself (the bracket
    trick), for scans run from a shell inside the environment.
    """

    def __init__(self):
        frac = "%06d" % random.randrange(10**6)
        self.secs = "29.%s" % frac
        # The trailing space ends the argument: command lines are read
        # with their NUL separators turned into spaces.
        self.needle = "sleep %s " % self.secs
        self.regex = "sleep 29[.]%s " % frac
        self.command = "sleep %s" % self.secs


def cgroup_writable():
    """Whether this user can make a cgroup where sandgate would: the same
    question the local backend asks, answered independently."""
    for hier in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        probe = os.path.join(hier, "sg-e2e-probe-%d" % os.getpid())
        try:
            os.mkdir(probe)
        except OSError:
            continue
        os.rmdir(probe)
        if hier == "/sys/fs/cgroup" and not os.path.exists(
                os.path.join(hier, "cgroup.controllers")):
            continue
        return True
    return False


def host_processes_matching(needle):
    """Pids on this host whose command line contains `needle` (a substring).

    Only meaningful when the environment runs on this host (the local
    backend): every pid namespace is visible from the host's /proc.
    """
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmd:
            try:
                with open("/proc/%s/stat" % name) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":  # a zombie is dead; only its parent has not reaped it
                found.append(int(name))
    return found


def live_checker(gw):
    """A function(marker) -> number of live processes carrying the marker.

    Chosen by observation, with a positive control: a sleeper is started
    and must be seen before the method is trusted to report "none".  On the
    local backend the host's /proc sees every pid namespace; elsewhere a
    /proc scan through run_command is used.  None when neither can see the
    control (then "the process is gone" cannot be checked on this backend).
    """
    cached = getattr(gw, "_live_checker", Ellipsis)
    if cached is not Ellipsis:
        return cached
    m = Marker()
    rec = gw.start(command=m.command)
    found = None
    try:
        deadline = time.monotonic() + 10
        while found is None and time.monotonic() < deadline:
            if gw.backend == "local" and host_processes_matching(m.needle):
                found = lambda mk: len(host_processes_matching(mk.needle))
            elif gw.env_count_matching(m.regex) > 0:
                found = lambda mk: gw.env_count_matching(mk.regex)
            else:
                time.sleep(0.1)
    finally:
        gw.ok("process/stop", {"id": rec["id"], "grace_ms": 0})
    gw._live_checker = found
    return found


def wait_gone(count_fn, marker, timeout=5.0):
    """True once no live process carries the marker (polled up to timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        if count_fn(marker) == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


class Msg(dict):
    """One line from the gateway, decoded, with `seq` and `t` (monotonic)."""

    seq = 0
    t = 0.0

    @property
    def is_error(self):
        return "error" in self

    @property
    def code(self):
        return code_of(self.get("error"))


class GatewayExited(AssertionError):
    pass


class Gateway:
    """One `sandgate serve` process and its connection."""

    def __init__(self, state_dir=None, extra_args=(), env_extra=None,
                 budget_ms=None, config=CONFIG, profile=PROFILE, reader=True):
        if not BIN:
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        self._own_state = state_dir is None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="sg-e2e-state-")
        self._xdg = tempfile.mkdtemp(prefix="sg-e2e-xdg-")
        self.canary = "canary-" + uuid.uuid4().hex
        argv = [BIN, "serve", "--state-dir", self.state_dir]
        if config:
            argv += ["--config", config]
        if profile:
            argv += ["--profile", profile]
        if budget_ms is not None:
            argv += ["--shutdown-budget-ms", str(budget_ms)]
        argv += list(extra_args)
        env = dict(os.environ)
        # With no test config the embedded local profile must apply: hide
        # any config file this machine's user may have.
        env.pop("SANDGATE_CONFIG", None)
        env["XDG_CONFIG_HOME"] = self._xdg
        env[CANARY_NAME] = self.canary
        env.update(env_extra or {})
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, bufsize=0)
        self.started_at = time.monotonic()
        self.token = None
        self.binding = None
        self.init_reply = None
        self.violations = []
        self.messages = []   # every decoded message, in arrival order
        self.events = []     # process/event messages
        self.raw_lines = 0
        self._cond = threading.Condition()
        self._replies = collections.defaultdict(collections.deque)
        self._sent = collections.Counter()
        self._answered = collections.Counter()
        self._seq = 0
        self._eof = False
        self._next_id = 1000
        self._wlock = threading.Lock()
        self._stderr = bytearray()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        if reader:
            self._reader.start()
        self._ereader = threading.Thread(target=self._read_stderr, daemon=True)
        self._ereader.start()

    # ---- reading -------------------------------------------------------

    def _read_stdout(self):
        # The pipe is unbuffered (bufsize=0) for the writes; readline on
        # it would make one read(2) per byte, minutes for a 4 MiB export
        # reply, so this thread reads through its own buffer.
        f = io.BufferedReader(self.proc.stdout, 1 << 16)
        while True:
            try:
                line = f.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                break
            self.raw_lines += 1
            self._take(line)
        try:
            f.detach()  # the pipe stays Popen's to close
        except ValueError:
            pass
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self):
        while True:
            try:
                chunk = self.proc.stderr.read(65536)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                break
            with self._cond:
                # Keep the head and the tail: enough to explain a failure.
                self._stderr += chunk
                if len(self._stderr) > 256 * 1024:
                    del self._stderr[64 * 1024:len(self._stderr) - 128 * 1024]

    def _violate(self, what):
        self.violations.append(what)

    def _take(self, line):
        now = time.monotonic()
        if not line.endswith(b"\n"):
            self._violate("unterminated line at EOF: %r" % line[:200])
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            self._violate("not JSON (%s): %r" % (e, line[:200]))
            return
        if not isinstance(obj, dict):
            self._violate("not an object: %r" % line[:200])
            return
        msg = Msg(obj)
        with self._cond:
            self._seq += 1
            msg.seq = self._seq
            msg.t = now
            self.messages.append(msg)
            if "method" in msg:
                if msg["method"] == "process/event":
                    if "id" in msg:
                        self._violate("event carries an id: %r" % line[:200])
                    if not isinstance(msg.get("data"), dict):
                        self._violate("event without data object: %r" % line[:200])
                    self.events.append(msg)
                elif msg["method"] == "invokeTool":
                    if not str(msg.get("id", "")).startswith("sg-"):
                        self._violate("callback id without sg- prefix: %r" % line[:200])
                else:
                    self._violate("unexpected method from gateway: %r" % line[:200])
            elif "id" in msg:
                if ("data" in msg) == ("error" in msg):
                    self._violate("reply needs exactly one of data/error: %r" % line[:200])
                if "error" in msg and not isinstance(msg["error"], str):
                    self._violate("error is not a string: %r" % line[:200])
                if "error" in msg and code_of(msg["error"]) is None:
                    self._violate("error without a code: %r" % msg["error"][:200])
                key = json.dumps(msg["id"])
                self._answered[key] += 1
                if self._answered[key] > self._sent[key]:
                    self._violate("reply to an id not in flight: %r" % line[:200])
                self._replies[key].append(msg)
            else:
                self._violate("neither id nor method: %r" % line[:200])
            self._cond.notify_all()

    # ---- writing -------------------------------------------------------

    def send_raw(self, data):
        """Write bytes as they are; False when the gateway closed its stdin."""
        with self._wlock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
                return True
            except (BrokenPipeError, ValueError, OSError):
                return False

    def new_id(self):
        self._next_id += 1
        return self._next_id

    def request(self, method, data=None, token=Ellipsis, id=None, extra=None):
        """Send one request; returns its id.  token=None omits the field."""
        rid = self.new_id() if id is None else id
        frame = {"id": rid, "method": method}
        tok = self.token if token is Ellipsis else token
        if tok is not None:
            frame["token"] = tok
        if data is not None:
            frame["data"] = data
        if extra:
            frame.update(extra)
        with self._cond:
            self._sent[json.dumps(rid)] += 1
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        if not self.send_raw(line.encode("utf-8") + b"\n"):
            time.sleep(0.2)  # let the stderr reader catch the reason
            raise GatewayExited("gateway closed its stdin before %s; stderr tail:\n%s"
                                % (method, self.stderr_text()[-3000:]))
        return rid

    def expect_sent(self, rid):
        """Count a request written with send_raw, so its reply is legal."""
        with self._cond:
            self._sent[json.dumps(rid)] += 1

    # ---- replies and events ---------------------------------------------

    def wait_reply(self, rid, timeout=DEFAULT_TIMEOUT):
        key = json.dumps(rid)
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._replies[key]:
                left = deadline - time.monotonic()
                if self._eof:
                    raise GatewayExited(
                        "gateway closed stdout without replying to id %s; stderr:\n%s"
                        % (key, self.stderr_text()[-3000:]))
                if left <= 0:
                    raise AssertionError(
                        "no reply to id %s within %.1f s; stderr tail:\n%s"
                        % (key, timeout, self.stderr_text()[-3000:]))
                self._cond.wait(min(left, 0.5))
            return self._replies[key].popleft()

    def read_line_sync(self, timeout=DEFAULT_TIMEOUT):
        """Without the reader thread (reader=False): the next message, decoded."""
        box = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()),
                             daemon=True)
        t.start()
        t.join(timeout)
        if not box:
            raise AssertionError("no line from the gateway within %.1f s" % timeout)
        if not box[0]:
            raise GatewayExited("gateway closed stdout")
        self._take(box[0])
        return self.messages[-1]

    def close_stdout(self):
        """Close our end of the gateway's stdout: its next write fails."""
        self.proc.stdout.close()

    def has_reply(self, rid):
        with self._cond:
            return bool(self._replies[json.dumps(rid)])

    def call(self, method, data=None, timeout=DEFAULT_TIMEOUT, **kw):
        return self.wait_reply(self.request(method, data, **kw), timeout)

    def ok(self, method, data=None, timeout=DEFAULT_TIMEOUT, **kw):
        r = self.call(method, data, timeout, **kw)
        if "error" in r:
            raise AssertionError("%s failed: %s" % (method, r["error"]))
        return r.get("data")

    def fail(self, method, data=None, timeout=DEFAULT_TIMEOUT, **kw):
        """The error string of a request that must fail."""
        r = self.call(method, data, timeout, **kw)
        if "error" not in r:
            raise AssertionError("%s succeeded, expected an error: %s"
                                 % (method, json.dumps(r.get("data"))[:500]))
        return r["error"]

    def wait_event(self, pred, timeout=DEFAULT_TIMEOUT, what="event"):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for ev in self.events:
                    if pred(ev):
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "no %s within %.1f s; events so far: %s"
                        % (what, timeout, json.dumps(self.events)[:2000]))
                if self._eof:
                    raise GatewayExited("gateway exited while waiting for %s" % what)
                self._cond.wait(min(left, 0.5))

    def events_for(self, pid):
        with self._cond:
            return [e for e in self.events
                    if ((e.get("data") or {}).get("Process") or {}).get("id") == pid]

    # ---- protocol helpers -----------------------------------------------

    def make_binding(self, **over):
        b = {"version": 4, "root": ROOT, "session": unique("sess"),
             "identity": unique("ident"), "remove_workspace_on_exit": True}
        for k, v in over.items():
            if v is None:
                b.pop(k, None)
            else:
                b[k] = v
        return b

    def initialize(self, token=None, timeout=DEFAULT_TIMEOUT * 3, **over):
        """Initialize (binding fields overridable; None drops one); returns data."""
        token = token or "tok-" + uuid.uuid4().hex
        binding = self.make_binding(**over)
        r = self.call("initialize", binding, timeout=timeout, token=token)
        if "error" in r:
            raise AssertionError("initialize failed: %s\nstderr tail:\n%s"
                                 % (r["error"], self.stderr_text()[-3000:]))
        self.token = token
        self.binding = binding
        self.init_reply = r["data"]
        return r["data"]

    @property
    def session(self):
        return self.binding["session"]

    @property
    def backend(self):
        return ((self.init_reply or {}).get("environment") or {}).get("backend")

    @property
    def facts(self):
        return ((self.init_reply or {}).get("environment") or {}).get("facts") or {}

    def execute_req(self, tool, args, mode=None, raw_arguments=None, **kw):
        """Send an execute; returns its id.  args is encoded as a JSON string."""
        call = {"id": unique("call"),
                "arguments": raw_arguments if raw_arguments is not None
                else json.dumps(args)}
        data = {"tool": tool, "call": call,
                "executor": {"thread_id": self.session if self.binding else "t",
                             "agent": "e2e"}}
        if mode is not None:
            data["permission_mode"] = mode
        return self.request("execute", data, **kw)

    def execute(self, tool, args, mode=None, timeout=DEFAULT_TIMEOUT, **kw):
        """The reply message of one execute (data or error)."""
        return self.wait_reply(self.execute_req(tool, args, mode, **kw), timeout)

    def tool(self, tool, args, mode=None, timeout=DEFAULT_TIMEOUT, **kw):
        """The ToolResult of an execute that must not be a protocol error."""
        r = self.execute(tool, args, mode, timeout, **kw)
        if "error" in r:
            raise AssertionError("execute %s %s: protocol error %s"
                                 % (tool, json.dumps(args)[:300], r["error"]))
        res = r["data"]
        if not isinstance(res, dict) or not isinstance(res.get("content"), str) \
                or not isinstance(res.get("is_error"), bool):
            raise AssertionError("not a ToolResult: %s" % json.dumps(res)[:500])
        return res

    def tool_ok(self, tool, args, mode=None, **kw):
        res = self.tool(tool, args, mode, **kw)
        if res["is_error"]:
            raise AssertionError("%s %s: is_error: %s"
                                 % (tool, json.dumps(args)[:300], res["content"][:1000]))
        return res

    def tool_error(self, tool, args, mode=None, **kw):
        """The protocol error string of an execute that must be refused."""
        r = self.execute(tool, args, mode, **kw)
        if "error" not in r:
            raise AssertionError("execute %s %s: expected a protocol error, got %s"
                                 % (tool, json.dumps(args)[:300],
                                    json.dumps(r.get("data"))[:500]))
        return r["error"]

    def sh(self, command, mode=None, **args):
        """run_command with a shell string; the ToolResult."""
        a = {"command": command}
        a.update(args)
        return self.tool("run_command", a, mode)

    def sh_ok(self, command, mode=None, **args):
        res = self.sh(command, mode, **args)
        if res["is_error"] or res["metadata"].get("exit_code") != 0:
            raise AssertionError("command %r failed: %s %s"
                                 % (command, json.dumps(res["metadata"]),
                                    res["content"][:1000]))
        return res["content"]

    def write(self, path, content):
        return self.tool_ok("write_file", {"path": path, "content": content})

    def env_count_matching(self, regex):
        """Processes inside the environment whose command line matches regex.

        Scans /proc with plain shell tools (no pgrep needed).  The pattern
        should not match itself (use the bracket trick, marker_seconds()).
        """
        out = self.sh_ok(
            "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\000' ' ' "
            "| grep -o %s | wc -l" % shell_quote(regex))
        return int(out.strip() or "0")

    # ---- processes -----------------------------------------------------

    def start(self, command=None, argv=None, **kw):
        data = dict(kw)
        if command is not None:
            data["command"] = command
        if argv is not None:
            data["argv"] = argv
        return self.ok("process/start", data)

    def read(self, pid, offset=0, max_bytes=0, wait_ns=0, min_dwell_ns=0,
             timeout=DEFAULT_TIMEOUT):
        return self.ok("process/read", {"id": pid, "OffsetBytes": offset,
                                        "MaxBytes": max_bytes, "Wait": wait_ns,
                                        "MinDwell": min_dwell_ns}, timeout)

    def wait_ended(self, pid, timeout=30.0):
        """Poll until the process has ended; its final record."""
        deadline = time.monotonic() + timeout
        while True:
            rec = self.ok("process/get", {"id": pid})
            if rec.get("status") != "running":
                return rec
            if time.monotonic() > deadline:
                raise AssertionError("process %s still running after %.1f s: %s"
                                     % (pid, timeout, json.dumps(rec)))
            time.sleep(0.05)

    def read_all(self, pid, timeout=30.0):
        """All output of a process that will end, read in windows.  (text, last)"""
        deadline = time.monotonic() + timeout
        off = 0
        parts = []
        while True:
            r = self.read(pid, offset=off, wait_ns=SEC)
            parts.append(r["Output"])
            off = r["EndOffset"]
            ended = r["Process"]["status"] != "running"
            if ended and off >= r["TotalBytes"]:
                return "".join(parts), r
            if time.monotonic() > deadline:
                raise AssertionError("process %s output not complete after %.1f s"
                                     % (pid, timeout))

    # ---- ending ----------------------------------------------------------

    def stderr_text(self):
        with self._cond:
            return self._stderr.decode("utf-8", "replace")

    def wait_stderr(self, words, timeout=15):
        """Wait until words appear on the gateway's stderr (a progress line)."""
        deadline = time.monotonic() + timeout
        while words not in self.stderr_text():
            if time.monotonic() > deadline:
                raise AssertionError("never saw %r on stderr: %s"
                                     % (words, self.stderr_text()[-2000:]))
            time.sleep(0.02)

    def close_stdin(self):
        with self._wlock:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def wait_exit(self, timeout=30.0):
        """(exit code, stderr) once the gateway exits; fails after timeout."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("gateway still running %.1f s later; stderr tail:\n%s"
                                 % (timeout, self.stderr_text()[-3000:]))
        if self._reader.is_alive():
            self._reader.join(5)
        self._ereader.join(5)
        return rc, self.stderr_text()

    def shutdown(self, timeout=30.0):
        """EOF on stdin, then wait: (exit code, stderr, seconds taken)."""
        t0 = time.monotonic()
        self.close_stdin()
        rc, err = self.wait_exit(timeout)
        return rc, err, time.monotonic() - t0

    def running(self):
        return self.proc.poll() is None

    def cleanup(self):
        """Best effort, for tearDown: EOF, a bounded wait, then SIGKILL."""
        if self.proc.poll() is None:
            self.close_stdin()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self._xdg, ignore_errors=True)
        if self._own_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def proc_status(pid, field):
    """The number a /proc/PID/status line `field:` holds (VmRSS in KiB,
    Threads...), or None once the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def registry_records(state_dir):
    """The state registry's records under state_dir, parsed, by file name."""
    reg = os.path.join(state_dir, "registry")
    out = []
    for name in sorted(os.listdir(reg)) if os.path.isdir(reg) else []:
        if name.endswith(".json"):
            with open(os.path.join(reg, name)) as f:
                out.append(json.load(f))
    return out


# Who owns a host_workspace the tests make for commands to write: local
# commands never run as root, and run as the workspace's owner, so where
# the tests run as root the tree is given to an ordinary user.
WORKSPACE_OWNER = 60000


def give_to_commands(path):
    """chown -R path to WORKSPACE_OWNER when the tests run as root."""
    if os.geteuid() != 0:
        return
    for top, dirs, files in os.walk(path):
        os.lchown(top, WORKSPACE_OWNER, WORKSPACE_OWNER)
        for name in dirs + files:
            os.lchown(os.path.join(top, name), WORKSPACE_OWNER, WORKSPACE_OWNER)


def shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def b64(data):
    return base64.b64encode(data).decode("ascii")


class GatewayTestCase(unittest.TestCase):
    """Base class: gateways started here are cleaned up and protocol-checked."""

    # A class-wide gateway, initialized once, for tests that do not care
    # about the connection's lifecycle (setUpClass starts it when True).
    shared_gateway = False
    shared_binding = {}

    @classmethod
    def setUpClass(cls):
        cls.gw = None
        if cls.shared_gateway:
            cls.gw = Gateway()
            try:
                cls.gw.initialize(**cls.shared_binding)
            except BaseException:
                cls.gw.cleanup()
                raise

    @classmethod
    def tearDownClass(cls):
        if cls.gw is not None:
            gw = cls.gw
            gw.cleanup()
            if gw.violations:
                raise AssertionError("protocol violations on the shared gateway: %s"
                                     % gw.violations)

    def gateway(self, init=True, **kw):
        """A fresh gateway for this test (initialized unless init=False)."""
        binding = kw.pop("binding", {})
        gw = Gateway(**kw)
        self.addCleanup(self._finish, gw)
        if init:
            gw.initialize(**binding)
        return gw

    def _finish(self, gw):
        gw.cleanup()
        self.assertEqual(gw.violations, [], "protocol violations")

    def tearDown(self):
        if getattr(self, "gw", None) is not None and self.gw.violations:
            v = list(self.gw.violations)
            del self.gw.violations[:]
            self.fail("protocol violations: %s" % v)

    def assertCode(self, error, code, msg=None):
        """error (a string) carries the stable code `code`."""
        self.assertIsInstance(error, str, msg)
        got = code_of(error)
        if isinstance(code, (tuple, list, set)):
            self.assertIn(got, code, "%s: %r" % (msg or "error code", error))
        else:
            self.assertEqual(got, code, "%s: %r" % (msg or "error code", error))

    def assertReplyCode(self, reply, code, msg=None):
        self.assertIn("error", reply, "%s: expected an error, got %s"
                      % (msg or "reply", json.dumps(reply.get("data"))[:500]))
        self.assertCode(reply["error"], code, msg)
