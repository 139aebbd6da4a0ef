// The HTTP plumbing the provider fakes share: option parsing, request bodies, the request log
// (one JSON line per request with its serving time), fault rules, the fixed per-request delay,
// and the server prologue (loopback only, "LISTENING <port>" on stdout, clean shutdown on
// signals and on stdin EOF).
//
// Invariants: a fake built on this never listens on anything but 127.0.0.1 and never connects
// anywhere; the request log never holds a credential (only whether one was sent and was right).

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export class HttpError extends Error {
  constructor(status, message, extra = {}) {
    super(message);
    this.status = status;
    this.extra = extra;
  }
}

// Waits at least ms by the monotonic clock the request log uses (msSince):
// libuv times a setTimeout from the loop's cached time, which can be earlier
// than the hrtime a request was stamped with, so one timer alone may end a
// fraction of a millisecond short of a --delay-ms wait.
export async function sleep(ms) {
  const end = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  for (;;) {
    const left = Number(end - process.hrtime.bigint()) / 1e6;
    if (left <= 0) return;
    await new Promise((r) => setTimeout(r, Math.ceil(left)));
  }
}
export const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// A fatal start-up error: prints "<name>: <msg>" on stderr and exits 2.
export function failer(name) {
  return (msg) => {
    process.stderr.write(`${name}: ${msg}\n`);
    process.exit(2);
  };
}

// Parses argv against `spec`: {'--flag': {key, type: 'int'|'string'|'path'|'bool'|'false'}}
// ('false' sets key to false, for --no-x switches). `defaults` gives every key's start value.
export function parseOptions(argv, spec, defaults, usage, fail) {
  const o = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      process.stdout.write(usage + '\n');
      process.exit(0);
    }
    const s = spec[a];
    if (!s) fail(`unknown argument ${a}\n${usage}`);
    if (s.type === 'bool' || s.type === 'false') {
      o[s.key] = s.type === 'bool';
      continue;
    }
    if (i + 1 >= argv.length) fail(`${a} needs a value`);
    const v = argv[++i];
    if (s.type === 'int') {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) fail(`${a} needs a non-negative integer, got ${v}`);
      o[s.key] = n;
    } else if (s.type === 'path') {
      o[s.key] = path.resolve(v);
    } else {
      o[s.key] = v;
    }
  }
  return o;
}

export async function readBody(ctx, maxBytes) {
  if (ctx.body) return ctx.body;
  const chunks = [];
  let size = 0;
  for await (const c of ctx.req) {
    size += c.length;
    if (size > maxBytes) throw new HttpError(413, 'request body too large');
    chunks.push(c);
  }
  ctx.body = Buffer.concat(chunks);
  return ctx.body;
}

export async function readJson(ctx, maxBytes) {
  const b = await readBody(ctx, maxBytes);
  if (b.length === 0) return undefined;
  try {
    return JSON.parse(b.toString('utf8'));
  } catch {
    throw new HttpError(400, 'invalid JSON body');
  }
}

// Milliseconds since `startNs` (process.hrtime.bigint()), to the microsecond.
export function msSince(startNs) {
  return Number(process.hrtime.bigint() - startNs) / 1e6;
}

// The request log: in memory (for GET .../requests?since=) and, with a file, one JSON line
// per request. Each entry gets `seq`; callers give ts (ISO start), method, path, status and
// durationMs (the fake's serving time: from the request's arrival to the end of its answer,
// streams included, the --delay-ms wait included) plus their own fields.
export class RequestLog {
  constructor(file) {
    this.file = file;
    this.entries = [];
    this.seq = 0;
    if (file) fs.mkdirSync(path.dirname(file), { recursive: true });
  }

  add(entry) {
    const e = { seq: ++this.seq, ...entry };
    this.entries.push(e);
    if (this.entries.length > 100000) this.entries.shift();
    if (this.file) fs.appendFileSync(this.file, JSON.stringify(e) + '\n');
    return e;
  }

  since(seq) {
    return this.entries.filter((e) => e.seq > seq);
  }

  clear() {
    this.entries = [];
  }
}

// Fault rules. A rule: {method?, path (regex on the URL path), nth? (the first matching
// request it fires on, 1 = the next one), count? (how many matching requests it fires on from
// there, default 1), action, ...action fields}. Actions are the caller's list; the common ones:
// status {status, retryAfter?, body?, headers?}, drop (connection destroyed), delay {delayMs},
// cut {bytes} (the answer breaks off after that many body bytes).
export class Faults {
  constructor(actions) {
    this.actions = actions;
    this.rules = [];
    this.seq = 0;
  }

  // Validates and adds one rule or an array; returns the added rules' views.
  add(spec) {
    const list = Array.isArray(spec) ? spec : [spec];
    const added = [];
    for (const f of list) {
      if (!isObj(f) || typeof f.path !== 'string') throw new HttpError(400, 'each fault needs a "path" regex');
      const action = f.action || (f.status ? 'status' : f.delayMs ? 'delay' : null);
      if (!this.actions.includes(action)) throw new HttpError(400, `action must be one of ${this.actions.join(', ')}`);
      if (action === 'status' && !Number.isInteger(f.status)) throw new HttpError(400, 'a status fault needs an integer "status"');
      if (action === 'cut' && !(Number.isInteger(f.bytes) && f.bytes >= 0)) throw new HttpError(400, 'a cut fault needs an integer "bytes" >= 0');
      let re;
      try {
        re = new RegExp(f.path);
      } catch (e) {
        throw new HttpError(400, `bad path regex: ${e.message}`);
      }
      const rule = {
        ...f,
        id: ++this.seq,
        method: f.method ? String(f.method).toUpperCase() : null,
        re,
        action,
        nth: Number.isInteger(f.nth) && f.nth > 0 ? f.nth : 1,
        count: Number.isInteger(f.count) && f.count > 0 ? f.count : 1,
        delayMs: Number.isInteger(f.delayMs) ? f.delayMs : 0,
        after: f.after === true,
        seen: 0,
      };
      this.rules.push(rule);
      added.push(Faults.view(rule));
    }
    return added;
  }

  // The rule that fires on this request, if any (each match counts towards `nth`).
  take(method, pathname) {
    for (const f of this.rules) {
      if (f.method && f.method !== method) continue;
      if (!f.re.test(pathname)) continue;
      f.seen += 1;
      if (f.seen < f.nth) continue;
      f.count -= 1;
      if (f.count <= 0) this.rules = this.rules.filter((x) => x !== f);
      return f;
    }
    return null;
  }

  static view(f) {
    const { re, ...rest } = f;
    return rest;
  }

  list() {
    return this.rules.map(Faults.view);
  }

  clear() {
    this.rules = [];
  }
}

// The admin handlers every fake has over its request log and fault rules, answering through
// the fake's own `reply(ctx, status, body)` and `readJson(ctx)`:
// GET requests?since=, DELETE requests, POST/GET/DELETE faults.
export function logAndFaultHandlers({ log, faults, reply, readJson }) {
  return {
    requests: async (ctx) => reply(ctx, 200, { requests: log.since(Number(ctx.url.searchParams.get('since') || 0)) }),
    clearRequests: async (ctx) => {
      log.clear();
      reply(ctx, 204, null);
    },
    addFaults: async (ctx) => reply(ctx, 201, { faults: faults.add(await readJson(ctx)) }),
    listFaults: async (ctx) => reply(ctx, 200, { faults: faults.list() }),
    clearFaults: async (ctx) => {
      faults.clear();
      reply(ctx, 204, null);
    },
  };
}

// Starts the fake: `handler(req, res)` for every request, `onUpgrade` for upgrades, listening
// on 127.0.0.1:port; prints "LISTENING <port>" once ready (after `onListening(port)`). SIGTERM,
// SIGINT, SIGHUP and, when `stdinWatch` and stdin is a pipe or socket, stdin EOF call
// `onShutdown()` and exit. Returns {server, shutdown}.
export function serve({ name, port, stdinWatch, handler, onUpgrade, onListening, onShutdown }) {
  let server = null;
  let shuttingDown = false;
  const shutdown = (code = 0) => {
    if (shuttingDown) return;
    shuttingDown = true;
    try {
      onShutdown?.();
    } catch (e) {
      process.stderr.write(`${name}: shutdown: ${e.stack}\n`);
    }
    try {
      server?.close();
      server?.closeAllConnections?.();
    } catch {
      /* already closed */
    }
    process.exit(code);
  };
  process.on('SIGTERM', () => shutdown(0));
  process.on('SIGINT', () => shutdown(0));
  process.on('SIGHUP', () => shutdown(0));
  // Stdin EOF means the test that started us is gone; only a pipe or socket can signal that
  // (a /dev/null or terminal stdin would end at once or never).
  if (stdinWatch) {
    try {
      const st = fs.fstatSync(0);
      if (st.isFIFO() || st.isSocket()) {
        process.stdin.on('data', () => {});
        process.stdin.on('end', () => shutdown(0));
        process.stdin.on('error', () => shutdown(0));
      }
    } catch {
      /* no stdin at all */
    }
  }
  server = http.createServer((req, res) => {
    Promise.resolve(handler(req, res)).catch((e) => process.stderr.write(`${name}: ${e.stack}\n`));
  });
  server.keepAliveTimeout = 30000;
  if (onUpgrade) {
    server.on('upgrade', (req, socket) => {
      Promise.resolve(onUpgrade(req, socket)).catch((e) => {
        process.stderr.write(`${name}: upgrade error: ${e.stack}\n`);
        socket.destroy();
      });
    });
  }
  server.on('clientError', (err, socket) => socket.destroy());
  // Loopback only: the fake never listens on, or talks to, any other address.
  server.listen(port, '127.0.0.1', () => {
    const p = server.address().port;
    onListening?.(p);
    process.stdout.write(`LISTENING ${p}\n`);
  });
  server.on('error', (e) => {
    process.stderr.write(`${name}: cannot listen: ${e.message}\n`);
    process.exit(2);
  });
  return { server, shutdown };
}
