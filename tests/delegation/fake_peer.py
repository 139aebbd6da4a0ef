#!/usr/bin/env python3
"""fake_peer.py - a misbehaving peer on the host's wire, for the outer
adapter's own tests.

FAKE_PEER_MODE says how it misbehaves:
  ignore-eof     answers requests, then ignores end of input and never exits
  die-on-execute answers initialize, and exits the moment an execute arrives
  ignore-cancel  answers initialize; never answers an execute (a cancel has
                 no reply in any mode)
It answers `serve --peer ...` only; anything else exits 2.
"""
import json
import os
import sys
import time

MODE = os.environ.get("FAKE_PEER_MODE", "")


def reply(rid, data):
    sys.stdout.write(json.dumps({"id": rid, "data": data}) + "\n")
    sys.stdout.flush()


def main():
    if sys.argv[1:3] != ["serve", "--peer"]:
        return 2
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            reply(rid, {"version": (msg.get("data") or {}).get("version"),
                        "binding_seen": msg.get("data"), "token_seen": msg.get("token")})
        elif method == "execute" and MODE == "die-on-execute":
            os._exit(3)
        elif method in ("cancel", "callback") or (method == "execute" and MODE == "ignore-cancel"):
            continue
        else:
            reply(rid, {})
    if MODE == "ignore-eof":
        while True:
            time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
