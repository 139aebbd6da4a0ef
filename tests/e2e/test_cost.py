"""What a tool argument may cost the gateway (docs/security.md, "Exports
and the file tools (attack review)").

On the local backend the file tools run inside the gateway, so whatever
an argument makes them compute, the gateway computes: no argument may cost
it unbounded CPU or memory, and work that cannot be cancelled promptly runs
in a process that can be killed, so a cancel is followed by one terminal
reply and the shutdown keeps its budget.

- `RegexInTheGateway`: grep compiled the model's pattern with glibc's
  regcomp() in the gateway (to place the clip window of long lines).  One
  pattern took a gigabyte of the gateway's memory, another over a minute
  of a worker that neither a cancel nor the shutdown could stop.
- `EditCost`, `ManyLongHits`: an edit that multiplies a file built its
  16 MiB result before finding it too large; grep and glob held tens of
  MiB of hits whose answer shows 1 MiB.
- `CostFuzzer`: for every tool, arguments built to cost the gateway
  (regexes, brace-expanding globs, edits that multiply a file, huge
  offsets, long and looping paths), then 60 seeded random regexes, globs
  and paths (the seed is printed; SG_COST_SEED replays it), with the
  gateway's CPU and memory watched; any finding fails the run.  About 15 s.

Local backend only: elsewhere the tools run in the environment.
"""

import itertools
import json
import os
import random
import shutil
import tempfile
import time
import unittest

import sgclient
from sgclient import CONFIG, MiB, SLACK, GatewayTestCase, code_of

MODES = (None, "read_only", "standard", "unconfined")
SANITIZED = bool(os.environ.get("SG_SANITIZED"))
# The gateway's peak resident memory over a whole run (VmHWM).
RSS_BOUND = 64 * MiB
# What one request may cost the gateway itself (its own threads, not the
# processes it starts), and how long its reply may take.
CPU_BOUND_S = 1.5 * (3 if SANITIZED else 1)
WALL_BOUND_S = 8.0

# regcomp() takes about a gigabyte for the first and minutes for the second.
EXPLOSIVE = "((a{1,100}){1,100}){1,60}"
SLOW_COMPILE = "(a*)*$" * 25
# Linear in rg, but slow: minutes over a few megabytes (a search past its time).
SLOW_MATCH = r"(\w+\s?){3,30}[^a]{50}$"


def gateway_cpu(pid):
    """Seconds of CPU the process's own threads have used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(gw):
    return (sgclient.proc_status(gw.proc.pid, "VmHWM") or 0) * 1024


class LocalOnly(GatewayTestCase):
    def setUp(self):
        if CONFIG:
            self.skipTest("the file tools run in the gateway only on the local backend")


class RegexInTheGateway(LocalOnly):
    def test_explosive_regex_costs_the_gateway_nothing(self):
        """One grep of ((a{1,100}){1,100}){1,60} raised the gateway's peak
        RSS to over a gigabyte: regcomp() ran in it, outside every session
        cgroup.  The pattern now reaches only the search program."""
        gw = self.gw = self.gateway()
        gw.write("x.txt", "aaaa\n")
        for mode in MODES:
            cpu = gateway_cpu(gw.proc.pid)
            started = time.monotonic()
            r = gw.execute("grep", {"pattern": EXPLOSIVE, "path": "x.txt"}, mode,
                           timeout=120)
            took = time.monotonic() - started
            # The host's grep may refuse it (ripgrep's size limit): a
            # failed tool, never an `internal` one.
            if "error" in r:
                self.assertNotEqual(code_of(r["error"]), "internal", "mode %s: %s" % (mode, r))
            self.assertLess(took, WALL_BOUND_S * SLACK, "mode %s: grep took %.1f s" % (mode, took))
            self.assertLess(gateway_cpu(gw.proc.pid) - cpu, CPU_BOUND_S,
                            "mode %s: the gateway spent its own CPU on the pattern" % mode)
            if not SANITIZED:
                self.assertLess(peak_rss(gw), RSS_BOUND,
                                "mode %s: the gateway's peak RSS is %d MiB"
                                % (mode, peak_rss(gw) // MiB))

    def test_cancel_of_a_costly_grep_is_answered(self):
        """A cancel was answered, but the grep's terminal reply did not come
        for as long as regcomp() ran (minutes)."""
        gw = self.gw = self.gateway()
        gw.write("x.txt", "aaaa\n")
        for mode in MODES:
            rid = gw.execute_req("grep", {"pattern": SLOW_COMPILE, "path": "x.txt"}, mode)
            time.sleep(0.3)
            gw.cancel(rid)
            t0 = time.monotonic()
            r = gw.wait_reply(rid, timeout=30)
            self.assertLess(time.monotonic() - t0, 5 * SLACK,
                            "mode %s: no terminal reply after the cancel" % mode)
            if "error" in r:
                self.assertCode(r["error"], "cancelled")

    def test_eof_during_a_costly_grep_keeps_the_budget(self):
        """At EOF the gateway spent its whole 60 s budget on such a grep and
        exited 69 ("a request handler did not stop")."""
        gw = self.gw = self.gateway()
        gw.write("x.txt", "aaaa\n")
        gw.execute_req("grep", {"pattern": SLOW_COMPILE, "path": "x.txt"})
        time.sleep(0.3)
        t0 = time.monotonic()
        gw.close_stdin()
        rc, err = gw.wait_exit(timeout=20 * SLACK)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertLess(time.monotonic() - t0, 10 * SLACK, "the shutdown took its whole budget")

    def test_search_past_its_time_is_stopped_and_answered(self):
        """A search that runs past its deadline is killed and the tool says
        so (the deadline is shortened here; a test can only shorten it)."""
        gw = self.gw = self.gateway(env_extra={"SANDGATE_TEST_GREP_DEADLINE_MS": "1500"})
        gw.sh_ok("python3 -c 'import random\n"
                 "random.seed(1)\n"
                 "with open(\"big.txt\", \"w\") as f:\n"
                 "    for i in range(30000):\n"
                 "        f.write(\"\".join(random.choice(\"abcdefghij \") for _ in range(100)) + \"\\n\")\n'")
        for mode in MODES:
            started = time.monotonic()
            r = gw.execute("grep", {"pattern": SLOW_MATCH, "path": "big.txt"}, mode,
                           timeout=30 * SLACK)
            took = time.monotonic() - started
            self.assertLess(took, 6 * SLACK, "mode %s: the search ran %.1f s" % (mode, took))
            # Stopped, it fails (an error reply that says so), never `internal`.
            if "error" in r:
                self.assertNotEqual(code_of(r["error"]), "internal", r)
                self.assertIn("stopped", r["error"], r)
        gw.tool_ok("grep", {"pattern": "abc", "path": "big.txt"})

    def test_a_long_match_line_is_clipped(self):
        """A 200 KB line with a match is answered clipped, not whole."""
        gw = self.gw = self.gateway()
        gw.sh_ok("python3 -c 'open(\"long.txt\", \"w\").write(\"x\" * 100000 + \"needle\" + \"y\" * 100000 + \"\\n\")'")
        # The host's grep clips a long line to its head and tail: what it
        # answers is bounded, and says it was clipped.
        view = gw.view("grep", {"pattern": "ne+dle", "path": "long.txt"})
        line = view["matches"][0]["content"]
        self.assertIs(view["matches"][0].get("content_truncated"), True, view)
        self.assertLess(len(line), 8192, line[:300])


class SearchProcess(LocalOnly):
    def test_search_reads_as_the_environments_user(self):
        """In-process steps act as the environment's user (their thread's
        file system ids), but the search program forked from one took the
        gateway's own ids again at exec: as root it found, in a file only
        root may read, what read_file of that file refused."""
        if os.geteuid() != 0:
            self.skipTest("the environment has a user of its own only under a root gateway")
        tmp = tempfile.mkdtemp(prefix="sg-e2e-cost-")
        self.addCleanup(shutil.rmtree, tmp, True)
        host = os.path.join(tmp, "workspace")
        os.makedirs(host)
        with open(os.path.join(host, "open.txt"), "w") as f:
            f.write("SGSECRET open\n")
        sgclient.give_to_commands(host)
        private = os.path.join(host, "root-only.txt")
        with open(private, "w") as f:
            f.write("SGSECRET root only\n")
        os.chmod(private, 0o600)
        cfg = os.path.join(tmp, "config.json")
        with open(cfg, "w") as f:
            json.dump({"default": "p", "profiles": {"p": {
                "backend": "local", "host_workspace": host}}}, f)
        gw = self.gw = self.gateway(state_dir=os.path.join(tmp, "state"), config=cfg, profile="p")
        gw.tool_error("read_file", {"path": "root-only.txt"})
        for mode in MODES:
            res = json.dumps(gw.view("grep", {"pattern": "SGSECRET"}, mode))
            self.assertIn("open.txt", res, res)
            self.assertNotIn("root only", res, "mode %s: %s" % (mode, res))


class EditCost(LocalOnly):
    @unittest.skipIf(SANITIZED, "a sanitizer's own memory is not the gateway's")
    def test_edit_that_multiplies_a_file_is_refused_before_it_is_built(self):
        """A one-byte old_string replaced everywhere by 64 KiB of text:
        the edit built 16 MiB of result in the gateway before it found the
        result too large.  Its size is computed first now."""
        gw = self.gw = self.gateway()
        gw.write("e.txt", "a" * 65536)
        before = peak_rss(gw)
        r = gw.execute("edit_file", {"path": "e.txt", "old_text": "a",
                                     "new_text": "b" * 65536, "replace_all": True})
        grew = peak_rss(gw) - before
        self.assertIn("error", r, r)
        self.assertCode(r["error"], "too_large")
        self.assertLess(grew, 8 * MiB, "the gateway grew by %d MiB" % (grew // MiB))
        self.assertEqual(gw.sh_ok("wc -c < e.txt; tr -d a < e.txt | wc -c").split(),
                         ["65536", "0"])


class ManyLongHits(LocalOnly):
    """10,000 files whose paths are 4 KB long, each with a match: grep and
    glob kept up to twice `max_results` hits, path and text, to sort them,
    though the reply shows 1 MiB of them at most: grep grew the gateway by
    about 50 MiB, glob by about 40."""

    TREE = ("python3 -c 'import os\n"
            "d = \"/\".join([\"p\" * 250] * 15)\n"
            "os.makedirs(d)\n"
            "for i in range(10000):\n"
            "    open(d + \"/%05d\" % i + \"n\" * 200, \"w\").write(\"needle\" * 180 + \"\\n\")\n'")

    def grew(self, tool, args):
        gw = self.gw = self.gateway()
        gw.sh_ok(self.TREE, timeout_seconds=300)
        before = peak_rss(gw)
        view = gw.view(tool, args)
        self.assertEqual(view["total"], 10000, {k: view[k] for k in view if k != "matches"})
        self.assertIs(view["has_more"] or view["truncated"], True)
        return peak_rss(gw) - before

    @unittest.skipIf(SANITIZED, "a sanitizer's own memory is not the gateway's")
    def test_grep_keeps_what_its_answer_can_show(self):
        grew = self.grew("grep", {"pattern": "needle"})
        self.assertLess(grew, 12 * MiB, "the gateway grew by %d MiB" % (grew // MiB))

    @unittest.skipIf(SANITIZED, "a sanitizer's own memory is not the gateway's")
    def test_glob_keeps_what_its_answer_can_show(self):
        grew = self.grew("glob", {"pattern": "**/*nnn"})
        self.assertLess(grew, 12 * MiB, "the gateway grew by %d MiB" % (grew // MiB))


class CostFuzzer(LocalOnly):
    """Arguments built to cost the gateway, for every tool; a finding (a
    reply too slow, the gateway's own CPU spent, an `internal` answer, a
    gateway gone, or its peak memory past RSS_BOUND) fails the run."""

    TREE = r"""
import os
os.makedirs("cost/names", exist_ok=True)
with open("cost/long.txt", "w") as f:
    f.write("a" * (2 << 20) + "needle" + "a" * 1000 + "\n")
with open("cost/nl.txt", "w") as f:
    f.write("\n" * (4 << 20))
with open("cost/edit.txt", "w") as f:
    f.write("a" * 65536)
for i in range(50):
    open("cost/names/" + "a" * 200 + "%02d" % i, "w").close()
d = "cost/deep"
for i in range(200):
    d += "/d"
os.makedirs(d)
open(d + "/leaf.txt", "w").write("leaf\n")
os.symlink("loop", "cost/loop")
for i in range(45):
    os.symlink("chain%d" % (i + 1), "cost/chain%d" % i)
os.symlink("long.txt", "cost/chain45")
"""

    def cases(self):
        a200 = "a" * 200
        deep = "cost/" + "d/" * 200
        yield "grep", {"pattern": EXPLOSIVE}
        yield "grep", {"pattern": SLOW_COMPILE, "path": "cost"}
        yield "grep", {"pattern": "(x+x+)+y", "path": "cost"}
        yield "grep", {"pattern": "(.*){1,10000}$", "path": "cost/names"}
        yield "grep", {"pattern": r"\w{1,1000}\s\w{1,1000}", "ignore_case": True}
        yield "grep", {"pattern": "a{65535}", "path": "cost/long.txt"}
        yield "grep", {"pattern": "|".join("w%05d" % i for i in range(15000)), "path": "cost"}
        yield "grep", {"pattern": "x" * 200000}
        yield "grep", {"pattern": "ne+dle", "path": "cost/long.txt"}
        yield "grep", {"pattern": "a", "path": "cost/long.txt"}
        yield "grep", {"pattern": "leaf", "include": "{a,b}" * 12 + "*"}
        yield "grep", {"pattern": "leaf", "include": "*" * 2000 + "x"}
        yield "grep", {"pattern": "leaf", "path": "a/" * 2040}
        yield "glob", {"pattern": "{a,b}" * 12}
        yield "glob", {"pattern": "{" * 1000 + "}" * 1000}
        yield "glob", {"pattern": "{a,{b,{c,{d,{e,{f,{g,{h,{i,j}}}}}}}}}/" * 40}
        yield "glob", {"pattern": "cost/names/" + "*a" * 400 + "*b"}
        yield "glob", {"pattern": "cost/names/" + "[[:alpha:]]" * 300}
        yield "glob", {"pattern": "**/*/" * 60 + "zz"}
        yield "glob", {"pattern": "cost/" + "**/" * 1000 + "leaf.txt"}
        yield "glob", {"pattern": "*" * 4000}
        yield "read_file", {"path": "cost/nl.txt", "offset": 2 ** 62}
        yield "read_file", {"path": "cost/nl.txt", "offset": 2 ** 62, "limit": 2 ** 62}
        yield "read_file", {"path": "cost/long.txt", "limit": 2 ** 62}
        yield "read_file", {"path": "cost/long.txt", "offset": 1, "limit": 1}
        yield "read_file", {"path": "a/" * 2040}
        yield "read_file", {"path": "../" * 1300}
        yield "read_file", {"path": "cost/loop"}
        yield "read_file", {"path": "cost/chain0"}
        yield "read_file", {"path": "x" * 5000}
        yield "read_file", {"path": deep + "leaf.txt"}
        yield "edit_file", {"path": "cost/edit.txt", "old_text": "a",
                            "new_text": "b" * 65536, "replace_all": True}
        yield "edit_file", {"path": "cost/edit.txt", "old_text": "a" * 65537, "new_text": ""}
        yield "edit_file", {"path": "cost/edit.txt", "old_text": "a" * 1000, "new_text": "a"}
        # Each directory made costs the kernel about a millisecond here:
        # a path holds 2,000 at most, so these stay at a few hundred.
        yield "write_file", {"path": "cost/" + "w/" * 300 + "f", "content": "x"}
        yield "write_file", {"path": "cost/big.txt", "content": "z" * (2 << 20)}
        yield "list_files", {"path": "cost"}
        yield "list_files", {"path": "cost/names", "offset": 2 ** 62}
        yield "list_files", {"path": deep}
        yield "list_files", {"path": "cost/" + "./" * 2000}
        yield "apply_patch", {"patchText": "*** Begin Patch\n*** Add File: cost/" + "m/" * 300
                              + "f\n+x\n*** End Patch\n"}
        yield "bash", {"command": "head -c 30000000 /dev/zero | tr '\\0' a"}
        yield "bash", {"command": "yes | head -c 5000000 >&2"}
        yield "process", {"action": "read", "process_id": "proc-" + "0" * 8,
                          "max_bytes": 2 ** 62, "wait_ms": 1}
        yield "git", {"subcommand": "log", "args": ["--all"]}
        yield "present_artifact", {"path": "cost/long.txt"}
        yield "present_artifact", {"path": "cost/loop"}
        yield "glob", {"pattern": a200 + "*" + a200}
        yield "glob", {"pattern": "**", "path": "cost/deep"}
        yield "grep", {"pattern": "leaf", "path": "cost", "glob": "**/" * 500 + "leaf*"}
        yield "read_file", {"path": "cost/long.txt", "offset": 2 ** 62}
        yield "list_files", {"path": "cost", "offset": 1, "expected_revision": "x"}
        # Doubling 4 MiB of newlines: four million matches, and a diff too
        # big to show.  Each match's search handed memmem the whole rest of
        # the file, which a sanitizer checks at every call: minutes under
        # ASan and TSan.  Now its searches and its diff are linear there too.
        yield "edit_file", {"path": "cost/nl.txt", "old_text": "\n", "new_text": "\n\n",
                            "replace_all": True}

    @staticmethod
    def random_regex(rng, depth=0):
        """A pattern of nested groups, counted repeats and alternations,
        the shapes that make backtracking or automaton-building compilers
        explode."""
        atoms = ["a", ".", r"\w", "[a-z]", "(?:a|aa)", r"\s?", "x*"]
        if depth > 3 or rng.random() < 0.3:
            return rng.choice(atoms)
        inner = "".join(CostFuzzer.random_regex(rng, depth + 1) for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.3:
            inner += "|" + CostFuzzer.random_regex(rng, depth + 1)
        lo = rng.choice([0, 1, 2, 10])
        rep = rng.choice(["*", "+", "?", "{%d,%d}" % (lo, lo + rng.choice([1, 50, 200, 1000]))])
        return "(" + inner + ")" + rep

    @staticmethod
    def random_glob(rng, depth=0):
        """A glob of nested braces, stars, classes and globstars."""
        parts = ["*", "**", "?", "a", "[a-z]", "[[:alpha:]]", "*a*", "d"]
        out = []
        for _ in range(rng.randint(1, 6)):
            if depth < 4 and rng.random() < 0.3:
                out.append("{" + ",".join(CostFuzzer.random_glob(rng, depth + 1)
                                          for _ in range(rng.randint(2, 6))) + "}")
            else:
                out.append(rng.choice(parts))
            out.append(rng.choice(["", "/"]))
        return "".join(out)

    def random_cases(self, rng, n):
        """Seeded, so a finding can be replayed: regexes, globs and paths."""
        for _ in range(n):
            kind = rng.randrange(3)
            if kind == 0:
                yield "grep", {"pattern": self.random_regex(rng) * rng.randint(1, 8),
                               "path": "cost/names", "ignore_case": rng.random() < 0.5}
            elif kind == 1:
                yield "glob", {"pattern": self.random_glob(rng), "path": "cost"}
            else:
                comps = [rng.choice(["..", ".", "loop", "chain0", "deep", "d", "x" * 255, ""])
                         for _ in range(rng.randint(1, 400))]
                yield rng.choice(["read_file", "list_files"]), \
                    {"path": "cost/" + "/".join(comps)}

    def test_no_argument_costs_the_gateway(self):
        # A search past its time is its own test; here it must end soon.
        gw = self.gw = self.gateway(env_extra={"SANDGATE_TEST_GREP_DEADLINE_MS": "3000"})
        gw.sh_ok("python3 -c '%s'" % self.TREE.replace("'", "'\\''"))
        findings, slow = [], []
        started = time.monotonic()
        n = 0
        seed = int(os.environ.get("SG_COST_SEED") or time.time())
        print("\nSG_COST_SEED=%d" % seed)
        rng = random.Random(seed)
        for i, (tool, args) in enumerate(itertools.chain(self.cases(),
                                                         self.random_cases(rng, 60))):
            mode = MODES[i % len(MODES)]
            if tool in ("bash", "apply_patch", "edit_file", "write_file") and \
                    mode == "read_only":
                mode = "standard"
            n += 1
            what = "%s %s (mode %s)" % (tool, json.dumps(args)[:120], mode)
            cpu = gateway_cpu(gw.proc.pid)
            t0 = time.monotonic()
            try:
                r = gw.execute(tool, args, mode, timeout=30 * SLACK)
            except AssertionError as e:
                findings.append("%s: no reply: %s" % (what, e))
                if not gw.running():
                    break
                continue
            took = time.monotonic() - t0
            used = gateway_cpu(gw.proc.pid) - cpu
            if took > 1 or used > 0.2:
                slow.append("%s %.1f s (gateway CPU %.2f s)" % (tool, took, used))
            if took > WALL_BOUND_S * SLACK:
                findings.append("%s: answered in %.1f s" % (what, took))
            if used > CPU_BOUND_S:
                findings.append("%s: %.1f s of the gateway's CPU" % (what, used))
            if "error" in r and code_of(r["error"]) == "internal":
                findings.append("%s: %s" % (what, r["error"][:200]))
            if not gw.running():
                findings.append("%s: the gateway exited" % what)
                break
        hwm = peak_rss(gw)
        print("\n%d cases in %.1f s, the gateway's peak RSS %d MiB; slowest: %s"
              % (n, time.monotonic() - started, hwm // MiB, ", ".join(slow) or "none"))
        if not SANITIZED and hwm >= RSS_BOUND:
            findings.append("the gateway's peak RSS is %d MiB" % (hwm // MiB))
        self.assertEqual(findings, [], "\n".join(findings))


if __name__ == "__main__":
    unittest.main()
