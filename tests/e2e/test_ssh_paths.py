"""The ssh backend: the files ssh reads, and exports that must end.

Runs against its own real sshd on 127.0.0.1 (tests/ssh/sshd-harness.sh),
whatever SANDGATE_TEST_PROFILE says; skipped when sshd is not installed.

- identity_file and known_hosts_file: the file sandgate checks (`config
  check`, `probe`, validate) must be the one ssh reads.  ssh unquotes a
  value (a `'` pair disappears), expands `${VAR}` of its environment, `%`
  tokens and `~`; each is either passed so that ssh reads the named file or
  refused with invalid_argument naming the field.
- present_artifact over ssh (the export's snapshot): a file swapped for a
  FIFO after the gateway's check, and a host that stalls, end the request
  promptly with a clear error instead of holding it until a cancel
  (docs/security.md, ssh section).

The `ssh` that sandgate runs is found on its PATH; the export tests put a
wrapper first there that acts only on the one ssh call whose command line
names the export's file (the gateway's own checks travel on stdin).
"""

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import unittest

import sgclient
from sgclient import GatewayTestCase, Gateway, SLACK, host_token, unique

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "ssh", "sshd-harness.sh")


def harness_start():
    """Start a harness sshd; its variables, or SkipTest."""
    if not sgclient.BIN:
        raise unittest.SkipTest("SANDGATE_BIN is not set")
    if not shutil.which("ssh"):
        raise unittest.SkipTest("the OpenSSH client is not installed")
    p = subprocess.run(["sh", HARNESS, "start"], capture_output=True, text=True)
    if p.returncode == 77:
        raise unittest.SkipTest("sshd is not installed")
    if p.returncode != 0:
        raise AssertionError("sshd-harness.sh start failed: %s" % p.stderr[-2000:])
    env = {}
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        env[k] = v.strip("'")
    return env


class SshPaths(GatewayTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.h = harness_start()
        cls.work = tempfile.mkdtemp(prefix="sg-e2e-sshpaths-", dir="/var/tmp")
        with open(cls.h["SANDGATE_TEST_CONFIG"]) as f:
            cls.base = json.load(f)["profiles"]["ssh"]
        cls.real_ssh = shutil.which("ssh")

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["sh", HARNESS, "stop", cls.h["SSHD_DIR"]],
                       capture_output=True)
        shutil.rmtree(cls.work, ignore_errors=True)
        super().tearDownClass()

    # ---- helpers ---------------------------------------------------------

    def config(self, **fields):
        """A config file with one profile, the harness's with fields replaced."""
        prof = dict(self.base, **fields)
        path = os.path.join(self.work, unique("config") + ".json")
        with open(path, "w") as f:
            json.dump({"default": "p", "profiles": {"p": prof}}, f)
        return path

    def check(self, config):
        """`sandgate config check`: (exit status, output)."""
        p = subprocess.run([sgclient.BIN, "config", "check", "--config", config,
                            "--profile", "p", "--state-dir", self.work],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def assertRefused(self, config, field):
        status, out = self.check(config)
        self.assertEqual(status, 78, "config check must refuse the profile: %s" % out)
        self.assertIn("invalid_argument", out)
        self.assertIn(field, out)

    def start(self, config, env_extra=None):
        """(gateway, initialize's reply) for the config's profile."""
        gw = self.gateway(init=False, config=config, profile="p", env_extra=env_extra)
        token, binding = host_token(), gw.make_binding()
        r = gw.call("initialize", binding, token=token, timeout=sgclient.DEFAULT_TIMEOUT * 3)
        if "data" in r:
            gw.token, gw.binding, gw.init_reply = token, binding, r["data"]
        return gw, r

    def host_key(self, path):
        shutil.copyfile(self.h["SSHD_KNOWN_HOSTS"], path)

    def wrapper(self, marker, action):
        """A directory whose `ssh` runs `action` (sh) first when its command
        line holds marker, then the real ssh."""
        d = tempfile.mkdtemp(prefix="wrap-", dir=self.work)
        with open(os.path.join(d, "ssh"), "w") as f:
            f.write("#!/bin/sh\ncase \"$*\" in *%s*) %s ;; esac\nexec %s \"$@\"\n"
                    % (marker, action, sgclient.shell_quote(self.real_ssh)))
        os.chmod(os.path.join(d, "ssh"), 0o755)
        return {"PATH": d + ":" + os.environ.get("PATH", "/usr/bin:/bin")}

    # ---- identity_file and known_hosts_file -----------------------------

    def test_a_quote_in_known_hosts_file_is_part_of_the_name(self):
        # ssh's config parser took k'x'h as kxh: the file checked held
        # nothing, the one used held the key, and the login went through.
        d = tempfile.mkdtemp(dir=self.work)
        open(os.path.join(d, "k'x'h"), "w").close()
        self.host_key(os.path.join(d, "kxh"))
        gw, r = self.start(self.config(known_hosts_file=os.path.join(d, "k'x'h")))
        self.assertIn("error", r, "the empty file k'x'h must be the one checked")
        self.assertCode(r["error"], "unavailable")
        self.assertIn("k'x'h", r["error"])
        # And the named file is the one that counts when it holds the key.
        d2 = tempfile.mkdtemp(dir=self.work)
        self.host_key(os.path.join(d2, "k'y'h"))
        gw2, r2 = self.start(self.config(known_hosts_file=os.path.join(d2, "k'y'h")))
        self.assertIn("data", r2, "k'y'h holds the host key: %s" % r2.get("error"))

    def test_a_variable_in_a_path_is_refused(self):
        # ssh replaced ${HOME} from its own environment: `config check`
        # and probe looked at the literal, empty file and said found.
        d = tempfile.mkdtemp(dir=self.work)
        os.makedirs(os.path.join(d, "${HOME}"))
        open(os.path.join(d, "${HOME}", "kh"), "w").close()
        os.makedirs(d + os.environ["HOME"], exist_ok=True)
        self.host_key(d + os.environ["HOME"] + "/kh")
        self.assertRefused(self.config(known_hosts_file=d + "/${HOME}/kh"),
                           "known_hosts_file")
        key = os.path.join(d, "${HOME}", "id")
        shutil.copyfile(self.h["SSHD_KEY"], key)
        self.assertRefused(self.config(identity_file=key), "identity_file")

    def test_a_percent_is_escaped_or_refused(self):
        d = tempfile.mkdtemp(dir=self.work)
        # known_hosts_file: expanded only by OpenSSH 8.4 and later, so no
        # spelling names one file to every client.
        self.host_key(os.path.join(d, "kh%d"))
        self.assertRefused(self.config(known_hosts_file=os.path.join(d, "kh%d")),
                           "known_hosts_file")
        # identity_file: every ssh expands it, and %% is a literal '%'.
        key = os.path.join(d, "id%d")
        shutil.copyfile(self.h["SSHD_KEY"], key)
        os.chmod(key, 0o600)
        gw, r = self.start(self.config(identity_file=key))
        self.assertIn("data", r, "id%%d is the key: %s" % r.get("error"))

    def test_a_tilde_is_checked_where_ssh_looks(self):
        # A path under ~ was never checked: a missing key passed `config
        # check` and probe said found.
        home = pwd.getpwuid(os.getuid()).pw_dir
        self.assertRefused(self.config(identity_file="~/" + unique("sg-missing-key")),
                           "identity_file")
        self.assertRefused(self.config(identity_file="~sg-no-such-user-x/k"),
                           "identity_file")
        # The account's home (ssh's ~, never $HOME) is where both look.
        rel_key = os.path.relpath(self.h["SSHD_KEY"], home)
        rel_kh = os.path.relpath(self.h["SSHD_KNOWN_HOSTS"], home)
        cfg = self.config(identity_file="~/" + rel_key, known_hosts_file="~/" + rel_kh)
        status, out = self.check(cfg)
        self.assertEqual(status, 0, out)
        gw, r = self.start(cfg, env_extra={"HOME": self.work})
        self.assertIn("data", r, "~ is the account's home: %s" % r.get("error"))

    def test_a_relative_path_is_taken_beside_the_config_file(self):
        # A relative identity_file was read from the working directory:
        # `config check` run in one directory and `serve` started by the
        # host in another looked at two different files.
        d = tempfile.mkdtemp(dir=self.work)
        os.makedirs(os.path.join(d, "keys"))
        shutil.copyfile(self.h["SSHD_KEY"], os.path.join(d, "keys", "id"))
        os.chmod(os.path.join(d, "keys", "id"), 0o600)
        self.host_key(os.path.join(d, "keys", "kh"))
        prof = dict(self.base, identity_file="keys/id", known_hosts_file="./keys/kh")
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "p", "profiles": {"p": prof}}, f)
        elsewhere = tempfile.mkdtemp(dir=self.work)
        # A key of the same name in the working directory is not the one.
        os.makedirs(os.path.join(elsewhere, "keys"))
        open(os.path.join(elsewhere, "keys", "id"), "w").close()
        for cwd in ("/", elsewhere):
            p = subprocess.run([sgclient.BIN, "config", "check", "--config", cfg,
                                "--profile", "p", "--state-dir", self.work],
                               capture_output=True, text=True, timeout=60, cwd=cwd)
            self.assertEqual(p.returncode, 0, "from %s: %s" % (cwd, p.stdout + p.stderr))
        p = subprocess.run([sgclient.BIN, "probe", "--json", "--config", cfg,
                            "--profile", "p", "--state-dir", self.work],
                           capture_output=True, text=True, timeout=60, cwd="/")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        report = json.loads(p.stdout)
        self.assertTrue(report["reachable"], p.stdout)
        self.assertEqual(report["credentials"],
                         {"identity_file": "found", "known_hosts_file": "found"})
        # The gateway runs in the test's directory, which holds neither.
        gw, r = self.start(cfg)
        self.assertIn("data", r, "the files beside the config: %s" % r.get("error"))
        self.assertEqual(gw.sh_ok("echo here").strip(), "here")

    # ---- exports ---------------------------------------------------------

    def test_export_of_a_file_swapped_for_a_fifo_ends_at_once(self):
        # The gateway checks the file, then reads it in a second ssh call;
        # the wrapper swaps it for a FIFO in between.  `cat` waited in
        # open() for a writer that never came, holding the request.
        name = unique("sg-fifo")
        remote = self.base["workspace"]
        swap = 'for f in %s/*/workspace/%s; do rm -f "$f"; mkfifo "$f"; done' % (
            sgclient.shell_quote(remote), name)
        gw, r = self.start(self.config(), env_extra=self.wrapper(name, swap))
        self.assertIn("data", r, r.get("error"))
        path = sgclient.ROOT + "/" + name
        gw.write(path, "regular\n")
        t0 = time.monotonic()
        rid = gw.execute_req("present_artifact", {"path": path})
        try:
            reply = gw.wait_reply(rid, timeout=20 * SLACK)
        except AssertionError:
            self.fail("present_artifact of a file swapped for a FIFO did not end in %d s"
                      % (20 * SLACK))
        self.assertReplyCode(reply, "invalid_argument")
        self.assertIn("regular file", reply["error"])
        self.assertLess(time.monotonic() - t0, 10 * SLACK)

    def test_export_from_a_stalled_host_times_out(self):
        # A host that keeps the connection alive and sends nothing held the
        # export until a cancel; now the idle limit (shortened here) ends it.
        name = unique("sg-stall")
        env = self.wrapper(name, "exec sleep 120")
        env["SANDGATE_TEST_SSH_EXPORT_IDLE_MS"] = "2000"
        gw, r = self.start(self.config(), env_extra=env)
        self.assertIn("data", r, r.get("error"))
        path = sgclient.ROOT + "/" + name
        gw.write(path, "x" * 1000)
        t0 = time.monotonic()
        rid = gw.execute_req("present_artifact", {"path": path})
        try:
            reply = gw.wait_reply(rid, timeout=20 * SLACK)
        except AssertionError:
            self.fail("present_artifact from a stalled host did not end in %d s" % (20 * SLACK))
        self.assertReplyCode(reply, "timeout")
        self.assertIn("no byte", reply["error"])
        self.assertLess(time.monotonic() - t0, 10 * SLACK)
        # The session is still usable: an export of another file works.
        gw.write(sgclient.ROOT + "/plain", "p")
        art = gw.view("present_artifact", {"path": sgclient.ROOT + "/plain"})
        self.assertEqual((art["name"], art["size"]), ("plain", 1))
        self.assertEqual(gw.ok("export/read", {"token": art["execution_export"], "offset": 0}),
                         {"data": sgclient.b64(b"p"), "eof": True})


if __name__ == "__main__":
    unittest.main()
