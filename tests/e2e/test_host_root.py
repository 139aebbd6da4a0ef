"""A local command is never root on this host (local backend, bubblewrap).

The attacker is a command, in every permission mode, `full` included, on a
gateway that runs as root (the deployment docs/security.md describes).
Before, commands ran as uid 0 of the host's initial user namespace: a
`full` command wrote /proc/sys/kernel/core_pattern, pointed it at a
script in its workspace (whose host path it read from bubblewrap's argv in
/proc/1/cmdline), crashed a shell, and the kernel ran the script as root
on the host; and every command, read_only included, printed /etc/shadow
and the host's ssh keys from the read-only /etc.  Now:

- a command is an unprivileged user of a user namespace of its own: no
  host-wide sysctl opens for writing, its uid map names one host uid that
  is not root, and it holds no capability in the host's namespace;
- /proc/1/cmdline (and every argv a command can see) says nothing of the
  host's paths;
- /etc is curated: no root-only host file (shadow, ssh host keys, a 0600
  file an operator left there), no sandgate configuration, even a
  world-readable one, and no root-only file elsewhere (/opt, /usr) is
  readable, through a command or read_only git;
- host_filesystem_restricted is observed by a probe that tries.

Only the opening of a sysctl for writing is tried: nothing is written.
"""

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import textwrap
import time
import unittest
import uuid

import sgclient
from sgclient import BIN, CONFIG, GatewayTestCase

MODES = ("unconfined", "standard", "read_only")
# Host-wide, each root's to write.  (kernel/pid_max is not among them: from
# Linux 6.14 each pid namespace has its own, which its owner may set.)
SYSCTLS = ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/overcommit_memory",
           "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
           "/proc/sys/fs/file-max", "/proc/sysrq-trigger")

# Run inside: each sysctl opened for writing (never written), the uid map,
# the effective capabilities, and what /proc/1/cmdline holds.
INSPECT = textwrap.dedent(r"""
    import json, os, sys
    out = {"writable": []}
    for p in sys.argv[1:]:
        try:
            fd = os.open(p, os.O_WRONLY)
        except OSError:
            continue
        os.close(fd)
        out["writable"].append(p)
    out["cmdline1"] = open("/proc/1/cmdline", "rb").read().decode("latin-1")
    own = [l for l in open("/proc/self/status") if l.startswith("CapEff:")]
    out["capeff"] = own[0].split()[1] if own else ""
    print(json.dumps(out))
""")


def argv_text(argv):
    """argv as one shell command (bash takes a command string)."""
    return " ".join(shlex.quote(a) for a in argv)


def running_as_root():
    return os.geteuid() == 0


class HostRoot(GatewayTestCase):

    def setUp(self):
        if CONFIG:
            self.skipTest("the local backend's own sandbox")
        if not shutil.which("bwrap"):
            self.skipTest("without bubblewrap, commands run on this host itself")
        self.tmp = tempfile.mkdtemp(prefix="sg-e2e-hostroot-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def sandboxed(self, **kw):
        gw = self.gateway(**kw)
        if gw.facts.get("mechanism") != "bubblewrap":
            self.skipTest("bubblewrap cannot run here")
        return gw

    def inspect(self, gw, mode, background=False):
        gw.write(".inspect.py", INSPECT)
        argv = ["python3", ".inspect.py"] + list(SYSCTLS)
        if not background:
            return json.loads(gw.sh_ok(argv_text(argv), mode))
        pid = gw.start(argv_text(argv))["id"]
        gw.wait_ended(pid)
        return json.loads(gw.read_all(pid)[0])

    # -- 1: no host-wide sysctl, no host capability, no host argv --------

    def test_no_command_opens_a_host_sysctl_for_writing(self):
        gw = self.sandboxed()
        for mode in MODES:
            with self.subTest(mode=mode):
                self.assertEqual(self.inspect(gw, mode)["writable"], [])
        with self.subTest(mode="background"):
            self.assertEqual(self.inspect(gw, None, background=True)["writable"], [])

    def host_view(self, marker):
        """(uid line, user namespace) of the process whose argv holds marker."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        argv = f.read().split(b"\0")
                    # The command itself, not bubblewrap or the helper
                    # whose argv carries it on this host.
                    if argv[0] != b"python3" or marker.encode() not in argv:
                        continue
                    with open("/proc/%s/status" % pid) as f:
                        uids = [l.split()[1:] for l in f if l.startswith("Uid:")][0]
                    return uids, os.readlink("/proc/%s/ns/user" % pid)
                except (OSError, IndexError):
                    continue
            time.sleep(0.05)
        self.fail("no process with %s on this host" % marker)

    def test_a_command_is_an_unprivileged_user_of_its_own_namespace(self):
        gw = self.sandboxed()
        host_ns = os.readlink("/proc/self/ns/user")
        for mode in MODES + ("background",):
            with self.subTest(mode=mode):
                marker = "sg-e2e-mark-" + uuid.uuid4().hex
                argv = ["python3", "-c", "import time; time.sleep(3)", marker]
                if mode == "background":
                    gw.start(argv_text(argv))
                else:
                    rid = gw.execute_req("bash", {"command": argv_text(argv)}, mode)
                uids, ns = self.host_view(marker)
                if mode != "background":
                    gw.wait_reply(rid)
                self.assertNotEqual(ns, host_ns, "the command is in the host's user namespace")
                if running_as_root():
                    self.assertNotIn("0", uids, "the command is the host's root: %s" % uids)
                got = self.inspect(gw, None if mode == "background" else mode,
                                   background=mode == "background")
                self.assertEqual(int(got["capeff"], 16), 0)

    def test_proc_1_cmdline_tells_nothing_of_the_host(self):
        gw = self.sandboxed()
        host_paths = [gw.state_dir, os.path.realpath(gw.state_dir)]
        for mode in MODES:
            with self.subTest(mode=mode):
                line = self.inspect(gw, mode)["cmdline1"]
                for p in host_paths:
                    self.assertNotIn(p, line)
                self.assertNotIn("--bind", line)

    # -- 2: no root-only host file, no sandgate configuration -------------

    def plant(self, directory, mode):
        """A file of mode `mode` in a host directory; its path and content."""
        if not running_as_root():
            self.skipTest("planting a root-only file in %s needs root" % directory)
        secret = "sg-e2e-secret-" + uuid.uuid4().hex
        path = os.path.join(directory, "sg-e2e-%s" % uuid.uuid4().hex[:12])
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        os.chmod(path, mode)
        return path, secret

    def test_no_command_reads_a_root_only_host_file(self):
        planted = [self.plant("/etc", 0o600), self.plant("/etc", 0o640)]
        if os.path.isdir("/opt"):
            planted.append(self.plant("/opt", 0o600))
        planted.append(self.plant("/usr/local", 0o600))
        gw = self.sandboxed()
        targets = [p for p, _ in planted] + ["/etc/shadow", "/etc/gshadow"]
        targets += sorted("/etc/ssh/" + n for n in (os.listdir("/etc/ssh")
                                                   if os.path.isdir("/etc/ssh") else [])
                          if n.endswith("_key"))
        for mode in MODES:
            for t in targets:
                with self.subTest(mode=mode, path=t):
                    res = gw.sh(argv_text(["cat", t]), mode)
                    self.assertNotEqual(res["exit_code"], 0, "%s read in %s mode" % (t, mode))
                    for _, secret in planted:
                        self.assertNotIn(secret, res["output"])
        if os.path.exists("/etc/shadow"):
            with open("/etc/shadow") as f:
                root_line = f.readline().strip()
        else:
            root_line = None
        # The git tool runs in the root (it takes no cwd): a repository there.
        gw.sh_ok("git init -q . && touch blame-a && git add blame-a && "
                 "git -c user.name=x -c user.email=x@y commit -qm a")
        for t in ["/etc/shadow", planted[0][0]]:
            with self.subTest(git=t):
                reply = json.dumps(gw.execute("git", {"subcommand": "blame",
                                                      "args": ["--contents", t, "blame-a"]},
                                              "read_only"))
                if root_line:
                    self.assertNotIn(root_line, reply)
                self.assertNotIn(planted[0][1], reply)

    def test_sandgate_configuration_is_not_in_the_sandbox(self):
        if not running_as_root():
            self.skipTest("a configuration under /etc needs root")
        d = tempfile.mkdtemp(prefix="sandgate-e2e-", dir="/etc")
        self.addCleanup(shutil.rmtree, d, True)
        secret = "sg-e2e-key-" + uuid.uuid4().hex
        cfg = os.path.join(d, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "dev",
                       "profiles": {"dev": {"backend": "local"},
                                    "peer": {"backend": "command",
                                             "command": [BIN, "serve"],
                                             "env": {"DAYTONA_API_KEY": secret}}}}, f)
        os.chmod(cfg, 0o644)
        os.chmod(d, 0o755)
        gw = self.sandboxed(config=cfg, profile="dev")
        for mode in MODES:
            with self.subTest(mode=mode):
                res = gw.sh(argv_text(["cat", cfg]), mode)
                self.assertNotEqual(res["exit_code"], 0)
                self.assertNotIn(secret, res["output"])
                listing = gw.sh("ls -a /etc", mode)
                self.assertNotIn(os.path.basename(d), listing["output"])

    def test_the_curated_etc_still_runs_programs(self):
        gw = self.sandboxed()
        out = gw.sh_ok("id -un; getent hosts localhost >/dev/null && echo hosts; "
                       "test -s /etc/ld.so.cache && echo loader; "
                       "test -d /etc/ssl/certs && echo certs; git --version >/dev/null && echo git")
        for word in ("hosts", "loader", "git"):
            self.assertIn(word, out)
        if os.path.isdir("/etc/ssl/certs"):
            self.assertIn("certs", out)

    def test_an_ordinary_users_gateway_gives_commands_no_more(self):
        """sandgate run as an ordinary user: the same promises hold."""
        if not running_as_root() or not shutil.which("setpriv"):
            self.skipTest("needs root to become an ordinary user (setpriv)")
        with open(BIN, "rb") as f:
            if f.read(4) != b"\x7fELF":
                self.skipTest("the gateway is reached through a wrapper (a delegation "
                              "chain); the ordinary user's run needs sandgate itself")
        user = 65534
        for d in (self.tmp,):
            os.chmod(d, 0o755)
        state = os.path.join(self.tmp, "state")
        os.mkdir(state)
        os.chown(state, user, user)
        wrapper = os.path.join(self.tmp, "as-user")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec setpriv --reuid=%d --regid=%d --clear-groups %s \"$@\"\n"
                    % (user, user, BIN))
        os.chmod(wrapper, 0o755)
        if subprocess.run(["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups",
                           "test", "-x", BIN]).returncode != 0:
            self.skipTest("the ordinary user cannot run %s" % BIN)
        saved = sgclient.BIN
        sgclient.BIN = wrapper
        self.addCleanup(setattr, sgclient, "BIN", saved)
        gw = self.sandboxed(state_dir=state, env_extra={"HOME": state, "XDG_CONFIG_HOME": state})
        for mode in MODES:
            with self.subTest(mode=mode):
                got = self.inspect(gw, mode)
                self.assertEqual(got["writable"], [])
                self.assertNotIn(state, got["cmdline1"])
                res = gw.sh("cat /etc/shadow", mode)
                self.assertNotEqual(res["exit_code"], 0)
        iso = gw.facts.get("isolation") or {}
        self.assertIs(iso.get("host_filesystem_restricted"), True, json.dumps(gw.facts))

    def test_host_filesystem_restricted_is_observed(self):
        gw = self.sandboxed()
        iso = gw.facts.get("isolation") or {}
        self.assertIs(iso.get("host_filesystem_restricted"), True, json.dumps(gw.facts))


if __name__ == "__main__":
    unittest.main()
