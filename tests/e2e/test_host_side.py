"""The processes sandgate runs on this host, outside the sandbox (local backend).

On the local backend a command's way into its sandbox passes through
processes that run on this host with sandgate's user and sandgate's view:
`sg-helper cgroup-exec`, bubblewrap, and the process supervisor whose
final record the gateway reads back.  Two attackers try to reach them:

- the host, through the variables it forwards (binding.environment, which
  every command gets) or process/start's `env`: LD_PRELOAD naming a library
  (one it wrote into the workspace, or one on this host) must never load
  into a process outside the sandbox (it would run as sandgate, read
  sandgate's environment, and leave the cgroup before the command joins
  it);
- a command, through the file its supervisor writes when the command ends
  (record.tmp in the command's own process directory, which an
  `unconfined` command can write; bash runs every command as a process): a FIFO or
  a link there must neither hang the gateway nor let the supervisor write
  through the link into another process's record;
- a command, through the process records the gateway reads and acts on
  (they live where the environment writes): a record naming a host
  process group, or one past a pid_t, is never signalled by process/stop
  or by the environment's removal; a record hard-linked under other ids is
  not read again;
- a background process (it shares the host's pid namespace) and a command
  with network (it shares the host's abstract unix sockets), in any
  permission mode, `unconfined` included: with Landlock ABI 6 neither signals,
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
from sgclient import CONFIG, ROOT, GatewayTestCase, shell_quote

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

# Run inside the environment: find this command's own process directory in
# its supervisor's argv (sg-helper proc spawn --ctl C --id ID, an ancestor),
# put a FIFO or a link to another process's record where the supervisor
# writes its final record (ID/record.tmp), and say where.
PLANT = textwrap.dedent(r"""
    import os, sys
    pid = os.getppid()
    while pid > 1:
        args = [a.decode() for a in open('/proc/%d/cmdline' % pid, 'rb').read().split(b'\0')]
        if '--ctl' in args and '--id' in args:
            break
        pid = int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])
    name = os.path.join(args[args.index('--ctl') + 1], args[args.index('--id') + 1],
                        'record.tmp')
    if sys.argv[1] == 'fifo':
        os.mkfifo(name)
    else:
        os.symlink(sys.argv[2], name)
    print('planted', name)
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
        # write_file takes text only: the bytes go through base64(1).
        gw.write("lib.so.b64", data)
        gw.sh_ok("base64 -d lib.so.b64 > lib.so && rm lib.so.b64")
        info = gw.sh_ok("cat /proc/self/mountinfo")
        m = re.search(r"^\S+ \S+ \S+ (\S+) %s " % re.escape(ROOT), info, re.M)
        self.assertIsNotNone(m, info)
        return m.group(1) + "/lib.so"

    def assert_not_loaded(self):
        mark = os.path.join(self.dir, "loaded")
        if os.path.exists(mark):
            with open(mark) as f:
                self.fail("a library the request named ran outside the sandbox:\n" + f.read())

    def test_forwarded_environment_never_reaches_the_host(self):
        # The host's forwarded variables reach every command: bash in
        # every mode, and a background process.
        lib = self.library()
        gw = self.gateway_in_sandbox(environment={"LD_PRELOAD": lib})
        for mode in ("standard", "read_only", "unconfined"):
            self.assertIn("ran", gw.sh("echo ran", mode)["output"])
        gw.wait_ended(gw.start("echo started")["id"])
        self.assert_not_loaded()

    def test_forwarded_environment_still_reaches_the_command(self):
        gw = self.gateway_in_sandbox(environment={"A": "one two", "B": "x=y\nz"})
        self.assertEqual(gw.sh_ok('printf "%s|%s" "$A" "$B"'), "one two|x=y\nz")

    def test_process_start_env_never_reaches_the_host(self):
        lib = self.library()
        gw = self.gateway_in_sandbox()
        path = self.plant_library(gw, lib)
        rec = gw.ok("process/start", {"command": "echo started", "env": {"LD_PRELOAD": path}})
        gw.wait_ended(rec["id"])
        self.assert_not_loaded()

    # -- signals ----------------------------------------------------------

    def test_confined_background_process_cannot_signal_the_host(self):
        gw, _ = self.gateway_in_scope()
        for mode in ("read_only", "standard"):
            with self.subTest(mode=mode):
                victim = self.victim()
                pid = gw.start("kill -TERM %d" % victim.pid, mode=mode)["id"]
                gw.wait_ended(pid)
                time.sleep(0.3)
                self.assertIsNone(victim.poll(), "a %s background process killed host pid %d"
                                  % (mode, victim.pid))

    def test_unconfined_background_process_cannot_signal_the_host(self):
        # `unconfined` lifts sandgate's path confinement, not the environment's:
        # a background process shares the host's pid namespace, so the
        # sandbox must still keep its signals inside.
        gw, _ = self.gateway_in_scope()
        victim = self.victim()
        for target in (victim.pid, gw.proc.pid):
            pid = gw.start("kill -TERM %d; echo kill=$?" % target, mode="unconfined")["id"]
            out, _ = gw.read_all(pid)
            time.sleep(0.3)
            self.assertIn("kill=1", out)
        self.assertIsNone(victim.poll(), "an unconfined background process killed host pid %d"
                          % victim.pid)
        self.assertIsNone(gw.proc.poll(), "an unconfined background process killed the gateway")
        # Inside, it still signals what it started, and the gateway still
        # stops it.
        pid = gw.start("sleep 30 & k=$!; kill -TERM $k; wait $k; echo status=$?",
                       mode="unconfined")["id"]
        out, _ = gw.read_all(pid)
        self.assertIn("status=143", out)
        pid = gw.start("sleep 300", mode="unconfined")["id"]
        gw.stop(pid)
        self.assertEqual(gw.wait_ended(pid)["status"], "stopped")

    def test_background_process_cannot_kill_its_supervisor(self):
        # A process's supervisor is what stops whatever the process moves
        # out of its group; killed, it left that running for nobody to stop.
        gw, _ = self.gateway_in_scope()
        for mode in ("unconfined", "standard"):
            with self.subTest(mode=mode):
                # The command runs in a shell whose parent is the
                # supervisor: $PPID.
                pid = gw.start("kill -KILL $PPID; echo kill=$?; sleep 0.5; echo end",
                               mode=mode)["id"]
                out, last = gw.read_all(pid)
                self.assertIn("kill=1", out, "a %s background process killed its supervisor" % mode)
                self.assertIn("end", out)
                # A natural exit 0 ends `stopped` with exit_code 0 (the
                # host's record drops a zero exit_code).
                self.assertEqual((last["Process"]["status"], last["Process"].get("exit_code", 0),
                                  last["Process"].get("terminal_cause")),
                                 ("stopped", 0, "natural_exit"), last["Process"])

    def test_nothing_sets_a_setuid_or_setgid_bit(self):
        # The workspace is on this host, written as sandgate's user: where
        # that is root, a setuid file there is a setuid-root program for
        # whoever else on the host can reach it.
        gw = self.gateway_in_sandbox()
        self.assertEqual(setuid_leftovers(gw), [])
        # write_file has no mode: an extra "mode" is refused or ignored,
        # and the file it may write is 0644 either way.
        r = gw.execute("write_file", {"path": "w", "content": "x", "mode": "4755"})
        st = gw.sh("stat -c %a w")
        if "error" in r:
            self.assertNotEqual(st["exit_code"], 0, "a refused write_file wrote: %s" % r)
        else:
            self.assertEqual(st["output"].strip(), "644", r)

    def test_unconfined_command_cannot_reach_a_host_abstract_socket(self):
        # With network allowed, commands share the host's network namespace
        # and with it the abstract unix sockets of the host's daemons.
        gw, facts = self.gateway_in_scope()
        if facts["isolation"].get("network_isolated"):
            self.skipTest("the profile has no network, so no shared abstract sockets")
        probe = abstract_socket_probe(self)
        r = gw.sh(probe, "unconfined")
        if r["exit_code"] == 127:
            self.skipTest("no python3 in the sandbox")
        self.assertIn("refused", r["output"],
                      "an unconfined command reached a host abstract socket")
        pid = gw.start(probe, mode="unconfined")["id"]
        out, _ = gw.read_all(pid)
        self.assertIn("refused", out,
                      "an unconfined background process reached a host abstract socket")

    # -- forged process records ----------------------------------------

    def forge(self, gw, pid, pgid):
        """An unconfined command rewrites process pid's record to name pgid."""
        script = textwrap.dedent("""
            import json, os, sys
            d = '/run/sandgate/ctl/proc/' + sys.argv[1]
            r = json.load(open(d + '/record.json'))
            r['pgid'] = int(sys.argv[2])
            open(d + '/forged.tmp', 'w').write(json.dumps(r))
            os.rename(d + '/forged.tmp', d + '/record.json')
        """)
        r = gw.sh("python3 -c %s %s %d" % (shell_quote(script), pid, pgid), "unconfined")
        if r["exit_code"] == 127:
            self.skipTest("no python3 in the sandbox")
        self.assertEqual(r["exit_code"], 0, r)

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
                pid = gw.start("sleep 60", mode="unconfined")["id"]
                self.forge(gw, pid, forged + v.pid)
                r = gw.call("process/stop", {"id": pid}, timeout=30)
                self.assertIn("error", r, r)
                time.sleep(0.3)
                self.assertIsNone(v.poll(), "process/stop signalled a host process group")

    def test_shutdown_never_signals_a_group_a_record_forges(self):
        v = self.victim()
        gw = self.gateway_in_sandbox(remove_workspace_on_exit=True)
        pid = gw.start("sleep 60", mode="unconfined")["id"]
        self.forge(gw, pid, v.pid)
        gw.close_stdin()
        gw.wait_exit(60)
        time.sleep(0.3)
        self.assertIsNone(v.poll(), "removing the environment signalled a host process group")

    def test_a_record_linked_under_other_ids_is_not_read(self):
        # A record costs the gateway its size once per id it is read under;
        # hard links would multiply that at no cost to the disk.
        gw = self.gateway_in_sandbox()
        pid = gw.start("sleep 60", mode="unconfined")["id"]
        link = textwrap.dedent("""
            import os, sys
            d = '/run/sandgate/ctl/proc/'
            for i in range(5):
                os.mkdir(d + 'p-linked%d' % i)
                os.link(d + sys.argv[1] + '/record.json', d + 'p-linked%d/record.json' % i)
        """)
        r = gw.sh("python3 -c %s %s" % (shell_quote(link), pid), "unconfined")
        if r["exit_code"] == 127:
            self.skipTest("no python3 in the sandbox")
        self.assertEqual(r["exit_code"], 0, r)
        # Its own record now has six names, so it is no longer read either.
        listed = gw.ok("process/list")
        self.assertLessEqual(len(listed), 1, [p["id"] for p in listed])

    # -- the supervisor's final record ------------------------------------

    def test_fifo_at_the_final_record_hangs_nothing(self):
        gw = self.gateway_in_sandbox()
        # A confined command cannot write the control directory at all;
        # an unconfined one can.
        r = gw.sh("python3 -c %s fifo" % shell_quote(PLANT), timeout_seconds=10)
        if r["exit_code"] == 127:
            self.skipTest("no python3 in the sandbox")
        self.assertIn("Permission denied", r["output"], r)
        r = gw.sh("python3 -c %s fifo" % shell_quote(PLANT), "unconfined", timeout_seconds=10)
        self.assertIn("planted", r["output"], r)
        self.assertEqual((r["exit_code"], r["timed_out"]), (0, False), r)
        r = gw.sh("echo hello", timeout_seconds=10)
        self.assertEqual((r["exit_code"], r["timed_out"], r["output"]), (0, False, "hello\n"))

    def test_link_at_the_final_record_writes_nothing_through_it(self):
        gw = self.gateway_in_sandbox()
        pid = gw.start("sleep 60")["id"]
        record = "/run/sandgate/ctl/proc/%s/record.json" % pid
        before = gw.call("process/get", {"id": pid})
        self.assertIn("data", before, before)
        # The planting command ends with exit 3: its final record, written
        # through the link, would make the sleeper's record say so.
        r = gw.sh("python3 -c %s link %s; exit 3" % (shell_quote(PLANT), record), "unconfined")
        if r["exit_code"] == 127:
            self.skipTest("no python3 in the sandbox")
        self.assertIn("planted", r["output"], r)
        self.assertEqual(r["exit_code"], 3)
        self.assertEqual(gw.sh("exit 4")["exit_code"], 4)
        after = gw.call("process/get", {"id": pid})
        self.assertIn("data", after, after)
        self.assertEqual((after["data"]["id"], after["data"]["status"], after["data"]["command"]),
                         (pid, "running", "sleep 60"))
        self.assertIn('"sleep 60"', gw.sh_ok("cat %s" % record))
        stop = gw.call("process/stop", {"id": pid})
        self.assertIn("data", stop, stop)


if __name__ == "__main__":
    unittest.main()
