#!/usr/bin/env python3
"""command_peer.py - a scriptable v4 peer behind sandgate's `command` backend.

Its initialize reply is a v4 one (version, capabilities, methods, tools)
plus what it saw: `binding_seen`, `token_seen`, `environ_seen` (its whole
environment).  Every other request is answered {} at once, except as
PEER_MODE (an argument, since the peer's environment is the test subject)
says:
  ignore-eof      never exits after end of input
  die-on-execute  exits (status 3) the moment an execute arrives
  ignore-cancel   never answers an execute, nor a cancel
  hold            holds an execute until its cancel comes, then answers it
                  `cancelled:` and the cancel {"cancelled": true}
  event           answers process/start, then writes a process/event
  version-3       its initialize reply says version 3
  no-capability   its initialize reply offers no capabilities
It logs every frame it reads to PEER_LOG (an argument) when given.
Usage: command_peer.py MODE [LOG]
"""
import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else ""
LOG = sys.argv[2] if len(sys.argv) > 2 else ""


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    held = {}
    session = None
    for line in sys.stdin:
        msg = json.loads(line)
        if LOG:
            with open(LOG, "a") as f:
                f.write(line)
        method, rid, data = msg.get("method"), msg.get("id"), msg.get("data") or {}
        if method == "initialize":
            session = data.get("session")
            send({"id": rid, "data": {
                "version": 3 if MODE == "version-3" else 4,
                "capabilities": [] if MODE == "no-capability" else ["process.start.v1"],
                "methods": ["initialize", "execute", "process/start", "cancel"],
                "tools": ["read_file", "write_file", "peer_tool"],
                "environment": {"backend": "fake", "profile": "fake", "id": "x",
                                "resumed": False, "facts": {}},
                "binding_seen": data, "token_seen": msg.get("token"),
                "environ_seen": dict(os.environ)}})
        elif method == "execute" and MODE == "die-on-execute":
            os._exit(3)
        elif method in ("execute", "cancel") and MODE == "ignore-cancel":
            continue
        elif method == "execute" and MODE == "hold":
            held[json.dumps(rid)] = rid
        elif method == "cancel" and MODE == "hold":
            target = json.dumps(data.get("id"))
            if target in held:
                send({"id": held.pop(target), "error": "cancelled: the peer stopped it"})
            send({"id": rid, "data": {"cancelled": target is not None}})
        elif method == "process/start" and MODE == "event":
            # root_thread_id is always the binding's session (protocol 8.1);
            # sandgate drops an event of another session's process.
            rec = {"id": "p-1", "root_thread_id": session, "status": "running"}
            send({"id": rid, "data": rec})
            send({"method": "process/event", "data": {"Type": "started",
                                                      "Cause": "the process was started",
                                                      "Process": rec}})
        else:
            send({"id": rid, "data": {"echo": method}})
    if MODE == "ignore-eof":
        while True:
            time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
