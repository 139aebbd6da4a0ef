#!/usr/bin/env python3
"""check-includes.py - the include graph stays a layering (check-style.sh runs it).

A module is a header and the source file of the same name beside it
(gateway/relay.h and gateway/relay.c); module A depends on B when a file of A
has `#include "..."` naming a file of B.  Every name of ours is written from
the source root ("core/json.h", "gateway/session.h"), the one include style;
a name that is not a file from the root (a system header, a generated one
such as sg_config.h) is not ours and is skipped.  The rules:

  1. No circle: no module depends on itself through others.
  2. A backend (BACKENDS) never includes gateway/ or another backend.
  3. The gateway includes gateway/, base/, core/, config/ and the adapter
     contract only, but for the EXCEPTIONS named below.
  4. The rooms below the gateway never include it, nor a backend: base/
     includes only base/; core/ only base/ and core/; helper/ (a program
     of its own) only base/, core/ and the job reply's format; config/ and
     adapters/ nothing above them.
  5. One style: an include of ours that names a file beside the including
     one but not from the root ("wire.h" for "gateway/wire.h") is refused.

Usage: check-includes.py [--root DIR]   (exit 1 with what breaks a rule)
       check-includes.py --self-test    (each rule fails on a tree made to break it;
                                         silent when it does)
"""
import os
import re
import sys
import tempfile

FOLDERS = ("base", "core", "config", "gateway", "adapters", "helper",
           "ssh", "singularity", "daytona", "vercel", "modal")
BACKENDS = ("ssh", "singularity", "daytona", "vercel", "modal", "adapters/local")

# The adapter contract; the toolkit (core/) is a room the gateway may use whole.
GATEWAY_MAY = {"adapters/adapter.h"}

# What each lower room may include besides itself.
ROOM_MAY = {
    "base": (),
    "core": ("base",),
    "helper": ("base", "core", "adapters/jobreply.h"),
    "config": ("base", "core", "adapters"),
    "adapters": ("base", "core", "config"),
}

# Includes that break rule 3 today, each with why; one that is gone must
# leave this list too (a stale entry fails the check).
EXCEPTIONS = {
    ("gateway/envcall.c", "helper/helper.h"):
        "the gateway runs sg-helper's steps in-process when the environment's"
        " files are on this host (sg_helper_run), instead of one exec each",
    ("gateway/tools/tools.c", "helper/fs.h"):
        "tool results are redacted with sg-helper's own secret patterns"
        " (sg_fs_redact), so both sides hide the same values",
    ("gateway/tools/git.c", "helper/fs.h"):
        "git refuses to stage the paths sg-helper's file tools treat as secrets"
        " (sg_fs_sensitive): one list of them",
}

# A private header that is part of another module, not a module of its own.
SAME_MODULE = {
    # sg-helper's command modules' entry points, which helper.c dispatches to.
    "helper/internal": "helper/helper",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(root):
    for top in FOLDERS:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, n), root)


def includes(root, path):
    """(line number, resolved path, style problem) of path's includes of ours."""
    with open(os.path.join(root, path), errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = os.path.normpath(m.group(1))
            if os.path.isfile(os.path.join(root, name)) and not m.group(1).startswith("."):
                yield no, name, None
                continue
            beside = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
            if os.path.isfile(os.path.join(root, beside)):
                yield no, beside, "not written from the source root"


def module(path):
    stem = os.path.splitext(path)[0]
    return SAME_MODULE.get(stem, stem)


def folder(path):
    """The backend folder path is in, else its top folder."""
    for b in BACKENDS:
        if path.startswith(b + "/"):
            return b
    return path.split("/", 1)[0]


def direction(src, dst):
    """Why src may not include dst (rules 2 to 4), or None."""
    a, b = folder(src), folder(dst)
    if a == b:
        return None
    if a in BACKENDS and (b == "gateway" or b in BACKENDS):
        return "a backend includes %s" % ("the gateway" if b == "gateway" else "another backend")
    if a == "gateway" and b not in ("base", "core", "config") and dst not in GATEWAY_MAY:
        return "the gateway includes more than the adapter contract and the toolkit"
    if a in ROOM_MAY and b not in ROOM_MAY[a] and dst not in ROOM_MAY[a]:
        return "%s/ includes %s" % (a, b + "/" if b != dst else dst)
    return None


def circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def one_circle(graph, comp):
    """A shortest way from comp's first module back to it, as a list."""
    start, members = comp[0], set(comp)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]]):
            if w == start:
                return path + [start]
            if w in members and w not in seen:
                seen.add(w)
                paths.append(path + [w])
    return comp


def check(root):
    """The sentences of what breaks a rule; empty when none does."""
    graph, where, problems, used = {}, {}, [], set()
    for f in sources(root):
        graph.setdefault(module(f), set())
        for no, dst, style in includes(root, f):
            if style:
                problems.append("%s:%d: %s (%s)" % (f, no, style, dst))
            a, b = module(f), module(dst)
            if a != b:
                graph[a].add(b)
                where.setdefault((a, b), "%s:%d" % (f, no))
            why = direction(f, dst)
            if why and (f, dst) in EXCEPTIONS:
                used.add((f, dst))
            elif why:
                problems.append("%s:%d: %s (%s)" % (f, no, why, dst))
    for comp in circles(graph):
        way = one_circle(graph, comp)
        hops = ", ".join(where[(a, b)] for a, b in zip(way, way[1:]))
        problems.append("a circle: %s (%s)" % (" -> ".join(way), hops))
    for f, dst in sorted(set(EXCEPTIONS) - used):
        problems.append("stale exception: %s no longer includes %s" % (f, dst))
    return problems


def self_test():
    """Each rule must fail on a tree that breaks it, and pass on one that does not."""
    cases = {
        "clean": {"gateway/a.c": '#include "gateway/b.h"', "gateway/b.h": "",
                  "ssh/s.c": '#include "adapters/adapter.h"', "adapters/adapter.h": ""},
        "circle": {"gateway/a.c": '#include "gateway/b.h"', "gateway/a.h": "",
                   "gateway/b.c": '#include "gateway/a.h"', "gateway/b.h": ""},
        "style": {"gateway/a.c": '#include "b.h"', "gateway/b.h": ""},
        "backend up": {"ssh/s.c": '#include "gateway/g.h"', "gateway/g.h": ""},
        "backend across": {"vercel/v.c": '#include "adapters/local/sandbox.h"',
                           "adapters/local/sandbox.h": ""},
        "gateway down": {"gateway/g.c": '#include "adapters/cloud.h"',
                         "adapters/cloud.h": ""},
        "toolkit up": {"core/json.c": '#include "gateway/wire.h"', "gateway/wire.h": ""},
        "core on adapters": {"core/exec.h": '#include "adapters/adapter.h"',
                             "adapters/adapter.h": ""},
        "helper on gateway": {"helper/fs.c": '#include "gateway/session.h"',
                              "gateway/session.h": ""},
    }
    bad = []
    for name, files in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text + "\n")
            found = [p for p in check(root) if not p.startswith("stale exception")]
            if bool(found) != (name != "clean"):
                bad.append("self-test %r: %s" % (name, found or "nothing found"))
    return bad


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        problems = self_test()
    elif not args or (len(args) == 2 and args[0] == "--root"):
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        problems = check(os.path.abspath(args[1] if args else here))
    else:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    for p in problems:
        print("includes: " + p)
    if not problems and args != ["--self-test"]:
        print("includes: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
