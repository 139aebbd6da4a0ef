"""The host's own tests of its worker and its client, replayed against
sandgate through a driver that behaves as the host's client does
(hostdriver.py).

Each test keeps the name, the steps and the assertions of the host's test
it replays (internal/executionworker/server_test.go,
environment_e2e_test.go and internal/executionenv/client_test.go in the
host's source), as close as sandgate allows; where a step had to change
(the host's test stats a local temporary directory, or talks to a fake
worker that answers a made-up method), the test says what replaces it.
Any frame sandgate writes that the host could not decode ends that
test's transport, so every test here also checks the framing.

HostDriverFidelity checks the driver itself against a scripted worker, so
the rules it enforces are known to be enforced.

The run_code tests belong to issue 36: they skip, saying so, while
sandgate's initialize reply does not list run_code in `methods`.
Runs on every backend (tests/e2e/run-against.sh) and through relays;
HostSmoke is the per-backend smoke (tests/CMakeLists.txt).
"""

import json
import os
import sys
import threading
import time
import unittest

import hostdriver as hd
from hostdriver import CallError, Canceled, Ctx, DeadlineExceeded

SLACK = hd.SLACK
RUN_CODE_SKIP = ("run_code belongs to issue 36; sandgate's initialize reply does "
                 "not list it in methods")


class HostCase(hd.HostTestCase):
    """Environments made here are closed after the test, and any line or
    process event the host could not have decoded fails it."""

    def _finish(self, env):
        super()._finish(env)
        self.assertEqual(env.undecodable_events, [],
                         "process events the host cannot decode")

    def require_run_code(self, env):
        env.connect()
        if "run_code" not in env.methods:
            self.skipTest(RUN_CODE_SKIP)


def _contains(text, want):
    return want in text


# ---- internal/executionworker/server_test.go ---------------------------------

class WorkerServer(HostCase):

    def test_worker_filesystem_and_permission_boundary(self):
        """TestWorkerFilesystemAndPermissionBoundary.  The host stats the
        file in its temporary root; the root here may be remote, so bash
        reads it back instead."""
        env = self.environment(session="test-session")

        def call(name, args, mode):
            return env.execute(name, args, actor="root", mode=mode)

        call("write_file", '{"path":"hello.txt","content":"remote contents"}', "standard")
        seen = hd.text_projection(env.execute("bash", '{"command":"cat hello.txt"}',
                                              actor="root", mode="standard"))
        self.assertIn("remote contents", seen)
        call("read_file", '{"path":"hello.txt"}', "read_only")
        with self.assertRaises(CallError, msg="read-only write succeeded"):
            call("write_file", '{"path":"denied.txt","content":"no"}', "read_only")
        with self.assertRaises(CallError, msg="file escaped worker workspace"):
            call("read_file", '{"path":"../outside.txt"}', "standard")
        with self.assertRaises(CallError, msg="host control tool accepted by worker"):
            call("notes", '{"action":"read"}', "standard")

    def test_worker_rejects_protocol_mismatch(self):
        """TestWorkerRejectsProtocolMismatch for a version-3 and a version-4
        host: each tries its version minus and plus one.  sandgate speaks
        both 3 and 4, so of those only 2 and 5 are foreign: they are
        refused; 3 and 4 are accepted and echoed, which is what lets a host
        of the other version refuse the worker in turn."""
        for host_version in (3, 4):
            for version in (host_version - 1, host_version + 1):
                with self.subTest(host=host_version, version=version):
                    env = self.environment(session="test", version=version)
                    if version in (3, 4):
                        env.connect()
                        self.assertEqual(env.init_reply["version"], version)
                        continue
                    with self.assertRaises(CallError, msg="protocol mismatch accepted"):
                        env.connect()

    def test_a_host_refuses_a_worker_that_answers_another_version(self):
        """environment.go connect: a reply whose version is not the host's
        own is "execution worker protocol mismatch", so sandgate must echo
        the version it was asked for, for either host."""
        for version in (3, 4):
            with self.subTest(version=version):
                env = self.environment(version=version)
                env.connect()
                self.assertEqual(env.init_reply["version"], version)
                self.assertIsInstance(env.init_reply.get("root"), str)

    def test_canceled_stdin_write_still_allows_stop(self):
        """TestCanceledStdinWriteStillAllowsStop."""
        env = self.environment(session="stdin-recovery")
        ctx = Ctx(20 * SLACK)
        result = env.execute("bash", '{"command":"stty raw -echo; echo READY; sleep 60",'
                             '"run_in_background":true}', actor="a", mode="unconfined",
                             ctx=ctx)
        proc = json.loads(hd.text_projection(result))
        pid = proc.get("id")
        self.assertTrue(pid, "start %s" % json.dumps(result)[:500])
        client = env.client
        raw = client.call("process/read", {"id": pid, "options": {
            "OffsetBytes": 0, "Wait": int(2e9 * SLACK)}}, ctx)
        self.assertIn("READY", json.dumps(raw), "process not ready")
        with self.assertRaises(DeadlineExceeded, msg="expected full stdin pipe"):
            client.call("process/write", {"id": pid, "input": "x" * 65536},
                        Ctx(0.2))
        self.assertFalse(client.failed, "write cancellation interrupted transport setup "
                         "rather than blocked process input")
        stop_ctx = Ctx((2 * 2 + 1) * SLACK)
        client.call("process/stop", {"id": pid}, stop_ctx)

    def test_worker_program_uses_tool_only_authority(self):
        """TestWorkerProgramUsesToolOnlyAuthority (issue 36)."""
        env = self.environment(session="code-test")
        self.require_run_code(env)
        invoked = []

        def handler(ctx, call):
            invoked.append(call)
            return {"content": [{"type": "text", "text": call.get("name", "")}]}

        for code, failed in (
                ("return (await tools.read_file({path:'file.txt'})).content[0].text", False),
                ("await import('node:fs/promises')", True)):
            result = env.run_code(code, tools=[{"name": "read_file"}], handler=handler,
                                  actor="a", mode="unconfined")
            self.assertEqual(bool(result.get("Error")), failed, json.dumps(result))
        self.assertEqual(len(invoked), 1, "unexpected nested calls")


# ---- internal/executionworker/environment_e2e_test.go -------------------------

def environment_end_to_end(test, version=4):
    """testEnvironmentEndToEnd, with sandgate as the backend."""
    ctx = Ctx(120 * SLACK)
    env = test.environment(session="a", version=version)

    def run(name, args, mode="standard"):
        return env.run(name, args, actor="a", mode=mode, ctx=ctx)

    run("write_file", '{"path":"marker.txt","content":"environment marker"}')
    test.assertIn("environment marker", run("bash", '{"command":"cat marker.txt"}'))
    test.assertIn("environment marker", run("read_file", '{"path":"marker.txt"}', "read_only"))
    with test.assertRaises(CallError, msg="read-only mutation was accepted"):
        env.execute("write_file", '{"path":"denied.txt","content":"no"}', actor="a",
                    mode="read_only", ctx=ctx)
    run("bash", '{"command":"git init -q && git status --porcelain"}')
    second = test.environment(session="b", store=env.store, version=version)
    with test.assertRaises(CallError, msg="isolated session read another session's file"):
        second.execute("read_file", '{"path":"marker.txt"}', actor="a", mode="standard",
                       ctx=ctx)
    events = env.subscribe(8)
    started = run("bash", '{"command":"sleep 120","run_in_background":true}')
    try:
        events.get(timeout=max(0.1, 120 * SLACK))
    except Exception:
        test.fail("missing process event")
    env.unsubscribe(events)
    pid = hd.proc_id_of(started)
    test.assertTrue(pid, "missing process identity: %s" % started)
    records = env.list_processes()
    test.assertEqual(len(records), 1, "process panel: %s" % json.dumps(records)[:1000])
    test.assertEqual(records[0].get("owner_id"), "a")
    test.assertEqual(records[0].get("owner_kind"), "main_agent")
    run("process", hd.go_marshal({"action": "stop", "process_id": pid}))

    if "run_code" in env.methods:
        def nested(cctx, call):
            return env.execute(call.get("name"), call.get("arguments") or "{}", actor="a",
                               mode="standard", ctx=cctx)
        code = env.run_code(
            'await tools.write_file({path:"program.txt",content:"program output"}); '
            'return await tools.read_file({path:"marker.txt"});',
            tools=[{"name": "write_file"},
                   {"name": "read_file", "input_schema": {
                       "type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}],
            handler=nested, actor="a", mode="standard", ctx=ctx)
        test.assertEqual(code.get("Error") or "", "", "remote program")
    else:
        # run_code (issue 36) is absent: the file the program would write
        # is written directly, so the artifact steps still run.
        run("write_file", '{"path":"program.txt","content":"program output"}')
    test.assertIn("program output", run("read_file", '{"path":"program.txt"}'))
    artifact = json.loads(run("present_artifact", '{"path":"program.txt"}'))
    data = env.download(artifact.get("execution_export"), artifact.get("size"), ctx)
    test.assertEqual(data, b"program output", "artifact bytes differ from remote source")


class HostSmoke(HostCase):
    """The host's end-to-end environment test: the per-backend smoke."""

    def test_environment_end_to_end(self):
        environment_end_to_end(self)

    def test_environment_end_to_end_version_3(self):
        """The same, from a version-3 host (the newest public one)."""
        environment_end_to_end(self, version=3)


class EnvironmentBoundaries(HostCase):
    """The parts of the host's other end-to-end tests that a command
    backend can take: the forwarded variables and a large frame."""

    def test_environment_boundary(self):
        """TestDockerMountAndEnvironmentBoundaryEndToEnd, its environment
        part: a forwarded variable is visible to bash, a variable of the
        backend's own process is not."""
        env = self.environment(session="boundary",
                               environment={"WUU_E2E_VISIBLE": "explicit-value"},
                               env_extra={"WUU_E2E_HIDDEN": "must-stay-on-host"})
        res = env.execute("bash", {"command": "printf '%s/%s' \"$WUU_E2E_VISIBLE\" "
                                              "\"${WUU_E2E_HIDDEN-unset}\""},
                          actor="boundary")
        self.assertIn("explicit-value/unset", hd.text_projection(res) + json.dumps(res))

    def test_large_frame_arrives_intact(self):
        """TestPTYTransportEndToEnd's payload: a write_file of about
        224 KiB arrives byte for byte."""
        env = self.environment(session="terminal")
        content = "payload" * 32768
        env.execute("write_file", {"path": "large.txt", "content": content},
                    actor="terminal")
        res = env.execute("bash", {"command": "wc -c < large.txt; sha256sum large.txt"},
                          actor="terminal")
        import hashlib
        text = hd.text_projection(res) + json.dumps(res)
        self.assertIn(str(len(content)), text)
        self.assertIn(hashlib.sha256(content.encode()).hexdigest(), text)


# ---- internal/executionenv/client_test.go --------------------------------------

class Transport(HostCase):
    """The host client's tests, with sandgate in the fake worker's place:
    "hello" becomes process/list, "wait" a bash sleep, "disconnect" the
    worker going away (its stdin closed out of band)."""

    def test_transport_cancellation_and_no_replay(self):
        env = self.environment()
        c = env.connect()
        c.call("process/list", None)
        ctx = Ctx()
        ctx.cancel()
        before = (c.sequence, len(c.written))
        with self.assertRaises(Canceled, msg="cancelled call succeeded"):
            c.call("execute", {"call": {"name": "bash", "arguments": '{"command":"sleep 30"}'},
                               "permission_mode": "standard", "actor": env.session}, ctx)
        self.assertEqual((c.sequence, len(c.written)), before,
                         "a cancelled call was written")
        with self.assertRaises(DeadlineExceeded, msg="deadline ignored"):
            c.call("execute", {"call": {"name": "bash", "arguments": '{"command":"sleep 30"}'},
                               "permission_mode": "standard", "actor": env.session},
                   Ctx(0.05))
        rid = str(c.sequence)
        deadline = time.monotonic() + 5
        while not any(f.get("method") == "cancel" for f in c.written):
            self.assertLess(time.monotonic(), deadline, "no cancel frame written")
            time.sleep(0.01)
        cancel = [f for f in c.written if f.get("method") == "cancel"][0]
        self.assertEqual(cancel, {"token": env.token, "id": rid, "method": "cancel"})
        c.call("process/list", None)
        # The worker goes away while a call is in flight.
        box = []

        def slow():
            try:
                box.append(c.call("execute", {
                    "call": {"name": "bash", "arguments": '{"command":"sleep 30"}'},
                    "permission_mode": "standard", "actor": env.session}))
            except CallError as e:
                box.append(e)

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.5)
        c.sever()
        t.join(120 * SLACK)
        self.assertFalse(t.is_alive(), "the call outlived its worker")
        self.assertIsInstance(box[0], CallError, "connection loss succeeded")
        # The worker goes away on its own (its stdout ends); the client is
        # failed from then on and never starts another.
        self.assertTrue(c._done.wait(60 * SLACK), "the worker never went away")
        self.assertTrue(c.failed)
        with self.assertRaises(CallError, msg="failed worker was automatically restarted"):
            c.call("process/list", None)
        self.assertEqual(c.exit_code(), 0, c.diagnostic()[-2000:])
        self.assertEqual(len(env.clients), 1)

    def test_concurrent_responses_stay_with_caller(self):
        """16 concurrent calls each get their own reply (bash echoes the
        caller's number, so a crossed reply shows)."""
        env = self.environment()
        env.connect()
        out = [None] * 16

        def one(i):
            try:
                res = env.execute("bash", {"command": "echo caller-%02d" % i})
                text = hd.text_projection(res)
                sc = res.get("structured_content") or {}
                got = sc.get("stdout") if isinstance(sc, dict) and "stdout" in sc else text
                if "caller-%02d" % i not in got or got.count("caller-") != 1:
                    out[i] = AssertionError("wrong result: %s" % got[:300])
                else:
                    out[i] = True
            except Exception as e:
                out[i] = e

        threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120 * SLACK)
        for i, r in enumerate(out):
            if r is not True:
                self.fail("caller %d: %r" % (i, r))

    def test_program_retirement_keeps_process_control_available(self):
        """TestProgramRetirementKeepsProcessControlAvailable's part that is
        not run_code: a cancelled execute fails, its late reply is ignored,
        and the next execute proceeds."""
        env = self.environment()
        c = env.connect()
        ctx = Ctx()
        first = []

        def held():
            try:
                first.append(env.execute("bash", {"command": "sleep 30"}, ctx=ctx))
            except CallError as e:
                first.append(e)

        t = threading.Thread(target=held)
        t.start()
        time.sleep(1.0 * SLACK)
        rid = str(c.sequence)
        ctx.cancel()
        t.join(10)
        self.assertIsInstance(first[0], Canceled, "cancelled execute reported success")
        next_ctx = Ctx(5 * SLACK)
        res = env.execute("bash", {"command": "echo next"}, ctx=next_ctx)
        self.assertIn("next", hd.text_projection(res) + json.dumps(res))
        # The cancelled handler's one reply arrives and is dropped.
        deadline = time.monotonic() + 35 * SLACK
        while not any(d.get("id") == rid for d in c.dropped):
            self.assertLess(time.monotonic(), deadline,
                            "the cancelled execute never sent its reply")
            time.sleep(0.05)
        self.assertFalse(c.failed)
        c.call("process/list", None)

    def test_close_ends_the_worker_within_the_hosts_grace(self):
        """Client.Close: stdin closed, the close grace (3 s; 90 s for the
        cloud backends), then a kill.  A version-2+ host reports a worker
        that had to be killed, or exited non-zero, as a cleanup failure:
        sandgate must be gone by itself, with status 0, inside the grace,
        with a background process still running."""
        env = self.environment(session="close-grace")
        env.execute("bash", {"command": "sleep 60", "run_in_background": True})
        c = env.client
        took = env.close()
        self.assertEqual(c.exit_code(), 0, "the worker was killed or failed (%.1f s): %s"
                         % (took, c.diagnostic()[-2000:]))
        self.assertLess(took, env.close_grace)

    def test_program_retirement_run_code(self):
        """TestProgramRetirementKeepsProcessControlAvailable with run_code
        (issue 36): a cancelled program fails, the next program and an
        execute proceed."""
        env = self.environment()
        self.require_run_code(env)
        entered = threading.Event()

        def handler(cctx, call):
            entered.set()
            cctx.wait()
            raise CallError("context canceled")

        ctx = Ctx()
        first = []
        t = threading.Thread(target=lambda: first.append(self._catch(
            env.run_code, "await tools.wait({})", tools=[{"name": "wait"}],
            handler=handler, ctx=ctx)))
        t.start()
        self.assertTrue(entered.wait(10 * SLACK), "program never started")
        ctx.cancel()
        t.join(10)
        self.assertIsInstance(first[0], CallError, "cancelled program reported success")
        nxt = Ctx(5 * SLACK)
        res = env.execute("process", {"action": "list"}, ctx=nxt)
        self.assertIsInstance(res, dict)
        prog = env.run_code("return 9", ctx=nxt)
        self.assertEqual(prog.get("Value"), 9)

    @staticmethod
    def _catch(fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except CallError as e:
            return e


class ProgramTransport(HostCase):
    """server_test.go's run_code transport tests (issue 36)."""

    def test_worker_transport_program_cancellation(self):
        """TestWorkerTransportProgramCancellation."""
        env = self.environment(session="program-cancellation")
        self.require_run_code(env)
        cases = (("caller_cancellation", "await tools.wait({})", 0, True),
                 ("caller_cancellation_busy_guest", "tools.wait({}); for (;;) {}", 0, True),
                 ("explicit_timeout", "await tools.wait({})", 1000, False),
                 ("unawaited_call_cleanup",
                  "tools.wait({}); await tools.ready({}); return 7;", 0, False))
        for name, code, timeout_ms, cancel in cases:
            with self.subTest(name):
                entered, stopped = threading.Event(), threading.Event()

                def handler(cctx, call, entered=entered, stopped=stopped):
                    if call.get("name") == "wait":
                        entered.set()
                        cctx.wait()
                        stopped.set()
                        raise CallError("context canceled")
                    if call.get("name") == "ready":
                        while not entered.is_set() and not cctx.done:
                            time.sleep(0.01)
                        if cctx.done:
                            raise CallError("context canceled")
                        return {"content": [{"type": "text", "text": "ready"}]}
                    raise CallError("unexpected callback %r" % call.get("name"))

                ctx = Ctx()
                box = []

                def go():
                    try:
                        box.append(env.run_code(code, tools=[{"name": "wait"}, {"name": "ready"}],
                                                handler=handler, actor="a", mode="unconfined",
                                                timeout_ms=timeout_ms, ctx=ctx))
                    except CallError as e:
                        box.append(e)

                t = threading.Thread(target=go)
                t.start()
                self.assertTrue(entered.wait(10 * SLACK), "host callback did not start")
                if cancel:
                    ctx.cancel()
                t.join(10 * SLACK)
                self.assertFalse(t.is_alive(), "program did not finish")
                if cancel:
                    self.assertIsInstance(box[0], Canceled)
                elif timeout_ms:
                    self.assertEqual(box[0].get("Error"), "context deadline exceeded")
                else:
                    self.assertEqual((box[0].get("Error") or "", box[0].get("Value")), ("", 7))
                self.assertTrue(stopped.wait(10 * SLACK), "host callback outlived its program scope")
                nxt = env.run_code("return 9", actor="a", mode="unconfined", ctx=Ctx(10 * SLACK))
                self.assertEqual((nxt.get("Error") or "", nxt.get("Value")), ("", 9))

    def test_worker_transport_state_is_actor_scoped_and_volatile(self):
        """TestWorkerTransportStateIsActorScopedAndVolatile."""
        env = self.environment(session="state-conversation")
        self.require_run_code(env)

        def run(e, actor, code, want, failed):
            r = e.run_code(code, actor=actor, mode="unconfined", ctx=Ctx(10 * SLACK))
            self.assertEqual(bool(r.get("Error")), failed, json.dumps(r))
            if not failed:
                self.assertEqual(r.get("Value"), want, json.dumps(r))

        run(env, "root", 'store("checkpoint",{done:2}); return true;', True, False)
        run(env, "child", 'return typeof load("checkpoint");', "undefined", False)
        run(env, "root", 'store("checkpoint",3); throw new Error("failed");', None, True)
        run(env, "root", 'return load("checkpoint");', {"done": 2}, False)
        env.close()
        again = self.environment(session="state-conversation", store=env.store)
        run(again, "root", 'return typeof load("checkpoint");', "undefined", False)


# ---- the driver itself, against a scripted worker -------------------------------

SCRIPTED_WORKER = r"""
import json, sys
log = open(sys.argv[1], "a")
script = json.loads(sys.argv[2])
for line in sys.stdin:
    req = json.loads(line)
    log.write(line)
    log.flush()
    for out in script.get(req["method"], []):
        out = out.replace("$ID", req["id"])
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
log.write("EOF\n")
"""


class HostDriverFidelity(unittest.TestCase):
    """The driver keeps the host's rules (checked without sandgate)."""

    def worker(self, script, grace=3.0):
        import tempfile
        d = tempfile.mkdtemp(prefix="sg-host-fake-")
        log = os.path.join(d, "log")
        c = hd.Client([sys.executable, "-c", SCRIPTED_WORKER, log, json.dumps(script)],
                      close_grace=grace, token="t" * 64)
        self.addCleanup(lambda: (c.close(), __import__("shutil").rmtree(d, True)))
        return c, log

    def test_a_numeric_id_ends_the_transport(self):
        c, log = self.worker({"hello": ['{"id":1,"data":{}}']}, grace=1.0)
        with self.assertRaises(CallError) as cm:
            c.call("hello", None)
        self.assertIn("invalid execution response", str(cm.exception))
        self.assertTrue(c.failed)
        with self.assertRaises(CallError):
            c.call("hello", None)
        c._done.wait(5)
        with open(log) as f:
            self.assertTrue(f.read().endswith("EOF\n"), "stdin was not closed")

    def test_lines_the_hosts_struct_refuses(self):
        """An error that is not a string, an empty line, an array, a bare
        number: each ends the transport; a JSON null is an empty response
        the host drops."""
        for bad in ('{"id":"$ID","error":{"code":1}}', "", "[]", "7",
                    '{"id":"$ID","method":5}', '{"id":"$ID","data":NaN}'):
            with self.subTest(line=bad):
                c, _ = self.worker({"hello": [bad, '{"id":"$ID","data":{}}']}, grace=1.0)
                with self.assertRaises(CallError) as cm:
                    c.call("hello", None)
                self.assertIn("invalid execution response", str(cm.exception))
        c, _ = self.worker({"hello": ["null", '{"id":"$ID","data":{"ok":1}}']})
        self.assertEqual(c.call("hello", None), {"ok": 1})
        self.assertFalse(c.failed)

    def test_a_stray_line_ends_the_transport(self):
        c, _ = self.worker({"hello": ["ready", '{"id":"$ID","data":{}}']}, grace=1.0)
        with self.assertRaises(CallError):
            c.call("hello", None)
        self.assertEqual(c.invalid_line, b"ready")

    def test_frames_are_the_hosts(self):
        c, log = self.worker({
            "hello": ['{"id":"999","data":"stray"}', '{"id":"$ID","data":{"ok":true}}'],
            "slow": [],
            "run": ['{"method":"process","id":"","data":{"Type":"started","Cause":"",'
                    '"Process":{"id":"proc-00000001"}}}',
                    '{"method":"tool","parent_id":"$ID","id":"cb1","data":{"name":"x"}}']})
        events = []
        c.event = events.append
        self.assertEqual(c.call("hello", None), {"ok": True})
        self.assertEqual(c.dropped, [{"id": "999", "data": "stray"}])
        with self.assertRaises(DeadlineExceeded):
            c.call("slow", {"a": "<&>"}, Ctx(0.05))
        deadline = time.monotonic() + 5
        while len(c.written) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        answered = threading.Event()

        def handler(ctx, call):
            answered.set()
            return {"content": [{"type": "text", "text": "ok"}]}

        t = threading.Thread(target=lambda: self._swallow(c.call, "run", None, Ctx(3), handler))
        t.start()
        self.assertTrue(answered.wait(5))
        t.join(5)
        time.sleep(0.3)
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], '{"token":"%s","id":"1","method":"hello","data":null}'
                         % ("t" * 64))
        self.assertEqual(lines[1], '{"token":"%s","id":"2","method":"slow",'
                         '"data":{"a":"\\u003c\\u0026\\u003e"}}' % ("t" * 64))
        self.assertEqual(lines[2], '{"token":"%s","id":"2","method":"cancel"}' % ("t" * 64))
        self.assertEqual(json.loads(lines[4]), {"token": "t" * 64, "id": "cb1",
                                                "method": "callback", "data": {
                                                    "id": "cb1", "data": {"content": [
                                                        {"type": "text", "text": "ok"}]}}})
        self.assertEqual(events[0]["Type"], "started")

    def test_a_frame_over_16_mib_is_not_written_and_ends_the_client(self):
        c, log = self.worker({"hello": ['{"id":"$ID","data":{}}']})
        c.call("hello", None)
        with self.assertRaises(CallError) as cm:
            c.call("hello", {"x": "y" * hd.MAX_FRAME_BYTES})
        self.assertIn("exceeds transport limit", str(cm.exception))
        self.assertTrue(c.failed)

    @staticmethod
    def _swallow(fn, *a):
        try:
            fn(*a)
        except CallError:
            pass


if __name__ == "__main__":
    unittest.main()
