#!/usr/bin/env python3
"""hostile_peer.py - a peer on the host's wire that attacks the sandgate
relaying to it.

It answers initialize echoing the binding's version (reporting `token_seen`
and the descriptors it inherited, `fds_seen`), then attacks as MODE (its
first argument) says:
  callback-flood   on run_code, writes COUNT (second argument) tool callbacks
                   of that program, each with an id of 64 KiB, then COUNT
                   orphan ones (their parent is not in flight), and never
                   reads its input again
  event-flood      after initialize, writes COUNT process events of 1 MiB
                   each, then answers as `plain`
  foreign-events   writes an event before its initialize reply, and on
                   process/start an event for a process of session
                   "someone-else" before its own one
  refuse-first     refuses the first initialize (unsupported), accepts the
                   next
  junk-replies     on execute: replies to ids never asked (an integer, a
                   string, a negative one), then the real reply twice
  stderr-flood     writes 32 MiB to stderr, then answers as `plain`
  plain            answers every request {"echo": METHOD}
Usage: hostile_peer.py MODE [COUNT]
"""
import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 0
OUT = sys.stdout.buffer


def send(obj):
    OUT.write(json.dumps(obj).encode() + b"\n")
    OUT.flush()


def event(session, pid, pad=""):
    rec = {"id": pid, "root_thread_id": session, "status": "running", "pad": pad}
    return {"method": "process", "id": "",
            "data": {"Type": "started", "Cause": "", "Process": rec}}


def init_reply(rid, msg):
    return {"id": rid, "data": {
        "version": (msg.get("data") or {}).get("version"), "root": (msg.get("data") or {}).get("root"),
        "capabilities": ["process.start.v1"],
        "methods": ["initialize", "execute", "process/start", "run_code"],
        "environment": {"backend": "hostile", "profile": "hostile", "id": "h",
                        "resumed": False, "facts": {}},
        "token_seen": msg.get("token"), "fds_seen": sorted(os.listdir("/proc/self/fd"))}}


def main():
    inits = 0
    session = None
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid, data = msg.get("method"), msg.get("id"), msg.get("data") or {}
        if method == "initialize":
            inits += 1
            if MODE == "refuse-first" and inits == 1:
                send({"id": rid, "error": "unsupported: not this time"})
                continue
            if MODE == "foreign-events":
                send(event(data.get("session"), "p-early"))
            session = data.get("session")
            send(init_reply(rid, msg))
            if MODE == "event-flood":
                pad = "e" * (1 << 20)
                for i in range(COUNT):
                    send(event(session, "p-%d" % i, pad))
            if MODE == "stderr-flood":
                chunk = b"x" * 65536 + b"\n"
                for _ in range(512):
                    sys.stderr.buffer.write(chunk)
                sys.stderr.buffer.flush()
        elif method == "run_code" and MODE == "callback-flood":
            big = "c" * 65536
            call = {"id": "1", "name": "read_file", "arguments": "{}", "kind": "function"}
            for i in range(COUNT):
                send({"method": "tool", "parent_id": rid, "id": "%s-%d" % (big, i),
                      "data": call})
            for i in range(COUNT):
                send({"method": "tool", "parent_id": "gone", "id": "%s-o%d" % (big, i),
                      "data": call})
            # Never reads its input again, and never exits on its own.
            while True:
                time.sleep(60)
        elif method == "process/start" and MODE == "foreign-events":
            rec = {"id": "p-mine", "root_thread_id": session, "status": "running"}
            send({"id": rid, "data": rec})
            send(event("someone-else", "p-theirs"))
            send(event(session, "p-mine"))
        elif method == "execute" and MODE == "junk-replies":
            send({"id": "999999", "data": {"never": "asked"}})
            send({"id": int(rid), "data": {"never": "asked"}})
            send({"id": "", "data": {"never": "asked"}})
            send({"id": rid + "-x", "error": "cancelled: a cancel that never came"})
            send({"id": rid, "data": {"echo": "first"}})
            send({"id": rid, "data": {"echo": "duplicate"}})
        else:
            send({"id": rid, "data": {"echo": method}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
