"""sgclient - the end-to-end suite's client, speaking the host's wire.

It starts `sandgate serve` with pipes and talks to it the way the agent host
(Wuu) does: requests `{"token","id","method","data"}` with string ids from a
decimal counter ("1", "2", ...), a 64-hex token on every frame, tools through
`execute` with `data.call.name` and `call.arguments` as a JSON string,
`cancel` carrying the target's id and expecting no reply, and `callback`
requests answering run_code's `tool` frames.  A reader thread takes every
line the gateway writes; replies are matched to requests by id, process
events are collected in arrival order.  Every message gets a sequence number
and an arrival time, so tests can assert on ordering ("the reply is written
before its `started` event") and on latency.

The client is also a protocol checker, as strict as the host's own decoder
and stricter where the host's worker is always exact.  Every line must be
one JSON object `{method?, parent_id?, id, data?, error?}` (no other key),
at most 16 MiB, newline-terminated, and one of:
  - a reply: no method or parent_id, exactly one of data/error, the error a
    non-empty "<code>: <sentence>" string, the id a string (or the request's
    own JSON type echoed) of a request in flight, answered once;
  - a process event: {"method":"process","id":"","data":{"Type","Cause",
    "Process"}} with the host's types and causes and a record with an id;
  - a tool callback: {"method":"tool","parent_id":<a run_code in flight, or
    an execute: apply_patch's then_run>,"id":<fresh string>,"data":<ToolCall>};
    without a tool_handler, an execute's is answered as the host's Execute
    answers it ("parent execution scope is closed").
Anything else is recorded in `Gateway.violations`; `GatewayTestCase` fails a
test whose gateway saw any.  (A numeric id where the host sent a string is a
terminal transport failure in the host: a violation here.)

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
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

from hostdriver import skip_if_read_only_refused

BIN = os.environ.get("SANDGATE_BIN", "")
CONFIG = os.environ.get("SANDGATE_TEST_CONFIG") or None
PROFILE = os.environ.get("SANDGATE_TEST_PROFILE") or None
ROOT = os.environ.get("SANDGATE_TEST_ROOT") or "/workspace"
SLACK = float(os.environ.get("SANDGATE_TEST_SLACK") or "1")
# The permission mode of a call that names none: an environment that cannot
# confine commands (gVisor has no Landlock) runs the suite unconfined.
MODE = os.environ.get("SANDGATE_TEST_MODE") or "standard"

# Set in every gateway's own environment; commands must never see it
# (protocol: a command's environment is the host's non-interactive
# variables, binding.environment and forward_env, never sandgate's own).
CANARY_NAME = "SG_E2E_CANARY_SECRET"

# Reply timeout for ordinary requests: generous, because a remote backend's
# first call may be slow; a test that expects speed measures it itself.
DEFAULT_TIMEOUT = 60.0

MiB = 1024 * 1024
MAX_FRAME = 16 * MiB  # a frame, newline included

# The process methods (protocol-v4 section 4): the host's thirteen and
# version 4's process/start.
PROCESS_METHODS = {
    "process/start", "process/list", "process/get", "process/read",
    "process/write", "process/resize", "process/stop",
    "process/input_available", "process/completion_pending",
    "process/completion_delivered", "process/recheck",
    "process/completion_mode", "process/recheck_delivered",
    "process/cleanup",
}

# What the initialize reply's `methods` lists (sections 3, 4 and 6): the
# requests a host calls for a reply.  `cancel` and `callback` are frames
# with no reply of their own, so they are not listed; run_code is listed
# only when it is served whole (section 7).
METHODS = {"initialize", "execute", "export/read", "export/close"} | PROCESS_METHODS

# The host's eleven workspace tools (section 3); any other name is refused.
TOOLS = {
    "read_file", "write_file", "edit_file", "apply_patch", "list_files",
    "grep", "glob", "bash", "process", "git", "present_artifact",
}

# The process event's Type and Cause values, and a record's statuses.
EVENT_TYPES = {"started", "updated", "failed", "stopped", "cleaned_up",
               "recheck_due"}
EVENT_CAUSES = {"natural_exit", "requested_stop", ""}
LIVE_STATUSES = {"starting", "running", "stopping"}
END_STATUSES = {"stopped", "failed"}

# The keys of the host's Response struct: nothing else may appear.
FRAME_KEYS = {"method", "parent_id", "id", "data", "error"}
# The keys of the host's ToolResult.
RESULT_KEYS = {"content", "structured_content", "meta", "is_error", "activity"}
MAX_PARTS = 128

SEC = 1_000_000_000  # nanoseconds, for process/read Wait and MinDwell


def code_of(error):
    """The stable code of an error string: the word before the first colon."""
    if not isinstance(error, str):
        return None
    head, sep, _ = error.partition(":")
    return head.strip() if sep else None


def unique(prefix="e2e"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def host_token():
    """A token as the host makes one: 32 random bytes, hex."""
    return secrets.token_hex(32)


def host_env(profile, session=None, identity=None, state=None):
    """The variables the host gives a command backend (protocol section 2):
    its profile as JSON in WUU_EXECUTION_PROFILE, and, when given, the
    session, identity and state directory.  For Gateway(env_extra=...)."""
    env = {"WUU_EXECUTION_PROFILE": json.dumps(profile)}
    for name, value in (("WUU_EXECUTION_SESSION", session),
                        ("WUU_EXECUTION_ID", identity),
                        ("WUU_EXECUTION_STATE", state)):
        if value is not None:
            env[name] = value
    return env


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
    (bash run_in_background) and must be seen before the method is trusted
    to report "none".  On the local backend the host's /proc sees every pid
    namespace; elsewhere a /proc scan through bash is used.  None when
    neither can see the control (then "the process is gone" cannot be
    checked on this backend).
    """
    cached = getattr(gw, "_live_checker", Ellipsis)
    if cached is not Ellipsis:
        return cached
    m = Marker()
    rec = gw.start(m.command)
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
        gw.stop(rec["id"])
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
    """One line from the gateway, decoded, with `seq` and `t` (monotonic).

    Process events are kept as their data ({"Type","Cause","Process"}) in a
    Msg too, so they carry `seq` and `t` as well.
    """

    seq = 0
    t = 0.0

    @property
    def is_error(self):
        return "error" in self

    @property
    def code(self):
        return code_of(self.get("error"))


class View(dict):
    """A tool's JSON view (the text of its single text part), with the
    whole ToolResult in `result` and its structured_content in
    `structured` (None when absent)."""

    result = None
    structured = None


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
        self.messages = []    # every decoded message, in arrival order
        self.events = []      # process event data, in arrival order
        self.tool_calls = []  # run_code `tool` frames, in arrival order
        # tool_handler(frame) -> (ToolResult, None) or (None, "error text"):
        # when set, every `tool` frame is answered with a `callback` request
        # (on a thread of its own, so the reader never blocks).
        self.tool_handler = None
        self.raw_lines = 0
        self._cond = threading.Condition()
        self._replies = collections.defaultdict(collections.deque)
        self._sent = collections.Counter()
        self._answered = collections.Counter()
        self._methods = {}        # request key -> method, for parent_id checks
        self._tool_ids = set()
        self._seq = 0
        self._eof = False
        self._next_id = 0
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
        if len(line) > MAX_FRAME:
            self._violate("frame of %d bytes, over the 16 MiB limit" % len(line))
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
            self._check(msg, line[:200])
            self._cond.notify_all()

    def _check(self, msg, head):
        """Classify one frame (under _cond) and record what is wrong."""
        extra = set(msg) - FRAME_KEYS
        if extra:
            self._violate("keys outside the host's frame %s: %r" % (sorted(extra), head))
        if "id" not in msg:
            self._violate("frame without an id: %r" % head)
            return
        for k in ("method", "parent_id", "error"):
            if k in msg and not isinstance(msg[k], str):
                self._violate("%s is not a string: %r" % (k, head))
                return
        method = msg.get("method")
        if method == "process":
            self._check_event(msg, head)
        elif method == "tool":
            self._check_tool(msg, head)
        elif method is not None:
            self._violate("unexpected method from the gateway: %r" % head)
        else:
            self._check_reply(msg, head)

    def _check_event(self, msg, head):
        if msg["id"] != "" or "parent_id" in msg or "error" in msg:
            self._violate("event with an id, parent_id or error: %r" % head)
        d = msg.get("data")
        if not isinstance(d, dict) or set(d) != {"Type", "Cause", "Process"}:
            self._violate("event data is not {Type,Cause,Process}: %r" % head)
            return
        if d["Type"] not in EVENT_TYPES or d["Cause"] not in EVENT_CAUSES:
            self._violate("event Type/Cause not the host's: %r" % head)
        rec = d["Process"]
        if not isinstance(rec, dict) or not str(rec.get("id", "")).startswith("proc-"):
            self._violate("event without a process record: %r" % head)
        ev = Msg(d)
        ev.seq, ev.t = msg.seq, msg.t
        self.events.append(ev)

    def _check_tool(self, msg, head):
        parent = msg.get("parent_id")
        key = json.dumps(parent)
        live = self._sent[key] > self._answered[key]
        # run_code's nested calls, and apply_patch's then_run (an execute).
        if not isinstance(parent, str) or \
                self._methods.get(key) not in ("run_code", "execute") or not live:
            self._violate("tool frame outside a live run_code or execute: %r" % head)
        tid = msg["id"]
        if not isinstance(tid, str) or not tid or tid in self._tool_ids:
            self._violate("tool frame id not fresh: %r" % head)
        self._tool_ids.add(tid)
        call = msg.get("data")
        if "error" in msg or not isinstance(call, dict) or \
                not isinstance(call.get("name"), str) or \
                not isinstance(call.get("arguments", ""), str):
            self._violate("tool frame data is not a ToolCall: %r" % head)
        self.tool_calls.append(msg)
        if self.tool_handler is not None:
            threading.Thread(target=self._answer_tool, args=(msg,), daemon=True).start()
        elif self._methods.get(key) == "execute":
            # The host's Execute registers no handler for nested calls.
            threading.Thread(target=self.answer_tool, args=(msg,),
                             kwargs={"error": "parent execution scope is closed"},
                             daemon=True).start()

    def _check_reply(self, msg, head):
        if "parent_id" in msg:
            self._violate("reply with a parent_id: %r" % head)
        if ("data" in msg) == ("error" in msg):
            self._violate("reply needs exactly one of data/error: %r" % head)
        if "error" in msg:
            if not msg["error"]:
                self._violate("empty error: %r" % head)
            elif code_of(msg["error"]) is None:
                self._violate("error without a code: %r" % msg["error"][:200])
        key = json.dumps(msg["id"])
        if not isinstance(msg["id"], str) and self._sent[key] == 0:
            # The host decodes id as a string: anything else kills it.
            self._violate("reply id is not a string: %r" % head)
        self._answered[key] += 1
        if self._answered[key] > self._sent[key]:
            self._violate("reply to an id not in flight: %r" % head)
        self._replies[key].append(msg)

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
        """The next id, as the host makes them: a decimal counter, a string."""
        with self._cond:
            self._next_id += 1
            return str(self._next_id)

    def _frame(self, method, data, token, id, extra):
        frame = {}
        tok = self.token if token is Ellipsis else token
        if tok is not None:
            frame["token"] = tok
        frame["id"] = id
        frame["method"] = method
        if data is not None:
            frame["data"] = data
        if extra:
            frame.update(extra)
        return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))

    def _write_line(self, line, what):
        if not self.send_raw(line.encode("utf-8") + b"\n"):
            time.sleep(0.2)  # let the stderr reader catch the reason
            raise GatewayExited("gateway closed its stdin before %s; stderr tail:\n%s"
                                % (what, self.stderr_text()[-3000:]))

    def request(self, method, data=None, token=Ellipsis, id=None, extra=None):
        """Send one request; returns its id (a string unless given).

        token=None omits the field; extra adds keys to the frame."""
        rid = self.new_id() if id is None else id
        line = self._frame(method, data, token, rid, extra)
        with self._cond:
            self._sent[json.dumps(rid)] += 1
            self._methods[json.dumps(rid)] = method
        self._write_line(line, method)
        return rid

    def expect_sent(self, rid):
        """Count a request written with send_raw, so its reply is legal."""
        with self._cond:
            self._sent[json.dumps(rid)] += 1

    def cancel(self, rid, token=Ellipsis):
        """The host's cancel: the target's id, no data, no reply expected.
        The target still answers once, usually with an error."""
        self._write_line(self._frame("cancel", None, token, rid, None), "cancel")

    def answer_tool(self, frame, result=None, error=None, token=Ellipsis):
        """Answer a run_code `tool` frame with the host's `callback` request
        (the frame's id, data {"id", "data"|"error"}); it gets no reply."""
        inner = {"id": frame["id"]}
        if error is not None:
            inner["error"] = error
        else:
            inner["data"] = result
        self._write_line(self._frame("callback", inner, token, frame["id"], None),
                         "callback")

    def _answer_tool(self, frame):
        try:
            result, error = self.tool_handler(frame)
        except Exception as e:  # the handler's failure is the tool's error
            result, error = None, "tool handler failed: %s" % e
        try:
            self.answer_tool(frame, result, error)
        except GatewayExited:
            pass

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
        """The first event data ({"Type","Cause","Process"}) satisfying pred."""
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
        """This process's events, in arrival order."""
        with self._cond:
            return [e for e in self.events
                    if (e.get("Process") or {}).get("id") == pid]

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
        """Initialize (binding fields overridable; None drops one); returns data.

        The token is the host's kind (64 hex) unless given."""
        token = token or host_token()
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

    def execute_req(self, tool, args, mode=None, actor=None, attribution=False,
                    raw_arguments=None, call_extra=None, **kw):
        """Send an execute the way the host does; returns its id.

        args is encoded as a JSON string (raw_arguments, when given, is sent
        as it is); actor defaults to the session (the main agent)."""
        call = {"id": unique("call"), "name": tool,
                "arguments": raw_arguments if raw_arguments is not None
                else json.dumps(args),
                "kind": "function"}
        if call_extra:
            call.update(call_extra)
        data = {"call": call,
                "permission_mode": MODE if mode is None else mode,
                "actor": actor if actor is not None
                else (self.session if self.binding else "actor"),
                "git_attribution_enabled": bool(attribution)}
        return self.request("execute", data, **kw)

    def execute(self, tool, args, mode=None, timeout=DEFAULT_TIMEOUT, **kw):
        """The reply message of one execute (data or error)."""
        r = self.wait_reply(self.execute_req(tool, args, mode, **kw), timeout)
        if "error" in r:
            skip_if_read_only_refused(r["error"], self.facts)
        return r

    def tool(self, tool, args, mode=None, timeout=DEFAULT_TIMEOUT, **kw):
        """The ToolResult of an execute that must not fail (an error reply
        is a failed tool)."""
        r = self.execute(tool, args, mode, timeout, **kw)
        if "error" in r:
            raise AssertionError("execute %s %s failed: %s"
                                 % (tool, json.dumps(args)[:300], r["error"]))
        check_result(r["data"])
        return r["data"]

    def tool_ok(self, tool, args, mode=None, **kw):
        """tool(), also refusing a result marked is_error (the host's worker
        reports failures as error replies, so is_error is never expected)."""
        res = self.tool(tool, args, mode, **kw)
        if res.get("is_error"):
            raise AssertionError("%s %s: is_error: %s"
                                 % (tool, json.dumps(args)[:300], json.dumps(res)[:1000]))
        return res

    def view(self, tool, args, mode=None, **kw):
        """The tool's JSON view: json.loads of the result's single text part
        (a View, with .result and .structured)."""
        return view_of(self.tool_ok(tool, args, mode, **kw))

    def tool_error(self, tool, args, mode=None, **kw):
        """The error string of an execute that must be refused."""
        r = self.execute(tool, args, mode, **kw)
        if "error" not in r:
            raise AssertionError("execute %s %s: expected an error reply, got %s"
                                 % (tool, json.dumps(args)[:300],
                                    json.dumps(r.get("data"))[:500]))
        return r["error"]

    def sh(self, command, mode=None, **args):
        """bash with a command string; its view (exit_code, output, ...)."""
        a = {"command": command}
        a.update(args)
        return self.view("bash", a, mode)

    def sh_ok(self, command, mode=None, **args):
        """The output (stdout and stderr) of a bash command that must exit 0."""
        v = self.sh(command, mode, **args)
        if v.get("exit_code") != 0:
            raise AssertionError("command %r failed: exit %s, output %s"
                                 % (command, v.get("exit_code"),
                                    str(v.get("output"))[:1000]))
        return v["output"]

    def write(self, path, content, **args):
        """write_file; its view."""
        a = {"path": path, "content": content}
        a.update(args)
        return self.view("write_file", a)

    def env_count_matching(self, regex):
        """Processes inside the environment whose command line matches regex.

        Scans /proc with plain shell tools (no pgrep needed).  The pattern
        should not match itself (use the bracket trick, Marker.regex).
        """
        out = self.sh_ok(
            "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\000' ' ' "
            "| grep -o %s | wc -l" % shell_quote(regex))
        return int(out.strip() or "0")

    # ---- processes -----------------------------------------------------

    def start(self, command, mode=None, **bash_args):
        """Start a managed process with bash run_in_background; its record
        (the view without its "action":"start")."""
        a = {"command": command, "run_in_background": True}
        a.update(bash_args)
        v = self.view("bash", a, mode)
        if v.get("action") != "start" or not str(v.get("id", "")).startswith("proc-"):
            raise AssertionError("bash run_in_background: not a started record: %s"
                                 % json.dumps(v)[:500])
        rec = dict(v)
        del rec["action"]
        return rec

    def read(self, pid, offset=None, max_bytes=0, wait_ns=0, min_dwell_ns=0,
             timeout=DEFAULT_TIMEOUT):
        """process/read's OutputSnapshot; offset None reads the tail."""
        return self.ok("process/read", {"id": pid, "options": {
            "MaxBytes": max_bytes, "OffsetBytes": offset,
            "Wait": wait_ns, "MinDwell": min_dwell_ns}}, timeout)

    def stop(self, pid, timeout=DEFAULT_TIMEOUT):
        """process/stop; the final record."""
        return self.ok("process/stop", {"id": pid}, timeout)

    def wait_ended(self, pid, timeout=30.0):
        """Poll until the process has ended; its final record."""
        deadline = time.monotonic() + timeout
        while True:
            rec = self.ok("process/get", {"id": pid})
            if rec.get("status") in END_STATUSES:
                return rec
            if time.monotonic() > deadline:
                raise AssertionError("process %s still live after %.1f s: %s"
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
            ended = r["Process"]["status"] in END_STATUSES
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


def check_result(res):
    """Fail unless res has the host's ToolResult shape: content an array of
    at most 128 typed parts, only the ToolResult's keys."""
    if not isinstance(res, dict) or set(res) - RESULT_KEYS:
        raise AssertionError("not a ToolResult: %s" % json.dumps(res)[:500])
    parts = res.get("content", [])
    if not isinstance(parts, list) or len(parts) > MAX_PARTS or \
            not all(isinstance(p, dict) and isinstance(p.get("type"), str)
                    for p in parts):
        raise AssertionError("ToolResult content is not an array of parts: %s"
                             % json.dumps(res)[:500])
    if "is_error" in res and not isinstance(res["is_error"], bool):
        raise AssertionError("is_error is not a bool: %s" % json.dumps(res)[:500])


def text_of(res):
    """The text of a ToolResult's text parts, joined (the host's projection)."""
    return "".join(p.get("text", "") for p in res.get("content", [])
                   if p.get("type") == "text")


def view_of(res):
    """The JSON view a tool returns as its single text part."""
    parts = res.get("content") or []
    if len(parts) != 1 or parts[0].get("type") != "text":
        raise AssertionError("not one text part: %s" % json.dumps(res)[:500])
    try:
        v = json.loads(parts[0]["text"])
    except (KeyError, ValueError) as e:
        raise AssertionError("the text part is not JSON (%s): %s"
                             % (e, json.dumps(res)[:500]))
    if not isinstance(v, dict):
        raise AssertionError("the view is not an object: %s" % json.dumps(res)[:500])
    out = View(v)
    out.result = res
    out.structured = res.get("structured_content")
    return out


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


def profile_copy(case, **fields):
    """(config, profile): the profile under test with `fields` set, in a
    copy of its config beside the original (relative paths in it stay
    right), or, without a config, a local profile with them.  The host's
    profile may only narrow the operator's, so what a test needs the
    operator to allow (persistent, shared) comes from here.  Removed when
    the test ends; the test is skipped if the copy cannot be written."""
    if CONFIG:
        with open(CONFIG) as f:
            body = json.load(f)
        name = PROFILE or body.get("default")
        body["profiles"][name] = dict(body["profiles"][name], **fields)
        cfg = os.path.join(os.path.dirname(os.path.abspath(CONFIG)),
                           unique(".sg-e2e-profile") + ".json")
        try:
            with open(cfg, "w") as f:
                json.dump(body, f)
        except OSError as e:
            case.skipTest("cannot write a copy of the config: %s" % e)
        case.addCleanup(os.unlink, cfg)
        return cfg, name
    d = tempfile.mkdtemp(prefix="sg-e2e-profile-")
    case.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
    cfg = os.path.join(d, "config.json")
    with open(cfg, "w") as f:
        json.dump({"default": "p", "profiles": {"p": dict({"backend": "local"}, **fields)}}, f)
    return cfg, "p"


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
