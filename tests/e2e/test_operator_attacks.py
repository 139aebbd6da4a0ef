"""Attacks on the operators' side: `sandgate envs rm/gc` and the registry.

An environment's commands are hostile and write anything they can reach
(in `unconfined` mode that includes the control directory, /run/sandgate/ctl);
the host chooses identities; the registry is a directory an operator may
edit by hand.  None of that may make `envs rm` or `envs gc` kill or
delete anything but the environment it removes, hide an environment from
them, or stop them listing and collecting the other records.  Every test
drives real gateways and the real CLI against a fresh state directory
and checks what exists afterwards: directories, processes, records.

An environment that outlives its session is a persistent profile's (the
operator's config below offers one, `kept`); a host asks for a shorter
lifetime in its own profile (WUU_EXECUTION_PROFILE).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from sgclient import (BIN, CONFIG, PROFILE, Gateway, GatewayTestCase, Marker,
                      code_of, host_env, host_processes_matching, host_token, unique)

# The operator's profiles: `here` ends with its session, `kept` outlives it.
OPERATOR = {"default": "here", "profiles": {
    "here": {"backend": "local"},
    "kept": {"backend": "local", "persistent": True}}}
_config_dir = tempfile.mkdtemp(prefix="sg-e2e-opattack-cfg-")
OP_CONFIG = os.path.join(_config_dir, "config.json")
with open(OP_CONFIG, "w") as _f:
    json.dump(OPERATOR, _f)


def tearDownModule():
    shutil.rmtree(_config_dir, ignore_errors=True)


def envs(state_dir, *args, timeout=60):
    argv = [BIN, "envs", *args, "--state-dir", state_dir, "--config", OP_CONFIG]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def gc_argv(state_dir, *args):
    return [BIN, "envs", "gc", *args, "--state-dir", state_dir, "--config", OP_CONFIG]


def records(state_dir):
    reg = os.path.join(state_dir, "registry")
    return sorted(f for f in os.listdir(reg) if f.endswith(".json"))


class OperatorAttacks(GatewayTestCase):
    def setUp(self):
        if PROFILE and PROFILE != "local" or CONFIG:
            self.skipTest("these attacks drive the local backend's directories")

    def state(self):
        d = tempfile.mkdtemp(prefix="sg-e2e-opattack-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def gateway_on(self, state, kept=False, lifetime=None, **binding):
        """A gateway on state, initialized: `kept` picks the persistent
        profile, `lifetime` is the host's lifetime_seconds."""
        env = host_env({"lifetime_seconds": lifetime}) if lifetime else None
        gw = Gateway(state_dir=state, config=OP_CONFIG, profile="kept" if kept else "here",
                     env_extra=env)
        self.addCleanup(self._finish, gw)
        return gw, gw.initialize(**binding)

    def test_a_spool_link_does_not_stop_another_environments_processes(self):
        # The attacker's commands replace their process spool with a link
        # to the victim's (the host path is in /proc/self/mountinfo).
        # Removing the attacker followed it: the victim's background
        # process, in a live session, was stopped.
        state = self.state()
        victim, v = self.gateway_on(state, identity=unique("victim"))
        if not victim.facts.get("isolation", {}).get("host_filesystem_restricted"):
            self.skipTest("needs bubblewrap: without it commands run on the host")
        marker = Marker()
        pid = victim.start(marker.command)["id"]
        attacker, a = self.gateway_on(state, kept=True, identity=unique("attacker"),
                                      remove_workspace_on_exit=None)
        spool = os.path.join(state, "local", v["environment"]["id"][len("local-"):],
                             "ctl", "proc")
        self.assertTrue(os.path.isdir(spool), spool)
        # bash runs the command as a process of that table, so its own
        # reply may be lost with it: what counts is that the link is there.
        attacker.execute("bash", {"command": "mv /run/sandgate/ctl/proc /run/sandgate/ctl/old "
                                  "&& ln -s %s /run/sandgate/ctl/proc" % spool}, "unconfined")
        own = os.path.join(state, "local", a["environment"]["id"][len("local-"):], "ctl", "proc")
        self.assertTrue(os.path.islink(own), "the attack did not happen")
        # Its own session's process table is a link now: the gateway does
        # not follow it, so it cannot say its processes were stopped.
        code, err, _ = attacker.shutdown()
        self.assertNotEqual(code, 0, err)
        self.assertIn("process table is unavailable", err)
        rc, out, err = envs(state, "rm", a["environment"]["id"])
        self.assertEqual(rc, 0, err)
        time.sleep(0.5)
        self.assertNotEqual(host_processes_matching(marker.needle), [],
                            "removing the attacker killed the victim's process")
        self.assertEqual(victim.ok("process/get", {"id": pid})["status"], "running")
        self.assertFalse(os.path.exists(os.path.join(state, "local",
                                                     a["environment"]["id"][6:])))
        victim.stop(pid)

    def test_long_identities_get_distinct_collectable_environments(self):
        # An identity may be 128 bytes; its slug was cut to fit the id, so
        # two identities with one head got one id, and a directory whose
        # name did not fit was never listed: gc dropped its record as
        # "vanished" and left the directory and its processes for good.
        state = self.state()
        head = "a" * 121
        keeper, k = self.gateway_on(state, identity=head)
        keeper.write("precious.txt", "the keeper's work\n")
        crashed = Gateway(state_dir=state, config=OP_CONFIG, profile="here",
                          env_extra=host_env({"lifetime_seconds": 1}))
        self.addCleanup(crashed.cleanup)
        c = crashed.initialize(identity=head + "b")
        self.assertNotEqual(k["environment"]["id"], c["environment"]["id"])
        marker = Marker()
        crashed.start(marker.command)
        crashed.proc.kill()
        crashed.wait_exit(30)
        time.sleep(1.5)
        rc, out, err = envs(state, "gc")
        self.assertEqual(rc, 0, out + err)
        left = os.listdir(os.path.join(state, "local"))
        self.assertEqual(left, [k["environment"]["id"][len("local-"):]],
                         "the crashed environment's directory was left, or the keeper's removed")
        deadline = time.monotonic() + 5
        while host_processes_matching(marker.needle) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(host_processes_matching(marker.needle), [],
                         "the crashed session's process still runs")
        self.assertEqual(keeper.tool_ok("read_file", {"path": "precious.txt"})
                         ["structured_content"]["text"], "the keeper's work\n")
        rows = json.loads(envs(state, "list", "--json")[1])
        self.assertEqual([(r["id"], r["state"], r["live_sessions"]) for r in rows],
                         [(k["environment"]["id"], "present", 1)])

    def test_a_misnamed_record_removes_nothing_else(self):
        # A record under another file name than its backend and identity
        # (copied or edited by hand) named a live environment: gc judged
        # it by its own empty session list, deleted the live environment's
        # directory and its real record, and kept the copy for ever.
        state = self.state()
        live, l = self.gateway_on(state, identity=unique("live"))
        live.write("precious.txt", "still here\n")
        (real,) = records(state)
        with open(os.path.join(state, "registry", real)) as f:
            rec = json.load(f)
        rec.update(status="cleanup-pending", sessions=[])
        with open(os.path.join(state, "registry", "local--stale-copy.json"), "w") as f:
            json.dump(rec, f)
        rc, out, err = envs(state, "gc")
        self.assertEqual(rc, 0, out + err)
        self.assertTrue(os.path.isdir(os.path.join(state, "local",
                                                   l["environment"]["id"][6:], "workspace")),
                        "the live environment's directory was removed")
        self.assertEqual(records(state), [real], "the live record was removed")
        self.assertIn("local--stale-copy.json", err)
        self.assertIn("do not name this file", err)
        self.assertTrue(os.path.exists(os.path.join(state, "registry",
                                                    "local--stale-copy.json.corrupt")))
        self.assertEqual(live.tool_ok("read_file", {"path": "precious.txt"})
                         ["structured_content"]["text"], "still here\n")

    def test_a_fifo_or_oversized_record_does_not_stop_the_others(self):
        # A FIFO where a record should be held `envs list` (and every
        # gateway waiting on the registry lock) for ever; a record of many
        # megabytes was read whole.  Each is now set aside with its reason,
        # and the other records are still listed and collected.
        state = self.state()
        gw, g = self.gateway_on(state, kept=True, identity=unique("kept"),
                                remove_workspace_on_exit=None)
        self.assertEqual(gw.shutdown()[0], 0)
        reg = os.path.join(state, "registry")
        os.mkfifo(os.path.join(reg, "local--fifo.json"))
        with open(os.path.join(reg, "local--big.json"), "w") as f:
            json.dump({"backend": "local", "identity": "big", "pad": "x" * (4 << 20)}, f)
        try:
            rc, out, err = envs(state, "list", "--json", timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("envs list hung on a FIFO in the registry")
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["id"] for r in json.loads(out)], [g["environment"]["id"]])
        self.assertIn("local--fifo.json", err)
        self.assertIn("not a regular file", err)
        self.assertIn("local--big.json", err)
        self.assertIn("larger than a record can be", err)
        for name in ("local--fifo.json.corrupt", "local--big.json.corrupt"):
            self.assertTrue(os.path.lexists(os.path.join(reg, name)), name)
        rc, out, err = envs(state, "gc", "--older-than", "0s", timeout=30)
        self.assertEqual(rc, 0, err)
        self.assertEqual(records(state), [])
        self.assertEqual(os.listdir(os.path.join(state, "local")), [])

    def test_gc_never_removes_what_a_gateway_attached_to_meanwhile(self):
        # gc decided from one scan, then removed one environment after the
        # other.  A gateway that resumed an expired, kept environment
        # while gc was busy removing another lost its workspace under it.
        # Either outcome is fine now: the gateway attaches first and gc
        # keeps the environment, or gc claims it first and the gateway is
        # told it is being removed; never both.  (Kept environments are a
        # persistent profile's, which only --older-than collects.)
        state = self.state()
        ids = {}
        for ident in (unique("slow-a"), unique("slow-b")):
            gw, g = self.gateway_on(state, kept=True, identity=ident,
                                    remove_workspace_on_exit=None)
            gw.write("precious.txt", ident + "\n")
            # Many files, so that removing one takes gc a while.
            gw.sh_ok("mkdir big && cd big && seq 1 30000 | xargs touch")
            self.assertEqual(gw.shutdown()[0], 0)
            ids[g["environment"]["id"]] = ident
        time.sleep(1.5)
        argv = gc_argv(state, "--older-than", "1s")
        gc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: gc.poll() is None and gc.kill())
        first = gc.stderr.readline()
        self.assertIn("removing", first)
        [other] = [ident for eid, ident in ids.items() if eid not in first]
        late = Gateway(state_dir=state, config=OP_CONFIG, profile="kept")
        self.addCleanup(self._finish, late)
        late.token = host_token()
        late.binding = late.make_binding(identity=other, remove_workspace_on_exit=None)
        r = late.call("initialize", late.binding, token=late.token, timeout=60)
        out, err = gc.communicate(timeout=120)
        if "error" in r:
            self.assertEqual(code_of(r["error"]), "unavailable", r)
            self.assertIn("being removed", r["error"])
            return
        self.assertEqual(late.tool_ok("read_file", {"path": "precious.txt"})
                         ["structured_content"]["text"],
                         other + "\n", "gc removed the workspace of a live session")
        self.assertIn("keeping", first + err)

    def test_no_gateway_attaches_to_what_gc_is_removing(self):
        # While gc removes an environment, a gateway resuming its identity
        # is told so, instead of getting a workspace that goes under it.
        state = self.state()
        ident = unique("going")
        gw, g = self.gateway_on(state, kept=True, identity=ident,
                                remove_workspace_on_exit=None)
        gw.sh_ok("mkdir big && cd big && seq 1 60000 | xargs touch")
        self.assertEqual(gw.shutdown()[0], 0)
        time.sleep(1.5)
        gc = subprocess.Popen(gc_argv(state, "--older-than", "1s"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: gc.poll() is None and gc.kill())
        self.assertIn("removing " + g["environment"]["id"], gc.stderr.readline())
        late = Gateway(state_dir=state, config=OP_CONFIG, profile="kept")
        self.addCleanup(self._finish, late)
        r = late.call("initialize", late.make_binding(identity=ident), token=host_token(),
                      timeout=60)
        out, err = gc.communicate(timeout=120)
        self.assertEqual(gc.returncode, 0, out + err)
        self.assertIn("error", r, "a gateway attached to an environment gc was removing")
        self.assertEqual(code_of(r["error"]), "unavailable", r)
        self.assertIn("being removed", r["error"])
        # Once gc is done, the identity starts afresh.
        again = Gateway(state_dir=state, config=OP_CONFIG, profile="kept")
        self.addCleanup(self._finish, again)
        self.assertFalse(again.initialize(identity=ident)["environment"]["resumed"])

    def test_an_unmarked_directory_is_left_while_a_gateway_creates(self):
        # A local directory without its marker is what a gateway has
        # between its mkdir and its env.json: gc leaves it while a live
        # gateway is creating (its registry record says provisioning), and
        # collects it once none is.
        state = self.state()
        unmarked = os.path.join(state, "local", "being-made")
        os.makedirs(os.path.join(unmarked, "workspace"))
        reg = os.path.join(state, "registry")
        os.makedirs(reg, exist_ok=True)
        ident = unique("making")
        with open("/proc/%d/stat" % os.getpid()) as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        rec = {"backend": "local", "identity": ident, "created": int(time.time()),
               "status": "provisioning", "profile": "default",
               "sessions": [{"session": "s", "pid": os.getpid(), "pid_start": start,
                             "since": int(time.time())}]}
        name = "local--%s.json" % ident
        with open(os.path.join(reg, name), "w") as f:
            json.dump(rec, f)
        rc, out, err = envs(state, "gc")
        self.assertTrue(os.path.isdir(unmarked),
                        "gc removed a directory a live gateway may be making: " + out + err)
        self.assertIn("may be this one", err)
        os.unlink(os.path.join(reg, name))
        rc, out, err = envs(state, "gc")
        self.assertEqual(rc, 0, out + err)
        self.assertFalse(os.path.exists(unmarked), "an unmarked directory was kept")

if __name__ == "__main__":
    unittest.main()
