"""The docker backend keeps what it claims (issue 40), against the private
dockerd of tests/docker/dockerd-harness.sh: the container made with the
host's flags and labels, a runtime the daemon does not list refused (at
config check and at startup, nothing made), `select` falling back to local
when the runtime or the daemon is missing (the reason in the facts), the
runtime observed from inside, and a persistent container stopped at the
end, started again by the next session, and workspace_lost once removed.
On either runtime: a background process can be stopped, coreutils' stat
calls work, and a command in `standard` mode cannot write outside the
workspace nor one in `read_only` mode inside it (refused, or denied).

These tests write their own config from the suite's docker profile and
skip when the suite runs against another backend (run-against.sh docker,
docker-gvisor).  Assertions read the daemon (the docker client), never
what sandgate says it did.
"""

import json
import os
import shutil
import subprocess
import tempfile

from sgclient import BIN, CONFIG, PROFILE, Gateway, GatewayExited, GatewayTestCase, code_of, \
    host_token, view_of


def suite_profile():
    if not CONFIG or not os.environ.get("DOCKER_HOST"):
        return None
    with open(CONFIG) as f:
        p = json.load(f)["profiles"].get(PROFILE or "")
    return p if p and p.get("backend") == "docker" else None


def docker(*args):
    return subprocess.run(["docker"] + list(args), check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True).stdout


def inspect(name):
    return json.loads(docker("inspect", name))[0]


def ours(profile):
    """Names of the containers labelled with profile, running or not."""
    return docker("ps", "-a", "--format", "{{.Names}}", "--filter", "label=managed-by=sandgate",
                  "--filter", "label=sandgate.profile=" + profile).split()


class DockerBackend(GatewayTestCase):
    def setUp(self):
        self.prof = suite_profile()
        if not self.prof or not shutil.which("docker"):
            self.skipTest("the suite does not run against the docker backend")
        self.dir = tempfile.mkdtemp(prefix="sg-e2e-docker-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.state = os.path.join(self.dir, "state")

    def config(self, profiles, default):
        cfg = os.path.join(self.dir, "config-%d.json" % len(os.listdir(self.dir)))
        with open(cfg, "w") as f:
            json.dump({"default": default, "profiles": profiles}, f)
        return cfg

    def start(self, cfg, profile, env_extra=None):
        gw = Gateway(state_dir=self.state, config=cfg, profile=profile, env_extra=env_extra)
        self.addCleanup(gw.cleanup)
        return gw

    def test_container_is_made_as_the_host_makes_it(self):
        cfg = self.config({"d": dict(self.prof, cpus=0.5, memory_mb=256)}, "d")
        gw = self.start(cfg, "d")
        env = gw.initialize(identity="flags")["environment"]
        c = inspect(env["id"])
        hc = c["HostConfig"]
        # Podman's inspect lists what it dropped (all it would have given)
        # where Docker says ALL; CapEff below is what counts.
        if hc["CapDrop"] != ["ALL"]:
            self.assertTrue({"CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID", "KILL"}
                            <= set(hc["CapDrop"]), hc["CapDrop"])
        self.assertEqual(hc["SecurityOpt"], ["no-new-privileges"])
        # gVisor's Sentry and its ptrace stubs count there too (docker.c).
        self.assertEqual(hc["PidsLimit"], 4096 if self.prof.get("runtime") == "runsc" else 512)
        self.assertTrue(hc["Init"])
        self.assertEqual(hc["NetworkMode"], "none")
        self.assertEqual(hc["NanoCpus"], 500000000)
        self.assertEqual(hc["Memory"], 256 * 1024 * 1024)
        self.assertEqual(c["Config"]["User"], "65534:65534")
        self.assertIn("HOME=/tmp/wuu-home", c["Config"]["Env"])
        labels = c["Config"]["Labels"]
        self.assertEqual(labels["managed-by"], "sandgate")
        self.assertEqual(labels["sandgate.identity"], "flags")
        self.assertEqual(labels["sandgate.session"], gw.session)
        self.assertEqual(labels["wuu.execution.identity"], "flags")
        self.assertEqual(hc.get("Runtime") or "runc", self.prof.get("runtime", "runc"))
        # Commands run as that user, never root, without capabilities.
        out = gw.tool_ok("bash", {"command": "id -u; grep CapEff /proc/self/status"},
                         mode="unconfined")
        self.assertIn("65534", json.dumps(out))
        self.assertIn("CapEff:\\t0000000000000000", json.dumps(out))
        gw.shutdown()
        self.assertEqual(ours("d"), [], "the container stayed after the session")

    def test_runtime_the_daemon_lacks_is_refused(self):
        cfg = self.config({"n": dict(self.prof, runtime="sg-no-such-runtime")}, "n")
        r = subprocess.run([BIN, "config", "check", "--config", cfg], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
        self.assertIn('no runtime "sg-no-such-runtime"', r.stdout + r.stderr)
        gw = self.start(cfg, "n")
        try:
            rep = gw.call("initialize", gw.make_binding(), timeout=60, token=host_token())
            self.assertEqual(code_of(rep.get("error", "")), "unavailable", rep)
        except GatewayExited:
            code, _ = gw.wait_exit(30)
            self.assertEqual(code, 78, gw.stderr_text())
            self.assertIn("sg-no-such-runtime", gw.stderr_text())
        self.assertEqual(ours("n"), [], "a container was made on another runtime")

    def fallback(self, docker_profile, env_extra, reason):
        cfg = self.config({"box": docker_profile, "here": {"backend": "local"},
                           "pick": {"backend": "select",
                                    "candidates": [{"profile": "box"}, {"profile": "here"}]}},
                          "pick")
        gw = self.start(cfg, "pick", env_extra)
        env = gw.initialize()["environment"]
        self.assertEqual(env["backend"], "local")
        sel = env["facts"]["selection"]
        self.assertEqual([c["profile"] for c in sel], ["box", "here"])
        self.assertFalse(sel[0]["chosen"])
        self.assertIn(reason, sel[0]["reason"])
        gw.shutdown()
        self.assertEqual(ours("box"), [])

    def test_select_falls_back_to_local_without_the_runtime(self):
        self.fallback(dict(self.prof, runtime="sg-no-such-runtime"), None, "no runtime")

    def test_select_falls_back_to_local_without_the_daemon(self):
        self.fallback(dict(self.prof, runtime="runsc"),
                      {"DOCKER_HOST": "unix://" + os.path.join(self.dir, "no.sock")},
                      "does not answer")

    def test_runtime_is_observed_inside(self):
        cfg = self.config({"d": self.prof}, "d")
        gw = self.start(cfg, "d")
        facts = gw.initialize()["environment"]["facts"]
        gvisor = self.prof.get("runtime") == "runsc"
        self.assertEqual(facts["mechanism"], "gvisor" if gvisor else "namespaces")
        self.assertEqual(facts["safety_class"], "container")
        self.assertEqual(facts["runtime"]["gvisor_seen"], gvisor)
        # Debian's runsc (20221219) refuses PR_SET_CHILD_SUBREAPER: the
        # facts say so rather than promise containment of escapes.
        self.assertEqual(facts["observed"]["child_subreaper"], not gvisor)
        gw.shutdown()

    def test_persistent_is_stopped_resumed_and_lost_once_removed(self):
        cfg = self.config({"p": dict(self.prof, persistent=True)}, "p")
        gw = self.start(cfg, "p")
        env = gw.initialize(identity="keep", remove_workspace_on_exit=False)["environment"]
        name = env["id"]
        self.addCleanup(subprocess.run, ["docker", "rm", "-f", name], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
        gw.tool_ok("write_file", {"path": "kept.txt", "content": "still here\n"})
        gw.shutdown()
        self.assertFalse(inspect(name)["State"]["Running"], "a kept container runs on")

        gw = self.start(cfg, "p")
        env = gw.initialize(identity="keep", remove_workspace_on_exit=False)["environment"]
        self.assertTrue(env["resumed"])
        self.assertTrue(inspect(name)["State"]["Running"])
        out = gw.tool_ok("read_file", {"path": "kept.txt"})
        self.assertIn("still here", json.dumps(out))
        gw.shutdown()

        docker("rm", "-f", name)
        gw = self.start(cfg, "p")
        rep = gw.call("initialize", gw.make_binding(identity="keep", remove_workspace_on_exit=False),
                      timeout=60, token=host_token())
        self.assertEqual(code_of(rep.get("error", "")), "workspace_lost", rep)
        self.assertEqual(ours("p"), [], "a fresh container replaced the lost one")

    def test_a_background_process_is_stopped(self):
        # gVisor 20221219 shows each process its own pid-namespace link, which
        # sg-helper once took for another namespace and refused to signal.
        cfg = self.config({"d": self.prof}, "d")
        gw = self.start(cfg, "d")
        gw.initialize()
        rec = gw.start("exec sleep 300", mode="unconfined")
        end = gw.stop(rec["id"])
        self.assertEqual(end["status"], "stopped", end)
        self.assertEqual(gw.env_count_matching("[s]leep 300"), 0)
        gw.shutdown()

    def test_coreutils_stat_works(self):
        # Debian's runsc refuses statx with AT_NO_AUTOMOUNT, which coreutils 9
        # passes (the gVisor image preloads tests/docker/statx-shim.c).
        cfg = self.config({"d": self.prof}, "d")
        gw = self.start(cfg, "d")
        gw.initialize()
        out = gw.sh_ok("echo hi > f && ls -l f && stat -c %s f && cp -a f g && mv g h && ls",
                       mode="unconfined")
        self.assertIn("3\n", out)
        self.assertIn("h", out.split())
        gw.shutdown()

    def attempt(self, gw, mode, command):
        """Run command in mode: None when refused (permission_denied naming
        the mode), else its exit code."""
        # Not gw.execute, which skips a test meeting gVisor's refusal of read_only.
        r = gw.wait_reply(gw.execute_req("bash", {"command": command}, mode))
        if "error" in r:
            self.assertEqual(code_of(r["error"]), "permission_denied", r)
            self.assertIn(mode, r["error"])
            return None
        return view_of(r["data"]).get("exit_code")

    def test_permission_modes_hold_on_any_runtime(self):
        # The attacker's test: /var/tmp (the image's, as Debian's) and
        # /dev/shm (runc's) are writable for every user by their mode,
        # outside the workspace; the workspace is the user's own.
        cfg = self.config({"d": self.prof}, "d")
        gw = self.start(cfg, "d")
        facts = gw.initialize()["environment"]["facts"]
        for place in ("/var/tmp", "/dev/shm"):
            code = self.attempt(gw, "standard", "echo x > %s/sg-escape" % place)
            self.assertNotEqual(code, 0)
        code = self.attempt(gw, "read_only", "echo x > sg-ro-write; mkdir sg-ro-dir")
        self.assertNotEqual(code, 0)
        left = gw.sh_ok("ls -a /var/tmp .; ls -a /dev/shm 2>/dev/null; true",
                        mode="unconfined").split()
        for name in ("sg-escape", "sg-ro-write", "sg-ro-dir"):
            self.assertNotIn(name, left, "a confined command wrote " + name)
        # The facts name how each mode is confined, as observed inside.
        gvisor = self.prof.get("runtime") == "runsc"
        self.assertEqual(facts["confinement"], {
            "standard": "read_only_root" if gvisor else "landlock",
            "read_only": "refused" if gvisor else "landlock"})
        gw.shutdown()
