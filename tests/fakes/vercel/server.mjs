#!/usr/bin/env node
// A fake of the Vercel Sandbox API (v2/v3: named sandboxes, sessions, snapshots) for sandgate's
// tests. Stateful and real: commands really run (tests/fakes/lib/sandbox-exec.mjs), files are
// real files, a stop snapshots the filesystem and a resume restores it into a new session.
// README.md next to this file is its manual (options, routes, admin API, request log).
//
// Invariants: it binds 127.0.0.1 only and never connects anywhere; every answer to the API
// is one the official SDK (@vercel/sandbox, pinned in package.json) accepts, which
// sdk-check.mjs proves; nothing a sandbox started outlives the fake's shutdown.

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import zlib from 'node:zlib';
import {
  Faults, HttpError, RequestLog, failer, isObj, logAndFaultHandlers, msSince, parseOptions, readBody, readJson, serve, sleep,
} from '../lib/fake-http.mjs';
import {
  PathError, SandboxProcs, hostPath as mapPath, killAllChildren, sandboxBaseDir,
} from '../lib/sandbox-exec.mjs';

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const USAGE = `usage: node server.mjs [--port N] [--token T] [--team-id ID] [--project-id ID]
       [--exec-mode tmpdir|bwrap] [--delay-ms N] [--stop-ms N] [--snapshot-ms N]
       [--max-timeout-ms N] [--max-vcpus N] [--request-log FILE] [--state-dir DIR] [--no-stdin-watch]`;

const fail = failer('fake-vercel');

const OPTS = parseOptions(process.argv.slice(2), {
  '--port': { key: 'port', type: 'int' },
  '--token': { key: 'token', type: 'string' },
  '--team-id': { key: 'teamId', type: 'string' },
  '--project-id': { key: 'projectId', type: 'string' },
  '--exec-mode': { key: 'execMode', type: 'string' },
  '--delay-ms': { key: 'delayMs', type: 'int' },
  '--stop-ms': { key: 'stopMs', type: 'int' },
  '--snapshot-ms': { key: 'snapshotMs', type: 'int' },
  '--max-timeout-ms': { key: 'maxTimeoutMs', type: 'int' },
  '--max-vcpus': { key: 'maxVcpus', type: 'int' },
  '--request-log': { key: 'requestLog', type: 'path' },
  '--state-dir': { key: 'stateDir', type: 'path' },
  '--no-stdin-watch': { key: 'stdinWatch', type: 'false' },
}, {
  port: 0,
  token: 'test-token',
  teamId: 'team_fake',
  projectId: 'prj_fake',
  execMode: 'tmpdir',
  delayMs: 0,
  stopMs: 0,
  snapshotMs: 0,
  maxTimeoutMs: 5 * 3600 * 1000,
  maxVcpus: 8,
  requestLog: null,
  stateDir: null,
  stdinWatch: true,
}, USAGE, fail);
if (OPTS.execMode !== 'tmpdir' && OPTS.execMode !== 'bwrap') fail('--exec-mode must be tmpdir or bwrap');

// ---------------------------------------------------------------------------------------------
// Constants and state
// ---------------------------------------------------------------------------------------------

const REGION = 'iad1';
const SANDBOX_CWD = '/vercel/sandbox';
const SANDBOX_USER = 'vercel-sandbox';
const HOME_DIR = '/home/vercel-sandbox';
const IMAGE = 'vercel/sandbox/universal@sha256:' + 'f'.repeat(64);
const RUNTIMES = new Set(['node22', 'node24', 'node26', 'python3.13']);
const MEMORY_PER_VCPU = 2048;
const DEFAULT_VCPUS = 2;
const DEFAULT_TIMEOUT_MS = 300000;
const MIN_TIMEOUT_MS = 1000;
const DEFAULT_SNAPSHOT_EXPIRATION_MS = 30 * 24 * 3600 * 1000;
const MAX_TAGS = 5;
const MAX_TAG_VALUE = 256;
const MAX_PORTS = 15;
const NAME_RE = /^[a-zA-Z0-9_-]{1,128}$/;
const MAX_BODY_BYTES = 256 * 1024 * 1024;
const MAX_LOG_BYTES = 64 * 1024 * 1024; // per command; output beyond it is dropped
const KILL_WAIT_MS = 5000;
const NDJSON = 'application/x-ndjson'; // the SDK compares the content-type string exactly

const CONFIG = {};
function resetConfig() {
  Object.assign(CONFIG, {
    delayMs: OPTS.delayMs,
    stopMs: OPTS.stopMs,
    snapshotMs: OPTS.snapshotMs,
    maxTimeoutMs: OPTS.maxTimeoutMs,
    maxVcpus: OPTS.maxVcpus,
    // The next N resumes start a session that Vercel reports `failed` (its VM never ran).
    failResumes: 0,
  });
}
resetConfig();

const STATE = {
  baseDir: null,
  ownsBaseDir: false,
  port: 0,
  sandboxes: new Map(), // `${projectId}/${name}` -> sandbox record
  sessions: new Map(), // sessionId -> session record (stopped ones stay, without files)
  snapshots: new Map(), // snapshotId -> snapshot record
  deleted: [], // names of deleted sandboxes, oldest first
  inFlight: new Set(), // API requests that arrived, their connection still open (the admin view)
};
const LOG = new RequestLog(OPTS.requestLog);
const FAULTS = new Faults(['status', 'drop', 'delay', 'cut']);

const now = () => Date.now();
const newId = (prefix) => `${prefix}_${crypto.randomBytes(12).toString('base64url').replace(/[-_]/g, 'x').slice(0, 16)}`;

// The API's error: {"error":{"code","message"}} (what the SDK's isSandboxStoppedError & co read).
function apiError(status, code, message) {
  return new HttpError(status, message, { code });
}

// ---------------------------------------------------------------------------------------------
// Views (the JSON the API answers)
// ---------------------------------------------------------------------------------------------

function currentSession(sb) {
  return STATE.sessions.get(sb.currentSessionId);
}

function sandboxView(sb) {
  const ss = currentSession(sb);
  const v = {
    name: sb.name,
    persistent: sb.persistent,
    region: REGION,
    vcpus: sb.vcpus,
    memory: sb.memory,
  };
  if (sb.runtime) v.runtime = sb.runtime;
  if (sb.image) v.image = sb.image;
  Object.assign(v, {
    timeout: sb.timeout,
    networkPolicy: sb.networkPolicy,
    createdAt: sb.createdAt,
    updatedAt: sb.updatedAt,
    currentSessionId: sb.currentSessionId,
    status: ss.status,
    statusUpdatedAt: sb.statusUpdatedAt,
    cwd: SANDBOX_CWD,
    tags: sb.tags,
    totalEgressBytes: 0,
    totalIngressBytes: 0,
    totalActiveCpuDurationMs: 0,
    totalDurationMs: sb.totalDurationMs + (ss.status === 'running' ? now() - ss.startedAt : 0),
  });
  if (ss.status === 'running') v.expiresAt = ss.startedAt + ss.timeout;
  if (sb.currentSnapshotId) v.currentSnapshotId = sb.currentSnapshotId;
  if (sb.snapshotExpiration !== undefined) v.snapshotExpiration = sb.snapshotExpiration;
  if (sb.keepLastSnapshots) v.keepLastSnapshots = sb.keepLastSnapshots;
  return v;
}

const SESSION_FIELDS = [
  'id', 'memory', 'vcpus', 'region', 'runtime', 'timeout', 'status', 'requestedAt', 'startedAt',
  'requestedStopAt', 'stoppedAt', 'duration', 'sourceSnapshotId', 'snapshottedAt', 'createdAt', 'cwd',
  'updatedAt', 'networkPolicy', 'sourceSandboxName',
];

function sessionView(ss) {
  const v = {};
  for (const k of SESSION_FIELDS) if (ss[k] !== undefined) v[k] = ss[k];
  return v;
}

function snapshotView(sn) {
  const v = {
    id: sn.id,
    sourceSessionId: sn.sourceSessionId,
    region: REGION,
    status: snapshotExpired(sn) ? 'deleted' : sn.status,
    sizeBytes: sn.sizeBytes,
    createdAt: sn.createdAt,
    updatedAt: sn.updatedAt,
    creationMethod: sn.creationMethod,
  };
  if (sn.expiresAt) v.expiresAt = sn.expiresAt;
  if (sn.parentId) v.parentId = sn.parentId;
  return v;
}

function commandView(cmd) {
  const v = {
    id: cmd.id,
    name: cmd.name,
    args: cmd.args,
    cwd: cmd.cwd,
    sessionId: cmd.sessionId,
    exitCode: cmd.exitCode,
    startedAt: cmd.startedAt,
  };
  if (cmd.exitCode !== null) v.durationMs = cmd.durationMs;
  return v;
}

// No port is really exposed: the routes name an address that cannot resolve (.invalid).
function routesOf(sb) {
  return sb.ports.map((port) => ({ url: `https://${sb.name}-${port}.fake-vercel.invalid`, subdomain: `${sb.name}-${port}`, port }));
}

// ---------------------------------------------------------------------------------------------
// Validation of the create/update bodies (cloud-apis: resources, timeout, tags, network)
// ---------------------------------------------------------------------------------------------

const bad = (message) => apiError(400, 'bad_request', message);

function checkResources(r) {
  if (r === undefined || r === null) return { vcpus: DEFAULT_VCPUS, memory: DEFAULT_VCPUS * MEMORY_PER_VCPU };
  if (!isObj(r)) throw bad('resources must be an object');
  const vcpus = r.vcpus ?? DEFAULT_VCPUS;
  if (!Number.isInteger(vcpus) || vcpus < 1 || (vcpus !== 1 && vcpus % 2 !== 0)) {
    throw bad(`resources.vcpus must be 1 or an even number, got ${JSON.stringify(r.vcpus)}`);
  }
  if (vcpus > CONFIG.maxVcpus) throw bad(`resources.vcpus must be at most ${CONFIG.maxVcpus}, got ${vcpus}`);
  const memory = vcpus * MEMORY_PER_VCPU;
  if (r.memory !== undefined && r.memory !== memory) {
    throw bad(`resources.memory must be ${memory} MB for ${vcpus} vCPUs (${MEMORY_PER_VCPU} MB each), got ${JSON.stringify(r.memory)}`);
  }
  return { vcpus, memory };
}

function checkTimeout(t, fallback) {
  if (t === undefined || t === null) return fallback;
  if (!Number.isInteger(t) || t < MIN_TIMEOUT_MS || t > CONFIG.maxTimeoutMs) {
    throw apiError(400, 'sandbox_timeout_invalid', `timeout must be an integer between ${MIN_TIMEOUT_MS} and ${CONFIG.maxTimeoutMs} ms, got ${JSON.stringify(t)}`);
  }
  return t;
}

function checkTags(tags) {
  if (tags === undefined || tags === null) return {};
  if (!isObj(tags)) throw bad('tags must be an object of strings');
  const keys = Object.keys(tags);
  if (keys.length > MAX_TAGS) throw bad(`at most ${MAX_TAGS} tags, got ${keys.length}`);
  for (const k of keys) {
    if (k === '' || typeof tags[k] !== 'string' || tags[k].length > MAX_TAG_VALUE) {
      throw bad(`tag ${JSON.stringify(k)} must be a string of at most ${MAX_TAG_VALUE} characters`);
    }
  }
  return { ...tags };
}

function checkStringList(v, what) {
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || x === '')) throw bad(`${what} must be an array of strings`);
  return [...v];
}

const CIDR_RE = /^(\d{1,3}\.){3}\d{1,3}\/\d{1,2}$|^[0-9a-fA-F:]+\/\d{1,3}$/;

function checkCidrs(v, what) {
  const list = checkStringList(v, what);
  for (const c of list || []) if (!CIDR_RE.test(c)) throw bad(`${what}: ${JSON.stringify(c)} is not a CIDR`);
  return list;
}

// Request policy (allow-all, deny-all, the v2 {allow, subnets} object or the legacy custom
// form) -> the response form (mode allow-all | deny-all | custom; header values never shown).
function checkNetworkPolicy(p) {
  if (p === undefined || p === null) return { mode: 'allow-all' };
  if (!isObj(p)) throw bad('networkPolicy must be an object');
  if (p.mode === 'allow-all' || p.mode === 'deny-all') return { mode: p.mode };
  if (p.mode === 'custom') {
    const out = { mode: 'custom' };
    const d = checkStringList(p.allowedDomains, 'networkPolicy.allowedDomains');
    if (d) out.allowedDomains = d;
    const a = checkCidrs(p.allowedCIDRs, 'networkPolicy.allowedCIDRs');
    if (a) out.allowedCIDRs = a;
    const n = checkCidrs(p.deniedCIDRs, 'networkPolicy.deniedCIDRs');
    if (n) out.deniedCIDRs = n;
    return out;
  }
  if (p.mode !== undefined) throw bad(`networkPolicy.mode ${JSON.stringify(p.mode)} is not allow-all, deny-all or custom`);
  const out = { mode: 'custom' };
  if (Array.isArray(p.allow)) {
    out.allowedDomains = checkStringList(p.allow, 'networkPolicy.allow');
  } else if (isObj(p.allow)) {
    out.allowedDomains = Object.keys(p.allow);
    const rules = [];
    for (const [domain, list] of Object.entries(p.allow)) {
      if (!Array.isArray(list)) throw bad(`networkPolicy.allow[${JSON.stringify(domain)}] must be an array of rules`);
      for (const r of list) {
        const names = [];
        for (const t of r?.transform || []) names.push(...Object.keys(t?.headers || {}));
        if (names.length) rules.push({ domain, headerNames: names });
      }
    }
    if (rules.length) out.injectionRules = rules;
  } else if (p.allow !== undefined) {
    throw bad('networkPolicy.allow must be an array of domains or an object');
  }
  if (p.subnets !== undefined) {
    if (!isObj(p.subnets)) throw bad('networkPolicy.subnets must be an object');
    const a = checkCidrs(p.subnets.allow, 'networkPolicy.subnets.allow');
    if (a) out.allowedCIDRs = a;
    const n = checkCidrs(p.subnets.deny, 'networkPolicy.subnets.deny');
    if (n) out.deniedCIDRs = n;
  }
  return out;
}

function checkPorts(ports) {
  if (ports === undefined || ports === null) return [];
  if (!Array.isArray(ports) || ports.length > MAX_PORTS) throw bad(`ports must be an array of at most ${MAX_PORTS}`);
  for (const p of ports) if (!Number.isInteger(p) || p < 1024 || p > 65535) throw bad(`port ${JSON.stringify(p)} is not in 1024-65535`);
  return [...ports];
}

function checkEnv(env) {
  if (env === undefined || env === null) return {};
  if (!isObj(env) || Object.values(env).some((v) => typeof v !== 'string')) throw bad('env must be an object of strings');
  return { ...env };
}

function checkExpiration(v, what) {
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || v < 0) throw bad(`${what} must be a non-negative integer (ms, 0 = never)`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Sessions: start, stop (with the snapshot of a persistent sandbox), timeout
// ---------------------------------------------------------------------------------------------

function sessionRoot(id) {
  return path.join(STATE.baseDir, 'sessions', id, 'root');
}

function snapshotExpired(sn) {
  return sn.status === 'deleted' || (sn.expiresAt !== undefined && sn.expiresAt <= now());
}

// A usable snapshot or null (expired ones lose their files).
function liveSnapshot(id) {
  const sn = STATE.snapshots.get(id);
  if (!sn) return null;
  if (snapshotExpired(sn)) {
    fs.rmSync(sn._.dir, { recursive: true, force: true });
    return null;
  }
  return sn;
}

// Starts a new session of `sb`, its filesystem copied from `snapshot` or fresh.
function startSession(sb, snapshot) {
  const id = newId('sbx');
  const root = sessionRoot(id);
  fs.mkdirSync(path.dirname(root), { recursive: true });
  if (snapshot) {
    fs.cpSync(snapshot._.root, root, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  } else {
    for (const d of [SANDBOX_CWD, HOME_DIR, '/tmp']) fs.mkdirSync(path.join(root, d), { recursive: true });
    fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  }
  const t = now();
  const ss = {
    id,
    memory: sb.memory,
    vcpus: sb.vcpus,
    region: REGION,
    runtime: sb.runtime,
    timeout: sb.timeout,
    status: 'running',
    requestedAt: t,
    startedAt: t,
    createdAt: t,
    cwd: SANDBOX_CWD,
    updatedAt: t,
    networkPolicy: sb.networkPolicy,
    sourceSandboxName: sb.name,
    sourceSnapshotId: snapshot ? snapshot.id : undefined,
    _: {
      key: sb.key,
      root,
      procs: new SandboxProcs({
        mode: OPTS.execMode,
        root,
        hostname: id.slice(0, 12),
        blockNetwork: sb.networkPolicy.mode === 'deny-all',
      }),
      commands: new Map(),
      timer: null,
      stopping: null, // the running stop's promise
    },
  };
  STATE.sessions.set(id, ss);
  sb.currentSessionId = id;
  sb.statusUpdatedAt = t;
  armTimeout(ss);
  return ss;
}

function armTimeout(ss) {
  clearTimeout(ss._.timer);
  const left = ss.startedAt + ss.timeout - now();
  ss._.timer = setTimeout(() => {
    stopSession(ss, { reason: 'timeout' }).catch((e) => process.stderr.write(`fake-vercel: timeout stop: ${e.stack}\n`));
  }, Math.max(0, left));
  ss._.timer.unref?.();
}

function setStatus(ss, status) {
  ss.status = status;
  ss.updatedAt = now();
  const sb = STATE.sandboxes.get(ss._.key);
  if (sb && sb.currentSessionId === ss.id) sb.statusUpdatedAt = ss.updatedAt;
}

// Copies the session's filesystem into a new snapshot; the sandbox now resumes from it.
function takeSnapshot(ss, sb, expiration, method) {
  const id = newId('snap');
  const dir = path.join(STATE.baseDir, 'snapshots', id);
  fs.mkdirSync(dir, { recursive: true });
  fs.cpSync(ss._.root, path.join(dir, 'root'), { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  const t = now();
  const exp = expiration ?? sb?.snapshotExpiration ?? DEFAULT_SNAPSHOT_EXPIRATION_MS;
  const sn = {
    id,
    sourceSessionId: ss.id,
    status: 'created',
    sizeBytes: dirSize(path.join(dir, 'root')),
    createdAt: t,
    updatedAt: t,
    expiresAt: exp === 0 ? undefined : t + exp,
    creationMethod: method,
    parentId: sb?.currentSnapshotId,
    _: { dir, root: path.join(dir, 'root'), key: ss._.key },
  };
  STATE.snapshots.set(id, sn);
  ss.snapshottedAt = t;
  if (sb) {
    sb.currentSnapshotId = id;
    sb.updatedAt = t;
  }
  return sn;
}

function dirSize(dir) {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) {
      try {
        total += fs.statSync(path.join(e.parentPath ?? e.path, e.name)).size;
      } catch {
        /* vanished */
      }
    }
  }
  return total;
}

// A stopped session's files. The killed sandbox's processes can still be making files for a
// moment (a syscall in progress completes before SIGKILL lands, and killAll's wait is
// bounded): a directory not yet empty is tried again, not a stop failing with a 500.
function removeSessionRoot(ss) {
  fs.rmSync(path.dirname(ss._.root), { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
}

// Stops a session: `stopping` (CONFIG.stopMs), then for a persistent sandbox or an explicit
// snapshot `snapshotting` (CONFIG.snapshotMs) and the copy, then `stopped` with the files gone.
// Concurrent stops share one run. Resolves to the snapshot taken, if any.
function stopSession(ss, { reason = 'stop', snapshot = false, expiration } = {}) {
  if (ss._.stopping) return ss._.stopping;
  if (ss.status !== 'running') return Promise.resolve(null);
  const sb = STATE.sandboxes.get(ss._.key);
  ss._.stopping = (async () => {
    clearTimeout(ss._.timer);
    ss.requestedStopAt = now();
    setStatus(ss, snapshot ? 'snapshotting' : 'stopping');
    // Processes die first; a stream still waiting on a command gets the API's error line.
    const gone = ss._.procs.killAll();
    for (const cmd of ss._.commands.values()) closeCommandStreams(cmd, reason);
    await gone;
    if (!snapshot && CONFIG.stopMs) await sleep(CONFIG.stopMs);
    let sn = null;
    if (snapshot || (sb && sb.persistent)) {
      setStatus(ss, 'snapshotting');
      if (CONFIG.snapshotMs) await sleep(CONFIG.snapshotMs);
      sn = takeSnapshot(ss, sb, expiration, snapshot ? 'snapshot' : 'stop');
    }
    ss.stoppedAt = now();
    ss.duration = ss.stoppedAt - ss.startedAt;
    if (sb) sb.totalDurationMs += ss.duration;
    setStatus(ss, 'stopped');
    removeSessionRoot(ss);
    // Commands and their output go with the session (later calls get 410).
    for (const cmd of ss._.commands.values()) cmd.logs = [];
    return sn;
  })().finally(() => {
    ss._.stopping = null;
  });
  return ss._.stopping;
}

// A session whose VM failed: `failed`, its processes and files gone, no snapshot taken (the
// sandbox resumes from the one it had). Not running, so neither billed nor listed as running.
async function failSession(ss) {
  clearTimeout(ss._.timer);
  await ss._.procs.killAll();
  ss.stoppedAt = now();
  ss.duration = ss.stoppedAt - ss.startedAt;
  setStatus(ss, 'failed');
  removeSessionRoot(ss);
}

// Ends a session without a snapshot (delete, reset, a vanished sandbox): `stopping` while its
// processes die, then `stopped` with its files gone. A stopped session is left as it is.
async function killSession(ss) {
  clearTimeout(ss._.timer);
  if (ss.status === 'stopped' || ss.status === 'failed') return;
  setStatus(ss, 'stopping');
  const gone = ss._.procs.killAll();
  for (const cmd of ss._.commands.values()) closeCommandStreams(cmd, 'deleted');
  await gone;
  ss.stoppedAt = now();
  ss.duration = ss.stoppedAt - ss.startedAt;
  setStatus(ss, 'stopped');
  removeSessionRoot(ss);
}

// The session a per-session call addresses, which must be running: 410 once stopped, 422
// while stopping or snapshotting (the SDK resumes on both), 404 when unknown.
function runningSession(ctx) {
  const ss = STATE.sessions.get(ctx.params.sid);
  if (!ss || !STATE.sandboxes.has(ss._.key)) throw apiError(404, 'not_found', `Session not found: ${ctx.params.sid}`);
  ctx.sessionId = ss.id;
  const e = notRunningError(ss);
  if (e) throw e;
  return ss;
}

function notRunningError(ss) {
  if (ss.status === 'stopping') return apiError(422, 'sandbox_stopping', 'Sandbox is stopping');
  if (ss.status === 'snapshotting') return apiError(422, 'sandbox_snapshotting', 'Sandbox is snapshotting');
  if (ss.status !== 'running') return apiError(410, 'sandbox_stopped', 'Sandbox is stopped');
  return null;
}

// ---------------------------------------------------------------------------------------------
// Sandboxes
// ---------------------------------------------------------------------------------------------

function projectOf(ctx, fromBody) {
  const q = ctx.url.searchParams;
  // An OIDC token names its project; one without project_id gets --project-id.
  const fromToken = ctx.claims ? (ctx.claims.project_id ?? OPTS.projectId) : undefined;
  const p = fromBody ?? q.get('projectId') ?? q.get('project') ?? fromToken;
  if (!p) throw bad('projectId is required');
  return p;
}

function findSandbox(ctx) {
  const project = projectOf(ctx);
  const sb = STATE.sandboxes.get(`${project}/${ctx.params.name}`);
  if (!sb) throw apiError(404, 'not_found', `Sandbox not found: ${ctx.params.name}`);
  ctx.sandboxName = sb.name;
  return sb;
}

async function hCreate(ctx) {
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  if (!isObj(b)) throw bad('body must be a JSON object');
  const v3 = ctx.url.pathname.startsWith('/v3/');
  const project = projectOf(ctx, b.projectId);
  const name = b.name ?? `sandbox-${crypto.randomBytes(6).toString('hex')}`;
  if (typeof name !== 'string' || !NAME_RE.test(name)) throw bad(`name must match ${NAME_RE.source}`);
  ctx.sandboxName = name;
  const key = `${project}/${name}`;
  if (STATE.sandboxes.has(key)) throw apiError(409, 'sandbox_already_exists', `A sandbox named ${name} already exists`);
  if (b.runtime !== undefined && (v3 || !RUNTIMES.has(b.runtime))) {
    throw bad(v3 ? 'runtime is not accepted by /v3/sandboxes (use image)' : `runtime must be one of ${[...RUNTIMES].join(', ')}`);
  }
  if (b.image !== undefined && (typeof b.image !== 'string' || b.image.length > 255 || !v3)) {
    throw bad('image must be a string of at most 255 characters, on /v3/sandboxes');
  }
  if (b.persistent !== undefined && typeof b.persistent !== 'boolean') throw bad('persistent must be a boolean');
  if (b.mounts !== undefined) throw bad('mounts are not supported by the fake');
  const res = checkResources(b.resources);
  let source = null;
  if (b.source !== undefined) {
    if (!isObj(b.source) || b.source.type !== 'snapshot') throw bad('source: only {type:"snapshot"} is supported by the fake');
    source = liveSnapshot(b.source.snapshotId);
    if (!source) throw apiError(410, 'snapshot_not_found', `Snapshot not found: ${b.source.snapshotId}`);
  }
  const t = now();
  const sb = {
    key,
    name,
    projectId: project,
    persistent: b.persistent ?? true,
    vcpus: res.vcpus,
    memory: res.memory,
    runtime: v3 ? undefined : b.runtime ?? 'node24',
    image: v3 ? (b.image ?? IMAGE) : undefined,
    timeout: checkTimeout(b.timeout, DEFAULT_TIMEOUT_MS),
    networkPolicy: checkNetworkPolicy(b.networkPolicy),
    env: checkEnv(b.env),
    tags: checkTags(b.tags),
    ports: checkPorts(b.ports),
    snapshotExpiration: checkExpiration(b.snapshotExpiration, 'snapshotExpiration'),
    keepLastSnapshots: isObj(b.keepLastSnapshots) ? b.keepLastSnapshots : undefined,
    createdAt: t,
    updatedAt: t,
    statusUpdatedAt: t,
    currentSessionId: null,
    currentSnapshotId: source ? source.id : undefined,
    totalDurationMs: 0,
  };
  STATE.sandboxes.set(key, sb);
  const ss = startSession(sb, source);
  ctx.sessionId = ss.id;
  reply(ctx, 200, { sandbox: sandboxView(sb), session: sessionView(ss), routes: routesOf(sb) });
}

async function hGet(ctx) {
  const sb = findSandbox(ctx);
  let ss = currentSession(sb);
  let resumed = false;
  if (ctx.url.searchParams.get('resume') === 'true' && ss.status !== 'running') {
    // A resume during a stop waits for it, as the SDK's withResume expects.
    if (ss._.stopping) await ss._.stopping;
    if (!STATE.sandboxes.has(sb.key)) throw apiError(404, 'not_found', `Sandbox not found: ${sb.name}`);
    ss = currentSession(sb);
    if (ss.status !== 'running') {
      let from = null;
      if (sb.currentSnapshotId) {
        from = liveSnapshot(sb.currentSnapshotId);
        if (!from) throw apiError(410, 'snapshot_not_found', `Snapshot ${sb.currentSnapshotId} of sandbox ${sb.name} has expired`);
      }
      ss = startSession(sb, from);
      resumed = true;
      if (CONFIG.failResumes > 0) {
        CONFIG.failResumes -= 1;
        await failSession(ss);
      }
    }
  }
  ctx.sessionId = ss.id;
  const body = { sandbox: sandboxView(sb), session: sessionView(ss), routes: routesOf(sb) };
  if (resumed) body.resumed = true;
  reply(ctx, 200, body);
}

async function hList(ctx) {
  const q = ctx.url.searchParams;
  const project = projectOf(ctx);
  let list = [...STATE.sandboxes.values()].filter((sb) => sb.projectId === project);
  const prefix = q.get('namePrefix');
  if (prefix) list = list.filter((sb) => sb.name.startsWith(prefix));
  for (const tag of q.getAll('tags')) {
    const i = tag.indexOf(':');
    if (i <= 0) throw bad(`tags filter ${JSON.stringify(tag)} must be key:value`);
    const k = tag.slice(0, i);
    const v = tag.slice(i + 1);
    list = list.filter((sb) => sb.tags[k] === v);
  }
  const sortBy = q.get('sortBy') || 'createdAt';
  if (!['createdAt', 'name', 'statusUpdatedAt'].includes(sortBy)) throw bad('sortBy must be createdAt, name or statusUpdatedAt');
  const dir = q.get('sortOrder') === 'asc' ? 1 : -1;
  list.sort((a, b) => {
    const x = a[sortBy];
    const y = b[sortBy];
    if (x === y) return a.name < b.name ? -dir : dir;
    return x < y ? -dir : dir;
  });
  const limit = q.has('limit') ? Number(q.get('limit')) : 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw bad('limit must be 1-200');
  const start = q.has('cursor') ? Number(Buffer.from(q.get('cursor'), 'base64url').toString()) : 0;
  if (!Number.isInteger(start) || start < 0) throw bad('bad cursor');
  const page = list.slice(start, start + limit);
  const next = start + limit < list.length ? Buffer.from(String(start + limit)).toString('base64url') : null;
  reply(ctx, 200, { sandboxes: page.map(sandboxView), pagination: { count: page.length, next } });
}

async function hUpdate(ctx) {
  const sb = findSandbox(ctx);
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  if (!isObj(b)) throw bad('body must be a JSON object');
  // Everything is validated before anything changes.
  const res = b.resources !== undefined ? checkResources(b.resources) : null;
  const timeout = b.timeout !== undefined ? checkTimeout(b.timeout) : undefined;
  const np = b.networkPolicy !== undefined ? checkNetworkPolicy(b.networkPolicy) : null;
  const tags = b.tags !== undefined ? checkTags(b.tags) : null;
  const ports = b.ports !== undefined ? checkPorts(b.ports) : null;
  const exp = checkExpiration(b.snapshotExpiration, 'snapshotExpiration');
  if (b.persistent !== undefined && typeof b.persistent !== 'boolean') throw bad('persistent must be a boolean');
  if (b.currentSnapshotId !== undefined && !liveSnapshot(b.currentSnapshotId)) {
    throw apiError(404, 'not_found', `Snapshot not found: ${b.currentSnapshotId}`);
  }
  if (b.persistent !== undefined) sb.persistent = b.persistent;
  if (res) Object.assign(sb, res);
  if (timeout !== undefined) sb.timeout = timeout;
  if (np) sb.networkPolicy = np;
  if (tags) sb.tags = tags;
  if (ports) sb.ports = ports;
  if (exp !== undefined) sb.snapshotExpiration = exp;
  if (b.keepLastSnapshots !== undefined) sb.keepLastSnapshots = isObj(b.keepLastSnapshots) ? b.keepLastSnapshots : undefined;
  if (b.currentSnapshotId !== undefined) sb.currentSnapshotId = b.currentSnapshotId;
  sb.updatedAt = now();
  // The sandbox's settings apply to its next session: the SDK lengthens a running session
  // itself (extend-timeout) and changes its network with the network-policy call.
  const out = { sandbox: sandboxView(sb) };
  if (ports) out.routes = routesOf(sb);
  reply(ctx, 200, out);
}

async function hDelete(ctx) {
  const sb = findSandbox(ctx);
  const ss = currentSession(sb);
  // A delete stops the running session without a snapshot.
  if (ss._.stopping) await ss._.stopping;
  await killSession(ss);
  const view = sandboxView(sb);
  STATE.sandboxes.delete(sb.key);
  STATE.deleted.push(sb.name);
  if (ctx.url.searchParams.get('deleteOrphanSnapshots') === 'true') {
    for (const sn of STATE.snapshots.values()) {
      if (sn._.key === sb.key) {
        sn.status = 'deleted';
        sn.updatedAt = now();
        fs.rmSync(sn._.dir, { recursive: true, force: true });
      }
    }
  }
  reply(ctx, 200, { sandbox: view });
}

// ---------------------------------------------------------------------------------------------
// Per-session calls
// ---------------------------------------------------------------------------------------------

async function hGetSession(ctx) {
  const ss = STATE.sessions.get(ctx.params.sid);
  const sb = ss && STATE.sandboxes.get(ss._.key);
  if (!sb) throw apiError(404, 'not_found', `Session not found: ${ctx.params.sid}`);
  ctx.sessionId = ss.id;
  reply(ctx, 200, { session: sessionView(ss), routes: routesOf(sb) });
}

async function hListSessions(ctx) {
  const project = projectOf(ctx);
  const name = ctx.url.searchParams.get('name');
  const list = [...STATE.sessions.values()].filter((ss) => {
    const sb = STATE.sandboxes.get(ss._.key);
    return sb && sb.projectId === project && (!name || sb.name === name);
  });
  list.sort((a, b) => b.createdAt - a.createdAt);
  reply(ctx, 200, { sessions: list.map(sessionView), pagination: { count: list.length, next: null } });
}

async function hStop(ctx) {
  const ss = STATE.sessions.get(ctx.params.sid);
  const sb = ss && STATE.sandboxes.get(ss._.key);
  if (!sb) throw apiError(404, 'not_found', `Session not found: ${ctx.params.sid}`);
  ctx.sessionId = ss.id;
  // The stop blocks until the session is stopped (and snapshotted when persistent).
  const sn = await stopSession(ss);
  const out = { session: sessionView(ss), sandbox: sandboxView(sb) };
  if (sn) out.snapshot = snapshotView(sn);
  reply(ctx, 200, out);
}

async function hExtendTimeout(ctx) {
  const ss = runningSession(ctx);
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  if (!Number.isInteger(b.duration) || b.duration < 1000) throw apiError(400, 'sandbox_timeout_invalid', 'duration must be an integer of at least 1000 ms');
  if (ss.timeout + b.duration > CONFIG.maxTimeoutMs) {
    throw apiError(400, 'sandbox_timeout_invalid', `the timeout would exceed the maximum of ${CONFIG.maxTimeoutMs} ms`);
  }
  ss.timeout += b.duration;
  ss.updatedAt = now();
  armTimeout(ss);
  reply(ctx, 200, { session: sessionView(ss) });
}

async function hNetworkPolicy(ctx) {
  const ss = runningSession(ctx);
  const np = checkNetworkPolicy((await readJson(ctx, MAX_BODY_BYTES)) ?? {});
  ss.networkPolicy = np;
  ss.updatedAt = now();
  const sb = STATE.sandboxes.get(ss._.key);
  sb.networkPolicy = np;
  sb.updatedAt = ss.updatedAt;
  reply(ctx, 200, { session: sessionView(ss) });
}

async function hSnapshot(ctx) {
  const ss = runningSession(ctx);
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  const expiration = checkExpiration(b.expiration, 'expiration');
  // A snapshot stops the session (the real API does too).
  const sn = await stopSession(ss, { snapshot: true, expiration });
  reply(ctx, 201, { snapshot: snapshotView(sn), session: sessionView(ss) });
}

async function hInteractive(ctx) {
  runningSession(ctx);
  throw apiError(400, 'bad_request', 'interactive sessions are not supported by the fake');
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

function baseEnv(ss, sb) {
  const home = OPTS.execMode === 'bwrap' ? HOME_DIR : path.join(ss._.root, HOME_DIR);
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: home,
    USER: SANDBOX_USER,
    LOGNAME: SANDBOX_USER,
    LANG: 'C.UTF-8',
    HOSTNAME: ss.id.slice(0, 12),
    VERCEL_SANDBOX_NAME: sb.name,
    VERCEL_SANDBOX_SESSION_ID: ss.id,
    ...sb.env,
  };
}

// Sandbox path -> host path, mapping the fake's PathError to the API's error body.
function hostPathOf(ss, p, opts) {
  try {
    return mapPath(ss._.root, ss.cwd, p, opts);
  } catch (e) {
    if (e instanceof PathError) throw apiError(e.status, e.status === 403 ? 'forbidden' : 'bad_request', e.message);
    throw e;
  }
}

function pushLog(cmd, stream, data) {
  if (data === '') return;
  if (cmd.logBytes + data.length > MAX_LOG_BYTES) return;
  cmd.logBytes += data.length;
  const line = { stream, data };
  cmd.logs.push(line);
  for (const l of cmd.listeners) l.onLog(line);
}

function finishCommand(cmd, exitCode) {
  if (cmd.exitCode !== null) return;
  cmd.exitCode = exitCode;
  cmd.durationMs = now() - cmd.startedAt;
  cmd.child = null;
  for (const l of [...cmd.listeners]) l.onDone();
  cmd.listeners.clear();
  cmd.resolveDone();
}

// The session stopped under a command: its streams end with the API's error line.
function closeCommandStreams(cmd, reason) {
  for (const l of [...cmd.listeners]) l.onClosed(reason);
  cmd.listeners.clear();
  cmd.resolveDone();
}

const SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 9: 'SIGKILL', 15: 'SIGTERM', 10: 'SIGUSR1', 12: 'SIGUSR2' };

async function startCommand(ss, sb, b) {
  if (typeof b.command !== 'string' || b.command === '') throw bad('command must be a non-empty string');
  const args = checkStringList(b.args ?? [], 'args');
  if (b.cwd !== undefined && typeof b.cwd !== 'string') throw bad('cwd must be a string');
  const env = checkEnv(b.env);
  if (b.timeout !== undefined && (!Number.isInteger(b.timeout) || b.timeout < 1)) throw bad('timeout must be a positive integer (ms)');
  const cwd = path.posix.resolve(ss.cwd, b.cwd ?? ss.cwd);
  const hostCwd = hostPathOf(ss, cwd);
  const cmd = {
    id: newId('cmd'),
    name: b.command,
    args,
    cwd,
    sessionId: ss.id,
    exitCode: null,
    startedAt: now(),
    durationMs: undefined,
    logs: [],
    logBytes: 0,
    listeners: new Set(),
    child: null,
    done: null,
    resolveDone: null,
  };
  cmd.done = new Promise((r) => (cmd.resolveDone = r));
  ss._.commands.set(cmd.id, cmd);
  const { child, error } = await ss._.procs.spawn('exec "$@"', [b.command, ...args], {
    cwd,
    hostCwd,
    env: { ...baseEnv(ss, sb), ...env },
  });
  if (ss.status !== 'running') {
    // The session began to stop while the command was starting: nothing may outlive the stop.
    if (child) ss._.procs.killAll();
    throw notRunningError(ss);
  }
  if (error) {
    // What a shell reports when the working directory is missing.
    setImmediate(() => {
      pushLog(cmd, 'stderr', `${error}\n`);
      finishCommand(cmd, 1);
    });
    return cmd;
  }
  cmd.child = child;
  for (const [name, st] of [['stdout', child.stdout], ['stderr', child.stderr]]) {
    const dec = new StringDecoder('utf8');
    st.on('data', (d) => pushLog(cmd, name, dec.write(d)));
    st.on('end', () => pushLog(cmd, name, dec.end()));
  }
  child.stdin.end();
  let timer = null;
  if (b.timeout) {
    timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, b.timeout);
  }
  child.on('close', (code, signal) => {
    clearTimeout(timer);
    const signo = signal ? os.constants.signals[signal] : 0;
    finishCommand(cmd, code ?? 128 + signo);
  });
  return cmd;
}

// Streams NDJSON lines to ctx; returns {line(obj), end()}. Faults of action "cut" end the
// connection after `bytes` bytes of the body.
function ndjsonStream(ctx) {
  const f = ctx.fault;
  if (f && f.after && (f.action === 'drop' || f.action === 'status')) {
    // The command runs (or the logs exist); only the answer is lost or replaced.
    reply(ctx, 200, null);
    return { line() {}, end() {} };
  }
  ctx.status = 200;
  ctx.res.writeHead(200, { 'Content-Type': NDJSON, 'Cache-Control': 'no-store' });
  ctx.replied = true;
  let closed = false;
  return {
    line(obj) {
      if (closed) return;
      if (!writeBody(ctx, Buffer.from(JSON.stringify(obj) + '\n'))) closed = true;
    },
    end() {
      if (closed) return;
      closed = true;
      ctx.res.end();
    },
  };
}

// Writes part of a body, honouring a "cut" fault; false once the connection is cut.
function writeBody(ctx, buf) {
  const f = ctx.fault;
  if (f && f.action === 'cut') {
    const room = (f.bytes ?? 0) - (ctx.sent ?? 0);
    if (buf.length >= room) {
      if (room > 0) ctx.res.write(buf.subarray(0, room));
      ctx.sent = (ctx.sent ?? 0) + Math.max(0, room);
      ctx.cut = true;
      // Flush what was written, then break the connection mid-body.
      setImmediate(() => ctx.req.socket.destroy());
      return false;
    }
  }
  ctx.sent = (ctx.sent ?? 0) + buf.length;
  ctx.res.write(buf);
  return true;
}

function followCommand(ctx, cmd, out, { logs, onDone }) {
  const closedLine = (reason) => ({
    stream: 'error',
    data: {
      code: 'sandbox_stream_closed',
      message: reason === 'timeout' ? 'The sandbox timed out and the stream was closed' : 'The sandbox stopped and the stream was closed',
    },
  });
  const listener = {
    onLog: (line) => {
      if (logs) out.line(line);
    },
    onDone: () => {
      onDone?.();
      out.end();
    },
    onClosed: (reason) => {
      out.line(closedLine(reason));
      out.end();
    },
  };
  if (logs) for (const l of cmd.logs) out.line(l);
  if (cmd.exitCode !== null) {
    listener.onDone();
    return;
  }
  cmd.listeners.add(listener);
  ctx.res.on('close', () => cmd.listeners.delete(listener));
}

async function hRunCommand(ctx) {
  const ss = runningSession(ctx);
  const sb = STATE.sandboxes.get(ss._.key);
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  if (!isObj(b)) throw bad('body must be a JSON object');
  const cmd = await startCommand(ss, sb, b);
  ctx.commandId = cmd.id;
  if (b.wait !== true) {
    reply(ctx, 200, { command: commandView(cmd) });
    return;
  }
  const out = ndjsonStream(ctx);
  out.line({ command: { ...commandView(cmd), exitCode: null } });
  followCommand(ctx, cmd, out, { logs: b.logs === true, onDone: () => out.line({ command: commandView(cmd) }) });
}

function findCommand(ctx) {
  const ss = runningSession(ctx);
  const cmd = ss._.commands.get(ctx.params.cid);
  if (!cmd) throw apiError(404, 'not_found', `Command not found: ${ctx.params.cid}`);
  ctx.commandId = cmd.id;
  return { ss, cmd };
}

async function hGetCommand(ctx) {
  const { ss, cmd } = findCommand(ctx);
  if (ctx.url.searchParams.get('wait') === 'true' && cmd.exitCode === null) {
    await cmd.done;
    // The session stopped under the wait: the same answer as a call after the stop.
    if (cmd.exitCode === null) throw notRunningError(ss) ?? apiError(410, 'sandbox_stopped', 'Sandbox is stopped');
  }
  reply(ctx, 200, { command: commandView(cmd) });
}

async function hCommandLogs(ctx) {
  const { cmd } = findCommand(ctx);
  const out = ndjsonStream(ctx);
  followCommand(ctx, cmd, out, { logs: true });
}

async function hKillCommand(ctx) {
  const { cmd } = findCommand(ctx);
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  const signo = b.signal ?? 15;
  const name = SIGNALS[signo];
  if (!name) throw bad(`signal must be one of ${Object.keys(SIGNALS).join(', ')}`);
  if (cmd.exitCode === null && cmd.child) {
    try {
      process.kill(-cmd.child.pid, name);
    } catch {
      /* already gone */
    }
    await Promise.race([cmd.done, sleep(KILL_WAIT_MS)]);
  }
  reply(ctx, 200, { command: commandView(cmd) });
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

async function fsBody(ctx) {
  const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
  if (!isObj(b) || typeof b.path !== 'string' || b.path === '') throw bad('path is required');
  if (b.cwd !== undefined && typeof b.cwd !== 'string') throw bad('cwd must be a string');
  return b;
}

async function hReadFile(ctx) {
  const ss = runningSession(ctx);
  const b = await fsBody(ctx);
  const abs = path.posix.resolve(b.cwd ? path.posix.resolve(ss.cwd, b.cwd) : ss.cwd, b.path);
  const host = hostPathOf(ss, abs);
  let st;
  try {
    st = fs.statSync(host);
  } catch {
    reply(ctx, 404, null); // no body: the SDK then returns null
    return;
  }
  if (st.isDirectory()) throw bad(`${abs} is a directory`);
  const data = fs.readFileSync(host);
  reply(ctx, 200, data, { 'Content-Type': 'application/octet-stream' });
}

async function hMkdir(ctx) {
  const ss = runningSession(ctx);
  const b = await fsBody(ctx);
  const abs = path.posix.resolve(b.cwd ? path.posix.resolve(ss.cwd, b.cwd) : ss.cwd, b.path);
  const host = hostPathOf(ss, abs, { write: true });
  // Not recursive unless asked: the real API fails on a missing parent or an existing path.
  try {
    fs.mkdirSync(host, { recursive: b.recursive === true });
  } catch (e) {
    throw bad(`mkdir ${abs}: ${e.code === 'EEXIST' ? 'file exists' : e.code === 'ENOENT' ? 'no such file or directory' : e.message}`);
  }
  reply(ctx, 200, {});
}

// Parses an uncompressed tar (ustar, with pax "path" records and GNU long names) into
// [{name, type: 'file'|'dir'|'symlink', mode, data, linkname}].
function parseTar(buf) {
  const out = [];
  let off = 0;
  let longName = null;
  const str = (b) => {
    const z = b.indexOf(0);
    return b.subarray(0, z < 0 ? b.length : z).toString('utf8');
  };
  const oct = (b) => parseInt(str(b).trim() || '0', 8);
  while (off + 512 <= buf.length) {
    const h = buf.subarray(off, off + 512);
    if (h.every((x) => x === 0)) break;
    const size = oct(h.subarray(124, 136));
    const type = String.fromCharCode(h[156] || 48);
    const prefix = str(h.subarray(345, 500));
    let name = str(h.subarray(0, 100));
    if (prefix) name = `${prefix}/${name}`;
    const data = buf.subarray(off + 512, off + 512 + size);
    if (data.length < size) throw bad('truncated tar archive');
    off += 512 + Math.ceil(size / 512) * 512;
    if (type === 'x') {
      const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(data.toString('utf8'));
      if (m) longName = m[1];
      continue;
    }
    if (type === 'L') {
      longName = str(data);
      continue;
    }
    if (type === 'g') continue;
    if (longName !== null) {
      name = longName;
      longName = null;
    }
    const mode = oct(h.subarray(100, 108)) & 0o7777;
    if (type === '0' || type === '\0' || type === '7') out.push({ name, type: 'file', mode, data });
    else if (type === '5') out.push({ name, type: 'dir', mode });
    else if (type === '2') out.push({ name, type: 'symlink', linkname: str(h.subarray(157, 257)) });
    else throw bad(`tar entry ${JSON.stringify(name)} has an unsupported type ${JSON.stringify(type)}`);
  }
  return out;
}

async function hWriteFiles(ctx) {
  const ss = runningSession(ctx);
  const body = await readBody(ctx, MAX_BODY_BYTES);
  const xcwd = ctx.req.headers['x-cwd'];
  const extractDir = path.posix.resolve(ss.cwd, typeof xcwd === 'string' && xcwd ? xcwd : ss.cwd);
  let tar;
  try {
    tar = zlib.gunzipSync(body, { maxOutputLength: MAX_BODY_BYTES });
  } catch (e) {
    throw bad(`the body is not a gzip'd tar: ${e.message}`);
  }
  const entries = parseTar(tar);
  // Every target is checked before anything is written.
  const plan = entries.map((e) => {
    const abs = path.posix.resolve(extractDir, e.name);
    return { e, abs, host: hostPathOf(ss, abs, { write: true }) };
  });
  for (const { e, abs, host } of plan) {
    try {
      if (e.type === 'dir') {
        fs.mkdirSync(host, { recursive: true });
        continue;
      }
      fs.mkdirSync(path.dirname(host), { recursive: true });
      hostPathOf(ss, path.posix.dirname(abs), { write: true }); // a parent made above must stay inside
      if (e.type === 'symlink') {
        fs.rmSync(host, { force: true });
        fs.symlinkSync(e.linkname, host);
      } else {
        // Whole and with its mode before it appears, as tar extracts it: a
        // set-up waiting for the archive's last file may remove it at once.
        const part = `${host}.fake-part-${process.pid}`;
        fs.writeFileSync(part, e.data);
        fs.chmodSync(part, e.mode || 0o644);
        fs.renameSync(part, host);
      }
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw bad(`write ${abs}: ${err.message}`);
    }
  }
  reply(ctx, 200, {});
}

// ---------------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------------

async function hListSnapshots(ctx) {
  const project = projectOf(ctx);
  const name = ctx.url.searchParams.get('name');
  const list = [...STATE.snapshots.values()].filter((sn) => {
    const [p, n] = [sn._.key.slice(0, sn._.key.indexOf('/')), sn._.key.slice(sn._.key.indexOf('/') + 1)];
    return p === project && (!name || n === name);
  });
  list.sort((a, b) => b.createdAt - a.createdAt);
  reply(ctx, 200, { snapshots: list.map(snapshotView), pagination: { count: list.length, next: null } });
}

function findSnapshot(ctx) {
  const sn = STATE.snapshots.get(ctx.params.snap);
  if (!sn || snapshotExpired(sn)) throw apiError(404, 'not_found', `Snapshot not found: ${ctx.params.snap}`);
  return sn;
}

async function hGetSnapshot(ctx) {
  reply(ctx, 200, { snapshot: snapshotView(findSnapshot(ctx)) });
}

async function hDeleteSnapshot(ctx) {
  const sn = findSnapshot(ctx);
  sn.status = 'deleted';
  sn.updatedAt = now();
  fs.rmSync(sn._.dir, { recursive: true, force: true });
  reply(ctx, 200, { snapshot: snapshotView(sn) });
}

// ---------------------------------------------------------------------------------------------
// Admin API (/__fake/..., no auth, neither logged nor faulted)
// ---------------------------------------------------------------------------------------------

function liveProcesses(ss) {
  return ss._.procs.procs.size + (ss._.procs.anchor ? 1 : 0);
}

function fakeView(sb) {
  const sessions = [...STATE.sessions.values()].filter((ss) => ss._.key === sb.key);
  return {
    ...sandboxView(sb),
    projectId: sb.projectId,
    env: sb.env,
    ports: sb.ports,
    sessions: sessions.map((ss) => ({
      ...sessionView(ss),
      hostRoot: ss.status === 'stopped' || ss.status === 'failed' ? null : ss._.root,
      processes: liveProcesses(ss),
      commands: [...ss._.commands.values()].map((c) => ({ ...commandView(c), running: c.exitCode === null && !!c.child })),
    })),
  };
}

async function aState(ctx) {
  const sandboxes = [...STATE.sandboxes.values()].map(fakeView);
  const running = [...STATE.sessions.values()].filter((ss) => ss.status !== 'stopped' && ss.status !== 'failed');
  reply(ctx, 200, {
    sandboxes,
    snapshots: [...STATE.snapshots.values()].map((sn) => ({ ...snapshotView(sn), sandbox: sn._.key })),
    runningSessions: running.map((ss) => ss.id),
    liveProcesses: [...STATE.sessions.values()].reduce((n, ss) => n + liveProcesses(ss), 0),
    deleted: STATE.deleted,
    // What arrived and is still being served (a delayed request a client may give up on).
    inFlight: [...STATE.inFlight].map((c) => ({ method: c.req.method, path: c.url.pathname })),
    faults: FAULTS.list(),
    config: CONFIG,
    execMode: OPTS.execMode,
  });
}

const ADMIN_LOG = logAndFaultHandlers({ log: LOG, faults: FAULTS, reply, readJson: (ctx) => readJson(ctx, MAX_BODY_BYTES) });

async function aConfig(ctx) {
  if (ctx.req.method === 'POST') {
    const b = (await readJson(ctx, MAX_BODY_BYTES)) ?? {};
    for (const k of Object.keys(b)) {
      if (!(k in CONFIG)) throw bad(`unknown config key ${k}`);
      if (!Number.isInteger(b[k]) || b[k] < 0) throw bad(`${k} must be a non-negative integer`);
    }
    Object.assign(CONFIG, b);
  }
  reply(ctx, 200, CONFIG);
}

async function removeAll() {
  await Promise.all([...STATE.sessions.values()].map((ss) => (ss._.stopping ? ss._.stopping.then(() => killSession(ss)) : killSession(ss))));
  STATE.sandboxes.clear();
  STATE.sessions.clear();
  STATE.snapshots.clear();
  STATE.deleted = [];
  for (const d of ['sessions', 'snapshots']) fs.rmSync(path.join(STATE.baseDir, d), { recursive: true, force: true });
}

async function aReset(ctx) {
  await removeAll();
  FAULTS.clear();
  LOG.clear();
  resetConfig();
  reply(ctx, 204, null);
}

// As if the session's timeout had passed now.
async function aExpireSession(ctx) {
  const ss = STATE.sessions.get(ctx.params.sid);
  if (!ss) throw apiError(404, 'not_found', `Session not found: ${ctx.params.sid}`);
  await stopSession(ss, { reason: 'timeout' });
  reply(ctx, 200, { session: sessionView(ss) });
}

// As if the snapshot's expiry had passed now.
async function aExpireSnapshot(ctx) {
  const sn = STATE.snapshots.get(ctx.params.snap);
  if (!sn) throw apiError(404, 'not_found', `Snapshot not found: ${ctx.params.snap}`);
  sn.expiresAt = now();
  liveSnapshot(sn.id);
  reply(ctx, 200, { snapshot: snapshotView(sn) });
}

// The sandbox vanishes at once (deleted from the dashboard).
async function aVanish(ctx) {
  const sb = [...STATE.sandboxes.values()].find((x) => x.name === ctx.params.name);
  if (!sb) throw apiError(404, 'not_found', `Sandbox not found: ${ctx.params.name}`);
  STATE.sandboxes.delete(sb.key);
  STATE.deleted.push(sb.name);
  await Promise.all([...STATE.sessions.values()].filter((ss) => ss._.key === sb.key).map(killSession));
  reply(ctx, 204, null);
}

async function aHealth(ctx) {
  reply(ctx, 200, { ok: true, port: STATE.port });
}

// ---------------------------------------------------------------------------------------------
// Routing and the request pipeline
// ---------------------------------------------------------------------------------------------

const SEG = '([^/]+)';
const SESS = `/v2/sandboxes/sessions/${SEG}`;
const ROUTES = [
  ['POST', '/v2/sandboxes', 'createSandbox', hCreate],
  ['POST', '/v3/sandboxes', 'createSandbox', hCreate],
  ['GET', '/v2/sandboxes', 'listSandboxes', hList],
  ['GET', '/v2/sandboxes/sessions', 'listSessions', hListSessions],
  ['GET', '/v2/sandboxes/snapshots', 'listSnapshots', hListSnapshots],
  ['GET', `/v2/sandboxes/snapshots/${SEG}`, 'getSnapshot', hGetSnapshot, ['snap']],
  ['DELETE', `/v2/sandboxes/snapshots/${SEG}`, 'deleteSnapshot', hDeleteSnapshot, ['snap']],
  ['GET', SESS, 'getSession', hGetSession, ['sid']],
  ['POST', `${SESS}/stop`, 'stopSession', hStop, ['sid']],
  ['POST', `${SESS}/extend-timeout`, 'extendTimeout', hExtendTimeout, ['sid']],
  ['POST', `${SESS}/network-policy`, 'updateNetworkPolicy', hNetworkPolicy, ['sid']],
  ['POST', `${SESS}/snapshot`, 'createSnapshot', hSnapshot, ['sid']],
  ['POST', `${SESS}/interactive`, 'openInteractive', hInteractive, ['sid']],
  ['POST', `${SESS}/cmd`, 'runCommand', hRunCommand, ['sid']],
  ['GET', `${SESS}/cmd/${SEG}`, 'getCommand', hGetCommand, ['sid', 'cid']],
  ['GET', `${SESS}/cmd/${SEG}/logs`, 'getLogs', hCommandLogs, ['sid', 'cid']],
  ['POST', `${SESS}/cmd/${SEG}/kill`, 'killCommand', hKillCommand, ['sid', 'cid']],
  ['POST', `${SESS}/fs/read`, 'readFile', hReadFile, ['sid']],
  ['POST', `${SESS}/fs/write`, 'writeFiles', hWriteFiles, ['sid']],
  ['POST', `${SESS}/fs/mkdir`, 'mkDir', hMkdir, ['sid']],
  ['GET', `/v2/sandboxes/${SEG}`, 'getSandbox', hGet, ['name']],
  ['PATCH', `/v2/sandboxes/${SEG}`, 'updateSandbox', hUpdate, ['name']],
  ['DELETE', `/v2/sandboxes/${SEG}`, 'deleteSandbox', hDelete, ['name']],
  // Admin
  ['GET', '/__fake/health', 'admin', aHealth],
  ['GET', '/__fake/state', 'admin', aState],
  ['GET', '/__fake/requests', 'admin', ADMIN_LOG.requests],
  ['DELETE', '/__fake/requests', 'admin', ADMIN_LOG.clearRequests],
  ['POST', '/__fake/faults', 'admin', ADMIN_LOG.addFaults],
  ['GET', '/__fake/faults', 'admin', ADMIN_LOG.listFaults],
  ['DELETE', '/__fake/faults', 'admin', ADMIN_LOG.clearFaults],
  ['GET', '/__fake/config', 'admin', aConfig],
  ['POST', '/__fake/config', 'admin', aConfig],
  ['POST', '/__fake/reset', 'admin', aReset],
  ['POST', `/__fake/sessions/${SEG}/expire`, 'admin', aExpireSession, ['sid']],
  ['POST', `/__fake/snapshots/${SEG}/expire`, 'admin', aExpireSnapshot, ['snap']],
  ['DELETE', `/__fake/sandboxes/${SEG}`, 'admin', aVanish, ['name']],
].map(([method, p, name, handler, keys = []]) => ({ method, re: new RegExp(`^${p}$`), name, handler, keys }));

function matchRoute(method, pathname) {
  let pathOnly = false;
  for (const r of ROUTES) {
    const m = r.re.exec(pathname);
    if (!m) continue;
    if (r.method !== method) {
      pathOnly = true;
      continue;
    }
    const params = {};
    r.keys.forEach((k, i) => (params[k] = decodeURIComponent(m[i + 1])));
    return { route: r, params };
  }
  return { route: null, pathOnly };
}

// Every non-streamed answer goes through here, so a fault can replace it or cut it.
function reply(ctx, status, body, headers = {}) {
  if (ctx.replied) return;
  ctx.replied = true;
  const f = ctx.fault;
  if (f && f.after && (f.action === 'drop' || f.action === 'status')) {
    ctx.fault = null;
    if (f.action === 'drop') {
      ctx.status = 0;
      ctx.req.socket.destroy();
      return;
    }
    ctx.replied = false;
    sendFaultStatus(ctx, f);
    return;
  }
  let payload = body;
  const h = { ...headers };
  if (payload === undefined || payload === null) {
    payload = Buffer.alloc(0);
  } else if (!Buffer.isBuffer(payload)) {
    payload = Buffer.from(JSON.stringify(payload));
    h['Content-Type'] ??= 'application/json; charset=utf-8';
  }
  h['Content-Length'] = payload.length;
  ctx.status = status;
  ctx.res.writeHead(status, h);
  if (writeBody(ctx, payload)) ctx.res.end();
}

function replyError(ctx, e) {
  reply(ctx, e.status, { error: { code: e.extra?.code || 'bad_request', message: e.message } });
}

function sendFaultStatus(ctx, f) {
  const status = f.status;
  const headers = { ...(f.headers || {}) };
  if (f.retryAfter !== undefined) headers['Retry-After'] = String(f.retryAfter);
  if (f.body !== undefined) {
    reply(ctx, status, f.body, headers);
    return;
  }
  const code = f.code || (status === 429 ? 'too_many_requests' : status >= 500 ? 'internal_server_error' : 'injected_fault');
  const message = f.message || (status === 429 ? 'concurrency limit exceeded' : `injected fault: ${http.STATUS_CODES[status] || status}`);
  reply(ctx, status, { error: { code, message } }, headers);
}

// Who is calling: a token equal to --token, or an (unverified) OIDC JWT whose owner_id is the
// fake's team. Returns {ok, claims, why}; never the credential itself.
function authenticate(req) {
  const h = req.headers.authorization;
  if (!h || !h.startsWith('Bearer ')) return { ok: false, auth: 'missing', why: 'missing bearer token' };
  const tok = h.slice(7);
  if (tok === OPTS.token) return { ok: true, auth: 'token' };
  const parts = tok.split('.');
  if (parts.length === 3) {
    let claims;
    try {
      claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
    } catch {
      return { ok: false, auth: 'bad', why: 'malformed token' };
    }
    if (!isObj(claims) || claims.owner_id !== OPTS.teamId) return { ok: false, auth: 'bad', why: 'token is not for this team' };
    if (typeof claims.exp === 'number' && claims.exp * 1000 <= now()) return { ok: false, auth: 'expired', why: 'token expired' };
    return { ok: true, auth: 'oidc', claims };
  }
  return { ok: false, auth: 'bad', why: 'invalid token' };
}

function logRequest(ctx) {
  if (ctx.logged || ctx.admin) return;
  ctx.logged = true;
  LOG.add({
    ts: new Date(ctx.start).toISOString(),
    method: ctx.req.method,
    path: ctx.url.pathname,
    query: Object.fromEntries(ctx.url.searchParams),
    route: ctx.route || null,
    sandbox: ctx.sandboxName || null,
    sessionId: ctx.sessionId || null,
    commandId: ctx.commandId || null,
    auth: ctx.auth,
    status: ctx.status ?? 0,
    cut: ctx.cut ? ctx.sent : undefined,
    bytesOut: ctx.sent ?? 0,
    durationMs: Math.round(msSince(ctx.startNs) * 1000) / 1000,
    fault: ctx.faultApplied || null,
  });
}

async function handleRequest(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  const ctx = {
    req,
    res,
    url,
    start: now(),
    startNs: process.hrtime.bigint(),
    params: {},
    replied: false,
    admin: url.pathname.startsWith('/__fake/'),
  };
  if (!ctx.admin) STATE.inFlight.add(ctx);
  res.on('close', () => {
    STATE.inFlight.delete(ctx);
    logRequest(ctx);
  });
  try {
    const { route, params, pathOnly } = matchRoute(req.method, url.pathname);
    if (ctx.admin) {
      if (!route) throw apiError(404, 'not_found', `no admin route ${req.method} ${url.pathname}`);
      ctx.params = params;
      await route.handler(ctx);
      return;
    }
    if (route) {
      ctx.route = route.name;
      ctx.params = params;
    }
    if (CONFIG.delayMs) await sleep(CONFIG.delayMs);
    const fault = FAULTS.take(req.method, url.pathname);
    if (fault) {
      ctx.faultApplied = { id: fault.id, action: fault.action, status: fault.status, after: fault.after };
      if (fault.delayMs) {
        // A slow request still lands when its client gave up during the wait.
        await readBody(ctx, MAX_BODY_BYTES);
        await sleep(fault.delayMs);
      }
      if (fault.action === 'drop' && !fault.after) {
        ctx.status = 0;
        req.socket.destroy();
        return;
      }
      if (fault.action === 'status' && !fault.after) {
        sendFaultStatus(ctx, fault);
        return;
      }
      if (fault.action !== 'delay') ctx.fault = fault;
    }
    const a = authenticate(req);
    ctx.auth = a.auth;
    ctx.claims = a.claims;
    if (!a.ok) throw apiError(401, 'unauthorized', `Not authorized: ${a.why}`);
    const team = url.searchParams.get('teamId') ?? url.searchParams.get('slug');
    if (!team) throw apiError(400, 'bad_request', 'teamId is required');
    if (team !== OPTS.teamId) throw apiError(403, 'forbidden', 'You do not have access to this team');
    if (!route) {
      if (pathOnly) throw apiError(405, 'method_not_allowed', `${req.method} is not allowed on ${url.pathname}`);
      throw apiError(404, 'not_found', `No route for ${req.method} ${url.pathname}`);
    }
    await route.handler(ctx);
  } catch (e) {
    if (e instanceof HttpError) {
      if (!ctx.replied) replyError(ctx, e);
      else ctx.res.destroy();
    } else {
      process.stderr.write(`fake-vercel: internal error on ${req.method} ${url.pathname}: ${e.stack}\n`);
      if (!ctx.replied) replyError(ctx, apiError(500, 'internal_server_error', `internal error: ${e.message}`));
      else ctx.res.destroy();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------------------------

function main() {
  const base = sandboxBaseDir({ execMode: OPTS.execMode, stateDir: OPTS.stateDir, prefix: 'fake-vercel-', fail });
  STATE.baseDir = base.dir;
  STATE.ownsBaseDir = base.owned;
  serve({
    name: 'fake-vercel',
    port: OPTS.port,
    stdinWatch: OPTS.stdinWatch,
    handler: handleRequest,
    onListening: (p) => (STATE.port = p),
    onShutdown: () => {
      for (const ss of STATE.sessions.values()) {
        clearTimeout(ss._.timer);
        ss._.procs.killAll();
      }
      killAllChildren();
      if (STATE.ownsBaseDir) fs.rmSync(STATE.baseDir, { recursive: true, force: true });
    },
  });
}

main();
