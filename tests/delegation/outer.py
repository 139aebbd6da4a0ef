#!/usr/bin/env python3
"""outer.py - the host's delegation helper, played for tests.

An agent host may not start sandgate itself: an outer command adapter
starts it as a *delegated peer* and relays the host's connection to it.
This program is that outer adapter, written from the rules it follows
(docs/delegation.md), so the end-to-end suite can run through it:

  outer.py serve [ARGS...]   relay a protocol-v4 connection on stdin and
                             stdout to `$SG_PEER_BIN serve --peer ARGS...`
  outer.py OTHER...          any other command runs the peer binary as it is

The rules:
  - The peer is started once, when the host's connection to this adapter
    opens, and never again: a peer that is missing or fails is not retried
    or replaced.  Requests it can no longer answer get `unavailable`, and
    when it exits the connection ends with it.
  - Frames go to the peer byte for byte, so the binding and the token reach
    it unchanged; replies and process events come back the same way, on
    this connection.
  - The host's cancel ({"id": <target>, "method": "cancel"}, no data) and
    its callback requests are forwarded and have no reply; if a cancelled
    request has no terminal reply SG_OUTER_CANCEL_MS (35 s) later, the peer
    is unresponsive and is closed (killed), and every pending request is
    answered `unavailable`.
  - A peer that dies gives `unavailable` to every request still pending.
  - At end of input the peer's stdin is closed and it gets a grace of
    SG_OUTER_GRACE_MS (10 s, as the host's default) to clean up and exit;
    past it the peer is killed and a cleanup failure is reported on stderr
    (exit 1): its remote resources may remain.

Exit status: 0 when the peer cleaned up and exited 0; 1 otherwise.
Python 3 standard library only.
"""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

PEER_BIN = os.environ.get("SG_PEER_BIN", "")
GRACE_MS = int(os.environ.get("SG_OUTER_GRACE_MS") or "10000")
MAX_FRAME = 16 * 1024 * 1024  # bytes, the newline included (protocol section 1)
CANCEL_MS = int(os.environ.get("SG_OUTER_CANCEL_MS") or "35000")


def log(msg):
    sys.stderr.write("outer: %s\n" % msg)
    sys.stderr.flush()


class Relay:
    def __init__(self, peer_argv):
        self.peer_argv = peer_argv
        self.peer = None
        self.lock = threading.Lock()
        self.out_lock = threading.Lock()
        self.pending = {}        # request id (JSON text) -> method
        self.cancels = {}        # cancelled request id (JSON text) -> deadline
        self.closed = False      # the peer was closed or died: never again
        self.closed_why = ""
        self.out_dead = False    # our stdout is gone
        self.peer_done = threading.Event()
        self.killed = False      # this adapter killed the peer

    # ---- our side of the connection ------------------------------------

    def write_out(self, line):
        with self.out_lock:
            if self.out_dead:
                return
            try:
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()
            except (BrokenPipeError, OSError):
                # The host is gone: end the connection as if at EOF.
                self.out_dead = True
                self.close_peer_stdin()

    def answer(self, rid_text, why):
        self.write_out(b'{"id":%s,"error":%s}\n'
                       % (rid_text.encode(), json.dumps("unavailable: " + why).encode()))

    # ---- the peer -----------------------------------------------------

    def start_peer(self):
        try:
            self.peer = subprocess.Popen(self.peer_argv, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, bufsize=0)
        except OSError as e:
            self.closed, self.closed_why = True, "the peer could not be started: %s" % e
            log(self.closed_why)
            self.peer_done.set()
            return
        threading.Thread(target=self.read_peer, daemon=True).start()
        threading.Thread(target=self.watch_cancels, daemon=True).start()

    def close_peer_stdin(self):
        p = self.peer
        if p and p.stdin:
            try:
                p.stdin.close()
            except OSError:
                pass

    def fail_pending(self, why):
        """The peer is gone: every pending request gets `unavailable`."""
        with self.lock:
            if not self.closed:
                self.closed, self.closed_why = True, why
            pending, self.pending = self.pending, {}
            self.cancels.clear()
        for rid in pending:
            self.answer(rid, why)

    def read_peer(self):
        # Unbuffered pipe (bufsize=0, for the writes): read it through a
        # buffer, or readline costs one read(2) per byte.
        f = io.BufferedReader(self.peer.stdout, 1 << 16)
        while True:
            try:
                line = f.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and "id" in msg and "method" not in msg:
                key = json.dumps(msg["id"])
                with self.lock:
                    self.pending.pop(key, None)
                    self.cancels.pop(key, None)
            self.write_out(line)
        try:
            f.detach()  # the pipe stays Popen's to close
        except ValueError:
            pass
        self.peer.wait()
        self.fail_pending("the peer exited (status %s)" % self.peer.returncode)
        self.peer_done.set()

    def watch_cancels(self):
        while not self.peer_done.is_set():
            now = time.monotonic()
            with self.lock:
                late = [rid for rid, t in self.cancels.items() if now > t]
            if late:
                log("no terminal reply %d ms after cancelling %s: closing the peer"
                    % (CANCEL_MS, ", ".join(late)))
                self.kill_peer()
                self.fail_pending("the peer did not answer a cancel within %d ms and was closed"
                                  % CANCEL_MS)
                return
            self.peer_done.wait(0.05)

    def kill_peer(self):
        p = self.peer
        self.killed = True
        if p and p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass

    # ---- the host's frames --------------------------------------------

    def forward(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        rid = None
        # Only a well-formed request is awaited: an unterminated last line,
        # an oversized frame or an id that is neither a string nor an
        # integer is no request, and the peer answers none of them.
        if line.endswith(b"\n") and len(line) <= MAX_FRAME and isinstance(msg, dict) and \
                type(msg.get("id")) in (str, int) and isinstance(msg.get("method"), str):
            rid = json.dumps(msg["id"])
        with self.lock:
            closed, why = self.closed, self.closed_why
            if rid is not None and msg["method"] == "cancel":
                # The target's id; a cancel has no reply of its own.
                if rid in self.pending and not closed:
                    self.cancels[rid] = time.monotonic() + CANCEL_MS / 1000.0
                rid = None
            elif rid is not None and msg["method"] == "callback":
                rid = None  # an answer to a tool callback: no reply either
            elif rid is not None and not closed:
                self.pending[rid] = msg["method"]
        if closed:
            if rid is not None:
                self.answer(rid, why)
            return
        try:
            self.peer.stdin.write(line)
            self.peer.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reader sees the peer die and answers what is pending

    def read_host(self, ended):
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            self.forward(line)
        ended.set()

    def run(self):
        ended = threading.Event()
        self.start_peer()
        if self.peer is None:
            return 1
        threading.Thread(target=self.read_host, args=(ended,), daemon=True).start()
        # The connection ends at end of input, when the host stops reading,
        # or with the peer.
        while not ended.wait(0.05) and not self.out_dead and not self.peer_done.is_set():
            pass
        if self.peer_done.is_set():
            return self.peer_status()
        # End of input: the peer gets its grace to clean up.
        self.close_peer_stdin()
        if not self.peer_done.wait(GRACE_MS / 1000.0):
            self.kill_peer()
            self.peer_done.wait(5)
            log("the peer did not finish its cleanup within %d ms and was killed; "
                "its environment may remain (run `sandgate envs gc`)" % GRACE_MS)
            return 1
        return self.peer_status()

    def peer_status(self):
        rc = self.peer.returncode
        if self.killed:
            return 1
        if rc < 0:
            # Killed: report it, and die the same way, so whoever watches
            # this adapter sees how the peer ended (the crash tests do).
            log("the peer was killed by signal %d; its environment may remain" % -rc)
            return rc
        if rc != 0:
            log("the peer's cleanup failed (exit status %d)" % rc)
            return 1
        return 0


def main(argv):
    if not PEER_BIN:
        log("SG_PEER_BIN must name the peer's binary")
        return 2
    if not argv or argv[0] != "serve":
        os.execv(PEER_BIN, [PEER_BIN] + argv)
    return Relay([PEER_BIN, "serve", "--peer"] + argv[1:]).run()


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    if status < 0:
        if -status != signal.SIGKILL:
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    # The host reader may still block in a read of stdin: leave without
    # waiting for it.
    os._exit(status)
