#!/usr/bin/env python3
"""chain.py - sandgate delegating to sandgate, N relays deep, for the e2e suite.

  chain.py serve ARGS...   run `sandgate serve` whose profile is a `command`
                           backend starting `sandgate serve --peer`, and so
                           on: SG_CHAIN_RELAYS (default 1) relaying gateways
                           in front of the gateway that serves ARGS (the
                           test's own --config, --profile, --state-dir ...)
  chain.py OTHER...        any other command runs sandgate as it is

So chain-2 is host -> sandgate (command) -> sandgate (the test's profile),
and chain-3 adds one more relaying sandgate.  Each relaying gateway gets a
config written here, as an operator would write it (docs/delegation.md):

  {"backend": "command", "command": [sandgate, "serve", "--peer", ...],
   "env": {...}, "shutdown_grace_ms": G, "shutdown_timeout_ms": B}

with G the inner gateway's budget plus a margin and B = G + the 35 s cancel
drain plus a margin, the sizes `config check` demands.  `env` lists this
process's environment (the suite's variables), except the crash-point
variable, which only the innermost gateway sees: the suite's crash tests
aim at the gateway that serves their profile.  That a peer sees nothing
but `env` is tests/delegation/test_command.py's business.

Variables: SG_CHAIN_BIN (the real sandgate), SG_CHAIN_RELAYS, SG_CHAIN_WORK
(where each chain's files go; the system's temporary directory by default).
Python 3 standard library only.
"""

import json
import os
import sys
import tempfile

BIN = os.environ.get("SG_CHAIN_BIN", "")
RELAYS = int(os.environ.get("SG_CHAIN_RELAYS") or "1")
CANCEL_MS = 35000   # a relay's wait for a cancelled request's reply
MARGIN_MS = 5000
PEER_BUDGET_MS = 10000  # sandgate serve --peer's default budget
CRASH = "SANDGATE_TEST_CRASH_AT"


def option(args, name):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def inner_budget(args):
    """The budget of the gateway that serves ARGS, as server.c works it out."""
    flag = option(args, "--shutdown-budget-ms")
    if flag:
        return int(flag)
    config = option(args, "--config") or os.environ.get("SANDGATE_CONFIG")
    if config:
        try:
            with open(config) as f:
                cfg = json.load(f)
            name = option(args, "--profile") or cfg.get("default")
            ms = cfg.get("profiles", {}).get(name, {}).get("shutdown_timeout_ms")
            if isinstance(ms, int) and ms > 0:
                return ms
        except (OSError, ValueError, AttributeError):
            pass  # the inner gateway reports a broken config itself
    return PEER_BUDGET_MS


INNER_ONLY = ("--config", "--profile", "--shutdown-budget-ms", "--state-dir", "--audit-log")


def own_args(args):
    """The test's arguments minus those that belong to the innermost gateway."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in INNER_ONLY:
            skip = True
            continue
        if a.split("=", 1)[0] in INNER_ONLY:
            continue
        out.append(a)
    return out


def main(argv):
    if not BIN:
        sys.stderr.write("chain: SG_CHAIN_BIN must name sandgate\n")
        return 2
    if not argv or argv[0] != "serve":
        os.execv(BIN, [BIN] + argv)
    # The relays' configs and state directories: in run-chain.sh's
    # directory, removed when the suite ends (this process becomes the
    # outermost gateway, so it cannot remove them itself).
    work = tempfile.mkdtemp(prefix="sg-chain-", dir=os.environ.get("SG_CHAIN_WORK") or None)
    env = {k: v for k, v in os.environ.items() if k != CRASH}
    inner = [BIN, "serve", "--peer"] + argv[1:]
    budget = inner_budget(argv[1:])
    for level in range(RELAYS, 0, -1):
        grace = budget + MARGIN_MS
        budget = grace + CANCEL_MS + MARGIN_MS
        peer_env = dict(env)
        if level == RELAYS and CRASH in os.environ:
            peer_env[CRASH] = os.environ[CRASH]
        state = os.path.join(work, "state-%d" % level)
        os.mkdir(state)
        config = os.path.join(work, "relay-%d.json" % level)
        with open(config, "w") as f:
            json.dump({"default": "chain", "profiles": {"chain": {
                "backend": "command", "command": inner, "env": peer_env,
                "shutdown_grace_ms": grace, "shutdown_timeout_ms": budget}}}, f)
        inner = [BIN, "serve", "--peer", "--state-dir", state, "--config", config,
                 "--profile", "chain"]
    # The outermost gateway is the one the test talks to: not a peer.  It
    # shares the test's command line, so a bad option or state directory
    # is refused by it as by a direct gateway; the profile, budget, state
    # directory and audit log are the innermost gateway's.
    outer = [BIN, "serve"] + own_args(argv[1:]) + ["--config", config, "--profile", "chain"]
    if option(argv[1:], "--state-dir"):
        outer += ["--state-dir", state]
    os.environ.pop(CRASH, None)
    os.execv(BIN, outer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
