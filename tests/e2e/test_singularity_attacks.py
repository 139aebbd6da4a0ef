"""Attacks on the singularity backend (tests/fakes/apptainer): a binding
field that splits the runtime's `--bind` spec into extra binds, identities
whose names collide with the image cache or cannot name an instance, a
shared session joining an instance another profile started, and commands
reaching past the instance: an abstract unix socket of the host (an
instance with network shares the host's network namespace), a setuid
bit on a workspace file (where apptainer runs as root, so do commands),
the gateway's TERM and proxy variables (credentials in a proxy URL), and
root's capabilities or a host-wide sysctl (/proc/sys/kernel/core_pattern)
from an `unconfined` command, with the fake runtime honouring --userns and
--no-privs, refusing a user namespace, or granting root's capabilities
whatever it is asked.

Like test_singularity.py these tests write their own config and skip when
the suite runs against another profile, without root, or without
bubblewrap.
"""

import json
import os
import signal
import subprocess

from sgclient import (BIN, GatewayTestCase, Gateway, GatewayExited, code_of, host_token,
                      shell_quote)

from apptainer_fixture import ApptainerFixture
from escapes import abstract_socket_probe, setuid_leftovers


class SingularityAttacks(ApptainerFixture, GatewayTestCase):
    def setUp(self):
        self.fake_apptainer("sg-e2e-singatk-")
        self.state = os.path.join(self.dir, "state")

    def instances(self):
        return sorted(i["instance"] for i in self.instance_list())

    def gw_with(self, profiles, name="p", env_extra=None):
        cfg = os.path.join(self.dir, "config-%d.json" % len(os.listdir(self.dir)))
        profs = {}
        for n, prof in profiles.items():
            profs[n] = dict(backend="singularity", image=self.sif,
                            runtime=self.runtime(env_extra))
            profs[n].update(prof)
        with open(cfg, "w") as f:
            json.dump({"default": name, "profiles": profs}, f)
        gw = Gateway(state_dir=self.state, config=cfg, profile=name,
                     env_extra=dict(self.env, **(env_extra or {})))
        self.addCleanup(gw.cleanup)
        return gw

    def envs(self, gw, *args):
        cfg = gw.argv[gw.argv.index("--config") + 1]
        return subprocess.run([BIN, "envs"] + list(args) + ["--state-dir", self.state,
                                                          "--config", cfg],
                              env=dict(os.environ, **self.env), capture_output=True,
                              text=True, timeout=120)

    def test_a_root_with_a_comma_binds_no_host_directory(self):
        # Apptainer splits every --bind value at ',' and ':' (and '^'), so a
        # root of "/opt/w,SECRET:/stolen" was a second, writable bind of a
        # host directory the binding never named.  The container made the
        # literal root in its persistent overlay first, so that the next
        # session's commands could start there.
        secret = os.path.join(self.dir, "secret")
        os.makedirs(secret)
        with open(os.path.join(secret, "key"), "w") as f:
            f.write("host secret\n")
        roots = ("/opt/w,%s:/stolen" % secret, "/opt/w:ro,%s:/stolen" % secret,
                 "/opt/w^%s:/stolen" % secret[1:], "/opt/w ")
        prep = self.gw_with({"p": {"persistent": True}})
        prep.initialize(identity="ovl", remove_workspace_on_exit=None)
        prep.sh_ok(" && ".join("mkdir -p '%s'" % r for r in roots), mode="unconfined")
        prep.shutdown()
        for root in roots:
            gw = self.gw_with({"p": {"persistent": True}})
            tok = host_token()
            r = gw.call("initialize", gw.make_binding(root=root, identity="ovl",
                                                      remove_workspace_on_exit=None),
                        timeout=120, token=tok)
            if "error" not in r:
                gw.token = tok
                out = gw.sh("cat /stolen/key; echo pwned > /stolen/planted")
                self.assertNotIn("host secret", out["output"])
                self.fail("root %r was accepted" % root)
            self.assertEqual(code_of(r["error"]), "invalid_argument", r["error"])
            self.assertIn("root", r["error"])
            self.assertEqual(os.listdir(secret), ["key"])
            self.assertEqual(self.instances(), [])
            gw.cleanup()

    def test_identity_images_leaves_the_image_cache_alone(self):
        # <state>/singularity/images is the image cache; an identity named
        # "images" had its environment there, and removing it removed the
        # cache (and `envs` could neither list nor remove it).
        cache = os.path.join(self.state, "singularity", "images")
        os.makedirs(cache)
        with open(os.path.join(cache, "kept.sif"), "w") as f:
            f.write("a cached image\n")
        gw = self.gw_with({"p": {}})
        gw.initialize(identity="images", remove_workspace_on_exit=True)
        self.assertFalse(os.path.exists(os.path.join(cache, "env.json")),
                         "the environment of identity \"images\" lives in the image cache")
        self.assertEqual(gw.sh_ok("echo ran"), "ran\n")
        listed = self.envs(gw, "list", "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("singularity-", listed.stdout)
        self.assertNotIn('"ghost"', listed.stdout)
        gw.shutdown()
        self.assertEqual(os.listdir(cache), ["kept.sif"])
        self.assertEqual(self.instances(), [])

    def test_any_identity_gets_an_instance_envs_can_collect(self):
        # Apptainer names instances [a-zA-Z0-9._-]+ only, and a slug keeps
        # '%XX': an identity such as an e-mail address could never start.
        # A long one (slug over 100 bytes) was never listed by `envs`.
        for ident in ("alice@example.com", "x" * 128, "a" * 100 + "/b"):
            gw = self.gw_with({"p": {}})
            gw.initialize(identity=ident, remove_workspace_on_exit=None)
            self.assertEqual(gw.sh_ok("echo ran"), "ran\n")
            gw.proc.send_signal(signal.SIGKILL)
            gw.proc.wait()
            self.assertEqual(len(self.instances()), 1)
            listed = self.envs(gw, "list", "--json")
            self.assertEqual(listed.returncode, 0, listed.stderr)
            rows = [e for e in json.loads(listed.stdout)
                    if e.get("identity") == ident]
            self.assertEqual(len(rows), 1, listed.stdout)
            self.assertEqual(rows[0]["state"], "running")
            r = self.envs(gw, "rm", rows[0]["id"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(self.instances(), [])
            self.assertEqual(os.listdir(os.path.join(self.state, "singularity")), [])

    def test_a_shared_session_joins_no_instance_another_profile_started(self):
        # A shared session joins the identity's running instance as it is:
        # one started by another profile (here without `network: "none"`)
        # would run this profile's commands with the host's network while
        # its facts claimed the namespace.
        profiles = {"open": {"shared": True}, "closed": {"shared": True, "network": "none"}}
        one = self.gw_with(profiles, name="open")
        one.initialize(identity="mixed", remove_workspace_on_exit=None)
        two = self.gw_with(profiles, name="closed")
        tok = host_token()
        r = two.call("initialize", two.make_binding(identity="mixed",
                                                    remove_workspace_on_exit=None),
                     timeout=120, token=tok)
        if "error" not in r:
            two.token = tok
            facts = r["data"]["environment"]["facts"]
            ifaces = two.sh_ok("cat /proc/net/dev")
            self.assertFalse(facts["runtime"]["network_namespace"] and "eth" in ifaces
                             or len(ifaces.splitlines()) > 3,
                             "facts %s, interfaces %s" % (facts["runtime"], ifaces))
        else:
            self.assertIn("open", r["error"])
        self.assertEqual(one.sh_ok("echo still"), "still\n")

    def test_no_command_reaches_a_host_abstract_socket(self):
        # Without `network: "none"` the instance keeps the host's network
        # namespace, and with it every abstract unix socket of the host's
        # daemons (a D-Bus or X11 one grants whatever its owner can do).
        gw = self.gw_with({"p": {}})
        gw.initialize()
        facts = gw.init_reply["environment"]["facts"]
        if (facts.get("landlock_abi") or 0) < 6:
            self.skipTest("needs Landlock ABI 6 (abstract socket scoping)")
        probe = abstract_socket_probe(self)
        for mode in ("unconfined", "standard"):
            out = gw.sh(probe, mode)["output"]
            self.assertIn("refused", out, "a %s command reached a host abstract socket" % mode)
            pid = gw.start(probe, mode=mode)["id"]
            out, _ = gw.read_all(pid)
            self.assertIn("refused", out,
                          "a %s background process reached a host abstract socket" % mode)
        # The scope keeps the environment's own processes in reach.
        pid = gw.start("sleep 300", mode="unconfined")["id"]
        gw.stop(pid)
        self.assertEqual(gw.wait_ended(pid)["status"], "stopped")

    def test_no_command_sets_a_setuid_or_setgid_bit(self):
        # The fake, like apptainer run by root, runs commands as root: a
        # setuid file left in the workspace, a directory of this host, is
        # a setuid-root program for whoever else on the host reaches it.
        gw = self.gw_with({"p": {}})
        gw.initialize()
        self.assertEqual(setuid_leftovers(gw), [])
        self.assertTrue(gw.init_reply["environment"]["facts"]["isolation"]["syscalls_restricted"])

    # ---- what reaches the runtime and the commands --------------------

    def command_outputs(self, gw, command):
        """command's output from bash and from a background process, in
        `unconfined` and in `standard` mode."""
        outs = {}
        for mode in ("unconfined", "standard"):
            outs["bash " + mode] = gw.sh(command, mode)["output"]
            pid = gw.start(command, mode=mode)["id"]
            outs["process " + mode] = gw.read_all(pid)[0]
        return outs

    def test_no_command_sees_the_gateways_term_or_proxy_variables(self):
        # apptainer's --cleanenv keeps TERM and every *_proxy variable of
        # the CLI's environment, which was the gateway's whole environment
        # less APPTAINER_*/SINGULARITY_*: a proxy URL's credentials reached
        # every command.
        proxy = "http://user:s3cret-proxy-pw@127.0.0.1:9/"
        leak = {"https_proxy": proxy, "HTTP_PROXY": proxy, "no_proxy": "127.0.0.1,localhost",
                "TERM": "xterm-from-the-gateway"}
        gw = self.gw_with({"p": {}}, env_extra=leak)
        gw.initialize()
        for where, out in self.command_outputs(gw, "env").items():
            names = {line.split("=", 1)[0] for line in out.splitlines()}
            # TERM may be set, to the host's non-interactive value (dumb),
            # never to the gateway's.
            self.assertEqual(names & (set(leak) - {"TERM"}), set(), "%s: %s" % (where, out))
            self.assertNotIn("TERM=" + leak["TERM"], out.splitlines(), where)
            self.assertNotIn("s3cret", out, where)
        # The runtime itself is given none of them either (a pull alone
        # gets the proxies: test_singularity's docker:// tests).
        calls = [r for r in self.env_records() if r["argv"][1:2] in (["exec"], ["instance"])]
        self.assertTrue(calls)
        for r in calls:
            self.assertEqual(set(r["env"]) & set(leak), set(), r["argv"][:3])

    # ---- root's capabilities and host-wide sysctls ---------------------

    PRIVS = ("import os\n"
             "st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
             "print('caps', st['CapEff'].strip(), st['CapBnd'].strip())\n"
             "print('uid_map', ' '.join(open('/proc/self/uid_map').read().split()))\n"
             "for f in ('/proc/sys/kernel/core_pattern', '/proc/sysrq-trigger'):\n"
             "    try:\n"
             "        os.close(os.open(f, os.O_WRONLY))\n"
             "        print('opened', f)\n"
             "    except OSError as e:\n"
             "        print('refused', f, e.errno)\n")

    def test_an_unconfined_command_holds_no_capability_and_writes_no_sysctl(self):
        # In `unconfined` mode a command ran as uid 0 with every capability and
        # a writable /proc: it could open /proc/sys/kernel/core_pattern
        # for writing (nothing is written here), the local backend's route
        # to host root.  Now the instance runs in a user namespace
        # (--userns), commands without any capability (--no-privs on start
        # and on every exec: apptainer recomputes a joining root's set),
        # and /proc/sys read-only, so uid 0 cannot write a sysctl either.
        gw = self.gw_with({"p": {}})
        gw.initialize()
        for where, out in self.command_outputs(gw, "python3 -c " + shell_quote(self.PRIVS)).items():
            self.assertNotIn("opened", out, "%s: %s" % (where, out))
            self.assertIn("caps 0000000000000000 0000000000000000", out, where)
            self.assertNotIn("uid_map 0 0 4294967295", out, where)
        self.assertTrue(gw.init_reply["environment"]["facts"]["runtime"]["user_namespace"])

    def refused_at_initialize(self, gw):
        """The initialize error (or the exit at validate): its text."""
        try:
            tok = host_token()
            r = gw.call("initialize", gw.make_binding(), timeout=120, token=tok)
        except GatewayExited:
            code, _ = gw.wait_exit(30)
            self.assertEqual(code, 78, gw.stderr_text())
            return gw.stderr_text()
        if "error" not in r:
            gw.token = tok
            out = gw.sh("python3 -c " + shell_quote(self.PRIVS), "unconfined")
            self.fail("initialize was accepted; an unconfined command: %s" % out["output"])
        self.assertEqual(code_of(r["error"]), "unsupported", r["error"])
        return r["error"]

    def test_a_runtime_that_keeps_root_capabilities_is_refused(self):
        # A runtime that takes the flags and honours none of them (an
        # installation or version sandgate does not know) would run every
        # command as root with root's capabilities: sandgate checks what a
        # joining process has, and refuses.
        gw = self.gw_with({"p": {}}, env_extra={"FAKE_APPTAINER_KEEP_CAPS": "1"})
        err = self.refused_at_initialize(gw)
        self.assertIn("privilege", err)
        self.assertEqual(self.instances(), [])

    def test_no_user_namespace_is_refused(self):
        # Where the kernel or the site gives no user namespace, the instance
        # would run in the host's: sandgate refuses rather than start it
        # there.
        gw = self.gw_with({"p": {}}, env_extra={"FAKE_APPTAINER_NO_USERNS": "1"})
        err = self.refused_at_initialize(gw)
        self.assertIn("user namespace", err)
        self.assertEqual(self.instances(), [])
