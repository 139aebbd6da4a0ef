"""The singularity backend enforces what it claims (issue 14), against the
fake apptainer in tests/fakes/apptainer: limits through the instance's
cgroups, `network: "none"` through a network namespace, refusals (old
runtime, no cgroups, no network namespace), persistence through an
overlay, nothing left behind otherwise, the user's APPTAINER_* variables
scrubbed, docker:// converted once, and a crashed gateway's instance found
and removed by `sandgate envs`.

These tests write their own config and skip when the suite runs against
another profile, without root, or without bubblewrap.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading

from sgclient import BIN, CONFIG, GatewayTestCase, Gateway, GatewayExited, code_of

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_DIR = os.path.join(HERE, "..", "fakes", "apptainer")
FAKE = os.path.join(FAKE_DIR, "apptainer")


class SingularityBackend(GatewayTestCase):
    def setUp(self):
        if CONFIG:
            self.skipTest("singularity-backend checks use their own config")
        if os.environ.get("SG_PEER_BIN"):
            # Exit statuses and crash points of sandgate itself: the
            # delegation wrapper reports its own (e2e/test_singularity
            # runs these directly).
            self.skipTest("checks sandgate's own exit statuses, not a relay's")
        if os.getuid() != 0:
            self.skipTest("the fake apptainer needs root")
        for prog in ("bwrap", "nsenter", "unshare"):
            if not shutil.which(prog):
                self.skipTest("%s is missing" % prog)
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-sing-")
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.log = os.path.join(self.dir, "argv.log")
        self.env = {"HOME": self.home, "PATH": FAKE_DIR + ":" + os.environ.get("PATH", ""),
                    "FAKE_APPTAINER_LOG": self.log}
        self.addCleanup(self._clean)
        self.sif = os.path.join(self.dir, "image.sif")
        self.cli(["-q", "build", self.sif, "docker://debian:12"])

    def _clean(self):
        self.cli(["instance", "stop", "--all"], check=False)
        subprocess.run(["rm", "-rf", self.dir])

    def cli(self, args, check=True, extra=None):
        env = dict(os.environ, **self.env, **(extra or {}))
        r = subprocess.run([FAKE] + args, env=env, capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError("apptainer %s: %s" % (args, r.stderr))
        return r

    def instances(self):
        return json.loads(self.cli(["instance", "list", "--json"]).stdout)["instances"]

    def gw_with(self, profile, env_extra=None, state=None):
        cfg = os.path.join(self.dir, "config-%d.json" % len(os.listdir(self.dir)))
        prof = dict(backend="singularity", image=self.sif)
        prof.update(profile)
        with open(cfg, "w") as f:
            json.dump({"default": "p", "profiles": {"p": prof}}, f)
        gw = Gateway(state_dir=state or os.path.join(self.dir, "state"), config=cfg, profile="p",
                     env_extra=dict(self.env, **(env_extra or {})))
        self.addCleanup(gw.cleanup)
        return gw

    def refused(self, gw, word):
        """Refused at startup (validate: exit 78) or at initialize (provision)."""
        try:
            r = gw.call("initialize", gw.make_binding(), timeout=120, token="tok-x")
        except GatewayExited:
            code, _ = gw.wait_exit(30)
            self.assertEqual(code, 78, gw.stderr_text())
            self.assertIn("unsupported", gw.stderr_text())
            self.assertIn('"%s"' % word, gw.stderr_text())
            return
        self.assertIn("error", r, "initialize should have been refused")
        self.assertEqual(code_of(r["error"]), "unsupported", r["error"])
        self.assertIn(word, r["error"])

    def test_limits_and_network_none(self):
        gw = self.gw_with({"cpus": 0.5, "memory_mb": 256, "network": "none"})
        facts = gw.initialize()["environment"]["facts"]
        self.assertEqual(facts["resources"]["applied"]["memory_mb"], 256)
        self.assertRegex(facts["runtime"]["version"], r"^\d+\.\d+\.\d+$")
        out = gw.sh_ok("cat /proc/self/cgroup; cat /proc/net/dev")
        self.assertIn("fake-apptainer/sg-", out)
        ifaces = [l.split(":")[0].strip() for l in out.splitlines() if ":" in l and "|" not in l
                  and not l[0].isdigit()]
        self.assertEqual(ifaces, ["lo"], out)
        quota = glob.glob("/sys/fs/cgroup/cpu/fake-apptainer/sg-*/cpu.cfs_quota_us") or \
            glob.glob("/sys/fs/cgroup/fake-apptainer/sg-*/cpu.max")
        self.assertTrue(quota)
        with open(quota[0]) as f:
            self.assertIn("50000", f.read())
        with open(self.log) as f:
            starts = [json.loads(l) for l in f if '"start"' in l]
        self.assertIn("--containall", starts[-1])
        self.assertIn("--writable-tmpfs", starts[-1])

    def test_refusals(self):
        self.refused(self.gw_with({"cpus": 1}, {"FAKE_APPTAINER_VERSION": "1.0.3"}), "cpus")
        self.refused(self.gw_with({"memory_mb": 128}, {"FAKE_APPTAINER_NO_CGROUPS": "1"}),
                     "memory_mb")
        self.refused(self.gw_with({"network": "none"}, {"FAKE_APPTAINER_NO_NETNS": "1"}),
                     "network")
        # SingularityCE only warns and starts without limits: still refused.
        self.refused(self.gw_with({"cpus": 1}, {"FAKE_APPTAINER_NO_CGROUPS": "1",
                                                "FAKE_APPTAINER_FLAVOUR": "singularity-ce",
                                                "FAKE_APPTAINER_VERSION": "4.1.0"}), "cpus")
        self.assertEqual(self.instances(), [])

    def test_persistence_and_loss(self):
        state = os.path.join(self.dir, "pstate")
        gw = self.gw_with({"persistent": True}, state=state)
        gw.initialize(identity="keeper", remove_workspace_on_exit=False)
        gw.sh_ok("echo kept > /opt/outside-workspace && echo ws > file", mode="full")
        gw.shutdown()
        self.assertEqual(self.instances(), [])
        gw2 = self.gw_with({"persistent": True}, state=state)
        gw2.initialize(identity="keeper", remove_workspace_on_exit=False,
                       require_existing_workspace=True)
        self.assertEqual(gw2.sh_ok("cat /opt/outside-workspace file"), "kept\nws\n")
        gw2.shutdown()
        shutil.rmtree(glob.glob(os.path.join(state, "singularity", "keeper", "overlay"))[0])
        gw3 = self.gw_with({"persistent": True}, state=state)
        r = gw3.call("initialize", gw3.make_binding(identity="keeper"), timeout=120, token="t")
        self.assertEqual(code_of(r.get("error", "")), "workspace_lost", r)
        self.assertEqual(self.instances(), [])

    def test_non_persistent_leaves_nothing(self):
        state = os.path.join(self.dir, "nstate")
        gw = self.gw_with({}, state=state)
        gw.initialize()
        gw.sh_ok("echo x > /opt/scratch", mode="full")
        gw.shutdown()
        self.assertEqual(self.instances(), [])
        left = os.listdir(os.path.join(state, "singularity"))
        self.assertEqual(left, [], "environment directories remain")

    def test_user_shell_variables_do_not_steer_the_runtime(self):
        gw = self.gw_with({}, {"APPTAINER_BIND": "/etc:/hostetc", "SINGULARITYENV_EVIL": "1",
                               "APPTAINERENV_EVIL2": "1"})
        gw.initialize()
        out = gw.sh_ok("test -e /hostetc && echo BOUND; env")
        self.assertNotIn("BOUND", out)
        self.assertNotIn("EVIL", out)

    def test_docker_image_converted_once(self):
        state = os.path.join(self.dir, "dstate")
        gws = [self.gw_with({"image": "docker://debian:12"}, {"FAKE_APPTAINER_BUILD_SECONDS": "2"},
                            state=state) for _ in range(2)]
        errors = []

        def init(g):
            try:
                g.initialize(timeout=180)
            except AssertionError as e:
                errors.append(e)
        threads = [threading.Thread(target=init, args=(g,)) for g in gws]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        with open(self.log) as f:
            builds = [l for l in f if '"build"' in l and "docker://debian:12" in l]
        # The setUp build, and exactly one conversion for both sessions.
        self.assertEqual(len(builds), 2, builds)
        self.assertEqual(len(glob.glob(os.path.join(state, "singularity", "images", "*.sif"))), 1)

    def test_crashed_gateway_instance_is_collected(self):
        state = os.path.join(self.dir, "cstate")
        gw = self.gw_with({}, state=state)
        gw.initialize(identity="crashy")
        gw.proc.send_signal(signal.SIGKILL)
        gw.proc.wait()
        self.assertEqual([i["instance"] for i in self.instances()], ["sg-crashy"])
        env = dict(os.environ, **self.env)
        cfg = gw.argv[gw.argv.index("--config") + 1]
        r = subprocess.run([BIN, "envs", "list", "--json", "--state-dir", state, "--config", cfg],
                           env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("singularity-crashy", r.stdout)
        r = subprocess.run([BIN, "envs", "rm", "singularity-crashy", "--state-dir", state,
                            "--config", cfg], env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.instances(), [])
        self.assertFalse(os.path.exists(os.path.join(state, "singularity", "crashy")))

    def test_shared_identity_joins_the_running_instance(self):
        state = os.path.join(self.dir, "sstate")
        one = self.gw_with({"shared": True}, state=state)
        one.initialize(identity="both", remove_workspace_on_exit=False)
        # The instance's /tmp lives as long as the instance: a restart empties it.
        one.sh_ok("echo alive > /tmp/instance-mark", mode="full")
        two = self.gw_with({"shared": True}, state=state)
        two.initialize(identity="both", remove_workspace_on_exit=False)
        self.assertEqual(two.sh_ok("cat /tmp/instance-mark"), "alive\n")
        self.assertEqual(one.sh_ok("cat /tmp/instance-mark"), "alive\n")
        self.assertEqual([i["instance"] for i in self.instances()], ["sg-both"])
