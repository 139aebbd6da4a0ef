"""hostdriver - a client that behaves as the agent host's own does.

The host (Wuu) talks to an execution backend through one client per
connection and one "environment" object per session.  This module is that
pair, written from the host's public behaviour so the e2e suite can put
sandgate exactly where the host puts its own worker:

Client (the host's transport):
  - ids are JSON strings from a decimal counter per connection, "1" first,
    never reused;
  - the token goes on every frame: requests, `cancel` and `callback`;
  - a call with data None sends `"data":null` (the host marshals a nil
    value); a `cancel` has no data at all;
  - frames are written as the host's JSON encoder writes them (compact,
    with <, > and & escaped); a frame over 16 MiB is refused before it is
    written;
  - every line read must decode as the host's response struct
    {method?, parent_id?, id, data?, error?} with string method, parent_id,
    id and error.  A line that does not (a numeric id, a stray word, an
    empty line, an array) is a terminal transport failure: reading stops,
    stdin is closed, the process gets the close grace and is then killed,
    and every pending call fails.  A line over 16 MiB is the same, with an
    immediate kill;
  - `method: "process"` goes to the event callback, `method: "tool"` to
    the handler of the call named by parent_id (answered with a `callback`
    request, never a reply), anything else to the pending call with that
    id; a reply whose id is not pending is dropped silently (kept in
    `dropped` so tests can look at it);
  - cancelling a call (its Ctx ends) removes it from the pending set,
    raises at once, and writes {"token","id":<same id>,"method":"cancel"}
    on a separate thread;
  - a transport failure is terminal: the client is never restarted; calls
    fail with "execution transport disconnected; the last operation may
    have completed: ...";
  - close = close stdin, wait the close grace (3 s; 90 s for the modal,
    daytona and vercel backends), then kill.

HostEnvironment (the host's environment for one session): starts sandgate
as the host starts a command backend (its own profile, with sandgate as the
command, in WUU_EXECUTION_PROFILE, and WUU_EXECUTION_ID, _SESSION, _STATE),
connects lazily with the host's initialize (token of 64 hex characters
reused on every reconnect, identity "wuu-env-" + 32 hex from the profile as
the host derives it, no remove_workspace_on_exit and no
require_existing_workspace, as for a command backend), checks the echoed
version, makes a new client after a transport failure, and offers
execute (ToolResult decoded strictly as the host's struct), request
(process/*), download (export/read chunks then export/close), run_code and
the process event subscription.

Python 3 standard library only.
"""

import collections
import hashlib
import io
import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

BIN = os.environ.get("SANDGATE_BIN", "")
CONFIG = os.environ.get("SANDGATE_TEST_CONFIG") or None
PROFILE = os.environ.get("SANDGATE_TEST_PROFILE") or None
ROOT = os.environ.get("SANDGATE_TEST_ROOT") or "/workspace"
SLACK = float(os.environ.get("SANDGATE_TEST_SLACK") or "1")

MAX_FRAME_BYTES = 16 * 1024 * 1024
DIAGNOSTIC_TAIL = 8192
DEFAULT_CLOSE_GRACE = 3.0
CLOUD_CLOSE_GRACE = 90.0
CLOUD_BACKENDS = ("modal", "daytona", "vercel", "vercel_sandbox")
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024
EXPORT_CLOSE_TIMEOUT = 5.0
PROCESS_REQUEST_TIMEOUT = 35.0
DISCONNECTED = "execution transport disconnected; the last operation may have completed"


# The refusal of a read_only command where the environment observed it
# cannot confine one (facts.confinement.read_only is "refused": gVisor has
# no Landlock, docs/docker.md).  A test that meets it there is skipped,
# saying so; anywhere else the refusal fails the test as before.
READ_ONLY_REFUSAL = "permission mode read_only needs commands confined"


def skip_if_read_only_refused(error, facts):
    conf = (facts or {}).get("confinement") or {}
    if READ_ONLY_REFUSAL in str(error) and conf.get("read_only") == "refused":
        raise unittest.SkipTest("read_only commands are refused in this environment: it has no "
                                "Landlock to confine them (facts.confinement.read_only is "
                                "\"refused\", docs/docker.md)")


# ---- errors --------------------------------------------------------------

class CallError(Exception):
    """An error reply, or a failure of the transport; str() is the message."""


class Canceled(CallError):
    """The caller cancelled the call (Go's context.Canceled)."""

    def __init__(self):
        super().__init__("context canceled")


class DeadlineExceeded(CallError):
    """The caller's deadline passed (Go's context.DeadlineExceeded)."""

    def __init__(self):
        super().__init__("context deadline exceeded")


class DecodeError(CallError):
    """A reply's data does not decode as the host's struct for it."""


# ---- a cancellation context ------------------------------------------------

class Ctx:
    """A caller's context: cancel() or a deadline ends it."""

    def __init__(self, timeout=None):
        self._done = threading.Event()
        self._err = None
        self._lock = threading.Lock()
        self._timer = None
        if timeout is not None:
            if timeout <= 0:
                self._end(DeadlineExceeded)
            else:
                self._timer = threading.Timer(timeout, self._end, (DeadlineExceeded,))
                self._timer.daemon = True
                self._timer.start()

    def _end(self, kind):
        with self._lock:
            if self._err is None:
                self._err = kind
        self._done.set()

    def cancel(self):
        self._end(Canceled)

    def err(self):
        """None while live, else a fresh exception of the ending's kind."""
        with self._lock:
            return self._err() if self._err is not None else None

    def wait(self, timeout=None):
        return self._done.wait(timeout)

    @property
    def done(self):
        return self._done.is_set()


BACKGROUND = None  # a call without a context never ends early


def _live(ctx):
    return ctx if ctx is not None else Ctx()


# ---- Go's JSON decoding, as strict as the host's structs are ----------------

class _GoDecodeError(Exception):
    pass


def _go_type_name(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def go_decode(value, schema, where="value"):
    """Check value against a Go type the way encoding/json would.

    schema: "string" | "int" | "bool" | "time" | "any" | ("list", schema) |
    ("map", schema) | dict (a struct: field name -> schema; other keys are
    ignored; names match case-insensitively, as Go's do).  null is accepted
    everywhere (Go leaves the zero value).  Raises _GoDecodeError.
    """
    if value is MISSING:
        raise _GoDecodeError("unexpected end of JSON input")
    if value is None or schema == "any":
        return
    kind = _go_type_name(value)
    if schema == "string":
        if kind != "string":
            raise _GoDecodeError("cannot unmarshal %s into %s of type string" % (kind, where))
    elif schema == "int":
        if kind != "number" or isinstance(value, float) \
                or not -2**63 <= value < 2**63:
            raise _GoDecodeError("cannot unmarshal %s %r into %s of type int"
                                 % (kind, value, where))
    elif schema == "bool":
        if kind != "bool":
            raise _GoDecodeError("cannot unmarshal %s into %s of type bool" % (kind, where))
    elif schema == "time":
        if kind != "string" or not _RFC3339.match(value):
            raise _GoDecodeError("parsing time %r for %s as RFC 3339" % (value, where))
    elif isinstance(schema, tuple) and schema[0] == "list":
        if kind != "array":
            raise _GoDecodeError("cannot unmarshal %s into %s of type slice" % (kind, where))
        for i, item in enumerate(value):
            go_decode(item, schema[1], "%s[%d]" % (where, i))
    elif isinstance(schema, tuple) and schema[0] == "map":
        if kind != "object":
            raise _GoDecodeError("cannot unmarshal %s into %s of type map" % (kind, where))
        for k, item in value.items():
            go_decode(item, schema[1], "%s.%s" % (where, k))
    elif isinstance(schema, dict):
        if kind != "object":
            raise _GoDecodeError("cannot unmarshal %s into %s of type struct" % (kind, where))
        fold = {k.lower(): (k, s) for k, s in schema.items()}
        for k, item in value.items():
            hit = schema.get(k)
            name = k
            if hit is None and k.lower() in fold:
                name, hit = fold[k.lower()]
            if hit is not None:
                go_decode(item, hit, "%s.%s" % (where, name))
    else:
        raise AssertionError("bad schema %r" % (schema,))


RESPONSE = {"method": "string", "parent_id": "string", "id": "string",
            "data": "any", "error": "string"}

CONTENT_PART = {"remote_ref": "string", "type": "string", "text": "string",
                "data": "string", "mime_type": "string", "uri": "string",
                "name": "string", "resource": "any",
                "artifact": {"placement": "string", "ref": "string",
                             "sha256": "string", "size_bytes": "int"}}

TOOL_RESULT = {"content": ("list", CONTENT_PART), "structured_content": "any",
               "meta": "any", "is_error": "bool",
               "activity": {"id": "string", "kind": "string", "state": "string",
                            "thread_id": "string", "preview_uri": "string"}}

# The host's process.Process, the fields whose Go types are known.
PROCESS = {"action": "string", "id": "string", "owner_kind": "string",
           "owner_id": "string", "root_thread_id": "string",
           "host_generation_id": "string", "lifecycle": "string",
           "completion_mode": "string", "status": "string", "pid": "int",
           "pgid": "int", "tty": "bool", "log_path": "string",
           "log_base_offset": "int", "command": "string", "cwd": "string",
           "started_at": "time", "updated_at": "time", "stopped_at": "time",
           "exit_code": "int", "last_error": "string",
           "terminal_cause": "string", "completion_delivered_at": "time",
           "completion_consumed_by": "string", "recheck_minutes": "int",
           "next_recheck_at": "time", "pending_recheck_at": "time",
           "operation_id": "string"}

EVENT = {"Type": "string", "Cause": "string", "Process": PROCESS}

OUTPUT_SNAPSHOT = {"Process": PROCESS, "Output": "string", "Truncated": "bool",
                   "StartOffset": "int", "EndOffset": "int", "TotalBytes": "int",
                   "TimedOut": "bool", "Duration": "int"}

EXPORT_CHUNK = {"data": "string", "eof": "bool"}

RUN_RESULT = {"Logs": ("list", "string"), "Value": "any", "Error": "string",
              "Media": ("list", CONTENT_PART), "CallSummary": "string"}

_PART_TYPES = ("text", "image", "audio", "file", "resource", "resource_link")


def _reject_constant(name):
    raise ValueError("invalid character in JSON: %s" % name)


def _fold(obj, schema):
    """obj with its keys spelled as the struct's fields, as Go matches
    names (an exact match first, else one that differs only in case)."""
    out = {}
    fold = {k.lower(): k for k in schema}
    for k, v in obj.items():
        if k in schema:
            out[k] = v
    for k, v in obj.items():
        name = fold.get(k.lower())
        if k not in schema and name is not None and name not in out:
            out[name] = v
    return out


class _Missing:
    """A reply without data (Go's nil RawMessage, which no struct decodes)."""

    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


def go_unmarshal(text, schema, where="value"):
    """json.Unmarshal(text, &schema): the decoded value or _GoDecodeError."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        raise _GoDecodeError(str(e))
    go_decode(value, schema, where)
    return value


def validate_tool_result(result):
    """The host's Result.Validate, the parts it checks on a part's type."""
    content = result.get("content") or []
    if len(content) > 128:
        raise DecodeError("content has %d parts, limit is 128" % len(content))
    for i, part in enumerate(content):
        kind = (part.get("type") or "").strip()
        if kind not in _PART_TYPES:
            raise DecodeError("content[%d].type %r is unsupported" % (i, part.get("type")))
        if kind in ("image", "audio", "file"):
            if not (part.get("data") or "").strip() and not (part.get("uri") or "").strip():
                raise DecodeError("content[%d] requires data or uri" % i)
            if not (part.get("mime_type") or "").strip():
                raise DecodeError("content[%d].mime_type is required" % i)
        if kind == "resource_link" and not (part.get("uri") or "").strip():
            raise DecodeError("content[%d].uri is required" % i)


def text_projection(result):
    """The host's Result.TextProjection: text parts joined, structured
    content only when there is no content."""
    content = result.get("content") or []
    sc = result.get("structured_content")
    if len(content) == 1 and content[0].get("type") == "text" and sc is None:
        return content[0].get("text", "")
    parts = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            parts.append(part.get("text", ""))
        elif kind in ("image", "audio", "file"):
            parts.append("[%s: %s (%s)]" % (kind, part.get("name") or kind,
                                             part.get("mime_type", "")))
        elif kind == "resource":
            parts.append("[resource: %s] %s" % (part.get("name") or "resource",
                                                 json.dumps(part.get("resource"))))
        elif kind == "resource_link":
            parts.append("[resource_link: %s (%s)]" % (part.get("name") or "resource",
                                                        part.get("uri", "")))
    if not content and sc is not None:
        parts.append(json.dumps(sc, separators=(",", ":"), sort_keys=True))
    return "\n".join(parts)


# ---- Go's JSON encoding ------------------------------------------------------

def go_marshal(value):
    """json.Marshal: compact, UTF-8, and <, >, &, U+2028, U+2029 escaped."""
    s = json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                   allow_nan=False)
    return (s.replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026").replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029"))


# ---- the transport client ----------------------------------------------------

class Client:
    """One connection to one backend process, as the host's client."""

    def __init__(self, argv, env=None, close_grace=DEFAULT_CLOSE_GRACE, token=""):
        self.argv = list(argv)
        self.env = env
        self.close_grace = close_grace
        self.token = token
        self.event = None          # callable(data) for method "process"
        self.proc = None
        self.sequence = 0
        self.failed_err = None     # the first failure's message
        self.dropped = []          # replies whose id was not pending
        self.written = []          # every frame written, decoded, in order
        self.invalid_line = None   # the line that ended the transport
        self._pending = {}
        self._handlers = {}
        self._contexts = {}
        self._mu = threading.Lock()
        self._wmu = threading.Lock()
        self._diag = bytearray()
        self._done = threading.Event()
        self._stdin_closed = False

    # -- starting and the reader --

    def _start_locked(self):
        if self.failed_err is not None:
            raise CallError(self.failed_err)
        if self.proc is not None:
            return
        if not self.argv:
            raise CallError("execution transport command is empty")
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.env, bufsize=0)
        except OSError as e:
            raise CallError("start execution transport: %s" % e)
        self._ethread = threading.Thread(target=self._read_stderr, daemon=True)
        self._ethread.start()
        threading.Thread(target=self._read, daemon=True).start()

    def _read_stderr(self):
        while True:
            try:
                chunk = self.proc.stderr.read(65536)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                return
            with self._mu:
                self._diag += chunk
                if len(self._diag) > DIAGNOSTIC_TAIL:
                    del self._diag[:len(self._diag) - DIAGNOSTIC_TAIL]

    def diagnostic(self):
        with self._mu:
            return self._diag.decode("utf-8", "replace").strip()

    def _read(self):
        f = io.BufferedReader(self.proc.stdout, 1 << 16)
        too_long = False
        while True:
            try:
                line = f.readline(MAX_FRAME_BYTES + 1)
            except (OSError, ValueError):
                line = b""
            if not line:
                break
            if not line.endswith(b"\n") and len(line) >= MAX_FRAME_BYTES:
                # bufio.Scanner: token too long; the host kills at once.
                too_long = True
                self.invalid_line = line[:200]
                break
            body = line[:-1] if line.endswith(b"\n") else line
            if body.endswith(b"\r"):
                body = body[:-1]
            text = body.decode("utf-8", "replace")
            try:
                resp = go_unmarshal(text, RESPONSE, "Response")
            except _GoDecodeError as e:
                self.invalid_line = body[:200]
                self._fail("invalid execution response: %s" % e)
                break
            if not isinstance(resp, dict):
                continue  # a JSON null decodes to an empty response, dropped
            self._dispatch(_fold(resp, RESPONSE))
        self._finish(too_long)

    def _dispatch(self, resp):
        method = resp.get("method") or ""
        if method == "process":
            if self.event is not None:
                self.event(resp.get("data", MISSING))
            return
        if method == "tool":
            parent = resp.get("parent_id") or ""
            with self._mu:
                handler = self._handlers.get(parent)
                ctx = self._contexts.get(parent)
            threading.Thread(target=self._answer_tool, args=(resp, handler, ctx),
                             daemon=True).start()
            return
        rid = resp.get("id") or ""
        with self._mu:
            q = self._pending.pop(rid, None)
            if q is None:
                self.dropped.append(resp)
        if q is not None:
            q.put(resp)

    def _answer_tool(self, callback, handler, ctx):
        reply = {"id": callback.get("id") or ""}
        if handler is None:
            reply["error"] = "parent execution scope is closed"
        else:
            try:
                raw = callback.get("data", MISSING)
                if raw is MISSING:
                    raise CallError("unexpected end of JSON input")
                data = handler(ctx, raw)
                if data is not None:
                    reply["data"] = data
            except Exception as e:  # the handler's error goes back as text
                reply["error"] = str(e) or e.__class__.__name__
        try:
            self._write({"id": callback.get("id") or "", "method": "callback",
                         "data": reply})
        except CallError as e:
            self._fail(str(e))

    def _finish(self, too_long):
        self._close_stdin()
        if too_long:
            self._kill()
        try:
            rc = self.proc.wait(self.close_grace)
        except subprocess.TimeoutExpired:
            self._kill()
            rc = self.proc.wait()
        why = "unexpected EOF" if rc == 0 else ("exit status %d" % rc if rc > 0
                                               else "signal: %s" % signal.Signals(-rc).name)
        self._ethread.join(2)  # the stderr reader takes the last lines
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        self._fail("%s: %s: %s" % (DISCONNECTED, why, self.diagnostic()))
        self._done.set()

    def _kill(self):
        try:
            self.proc.kill()
        except OSError:
            pass

    def _close_stdin(self):
        with self._wmu:
            if not self._stdin_closed:
                self._stdin_closed = True
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass

    def _fail(self, msg):
        with self._mu:
            if self.failed_err is None:
                self.failed_err = msg
            pending = list(self._pending.items())
            self._pending.clear()
        for rid, q in pending:
            q.put({"id": rid, "error": self.failed_err})

    # -- writing --

    def _write(self, request):
        frame = {}
        if self.token:
            frame["token"] = self.token
        frame["id"] = request["id"]
        frame["method"] = request["method"]
        if "data" in request:
            frame["data"] = request["data"]
        line = go_marshal(frame).encode("utf-8")
        if len(line) + 1 > MAX_FRAME_BYTES:
            raise CallError("execution request exceeds transport limit")
        with self._wmu:
            if self._stdin_closed:
                raise CallError("write |1: file already closed")
            self.written.append(frame)
            try:
                self.proc.stdin.write(line + b"\n")
            except (BrokenPipeError, OSError, ValueError) as e:
                raise CallError("write |1: %s" % e)

    # -- calls --

    def call(self, method, data=None, ctx=None, handler=None):
        """The reply data of one call; raises CallError (and its kinds)."""
        ctx = _live(ctx)
        err = ctx.err()
        if err is not None:
            raise err
        self._mu.acquire()
        try:
            self._start_locked()
            self.sequence += 1
            rid = str(self.sequence)
            q = queue.Queue(1)
            self._pending[rid] = q
            self._handlers[rid] = handler
            # The scope nested calls run in: the caller's context, ended
            # too when this call returns (the host revokes the parent scope
            # then, so a callback never outlives its program).
            scope = Ctx()
            if ctx is not None:
                def follow(scope=scope, ctx=ctx):
                    while not scope.done:
                        if ctx.wait(0.05):
                            scope._end(ctx._err)
                threading.Thread(target=follow, daemon=True).start()
            self._contexts[rid] = scope
        finally:
            self._mu.release()
        try:
            return self._await(rid, method, data, ctx, q)
        finally:
            with self._mu:
                self._handlers.pop(rid, None)
                self._contexts.pop(rid, None)
            scope.cancel()

    def _await(self, rid, method, data, ctx, q):
        written = queue.Queue(1)

        def writer():
            try:
                self._write({"id": rid, "method": method, "data": data})
                written.put(None)
            except CallError as e:
                written.put(e)

        threading.Thread(target=writer, daemon=True).start()
        werr = None
        while True:
            try:
                werr = written.get(timeout=0.02)
                break
            except queue.Empty:
                if ctx.done:
                    # The host closes stdin when a write outlives its caller.
                    self._close_stdin()
                    werr = ctx.err()
                    break
        if werr is not None:
            self._fail(str(werr))
            raise werr
        while True:
            try:
                resp = q.get(timeout=0.02)
                if ctx.done:
                    raise ctx.err()
                break
            except queue.Empty:
                if ctx.done:
                    with self._mu:
                        self._pending.pop(rid, None)
                    threading.Thread(target=self._send_cancel, args=(rid,),
                                     daemon=True).start()
                    raise ctx.err()
        if resp.get("error"):
            raise CallError(resp["error"])
        return resp.get("data", MISSING)

    def _send_cancel(self, rid):
        try:
            self._write({"id": rid, "method": "cancel"})
        except CallError as e:
            self._fail(str(e))

    @property
    def failed(self):
        with self._mu:
            return self.failed_err is not None

    def close(self):
        """Close stdin, wait the close grace, then kill.  (seconds taken)"""
        t0 = time.monotonic()
        with self._mu:
            if self.failed_err is None:
                self.failed_err = "execution transport is closed"
        if self.proc is None:
            return 0.0
        self._close_stdin()
        if not self._done.wait(self.close_grace):
            self._kill()
            self._done.wait()
        return time.monotonic() - t0

    def exit_code(self):
        return None if self.proc is None else self.proc.poll()

    def sever(self):
        """Close this end of the backend's stdin out of band (the backend
        then exits on its own): a test's way of making the worker go away."""
        self._close_stdin()


# ---- the environment -----------------------------------------------------------

def profile_backend(config=CONFIG, profile=PROFILE):
    """The backend the test profile names (local without a config)."""
    if not config:
        return "local"
    with open(config) as f:
        cfg = json.load(f)
    name = profile or cfg.get("default")
    return ((cfg.get("profiles") or {}).get(name) or {}).get("backend") or "local"


# The host's Profile struct: its fields in order, and which are omitempty.
_PROFILE_FIELDS = (("python", True), ("host_workspace", True), ("mount_read_only", True),
                   ("backend", False), ("image", True), ("host", True), ("port", True),
                   ("known_hosts_file", True), ("identity_file", True),
                   ("workspace", True), ("worker", True), ("shared", True),
                   ("persistent", True), ("network", True), ("cpus", True),
                   ("memory_mb", True), ("lifetime_seconds", True),
                   ("forward_env", True), ("command", True))


def host_profile_json(profile):
    """json.Marshal of the host's Profile: its field order, empty
    omitempty fields left out."""
    out = {}
    for name, omitempty in _PROFILE_FIELDS:
        value = profile.get(name)
        if omitempty and not value:
            continue
        out[name] = value if value is not None else ""
    return go_marshal(out)


def identity_for(store, session, name, profile):
    """The host's Identity(): wuu-env- and 16 bytes of the sha256 of
    {Store, Session, Name, Profile} ("shared" for the session of a shared
    profile)."""
    if profile.get("shared"):
        session = "shared"
    doc = '{"Store":%s,"Session":%s,"Name":%s,"Profile":%s}' % (
        go_marshal(store), go_marshal(session), go_marshal(name),
        host_profile_json(profile))
    return "wuu-env-" + hashlib.sha256(doc.encode()).hexdigest()[:32]


class HostEnvironment:
    """One session's environment, as the host's Environment uses one."""

    def __init__(self, session="a", identity=None, version=4, root=ROOT,
                 environment=None, store=None, extra_args=(), env_extra=None,
                 config=CONFIG, profile=PROFILE, close_grace=None, host_profile=None):
        if not BIN:
            import unittest
            raise unittest.SkipTest("SANDGATE_BIN is not set")
        self.session = session
        self.version = version
        self.root = root
        self.environment = environment or {}
        self.backend = profile_backend(config, profile)
        self._own_store = store is None
        self.store = store or tempfile.mkdtemp(prefix="sg-host-store-")
        self.state_dir = os.path.join(self.store, "sandgate-state")
        self._xdg = os.path.join(self.store, "xdg")
        os.makedirs(self.state_dir, exist_ok=True)
        os.makedirs(self._xdg, exist_ok=True)
        argv = [BIN, "serve", "--state-dir", self.state_dir]
        if config:
            argv += ["--config", config]
        if profile:
            argv += ["--profile", profile]
        self.argv = argv + list(extra_args)
        # The host's own profile for sandgate: a command backend whose
        # command is sandgate, forwarding the variables the binding carries.
        self.host_profile = {"backend": "command", "command": list(self.argv),
                             "forward_env": sorted(self.environment)}
        self.host_profile.update(host_profile or {})
        self.identity = identity or identity_for(self.store, session, "sandgate",
                                                 self.host_profile)
        env = dict(os.environ)
        env.pop("SANDGATE_CONFIG", None)
        env["XDG_CONFIG_HOME"] = self._xdg
        env["WUU_EXECUTION_PROFILE"] = host_profile_json(self.host_profile)
        env["WUU_EXECUTION_ID"] = self.identity
        env["WUU_EXECUTION_SESSION"] = session
        env["WUU_EXECUTION_STATE"] = os.path.join(self.store, self.identity)
        env.update(env_extra or {})
        self.env = env
        if close_grace is None:
            close_grace = CLOUD_CLOSE_GRACE if self.backend in CLOUD_BACKENDS \
                else DEFAULT_CLOSE_GRACE
        self.close_grace = close_grace
        self.token = secrets.token_hex(32)   # reused on every reconnect
        self.client = None
        self.clients = []
        self.init_reply = None
        self.closed = False
        self.events = []             # decoded process events, in order
        self.undecodable_events = []
        self._subs = []
        self._ev_cond = threading.Condition()
        self._mu = threading.Lock()

    # -- connecting --

    def binding(self):
        """The host's Init, keys in its order; omitempty ones left out."""
        b = {}
        if self.identity:
            b["identity"] = self.identity
        if self.environment:
            b["environment"] = dict(self.environment)
        b["version"] = self.version
        b["root"] = self.root
        b["session"] = self.session
        return b

    def connect(self, ctx=None):
        with self._mu:
            if self.closed:
                raise CallError("execution environment is closed")
            if self.client is not None:
                if not self.client.failed:
                    return self.client
                self.client.close()
                self.client = None
            client = Client(self.argv, self.env, self.close_grace, self.token)
            client.event = self._on_event
            self.clients.append(client)
            try:
                data = client.call("initialize", self.binding(), ctx)
            except CallError:
                client.close()
                raise
            ok = isinstance(data, dict) and isinstance(data.get("version"), int) \
                and not isinstance(data.get("version"), bool) \
                and data["version"] == self.version
            if not ok:
                client.close()
                raise CallError("execution worker protocol mismatch")
            self.init_reply = data
            self.client = client
            return client

    @property
    def methods(self):
        return (self.init_reply or {}).get("methods") or []

    # -- events --

    def _on_event(self, raw):
        try:
            go_decode(raw, EVENT, "Event")
        except _GoDecodeError as e:
            # The host drops an event it cannot decode.
            self.undecodable_events.append((raw, str(e)))
            return
        if not isinstance(raw, dict):
            return
        with self._ev_cond:
            self.events.append(raw)
            subs = list(self._subs)
            self._ev_cond.notify_all()
        for q in subs:
            try:
                q.put_nowait(raw)
            except queue.Full:
                pass

    def subscribe(self, size=8):
        q = queue.Queue(size)
        with self._ev_cond:
            self._subs.append(q)
        return q

    def unsubscribe(self, q):
        with self._ev_cond:
            if q in self._subs:
                self._subs.remove(q)

    # -- the host's calls --

    def execute(self, name, arguments, actor=None, mode="standard",
                attribution=False, ctx=None, call_extra=None):
        """Environment.Execute: the ToolResult, decoded as the host does.

        arguments is the JSON text of the argument object (a dict is
        encoded for you).  Raises CallError on an error reply."""
        if not isinstance(arguments, str):
            arguments = go_marshal(arguments)
        client = self.connect(ctx)
        call = {}
        if call_extra:
            call.update(call_extra)
        call["name"] = name
        call["arguments"] = arguments
        req = {}
        if attribution:
            req["git_attribution_enabled"] = True
        req["call"] = call
        req["permission_mode"] = mode
        req["actor"] = actor if actor is not None else self.session
        try:
            data = client.call("execute", req, ctx)
        except CallError as e:
            facts = ((self.init_reply or {}).get("environment") or {}).get("facts")
            skip_if_read_only_refused(e, facts)
            raise
        try:
            go_decode(data, TOOL_RESULT, "toolresult.Result")
        except _GoDecodeError as e:
            raise DecodeError("decode execution result: %s" % e)
        result = data if isinstance(data, dict) else {}
        validate_tool_result(result)
        return result

    def run(self, name, arguments, actor=None, mode="standard", **kw):
        """The e2e test's run(): structured content if any, else the text
        projection; an is_error result fails."""
        result = self.execute(name, arguments, actor, mode, **kw)
        if result.get("is_error"):
            raise AssertionError("%s: %s" % (name, text_projection(result)))
        if result.get("structured_content") is not None:
            return go_marshal(result["structured_content"])
        return text_projection(result)

    def request(self, method, params=None, timeout=PROCESS_REQUEST_TIMEOUT, ctx=None,
                schema="any"):
        """Environment.Request for the process manager: process/<method>."""
        client = self.connect(ctx)
        if ctx is None:
            ctx = Ctx(timeout * SLACK)
        data = client.call("process/" + method, params, ctx)
        try:
            go_decode(data, schema, "process/" + method)
        except _GoDecodeError as e:
            raise DecodeError(str(e))
        return data

    def list_processes(self):
        """RemoteManager.List: process/list decoded as []Process."""
        return self.request("list", None, schema=("list", PROCESS)) or []

    def download(self, token, size, ctx=None):
        """Environment.Download: the artifact's bytes."""
        import base64
        if size < 0 or size > MAX_ARTIFACT_BYTES:
            raise CallError("invalid artifact size")
        client = self.connect(ctx)
        out = bytearray()
        try:
            offset = 0
            while True:
                data = client.call("export/read", {"token": token, "offset": offset}, ctx)
                try:
                    go_decode(data, EXPORT_CHUNK, "export chunk")
                    chunk = base64.b64decode((data or {}).get("data") or "", validate=True)
                except (_GoDecodeError, ValueError) as e:
                    raise DecodeError(str(e))
                eof = bool((data or {}).get("eof"))
                if offset + len(chunk) > size:
                    raise CallError("artifact exceeds declared size")
                out += chunk
                offset += len(chunk)
                if eof:
                    if offset != size:
                        raise CallError("artifact transfer was truncated")
                    return bytes(out)
                if not chunk:
                    raise CallError("empty artifact transfer chunk")
        finally:
            try:
                client.call("export/close", {"token": token}, Ctx(EXPORT_CLOSE_TIMEOUT))
            except CallError:
                pass

    def run_code(self, code, tools=(), handler=None, actor=None, mode="standard",
                 timeout_ms=0, ctx=None, attribution=False):
        """Environment.RunCode: the RunResult; handler(ctx, call) answers
        the nested tool calls (a ToolResult dict, or raise)."""
        client = self.connect(ctx)
        req = {}
        if attribution:
            req["git_attribution_enabled"] = True
        req["program"] = {"code": code, "tools": [dict(t) for t in tools]}
        req["timeout_ms"] = timeout_ms
        req["permission_mode"] = mode
        req["actor"] = actor if actor is not None else self.session

        def nested(cctx, raw):
            if handler is None:
                raise CallError("no tool handler")
            return handler(cctx, raw)

        data = client.call("run_code", req, ctx, nested)
        try:
            go_decode(data, RUN_RESULT, "codemode.RunResult")
        except _GoDecodeError as e:
            raise DecodeError(str(e))
        return data

    # -- closing --

    def close(self):
        """Environment.Close (for a command backend: the client's close)."""
        with self._mu:
            self.closed = True
            client = self.client
        took = client.close() if client is not None else 0.0
        return took

    def cleanup(self):
        """For tearDown: close every client, then remove the store."""
        self.closed = True
        for c in self.clients:
            if c.proc is not None and c.proc.poll() is None:
                c.close_grace = max(c.close_grace, 30.0)
                c.close()
            for f in (c.proc.stdin, c.proc.stdout, c.proc.stderr) if c.proc else ():
                try:
                    f.close()
                except OSError:
                    pass
        if self._own_store:
            shutil.rmtree(self.store, ignore_errors=True)


def proc_id_of(text):
    """The id a background start's result names (process_id, id or
    process.id), as the host's e2e test reads it."""
    record = json.loads(text)
    pid = record.get("process_id") or record.get("id") \
        or (record.get("process") or {}).get("id")
    return pid


class HostTestCase(unittest.TestCase):
    """A test case whose environments are closed after the test, and which
    fails on any line the host could not have decoded."""

    def environment(self, **kw):
        env = HostEnvironment(**kw)
        self.addCleanup(self._finish, env)
        return env

    def _finish(self, env):
        env.cleanup()
        for c in env.clients:
            self.assertIsNone(c.invalid_line,
                              "a line the host cannot decode: %r" % c.invalid_line)
