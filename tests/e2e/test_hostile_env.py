"""What comes back from inside an environment is hostile.

The gateway runs sg-helper steps in the environment (or, on backends whose
files are on this host, the same code in-process against the environment's
files) and acts on what they print and on the files they read: process
records, spools, the stamp counter and its lock.  A command may rewrite
all of them, and on remote backends sg-helper itself.  Whatever it does,
the gateway must keep answering within its bounds: every request gets a
reply, and the shutdown ends inside its budget.

Runs against any profile; a test skips what the environment lacks (a
shell tool it needs).
"""

import glob
import json
import os
import shutil
import stat
import struct
import tempfile
import threading
import time
import unittest

from sgclient import CONFIG, GatewayTestCase, SLACK, shell_quote

# The supervisor runs a command as `bash -l -c COMMAND`, so $PPID is the
# supervisor, whose argv (a fork of `sg-helper proc spawn`) names the
# control directory after --ctl.
FIND_CTL = r"""ctl=$(tr '\0' '\n' </proc/$PPID/cmdline | sed -n '/^--ctl$/{n;p;q;}')"""

# Take the lock every record write and every `proc wait` takes (the
# control directory's .seq) and keep it for ten minutes in a process that
# outlives its supervisor; the test then kills the supervisor: a
# `running` record whose supervisor is gone is rewritten as failed (lost) under
# that very lock, and its pidfd wakes the gateway's process watcher at once.
# (HUP is ignored: the supervisor's death hangs up the command's terminal.)
HOLD_LOCK = FIND_CTL + r"""
trap '' HUP
[ -n "$ctl" ] || exit 3
exec 9>>"$ctl/.seq" || exit 4
flock 9 || exit 5
: > .sg-lock-held
exec sleep 600
"""


def kill_supervisor(test, pid):
    """SIGKILL the supervisor of process `pid`, from this host.

    A process cannot kill its supervisor itself (from Landlock ABI 6 it
    starts in a domain of its own: docs/security.md), but a supervisor
    can still die (the OOM killer, an operator), and the gateway must
    cope.  It is found by its command line (a fork of `sg-helper proc
    spawn --id ID`), so the environment's processes must be processes of
    this host, as they are with every backend and fake the suite runs.
    """
    want = ("--id", pid)
    killed = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "spawn" in argv and any(argv[i:i + 2] == list(want) for i in range(len(argv))):
            try:
                os.kill(int(d), 9)
                killed += 1
            except ProcessLookupError:
                pass
    if not killed:
        test.skipTest("the supervisor of %s is not a process of this host" % pid)


class HeldRecordLock(GatewayTestCase):
    """A process of the environment holds the process records' lock."""

    def hold(self, gw):
        r = gw.sh("command -v flock && command -v sed", "unconfined")
        if r["exit_code"] != 0 or "flock" not in r["output"]:
            self.skipTest("no flock or sed in the environment")
        pid = gw.start(HOLD_LOCK, "unconfined")["id"]
        # The supervisor is killed once the lock is held: its record
        # cannot turn `lost` while the lock is held, so wait for the
        # moment the command is surely past `flock`.
        time.sleep(2 * SLACK)
        # Where the command cannot find the control directory from its
        # parent (a backend that runs it through another process), it
        # holds nothing, and the test has nothing to show.
        # Asked with a file tool: a bash call may itself need the lock it
        # would look for (its record), and wait on it for SG's 5 s.
        held = "error" not in gw.execute("read_file", {"path": ".sg-lock-held"}, "unconfined")
        if not held:
            self.skipTest("the command could not take the records' lock on this backend")
        kill_supervisor(self, pid)
        return pid

    def test_process_start_still_replies(self):
        gw = self.gateway(binding={"remove_workspace_on_exit": True})
        self.hold(gw)
        # A spawn writes its record under the lock; it may fail, but it
        # must answer (it used to wait on flock(2) for ever, uncancellable).
        r = gw.call("process/start", {"command": "echo hi"}, timeout=60 * SLACK)
        self.assertIn("error", r, r)
        # And the connection still serves what needs no lock.
        self.assertEqual(gw.sh_ok("echo alive"), "alive\n")

    def test_shutdown_ends_inside_its_budget(self):
        budget = 30000
        gw = self.gateway(extra_args=["--shutdown-budget-ms", str(budget)],
                          binding={"remove_workspace_on_exit": True})
        self.hold(gw)
        # The watcher, woken by the supervisor's death, now wants the
        # lock; the shutdown stops the watcher first.
        time.sleep(1)
        rc, err, took = gw.shutdown(timeout=budget / 1000 + 15 * SLACK)
        self.assertLess(took, budget / 1000 + 5 * SLACK, err)


# The command's own process id, from the same argv (after --id).
FIND_ID = r"""id=$(tr '\0' '\n' </proc/$PPID/cmdline | sed -n '/^--id$/{n;p;q;}')"""

# Wait for the command's record (the supervisor stores it once the child
# runs), then do what follows with $ctl and $id set.
OWN_RECORD = FIND_CTL + "\n" + FIND_ID + r"""
[ -n "$ctl" ] && [ -n "$id" ] || exit 3
i=0
while [ ! -e "$ctl/$id/record.json" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
"""

CANARY = "SG-HOSTILE-outside-never-to-be-read\n"


def host_spool(gw, name, timeout=10.0):
    """The host path of ctl/proc/<name> of the gateway's local environment."""
    deadline = time.monotonic() + timeout * SLACK
    while time.monotonic() < deadline:
        found = glob.glob(os.path.join(gw.state_dir, "local", "*", "ctl", "proc", name))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no %s in the environment's process spool" % name)


class LinkedProcessDirectory(GatewayTestCase):
    """A command replaces its process directory with a link to a host directory.

    On the local backend the records and spools are read and written by
    the gateway, on the host: O_NOFOLLOW on the file's own name did not
    stop a link one step up, so process/read returned a host file and
    process/stop wrote a stop marker and a record into the host directory.
    """

    def setUp(self):
        if CONFIG:
            self.skipTest("the link must lead to a directory of the gateway's host")
        self.outside = tempfile.mkdtemp(prefix="sg-e2e-hostile-")
        self.addCleanup(shutil.rmtree, self.outside, True)

    def test_link_is_not_followed(self):
        gw = self.gateway(binding={"remove_workspace_on_exit": True})
        r = gw.sh("command -v sed", "unconfined")
        if r["exit_code"] != 0 or "sed" not in r["output"]:
            self.skipTest("no sed in the environment")
        # A spool of the outside's own: the bytes and a matching progress.
        with open(os.path.join(self.outside, "out"), "w") as f:
            f.write(CANARY)
        total = len(CANARY)
        with open(os.path.join(self.outside, "progress"), "wb") as f:
            f.write(struct.pack("=QQQ", total, total, total ^ total ^ 0x73672d70726f6373))
        swap = OWN_RECORD + r"""
mv "$ctl/$id" "$ctl/$id.real" && ln -s %s "$ctl/$id" || exit 4
exec sleep 600
""" % shell_quote(self.outside)
        pid = gw.start(swap, "unconfined")["id"]
        real = host_spool(gw, pid + ".real/record.json")
        # The outside holds this session's own live record: all a forger
        # needs is a directory with the spool's file names.
        shutil.copyfile(real, os.path.join(self.outside, "record.json"))
        with open(os.path.join(self.outside, "record.json"), "rb") as f:
            record = f.read()
        self.assertTrue(os.path.islink(host_spool(gw, pid)))
        r = gw.call("process/read", {"id": pid, "options": {"OffsetBytes": 0, "MaxBytes": 0,
                                                 "Wait": 0, "MinDwell": 0}})
        self.assertNotIn("SG-HOSTILE", json.dumps(r), "the process directory link was followed")
        self.assertIn("error", r, r)
        r = gw.call("process/stop", {"id": pid}, timeout=30 * SLACK)
        self.assertIn("error", r, r)
        time.sleep(0.5)
        self.assertEqual(sorted(os.listdir(self.outside)), ["out", "progress", "record.json"],
                         "a file was written into the host directory")
        with open(os.path.join(self.outside, "record.json"), "rb") as f:
            self.assertEqual(f.read(), record, "the host directory's record was rewritten")


class FifoInProcessDirectory(GatewayTestCase):
    """A command puts a FIFO where the gateway opens a file of its process.

    open(2) of a FIFO waits for the other side, and no cancel interrupts
    it: on the local backend that was a worker of the gateway (process/read
    on the spool), or the process watcher holding the records' lock (the
    rewrite of a dead supervisor's record through record.tmp), so the
    shutdown never ended.
    """

    def setUp(self):
        if CONFIG:
            self.skipTest("the FIFO must be opened by the gateway itself")
        self.fifos = []
        # Release whatever the old code left waiting in open(2).
        self.addCleanup(self.release)

    def release(self):
        for path in self.fifos:
            try:
                os.close(os.open(path, os.O_RDWR | os.O_NONBLOCK))
            except OSError:
                pass

    def fifo(self, gw, name):
        r = gw.sh("command -v sed && command -v mkfifo", "unconfined")
        if r["exit_code"] != 0 or "mkfifo" not in r["output"]:
            self.skipTest("no sed or mkfifo in the environment")
        command = OWN_RECORD + r"""
rm -f "$ctl/$id/%s" && mkfifo "$ctl/$id/%s" || exit 4
exec sleep 600
""" % (name, name)
        pid = gw.start(command, "unconfined")["id"]
        path = os.path.join(os.path.dirname(host_spool(gw, pid + "/record.json")), name)
        self.fifos.append(path)
        deadline = time.monotonic() + 10 * SLACK
        while time.monotonic() < deadline:
            try:
                if stat.S_ISFIFO(os.lstat(path).st_mode):
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        return pid

    def test_read_of_a_fifo_spool_replies(self):
        gw = self.gateway(binding={"remove_workspace_on_exit": True})
        pid = self.fifo(gw, "out")
        r = gw.call("process/read", {"id": pid, "options": {"OffsetBytes": 0, "MaxBytes": 0,
                                                 "Wait": 0, "MinDwell": 0}}, timeout=15 * SLACK)
        self.assertIn("error", r, r)
        self.assertEqual(gw.sh_ok("echo alive"), "alive\n")

    def test_fifo_record_tmp_leaves_the_shutdown_inside_its_budget(self):
        budget = 20000
        gw = self.gateway(extra_args=["--shutdown-budget-ms", str(budget)],
                          binding={"remove_workspace_on_exit": True})
        # The supervisor dies: the watcher rewrites the record as `lost`
        # through record.tmp, under the records' lock.
        pid = self.fifo(gw, "record.tmp")
        kill_supervisor(self, pid)
        deadline = time.monotonic() + 10 * SLACK
        while True:
            r = gw.call("process/get", {"id": pid}, timeout=30 * SLACK)
            if r.get("data", {}).get("status") != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertNotIn("running", json.dumps(r.get("data", {}).get("status")), r)
        rc, err, took = gw.shutdown(timeout=budget / 1000 + 15 * SLACK)
        self.assertLess(took, budget / 1000 + 5 * SLACK, err)



# Move the control directory's `proc` aside and put a link to a host
# directory (HOST) in its place; the sandbox gets a directory at HOST of
# its own, so that a spawn inside it still succeeds.
SWAP_PROC = OWN_RECORD + r"""
mv "$ctl" "$ctl.real" && ln -s %(host)s "$ctl" || exit 4
mkdir -p %(host)s
exec sleep 600
"""


class LinkedProcessTable(GatewayTestCase):
    """A command replaces the control directory's `proc` with a link.

    On the local backend the gateway runs the process steps other than
    the spawn in-process, on the host, and reached ctl/proc by its path:
    a link there made it list and read records and spools of a host
    directory of the command's choosing, and create files there (the
    watcher's .seq).  The process table is reached once beneath ctl,
    without following a link.
    """

    def setUp(self):
        if CONFIG:
            self.skipTest("the link must lead to a directory of the gateway's host")
        self.outside = tempfile.mkdtemp(prefix="sg-e2e-hostile-")
        self.addCleanup(shutil.rmtree, self.outside, True)

    def swap(self):
        gw = self.gateway(binding={"remove_workspace_on_exit": True})
        if gw.backend != "local":
            self.skipTest("only the local backend runs process steps on the host")
        if not gw.facts.get("isolation", {}).get("host_filesystem_restricted"):
            self.skipTest("without bubblewrap a command writes the host's directories itself")
        r = gw.sh("command -v sed", "unconfined")
        if r["exit_code"] != 0 or "sed" not in r["output"]:
            self.skipTest("no sed in the environment")
        pid = gw.start(SWAP_PROC % {"host": shell_quote(self.outside)},
                       "unconfined")["id"]
        table = host_spool(gw, "")
        deadline = time.monotonic() + 10 * SLACK
        while not os.path.islink(table.rstrip("/")) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.islink(table.rstrip("/")), "the command did not swap ctl/proc")
        return gw, pid, table.rstrip("/")

    def test_nothing_is_written_there(self):
        # The supervisor's death wakes the process watcher, which looks
        # at the table (and made its lock file there).
        gw, pid, table = self.swap()
        kill_supervisor(self, pid)
        # Each may fail; none may reach the host directory.
        started = gw.call("process/start", {"command": "echo SG-HOSTILE-spooled"},
                          timeout=60 * SLACK)
        gw.call("process/list")
        gw.call("process/read", {"id": pid, "options": {"OffsetBytes": 0, "MaxBytes": 0,
                                             "Wait": 0, "MinDwell": 0}})
        if "data" in started and "id" in started["data"]:
            gw.call("process/read", {"id": started["data"]["id"], "options": {
                "OffsetBytes": 0, "MaxBytes": 0, "Wait": 0, "MinDwell": 0}})
        gw.call("process/stop", {"id": pid}, timeout=30 * SLACK)
        # The process watcher polls the table too.
        time.sleep(2 * SLACK)
        self.assertEqual(os.listdir(self.outside), [],
                         "the gateway wrote into the host directory ctl/proc led to")
        # The connection still answers.  (bash itself runs under the
        # process table the command moved: whether it still works depends
        # on what the command left in its place.)
        self.assertIn("error", gw.call("process/get", {"id": "proc-00000000"}))

    def test_nothing_is_read_from_there(self):
        gw, pid, table = self.swap()
        # A live record of this session under a new id, with a spool of
        # the host directory's own.
        with open(os.path.join(table + ".real", pid, "record.json")) as f:
            record = json.load(f)
        forged = "proc-" + "5a" * 4
        record["id"] = forged
        os.mkdir(os.path.join(self.outside, forged))
        with open(os.path.join(self.outside, forged, "record.json"), "w") as f:
            json.dump(record, f)
        with open(os.path.join(self.outside, forged, "out"), "w") as f:
            f.write(CANARY)
        total = len(CANARY)
        with open(os.path.join(self.outside, forged, "progress"), "wb") as f:
            f.write(struct.pack("=QQQ", total, total, total ^ total ^ 0x73672d70726f6373))
        replies = [
            gw.call("process/list"),
            gw.call("process/get", {"id": forged}),
            gw.call("process/read", {"id": forged, "options": {"OffsetBytes": 0, "MaxBytes": 0,
                                                    "Wait": 0, "MinDwell": 0}}),
        ]
        for r in replies:
            self.assertNotIn(forged, json.dumps(r.get("data")),
                             "a record of the host directory was read: %r" % r)
            self.assertNotIn("SG-HOSTILE", json.dumps(r), "a spool of the host directory was read")
        self.assertIn("error", replies[2], replies[2])
        self.assertEqual(sorted(os.listdir(self.outside)), [forged])
        self.assertEqual(sorted(os.listdir(os.path.join(self.outside, forged))),
                         ["out", "progress", "record.json"],
                         "a file was written into the host directory")


# Forge N records of this session (SESSION) that say `running`, each
# naming the command itself as supervisor and process group (a live
# process of the environment, so each stop waits its grace), and ignore
# SIGTERM so that it does.
FORGE = OWN_RECORD + r"""
trap '' TERM
i=0
while [ $i -lt %(n)d ]; do
  i=$((i+1))
  mkdir "$ctl/proc-$(printf %%08x $i)" || exit 5
  printf '{"id":"proc-%%08x","operation_id":null,"root_thread_id":"%%s","command":"x","argv":null,"cwd":"/","status":"running","pid":%%s,"exit_code":null,"signal":null,"started_at":null,"ended_at":null,"managed":true,"supervisor_pid":%%s,"supervisor_start":0,"pid_ns":0,"pgid":%%s,"timeout_ms":0,"retain":1024,"stamp":1,"birth":1}' \
    "$i" %(session)s $$ $$ $$ >"$ctl/proc-$(printf %%08x $i)/record.json" || exit 6
done
echo forged
exec sleep 600
"""


def threads_of(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class ForgedRunningRecords(GatewayTestCase):
    """The environment forges many `running` records of the session.

    The shutdown stops every running process of `proc list`'s reply at
    once; it started one thread per record, so an environment's forged
    records set the number of threads the gateway made.
    """

    def test_shutdown_threads_are_bounded(self):
        if CONFIG:
            self.skipTest("the gateway's threads are counted on this host")
        n = 300
        gw = self.gateway(binding={"remove_workspace_on_exit": True})
        r = gw.sh("command -v sed", "unconfined")
        if r["exit_code"] != 0 or "sed" not in r["output"]:
            self.skipTest("no sed in the environment")
        pid = gw.start(FORGE % {"n": n, "session": shell_quote(gw.session)},
                       "unconfined")["id"]
        out = gw.read(pid, offset=0, wait_ns=int(30 * SLACK * 10**9), min_dwell_ns=0)
        self.assertIn("forged", out["Output"], out)
        listed = gw.ok("process/list")
        self.assertGreaterEqual(len(listed), n, "the forged records are not listed")
        base = threads_of(gw.proc.pid)
        peak = [base]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], threads_of(gw.proc.pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            rc, err, took = gw.shutdown(timeout=60 * SLACK)
        finally:
            done.set()
            sampler.join()
        self.assertLess(peak[0], base + 40,
                        "the shutdown ran %d threads for %d forged records (%d before)"
                        % (peak[0], n, base))


if __name__ == "__main__":
    unittest.main()
