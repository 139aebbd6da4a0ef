#!/usr/bin/env python3
"""command_peer.py - a scriptable peer on the host's wire behind sandgate's
`command` backend.

Its initialize reply echoes the binding's version and adds capabilities,
methods and what it saw: `binding_seen`, `token_seen`, `environ_seen` (its
whole environment).  Every other request is answered {"echo": method} at
once, except as PEER_MODE (an argument, since the peer's environment is the
test subject) says:
  ignore-eof      never exits after end of input
  die-on-execute  exits (status 3) the moment an execute arrives
  ignore-cancel   never answers an execute (a cancel never has a reply)
  hold            holds an execute until the host's cancel of it comes, then
                  answers it "cancelled: the peer stopped it"
  event           answers process/start, then writes a process event
  callback        run_code: first a tool frame whose parent is not in flight,
                  then one of the program's, waits for the host's callback,
                  and answers the program with what the callback carried
  stray           before each reply, a reply to an id never asked
  wrong-version   its initialize reply says version 99
  no-capability   its initialize reply offers no capabilities
It logs every line it reads, as read, to LOG (an argument) when given.
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


def initialize(rid, msg, data):
    send({"id": rid, "data": {
        "version": 99 if MODE == "wrong-version" else data.get("version"),
        "root": data.get("root"),
        "capabilities": [] if MODE == "no-capability" else ["process.start.v1"],
        "methods": ["initialize", "execute", "process/start", "process/list", "run_code"],
        "environment": {"backend": "fake", "profile": "fake", "id": "x",
                        "resumed": False, "facts": {}},
        "binding_seen": data, "token_seen": msg.get("token"),
        "environ_seen": dict(os.environ)}})


def main():
    held = set()
    programs = {}
    session = None
    for line in sys.stdin:
        msg = json.loads(line)
        if LOG:
            with open(LOG, "a") as f:
                f.write(line)
        method, rid, data = msg.get("method"), msg.get("id"), msg.get("data") or {}
        if MODE == "stray" and method not in ("cancel", "callback"):
            send({"id": "never-asked", "data": {"stray": True}})
        if method == "initialize":
            session = data.get("session")
            initialize(rid, msg, data)
        elif method == "execute" and MODE == "die-on-execute":
            os._exit(3)
        elif method == "execute" and MODE == "ignore-cancel":
            continue
        elif method == "cancel":
            # The host's cancel: the target's id, no data, no reply.
            if MODE == "hold" and rid in held:
                held.discard(rid)
                send({"id": rid, "error": "cancelled: the peer stopped it"})
        elif method == "execute" and MODE == "hold":
            held.add(rid)
        elif method == "process/start" and MODE == "event":
            rec = {"id": "proc-0000abcd", "root_thread_id": session, "status": "running",
                   "exit_code": -1}
            send({"id": rid, "data": rec})
            send({"method": "process", "id": "", "data": {"Type": "started", "Cause": "",
                                                          "Process": rec}})
        elif method == "run_code" and MODE == "callback":
            send({"method": "tool", "parent_id": "not-in-flight", "id": "orphan-1",
                  "data": {"id": "0", "name": "read_file", "arguments": "{}",
                           "kind": "function"}})
            programs["cb-" + str(rid)] = rid
            send({"method": "tool", "parent_id": rid, "id": "cb-" + str(rid),
                  "data": {"id": "1", "name": "read_file",
                           "arguments": json.dumps({"path": "a.txt"}), "kind": "function"}})
        elif method == "callback":
            parent = programs.pop(rid, None)
            if parent is not None:
                send({"id": parent, "data": {"Logs": [], "Value": data, "Error": "",
                                             "Media": [], "CallSummary": ""}})
        else:
            send({"id": rid, "data": {"echo": method}})
    if MODE == "ignore-eof":
        while True:
            time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
