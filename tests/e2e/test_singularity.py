"""The singularity backend enforces what it claims (issue 14), against the
fake apptainer in tests/fakes/apptainer: limits through the instance's
cgroups, `network: "none"` through a network namespace, refusals (old
runtime, no cgroups, no network namespace), persistence through an
overlay, nothing left behind otherwise, the runtime given an allow-listed
environment (no APPTAINER_* variable; the proxies to a pull alone),
docker:// converted once, `image_pull_policy: "if_not_present"` starting
from the cache with the registry unreachable (and never from an entry that
is not that reference's or no longer the file converted), and a crashed gateway's instance found
and removed by `sandgate envs`.

These tests write their own config and skip when the suite runs against
another profile, without root, or without bubblewrap.
"""

import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from sgclient import BIN, GatewayTestCase, Gateway, GatewayExited, code_of, host_token

from apptainer_fixture import FAKE_DIR, ApptainerFixture


class SingularityBackend(ApptainerFixture, GatewayTestCase):
    def setUp(self):
        self.fake_apptainer("sg-e2e-sing-")

    def instances(self):
        return self.instance_list()

    def gw_with(self, profile, env_extra=None, state=None):
        cfg = os.path.join(self.dir, "config-%d.json" % len(os.listdir(self.dir)))
        prof = dict(backend="singularity", image=self.sif, runtime=self.runtime(env_extra))
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
            r = gw.call("initialize", gw.make_binding(), timeout=120, token=host_token())
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

    def test_best_effort_cpus_never_drops_a_required_memory_limit(self):
        # --cpus and --memory are dropped together, so when cgroups cannot be
        # used a best-effort cpus must not take memory_mb, which is not
        # best-effort, with it: the start is refused naming memory_mb.
        no_cgroups = [{"FAKE_APPTAINER_NO_CGROUPS": "1"},
                      # SingularityCE only warns and starts without limits.
                      {"FAKE_APPTAINER_NO_CGROUPS": "1", "FAKE_APPTAINER_FLAVOUR": "singularity-ce",
                       "FAKE_APPTAINER_VERSION": "4.1.0"}]
        for knobs in no_cgroups:
            self.refused(self.gw_with({"cpus": 1, "memory_mb": 128, "best_effort": ["cpus"]},
                                      knobs), "memory_mb")
            self.assertEqual(self.instances(), [])
        # Both best-effort: the instance starts without limits, and says so.
        for knobs in no_cgroups:
            gw = self.gw_with({"cpus": 1, "memory_mb": 128, "best_effort": ["cpus", "memory_mb"]},
                              knobs)
            res = gw.initialize()["environment"]["facts"]["resources"]
            self.assertEqual(res["requested"], {"cpus": 1, "memory_mb": 128})
            self.assertEqual(res["applied"], {})
            gw.shutdown()

    def test_persistence_and_loss(self):
        state = os.path.join(self.dir, "pstate")
        gw = self.gw_with({"persistent": True}, state=state)
        gw.initialize(identity="keeper", remove_workspace_on_exit=None)
        gw.sh_ok("echo kept > /opt/outside-workspace && echo ws > file", mode="unconfined")
        gw.shutdown()
        self.assertEqual(self.instances(), [])
        gw2 = self.gw_with({"persistent": True}, state=state)
        gw2.initialize(identity="keeper", remove_workspace_on_exit=None,
                       require_existing_workspace=True)
        self.assertEqual(gw2.sh_ok("cat /opt/outside-workspace file"), "kept\nws\n")
        gw2.shutdown()
        shutil.rmtree(glob.glob(os.path.join(state, "singularity", "keeper", "overlay"))[0])
        gw3 = self.gw_with({"persistent": True}, state=state)
        r = gw3.call("initialize", gw3.make_binding(identity="keeper"), timeout=120, token=host_token())
        self.assertEqual(code_of(r.get("error", "")), "workspace_lost", r)
        self.assertEqual(self.instances(), [])

    def test_non_persistent_leaves_nothing(self):
        state = os.path.join(self.dir, "nstate")
        gw = self.gw_with({}, state=state)
        gw.initialize()
        gw.sh_ok("echo x > /opt/scratch", mode="unconfined")
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

    # ---- images: docker:// and oras:// through a registry, sandbox dirs -----

    def registry(self, tags):
        """The fake registry (tests/fakes/apptainer/registry.py) serving
        team/tool with two manifests; tags maps a tag to a manifest's index.
        Returns (host:port, digests)."""
        self.reg_state = os.path.join(self.dir, "registry.json")
        manifests = [json.dumps({"schemaVersion": 2, "layers": [], "n": n}) for n in (0, 1)]
        self.set_tags(tags, manifests)
        proc = subprocess.Popen([sys.executable, os.path.join(FAKE_DIR, "registry.py"),
                                 self.reg_state], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (proc.stdin.close(), proc.wait(10), proc.stdout.close()))
        port = int(proc.stdout.readline().split()[1])
        self.reg_proc = proc
        return "127.0.0.1:%d" % port, ["sha256:" + hashlib.sha256(m.encode()).hexdigest()
                                       for m in manifests]

    def set_tags(self, tags, manifests=None):
        if manifests is None:
            with open(self.reg_state) as f:
                manifests = json.load(f)["team/tool"]["manifests"]
        with open(self.reg_state + ".new", "w") as f:
            json.dump({"team/tool": {"manifests": manifests, "tags": tags}}, f)
        os.rename(self.reg_state + ".new", self.reg_state)

    def reg_requests(self):
        try:
            with open(self.reg_state + ".log") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def builds(self, ref_part):
        with open(self.log) as f:
            return [json.loads(l) for l in f if '"build"' in l and ref_part in l]

    def test_the_pull_alone_gets_the_proxy(self):
        # The operator's proxy is for image pulls: `build` is given the
        # *_proxy variables, `instance start` and `exec` (whose --cleanenv
        # would hand them to every command) are not, nor TERM.
        host, _ = self.registry({"v1": 0})
        proxy = "http://user:pw@127.0.0.1:9/"
        env = {"https_proxy": proxy, "HTTP_PROXY": proxy, "no_proxy": "127.0.0.1,localhost",
               "TERM": "xterm"}
        gw = self.gw_with({"image": "docker://%s/team/tool:v1" % host}, env)
        gw.initialize(timeout=180)
        self.assertEqual(gw.sh_ok("echo ran"), "ran\n")
        calls = self.env_records()
        builds = [set(r["env"]) for r in calls if r["argv"][1:2] == ["build"]]
        others = [set(r["env"]) for r in calls if r["argv"][1:2] in (["exec"], ["instance"])]
        self.assertEqual(len(builds), 1, calls)
        self.assertTrue({"https_proxy", "HTTP_PROXY", "no_proxy"} <= builds[0], builds[0])
        self.assertNotIn("TERM", builds[0])
        self.assertTrue(others)
        for names in others:
            self.assertEqual(names & set(env), set(), names)

    def test_docker_image_converted_once(self):
        host, digests = self.registry({"v1": 0})
        ref = "docker://%s/team/tool:v1" % host
        state = os.path.join(self.dir, "dstate")
        gws = [self.gw_with({"image": ref}, {"FAKE_APPTAINER_BUILD_SECONDS": "2"},
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
        builds = self.builds("team/tool")
        # Exactly one conversion for both sessions, of the tag pinned to its
        # digest, over http since the registry is on loopback.
        self.assertEqual(len(builds), 1, builds)
        self.assertEqual(builds[0][-1], "docker://%s/team/tool@%s" % (host, digests[0]))
        self.assertIn("--no-https", builds[0])
        self.assertEqual(len(glob.glob(os.path.join(state, "singularity", "images", "*.sif"))), 1)

    def test_moved_tag_is_converted_again(self):
        host, digests = self.registry({"v1": 0})
        ref = "docker://%s/team/tool:v1" % host
        state = os.path.join(self.dir, "mstate")
        images = os.path.join(state, "singularity", "images")
        one = self.gw_with({"image": ref}, state=state)
        self.assertEqual(one.initialize(timeout=180)["environment"]["facts"]["runtime"]["image_digest"], digests[0])
        # The tag did not move: the cached SIF, no second conversion.
        two = self.gw_with({"image": ref}, state=state)
        self.assertEqual(two.initialize(timeout=180)["environment"]["facts"]["runtime"]["image_digest"], digests[0])
        self.assertEqual(len(self.builds("team/tool")), 1)
        # The tag moved: never the stale SIF.
        self.set_tags({"v1": 1})
        three = self.gw_with({"image": ref}, state=state)
        facts = three.initialize(timeout=180)["environment"]["facts"]
        self.assertEqual(facts["runtime"]["image_digest"], digests[1])
        builds = self.builds("team/tool")
        self.assertEqual([b[-1] for b in builds],
                         ["docker://%s/team/tool@%s" % (host, d) for d in digests])
        with open(facts["runtime"]["image"], "rb") as f:
            self.assertIn(("digest %s" % digests[1]).encode(), f.read())
        self.assertEqual(len(glob.glob(os.path.join(images, "*.sif"))), 2)
        self.assertEqual(three.sh_ok("echo ran"), "ran\n")
        # The registry unreachable: a tag is refused, not served from the cache.
        self.reg_proc.stdin.close()
        self.reg_proc.wait(10)
        four = self.gw_with({"image": ref}, state=state)
        r = four.call("initialize", four.make_binding(), timeout=120, token=host_token())
        self.assertIn("error", r)
        self.assertEqual(code_of(r["error"]), "unavailable", r["error"])
        self.assertIn("pinned by digest", r["error"])

    def test_digest_pinned_ref_hits_the_cache(self):
        host, digests = self.registry({"v1": 0})
        ref = "docker://%s/team/tool@%s" % (host, digests[1])
        state = os.path.join(self.dir, "pstate")
        one = self.gw_with({"image": ref}, state=state)
        self.assertEqual(one.initialize(timeout=180)["environment"]["facts"]["runtime"]["image_digest"], digests[1])
        self.assertEqual(len(self.builds("team/tool")), 1)
        asked = len(self.reg_requests())
        # Later sessions neither convert nor ask the registry, even when
        # it is gone.
        self.reg_proc.stdin.close()
        self.reg_proc.wait(10)
        two = self.gw_with({"image": ref}, state=state)
        self.assertEqual(two.initialize(timeout=180)["environment"]["facts"]["runtime"]["image_digest"], digests[1])
        self.assertEqual(two.sh_ok("echo ran"), "ran\n")
        self.assertEqual(len(self.builds("team/tool")), 1)
        self.assertEqual(len(self.reg_requests()), asked)

    def test_if_not_present_starts_offline_from_the_cache(self):
        # An HPC compute node: the registry is unreachable, the cache holds
        # SIFs of the tag.  image_pull_policy "if_not_present" starts from the
        # newest of them without asking the registry and says which digest
        # and how old; "always" (the default) refuses a tag as before.
        host, digests = self.registry({"v1": 0})
        ref = "docker://%s/team/tool:v1" % host
        state = os.path.join(self.dir, "ostate")
        images = os.path.join(state, "singularity", "images")
        self.gw_with({"image": ref}, state=state).initialize(timeout=180)
        self.set_tags({"v1": 1})
        self.gw_with({"image": ref}, state=state).initialize(timeout=180)
        sifs = {d: [p for p in glob.glob(os.path.join(images, "*.sif")) if d[7:] in p][0]
                for d in digests}
        now = time.time()
        # The older digest's SIF made newer: "newest" is the cache's, not the tag's.
        os.utime(sifs[digests[0]], (now - 3600, now - 3600))
        os.utime(sifs[digests[1]], (now - 7200, now - 7200))
        self.reg_proc.stdin.close()
        self.reg_proc.wait(10)
        asked = len(self.reg_requests())
        builds = len(self.builds("team/tool"))
        gw = self.gw_with({"image": ref, "image_pull_policy": "if_not_present"}, state=state)
        rt = gw.initialize(timeout=60)["environment"]["facts"]["runtime"]
        self.assertEqual(rt["image_digest"], digests[0])
        self.assertEqual(os.path.realpath(rt["image"]), os.path.realpath(sifs[digests[0]]))
        self.assertEqual(rt["image_pull_policy"], "if_not_present")
        self.assertTrue(3600 <= rt["image_cache_age_s"] < 3600 + 60, rt)
        self.assertEqual(gw.sh_ok("echo ran"), "ran\n")
        self.assertEqual(len(self.builds("team/tool")), builds)
        self.assertEqual(len(self.reg_requests()), asked)
        running = len(self.instances())
        # "always", written out, is today's behaviour: a tag needs the registry.
        gw = self.gw_with({"image": ref, "image_pull_policy": "always"}, state=state)
        r = gw.call("initialize", gw.make_binding(), timeout=60, token=host_token())
        self.assertEqual(code_of(r.get("error", "")), "unavailable", r)
        # Nothing cached of this reference: refused, naming it and the policy.
        gw = self.gw_with({"image": ref, "image_pull_policy": "if_not_present"},
                          state=os.path.join(self.dir, "empty-state"))
        r = gw.call("initialize", gw.make_binding(), timeout=60, token=host_token())
        self.assertEqual(code_of(r.get("error", "")), "unavailable", r)
        self.assertIn(ref, r["error"])
        self.assertIn('field "image_pull_policy" is "if_not_present"', r["error"])
        self.assertIn("nothing of it is in the image cache", r["error"])
        self.assertEqual(len(self.instances()), running)
        # Only the two values: a clear error naming the field.
        gw = self.gw_with({"image": ref, "image_pull_policy": "never"}, state=state)
        try:
            r = gw.call("initialize", gw.make_binding(), timeout=60, token=host_token())
            text = r.get("error", "")
        except GatewayExited:
            gw.wait_exit(30)
            text = gw.stderr_text()
        self.assertIn('"image_pull_policy"', text)
        self.assertIn("if_not_present", text)

    def cache_entry(self, images, digest):
        """The cached SIF of digest in images (the only one)."""
        sifs = [p for p in glob.glob(os.path.join(images, "*.sif")) if digest[7:] in p]
        self.assertEqual(len(sifs), 1, sifs)
        return sifs[0]

    def offline_refusal(self, ref, state):
        gw = self.gw_with({"image": ref, "image_pull_policy": "if_not_present"}, state=state)
        r = gw.call("initialize", gw.make_binding(), timeout=60, token=host_token())
        self.assertIn("error", r, "initialize should have been refused")
        self.assertEqual(code_of(r["error"]), "unavailable", r["error"])
        self.assertIn(ref, r["error"])
        return r["error"]

    def offline_cache(self, name):
        """Tags v1 and v2 converted into a state dir, then the registry
        stopped.  Returns (state, images, (v1's ref, v2's), digests,
        (v1's SIF, v2's))."""
        host, digests = self.registry({"v1": 0, "v2": 1})
        refs = tuple("docker://%s/team/tool:%s" % (host, t) for t in ("v1", "v2"))
        state = os.path.join(self.dir, name)
        images = os.path.join(state, "singularity", "images")
        for r in refs:
            self.gw_with({"image": r}, state=state).initialize(timeout=180)
        sifs = tuple(self.cache_entry(images, d) for d in digests)
        self.reg_proc.stdin.close()
        self.reg_proc.wait(10)
        return state, images, refs, digests, sifs

    # Offline, a cache entry is started only when sandgate converted it for
    # this very reference (registry, repository, tag) and the file is still
    # the one it converted.

    def test_if_not_present_skips_a_sif_no_conversion_recorded(self):
        # A newer file under the reference's name that sandgate did not
        # convert (copied in by hand, say) is not taken: the conversion is.
        state, _, (ref, _), digests, (mine, _) = self.offline_cache("pstate")
        now = time.time()
        planted = mine.replace(digests[0][7:], "f" * 64)
        shutil.copyfile(self.sif, planted)
        os.utime(mine, (now - 600, now - 600))
        gw = self.gw_with({"image": ref, "image_pull_policy": "if_not_present"}, state=state)
        rt = gw.initialize(timeout=60)["environment"]["facts"]["runtime"]
        self.assertEqual(rt["image_digest"], digests[0])
        self.assertEqual(os.path.realpath(rt["image"]), os.path.realpath(mine))
        self.assertTrue(600 <= rt["image_cache_age_s"] < 660, rt)
        self.assertEqual(gw.sh_ok("echo ran"), "ran\n")

    def test_if_not_present_never_takes_another_tags_conversion(self):
        # v1's conversion (and its record) under v2's name is not v2's.
        state, images, (_, other), digests, (mine, theirs) = self.offline_cache("tstate")
        key_other = os.path.basename(theirs)[:-(64 + 5)]
        for suffix in ("", ".json"):
            if os.path.exists(theirs + suffix):
                os.unlink(theirs + suffix)
            if os.path.exists(mine + suffix):
                shutil.copy2(mine + suffix, os.path.join(
                    images, "%s.%s.sif%s" % (key_other, digests[0][7:], suffix)))
        err = self.offline_refusal(other, state)
        self.assertIn("nothing of it is in the image cache", err)

    def test_if_not_present_refuses_a_conversion_changed_since(self):
        # The converted file changed (same size, same mtime): refused,
        # naming the file, and never an older conversion instead.
        state, _, (ref, _), _, (mine, _) = self.offline_cache("cstate")
        now = time.time()
        older = mine.replace(os.path.basename(mine)[-(64 + 4):-4], "e" * 64)
        shutil.copy2(mine, older)
        if os.path.exists(mine + ".json"):
            with open(mine + ".json") as f:
                rec = f.read()
            with open(older + ".json", "w") as f:
                f.write(rec.replace(mine[-(64 + 4):-4], "e" * 64))
        os.utime(older, (now - 7200, now - 7200))
        with open(mine, "r+b") as f:
            data = f.read()
            f.seek(len(data) // 2)
            f.write(bytes([data[len(data) // 2] ^ 1]))
        os.utime(mine, (now - 600, now - 600))
        running = len(self.instances())
        err = self.offline_refusal(ref, state)
        self.assertIn(os.path.basename(mine)[-(64 + 4):-(64 + 4) + 12], err)
        self.assertIn("no longer the file converted", err)
        self.assertEqual(len(self.instances()), running)

    def test_always_converts_an_altered_cache_entry_again(self):
        # Under "always" the registry confirms the tag's digest, but the
        # cached SIF is started only if it is still the file converted:
        # one changed since is converted again.
        host, digests = self.registry({"v1": 0})
        ref = "docker://%s/team/tool:v1" % host
        state = os.path.join(self.dir, "astate")
        images = os.path.join(state, "singularity", "images")
        self.gw_with({"image": ref}, state=state).initialize(timeout=180)
        sif = self.cache_entry(images, digests[0])
        with open(sif, "ab") as f:
            f.write(b"not what was converted\n")
        gw = self.gw_with({"image": ref}, state=state)
        rt = gw.initialize(timeout=180)["environment"]["facts"]["runtime"]
        self.assertEqual(rt["image_digest"], digests[0])
        self.assertEqual(len(self.builds("team/tool")), 2)
        with open(rt["image"], "rb") as f:
            self.assertNotIn(b"not what was converted", f.read())
        self.assertEqual(gw.sh_ok("echo ran"), "ran\n")

    def test_oras_ref(self):
        host, digests = self.registry({"v2": 1})
        ref = "oras://%s/team/tool:v2" % host
        gw = self.gw_with({"image": ref}, state=os.path.join(self.dir, "ostate"))
        self.assertEqual(gw.initialize(timeout=180)["environment"]["facts"]["runtime"]["image_digest"], digests[1])
        self.assertEqual(gw.sh_ok("echo ran"), "ran\n")
        builds = self.builds("team/tool")
        self.assertEqual(len(builds), 1)
        self.assertEqual(builds[0][-1], "oras://%s/team/tool@%s" % (host, digests[1]))
        # Both kinds of request: the anonymous token, then the manifest.
        reqs = self.reg_requests()
        self.assertIn("GET /token?service=fake-registry&scope=repository:team/tool:pull", reqs)
        self.assertIn("HEAD /v2/team/tool/manifests/v2", reqs)

    def test_sandbox_directory_image(self):
        # A sandbox (an unpacked root directory) is started as it is: no
        # conversion, and a non-persistent session leaves it unchanged.
        box = os.path.join(self.dir, "sandbox")
        for d in ("bin", "usr/bin", "lib/x86_64-linux-gnu", "lib64", "etc"):
            os.makedirs(os.path.join(box, d))
        # sleep: the fake's instance process comes from the image (README.md).
        progs = ("/bin/sh", "/usr/bin/env", "/bin/cat", "/bin/sleep")
        for prog in progs:
            shutil.copy2(os.path.realpath(prog), box + prog)
        libs = subprocess.run(["ldd"] + list(progs),
                              capture_output=True, text=True).stdout
        for lib in set(re.findall(r"(/lib\S*)", libs)):
            os.makedirs(os.path.dirname(box + lib), exist_ok=True)
            shutil.copy2(os.path.realpath(lib), box + lib)
        with open(os.path.join(box, "etc", "sandbox-marker"), "w") as f:
            f.write("from the sandbox\n")
        before = sorted(os.path.relpath(os.path.join(r, n), box)
                        for r, ds, fs in os.walk(box) for n in ds + fs)
        gw = self.gw_with({"image": box + "/"}, state=os.path.join(self.dir, "bstate"))
        facts = gw.initialize(timeout=180)["environment"]["facts"]
        self.assertEqual(facts["runtime"]["image"], box)
        self.assertNotIn("image_digest", facts["runtime"])
        self.assertEqual(gw.sh_ok("cat /etc/sandbox-marker"), "from the sandbox\n")
        # Not the host's root: the host's /etc/os-release is not there.
        self.assertNotEqual(gw.sh("cat /etc/os-release")["exit_code"], 0)
        gw.sh_ok("echo changed > /etc/sandbox-marker; echo new > /etc/new-file", mode="unconfined")
        self.assertEqual(gw.sh_ok("cat /etc/sandbox-marker"), "changed\n")
        gw.shutdown()
        after = sorted(os.path.relpath(os.path.join(r, n), box)
                       for r, ds, fs in os.walk(box) for n in ds + fs)
        self.assertEqual(before, after)
        with open(os.path.join(box, "etc", "sandbox-marker")) as f:
            self.assertEqual(f.read(), "from the sandbox\n")
        self.assertEqual(len(self.builds("sandbox")), 0)

    def test_relative_paths_are_taken_beside_the_config_file(self):
        # A relative image and host_workspace were taken from the working
        # directory of whoever ran sandgate: `config check` in one place
        # and the host's `serve` in another used different files.
        d = os.path.join(self.dir, "project")
        os.makedirs(os.path.join(d, "images"))
        os.makedirs(os.path.join(d, "ws"))
        shutil.copyfile(self.sif, os.path.join(d, "images", "image.sif"))
        with open(os.path.join(d, "ws", "marker"), "w") as f:
            f.write("beside the config\n")
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "p", "profiles": {"p": {
                "backend": "singularity", "image": "images/image.sif",
                "host_workspace": "./ws"}}}, f)
        check = subprocess.run([BIN, "config", "check", "--config", cfg, "--profile", "p",
                                "--state-dir", os.path.join(self.dir, "rstate")],
                               capture_output=True, text=True, timeout=60, cwd="/",
                               env=dict(os.environ, **self.env))
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # The gateway runs in the test's directory, which holds neither.
        gw = Gateway(state_dir=os.path.join(self.dir, "rstate"), config=cfg, profile="p",
                     env_extra=dict(self.env))
        self.addCleanup(gw.cleanup)
        facts = gw.initialize(timeout=180)["environment"]["facts"]
        self.assertEqual(facts["runtime"]["image"],
                         os.path.realpath(os.path.join(d, "images", "image.sif")))
        self.assertEqual(gw.sh_ok("cat marker"), "beside the config\n")

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
        one.initialize(identity="both", remove_workspace_on_exit=None)
        # The instance's /tmp lives as long as the instance: a restart empties it.
        one.sh_ok("echo alive > /tmp/instance-mark", mode="unconfined")
        two = self.gw_with({"shared": True}, state=state)
        two.initialize(identity="both", remove_workspace_on_exit=None)
        self.assertEqual(two.sh_ok("cat /tmp/instance-mark"), "alive\n")
        self.assertEqual(one.sh_ok("cat /tmp/instance-mark"), "alive\n")
        self.assertEqual([i["instance"] for i in self.instances()], ["sg-both"])
