"""The processes sandgate runs on this host, outside the sandbox (local backend).

On the local backend a command's way into its sandbox passes through
processes that run on this host with sandgate's user and sandgate's view:
`sg-helper cgroup-exec`, bubblewrap, and the status file the gateway reads
back.  Two attackers try to reach them:

- the host, through a request's `env` (run_command, process/start) or a
  binding's `forward_env` object: LD_PRELOAD naming a library it wrote into
  the workspace must never load into a process outside the sandbox (it
  would run as sandgate, read sandgate's environment, and leave the
  cgroup before the command joins it);
- a command, through the file `sg-helper status` writes into the
  environment's /tmp when the command ends: a FIFO or a link where the
  status goes must neither hang the gateway nor let the unconfined status
  writer overwrite a file the command may not write itself (a process
  record in the control directory);
- a command, through the process records the gateway reads and acts on
  (they live where the environment writes): a record naming a host
  process group, or one past a pid_t, is never signalled by process/stop
  or by the environment's removal; a record hard-linked under other ids is
  not read again;
- a background process (it shares the host's pid namespace) and a command
  with network (it shares the host's abstract unix sockets), in any
  permission mode, `full` included: with Landlock ABI 6 neither signals,
  nor connects to an abstract socket of, a process outside its sandbox.
"""

import base64
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
import unittest

from escapes import abstract_socket_probe, setuid_leftovers
from sgclient import CONFIG, ROOT, GatewayTestCase

# Loaded into a process, it leaves a mark in a directory only the host sees
# (the sandbox has a private /tmp), naming the process it ran in.
PRELOAD_C = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void)
{
	char exe[256] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f;

	if (access("@DIR@", F_OK) != 0)
		return;
	if (n > 0)
		exe[n] = 0;
	f = fopen("@DIR@/loaded", "a");
	if (f) {
		fprintf(f, "pid %d exe %s\n", getpid(), exe);
		fclose(f);
	}
}
"""

# Run inside the environment: find this command's own status file in its
# parent's argv (sg-helper status --file F -- ...), put a FIFO or a link to
# a process record there, and guess the next few names as well.
PLANT = textwrap.dedent(r"""
    import os, re, sys
    args = open('/proc/%d/cmdline' % os.getppid(), 'rb').read().split(b'\0')
    own = [a.decode() for a in args if b'/.status-' in a][0]
    m = re.match(r'(.*-)(\d+)((?:-[0-9a-f]+)?)$', own)
    names = [own] + [m.group(1) + str(int(m.group(2)) + i) + m.group(3) for i in range(1, 6)]
    for name in names:
        if sys.argv[1] == 'fifo':
            os.mkfifo(name)
        else:
            os.symlink(sys.argv[2], name)
""")


class HostSide(GatewayTestCase):

    def setUp(self):
        if CONFIG:
            self.skipTest("the local backend's own processes")
        if not shutil.which("bwrap"):
            self.skipTest("without bubblewrap, commands run on this host itself")

    def gateway_in_sandbox(self, **binding):
        gw = self.gateway(init=False)
        info = gw.initialize(**binding)
        if info["environment"]["facts"].get("mechanism") != "bubblewrap":
            self.skipTest("bubblewrap cannot run here")
        return gw

    def gateway_in_scope(self):
        """A gateway whose commands start in a Landlock scope; (gw, facts)."""
        gw = self.gateway_in_sandbox()
        facts = gw.init_reply["environment"]["facts"]
        if (facts.get("landlock_abi") or 0) < 6:
            self.skipTest("needs Landlock ABI 6 (signal and socket scoping)")
        return gw, facts

    # -- the host's variables -------------------------------------------

    def library(self):
        if not shutil.which("cc"):
            self.skipTest("no C compiler")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-preload-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        src = os.path.join(self.dir, "lib.c")
        with open(src, "w") as f:
            f.write(PRELOAD_C.replace("@DIR@", self.dir))
        lib = os.path.join(self.dir, "lib.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], check=True)
        return lib

    def plant_library(self, gw, lib):
        """The library written into the workspace; its path on this host."""
        with open(lib, "rb") as f:
            data = base64.b64encode(f.read()).decode()
        gw.tool_ok("write_file", {"path": "lib.so", "content": data, "encoding": "base64"})
        info = gw.tool_ok("run_command", {"command": "cat /proc/self/mountinfo"})["content"]
        m = re.search(r"^\S+ \S+ \S+ (\S+) %s " % re.escape(ROOT), info, re.M)
        self.assertIsNotNone(m, info)
        return m.group(1) + "/lib.so"

    def assert_not_loaded(self):
        mark = os.path.join(self.dir, "loaded")
        if os.path.exists(mark):
            with open(mark) as f:
                self.fail("a library the request named ran outside the sandbox:\n" + f.read())

    def test_run_command_env_never_reaches_the_host(self):
        lib = self.library()
        gw = self.gateway_in_sandbox()
        path = self.plant_library(gw, lib)
        for mode in ("read_only", "full"):
            r = gw.tool("run_command", {"command": "echo ran", "env": {"LD_PRELOAD": path}}, mode)
            self.assertIn("ran", r["content"])
        self.assert_not_loaded()

    def test_run_command_env_still_reaches_the_command(self):
        gw = self.gateway_in_sandbox()
        r = gw.tool_ok("run_command", {"command": 'printf "%s|%s" "$A" "$B"',
                                       "env": {"A": "one two", "B": "x=y\nz"}})
        self.assertEqual(r["content"], "one two|x=y\nz")

    def test_process_start_env_never_reaches_the_host(self):
        lib = self.library()
        gw = self.gateway_in_sandbox()
        path = self.plant_library(gw, lib)
        pid = gw.start("echo started", env={"LD_PRELOAD": path})["id"]
        deadline = time.time() + 10
        while time.time() < deadline:
            r = gw.call("process/get", {"id": pid})
            if r["data"]["status"] != "running":
                break
            time.sleep(0.1)
        self.assert_not_loaded()

    def test_binding_forward_env_never_reaches_the_host(self):
        lib = self.library()
        gw = self.gateway_in_sandbox(environment={"forward_env": {"LD_PRELOAD": lib}})
        gw.tool("run_command", {"command": "true"})
        self.assert_not_loaded()

    # -- signals ----------------------------------------------------------

    def test_confined_background_process_cannot_signal_the_host(self):
        gw, _ = self.gateway_in_scope()
        for mode in ("read_only", "standard"):
            with self.subTest(mode=mode):
                victim = self.victim()
                pid = gw.start("kill -TERM %d" % victim.pid, permission_mode=mode)["id"]
                gw.wait_ended(pid)
                time.sleep(0.3)
                self.assertIsNone(victim.poll(), "a %s background process killed host pid %d"
                                  % (mode, victim.pid))

    def test_full_background_process_cannot_signal_the_host(self):
        # `full` lifts sandgate's own confinement, not the environment's:
        # a background process shares the host's pid namespace, so the
        # sandbox must still keep its signals inside.
        gw, _ = self.gateway_in_scope()
        victim = self.victim()
        for target in (victim.pid, gw.proc.pid):
            pid = gw.start("kill -TERM %d; echo kill=$?" % target, permission_mode="full")["id"]
            out, _ = gw.read_all(pid)
            time.sleep(0.3)
            self.assertIn("kill=1", out)
        self.assertIsNone(victim.poll(), "a full-mode background process killed host pid %d"
                          % victim.pid)
        self.assertIsNone(gw.proc.poll(), "a full-mode background process killed the gateway")
        # Inside, it still signals what it started, and the gateway still
        # stops it.
        pid = gw.start("sleep 30 & k=$!; kill -TERM $k; wait $k; echo status=$?",
                       permission_mode="full")["id"]
        out, _ = gw.read_all(pid)
        self.assertIn("status=143", out)
        pid = gw.start("sleep 300", permission_mode="full")["id"]
        gw.ok("process/stop", {"id": pid})
        self.assertEqual(gw.wait_ended(pid)["status"], "stopped")

    def test_background_process_cannot_kill_its_supervisor(self):
        # A process's supervisor is what stops whatever the process moves
        # out of its group; killed, it left that running for nobody to stop.
        gw, _ = self.gateway_in_scope()
        for mode in ("full", "standard"):
            with self.subTest(mode=mode):
                # `command` runs as `sh -c COMMAND`: $PPID is the supervisor.
                pid = gw.start("kill -KILL $PPID; echo kill=$?; sleep 0.5; echo end",
                               permission_mode=mode)["id"]
                out, last = gw.read_all(pid)
                self.assertIn("kill=1", out, "a %s background process killed its supervisor" % mode)
                self.assertIn("end", out)
                self.assertEqual((last["Process"]["status"], last["Process"]["exit_code"]),
                                 ("exited", 0), last["Process"])

    def test_nothing_sets_a_setuid_or_setgid_bit(self):
        # The workspace is on this host, written as sandgate's user: where
        # that is root, a setuid file there is a setuid-root program for
        # whoever else on the host can reach it.
        gw = self.gateway_in_sandbox()
        self.assertEqual(setuid_leftovers(gw), [])
        err = gw.tool_error("write_file", {"path": "w", "content": "x", "mode": "4755"})
        self.assertIn("invalid_argument", err)
        self.assertIn("setuid", err)
        res = gw.tool("stat_path", {"path": "w"})
        self.assertTrue(res["is_error"], res)

    def test_full_command_cannot_reach_a_host_abstract_socket(self):
        # With network allowed, commands share the host's network namespace
        # and with it the abstract unix sockets of the host's daemons.
        gw, facts = self.gateway_in_scope()
        if facts["isolation"].get("network_isolated"):
            self.skipTest("the profile has no network, so no shared abstract sockets")
        probe = abstract_socket_probe(self)
        r = gw.tool("run_command", {"argv": probe}, "full")
        if "No such file" in r["content"] and "python3" in r["content"]:
            self.skipTest("no python3 in the sandbox")
        self.assertIn("refused", r["content"], "a full-mode command reached a host abstract socket")
        pid = gw.start(argv=probe, permission_mode="full")["id"]
        out, _ = gw.read_all(pid)
        self.assertIn("refused", out, "a full-mode background process reached a host abstract socket")

    # -- forged process records ----------------------------------------

    def forge(self, gw, pid, pgid):
        """A full-mode command rewrites process pid's record to name pgid."""
        script = textwrap.dedent("""
            import json, os, sys
            d = '/run/sandgate/ctl/proc/' + sys.argv[1]
            r = json.load(open(d + '/record.json'))
            r['pgid'] = int(sys.argv[2])
            open(d + '/forged.tmp', 'w').write(json.dumps(r))
            os.rename(d + '/forged.tmp', d + '/record.json')
        """)
        r = gw.tool("run_command", {"argv": ["python3", "-c", script, pid, str(pgid)]}, "full")
        if "No such file" in r["content"] and "python3" in r["content"]:
            self.skipTest("no python3 in the sandbox")
        self.assertFalse(r["is_error"], r)

    def victim(self):
        v = subprocess.Popen(["sleep", "300"], start_new_session=True)
        self.addCleanup(v.wait)
        self.addCleanup(v.kill)
        return v

    def test_stop_never_signals_a_group_a_record_forges(self):
        gw = self.gateway_in_sandbox()
        for name, forged in (("the victim's group", 0), ("past pid_t", 1 << 32)):
            with self.subTest(pgid=name):
                v = self.victim()
                pid = gw.start("sleep 60", permission_mode="full")["id"]
                self.forge(gw, pid, forged + v.pid)
                r = gw.call("process/stop", {"id": pid, "grace_ms": 100}, timeout=30)
                self.assertIn("error", r, r)
                time.sleep(0.3)
                self.assertIsNone(v.poll(), "process/stop signalled a host process group")

    def test_shutdown_never_signals_a_group_a_record_forges(self):
        v = self.victim()
        gw = self.gateway_in_sandbox(remove_workspace_on_exit=True)
        pid = gw.start("sleep 60", permission_mode="full")["id"]
        self.forge(gw, pid, v.pid)
        gw.close_stdin()
        gw.wait_exit(60)
        time.sleep(0.3)
        self.assertIsNone(v.poll(), "removing the environment signalled a host process group")

    def test_a_record_linked_under_other_ids_is_not_read(self):
        # A record costs the gateway its size once per id it is read under;
        # hard links would multiply that at no cost to the disk.
        gw = self.gateway_in_sandbox()
        pid = gw.start("sleep 60", permission_mode="full")["id"]
        link = textwrap.dedent("""
            import os, sys
            d = '/run/sandgate/ctl/proc/'
            for i in range(5):
                os.mkdir(d + 'p-linked%d' % i)
                os.link(d + sys.argv[1] + '/record.json', d + 'p-linked%d/record.json' % i)
        """)
        r = gw.tool("run_command", {"argv": ["python3", "-c", link, pid]}, "full")
        if "No such file" in r["content"] and "python3" in r["content"]:
            self.skipTest("no python3 in the sandbox")
        self.assertFalse(r["is_error"], r)
        # Its own record now has six names, so it is no longer read either.
        listed = gw.call("process/list", {})["data"]["processes"]
        self.assertLessEqual(len(listed), 1, [p["id"] for p in listed])

    # -- the status file -------------------------------------------------

    def test_fifo_at_the_status_file_hangs_nothing(self):
        gw = self.gateway_in_sandbox()
        # Its own status file and the next ones' (as far as it can guess).
        r = gw.tool("run_command", {"argv": ["python3", "-c", PLANT, "fifo"], "timeout_ms": 10000},
                    timeout=30)
        if "No such file" in r["content"] and "python3" in r["content"]:
            self.skipTest("no python3 in the sandbox")
        self.assertFalse(r.get("metadata", {}).get("timed_out"), r)
        r = gw.tool("run_command", {"command": "echo hello", "timeout_ms": 10000}, timeout=30)
        self.assertEqual(r["content"], "hello\n")

    def test_link_at_the_status_file_writes_nothing_through_it(self):
        gw = self.gateway_in_sandbox()
        pid = gw.start("sleep 60")["id"]
        record = "/run/sandgate/ctl/proc/%s/record.json" % pid
        before = gw.call("process/get", {"id": pid})
        self.assertIn("data", before, before)
        r = gw.tool("run_command", {"argv": ["python3", "-c", PLANT, "link", record]}, timeout=30)
        if "No such file" in r["content"] and "python3" in r["content"]:
            self.skipTest("no python3 in the sandbox")
        gw.tool("run_command", {"command": "exit 3"})
        after = gw.call("process/get", {"id": pid})
        self.assertIn("data", after, after)
        self.assertEqual(after["data"]["status"], "running")
        stop = gw.call("process/stop", {"id": pid})
        self.assertIn("data", stop, stop)


if __name__ == "__main__":
    unittest.main()
