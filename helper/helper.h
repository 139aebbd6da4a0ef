/*
 * helper.h - sg-helper, the program sandgate runs inside environments.
 *
 * sg-helper is built twice from the same sources: as a static program that
 * adapters install in remote environments (it needs nothing there but a
 * Linux kernel), and as this library, which the gateway calls in-process for
 * environments whose files live on this host (SG_CAP_HOST_FS).  Either way
 * one invocation is one tool step: one provider round trip for remote
 * environments, none for local ones.
 *
 * Invariants:
 *  - Every command but confine, status and job (whose lines below say what
 *    they do instead) writes exactly one JSON object to `out` (stdout for
 *    the program), then returns 0; `fs read --raw` adds raw bytes after
 *    it.  The object is one of
 *        {"ok":true, ...}                     the step succeeded
 *        {"ok":false,"tool_error":"..."}      the tool ran and failed
 *                                             (ToolResult is_error)
 *        {"error":"<protocol word>","message":"..."}   refused or failed
 *    A non-zero return (exit status) means a usage error or a crash: the
 *    gateway reports it as `internal`.
 *  - Paths on the command line are paths *inside the environment*.  --root
 *    is binding.root there; --host-root is where that directory is on the
 *    machine running the code (the same as --root inside an environment,
 *    a directory under the state dir for the local backend).  Containment
 *    is checked by walking components with symlinks resolved the way the
 *    environment would (core/path.h); escaping root is `path_escape`.
 *  - Paths in replies are relative to root.
 *  - The library is thread-safe: no globals, no chdir, no getopt, no signal
 *    handlers, no exit().  Waits poll the cancel token (NULL in the program).
 *
 * Commands (argv after the program name; options may come in any order
 * before the positional arguments; `--` ends options):
 *
 *   fs read   --root R [--host-root H] PATH [--offset N] [--limit N]
 *             [--base64] [--max BYTES] [--raw] [--full-log --ctl DIR]
 *             (--raw: the text follows the JSON line, after a newline,
 *             as "content_bytes" raw bytes, instead of a "content" key;
 *             --full-log: PATH may be a bash run's full log under DIR)
 *   fs write  ... PATH [--mode OCTAL] [--base64]     content on stdin
 *   fs edit   ... PATH [--all]      stdin: "<len of old>\n" old new
 *   fs list   ... [PATH] [--depth N] [--hidden] [--max N]
 *   fs glob   ... PATTERN [--path PATH] [--max N]
 *   fs grep   ... PATTERN [--path PATH] [--glob G] [--ignore-case] [--max N]
 *   fs stat   ... PATH
 *   fs delete ... PATH [--recursive]
 *   fs move   ... SRC DST [--overwrite]
 *   fs mkdir  ... PATH
 *   fs resolve ... PATH [--for-write]      {"ok":true,"path":"/abs/in/env"}
 *
 *   proc spawn --ctl C --id ID --session S [--op OPID] [--cwd DIR]
 *              [--timeout-ms N] [--retain BYTES]
 *              [--owner-kind K] [--owner-id A] [--generation G]
 *              [--lifecycle managed|session] [--tty] [--input] [--login]
 *              [--wait-ms N [--output-max N] [--revision]]
 *                               (a foreground run; --revision: the
 *                               workspace_revision after it)
 *              [--confine standard|read_only --root R]
 *              [--allow-write DIR]... (--command STRING | -- ARGV...)
 *   proc read  --ctl C --id ID (--offset N | --tail) [--max N] [--wait-ns N]
 *              [--min-dwell-ns N]
 *   proc get   --ctl C --id ID
 *   proc list  --ctl C --session S
 *   proc stop  --ctl C --id ID [--grace-ms N]
 *   proc wait  --ctl C --session S --since STAMP [--timeout-ms N]
 *              [--recheck-due]   (first marks, and answers as "due", the
 *                                 live records whose recheck has come)
 *   proc update --ctl C --id ID [--mode resume|detached]
 *              [--recheck-minutes N] [--deliver CONSUMER]
 *              [--recheck-delivered] [--recheck-due]
 *   proc write --ctl C --id ID              the input on stdin
 *   proc resize --ctl C --id ID --cols N --rows N
 *   proc stop-all --ctl C [--grace-ms N]    every session's processes
 *
 *   confine --mode standard|read_only --root R [--allow-write DIR]...
 *           [--exec-only PATH]... [--git] -- ARGV
 *                               (--exec-only, --git: ARGV may execute only
 *                               itself, the PATHs, git's exec-path with
 *                               --git, and the ELF interpreter)
 *   confine --mode scope -- ARGV
 *                               (ARGV unconfined, but it sets no setuid
 *                               or setgid bit, and its signals and abstract
 *                               unix sockets stay in its domain)
 *   cgroup-exec [--user U:G [--stage FROM:TO]] FILE... -- ARGV
 *                               join the cgroups whose cgroup.procs files
 *                               are given, then exec ARGV (the local backend,
 *                               on the host, before bubblewrap); --user: as
 *                               U:G, with descriptors FROM..TO first shown at
 *                               SG_HELPER_STAGE/<N> in a mount namespace of
 *                               its own (bubblewrap binds them from there)
 *   status [--scope] --file F -- ARGV
 *                               run ARGV, write "exit N" or "signal N" to F
 *                               (--scope: as confine --mode scope)
 *   job --dir PREFIX --mark WORD --wait-ms N --max-out N [--max-err N]
 *       [--attach] [--cwd DIR] [--timeout-ms N] [--merge] [--detach]
 *       [--stdin-env VAR[,VAR...] | --stdin-file F] [--gc PREFIXES]
 *       -- NAME=VALUE... -- ARGV
 *                               run ARGV in a session of its own, its result
 *                               kept in files; replies in plain text (job.c)
 *   probe
 *
 * README.md beside this file gives each reply's fields.
 */
#ifndef SG_HELPER_H
#define SG_HELPER_H

#include <stddef.h>

#include "base/buf.h"
#include "base/cancel.h"

/*
 * Where cgroup-exec --stage shows descriptor N, as SG_HELPER_STAGE "/N": a
 * tmpfs over /tmp in a mount namespace of the command's own, which every
 * Linux host has a directory for and which no sandbox shows.
 */
#define SG_HELPER_STAGE "/tmp"

/*
 * Run one sg-helper command in-process: argv as the program would get it
 * (argv[0] is the first command word, e.g. "fs"), stdin given as in/inlen.
 * The JSON reply is appended to out (its max bounds it).  Returns the exit
 * status the program would have.  `proc spawn` and `confine` are refused
 * here: they must run inside the environment, through the adapter's exec.
 */
int sg_helper_run(int argc, char *const *argv, const void *in, size_t inlen,
		  struct sg_buf *out, const struct sg_cancel *cancel);

#endif
