#!/usr/bin/env node
// Fake Daytona: control plane (/api/...), Socket.IO event gateway (/api/socket.io/) and per-sandbox
// toolbox (/toolbox/<sandboxId>/...) on one loopback HTTP server, plus an admin API under /__fake/
// that tests use to inject faults and to look at the real state.
//
// Wire formats follow what the official TypeScript SDK (@daytonaio/sdk, pinned in package.json)
// sends and accepts; semantics follow Daytona's public API documentation. README.md lists
// every endpoint, every knob and every place where the fake is knowingly simpler than Daytona.
//
// Only Node's built-in modules are used, so sandgate's C tests can run it without npm.

import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  Faults, HttpError, RequestLog, failer, isObj, logAndFaultHandlers, msSince, parseOptions, readBody as readBodyMax, readJson as readJsonMax, serve, sleep,
} from '../lib/fake-http.mjs';
import {
  PathError, SHELL, SandboxProcs, capPush as capPushMax, containCheck as containCheckIn,
  hostPath as mapPath, killAllChildren, killTree, sandboxBaseDir, sandboxPathOf as sandboxPathIn,
} from '../lib/sandbox-exec.mjs';

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const USAGE = `usage: node server.mjs [--port N] [--api-key KEY] [--state-dir DIR]
       [--exec-mode tmpdir|bwrap] [--exec-limit-ms N] [--transition-ms N] [--create-block-ms N]
       [--minute-ms N] [--delay-ms N] [--request-log FILE] [--target REGION] [--no-stdin-watch]`;

const fail = failer('fake-daytona');

const OPTS = parseOptions(process.argv.slice(2), {
  '--port': { key: 'port', type: 'int' },
  '--api-key': { key: 'apiKey', type: 'string' },
  '--state-dir': { key: 'stateDir', type: 'path' },
  '--exec-mode': { key: 'execMode', type: 'string' },
  '--exec-limit-ms': { key: 'execLimitMs', type: 'int' },
  '--transition-ms': { key: 'transitionMs', type: 'int' },
  '--create-block-ms': { key: 'createBlockMs', type: 'int' },
  '--minute-ms': { key: 'minuteMs', type: 'int' },
  '--delay-ms': { key: 'delayMs', type: 'int' },
  '--request-log': { key: 'requestLog', type: 'path' },
  '--target': { key: 'target', type: 'string' },
  '--no-stdin-watch': { key: 'stdinWatch', type: 'false' },
}, {
  port: 0,
  apiKey: 'test-key',
  stateDir: null,
  execMode: 'tmpdir',
  execLimitMs: 5000,
  transitionMs: 100,
  createBlockMs: 30000,
  minuteMs: 0,
  delayMs: 0,
  requestLog: null,
  target: 'us',
  stdinWatch: true,
}, USAGE, fail);
if (OPTS.execMode !== 'tmpdir' && OPTS.execMode !== 'bwrap') fail(`--exec-mode must be tmpdir or bwrap`);

// ---------------------------------------------------------------------------------------------
// Constants that mirror Daytona
// ---------------------------------------------------------------------------------------------

const API_PREFIX = '/api'; // the SDK's apiUrl is http://127.0.0.1:<port>/api
const TOOLBOX_PREFIX = '/toolbox'; // toolboxProxyUrl; the SDK appends /<sandboxId>
const SOCKET_IO_PATH = `${API_PREFIX}/socket.io/`; // the SDK derives it from apiUrl
const ORG_ID = 'org-0000fake';
const SANDBOX_USER = 'daytona';
const HOME_DIR = '/home/daytona'; // user home and default work dir of the default snapshot
const DEFAULT_SNAPSHOT = 'daytonaio/sandbox:fake';
const DAEMON_VERSION = 'v0.218.0';
// Session logs switch from text/plain to JSON {output,stdout,stderr} for SDKs >= this (§1.6.3).
const JSON_LOGS_MIN_SDK = [0, 167, 0];
const STDOUT_MARK = Buffer.from([1, 1, 1]);
const STDERR_MARK = Buffer.from([2, 2, 2]);
// Per-sandbox resource ceilings and defaults (§1.4, docs "default max 4 vCPU / 8 GiB / 10 GiB").
const RES_DEFAULT = { cpu: 1, memory: 1, disk: 3 };
const RES_MAX = { cpu: 4, memory: 8, disk: 10 };
const AUTO_ARCHIVE_MAX = 43200;
const MAX_BODY_BYTES = 256 * 1024 * 1024;
const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
// Directories a command sees from the host, read-only, in bwrap mode; the files API maps them the
// same way in both modes so both views agree.
// States in which a transition is running towards desiredState; requests then get 409 (§1.5).
const STABLE_STATES = new Set(['started', 'stopped', 'archived', 'error', 'build_failed', 'paused', 'destroyed']);

// ---------------------------------------------------------------------------------------------
// State: everything the fake knows lives here, so /__fake/reset and /__fake/state see all of it.
// ---------------------------------------------------------------------------------------------

// Knobs that tests may change at run time through /__fake/config; reset restores the CLI values.
const CONFIG = freshConfig();

function freshConfig() {
  return {
    transitionMs: OPTS.transitionMs, // how long each transitional state lasts
    stateDelayMs: {}, // per-state override, e.g. {"starting": 2000} to hold a sandbox in starting
    execLimitMs: OPTS.execLimitMs, // the toolbox request limit: longer commands get 408
    createBlockMs: OPTS.createBlockMs, // how long POST /sandbox (from a snapshot) waits for started
    minuteMs: OPTS.minuteMs, // length of one "minute" for autostop/autodelete; 0 = timers off
    delayMs: OPTS.delayMs, // every API and toolbox request waits this long first (a cloud round trip)
  };
}

const STATE = {
  // id -> sandbox record: the Sandbox DTO fields, plus `_` with what never goes on the wire.
  sandboxes: new Map(),
  // Ids removed after `destroying`, newest last, so tests can assert a delete really happened.
  destroyed: [],
  // Authenticated Socket.IO connections; every sandbox event is broadcast to all of them.
  ioConns: new Set(),
  // Where sandbox directories live: --state-dir, or a temp dir removed on exit.
  baseDir: null,
  ownsBaseDir: false,
  port: 0,
};

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

// Queued fault rules, matched in order (see /__fake/faults), and the request log that
// /__fake/requests serves (the --request-log file gets the same lines).
const FAULTS = new Faults(['status', 'drop', 'delay']);
const LOG = new RequestLog(OPTS.requestLog);

const nowIso = () => new Date().toISOString();

function toolboxCode(status) {
  return (
    {
      400: 'BAD_REQUEST',
      401: 'UNAUTHORIZED',
      403: 'FORBIDDEN',
      404: 'NOT_FOUND',
      408: 'REQUEST_TIMEOUT',
      409: 'CONFLICT',
      410: 'GONE',
      413: 'BAD_REQUEST',
      422: 'INVALID_REQUEST_BODY',
    }[status] || 'INTERNAL_SERVER_ERROR'
  );
}

// The SDK version from X-Daytona-SDK-Version, as [major, minor, patch], or null when absent.
function sdkVersion(req) {
  const v = req.headers['x-daytona-sdk-version'];
  if (!v) return null;
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(String(v));
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

function versionAtLeast(v, min) {
  for (let i = 0; i < 3; i++) {
    if (v[i] !== min[i]) return v[i] > min[i];
  }
  return true;
}

function toolboxProxyUrl() {
  return `http://127.0.0.1:${STATE.port}${TOOLBOX_PREFIX}`;
}

// ---------------------------------------------------------------------------------------------
// Sandbox records, transitions and events
// ---------------------------------------------------------------------------------------------

// The full Sandbox DTO (§1.5) as GET /sandbox/{id} returns it.
function sandboxDto(s) {
  const dto = {};
  for (const [k, v] of Object.entries(s)) {
    if (k !== '_') dto[k] = v;
  }
  dto.toolboxProxyUrl = toolboxProxyUrl();
  return dto;
}

// SandboxListItem lacks env, network*, domainAllowList, volumes, buildInfo, backupCreatedAt.
function sandboxListItem(s) {
  const dto = sandboxDto(s);
  for (const k of ['env', 'networkBlockAll', 'networkAllowList', 'domainAllowList', 'volumes', 'buildInfo', 'backupCreatedAt']) {
    delete dto[k];
  }
  return dto;
}

function findSandbox(idOrName) {
  const byId = STATE.sandboxes.get(idOrName);
  if (byId) return byId;
  for (const s of STATE.sandboxes.values()) {
    if (s.name === idOrName) return s;
  }
  return null;
}

function mustFindSandbox(idOrName) {
  const s = findSandbox(idOrName);
  if (!s) throw new HttpError(404, `Sandbox with ID or name ${idOrName} not found`);
  return s;
}

function inTransition(s) {
  return s.state !== s.desiredState || !STABLE_STATES.has(s.state);
}

function emitEvent(name, payload) {
  const frame = '42' + JSON.stringify([name, payload]);
  for (const c of STATE.ioConns) c.ws.send(frame);
}

const EVENTS_KEPT = 32;

function setState(s, newState) {
  const oldState = s.state;
  if (oldState === newState) return;
  s.state = newState;
  s.updatedAt = nowIso();
  persist();
  const ev = { sandbox: sandboxDto(s), oldState, newState };
  s._.events.push(ev);
  if (s._.events.length > EVENTS_KEPT) s._.events.shift();
  emitEvent('sandbox.state.updated', ev);
  for (const w of [...s._.waiters]) {
    if (w.states.includes(newState)) w.resolve(newState);
  }
  if (newState === 'stopped') onStopped(s);
}

// Walks s through `states` (the first one at once, each later one after its delay) towards
// `desired`, then calls onDone. A new transition cancels the running one.
function runTransition(s, desired, states, onDone) {
  clearTimeout(s._.timer);
  s._.timer = null;
  s.desiredState = desired;
  let i = 0;
  // Each state is held for its delay; the last one is held only when onDone follows it.
  const step = () => {
    const delay = CONFIG.stateDelayMs[states[i]] ?? CONFIG.transitionMs;
    s._.timer = setTimeout(() => {
      s._.timer = null;
      i += 1;
      if (i < states.length) {
        setState(s, states[i]);
        if (i < states.length - 1 || onDone) step();
      } else {
        onDone();
      }
    }, delay);
  };
  setState(s, states[0]);
  persist();
  if (states.length > 1 || onDone) step();
}

function waitForState(s, states, timeoutMs) {
  if (states.includes(s.state)) return Promise.resolve(s.state);
  return new Promise((resolve) => {
    const w = {
      states,
      resolve: (st) => {
        clearTimeout(timer);
        s._.waiters = s._.waiters.filter((x) => x !== w);
        resolve(st);
      },
    };
    const timer = setTimeout(() => w.resolve(s.state), timeoutMs);
    s._.waiters.push(w);
  });
}

// A stopped sandbox loses its processes (the container stops) but keeps its files.
function onStopped(s) {
  killSandboxProcesses(s);
  s._.sessions.clear();
  s._.stoppedAt = Date.now();
  if (s.autoDeleteInterval === 0) {
    // autoDeleteInterval 0 means "ephemeral": deleted as soon as it stops (§1.4).
    setImmediate(() => {
      if (STATE.sandboxes.get(s.id) === s && s.state === 'stopped') beginDestroy(s);
    });
  }
}

function beginDestroy(s) {
  killSandboxProcesses(s);
  runTransition(s, 'destroyed', ['destroying'], () => removeSandbox(s, true));
}

function removeSandbox(s, emit) {
  clearTimeout(s._.timer);
  killSandboxProcesses(s);
  STATE.sandboxes.delete(s.id);
  STATE.destroyed.push(s.id);
  if (STATE.destroyed.length > 1000) STATE.destroyed.shift();
  for (const w of [...s._.waiters]) w.resolve('destroyed');
  fs.rmSync(s._.dir, { recursive: true, force: true });
  persist();
  if (emit) {
    const oldState = s.state;
    s.state = 'destroyed';
    emitEvent('sandbox.state.updated', { sandbox: sandboxDto(s), oldState, newState: 'destroyed' });
  }
}

function newSandboxRecord(body, id) {
  const t = nowIso();
  const fromImage = isObj(body.buildInfo);
  const s = {
    id,
    organizationId: ORG_ID,
    name: body.name || id,
    snapshot: fromImage ? undefined : body.snapshot || DEFAULT_SNAPSHOT,
    user: body.user || SANDBOX_USER,
    env: body.env || {},
    labels: body.labels || {},
    public: body.public === true,
    networkBlockAll: body.networkBlockAll === true,
    networkAllowList: body.networkAllowList,
    domainAllowList: body.domainAllowList,
    target: body.target || OPTS.target,
    cpu: fromImage ? body.cpu ?? RES_DEFAULT.cpu : RES_DEFAULT.cpu,
    gpu: fromImage ? body.gpu ?? 0 : 0,
    memory: fromImage ? body.memory ?? RES_DEFAULT.memory : RES_DEFAULT.memory,
    disk: fromImage ? body.disk ?? RES_DEFAULT.disk : RES_DEFAULT.disk,
    // From an image the sandbox first waits for its build; from a snapshot it is created.
    state: fromImage ? 'pending_build' : 'creating',
    desiredState: 'started',
    errorReason: undefined,
    recoverable: false,
    backupState: 'None',
    autoStopInterval: body.autoStopInterval ?? 15,
    autoArchiveInterval: clampAutoArchive(body.autoArchiveInterval ?? 10080),
    autoDeleteInterval: body.autoDeleteInterval ?? -1,
    volumes: [],
    buildInfo: fromImage
      ? {
          dockerfileContent: body.buildInfo.dockerfileContent,
          contextHashes: body.buildInfo.contextHashes || [],
          createdAt: t,
          updatedAt: t,
          snapshotRef: `daytona-${crypto.createHash('md5').update(body.buildInfo.dockerfileContent).digest('hex')}:0.0.1`,
        }
      : undefined,
    createdAt: t,
    updatedAt: t,
    lastActivityAt: t,
    sandboxClass: 'container',
    daemonVersion: DAEMON_VERSION,
    runnerId: 'runner-fake-1',
    _: null,
  };
  attachInternals(s, path.join(STATE.baseDir, 'sandboxes', id));
  return s;
}

// The part of a record that is never serialised: host directory, timers, sessions, processes.
function attachInternals(s, dir) {
  s._ = {
    dir, // host directory of this sandbox; its filesystem root is dir/root
    root: path.join(dir, 'root'),
    timer: null, // the pending step of the running transition
    waiters: [], // POST /sandbox calls blocked until the sandbox is started
    sessions: new Map(), // sessionId -> session (see the sessions section)
    // The processes running in this sandbox (execute and session commands, background jobs,
    // the bwrap namespace); the namespace has no network while networkBlockAll is set.
    exec: new SandboxProcs({
      mode: OPTS.execMode,
      root: path.join(dir, 'root'),
      hostname: s.id.slice(0, 12),
      blockNetwork: () => s.networkBlockAll,
    }),
    stoppedAt: null,
    events: [], // the last EVENTS_KEPT state events sent for it, as sent (for /replay)
  };
}

function clampAutoArchive(v) {
  return v === 0 || v > AUTO_ARCHIVE_MAX ? AUTO_ARCHIVE_MAX : v;
}

// ---------------------------------------------------------------------------------------------
// Persistence (--state-dir): sandboxes survive a restart of the fake; processes do not.
// ---------------------------------------------------------------------------------------------

function persist() {
  if (!OPTS.stateDir) return;
  const list = [...STATE.sandboxes.values()].map((s) => ({ ...sandboxDto(s), toolboxProxyUrl: undefined }));
  const file = path.join(OPTS.stateDir, 'state.json');
  fs.writeFileSync(file + '.tmp', JSON.stringify({ sandboxes: list, destroyed: STATE.destroyed }, null, 1));
  fs.renameSync(file + '.tmp', file);
}

// A transition that was running when the fake stopped is completed on load, as Daytona's
// reconciler would: nothing is left in a transitional state that no timer will ever advance.
function loadState() {
  const file = path.join(OPTS.stateDir, 'state.json');
  if (!fs.existsSync(file)) return;
  const data = JSON.parse(fs.readFileSync(file, 'utf8'));
  STATE.destroyed = data.destroyed || [];
  const settle = {
    creating: 'started', pending_build: 'started', building_snapshot: 'started', starting: 'started',
    restoring: 'started', pulling_snapshot: 'started', stopping: 'stopped', archiving: 'archived',
  };
  for (const dto of data.sandboxes || []) {
    const s = { ...dto, _: null };
    delete s.toolboxProxyUrl;
    attachInternals(s, path.join(STATE.baseDir, 'sandboxes', s.id));
    if (s.state === 'destroying') {
      fs.rmSync(s._.dir, { recursive: true, force: true });
      STATE.destroyed.push(s.id);
      continue;
    }
    if (settle[s.state]) s.state = settle[s.state];
    s.desiredState = s.state;
    fs.mkdirSync(path.join(s._.root, 'home', 'daytona'), { recursive: true });
    STATE.sandboxes.set(s.id, s);
  }
  persist();
}

// ---------------------------------------------------------------------------------------------
// Path mapping between the sandbox's view and the host
// ---------------------------------------------------------------------------------------------

// Sandbox path -> host path. Relative paths resolve against the work dir, as the daemon's do.
// System directories map to the host's own (read-only for writes); everything else lives under
// the sandbox root. A symlink that leads outside both is refused, so the fake cannot be used
// to read or write arbitrary host files through a sandbox.
function hostPath(s, sandboxPath, opts) {
  try {
    return mapPath(s._.root, HOME_DIR, sandboxPath, opts);
  } catch (e) {
    if (e instanceof PathError) throw new HttpError(e.status, e.message);
    throw e;
  }
}

function containCheck(s, host, abs, write) {
  try {
    containCheckIn(s._.root, host, abs, write);
  } catch (e) {
    if (e instanceof PathError) throw new HttpError(e.status, e.message);
    throw e;
  }
}

// Host path -> sandbox path (for $PWD reported by tmpdir-mode sessions).
function sandboxPathOf(s, host) {
  return sandboxPathIn(s._.root, host);
}

// ---------------------------------------------------------------------------------------------
// Running commands inside a sandbox
// ---------------------------------------------------------------------------------------------

function baseEnv(s) {
  const home = OPTS.execMode === 'bwrap' ? HOME_DIR : path.join(s._.root, HOME_DIR);
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: home,
    USER: s.user,
    LOGNAME: s.user,
    SHELL,
    LANG: 'C.UTF-8',
    HOSTNAME: s.id.slice(0, 12),
    DAYTONA_SANDBOX_ID: s.id,
    DAYTONA_SANDBOX_USER: s.user,
    DAYTONA_SANDBOX_SNAPSHOT: s.snapshot || s.buildInfo?.snapshotRef || '',
    ...s.env,
  };
}

// Runs `SHELL -c body` in the sandbox (tests/fakes/lib/sandbox-exec.mjs: one bubblewrap
// namespace per started sandbox in bwrap mode, host processes in tmpdir mode), first changing
// to cwd (a sandbox path); in body, $0 is the shell and $1... are `args`. Resolves to {child},
// or {error} when the process cannot start (the daemon then answers 200 with exitCode -1).
async function spawnInSandbox(s, body, args, { cwd, env, extraFd = false }) {
  const abs = path.posix.resolve(HOME_DIR, cwd || HOME_DIR);
  let hostCwd;
  try {
    hostCwd = hostPath(s, abs);
  } catch (e) {
    return { error: `chdir ${abs}: ${e.message}` };
  }
  return s._.exec.spawn(body, args, { cwd: abs, hostCwd, env, extraFd });
}

// Everything running in the sandbox: its commands, background jobs and (bwrap) namespace.
function killSandboxProcesses(s) {
  s._.exec.killAll();
  for (const sess of s._.sessions.values()) {
    for (const cmd of sess.commands.values()) if (cmd.child) killTree(cmd.child);
  }
}

// Appends to an output buffer list without exceeding MAX_OUTPUT_BYTES in total.
function capPush(acc, chunk) {
  capPushMax(acc, chunk, MAX_OUTPUT_BYTES);
}

// ---------------------------------------------------------------------------------------------
// Multipart and WebSocket primitives (no npm dependencies)
// ---------------------------------------------------------------------------------------------

function boundaryOf(contentType) {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType || '');
  return m ? m[1] || m[2] : null;
}

// Splits a multipart/form-data body into [{name, filename, contentType, data}].
function parseMultipart(body, boundary) {
  const parts = [];
  const delim = Buffer.from('--' + boundary);
  let pos = body.indexOf(delim);
  if (pos < 0) throw new HttpError(400, 'malformed multipart body');
  for (;;) {
    pos += delim.length;
    if (body.subarray(pos, pos + 2).toString() === '--') break;
    if (body.subarray(pos, pos + 2).toString() === '\r\n') pos += 2;
    const headEnd = body.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) throw new HttpError(400, 'malformed multipart part');
    const headers = {};
    for (const line of body.subarray(pos, headEnd).toString('utf8').split('\r\n')) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    if (next < 0) throw new HttpError(400, 'unterminated multipart part');
    const cd = headers['content-disposition'] || '';
    const name = /\bname="([^"]*)"/i.exec(cd)?.[1];
    const filename = /\bfilename="([^"]*)"/i.exec(cd)?.[1];
    parts.push({ name, filename, contentType: headers['content-type'], data: body.subarray(headEnd + 4, next) });
    pos = next + 2;
  }
  return parts;
}

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const WS_MAX_FRAME = 16 * 1024 * 1024;

// A minimal RFC 6455 server connection: unmasked frames out, masked frames in, fragmentation,
// ping/pong and the close handshake. permessage-deflate is never negotiated.
class WsConn {
  constructor(socket) {
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.fragments = null;
    this.closeSent = false;
    this.closed = false;
    this.onmessage = () => {};
    this.onclose = () => {};
    socket.setNoDelay(true);
    socket.on('data', (d) => this._data(d));
    socket.on('close', () => this._closed());
    socket.on('error', () => {});
  }

  static accept(req, socket) {
    const key = req.headers['sec-websocket-key'];
    if (!key || String(req.headers.upgrade).toLowerCase() !== 'websocket') {
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      return null;
    }
    const accept = crypto.createHash('sha1').update(key + WS_GUID).digest('base64');
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    return new WsConn(socket);
  }

  _data(d) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    for (;;) {
      const f = WsConn.parseFrame(this.buf);
      if (!f) return;
      if (f.tooBig) {
        this.close(1009, 'frame too big');
        return;
      }
      this.buf = this.buf.subarray(f.size);
      this._frame(f);
    }
  }

  static parseFrame(b) {
    if (b.length < 2) return null;
    const fin = (b[0] & 0x80) !== 0;
    const opcode = b[0] & 0x0f;
    const masked = (b[1] & 0x80) !== 0;
    let len = b[1] & 0x7f;
    let off = 2;
    if (len === 126) {
      if (b.length < 4) return null;
      len = b.readUInt16BE(2);
      off = 4;
    } else if (len === 127) {
      if (b.length < 10) return null;
      len = Number(b.readBigUInt64BE(2));
      off = 10;
    }
    if (len > WS_MAX_FRAME) return { tooBig: true };
    const maskOff = off;
    if (masked) off += 4;
    if (b.length < off + len) return null;
    const payload = Buffer.from(b.subarray(off, off + len));
    if (masked) {
      for (let i = 0; i < payload.length; i++) payload[i] ^= b[maskOff + (i & 3)];
    }
    return { fin, opcode, payload, size: off + len };
  }

  _frame(f) {
    switch (f.opcode) {
      case 0x0:
        if (!this.fragments) return;
        this.fragments.parts.push(f.payload);
        if (f.fin) {
          const { opcode, parts } = this.fragments;
          this.fragments = null;
          this.onmessage(Buffer.concat(parts), opcode === 0x2);
        }
        return;
      case 0x1:
      case 0x2:
        if (f.fin) this.onmessage(f.payload, f.opcode === 0x2);
        else this.fragments = { opcode: f.opcode, parts: [f.payload] };
        return;
      case 0x8: {
        const code = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1000;
        this.close(code === 1005 ? 1000 : code);
        this.socket.end();
        return;
      }
      case 0x9:
        this._write(0xa, f.payload);
        return;
      default:
        return;
    }
  }

  _write(opcode, payload) {
    if (this.closed || this.socket.destroyed) return;
    const len = payload.length;
    let head;
    if (len < 126) {
      head = Buffer.from([0x80 | opcode, len]);
    } else if (len < 65536) {
      head = Buffer.alloc(4);
      head[0] = 0x80 | opcode;
      head[1] = 126;
      head.writeUInt16BE(len, 2);
    } else {
      head = Buffer.alloc(10);
      head[0] = 0x80 | opcode;
      head[1] = 127;
      head.writeBigUInt64BE(BigInt(len), 2);
    }
    this.socket.write(Buffer.concat([head, payload]));
  }

  send(data, binary = false) {
    if (this.closeSent) return;
    this._write(binary ? 0x2 : 0x1, Buffer.isBuffer(data) ? data : Buffer.from(String(data)));
  }

  close(code = 1000, reason = '') {
    if (this.closeSent) return;
    const r = Buffer.from(reason);
    const p = Buffer.alloc(2 + r.length);
    p.writeUInt16BE(code, 0);
    r.copy(p, 2);
    this._write(0x8, p);
    this.closeSent = true;
    // A client that never answers the close frame does not keep the socket forever.
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  _closed() {
    if (this.closed) return;
    this.closed = true;
    this.onclose();
  }
}

// ---------------------------------------------------------------------------------------------
// Request plumbing: context, body, replies, auth, logging, faults
// ---------------------------------------------------------------------------------------------

// Every reply goes through here, so a fault can swallow it (drop after) or replace it.
function reply(ctx, status, body, headers = {}) {
  if (ctx.replied) return;
  ctx.replied = true;
  if (ctx.fault && ctx.fault.after) {
    const f = ctx.fault;
    if (f.action === 'drop') {
      ctx.status = 0;
      ctx.req.socket.destroy();
      logRequest(ctx);
      return;
    }
    if (f.action === 'status') {
      ctx.replied = false;
      ctx.fault = null;
      sendFaultStatus(ctx, f);
      return;
    }
  }
  let payload = body;
  const h = { ...ctx.extraHeaders, ...headers };
  if (payload === undefined || payload === null) {
    payload = Buffer.alloc(0);
  } else if (!Buffer.isBuffer(payload) && typeof payload !== 'string') {
    payload = Buffer.from(JSON.stringify(payload));
    h['Content-Type'] ??= 'application/json; charset=utf-8';
  }
  if (typeof payload === 'string') payload = Buffer.from(payload);
  h['Content-Length'] = payload.length;
  ctx.status = status;
  ctx.res.writeHead(status, h);
  ctx.res.end(payload);
}

function replyError(ctx, status, message, extra = {}) {
  if (ctx.area === 'toolbox') {
    reply(ctx, status, {
      statusCode: status,
      message,
      code: extra.code || toolboxCode(status),
      timestamp: nowIso(),
      path: ctx.toolboxPath || ctx.url.pathname,
      method: ctx.req.method,
    });
  } else if (ctx.area === 'admin') {
    reply(ctx, status, { error: message });
  } else {
    reply(ctx, status, {
      path: ctx.url.pathname,
      timestamp: nowIso(),
      statusCode: status,
      error: http.STATUS_CODES[status] || 'Error',
      message,
    });
  }
}

const readBody = (ctx) => readBodyMax(ctx, MAX_BODY_BYTES);
const readJson = (ctx) => readJsonMax(ctx, MAX_BODY_BYTES);

// Which credential a request carried: "ok", "bad" or "missing" (never the value itself).
function authStatus(req) {
  const h = req.headers.authorization;
  if (!h) return 'missing';
  return h === `Bearer ${OPTS.apiKey}` ? 'ok' : 'bad';
}

const LOGGED_HEADERS = [
  'x-daytona-source', 'x-daytona-sdk-version', 'x-daytona-organization-id', 'x-daytona-skip-last-activity-update',
  'user-agent', 'content-type', 'accept', 'transfer-encoding', 'content-length', 'upgrade',
];

function logRequest(ctx) {
  if (ctx.logged) return;
  ctx.logged = true;
  const headers = {};
  for (const k of LOGGED_HEADERS) if (ctx.req.headers[k] !== undefined) headers[k] = ctx.req.headers[k];
  LOG.add({
    ts: new Date(ctx.start).toISOString(),
    method: ctx.req.method,
    path: ctx.url.pathname,
    query: Object.fromEntries(ctx.url.searchParams),
    area: ctx.area,
    route: ctx.route || null,
    sandboxId: ctx.sandboxId || null,
    auth: ctx.auth,
    headers,
    status: ctx.status ?? 0,
    durationMs: Math.round(msSince(ctx.startNs) * 1000) / 1000,
    fault: ctx.faultApplied || null,
  });
}

// The rate-limit throttler Daytona applies to a request (§1.2), used for X-RateLimit-* headers.
function throttlerOf(method, pathname) {
  if (method === 'POST' && pathname === `${API_PREFIX}/sandbox`) return 'sandbox-create';
  if (/^\/api\/sandbox\/[^/]+(\/(start|stop|archive|pause|recover|resize))?$/.test(pathname) && method !== 'GET') {
    return 'sandbox-lifecycle';
  }
  return 'authenticated';
}

function sendFaultStatus(ctx, f) {
  const status = f.status || 500;
  const headers = { ...(f.headers || {}) };
  if (status === 429) {
    const t = throttlerOf(ctx.req.method, ctx.url.pathname);
    const reset = f.retryAfter ?? 1;
    headers[`X-RateLimit-Limit-${t}`] ??= '10000';
    headers[`X-RateLimit-Remaining-${t}`] ??= '0';
    headers[`X-RateLimit-Reset-${t}`] ??= String(reset);
    headers[`Retry-After-${t}`] ??= String(reset);
  }
  if (f.body !== undefined) {
    reply(ctx, status, f.body, headers);
  } else if (status === 429) {
    reply(ctx, status, { statusCode: 429, message: 'Rate limit exceeded', error: 'Too Many Requests' }, headers);
  } else {
    ctx.extraHeaders = headers;
    replyError(ctx, status, `injected fault: ${http.STATUS_CODES[status] || status}`);
  }
}

// Applies a matched fault before the handler runs. Returns true when the request is finished.
async function applyFaultBefore(ctx, f) {
  ctx.faultApplied = { id: f.id, action: f.action, status: f.status, after: !!f.after };
  // A slow request lands even when its client gave up during the wait (Daytona keeps
  // creating a sandbox whose caller hung up): a small JSON body is taken before the wait.
  if (f.delayMs && ctx.area === 'control' && /json/.test(ctx.req.headers['content-type'] || '')) {
    await readBody(ctx);
  }
  if (f.delayMs) await sleep(f.delayMs);
  if (f.after) {
    ctx.fault = f;
    return false;
  }
  if (f.action === 'drop') {
    ctx.status = 0;
    ctx.req.socket.destroy();
    logRequest(ctx);
    return true;
  }
  if (f.action === 'status') {
    sendFaultStatus(ctx, f);
    return true;
  }
  return false; // 'delay' only
}

// ---------------------------------------------------------------------------------------------
// Control plane handlers (/api/...)
// ---------------------------------------------------------------------------------------------

function checkIntField(body, k, { min, max } = {}) {
  const v = body[k];
  if (v === undefined || v === null) return;
  if (!Number.isInteger(v)) throw new HttpError(400, `${k} must be an integer number`);
  if (min !== undefined && v < min) throw new HttpError(400, `${k} must not be less than ${min}`);
  if (max !== undefined && v > max) throw new HttpError(400, `${k} must not be greater than ${max}`);
}

function checkStringMap(body, k) {
  const v = body[k];
  if (v === undefined || v === null) return;
  if (!isObj(v) || Object.values(v).some((x) => typeof x !== 'string')) {
    throw new HttpError(400, `${k} must be an object of string values`);
  }
}

function validateCreate(b) {
  if (!isObj(b)) throw new HttpError(400, 'body must be a JSON object');
  for (const k of ['name', 'snapshot', 'user', 'target', 'networkAllowList', 'domainAllowList']) {
    if (b[k] !== undefined && b[k] !== null && typeof b[k] !== 'string') throw new HttpError(400, `${k} must be a string`);
  }
  checkStringMap(b, 'env');
  checkStringMap(b, 'labels');
  if (b.buildInfo !== undefined && b.buildInfo !== null) {
    if (!isObj(b.buildInfo) || typeof b.buildInfo.dockerfileContent !== 'string') {
      throw new HttpError(400, 'buildInfo.dockerfileContent must be a string');
    }
    if (b.snapshot) throw new HttpError(400, 'Cannot specify a snapshot when using a build info entry');
  }
  const resources = ['cpu', 'memory', 'disk', 'gpu'].filter((k) => b[k] !== undefined && b[k] !== null);
  if (resources.length && !isObj(b.buildInfo)) {
    throw new HttpError(400, 'Cannot specify Sandbox resources when using a snapshot');
  }
  checkIntField(b, 'cpu', { min: 1 });
  checkIntField(b, 'memory', { min: 1 });
  checkIntField(b, 'disk', { min: 1 });
  checkIntField(b, 'gpu', { min: 0 });
  for (const k of ['cpu', 'memory', 'disk']) {
    if (b[k] > RES_MAX[k]) {
      throw new HttpError(400, `${k} ${b[k]} exceeds the maximum allowed per sandbox (${RES_MAX[k]})`);
    }
  }
  checkIntField(b, 'autoStopInterval', { min: 0 });
  checkIntField(b, 'autoArchiveInterval', { min: 0 });
  checkIntField(b, 'autoDeleteInterval');
  if (b.networkBlockAll !== undefined && typeof b.networkBlockAll !== 'boolean') {
    throw new HttpError(400, 'networkBlockAll must be a boolean value');
  }
  if (b.networkAllowList) {
    const cidrs = b.networkAllowList.split(',').map((x) => x.trim());
    if (cidrs.length > 10) throw new HttpError(400, 'networkAllowList can contain at most 10 CIDRs');
    for (const c of cidrs) {
      const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(c);
      if (!m || m.slice(1, 5).some((o) => Number(o) > 255) || Number(m[5]) > 32) {
        throw new HttpError(400, `Invalid CIDR in networkAllowList: ${c}`);
      }
    }
  }
  if (b.name !== undefined && b.name !== null && (b.name === '' || b.name.length > 255)) {
    throw new HttpError(400, 'name must be between 1 and 255 characters');
  }
}

async function hCreateSandbox(ctx) {
  const b = (await readJson(ctx)) ?? {};
  validateCreate(b);
  if (b.name && findSandbox(b.name)) {
    throw new HttpError(409, `Sandbox with name ${b.name} already exists`);
  }
  const id = crypto.randomUUID();
  const s = newSandboxRecord(b, id);
  fs.mkdirSync(path.join(s._.root, 'home', 'daytona'), { recursive: true });
  fs.mkdirSync(path.join(s._.root, 'tmp'), { recursive: true, mode: 0o1777 });
  STATE.sandboxes.set(id, s);
  ctx.sandboxId = id;
  persist();
  emitEvent('sandbox.created', sandboxDto(s));
  if (s.buildInfo) {
    // Created from an image: POST answers at once in pending_build (§1.4).
    runTransition(s, 'started', ['pending_build', 'building_snapshot', 'starting', 'started']);
    reply(ctx, 200, sandboxDto(s));
    return;
  }
  // From a snapshot: POST blocks until started (up to createBlockMs) and returns what it reached.
  runTransition(s, 'started', ['creating', 'starting', 'started']);
  await waitForState(s, ['started', 'error', 'build_failed', 'destroyed'], CONFIG.createBlockMs);
  if (s.state === 'error' || s.state === 'build_failed') {
    throw new HttpError(400, `Sandbox failed to start: ${s.errorReason || s.state}`);
  }
  reply(ctx, 200, sandboxDto(s));
}

function parseListArray(url, key) {
  const vals = url.searchParams.getAll(key).flatMap((v) => v.split(','));
  return vals.filter((v) => v !== '');
}

async function hListSandboxes(ctx) {
  const q = ctx.url.searchParams;
  let labels = null;
  if (q.has('labels')) {
    try {
      labels = JSON.parse(q.get('labels'));
    } catch {
      throw new HttpError(400, 'labels must be a JSON object');
    }
    if (!isObj(labels)) throw new HttpError(400, 'labels must be a JSON object');
  }
  const states = parseListArray(ctx.url, 'states');
  const limit = q.has('limit') ? Number(q.get('limit')) : 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw new HttpError(400, 'limit must be between 1 and 200');
  let offset = 0;
  if (q.get('cursor')) {
    offset = Number(Buffer.from(q.get('cursor'), 'base64url').toString());
    if (!Number.isInteger(offset) || offset < 0) throw new HttpError(400, 'invalid cursor');
  }
  let items = [...STATE.sandboxes.values()].filter((s) => {
    if (labels && !Object.entries(labels).every(([k, v]) => s.labels[k] === String(v))) return false;
    if (states.length && !states.includes(s.state)) return false;
    if (q.get('id') && !s.id.startsWith(q.get('id'))) return false;
    if (q.get('name') && !s.name.startsWith(q.get('name'))) return false;
    return true;
  });
  const sort = q.get('sort') || 'createdAt';
  const dir = (q.get('order') || 'desc').toLowerCase() === 'asc' ? 1 : -1;
  items.sort((a, b) => (a[sort] < b[sort] ? -dir : a[sort] > b[sort] ? dir : 0));
  const page = items.slice(offset, offset + limit);
  const more = offset + limit < items.length;
  reply(ctx, 200, {
    items: page.map(sandboxListItem),
    nextCursor: more ? Buffer.from(String(offset + limit)).toString('base64url') : null,
  });
}

async function hGetSandbox(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  reply(ctx, 200, sandboxDto(s));
}

async function hDeleteSandbox(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  if (inTransition(s)) throw new HttpError(409, 'Sandbox state change in progress');
  beginDestroy(s);
  reply(ctx, 200, sandboxDto(s));
}

async function hStartSandbox(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  if (s.state === 'started' && s.desiredState === 'started') {
    reply(ctx, 200, sandboxDto(s)); // starting a started sandbox is a no-op
    return;
  }
  if (inTransition(s)) throw new HttpError(409, 'Sandbox state change in progress');
  if (!['stopped', 'archived', 'paused'].includes(s.state)) {
    throw new HttpError(400, `Sandbox is not in a startable state (state: ${s.state})`);
  }
  s.lastActivityAt = nowIso();
  runTransition(s, 'started', s.state === 'archived' ? ['restoring', 'starting', 'started'] : ['starting', 'started']);
  reply(ctx, 200, sandboxDto(s));
}

async function hStopSandbox(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  if (inTransition(s)) throw new HttpError(409, 'Sandbox state change in progress');
  if (s.state !== 'started' && s.state !== 'paused') {
    throw new HttpError(400, `Sandbox is not in a stoppable state (state: ${s.state})`);
  }
  if (ctx.url.searchParams.get('force') === 'true') killSandboxProcesses(s);
  runTransition(s, 'stopped', ['stopping', 'stopped']);
  reply(ctx, 200, sandboxDto(s));
}

async function hArchiveSandbox(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  if (inTransition(s)) throw new HttpError(409, 'Sandbox state change in progress');
  if (s.state !== 'stopped') throw new HttpError(400, `Sandbox is not stopped (state: ${s.state})`);
  if (s.autoDeleteInterval === 0) throw new HttpError(400, 'Ephemeral sandboxes cannot be archived');
  runTransition(s, 'archived', ['archiving', 'archived']);
  reply(ctx, 200, sandboxDto(s));
}

function intervalHandler(field) {
  return async (ctx) => {
    const s = mustFindSandbox(ctx.params.idOrName);
    ctx.sandboxId = s.id;
    const v = Number(ctx.params.interval);
    if (!Number.isInteger(v)) throw new HttpError(400, 'interval must be an integer');
    if (field !== 'autoDeleteInterval' && v < 0) throw new HttpError(400, 'interval must not be negative');
    s[field] = field === 'autoArchiveInterval' ? clampAutoArchive(v) : v;
    s.updatedAt = nowIso();
    persist();
    reply(ctx, 200, sandboxDto(s));
  };
}

async function hReplaceLabels(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  const b = await readJson(ctx);
  if (!isObj(b)) throw new HttpError(400, 'body must be {"labels":{...}}');
  checkStringMap(b, 'labels');
  s.labels = b.labels || {};
  s.updatedAt = nowIso();
  persist();
  reply(ctx, 200, { labels: s.labels });
}

async function hNetworkSettings(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  const b = (await readJson(ctx)) ?? {};
  validateCreate({ networkBlockAll: b.networkBlockAll, networkAllowList: b.networkAllowList, domainAllowList: b.domainAllowList });
  for (const k of ['networkBlockAll', 'networkAllowList', 'domainAllowList']) if (b[k] !== undefined) s[k] = b[k];
  s.updatedAt = nowIso();
  persist();
  reply(ctx, 200, sandboxDto(s));
}

async function hLastActivity(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  s.lastActivityAt = nowIso();
  persist();
  reply(ctx, 201, null);
}

async function hToolboxProxyUrl(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  ctx.sandboxId = s.id;
  reply(ctx, 200, { url: toolboxProxyUrl() });
}

// ---------------------------------------------------------------------------------------------
// Toolbox handlers (/toolbox/<sandboxId>/...)
// ---------------------------------------------------------------------------------------------

// process/execute: the command is piped on stdin to the user's shell, stdout and stderr are
// combined, and a timeout kills the process group and answers 408 (§1.6.2).
async function hExecute(ctx) {
  const s = ctx.sandbox;
  const b = await readJson(ctx);
  if (!isObj(b) || typeof b.command !== 'string') throw new HttpError(400, 'command is required');
  if (b.command.trim() === '') throw new HttpError(400, 'empty command');
  if (b.envs !== undefined && b.envs !== null) checkStringMap(b, 'envs');
  const reqTimeoutMs = Number.isInteger(b.timeout) && b.timeout > 0 ? b.timeout * 1000 : Infinity;
  const limitMs = Math.min(reqTimeoutMs, CONFIG.execLimitMs > 0 ? CONFIG.execLimitMs : Infinity);
  const env = { ...baseEnv(s), ...(b.envs || {}) };
  // The script goes to the shell's stdin (the daemon pipes it to avoid ARG_MAX limits).
  const { child, error } = await spawnInSandbox(s, 'exec "$0"', [], { cwd: b.cwd, env });
  if (error) {
    reply(ctx, 200, { exitCode: -1, result: error });
    return;
  }
  const out = { list: [], bytes: 0 };
  child.stdout.on('data', (d) => capPush(out, d));
  child.stderr.on('data', (d) => capPush(out, d));
  child.stdin.end(b.command);
  let timedOut = false;
  const timer = Number.isFinite(limitMs)
    ? setTimeout(() => {
        timedOut = true;
        killTree(child);
      }, limitMs)
    : null;
  // 'close' waits for the output pipes too, as the daemon's cmd.Wait() does.
  const exit = await new Promise((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
    child.on('error', (e) => resolve({ spawnError: e }));
  });
  clearTimeout(timer);
  if (exit.spawnError) {
    reply(ctx, 200, { exitCode: -1, result: String(exit.spawnError.message) });
    return;
  }
  if (timedOut) {
    const secs = Number.isFinite(reqTimeoutMs) && reqTimeoutMs <= limitMs ? b.timeout : limitMs / 1000;
    throw new HttpError(
      408,
      `Command execution timed out after ${secs} seconds. The timeout can be increased by adjusting the timeout parameter in the request.`,
    );
  }
  reply(ctx, 200, {
    exitCode: exit.code === null ? -1 : exit.code,
    result: Buffer.concat(out.list).toString('utf8'),
  });
}

// --- sessions -------------------------------------------------------------------------------
//
// A session is a persistent shell: `cd` and `export` carry over between its commands, which run
// one after another in the order they were sent. Each command runs in a fresh shell that starts
// in the session's cwd with the session's exported environment; when it exits, a trap reports
// $PWD and the exported environment on fd 3, which become the session's state for the next
// command. The command's stdin is its own pipe (POST .../input writes there).

const SESSION_WRAPPER =
  'trap \'__dtn_ec=$?; { printf "%s\\0" "$PWD"; env -0; } >&3 2>/dev/null; exit $__dtn_ec\' EXIT; ' +
  '__dtn_cmd=$1; set --; ' +
  'eval "$__dtn_cmd" 3>&-';

const ENV_NOT_CARRIED = new Set(['_', 'SHLVL', 'PWD']);

function newSession(s, sessionId) {
  return {
    sessionId,
    cwd: HOME_DIR, // sandbox path
    env: baseEnv(s),
    commands: new Map(), // cmdId -> command
    queue: Promise.resolve(), // commands run one at a time, in order
    deleted: false,
  };
}

function newCommand(command) {
  return {
    id: crypto.randomUUID(),
    command,
    exitCode: undefined,
    raw: [], // log bytes with 3-byte stream markers, in arrival order (what follow streams)
    stdout: { list: [], bytes: 0 },
    stderr: { list: [], bytes: 0 },
    combined: { list: [], bytes: 0 },
    listeners: new Set(), // log followers: fn(chunk | null at the end)
    child: null,
    done: false,
    doneWaiters: [],
  };
}

function commandChunk(cmd, which, data) {
  capPush(cmd[which], data);
  capPush(cmd.combined, data);
  const framed = Buffer.concat([which === 'stdout' ? STDOUT_MARK : STDERR_MARK, data]);
  cmd.raw.push(framed);
  for (const l of cmd.listeners) l(framed);
}

function finishCommand(cmd, exitCode) {
  if (cmd.done) return;
  cmd.done = true;
  cmd.exitCode = exitCode;
  cmd.child = null;
  for (const l of cmd.listeners) l(null);
  cmd.listeners.clear();
  for (const w of cmd.doneWaiters) w();
  cmd.doneWaiters = [];
}

// Runs one session command to its end; resolves when the session may run the next one.
async function runSessionCommand(s, sess, cmd) {
  if (sess.deleted) {
    finishCommand(cmd, -1);
    return;
  }
  const { child, error } = await spawnInSandbox(s, SESSION_WRAPPER, [cmd.command], {
    cwd: sess.cwd,
    env: sess.env,
    extraFd: true,
  });
  if (error) {
    commandChunk(cmd, 'stderr', Buffer.from(error + '\n'));
    finishCommand(cmd, 1);
    return;
  }
  cmd.child = child;
  await new Promise((resolve) => {
    const stateBuf = [];
    let open = 3;
    let exitInfo = null;
    let graceTimer = null;
    const finalize = () => {
      clearTimeout(graceTimer);
      if (cmd.done) return resolve();
      const st = Buffer.concat(stateBuf).toString('utf8').split('\0');
      if (st.length > 1 && st[0] !== '') {
        sess.cwd = OPTS.execMode === 'bwrap' ? st[0] : sandboxPathOf(s, st[0]);
        const env = {};
        for (const kv of st.slice(1)) {
          const i = kv.indexOf('=');
          if (i > 0 && !ENV_NOT_CARRIED.has(kv.slice(0, i))) env[kv.slice(0, i)] = kv.slice(i + 1);
        }
        sess.env = env;
      }
      const { code, signal } = exitInfo || { code: null, signal: 'SIGKILL' };
      finishCommand(cmd, code !== null ? code : 128 + (os.constants.signals[signal] || 9));
      resolve();
    };
    const streamEnded = () => {
      open -= 1;
      if (open === 0 && exitInfo) finalize();
    };
    child.stdout.on('data', (d) => commandChunk(cmd, 'stdout', d));
    child.stderr.on('data', (d) => commandChunk(cmd, 'stderr', d));
    child.stdio[3].on('data', (d) => stateBuf.push(d));
    for (const st of [child.stdout, child.stderr, child.stdio[3]]) st.on('close', streamEnded);
    child.on('exit', (code, signal) => {
      exitInfo = { code, signal };
      if (open === 0) finalize();
      // A background job that keeps stdout open must not hold the command (the daemon writes
      // the exit code as soon as the shell's command group ends).
      else graceTimer = setTimeout(finalize, 200);
    });
    child.on('error', () => {
      exitInfo = { code: 127, signal: null };
      finalize();
    });
  });
}

function mustSession(s, sessionId) {
  const sess = s._.sessions.get(sessionId);
  if (!sess) throw new HttpError(404, 'session not found');
  return sess;
}

function mustCommand(sess, cmdId) {
  const cmd = sess.commands.get(cmdId);
  if (!cmd) throw new HttpError(404, 'command not found');
  return cmd;
}

function commandView(cmd) {
  const v = { id: cmd.id, command: cmd.command };
  if (cmd.exitCode !== undefined) v.exitCode = cmd.exitCode;
  return v;
}

function sessionView(sess) {
  return { sessionId: sess.sessionId, commands: [...sess.commands.values()].map(commandView) };
}

async function hCreateSession(ctx) {
  const s = ctx.sandbox;
  const b = await readJson(ctx);
  if (!isObj(b) || typeof b.sessionId !== 'string' || b.sessionId === '') throw new HttpError(400, 'sessionId is required');
  if (b.sessionId === 'entrypoint' || s._.sessions.has(b.sessionId)) throw new HttpError(409, 'session already exists');
  s._.sessions.set(b.sessionId, newSession(s, b.sessionId));
  reply(ctx, 201, null);
}

async function hListSessions(ctx) {
  reply(ctx, 200, [...ctx.sandbox._.sessions.values()].map(sessionView));
}

async function hGetSession(ctx) {
  if (ctx.params.sessionId === 'entrypoint') {
    reply(ctx, 200, { sessionId: 'entrypoint', commands: [] });
    return;
  }
  reply(ctx, 200, sessionView(mustSession(ctx.sandbox, ctx.params.sessionId)));
}

async function hDeleteSession(ctx) {
  const s = ctx.sandbox;
  const sess = mustSession(s, ctx.params.sessionId);
  sess.deleted = true;
  for (const cmd of sess.commands.values()) if (cmd.child) killTree(cmd.child);
  s._.sessions.delete(sess.sessionId);
  reply(ctx, 204, null);
}

async function hSessionExec(ctx) {
  const s = ctx.sandbox;
  const sess = mustSession(s, ctx.params.sessionId);
  const b = await readJson(ctx);
  if (!isObj(b) || typeof b.command !== 'string') throw new HttpError(400, 'invalid request body: command is required');
  if (b.command.trim() === '') throw new HttpError(400, 'command cannot be empty');
  const runAsync = b.runAsync === true || b.async === true;
  const cmd = newCommand(b.command);
  sess.commands.set(cmd.id, cmd);
  sess.queue = sess.queue.then(() => runSessionCommand(s, sess, cmd));
  if (runAsync) {
    reply(ctx, 202, { cmdId: cmd.id });
    return;
  }
  const done = new Promise((r) => cmd.doneWaiters.push(r));
  const limit = CONFIG.execLimitMs > 0 ? CONFIG.execLimitMs : null;
  const won = await Promise.race([done.then(() => 'done'), limit ? sleep(limit).then(() => 'limit') : new Promise(() => {})]);
  if (won === 'limit') {
    // The toolbox request limit ends the HTTP call; the command keeps running in its session.
    throw new HttpError(408, `Command did not finish within ${limit / 1000} seconds; poll command ${cmd.id} instead`);
  }
  const text = (acc) => Buffer.concat(acc.list).toString('utf8');
  reply(ctx, 200, { cmdId: cmd.id, output: text(cmd.combined), stdout: text(cmd.stdout), stderr: text(cmd.stderr), exitCode: cmd.exitCode });
}

async function hGetSessionCommand(ctx) {
  const sess = mustSession(ctx.sandbox, ctx.params.sessionId);
  reply(ctx, 200, commandView(mustCommand(sess, ctx.params.cmdId)));
}

// Logs as a snapshot over plain HTTP; the format depends on X-Daytona-SDK-Version (§1.6.3).
async function hGetSessionCommandLogs(ctx) {
  const sess = mustSession(ctx.sandbox, ctx.params.sessionId);
  const cmd = mustCommand(sess, ctx.params.cmdId);
  const text = (acc) => Buffer.concat(acc.list).toString('utf8');
  const v = sdkVersion(ctx.req);
  if (v && versionAtLeast(v, JSON_LOGS_MIN_SDK)) {
    reply(ctx, 200, { output: text(cmd.combined), stdout: text(cmd.stdout), stderr: text(cmd.stderr) });
  } else if (String(ctx.req.headers['x-daytona-split-output']).toLowerCase() === 'true') {
    reply(ctx, 200, Buffer.concat(cmd.raw), { 'Content-Type': 'text/plain; charset=utf-8' });
  } else {
    reply(ctx, 200, text(cmd.combined), { 'Content-Type': 'text/plain; charset=utf-8' });
  }
}

async function hSessionCommandInput(ctx) {
  const sess = mustSession(ctx.sandbox, ctx.params.sessionId);
  const cmd = mustCommand(sess, ctx.params.cmdId);
  const b = await readJson(ctx);
  if (!isObj(b) || typeof b.data !== 'string') throw new HttpError(400, 'data is required');
  if (cmd.done || !cmd.child) throw new HttpError(400, 'command is not running');
  cmd.child.stdin.write(b.data);
  reply(ctx, 204, null);
}

// Follow over WebSocket: binary frames of raw multiplexed bytes, close 1000 at the end.
function followCommandLogs(ws, cmd) {
  if (cmd.raw.length) ws.send(Buffer.concat(cmd.raw), true);
  if (cmd.done) {
    ws.close(1000);
    return;
  }
  const listener = (chunk) => {
    if (chunk === null) ws.close(1000);
    else ws.send(chunk, true);
  };
  cmd.listeners.add(listener);
  ws.onclose = () => cmd.listeners.delete(listener);
}

// --- files ----------------------------------------------------------------------------------

function fileInfo(name, st, sandboxPath) {
  const mode = st.mode & 0o777;
  const typeChar = st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'L' : '-';
  const rwx = [6, 3, 0].map((sh) => ['r', 'w', 'x'].map((c, i) => ((mode >> sh) & (4 >> i) ? c : '-')).join('')).join('');
  const info = {
    name,
    size: st.size,
    mode: typeChar + rwx,
    permissions: '0' + mode.toString(8).padStart(3, '0'),
    isDir: st.isDirectory(),
    owner: SANDBOX_USER,
    group: SANDBOX_USER,
    modTime: st.mtime.toString(),
    modifiedAt: st.mtime.toISOString(),
  };
  if (sandboxPath) info.path = sandboxPath;
  return info;
}

function statOr404(host, p) {
  try {
    return fs.statSync(host);
  } catch {
    throw new HttpError(404, `file not found: ${p}`);
  }
}

async function hListFiles(ctx) {
  const p = ctx.url.searchParams.get('path') || HOME_DIR;
  const host = hostPath(ctx.sandbox, p);
  const st = statOr404(host, p);
  if (!st.isDirectory()) throw new HttpError(400, `not a directory: ${p}`);
  const abs = path.posix.resolve(HOME_DIR, p);
  const out = [];
  for (const ent of fs.readdirSync(host)) {
    try {
      out.push(fileInfo(ent, fs.lstatSync(path.join(host, ent)), path.posix.join(abs, ent)));
    } catch {
      /* vanished while listing */
    }
  }
  reply(ctx, 200, out);
}

async function hFileInfo(ctx) {
  const p = ctx.url.searchParams.get('path');
  const host = hostPath(ctx.sandbox, p);
  reply(ctx, 200, fileInfo(path.basename(host), statOr404(host, p)));
}

async function hDownloadFile(ctx) {
  const p = ctx.url.searchParams.get('path');
  const host = hostPath(ctx.sandbox, p);
  const st = statOr404(host, p);
  if (st.isDirectory()) throw new HttpError(400, `path is a directory: ${p}`);
  reply(ctx, 200, await fsp.readFile(host), {
    'Content-Type': 'application/octet-stream',
    'Content-Disposition': `attachment; filename=${path.basename(host)}`,
  });
}

async function writeSandboxFile(s, p, data) {
  const host = hostPath(s, p, { write: true });
  if (fs.existsSync(host) && fs.statSync(host).isDirectory()) throw new HttpError(400, `path is a directory: ${p}`);
  await fsp.mkdir(path.dirname(host), { recursive: true });
  containCheck(s, path.dirname(host), p, true);
  await fsp.writeFile(host, data);
}

async function multipartParts(ctx) {
  const boundary = boundaryOf(ctx.req.headers['content-type']);
  if (!boundary) throw new HttpError(400, 'expected multipart/form-data');
  return parseMultipart(await readBody(ctx), boundary);
}

async function hUploadFile(ctx) {
  const p = ctx.url.searchParams.get('path');
  const part = (await multipartParts(ctx)).find((x) => x.name === 'file');
  if (!part) throw new HttpError(400, 'file is required');
  await writeSandboxFile(ctx.sandbox, p, part.data);
  reply(ctx, 200, null);
}

// bulk-upload: text field files[i].path, then file field files[i].file (the path comes first).
async function hBulkUpload(ctx) {
  const parts = await multipartParts(ctx);
  const paths = new Map();
  const files = [];
  const errors = [];
  for (const part of parts) {
    const m = /^files\[(\d+)\]\.(path|file)$/.exec(part.name || '');
    if (!m) continue;
    if (m[2] === 'path') {
      paths.set(m[1], part.data.toString('utf8'));
      continue;
    }
    const p = paths.get(m[1]);
    if (p === undefined) {
      errors.push({ path: '', error: `files[${m[1]}].file came before files[${m[1]}].path` });
      continue;
    }
    try {
      await writeSandboxFile(ctx.sandbox, p, part.data);
      files.push({ path: p, bytes: part.data.length });
    } catch (e) {
      errors.push({ path: p, error: e.message });
    }
  }
  if (errors.length) reply(ctx, 400, { errors, files });
  else reply(ctx, 200, { files });
}

const DL_BOUNDARY = 'DAYTONA-FILE-BOUNDARY';

// bulk-download: one multipart part per path, "file" with the bytes or "error" with JSON.
async function hBulkDownload(ctx) {
  const b = await readJson(ctx);
  if (!isObj(b) || !Array.isArray(b.paths) || b.paths.some((p) => typeof p !== 'string')) {
    throw new HttpError(400, 'paths must be an array of strings');
  }
  const chunks = [];
  for (const p of b.paths) {
    let data = null;
    let err = null;
    try {
      const host = hostPath(ctx.sandbox, p);
      const st = statOr404(host, p);
      if (st.isDirectory()) throw new HttpError(400, `path is a directory: ${p}`);
      data = await fsp.readFile(host);
    } catch (e) {
      const status = e instanceof HttpError ? e.status : 500;
      err = Buffer.from(JSON.stringify({ statusCode: status, message: e.message, code: toolboxCode(status) }));
    }
    const name = data ? 'file' : 'error';
    const body = data || err;
    const type = data ? 'application/octet-stream' : 'application/json';
    chunks.push(
      Buffer.from(
        `--${DL_BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"; filename="${p}"\r\n` +
          `Content-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`,
      ),
      body,
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${DL_BOUNDARY}--\r\n`));
  reply(ctx, 200, Buffer.concat(chunks), { 'Content-Type': `multipart/form-data; boundary=${DL_BOUNDARY}` });
}

async function hDeleteFile(ctx) {
  const p = ctx.url.searchParams.get('path');
  const host = hostPath(ctx.sandbox, p, { write: true });
  if (host === ctx.sandbox._.root) throw new HttpError(400, 'refusing to delete /');
  const st = statOr404(host, p);
  if (st.isDirectory() && ctx.url.searchParams.get('recursive') !== 'true') {
    throw new HttpError(400, `path is a directory, use recursive=true: ${p}`);
  }
  fs.rmSync(host, { recursive: true, force: true });
  reply(ctx, 204, null);
}

async function hCreateFolder(ctx) {
  const p = ctx.url.searchParams.get('path');
  const modeStr = ctx.url.searchParams.get('mode') || '0755';
  if (!/^[0-7]{3,4}$/.test(modeStr)) throw new HttpError(400, `invalid mode: ${modeStr}`);
  const host = hostPath(ctx.sandbox, p, { write: true });
  fs.mkdirSync(host, { recursive: true, mode: parseInt(modeStr, 8) });
  reply(ctx, 201, null);
}

async function hMoveFile(ctx) {
  const src = ctx.url.searchParams.get('source');
  const dst = ctx.url.searchParams.get('destination');
  const hs = hostPath(ctx.sandbox, src, { write: true });
  const hd = hostPath(ctx.sandbox, dst, { write: true });
  statOr404(hs, src);
  fs.mkdirSync(path.dirname(hd), { recursive: true });
  fs.renameSync(hs, hd);
  reply(ctx, 200, null);
}

async function hSetPermissions(ctx) {
  const p = ctx.url.searchParams.get('path');
  const host = hostPath(ctx.sandbox, p, { write: true });
  statOr404(host, p);
  const modeStr = ctx.url.searchParams.get('mode');
  if (modeStr) {
    if (!/^[0-7]{3,4}$/.test(modeStr)) throw new HttpError(400, `invalid mode: ${modeStr}`);
    fs.chmodSync(host, parseInt(modeStr, 8));
  }
  reply(ctx, 200, null);
}

async function hUserHomeDir(ctx) {
  reply(ctx, 200, { dir: HOME_DIR });
}

async function hWorkDir(ctx) {
  reply(ctx, 200, { dir: HOME_DIR });
}

async function hVersion(ctx) {
  reply(ctx, 200, { version: DAEMON_VERSION });
}

// ---------------------------------------------------------------------------------------------
// Admin API (/__fake/...): no auth, never logged, never faulted
// ---------------------------------------------------------------------------------------------

function fakeView(s) {
  return {
    ...sandboxDto(s),
    _fake: {
      hostRoot: s._.root,
      transitionPending: s._.timer !== null,
      processes: s._.exec.procs.size,
      sessions: [...s._.sessions.values()].map((sess) => ({
        sessionId: sess.sessionId,
        cwd: sess.cwd,
        commands: [...sess.commands.values()].map((c) => ({ ...commandView(c), running: !c.done })),
      })),
    },
  };
}

async function aState(ctx) {
  reply(ctx, 200, {
    sandboxes: [...STATE.sandboxes.values()].map(fakeView),
    destroyed: STATE.destroyed,
    faults: FAULTS.list(),
    config: CONFIG,
    execMode: OPTS.execMode,
    socketIoClients: STATE.ioConns.size,
  });
}

// GET/DELETE /__fake/requests and POST/GET/DELETE /__fake/faults.
const ADMIN_LOG = logAndFaultHandlers({ log: LOG, faults: FAULTS, reply, readJson });

async function aGetConfig(ctx) {
  reply(ctx, 200, CONFIG);
}

async function aSetConfig(ctx) {
  const b = await readJson(ctx);
  if (!isObj(b)) throw new HttpError(400, 'body must be an object');
  for (const k of ['transitionMs', 'execLimitMs', 'createBlockMs', 'minuteMs', 'delayMs']) {
    if (b[k] !== undefined) {
      if (!Number.isInteger(b[k]) || b[k] < 0) throw new HttpError(400, `${k} must be a non-negative integer`);
      CONFIG[k] = b[k];
    }
  }
  if (b.stateDelayMs !== undefined) {
    if (!isObj(b.stateDelayMs)) throw new HttpError(400, 'stateDelayMs must be an object');
    CONFIG.stateDelayMs = b.stateDelayMs;
  }
  reply(ctx, 200, CONFIG);
}

async function aReset(ctx) {
  resetAll();
  reply(ctx, 204, null);
}

function resetAll() {
  for (const s of [...STATE.sandboxes.values()]) {
    clearTimeout(s._.timer);
    killSandboxProcesses(s);
    fs.rmSync(s._.dir, { recursive: true, force: true });
  }
  STATE.sandboxes.clear();
  STATE.destroyed = [];
  FAULTS.clear();
  LOG.clear();
  Object.assign(CONFIG, freshConfig());
  CONFIG.stateDelayMs = {};
  persist();
}

// Forces a state, as something outside the API would (auto-stop, a runner failure): cancels any
// running transition and emits the event. {state, desiredState?, errorReason?}
async function aForceState(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  const b = await readJson(ctx);
  if (!isObj(b) || typeof b.state !== 'string') throw new HttpError(400, 'state is required');
  clearTimeout(s._.timer);
  s._.timer = null;
  if (b.errorReason !== undefined) s.errorReason = b.errorReason;
  s.desiredState = b.desiredState || (STABLE_STATES.has(b.state) ? b.state : s.desiredState);
  if (['stopped', 'archived', 'error', 'build_failed'].includes(b.state)) killSandboxProcesses(s);
  setState(s, b.state);
  persist();
  reply(ctx, 200, fakeView(s));
}

// Sends again, unchanged, the latest earlier state event of a sandbox whose newState is
// {newState}: an event delivered late, after the sandbox has moved on (a "started" from before
// a stop arriving while a new start is under way).  404 when no such event was sent.
async function aReplayEvent(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  const b = await readJson(ctx);
  if (!isObj(b) || typeof b.newState !== 'string') throw new HttpError(400, 'newState is required');
  const ev = s._.events.findLast((e) => e.newState === b.newState);
  if (!ev) throw new HttpError(404, `no ${b.newState} event was sent for ${s.id}`);
  emitEvent('sandbox.state.updated', ev);
  reply(ctx, 200, ev);
}

// Makes a sandbox vanish at once (deleted from the dashboard, lost by the provider).
async function aVanish(ctx) {
  const s = mustFindSandbox(ctx.params.idOrName);
  removeSandbox(s, true);
  reply(ctx, 204, null);
}

// Floods every event-stream client with `count` sandbox.state.updated events, each for a
// sandbox id of its own and carrying `bytes` of padding, as a busy organization's stream (or a
// hostile one) would: {count, bytes}.  The events name no sandbox the fake has.
async function aFloodEvents(ctx) {
  const b = await readJson(ctx);
  if (!isObj(b) || !Number.isInteger(b.count) || !Number.isInteger(b.bytes) || b.count < 0 || b.bytes < 0) {
    throw new HttpError(400, 'body must be {"count": N, "bytes": N}');
  }
  const pad = 'x'.repeat(b.bytes);
  for (let i = 0; i < b.count; i++) {
    const id = crypto.randomUUID();
    emitEvent('sandbox.state.updated', {
      sandbox: { id, name: `flood-${id}`, state: 'started', desiredState: 'started', labels: { pad } },
      oldState: 'starting',
      newState: 'started',
    });
  }
  reply(ctx, 200, { sent: b.count, clients: STATE.ioConns.size });
}

async function aHealth(ctx) {
  reply(ctx, 200, { ok: true, port: STATE.port });
}

// ---------------------------------------------------------------------------------------------
// Router table
// ---------------------------------------------------------------------------------------------

// area decides auth, error body shape and logging; toolbox routes are relative to
// /toolbox/<sandboxId> and run only when that sandbox exists and is started.
const ROUTES = [
  // control plane
  ['control', 'POST', '/api/sandbox', 'createSandbox', hCreateSandbox],
  ['control', 'GET', '/api/sandbox', 'listSandboxes', hListSandboxes],
  ['control', 'GET', '/api/sandbox/:idOrName', 'getSandbox', hGetSandbox],
  ['control', 'DELETE', '/api/sandbox/:idOrName', 'deleteSandbox', hDeleteSandbox],
  ['control', 'POST', '/api/sandbox/:idOrName/start', 'startSandbox', hStartSandbox],
  ['control', 'POST', '/api/sandbox/:idOrName/stop', 'stopSandbox', hStopSandbox],
  ['control', 'POST', '/api/sandbox/:idOrName/archive', 'archiveSandbox', hArchiveSandbox],
  ['control', 'POST', '/api/sandbox/:idOrName/autostop/:interval', 'setAutostop', intervalHandler('autoStopInterval')],
  ['control', 'POST', '/api/sandbox/:idOrName/autoarchive/:interval', 'setAutoarchive', intervalHandler('autoArchiveInterval')],
  ['control', 'POST', '/api/sandbox/:idOrName/autodelete/:interval', 'setAutodelete', intervalHandler('autoDeleteInterval')],
  ['control', 'PUT', '/api/sandbox/:idOrName/labels', 'replaceLabels', hReplaceLabels],
  ['control', 'POST', '/api/sandbox/:idOrName/network-settings', 'networkSettings', hNetworkSettings],
  ['control', 'POST', '/api/sandbox/:idOrName/last-activity', 'lastActivity', hLastActivity],
  ['control', 'GET', '/api/sandbox/:idOrName/toolbox-proxy-url', 'toolboxProxyUrl', hToolboxProxyUrl],
  // toolbox
  ['toolbox', 'POST', '/process/execute', 'execute', hExecute],
  ['toolbox', 'POST', '/process/session', 'createSession', hCreateSession],
  ['toolbox', 'GET', '/process/session', 'listSessions', hListSessions],
  ['toolbox', 'GET', '/process/session/:sessionId', 'getSession', hGetSession],
  ['toolbox', 'DELETE', '/process/session/:sessionId', 'deleteSession', hDeleteSession],
  ['toolbox', 'POST', '/process/session/:sessionId/exec', 'sessionExec', hSessionExec],
  ['toolbox', 'GET', '/process/session/:sessionId/command/:cmdId', 'getSessionCommand', hGetSessionCommand],
  ['toolbox', 'GET', '/process/session/:sessionId/command/:cmdId/logs', 'getSessionCommandLogs', hGetSessionCommandLogs],
  ['toolbox', 'POST', '/process/session/:sessionId/command/:cmdId/input', 'sessionCommandInput', hSessionCommandInput],
  ['toolbox', 'GET', '/files', 'listFiles', hListFiles],
  ['toolbox', 'DELETE', '/files', 'deleteFile', hDeleteFile],
  ['toolbox', 'GET', '/files/info', 'fileInfo', hFileInfo],
  ['toolbox', 'GET', '/files/download', 'downloadFile', hDownloadFile],
  ['toolbox', 'POST', '/files/upload', 'uploadFile', hUploadFile],
  ['toolbox', 'POST', '/files/bulk-upload', 'bulkUpload', hBulkUpload],
  ['toolbox', 'POST', '/files/bulk-download', 'bulkDownload', hBulkDownload],
  ['toolbox', 'POST', '/files/folder', 'createFolder', hCreateFolder],
  ['toolbox', 'POST', '/files/move', 'moveFile', hMoveFile],
  ['toolbox', 'POST', '/files/permissions', 'setPermissions', hSetPermissions],
  ['toolbox', 'GET', '/user-home-dir', 'userHomeDir', hUserHomeDir],
  ['toolbox', 'GET', '/work-dir', 'workDir', hWorkDir],
  ['toolbox', 'GET', '/version', 'version', hVersion],
  // admin
  ['admin', 'GET', '/__fake/health', 'health', aHealth],
  ['admin', 'GET', '/__fake/state', 'state', aState],
  ['admin', 'GET', '/__fake/requests', 'requests', ADMIN_LOG.requests],
  ['admin', 'DELETE', '/__fake/requests', 'clearRequests', ADMIN_LOG.clearRequests],
  ['admin', 'POST', '/__fake/faults', 'addFaults', ADMIN_LOG.addFaults],
  ['admin', 'GET', '/__fake/faults', 'listFaults', ADMIN_LOG.listFaults],
  ['admin', 'DELETE', '/__fake/faults', 'clearFaults', ADMIN_LOG.clearFaults],
  ['admin', 'GET', '/__fake/config', 'getConfig', aGetConfig],
  ['admin', 'POST', '/__fake/config', 'setConfig', aSetConfig],
  ['admin', 'POST', '/__fake/reset', 'reset', aReset],
  ['admin', 'POST', '/__fake/sandboxes/:idOrName/state', 'forceState', aForceState],
  ['admin', 'DELETE', '/__fake/sandboxes/:idOrName', 'vanish', aVanish],
  ['admin', 'POST', '/__fake/sandboxes/:idOrName/replay', 'replayEvent', aReplayEvent],
  ['admin', 'POST', '/__fake/events/flood', 'floodEvents', aFloodEvents],
].map(([area, method, pattern, name, handler]) => ({
  area,
  method,
  name,
  handler,
  re: new RegExp('^' + pattern.replace(/:(\w+)/g, (_, p) => `(?<${p}>[^/]+)`) + '$'),
}));

function matchRoute(area, method, p) {
  for (const r of ROUTES) {
    if (r.area !== area || r.method !== method) continue;
    const m = r.re.exec(p);
    if (!m) continue;
    const params = {};
    for (const [k, v] of Object.entries(m.groups || {})) params[k] = decodeURIComponent(v);
    return { route: r, params };
  }
  return { route: null };
}

// Splits /toolbox/<id>/<rest> into the sandbox id and the daemon path.
function splitToolboxPath(pathname) {
  const m = /^\/toolbox\/([^/]+)(\/.*)?$/.exec(pathname);
  if (!m) return null;
  return { sandboxId: decodeURIComponent(m[1]), sub: m[2] || '/' };
}

function areaOf(pathname) {
  if (pathname.startsWith('/__fake/')) return 'admin';
  if (pathname.startsWith(TOOLBOX_PREFIX + '/')) return 'toolbox';
  return 'control';
}

// ---------------------------------------------------------------------------------------------
// Request pipeline
// ---------------------------------------------------------------------------------------------

async function handleRequest(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  const ctx = {
    req,
    res,
    url,
    start: Date.now(),
    startNs: process.hrtime.bigint(),
    area: areaOf(url.pathname),
    auth: authStatus(req),
    extraHeaders: {},
    params: {},
    replied: false,
  };
  res.on('close', () => {
    if (ctx.area !== 'admin') logRequest(ctx);
  });
  try {
    if (ctx.area === 'admin') {
      const { route, params } = matchRoute('admin', req.method, url.pathname);
      if (!route) throw new HttpError(404, `no admin route ${req.method} ${url.pathname}`);
      ctx.params = params;
      await route.handler(ctx);
      return;
    }
    if (CONFIG.delayMs) await sleep(CONFIG.delayMs);
    const fault = FAULTS.take(req.method, url.pathname);
    if (fault && (await applyFaultBefore(ctx, fault))) return;
    if (ctx.area === 'control') await handleControl(ctx);
    else await handleToolbox(ctx);
  } catch (e) {
    if (e instanceof HttpError) {
      replyError(ctx, e.status, e.message, e.extra);
    } else {
      process.stderr.write(`fake-daytona: internal error on ${req.method} ${url.pathname}: ${e.stack}\n`);
      replyError(ctx, 500, `internal error: ${e.message}`);
    }
  }
}

async function handleControl(ctx) {
  const t = throttlerOf(ctx.req.method, ctx.url.pathname);
  ctx.extraHeaders = {
    [`X-RateLimit-Limit-${t}`]: '10000',
    [`X-RateLimit-Remaining-${t}`]: '9999',
    [`X-RateLimit-Reset-${t}`]: '60',
  };
  if (ctx.auth !== 'ok') throw new HttpError(401, 'Unauthorized');
  const { route, params } = matchRoute('control', ctx.req.method, ctx.url.pathname);
  // NestJS answers an unknown method+path with 404 "Cannot <METHOD> <path>".
  if (!route) throw new HttpError(404, `Cannot ${ctx.req.method} ${ctx.url.pathname}`);
  ctx.route = route.name;
  ctx.params = params;
  await route.handler(ctx);
}

async function handleToolbox(ctx) {
  const parts = splitToolboxPath(ctx.url.pathname);
  if (!parts) throw new HttpError(400, 'path must be of format /toolbox/<sandboxId>/<path>');
  ctx.toolboxPath = parts.sub;
  ctx.sandboxId = parts.sandboxId;
  if (ctx.auth !== 'ok') throw new HttpError(401, 'unauthorized');
  const s = STATE.sandboxes.get(parts.sandboxId);
  if (!s) throw new HttpError(404, `sandbox ${parts.sandboxId} not found`);
  const { route, params } = matchRoute('toolbox', ctx.req.method, parts.sub);
  if (!route) throw new HttpError(404, `${ctx.req.method} ${parts.sub} not found`);
  ctx.route = route.name;
  ctx.params = params;
  if (s.state !== 'started') {
    throw new HttpError(400, `bad request: sandbox ${s.id} is not started (state: ${s.state})`);
  }
  if (String(ctx.req.headers['x-daytona-skip-last-activity-update']).toLowerCase() !== 'true') {
    s.lastActivityAt = nowIso();
  }
  ctx.sandbox = s;
  await route.handler(ctx);
}

// WebSocket upgrades: the Socket.IO event gateway and the session-log follow stream.
async function handleUpgrade(req, socket) {
  const url = new URL(req.url, 'http://127.0.0.1');
  const ctx = {
    req,
    url,
    start: Date.now(),
    startNs: process.hrtime.bigint(),
    area: 'ws',
    auth: authStatus(req),
    status: 101,
  };
  socket.on('error', () => {});
  const refuse = (status, body) => {
    ctx.status = status;
    const b = Buffer.from(JSON.stringify(body));
    socket.end(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${b.length}\r\nConnection: close\r\n\r\n${b}`,
    );
    logRequest(ctx);
  };
  const fault = FAULTS.take(req.method, url.pathname);
  if (fault) {
    ctx.faultApplied = { id: fault.id, action: fault.action, status: fault.status };
    if (fault.delayMs) await sleep(fault.delayMs);
    if (fault.action === 'drop') {
      ctx.status = 0;
      socket.destroy();
      logRequest(ctx);
      return;
    }
    if (fault.action === 'status') {
      refuse(fault.status, { statusCode: fault.status, message: 'injected fault' });
      return;
    }
  }
  if (url.pathname === SOCKET_IO_PATH || url.pathname === SOCKET_IO_PATH.slice(0, -1)) {
    ctx.route = 'socketIo';
    if (url.searchParams.get('EIO') !== '4' || url.searchParams.get('transport') !== 'websocket') {
      refuse(400, { code: 0, message: 'Transport unknown' });
      return;
    }
    const ws = WsConn.accept(req, socket);
    logRequest(ctx);
    if (ws) socketIoSession(ws);
    return;
  }
  const parts = splitToolboxPath(url.pathname);
  const m = parts && /^\/process\/session\/([^/]+)\/command\/([^/]+)\/logs$/.exec(parts.sub);
  if (!m) {
    refuse(404, { statusCode: 404, message: 'no WebSocket endpoint here', code: 'NOT_FOUND' });
    return;
  }
  ctx.route = 'followSessionCommandLogs';
  ctx.sandboxId = parts.sandboxId;
  if (ctx.auth !== 'ok') {
    refuse(401, { statusCode: 401, message: 'unauthorized', code: 'UNAUTHORIZED' });
    return;
  }
  const s = STATE.sandboxes.get(parts.sandboxId);
  if (!s) return refuse(404, { statusCode: 404, message: 'sandbox not found', code: 'NOT_FOUND' });
  if (s.state !== 'started') {
    return refuse(400, { statusCode: 400, message: `bad request: sandbox is not started (state: ${s.state})`, code: 'BAD_REQUEST' });
  }
  const sess = s._.sessions.get(decodeURIComponent(m[1]));
  const cmd = sess && sess.commands.get(decodeURIComponent(m[2]));
  if (!cmd) return refuse(404, { statusCode: 404, message: 'command not found', code: 'NOT_FOUND' });
  const ws = WsConn.accept(req, socket);
  logRequest(ctx);
  if (ws) followCommandLogs(ws, cmd);
}

// Engine.IO v4 over WebSocket only, default namespace: open packet, CONNECT with {token},
// server pings, and `42["event",payload]` messages.
function socketIoSession(ws) {
  const conn = { ws, sid: crypto.randomBytes(10).toString('base64url') };
  ws.send('0' + JSON.stringify({ sid: conn.sid, upgrades: [], pingInterval: 25000, pingTimeout: 20000, maxPayload: 1000000 }));
  const ping = setInterval(() => ws.send('2'), 25000);
  ping.unref();
  ws.onmessage = (data) => {
    const msg = data.toString('utf8');
    if (msg.startsWith('40')) {
      let auth = {};
      try {
        auth = msg.length > 2 ? JSON.parse(msg.slice(2)) : {};
      } catch {
        auth = {};
      }
      if (auth && auth.token === OPTS.apiKey) {
        STATE.ioConns.add(conn);
        ws.send('40' + JSON.stringify({ sid: crypto.randomBytes(10).toString('base64url') }));
      } else {
        ws.send('44' + JSON.stringify({ message: 'Unauthorized' }));
      }
    } else if (msg.startsWith('41')) {
      STATE.ioConns.delete(conn);
    } else if (msg === '1') {
      ws.close(1000);
    }
  };
  ws.onclose = () => {
    clearInterval(ping);
    STATE.ioConns.delete(conn);
  };
}

// ---------------------------------------------------------------------------------------------
// Lifecycle timers (--minute-ms): auto-stop after inactivity, auto-delete after stop
// ---------------------------------------------------------------------------------------------

function lifecycleSweep() {
  const minute = CONFIG.minuteMs;
  if (!minute) return;
  const now = Date.now();
  for (const s of [...STATE.sandboxes.values()]) {
    if (inTransition(s)) continue;
    if (s.state === 'started' && s.autoStopInterval > 0 && now - Date.parse(s.lastActivityAt) > s.autoStopInterval * minute) {
      runTransition(s, 'stopped', ['stopping', 'stopped']);
    } else if (s.state === 'stopped' && s.autoDeleteInterval > 0 && s._.stoppedAt && now - s._.stoppedAt > s.autoDeleteInterval * minute) {
      beginDestroy(s);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Start and stop
// ---------------------------------------------------------------------------------------------

function main() {
  const base = sandboxBaseDir({ execMode: OPTS.execMode, stateDir: OPTS.stateDir, prefix: 'fake-daytona-', fail });
  STATE.baseDir = base.dir;
  STATE.ownsBaseDir = base.owned;
  fs.mkdirSync(path.join(STATE.baseDir, 'sandboxes'), { recursive: true });
  serve({
    name: 'fake-daytona',
    port: OPTS.port,
    stdinWatch: OPTS.stdinWatch,
    handler: handleRequest,
    onUpgrade: handleUpgrade,
    onListening: (port) => {
      STATE.port = port;
      if (OPTS.stateDir) loadState();
      setInterval(lifecycleSweep, 250).unref();
    },
    onShutdown: () => {
      for (const s of STATE.sandboxes.values()) killSandboxProcesses(s);
      killAllChildren();
      for (const s of STATE.sandboxes.values()) clearTimeout(s._.timer);
      for (const c of STATE.ioConns) c.ws.socket.destroy();
      if (STATE.ownsBaseDir) fs.rmSync(STATE.baseDir, { recursive: true, force: true });
    },
  });
}

main();
