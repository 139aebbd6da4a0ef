"""The fake apptainer (tests/fakes/apptainer/) for one test: a directory of
its own with a HOME, the argv log and a SIF built from docker://debian:12.
Shared by test_singularity and test_singularity_attacks.
"""

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile

from sgclient import CONFIG

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_DIR = os.path.join(HERE, "..", "fakes", "apptainer")
FAKE = os.path.join(FAKE_DIR, "apptainer")


class ApptainerFixture:
    """A mixin for a GatewayTestCase: fake_apptainer() in setUp."""

    def fake_apptainer(self, prefix):
        """Skip where the fake cannot run; else make the directory and the SIF."""
        if CONFIG:
            self.skipTest("singularity-backend checks use their own config")
        if os.environ.get("SG_PEER_BIN"):
            # Exit statuses, crash points and replies of sandgate itself:
            # the delegation wrapper reports its own (e2e/test_singularity
            # runs these directly).
            self.skipTest("checks sandgate itself, not a relay")
        if os.getuid() != 0:
            self.skipTest("the fake apptainer needs root")
        for prog in ("bwrap", "nsenter", "unshare"):
            if not shutil.which(prog):
                self.skipTest("%s is missing" % prog)
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.log = os.path.join(self.dir, "argv.log")
        self.env_log = os.path.join(self.dir, "env.log")
        self.env = {"HOME": self.home, "PATH": FAKE_DIR + ":" + os.environ.get("PATH", ""),
                    "FAKE_APPTAINER_LOG": self.log, "FAKE_APPTAINER_ENV_LOG": self.env_log}
        self.addCleanup(self._clean)
        self.sif = os.path.join(self.dir, "image.sif")
        self.cli(["-q", "build", self.sif, "docker://debian:12"])

    def runtime(self, knobs=None):
        """A profile's `runtime`: a wrapper that gives the fake its knobs.

        sandgate hands the runtime an allow-listed environment, so the
        fake's FAKE_APPTAINER_* knobs cannot come from the gateway's: the
        wrapper sets them (the argv log's among them).  One wrapper per
        set of knobs, so that sessions asking for the same knobs start
        their instances with the same argv (a shared session compares it).
        """
        env = {k: v for k, v in self.env.items() if k.startswith("FAKE_APPTAINER_")}
        env.update({k: v for k, v in (knobs or {}).items() if k.startswith("FAKE_APPTAINER_")})
        text = "#!/bin/sh\n" + "".join("export %s=%s\n" % (k, shlex.quote(v))
                                       for k, v in sorted(env.items()))
        text += "exec %s \"$@\"\n" % shlex.quote(FAKE)
        d = os.path.join(self.dir, "rt-" + hashlib.sha256(text.encode()).hexdigest()[:12])
        path = os.path.join(d, "apptainer")
        if not os.path.exists(path):
            os.makedirs(d, exist_ok=True)
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.chmod(path + ".tmp", 0o755)
            os.rename(path + ".tmp", path)
        return path

    def env_records(self):
        """[{argv, env}] of every runtime call that had FAKE_APPTAINER_ENV_LOG."""
        try:
            with open(self.env_log) as f:
                return [json.loads(l) for l in f]
        except FileNotFoundError:
            return []

    def _clean(self):
        self.cli(["instance", "stop", "--all"], check=False)
        subprocess.run(["rm", "-rf", self.dir])

    def cli(self, args, check=True, extra=None):
        env = dict(os.environ, **self.env, **(extra or {}))
        r = subprocess.run([FAKE] + args, env=env, capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError("apptainer %s: %s" % (args, r.stderr))
        return r

    def instance_list(self):
        return json.loads(self.cli(["instance", "list", "--json"]).stdout)["instances"]
