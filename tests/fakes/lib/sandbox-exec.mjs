// Running commands inside a fake provider's sandbox, shared by the provider fakes.
//
// A sandbox's filesystem is a host directory (its "root"). Two modes:
// - bwrap: one bubblewrap namespace per running sandbox (the "anchor": pid, mount, ipc, uts,
//   plus net when the network is blocked) whose / is the root, with the host's /usr and /etc
//   read-only and a private /proc, /dev and /run. Every command enters it with nsenter, so
//   absolute paths work as in a real sandbox, background jobs outlive their command and die
//   when the sandbox stops (the anchor is killed).
// - tmpdir: commands run on the host with their cwd mapped into the root; absolute paths in a
//   command are host paths and the network is never blocked. Background jobs are reached at
//   stop through the process groups of the commands that started them.
// In both modes commands run as the fake's uid with the environment the caller gives.
//
// Invariants: every process started here is in `allChildren` until it exits, so a fake's
// shutdown can kill them all; `SandboxProcs.killAll()` leaves nothing of the sandbox running.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const SHELL = fs.existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';

// Top-level directories a sandbox sees from the host, read-only.
export const SYSTEM_DIRS = new Set(['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'etc', 'proc', 'dev', 'sys', 'run']);

// pid -> ChildProcess for every process any sandbox started (for shutdown).
export const allChildren = new Map();

// An error with the HTTP status a fake should answer (403 for a path leaving the sandbox).
export class PathError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Sandbox path (absolute, or relative to `home`) -> host path under `root`. System
// directories map to the host's own (read-only: PathError 403 for writes); a symlink on the
// way that leaves the root gets 403 for writes (reads may follow it into system directories).
export function hostPath(root, home, sandboxPath, { write = false } = {}) {
  if (typeof sandboxPath !== 'string' || sandboxPath === '') throw new PathError(400, 'path is required');
  const abs = path.posix.resolve(home, sandboxPath);
  const top = abs.split('/')[1];
  if (SYSTEM_DIRS.has(top)) {
    if (write) throw new PathError(403, `permission denied: ${abs} is read-only in this sandbox`);
    return abs;
  }
  const host = path.join(root, abs);
  containCheck(root, host, abs, write);
  return host;
}

export function containCheck(root, host, abs, write) {
  // Resolve the deepest existing ancestor: a symlink anywhere on the way must stay inside.
  let probe = host;
  while (!fs.existsSync(probe) && probe !== root && probe !== path.dirname(probe)) probe = path.dirname(probe);
  let real;
  try {
    real = fs.realpathSync(probe);
  } catch {
    return;
  }
  const rootReal = fs.realpathSync(root);
  if (real !== rootReal && !real.startsWith(rootReal + '/')) {
    const top = real.split('/')[1];
    if (write || !SYSTEM_DIRS.has(top)) throw new PathError(403, `permission denied: ${abs} leaves the sandbox`);
  }
}

// Host path -> sandbox path (for a $PWD a tmpdir-mode command reports).
export function sandboxPathOf(root, host) {
  if (host === root) return '/';
  if (host.startsWith(root + '/')) return host.slice(root.length);
  return host;
}

// Kills a child started `detached` and its whole process group: the group even when the child
// itself has exited, since a background job it left is still in it.
export function killTree(child) {
  if (!child || !child.pid) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

// Fails unless bubblewrap can run here (the fakes' --exec-mode bwrap needs it).
export function bwrapUsable() {
  const r = spawnSync('bwrap', ['--version'], { encoding: 'utf8' });
  return r.status === 0;
}

// A fake's start: checks that its exec mode can work (`fail(msg)` if not) and returns where
// its sandboxes live: {dir: stateDir, owned: false}, or a new temp dir it removes at exit.
export function sandboxBaseDir({ execMode, stateDir, prefix, fail }) {
  if (execMode === 'bwrap' && !bwrapUsable()) fail('--exec-mode bwrap needs bubblewrap (bwrap) on PATH');
  if (stateDir) {
    fs.mkdirSync(stateDir, { recursive: true });
    return { dir: stateDir, owned: false };
  }
  return { dir: fs.mkdtempSync(path.join(os.tmpdir(), prefix)), owned: true };
}

export function killAllChildren() {
  for (const c of allChildren.values()) killTree(c);
}

// The processes of one sandbox. `opts`: mode ('tmpdir'|'bwrap'), root (host dir),
// hostname, blockNetwork (bwrap only: no network at all, not even loopback; a boolean or a
// function read each time the namespace starts).
export class SandboxProcs {
  constructor({ mode, root, hostname, blockNetwork = false }) {
    this.mode = mode;
    this.root = root;
    this.hostname = hostname;
    this.blockNetwork = blockNetwork;
    this.procs = new Set(); // children running in this sandbox
    // Process groups of every command started since the last kill: a background job stays
    // in its command's group (no job control), so in tmpdir mode this is how a stop reaches it.
    this.pgids = new Set();
    this.anchor = null; // bwrap mode: {proc, pid} of the namespace commands enter
    this.anchorStarting = null;
  }

  anchorArgs() {
    const args = ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--hostname', this.hostname];
    const block = typeof this.blockNetwork === 'function' ? this.blockNetwork() : this.blockNetwork;
    if (block) args.push('--unshare-net');
    args.push('--info-fd', '3', '--bind', this.root, '/', '--ro-bind', '/usr', '/usr', '--ro-bind', '/etc', '/etc');
    for (const d of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
      let st;
      try {
        st = fs.lstatSync('/' + d);
      } catch {
        continue;
      }
      const inRoot = path.join(this.root, d);
      if (st.isSymbolicLink()) {
        // bwrap's --symlink fails when the link already exists (a second start), so the
        // merged-/usr links are made in the sandbox root itself.
        const target = fs.readlinkSync('/' + d);
        let cur = null;
        try {
          cur = fs.readlinkSync(inRoot);
        } catch {
          cur = null;
        }
        if (cur !== target) {
          fs.rmSync(inRoot, { recursive: true, force: true });
          fs.symlinkSync(target, inRoot);
        }
      } else {
        args.push('--ro-bind', '/' + d, '/' + d);
      }
    }
    // The command runs only once the namespace is set up, so its "ready" line means nsenter
    // may enter (bwrap reports the child pid on --info-fd earlier than that).
    args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/run', '--', '/bin/sh', '-c', 'echo ready; exec sleep infinity');
    return args;
  }

  // Starts the anchor if it is not running; resolves to the host pid of its pid 1.
  ensureAnchor() {
    if (this.anchor && this.anchor.proc.exitCode === null && this.anchor.proc.signalCode === null) {
      return Promise.resolve(this.anchor.pid);
    }
    if (this.anchorStarting) return this.anchorStarting;
    this.anchorStarting = new Promise((resolve, reject) => {
      const proc = spawn('bwrap', this.anchorArgs(), { stdio: ['ignore', 'pipe', 'pipe', 'pipe'], detached: true });
      let info = '';
      let errText = '';
      let out = '';
      let pid = null;
      const maybeReady = () => {
        if (pid === null || !out.includes('ready\n')) return;
        clearTimeout(timer);
        this.anchor = { proc, pid };
        resolve(pid);
      };
      const timer = setTimeout(() => {
        killTree(proc);
        reject(new Error('bwrap did not report its child pid'));
      }, 10000);
      proc.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      proc.stderr.on('data', (d) => (errText += d));
      proc.stdio[3].on('data', (d) => {
        info += d;
        try {
          pid = JSON.parse(info)['child-pid'];
        } catch {
          return; // not all of it yet
        }
        maybeReady();
      });
      proc.stdout.on('data', (d) => {
        out += d;
        maybeReady();
      });
      proc.on('exit', () => {
        clearTimeout(timer);
        allChildren.delete(proc.pid);
        if (this.anchor && this.anchor.proc === proc) this.anchor = null;
        reject(new Error(`bwrap exited: ${errText.trim()}`));
      });
      if (proc.pid) allChildren.set(proc.pid, proc);
    }).finally(() => {
      this.anchorStarting = null;
    });
    return this.anchorStarting;
  }

  // Runs `SHELL -c body` in the sandbox after changing to `cwd` (a sandbox path; `hostCwd` is
  // its host path, which must be a directory). In body, $0 is the shell and $1... are `args`.
  // Resolves to {child} or {error} (the process could not start).
  async spawn(body, args, { cwd, hostCwd, env, extraFd = false }) {
    if (!fs.existsSync(hostCwd) || !fs.statSync(hostCwd).isDirectory()) {
      return { error: `chdir ${cwd}: no such file or directory` };
    }
    const stdio = extraFd ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'];
    const viewCwd = this.mode === 'bwrap' ? cwd : hostCwd;
    const shellArgv = [SHELL, '-c', `cd -- "$1" || exit 1; shift; ${body}`, SHELL, viewCwd, ...args];
    let child;
    // detached: the child leads its own process group, so a kill reaches the whole tree.
    if (this.mode === 'bwrap') {
      let pid;
      try {
        pid = await this.ensureAnchor();
      } catch (e) {
        return { error: `cannot start the sandbox namespace: ${e.message}` };
      }
      child = spawn('nsenter', ['-t', String(pid), '-m', '-u', '-i', '-n', '-p', '-r', '--', ...shellArgv], {
        env,
        stdio,
        detached: true,
      });
    } else {
      child = spawn(shellArgv[0], shellArgv.slice(1), { cwd: hostCwd, env, stdio, detached: true });
    }
    child.on('error', () => {});
    for (const st of child.stdio) st?.on('error', () => {});
    if (child.pid) {
      allChildren.set(child.pid, child);
      this.procs.add(child);
      this.pgids.add(child.pid);
      child.on('exit', () => {
        allChildren.delete(child.pid);
        this.procs.delete(child);
      });
    }
    return { child };
  }

  // Everything running in the sandbox: its commands and, in bwrap mode, its namespace
  // (killing the namespace's pid 1 kills whatever a command left in the background).
  // Resolves once every child killed here has exited (at most `waitMs`), so a caller that
  // reports the sandbox stopped can await it and be true.
  killAll(waitMs = 5000) {
    const dying = [...this.procs];
    if (this.anchor) dying.push(this.anchor.proc);
    if (this.anchor) {
      killTree(this.anchor.proc);
      try {
        process.kill(this.anchor.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
      this.anchor = null;
    }
    for (const c of this.procs) killTree(c);
    for (const pgid of this.pgids) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        /* the group is gone */
      }
    }
    this.pgids.clear();
    const exited = (c) =>
      c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r));
    let timer;
    return Promise.race([
      Promise.all(dying.map(exited)),
      new Promise((r) => {
        timer = setTimeout(r, waitMs);
      }),
    ]).finally(() => clearTimeout(timer));
  }
}

// Appends to an output accumulator {list, bytes} without exceeding `max` bytes in total.
export function capPush(acc, chunk, max) {
  const room = max - acc.bytes;
  if (room <= 0) return;
  const c = chunk.length > room ? chunk.subarray(0, room) : chunk;
  acc.list.push(c);
  acc.bytes += c.length;
}
