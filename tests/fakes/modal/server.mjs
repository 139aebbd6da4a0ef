#!/usr/bin/env node
// Fake Modal: the control plane (gRPC service modal.client.ModalClient) and the per-sandbox
// command router (modal.task_command_router.TaskCommandRouter) on one cleartext HTTP/2 (h2c)
// server on 127.0.0.1, plus a small HTTP/1.1 admin server for tests (faults, state, the log).
//
// gRPC is spoken on a bare node:http2 server (not a gRPC library) so that faults a library would
// never make can be made on purpose: trailers-only errors, GOAWAY, streams cut inside a message.
// Messages are encoded with protobufjs from sandgate's own trimmed protos (modal/*.proto), whose
// names and field numbers are Modal's; run-sdk-check.sh proves the fake against the official
// JavaScript SDK (npm "modal", pinned in package.json), which has its own generated codecs.
// README.md lists every RPC, option and admin endpoint, and where the fake is simpler than Modal.

import http2 from 'node:http2';
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { SandboxProcs, allChildren, killAllChildren, killTree } from '../lib/sandbox-exec.mjs';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const USAGE = `usage: node server.mjs [--port N] [--admin-port N] [--token-id ID] [--token-secret S]
       [--state-dir DIR] [--exec-mode tmpdir|bwrap] [--ready-ms N] [--build-ms N] [--delay-ms N]
       [--list-page N] [--request-log FILE] [--no-stdin-watch] [--snapshot-ttl-optional]
       [--log-requests]`;

function fail(msg) {
  process.stderr.write(`fake-modal: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = {
    port: 0, adminPort: 0, tokenId: 'ak-test', tokenSecret: 'as-test', stateDir: null,
    execMode: 'tmpdir', readyMs: 0, buildMs: 0, delayMs: 0, listPage: 100, requestLog: null,
    stdinWatch: true, authTtlS: 3600, routerTtlS: 3600, snapshotTtlOptional: false,
    logRequests: false, imageIdPad: 0,
  };
  const num = (name, v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) fail(`${name} needs a non-negative integer, got ${v}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--port': o.port = num(a, next()); break;
      case '--admin-port': o.adminPort = num(a, next()); break;
      case '--token-id': o.tokenId = next(); break;
      case '--token-secret': o.tokenSecret = next(); break;
      case '--state-dir': o.stateDir = path.resolve(next()); break;
      case '--exec-mode': o.execMode = next(); break;
      case '--ready-ms': o.readyMs = num(a, next()); break;
      case '--build-ms': o.buildMs = num(a, next()); break;
      case '--delay-ms': o.delayMs = num(a, next()); break;
      case '--list-page': o.listPage = Math.max(1, num(a, next())); break;
      case '--request-log': o.requestLog = path.resolve(next()); break;
      case '--no-stdin-watch': o.stdinWatch = false; break;
      case '--snapshot-ttl-optional': o.snapshotTtlOptional = true; break;
      case '--log-requests': o.logRequests = true; break;
      case '-h': case '--help': process.stdout.write(USAGE + '\n'); process.exit(0); break;
      default: fail(`unknown argument ${a}\n${USAGE}`);
    }
  }
  if (o.execMode !== 'tmpdir' && o.execMode !== 'bwrap') fail('--exec-mode must be tmpdir or bwrap');
  return o;
}

const OPTS = parseArgs(process.argv.slice(2));
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PROTO_DIR = path.resolve(HERE, '../../../modal');

// ---------------------------------------------------------------------------------------------
// Protos
// ---------------------------------------------------------------------------------------------

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => path.join(PROTO_DIR, path.basename(target));
root.loadSync(['modal.proto', 'router.proto']);
const SERVICES = {
  '/modal.client.ModalClient/': { server: 'control', svc: root.lookupService('modal.client.ModalClient') },
  '/modal.task_command_router.TaskCommandRouter/': {
    server: 'router', svc: root.lookupService('modal.task_command_router.TaskCommandRouter'),
  },
};
const TO_OBJECT = { longs: Number, enums: Number, defaults: false, oneofs: false };

// gRPC status codes.
const S = {
  OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5,
  ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9,
  OUT_OF_RANGE: 11, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14, UNAUTHENTICATED: 16,
};
class GrpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}
const GENERIC = { UNSPECIFIED: 0, SUCCESS: 1, FAILURE: 2, TERMINATED: 3, TIMEOUT: 4, IDLE_TIMEOUT: 7 };
const NET = { OPEN: 1, BLOCKED: 2, ALLOWLIST: 3 };
const FS_TOOLS = '/__modal/.bin/modal-sandbox-fs-tools';
const MAX_TIMEOUT_SECS = 24 * 3600;
const MAX_ARGS_BYTES = 64 * 1024;
const MAX_OUTPUT = 64 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------

const STATE_DIR = OPTS.stateDir || fs.mkdtempSync(path.join(os.tmpdir(), 'fake-modal-'));
const OWN_STATE_DIR = !OPTS.stateDir;
fs.mkdirSync(path.join(STATE_DIR, 'sandboxes'), { recursive: true });
fs.mkdirSync(path.join(STATE_DIR, 'images'), { recursive: true });
const JWT_KEY = crypto.randomBytes(32);
const T0 = Date.now();

const STATE = {
  apps: new Map(),        // `${env}/${name}` -> {id, name, env}
  images: new Map(),      // id -> {id, key, dir (snapshot contents) | null, built: bool, fromSnapshot}
  imageKeys: new Map(),   // dockerfile key -> image id
  secrets: new Map(),     // id -> {env}
  sandboxes: new Map(),   // id -> sandbox
  tasks: new Map(),       // task id -> sandbox
  faults: [],             // [{method, kind, code, message, times, delayMs}]
  log: [],
  seq: 0,
  children: new Set(),
  calls: { control: 0, router: 0 },
};

const b62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
function newId(prefix) {
  const b = crypto.randomBytes(22);
  let s = '';
  for (const x of b) s += b62[x % 62];
  return `${prefix}-${s}`;
}

function b64url(buf) {
  return Buffer.from(buf).toString('base64url');
}
function makeJwt(claims, ttlSecs = 3600) {
  const now = Math.floor(Date.now() / 1000);
  const h = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const p = b64url(JSON.stringify({ iat: now, exp: now + ttlSecs, ...claims }));
  const sig = b64url(crypto.createHmac('sha256', JWT_KEY).update(`${h}.${p}`).digest());
  return `${h}.${p}.${sig}`;
}
function checkJwt(token) {
  const parts = String(token || '').split('.');
  if (parts.length !== 3) return null;
  const sig = b64url(crypto.createHmac('sha256', JWT_KEY).update(`${parts[0]}.${parts[1]}`).digest());
  if (sig !== parts[2]) return null;
  let claims;
  try {
    claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof claims.exp !== 'number' || claims.exp * 1000 < Date.now()) return null;
  return claims;
}

// ---------------------------------------------------------------------------------------------
// Request log and faults
// ---------------------------------------------------------------------------------------------

const SECRET_HEADERS = new Set(['x-modal-token-id', 'x-modal-token-secret', 'x-modal-auth-token', 'authorization']);

function logCall(entry) {
  STATE.log.push(entry);
  if (STATE.log.length > 20000) STATE.log.shift();
  if (OPTS.requestLog) fs.appendFileSync(OPTS.requestLog, JSON.stringify(entry) + '\n');
}

// --log-requests: the call's first request messages as decoded (bytes as their length, long
// strings cut), so that what a client sends can be compared with what the SDK sends.
const LOG_REQUESTS_MAX = 4;
function logRequest(call, obj) {
  call.requests ??= [];
  if (call.requests.length >= LOG_REQUESTS_MAX) return;
  call.requests.push(JSON.parse(JSON.stringify(obj, (_k, v) => {
    if (v && v.type === 'Buffer' && Array.isArray(v.data)) return `<${v.data.length} bytes>`;
    if (typeof v === 'string' && v.length > 200) return `${v.slice(0, 200)}…(${v.length})`;
    return v;
  })));
}

// The first queued fault that matches method (times counts down; 0 removes it).
function takeFault(method) {
  const i = STATE.faults.findIndex((f) => f.method === method || f.method === '*');
  if (i < 0) return null;
  const f = STATE.faults[i];
  if (--f.times <= 0) STATE.faults.splice(i, 1);
  return f;
}

// ---------------------------------------------------------------------------------------------
// gRPC over node:http2
// ---------------------------------------------------------------------------------------------

function frame(buf) {
  const p = Buffer.alloc(5);
  p.writeUInt32BE(buf.length, 1);
  return Buffer.concat([p, buf]);
}

// Splits a growing buffer into messages; returns [messages, rest].
function deframe(buf) {
  const out = [];
  let off = 0;
  while (buf.length - off >= 5) {
    if (buf[off] !== 0) throw new GrpcError(S.INTERNAL, 'compressed messages are not accepted');
    const len = buf.readUInt32BE(off + 1);
    if (buf.length - off - 5 < len) break;
    out.push(buf.subarray(off + 5, off + 5 + len));
    off += 5 + len;
  }
  return [out, buf.subarray(off)];
}

function grpcMessage(s) {
  return encodeURIComponent(s).replace(/%20/g, ' ');
}

// One call: decoded request(s) in, response message(s) out through ctx.
class Call {
  constructor(stream, headers, server, method, md) {
    this.stream = stream;
    this.headers = headers;
    this.server = server;
    this.method = method;
    this.md = md;
    this.started = false;
    this.closed = false;
    this.messagesOut = 0;
    this.bytesIn = 0;
    this.bytesOut = 0;
    this.t0 = process.hrtime.bigint();
    this.cancelled = false;
    this.onCancel = [];
    stream.on('close', () => {
      if (!this.closed) {
        this.cancelled = true;
        this.closed = true;
        for (const f of this.onCancel) f();
        this.finishLog('cancelled');
      }
      // Ended: the reply's last frame is out (servedOnceWritten), or the
      // client left first.
      if (this.status !== undefined) this.finishLog(this.status);
    });
  }
  header(name) {
    const v = this.headers[name];
    return Array.isArray(v) ? v[0] : v;
  }
  send(obj) {
    if (this.closed) return;
    if (!this.started) {
      this.stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      this.started = true;
    }
    const type = this.md.resolvedResponseType;
    const bytes = type.encode(type.fromObject(obj)).finish();
    const f = frame(Buffer.from(bytes));
    this.bytesOut += f.length;
    this.messagesOut++;
    this.stream.write(f);
  }
  end(code = S.OK, message = '') {
    if (this.closed) return;
    this.closed = true;
    this.status = code;
    if (!this.started) {
      // Trailers-only: the status travels in the one HEADERS frame.
      this.stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code),
        'grpc-message': grpcMessage(message) }, { endStream: true });
    } else {
      this.stream.once('wantTrailers', () => {
        this.stream.sendTrailers({ 'grpc-status': String(code), 'grpc-message': grpcMessage(message) });
        this.servedOnceWritten(code);
      });
      this.stream.end();
      return;
    }
    this.servedOnceWritten(code);
  }
  // The call is served when its last frame (the trailers, or the one
  // HEADERS frame of a trailers-only reply) has gone out, not when it is
  // queued: Node writes it a turn of the event loop later, and its
  // stream closes once it has.  So the clock stops at 'close' (the
  // handler in the constructor logs the call there), and the log's own
  // work (JSON, the request log file) is done after the frame is on the
  // socket instead of delaying every client's reply outside the window.
  servedOnceWritten(code) {
    if (this.stream.closed || this.stream.destroyed) this.finishLog(code);
  }
  finishLog(status) {
    if (this.logged) return;
    this.logged = true;
    const ms = Number(process.hrtime.bigint() - this.t0) / 1e6;
    const meta = {};
    for (const [k, v] of Object.entries(this.headers)) {
      if (k.startsWith(':')) continue;
      meta[k] = SECRET_HEADERS.has(k) ? '<redacted>' : v;
    }
    logCall({ seq: ++STATE.seq, t_ms: Date.now() - T0, server: this.server, method: this.method, status,
      serving_ms: Math.round(ms * 1000) / 1000, bytes_in: this.bytesIn, bytes_out: this.bytesOut,
      messages_out: this.messagesOut, metadata: meta, note: this.note,
      ...(OPTS.logRequests ? { requests: this.requests ?? [] } : {}) });
  }
}

async function handleStream(stream, headers) {
  stream.on('error', () => {});
  const p = String(headers[':path'] || '');
  const slash = p.lastIndexOf('/');
  const entry = SERVICES[p.slice(0, slash + 1)];
  const method = p.slice(slash + 1);
  const md = entry && entry.svc.methods[method];
  if (!md) {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(S.UNIMPLEMENTED),
      'grpc-message': grpcMessage(`unknown method ${p}`) }, { endStream: true });
    return;
  }
  md.resolve();
  const call = new Call(stream, headers, entry.server, method, md);
  STATE.calls[entry.server]++;
  const handler = (entry.server === 'control' ? CONTROL : ROUTER)[method];

  // Chunks are joined only once a whole message is there: a large
  // message (a 15 MiB stdin write) arrives in thousands of DATA frames.
  let buf = Buffer.alloc(0);
  const pending = [];
  let pendingLen = 0;
  const queue = [];
  let ended = false;
  let wake = null;
  stream.on('data', (d) => {
    call.bytesIn += d.length;
    pending.push(d);
    pendingLen += d.length;
    if (buf.length + pendingLen < 5) return;
    const head = buf.length >= 5 ? buf : Buffer.concat([buf, ...pending]);
    if (head.length >= 5 && buf.length + pendingLen < 5 + head.readUInt32BE(1)) return;
    buf = Buffer.concat([buf, ...pending]);
    pending.length = 0;
    pendingLen = 0;
    try {
      const [msgs, rest] = deframe(buf);
      buf = rest;
      for (const m of msgs) queue.push(md.resolvedRequestType.decode(m));
    } catch (e) {
      call.end(e.code ?? S.INTERNAL, e.message);
    }
    if (wake) wake();
  });
  stream.on('end', () => {
    ended = true;
    if (wake) wake();
  });
  const nextMessage = async () => {
    for (;;) {
      if (queue.length) {
        const obj = md.resolvedRequestType.toObject(queue.shift(), TO_OBJECT);
        if (OPTS.logRequests) logRequest(call, obj);
        return obj;
      }
      if (ended || call.closed) return null;
      await new Promise((r) => (wake = r));
      wake = null;
    }
  };

  try {
    authenticate(call, entry.server);
    const fault = takeFault(method);
    const delay = (fault && fault.kind === 'delay' ? fault.delayMs : 0) + OPTS.delayMs;
    if (delay > 0) await sleep(delay);
    if (fault && (await applyFault(call, fault))) return;
    if (!handler) throw new GrpcError(S.UNIMPLEMENTED, `${method} is not implemented by the fake`);
    // The call is carried out, but its answer never reaches the client.
    const lost = fault && (fault.kind === 'lose-reply' || fault.kind === 'serve-then-hang');
    // The call is carried out, and its answer is hostile (garbleReply).
    const garbled = fault && (fault.kind === 'serve-then-huge' || fault.kind === 'serve-then-garbage');
    if (lost || garbled) call.send = () => {};
    if (md.requestStream) {
      await handler(call, nextMessage);
    } else {
      const req = await nextMessage();
      if (call.closed) return;
      if (req === null) throw new GrpcError(S.INTERNAL, 'no request message');
      await handler(call, req);
    }
    if (garbled) {
      await garbleReply(call, fault.kind);
      return;
    }
    if (lost && fault.kind === 'serve-then-hang') {
      await new Promise((r) => call.onCancel.push(r));
      return;
    }
    if (lost) {
      call.end(fault.code ?? S.UNAVAILABLE, fault.message ?? 'injected fault: the reply was lost');
      return;
    }
    if (!call.closed) call.end(S.OK);
  } catch (e) {
    if (e instanceof GrpcError) call.end(e.code, e.message);
    else {
      process.stderr.write(`fake-modal: ${method}: ${e.stack || e}\n`);
      call.end(S.INTERNAL, String(e.message || e));
    }
  }
}

// A hostile answer to a call that was carried out: serve-then-huge sends a
// message prefix announcing 4 GiB - 1 bytes and 16 of them, then nothing
// until the client leaves (a client must refuse the size, not wait for
// it); serve-then-garbage sends a message that is no protobuf (a field of
// wire type 7) and status OK.
async function garbleReply(call, kind) {
  if (call.closed) return;
  call.stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  call.started = true;
  if (kind === 'serve-then-huge') {
    const p = Buffer.alloc(5);
    p.writeUInt32BE(0xffffffff, 1);
    call.stream.write(Buffer.concat([p, Buffer.alloc(16)]));
    await new Promise((r) => call.onCancel.push(r));
    return;
  }
  const bad = frame(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]));
  call.bytesOut += bad.length;
  call.messagesOut++;
  call.stream.write(bad);
  call.end(S.OK);
}

// Returns true when the fault answered the call.
async function applyFault(call, f) {
  call.note = `fault:${f.kind}`;
  switch (f.kind) {
    case 'status':
      call.end(f.code ?? S.UNAVAILABLE, f.message ?? 'injected fault');
      return true;
    case 'status-after-headers':
      // A status in real trailers, after (empty) response headers.
      call.stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      call.started = true;
      call.end(f.code ?? S.UNAVAILABLE, f.message ?? 'injected fault');
      return true;
    case 'goaway':
      call.closed = true;
      call.stream.session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0);
      setTimeout(() => call.stream.session.destroy(), 20);
      call.finishLog('goaway');
      return true;
    case 'cut': {
      call.closed = true;
      call.stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      const p = Buffer.alloc(5);
      p.writeUInt32BE(1000, 1);
      call.stream.write(Buffer.concat([p, Buffer.alloc(10)]));
      setTimeout(() => call.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR), 20);
      call.finishLog('cut');
      return true;
    }
    case 'hang':
      // Never answer; the client's deadline or cancel ends it.
      call.note = 'fault:hang';
      await new Promise((r) => call.onCancel.push(r));
      return true;
    case 'delay':
      return false;
    default:
      return false;
  }
}

function authenticate(call, server) {
  if (server === 'router') {
    const auth = call.header('authorization') || '';
    const claims = auth.startsWith('Bearer ') ? checkJwt(auth.slice(7)) : null;
    if (!claims || !claims.task_id) throw new GrpcError(S.UNAUTHENTICATED, 'a valid router token is required');
    call.routerTask = claims.task_id;
    return;
  }
  if (call.header('x-modal-token-id') !== OPTS.tokenId || call.header('x-modal-token-secret') !== OPTS.tokenSecret) {
    throw new GrpcError(S.UNAUTHENTICATED, 'token id or secret not recognised');
  }
  if (call.method === 'AuthTokenGet') return;
  const claims = checkJwt(call.header('x-modal-auth-token'));
  if (!claims || claims.sub !== OPTS.tokenId) {
    throw new GrpcError(S.UNAUTHENTICATED, 'x-modal-auth-token missing or expired');
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// ---------------------------------------------------------------------------------------------
// Sandboxes and their processes
// ---------------------------------------------------------------------------------------------

const SYSTEM_DIRS = ['usr', 'etc', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

// A sandbox path -> the host path in tmpdir mode; the same path in bwrap mode.
function hostPath(sb, p) {
  const abs = path.posix.resolve('/', p || '/');
  if (OPTS.execMode === 'bwrap') return abs;
  const top = abs.split('/')[1];
  if (SYSTEM_DIRS.includes(top) || top === 'tmp' || top === 'dev' || top === 'proc') return abs;
  return path.join(sb.root, abs);
}
function rootPath(sb, p) {
  return path.join(sb.root, path.posix.resolve('/', p || '/'));
}

// bwrap mode: one namespace per sandbox (tests/fakes/lib/sandbox-exec.mjs), entered by every
// command with nsenter; it has no network unless the sandbox's network is open.
function startAnchor(sb) {
  return sb.procs.ensureAnchor();
}

function sandboxEnv(sb, extra) {
  const home = OPTS.execMode === 'bwrap' ? '/root' : rootPath(sb, '/root');
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: home, LANG: 'C.UTF-8', HOSTNAME: sb.id.slice(0, 12), MODAL_SANDBOX_ID: sb.id,
    MODAL_TASK_ID: sb.taskId, ...sb.env, ...extra,
  };
}

function touch(sb) {
  sb.lastActivity = Date.now();
  armIdle(sb);
}

function armIdle(sb) {
  if (sb.idleTimer) clearTimeout(sb.idleTimer);
  sb.idleTimer = null;
  if (sb.idleTimeoutSecs === undefined || sb.result) return;
  sb.idleTimer = setTimeout(() => {
    const busy = [...sb.execs.values()].some((x) => x.exit === null);
    if (busy) armIdle(sb);
    else finishSandbox(sb, GENERIC.IDLE_TIMEOUT, 'idle timeout');
  }, sb.idleTimeoutSecs * 1000);
}

function finishSandbox(sb, status, why) {
  if (sb.result) return;
  sb.result = { status, exception: why };
  sb.finishedAt = Date.now() / 1000;
  clearTimeout(sb.timeoutTimer);
  if (sb.idleTimer) clearTimeout(sb.idleTimer);
  for (const x of sb.execs.values()) {
    killTree(x.child);
    for (const w of x.waiters.splice(0)) w();
  }
  sb.procs.killAll();
  for (const w of sb.waiters.splice(0)) w();
  fs.rmSync(sb.dir, { recursive: true, force: true });
}

function createSandbox(appId, def, tags, secretEnv) {
  const app = [...STATE.apps.values()].find((a) => a.id === appId);
  if (!app) throw new GrpcError(S.NOT_FOUND, `app ${appId} not found`);
  const imageId = def.imageId || '';
  const image = STATE.images.get(imageId);
  if (!image) throw new GrpcError(S.NOT_FOUND, `image ${imageId} not found`);
  const timeoutSecs = def.timeoutSecs || 300;
  if (timeoutSecs > MAX_TIMEOUT_SECS) throw new GrpcError(S.INVALID_ARGUMENT, 'timeout must be at most 24 hours');
  if (def.idleTimeoutSecs !== undefined && def.idleTimeoutSecs > MAX_TIMEOUT_SECS) {
    throw new GrpcError(S.INVALID_ARGUMENT, 'idle timeout must be at most 24 hours');
  }
  const na = def.networkAccess || {};
  const cidrs = na.allowedCidrs || [];
  const domains = na.allowedDomains || [];
  let type = na.networkAccessType || (def.blockNetwork ? NET.BLOCKED : NET.OPEN);
  if (def.blockNetwork && type === NET.ALLOWLIST) {
    throw new GrpcError(S.INVALID_ARGUMENT, 'block_network and a CIDR allowlist cannot be combined');
  }
  if (type === NET.BLOCKED && (cidrs.length || domains.length)) {
    throw new GrpcError(S.INVALID_ARGUMENT, 'a blocked network takes no allowlist');
  }
  if (def.name !== undefined) {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(def.name)) throw new GrpcError(S.INVALID_ARGUMENT, `invalid sandbox name ${def.name}`);
    for (const o of STATE.sandboxes.values()) {
      if (o.appId === appId && o.name === def.name && !o.result) {
        throw new GrpcError(S.ALREADY_EXISTS, `a sandbox named ${def.name} already exists in this app`);
      }
    }
  }
  const id = newId('sb');
  const dir = path.join(STATE_DIR, 'sandboxes', id);
  const rootDir = path.join(dir, 'root');
  fs.mkdirSync(rootDir, { recursive: true });
  if (image.dir) fs.cpSync(image.dir, rootDir, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
  for (const d of ['root', 'tmp', 'workspace']) fs.mkdirSync(path.join(rootDir, d), { recursive: true });
  const sb = {
    id, appId, name: def.name, imageId, taskId: newId('ta'), createdAt: Date.now() / 1000, dir, root: rootDir,
    timeoutSecs, idleTimeoutSecs: def.idleTimeoutSecs, workdir: def.workdir,
    resources: def.resources || {}, network: { type, cidrs, domains },
    tags: (tags || []).map((t) => ({ tagName: t.tagName || '', tagValue: t.tagValue || '' })),
    env: secretEnv, result: null, execs: new Map(), waiters: [], readyAt: Date.now() + OPTS.readyMs,
    lastActivity: Date.now(),
  };
  sb.procs = new SandboxProcs({
    mode: OPTS.execMode, root: rootDir, hostname: id.slice(0, 12), blockNetwork: () => sb.network.type !== NET.OPEN,
  });
  sb.timeoutTimer = setTimeout(() => finishSandbox(sb, GENERIC.TIMEOUT, 'timeout'), timeoutSecs * 1000);
  armIdle(sb);
  STATE.sandboxes.set(id, sb);
  STATE.tasks.set(sb.taskId, sb);
  return sb;
}

function findSandbox(id) {
  const sb = STATE.sandboxes.get(id);
  if (!sb) throw new GrpcError(S.NOT_FOUND, `sandbox ${id} not found`);
  return sb;
}

function routerAccess(sb) {
  return { jwt: makeJwt({ task_id: sb.taskId }, OPTS.routerTtlS), url: `https://127.0.0.1:${PORT}` };
}

function tagsMatch(sb, want) {
  return (want || []).every((w) => sb.tags.some((t) => t.tagName === (w.tagName || '') && t.tagValue === (w.tagValue || '')));
}

function sandboxInfo(sb) {
  const info = { id: sb.id, createdAt: sb.createdAt, taskInfo: { id: sb.taskId, sandboxId: sb.id }, appId: sb.appId,
    tags: sb.tags, imageId: sb.imageId, timeoutSecs: sb.timeoutSecs };
  if (sb.name !== undefined) info.name = sb.name;
  if (sb.idleTimeoutSecs !== undefined) info.idleTimeoutSecs = sb.idleTimeoutSecs;
  if (sb.result) {
    info.taskInfo.result = sb.result;
    info.taskInfo.finishedAt = sb.finishedAt;
  }
  return info;
}

function envOf(secretSources, secretIds) {
  const env = {};
  for (const id of secretIds || []) {
    const s = STATE.secrets.get(id);
    if (!s) throw new GrpcError(S.NOT_FOUND, `secret ${id} not found`);
    Object.assign(env, s.env);
  }
  for (const src of secretSources || []) {
    if (src.secretId) Object.assign(env, envOf([], [src.secretId]));
    if (src.env) Object.assign(env, src.env.contents || {});
  }
  return env;
}

// ---------------------------------------------------------------------------------------------
// Control plane
// ---------------------------------------------------------------------------------------------

const CONTROL = {
  async AuthTokenGet(call) {
    call.send({ token: makeJwt({ sub: OPTS.tokenId, workspace_id: 'ac-fake' }, OPTS.authTtlS) });
  },
  async EnvironmentGetOrCreate(call, req) {
    call.send({ environmentId: 'en-fake', metadata: { name: req.deploymentName || 'main',
      settings: { imageBuilderVersion: '2025.06', webhookSuffix: 'modal.run' } } });
  },
  async AppGetOrCreate(call, req) {
    const name = req.appName || '';
    const env = req.environmentName || 'main';
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) throw new GrpcError(S.INVALID_ARGUMENT, `invalid app name ${name}`);
    const key = `${env}/${name}`;
    let app = STATE.apps.get(key);
    if (!app) {
      if (req.objectCreationType !== 1) throw new GrpcError(S.NOT_FOUND, `app ${name} not found`);
      app = { id: newId('ap'), name, env };
      STATE.apps.set(key, app);
    }
    call.send({ appId: app.id });
  },
  async ImageGetOrCreate(call, req) {
    if (req.existingImageId) {
      const im = STATE.images.get(req.existingImageId);
      if (!im) throw new GrpcError(S.NOT_FOUND, `image ${req.existingImageId} not found`);
      call.send({ imageId: im.id, result: { status: GENERIC.SUCCESS } });
      return;
    }
    const cmds = (req.image && req.image.dockerfileCommands) || [];
    if (!cmds.length || !/^FROM \S+$/.test(cmds[0])) {
      throw new GrpcError(S.INVALID_ARGUMENT, 'an image needs a FROM line first');
    }
    const key = cmds.join('\n');
    let id = STATE.imageKeys.get(key);
    if (id && STATE.images.get(id).built) {
      call.send({ imageId: id, result: { status: GENERIC.SUCCESS } });
      return;
    }
    if (!id) {
      id = newId('im') + 'x'.repeat(OPTS.imageIdPad);
      STATE.imageKeys.set(key, id);
      STATE.images.set(id, { id, key, dir: null, built: false, builtAt: Date.now() + OPTS.buildMs });
    }
    call.send({ imageId: id });
  },
  async ImageJoinStreaming(call, req) {
    const im = STATE.images.get(req.imageId);
    if (!im) throw new GrpcError(S.NOT_FOUND, `image ${req.imageId} not found`);
    if (!im.built) {
      call.send({ taskLogs: [{ data: `Building image ${im.id}\n`, fileDescriptor: 1 }], entryId: '1-0' });
      const wait = im.builtAt - Date.now();
      if (wait > 0) await sleep(wait);
      im.built = true;
    }
    call.send({ result: { status: GENERIC.SUCCESS }, entryId: '2-0', eof: true });
  },
  async SecretGetOrCreate(call, req) {
    const id = newId('st');
    STATE.secrets.set(id, { env: req.envDict || {} });
    call.send({ secretId: id });
  },
  async SandboxCreate(call, req) {
    const def = req.definition || {};
    const sb = createSandbox(req.appId, def, req.tags, envOf([], def.secretIds));
    call.send({ sandboxId: sb.id });
  },
  async SandboxCreateV2(call, req) {
    const def = req.definition || {};
    const sb = createSandbox(req.appId, def, req.tags, envOf(req.secretSources, def.secretIds));
    call.send({ sandboxId: sb.id, taskId: sb.taskId, commandRouterAccess: routerAccess(sb) });
  },
  async SandboxGetTaskId(call, req) {
    const sb = findSandbox(req.sandboxId);
    if (sb.result) {
      call.send({ taskResult: sb.result });
      return;
    }
    let wait = sb.readyAt - Date.now();
    if (wait > 0 && req.waitUntilReady) {
      const limit = req.timeout !== undefined ? req.timeout * 1000 : 60000;
      await sleep(Math.min(wait, limit));
      wait = sb.readyAt - Date.now();
    }
    call.send(wait > 0 ? {} : { taskId: sb.taskId });
  },
  async TaskGetCommandRouterAccess(call, req) {
    const sb = STATE.tasks.get(req.taskId);
    if (!sb) throw new GrpcError(S.NOT_FOUND, `task ${req.taskId} not found`);
    if (sb.result) throw new GrpcError(S.FAILED_PRECONDITION, 'the task has finished');
    call.send(routerAccess(sb));
  },
  // A v2 sandbox's router access, asked for by sandbox id (modal-js's v2 path).
  async SandboxGetCommandRouterAccess(call, req) {
    const sb = findSandbox(req.sandboxId);
    if (sb.result) throw new GrpcError(S.FAILED_PRECONDITION, 'the sandbox has finished');
    if (req.taskId && req.taskId !== sb.taskId) throw new GrpcError(S.NOT_FOUND, `task ${req.taskId} not found`);
    call.send(routerAccess(sb));
  },
  async SandboxWait(call, req) {
    const sb = findSandbox(req.sandboxId);
    if (!sb.result && req.timeout > 0) {
      await Promise.race([sleep(req.timeout * 1000), new Promise((r) => sb.waiters.push(r))]);
    }
    call.send({ result: sb.result || { status: GENERIC.UNSPECIFIED } });
  },
  async SandboxTerminate(call, req) {
    const sb = findSandbox(req.sandboxId);
    const existing = sb.result;
    finishSandbox(sb, GENERIC.TERMINATED, 'terminated');
    call.send(existing ? { existingResult: existing } : {});
  },
  async SandboxList(call, req) {
    let list = [...STATE.sandboxes.values()]
      .filter((sb) => (!req.appId || sb.appId === req.appId) && (req.includeFinished || !sb.result))
      .filter((sb) => tagsMatch(sb, req.tags))
      .filter((sb) => !req.beforeTimestamp || sb.createdAt < req.beforeTimestamp)
      .sort((a, b) => b.createdAt - a.createdAt);
    list = list.slice(0, OPTS.listPage);
    call.send({ sandboxes: list.map(sandboxInfo) });
  },
  async SandboxGetFromName(call, req) {
    const app = STATE.apps.get(`${req.environmentName || 'main'}/${req.appName || ''}`);
    const sb = app && [...STATE.sandboxes.values()].find((s) => s.appId === app.id && s.name === req.sandboxName &&
      (req.includeTerminated || !s.result));
    if (!sb) throw new GrpcError(S.NOT_FOUND, `no running sandbox named ${req.sandboxName}`);
    call.send({ sandboxId: sb.id });
  },
  async SandboxTagsSet(call, req) {
    const sb = findSandbox(req.sandboxId);
    sb.tags = (req.tags || []).map((t) => ({ tagName: t.tagName || '', tagValue: t.tagValue || '' }));
    call.send({});
  },
  async SandboxTagsGet(call, req) {
    call.send({ tags: findSandbox(req.sandboxId).tags });
  },
};
CONTROL.SandboxWaitV2 = CONTROL.SandboxWait;
CONTROL.SandboxTerminateV2 = CONTROL.SandboxTerminate;
CONTROL.SandboxListV2 = CONTROL.SandboxList;
CONTROL.SandboxGetFromNameV2 = CONTROL.SandboxGetFromName;
CONTROL.SandboxTagsSetV2 = CONTROL.SandboxTagsSet;
CONTROL.SandboxTagsGetV2 = CONTROL.SandboxTagsGet;
CONTROL.SandboxGetTaskIdV2 = CONTROL.SandboxGetTaskId;

// ---------------------------------------------------------------------------------------------
// Command router
// ---------------------------------------------------------------------------------------------

// The router's sandbox, once it is ready (a call before that waits, as Modal's router does).
async function routerSandbox(call, taskId) {
  if (taskId !== call.routerTask) throw new GrpcError(S.PERMISSION_DENIED, 'the token is for another task');
  const sb = STATE.tasks.get(taskId);
  if (!sb) throw new GrpcError(S.NOT_FOUND, `task ${taskId} not found`);
  const wait = sb.readyAt - Date.now();
  if (wait > 0) await sleep(wait);
  if (sb.result) throw new GrpcError(S.NOT_FOUND, 'the sandbox has finished');
  return sb;
}

function findExec(sb, execId) {
  const x = sb.execs.get(execId);
  if (!x) throw new GrpcError(S.NOT_FOUND, `exec ${execId} not found`);
  return x;
}

function newExec(sb, id) {
  const x = { id, child: null, out: [[], []], len: [0, 0], closed: [false, false], exit: null, waiters: [],
    readers: [], stdinOffset: 0, stdinDone: false, stdin: null, fsTool: null, fsInput: [] };
  sb.execs.set(id, x);
  return x;
}

function pushOut(x, fd, data) {
  if (x.len[fd] + data.length > MAX_OUTPUT) data = data.subarray(0, Math.max(0, MAX_OUTPUT - x.len[fd]));
  if (!data.length) return;
  x.out[fd].push(data);
  x.len[fd] += data.length;
  for (const r of x.readers.splice(0)) r();
}

function exitExec(x, code, signal) {
  if (x.exit) return;
  x.exit = signal ? { signal } : { code };
  x.closed = [true, true];
  for (const r of x.readers.splice(0)) r();
  for (const w of x.waiters.splice(0)) w();
}

// modal-sandbox-fs-tools, which Modal puts in every sandbox: the SDK's filesystem API execs it.
function runFsTool(sb, x, arg) {
  let req;
  try {
    req = JSON.parse(arg);
  } catch {
    pushOut(x, 1, Buffer.from('invalid request\n'));
    exitExec(x, 2);
    return;
  }
  const op = Object.keys(req)[0];
  const p = req[op] && req[op].path;
  const file = p ? (OPTS.execMode === 'bwrap' ? rootPath(sb, p) : hostPath(sb, p)) : null;
  if (op === 'ReadFile') {
    try {
      pushOut(x, 0, fs.readFileSync(file));
      exitExec(x, 0);
    } catch (e) {
      pushOut(x, 1, Buffer.from(JSON.stringify({ error: e.code || 'error' }) + '\n'));
      exitExec(x, 1);
    }
  } else if (op === 'WriteFile') {
    x.fsTool = (data) => {
      try {
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, data);
        exitExec(x, 0);
      } catch (e) {
        pushOut(x, 1, Buffer.from(JSON.stringify({ error: e.code || 'error' }) + '\n'));
        exitExec(x, 1);
      }
    };
  } else {
    pushOut(x, 1, Buffer.from(JSON.stringify({ error: `unsupported operation ${op}` }) + '\n'));
    exitExec(x, 1);
  }
}

async function startExec(sb, req) {
  const args = req.commandArgs || [];
  if (!args.length) throw new GrpcError(S.INVALID_ARGUMENT, 'command_args is empty');
  if (args.reduce((n, a) => n + Buffer.byteLength(a) + 1, 0) > MAX_ARGS_BYTES) {
    throw new GrpcError(S.INVALID_ARGUMENT, 'command_args is over 64 KiB');
  }
  const x = newExec(sb, req.execId);
  touch(sb);
  if (args[0] === FS_TOOLS) {
    runFsTool(sb, x, args[1] || '');
    return;
  }
  const workdir = req.workdir ?? sb.workdir ?? '/';
  const env = sandboxEnv(sb, { ...(req.env || {}), ...envOf(req.secretSources, req.secretIds) });
  const stdoutPipe = req.stdoutConfig === 1;
  const stderrCfg = req.stderrConfig || 0;
  const stdio = ['pipe', stdoutPipe || stderrCfg === 2 ? 'pipe' : 'ignore', stderrCfg === 1 ? 'pipe' : 'ignore'];
  let child;
  if (OPTS.execMode === 'bwrap') {
    const anchorPid = await startAnchor(sb);
    // The shell only changes directory; the command itself is exec'ed with its argv.
    child = spawn('nsenter', ['-t', String(anchorPid), '-m', '-u', '-i', '-n', '-p', '-r', '--', '/bin/sh', '-c',
      'cd -- "$1" || exit 127; shift; exec "$@"', 'sh', workdir, ...args], { env, stdio, detached: true });
  } else {
    const cwd = hostPath(sb, workdir);
    if (!fs.existsSync(cwd)) {
      pushOut(x, 1, Buffer.from(`cannot change to ${workdir}\n`));
      exitExec(x, 127);
      return;
    }
    child = spawn(args[0], args.slice(1), { cwd, env, stdio, detached: true });
  }
  x.child = child;
  STATE.children.add(child);
  x.stdin = child.stdin;
  child.stdin.on('error', () => {});
  if (child.stdout) child.stdout.on('data', (d) => pushOut(x, 0, d));
  if (child.stderr) child.stderr.on('data', (d) => pushOut(x, 1, d));
  if (stderrCfg === 2 && !stdoutPipe) child.stdout.removeAllListeners('data').resume();
  let timer = null;
  if (req.timeoutSecs) timer = setTimeout(() => killTree(child), req.timeoutSecs * 1000);
  child.on('error', (e) => {
    pushOut(x, 1, Buffer.from(`${args[0]}: ${e.message}\n`));
    exitExec(x, e.code === 'ENOENT' ? 127 : 126);
  });
  child.on('close', (code, signal) => {
    if (timer) clearTimeout(timer);
    STATE.children.delete(child);
    touch(sb);
    exitExec(x, code, signal ? os.constants.signals[signal] : 0);
  });
}

function writeStdin(x, offset, data, eof) {
  // An offset before what was written is a retry of bytes already delivered: skip them.
  const skip = Math.max(0, x.stdinOffset - offset);
  if (offset > x.stdinOffset) throw new GrpcError(S.OUT_OF_RANGE, `stdin offset ${offset} is past ${x.stdinOffset}`);
  const fresh = data.subarray(Math.min(skip, data.length));
  x.stdinOffset += fresh.length;
  if (x.fsTool) {
    x.fsInput.push(fresh);
    if (eof) x.fsTool(Buffer.concat(x.fsInput));
  } else if (x.stdin && !x.stdinDone) {
    if (fresh.length) x.stdin.write(fresh);
    if (eof) x.stdin.end();
  }
  if (eof) x.stdinDone = true;
}

const ROUTER = {
  async SandboxWaitUntilReady(call, req) {
    await routerSandbox(call, req.taskId);
    call.send({ readyAt: Date.now() / 1000 });
  },
  async TaskExecStart(call, req) {
    const sb = await routerSandbox(call, req.taskId);
    if (!req.execId) throw new GrpcError(S.INVALID_ARGUMENT, 'exec_id is required');
    // A start sent again (a retry) finds its exec: nothing runs twice.
    if (sb.execs.has(req.execId)) {
      call.note = 'exec-start-retry';
      call.send({});
      return;
    }
    await startExec(sb, req);
    call.send({});
  },
  async TaskExecStdioRead(call, req) {
    const sb = await routerSandbox(call, req.taskId);
    const x = findExec(sb, req.execId);
    const fd = req.fileDescriptor || 0;
    let offset = req.offset || 0;
    for (;;) {
      // Everything past offset, as one message per stored chunk (at most 1 MiB each).
      let pos = 0;
      for (const c of x.out[fd]) {
        const end = pos + c.length;
        if (end > offset) {
          const part = c.subarray(Math.max(0, offset - pos));
          for (let i = 0; i < part.length; i += 1 << 20) call.send({ data: part.subarray(i, i + (1 << 20)) });
          offset = end;
        }
        pos = end;
      }
      if (x.closed[fd] || call.closed) return;
      await new Promise((r) => {
        x.readers.push(r);
        call.onCancel.push(r);
      });
    }
  },
  async TaskExecWait(call, req) {
    const sb = await routerSandbox(call, req.taskId);
    const x = findExec(sb, req.execId);
    if (!x.exit) await new Promise((r) => {
      x.waiters.push(r);
      call.onCancel.push(r);
    });
    if (call.closed) return;
    if (!x.exit) throw new GrpcError(S.NOT_FOUND, 'the sandbox has finished');
    call.send(x.exit);
  },
  async TaskExecPoll(call, req) {
    const sb = await routerSandbox(call, req.taskId);
    const x = findExec(sb, req.execId);
    call.send(x.exit || {});
  },
  async TaskExecStdinWrite(call, req) {
    const sb = await routerSandbox(call, req.taskId);
    const x = findExec(sb, req.execId);
    writeStdin(x, req.offset || 0, Buffer.from(req.data || []), !!req.eof);
    touch(sb);
    call.send({});
  },
  async TaskExecStdinWriteStream(call, next) {
    const first = await next();
    if (!first || !first.start) throw new GrpcError(S.INVALID_ARGUMENT, 'the stream must open with start');
    const sb = await routerSandbox(call, first.start.taskId);
    const x = findExec(sb, first.start.execId);
    let offset = first.start.offset || 0;
    for (;;) {
      const m = await next();
      if (m === null) break;
      if (m.data !== undefined) {
        const d = Buffer.from(m.data);
        writeStdin(x, offset, d, false);
        offset += d.length;
      } else if (m.end !== undefined) {
        writeStdin(x, offset, Buffer.alloc(0), true);
      }
    }
    touch(sb);
    call.send({});
  },
  async TaskSnapshotFilesystem(call, req) {
    // The SDK always sends the snapshot's lifetime (30 days unless told, -1 for none, never under a
    // second), so the fake, like the service it suggests, refuses a request without one.
    const ttl = req.ttlSeconds;
    if (ttl === undefined && !OPTS.snapshotTtlOptional) {
      throw new GrpcError(S.INVALID_ARGUMENT, 'ttl_seconds must be set');
    }
    if (ttl !== undefined && ttl !== -1 && !(ttl >= 1)) {
      throw new GrpcError(S.INVALID_ARGUMENT, `ttl_seconds must be at least 1, or -1 for no expiry, got ${ttl}`);
    }
    const sb = await routerSandbox(call, req.taskId);
    const id = newId('im');
    const dir = path.join(STATE_DIR, 'images', id);
    fs.cpSync(sb.root, dir, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true,
      filter: (src) => {
        const rel = path.relative(sb.root, src).split(path.sep)[0];
        return !['usr', 'etc', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'proc', 'dev', 'run'].includes(rel);
      } });
    STATE.images.set(id, { id, key: null, dir, built: true, fromSnapshot: sb.id, snapshotId: req.snapshotId,
      ttlSeconds: ttl ?? null });
    call.send({ imageId: id });
  },
};

// ---------------------------------------------------------------------------------------------
// Admin (HTTP/1.1, JSON): faults, state, the request log
// ---------------------------------------------------------------------------------------------

function stateJson() {
  const live = [...STATE.children, ...allChildren.values()].filter((c) => c.exitCode === null && c.signalCode === null).length;
  return {
    sandboxes: [...STATE.sandboxes.values()].map((sb) => ({ id: sb.id, name: sb.name ?? null, appId: sb.appId,
      imageId: sb.imageId, taskId: sb.taskId, tags: sb.tags, running: !sb.result, result: sb.result,
      timeoutSecs: sb.timeoutSecs, idleTimeoutSecs: sb.idleTimeoutSecs ?? null, network: sb.network,
      resources: sb.resources, workdir: sb.workdir ?? null, execs: sb.execs.size, env: Object.keys(sb.env) })),
    images: [...STATE.images.values()].map((im) => ({ id: im.id, key: im.key, snapshot: !!im.dir,
      fromSnapshot: im.fromSnapshot ?? null, ttlSeconds: im.ttlSeconds ?? null })),
    apps: [...STATE.apps.values()],
    liveProcesses: live,
    faults: STATE.faults,
    calls: STATE.calls,
    execMode: OPTS.execMode,
  };
}

function adminServer() {
  return http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const reply = (code, obj) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(obj));
      };
      let j = {};
      try {
        j = body ? JSON.parse(body) : {};
      } catch {
        return reply(400, { error: 'bad json' });
      }
      const u = req.url.split('?')[0];
      let m;
      if (req.method === 'GET' && u === '/__fake/state') return reply(200, stateJson());
      if (req.method === 'GET' && u === '/__fake/log') return reply(200, STATE.log);
      if (req.method === 'POST' && u === '/__fake/log/clear') {
        STATE.log = [];
        return reply(200, {});
      }
      if (req.method === 'POST' && u === '/__fake/faults') {
        const list = Array.isArray(j) ? j : [j];
        for (const f of list) {
          if (!f.method || !f.kind) return reply(400, { error: 'a fault needs method and kind' });
          STATE.faults.push({ times: 1, ...f });
        }
        return reply(200, { faults: STATE.faults });
      }
      if (req.method === 'POST' && u === '/__fake/faults/clear') {
        STATE.faults = [];
        return reply(200, {});
      }
      if (req.method === 'POST' && u === '/__fake/delay') {
        OPTS.delayMs = Number(j.ms) || 0;
        return reply(200, { delayMs: OPTS.delayMs });
      }
      // Modal's image ids are short; a client must not count on it.
      if (req.method === 'POST' && u === '/__fake/image-id-pad') {
        if (!Number.isInteger(j.n) || j.n < 0) return reply(400, { error: 'n must be a non-negative integer' });
        OPTS.imageIdPad = j.n;
        return reply(200, { n: OPTS.imageIdPad });
      }
      if (req.method === 'POST' && u === '/__fake/token-ttl') {
        for (const [k, o] of [['auth_s', 'authTtlS'], ['router_s', 'routerTtlS']]) {
          if (j[k] === undefined) continue;
          if (!Number.isInteger(j[k]) || j[k] < 1) return reply(400, { error: `${k} must be a positive integer` });
          OPTS[o] = j[k];
        }
        return reply(200, { auth_s: OPTS.authTtlS, router_s: OPTS.routerTtlS });
      }
      if (req.method === 'POST' && (m = /^\/__fake\/sandboxes\/([^/]+)\/kill$/.exec(u))) {
        const sb = STATE.sandboxes.get(m[1]);
        if (!sb) return reply(404, { error: 'no such sandbox' });
        finishSandbox(sb, GENERIC.FAILURE, 'killed by the test');
        return reply(200, {});
      }
      // Ends a sandbox as Modal's timeout_secs would (TIMEOUT), without waiting for it.
      if (req.method === 'POST' && (m = /^\/__fake\/sandboxes\/([^/]+)\/expire$/.exec(u))) {
        const sb = STATE.sandboxes.get(m[1]);
        if (!sb) return reply(404, { error: 'no such sandbox' });
        finishSandbox(sb, GENERIC.TIMEOUT, 'timeout');
        return reply(200, {});
      }
      if (req.method === 'POST' && (m = /^\/__fake\/images\/([^/]+)\/delete$/.exec(u))) {
        const im = STATE.images.get(m[1]);
        if (!im) return reply(404, { error: 'no such image' });
        if (im.dir) fs.rmSync(im.dir, { recursive: true, force: true });
        STATE.images.delete(m[1]);
        return reply(200, {});
      }
      return reply(404, { error: 'unknown admin path' });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Start and stop
// ---------------------------------------------------------------------------------------------

if (OPTS.execMode === 'bwrap') {
  const r = spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']);
  if (r.status !== 0) fail('--exec-mode bwrap needs a working bubblewrap (bwrap)');
}

let PORT = 0;
const server = http2.createServer({ settings: { initialWindowSize: 1 << 24 } });
server.on('session', (s) => {
  s.on('error', () => {});
  // The connection's window too (the setting above is per stream), as
  // gRPC servers open it: a large request is not held to 64 KiB a trip.
  s.on('connect', () => s.setLocalWindowSize(1 << 24));
  if (!s.connecting) s.setLocalWindowSize(1 << 24);
});
server.on('stream', (stream, headers) => {
  handleStream(stream, headers);
});
const admin = adminServer();

function shutdown(code) {
  for (const sb of STATE.sandboxes.values()) finishSandbox(sb, GENERIC.TERMINATED, 'fake stopped');
  for (const c of STATE.children) killTree(c);
  killAllChildren();
  if (OWN_STATE_DIR) fs.rmSync(STATE_DIR, { recursive: true, force: true });
  process.exit(code);
}

server.listen(OPTS.port, '127.0.0.1', () => {
  PORT = server.address().port;
  admin.listen(OPTS.adminPort, '127.0.0.1', () => {
    process.stdout.write(`ADMIN ${admin.address().port}\nLISTENING ${PORT}\n`);
  });
});
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));
if (OPTS.stdinWatch) {
  process.stdin.on('end', () => shutdown(0));
  process.stdin.on('error', () => shutdown(0));
  process.stdin.resume();
}
