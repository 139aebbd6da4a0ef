// bench/daytona-sdk-bench.mjs - the official Daytona TypeScript SDK (@daytonaio/sdk, pinned in
// tests/fakes/daytona/package.json) doing what sgbench's `daytona` set asks of sandgate, against
// the same fake Daytona (tests/fakes/daytona/server.mjs) on 127.0.0.1:
//
//   exec      sandbox.process.executeCommand('true')            (exit code 0 checked)
//   upload    sandbox.fs.uploadFile(<1 MiB Buffer>, path)
//   download  sandbox.fs.downloadFile(path) of a 1 MiB file     (length checked, bytes once)
//   ttfr      time to the first result (sgbench's D7), after that sandbox is deleted: --ttfr-n
//             sessions with a new Daytona client each and as many reusing one (firstResults in
//             cloud-sdk-bench.mjs), each daytona.create() (a new sandbox) and its first
//             process.executeCommand('bash -l -c true') to completion (exit code 0 checked); each
//             sandbox deleted untimed
//
// The three run interleaved, in an order that rotates each round, after warm-up rounds; each is
// timed from the call to its resolved promise. Every timed call's window (wall-clock ms) is then
// matched against the fake's request log (GET /__fake/requests?since=<seq>): a request belongs
// to a call when it started and ended inside the call's window. That gives requests per call,
// and the time the fake spent serving them. The process's peak RSS is
// process.resourceUsage().maxRSS (KiB) at the end.
//
//   node bench/daytona-sdk-bench.mjs --url http://127.0.0.1:PORT [--api-key test-key]
//        [--n 100] [--warm 10] [--ttfr-n 5] [--json FILE] [--sdk-dir tests/fakes/daytona]
//
// The results go to --json (else stdout) as one JSON object; progress goes to stderr. The sandbox
// is created with the same image as sandgate's profile in bench/run.sh (debian:12, default
// resources) and deleted at the end. Exit status 0 on success, 1 on any failure, 2 on bad usage.

import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { firstResults } from './cloud-sdk-bench.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const MiB = 1024 * 1024;
// Fresh sessions timed to their first result at most (sgbench's TTFR_RUNS_MAX).
const TTFR_MAX = 16;

function usage(msg) {
  process.stderr.write(`daytona-sdk-bench: ${msg}\n` +
    'usage: node daytona-sdk-bench.mjs --url http://127.0.0.1:PORT [--api-key KEY] [--n N] [--warm N] [--ttfr-n N]\n' +
    '       [--json FILE] [--sdk-dir DIR]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const o = { url: null, apiKey: 'test-key', n: 100, warm: 10, ttfrN: 5, json: null,
    sdkDir: path.join(here, '..', 'tests', 'fakes', 'daytona') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (v === undefined) usage(`${a} needs a value`);
    i++;
    if (a === '--url') o.url = v;
    else if (a === '--api-key') o.apiKey = v;
    else if (a === '--n') o.n = Number(v);
    else if (a === '--warm') o.warm = Number(v);
    else if (a === '--ttfr-n') o.ttfrN = Number(v);
    else if (a === '--json') o.json = v;
    else if (a === '--sdk-dir') o.sdkDir = v;
    else usage(`unknown option ${a}`);
  }
  if (!o.url) usage('--url is required');
  // Loopback only: the fake binds 127.0.0.1 and nothing here may reach anywhere else.
  const u = new URL(o.url);
  if (u.protocol !== 'http:' || u.hostname !== '127.0.0.1') usage(`--url must be http://127.0.0.1:PORT, not ${o.url}`);
  o.url = `${u.protocol}//${u.host}`;
  if (!Number.isInteger(o.n) || o.n < 1 || !Number.isInteger(o.warm) || o.warm < 0) usage('--n must be ≥ 1 and --warm ≥ 0');
  if (!Number.isInteger(o.ttfrN) || o.ttfrN < 0 || o.ttfrN > TTFR_MAX) usage(`--ttfr-n must be 0 to ${TTFR_MAX}`);
  return o;
}

// The SDK's ESM entry, resolved from the fake's own node_modules (this folder has none), so the
// build and the headers are those sdk-check.mjs proves against the fake.
async function loadSdk(sdkDir) {
  const req = createRequire(path.join(path.resolve(sdkDir), 'package.json'));
  let pkgPath;
  try {
    pkgPath = req.resolve('@daytonaio/sdk/package.json');
  } catch {
    throw new Error(`@daytonaio/sdk is not installed under ${sdkDir} (run npm ci there)`);
  }
  const pkg = JSON.parse(fs.readFileSync(pkgPath, 'utf8'));
  const entry = path.join(path.dirname(pkgPath), pkg.exports['.'].import.default);
  return { sdk: await import(pathToFileURL(entry).href), version: pkg.version };
}

// The 1 MiB text sgbench writes (bench/stats.c text_mib): lines of 99 pseudo-random lowercase
// letters and a newline, from the same xorshift64* sequence, so both clients move the same bytes.
function textMib() {
  const t = Buffer.alloc(MiB);
  const M = (1n << 64n) - 1n;
  let x = 0x2545F4914F6CDD1Dn;
  for (let i = 0; i < MiB; i++) {
    if (i % 100 === 99) {
      t[i] = 0x0a;
      continue;
    }
    x ^= x >> 12n;
    x = (x ^ (x << 25n)) & M;
    x ^= x >> 27n;
    t[i] = 0x61 + Number((((x * 0x2545F4914F6CDD1Dn) & M) >> 59n) % 26n);
  }
  return t;
}

async function admin(base, p) {
  const res = await fetch(`${base}/__fake${p}`);
  if (res.status !== 200) throw new Error(`GET /__fake${p}: HTTP ${res.status}`);
  return res.json();
}

async function lastSeq(base) {
  const r = (await admin(base, '/requests')).requests;
  return r.length ? r[r.length - 1].seq : 0;
}

// Nearest-rank percentiles, as sgbench computes them.
function dist(v) {
  const s = [...v].sort((a, b) => a - b);
  const rank = (p) => s[Math.ceil((s.length * p) / 100) - 1];
  return { n: s.length, min_us: s[0] * 1e3, p50_us: rank(50) * 1e3, p90_us: rank(90) * 1e3,
    p99_us: rank(99) * 1e3, max_us: s[s.length - 1] * 1e3,
    mean_us: (s.reduce((a, b) => a + b, 0) / s.length) * 1e3 };
}

// The fake logs a request when its connection closes, a little after the reply reached the
// client: a request ending later than this after a call's reply was not that call's.
const LATE_MS = 50;

// sgbench's rule (bench/daytona.c dtn_attribute): a request belongs to the latest call that began
// at or before its start, if it started before that call's reply and ended by it (+LATE_MS).
function attribute(requests, windows) {
  const per = windows.map(() => ({ n: 0, served_ms: 0, routes: {} }));
  const order = windows.map((w, i) => i).sort((a, b) => windows[a].t0 - windows[b].t0);
  let outside = 0;
  for (const r of requests) {
    const start = Date.parse(r.ts);
    const end = start + r.durationMs;
    let i = -1;
    for (const j of order) {
      if (windows[j].t0 > start) break;
      i = j;
    }
    if (i >= 0 && !(start <= windows[i].t1 && end <= windows[i].t1 + LATE_MS)) i = -1;
    if (i < 0) {
      outside++;
      continue;
    }
    per[i].n++;
    per[i].served_ms += r.durationMs;
    per[i].routes[r.route] = (per[i].routes[r.route] || 0) + 1;
  }
  return { per, outside };
}

const KINDS = ['exec', 'upload', 'download'];
// The host's bash tool runs a login shell; the toolbox runs the command line as given.
const FIRST_COMMAND = 'bash -l -c true';

// As sandgate's sandbox on bench/run.sh's profile: image debian:12, default resources, and the
// auto-stop and auto-delete intervals of 10 minutes its initialize reports.
function createSandbox(daytona, runId) {
  return daytona.create({
    image: 'debian:12',
    labels: { 'sgbench.client': 'sdk', 'sgbench.run': runId },
    autoStopInterval: 10,
    autoDeleteInterval: 10,
  }, { timeout: 60 });
}

// One session for time to first result: (a new client,) create, the first exec to its end; the
// sandbox deleted untimed. client.current is the client to use, replaced when fresh.
async function firstResult(client, fresh, runId) {
  // The client is made untimed, as in cloud-sdk-bench.mjs: the clock starts at the first call.
  if (fresh) {
    await client.current[Symbol.asyncDispose]();
    client.current = client.make();
  }
  const t0 = performance.now();
  const sandbox = await createSandbox(client.current, runId);
  try {
    const createMs = performance.now() - t0;
    const r = await sandbox.process.executeCommand(FIRST_COMMAND);
    if (r.exitCode !== 0) throw new Error(`executeCommand('${FIRST_COMMAND}') exited ${r.exitCode}`);
    return { ms: performance.now() - t0, create_ms: createMs };
  } finally {
    await sandbox.delete();
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const rssStart = process.memoryUsage().rss;
  const { sdk, version } = await loadSdk(o.sdkDir);
  const { Daytona } = sdk;
  const text = textMib();
  const runId = crypto.randomBytes(4).toString('hex');
  const client = { make: () => new Daytona({ apiUrl: `${o.url}/api`, apiKey: o.apiKey, target: 'us' }) };
  client.current = client.make();
  const daytona = client.current;
  const out = { sdk: '@daytonaio/sdk', sdk_version: version, node: process.version, n: o.n, warm: o.warm };
  let sandbox = null;

  try {
    process.stderr.write('daytona-sdk-bench: creating a sandbox (image debian:12)\n');
    let seq = await lastSeq(o.url);
    let t0 = performance.now();
    sandbox = await createSandbox(daytona, runId);
    out.create_ms = performance.now() - t0;
    out.create_requests = (await admin(o.url, `/requests?since=${seq}`)).requests.length;
    out.sandbox = sandbox.id;

    const upPath = '/workspace/sgbench-sdk-up.txt';
    const downPath = '/workspace/sgbench-sdk-1m.txt';
    await sandbox.fs.uploadFile(text, downPath);

    const ops = {
      exec: async () => {
        const r = await sandbox.process.executeCommand('true');
        if (r.exitCode !== 0) throw new Error(`executeCommand('true') exited ${r.exitCode}`);
      },
      upload: async () => {
        await sandbox.fs.uploadFile(text, upPath);
      },
      download: async (first) => {
        const b = await sandbox.fs.downloadFile(downPath);
        if (b.length !== MiB || (first && !b.equals(text))) throw new Error('downloadFile did not return the 1 MiB uploaded');
      },
    };
    const times = { exec: [], upload: [], download: [] };
    const windows = { exec: [], upload: [], download: [] };

    process.stderr.write(`daytona-sdk-bench: exec, upload, download x ${o.n} (after ${o.warm} warm-up rounds)\n`);
    seq = await lastSeq(o.url);
    for (let i = -o.warm; i < o.n; i++) {
      for (let j = 0; j < KINDS.length; j++) {
        const k = KINDS[(i + o.warm + j) % KINDS.length];
        const w0 = Date.now();
        t0 = performance.now();
        await ops[k](i === -o.warm);
        const dt = performance.now() - t0;
        const w1 = Date.now();
        if (i >= 0) {
          times[k].push(dt);
          windows[k].push({ t0: w0, t1: w1 });
        }
      }
    }
    // The fake logs a request when its connection closes; let the last one land.
    await new Promise((r) => setTimeout(r, 100));
    const reqs = (await admin(o.url, `/requests?since=${seq}`)).requests;
    const all = KINDS.flatMap((k) => windows[k]);
    const { per, outside } = attribute(reqs, all);
    out.ops = {};
    let at = 0;
    for (const k of KINDS) {
      const mine = per.slice(at, at + windows[k].length);
      at += windows[k].length;
      const counts = mine.map((p) => p.n);
      const routes = {};
      for (const p of mine) for (const [r, c] of Object.entries(p.routes)) routes[r] = (routes[r] || 0) + c;
      out.ops[k] = {
        ...dist(times[k]),
        requests_per_call: counts.reduce((a, b) => a + b, 0) / counts.length,
        requests_min: Math.min(...counts),
        requests_max: Math.max(...counts),
        routes,
        served: dist(mine.map((p) => p.served_ms)),
      };
    }
    out.requests_outside_calls = outside;

    t0 = performance.now();
    await sandbox.delete();
    sandbox = null;
    out.delete_ms = performance.now() - t0;

    if (o.ttfrN > 0) {
      process.stderr.write(`daytona-sdk-bench: time to first result x ${o.ttfrN} fresh sandboxes\n`);
      out.ttfr = await firstResults(o.ttfrN, (fresh) => firstResult(client, fresh, runId));
      out.ttfr.command = FIRST_COMMAND;
    }
  } finally {
    if (sandbox) await sandbox.delete().catch(() => {});
    await client.current[Symbol.asyncDispose]();
  }
  // ru_maxrss of this process: everything the SDK and its runtime held at their peak.
  out.rss_start_kib = Math.round(rssStart / 1024);
  out.max_rss_kib = process.resourceUsage().maxRSS;
  const text_out = JSON.stringify(out, null, 2) + '\n';
  if (o.json) fs.writeFileSync(o.json, text_out);
  else process.stdout.write(text_out);
  for (const k of KINDS) {
    const d = out.ops[k];
    process.stderr.write(`daytona-sdk-bench: ${k.padEnd(8)} p50 ${(d.p50_us / 1e3).toFixed(2)} ms  p90 ${(d.p90_us / 1e3).toFixed(2)} ms  ` +
      `requests/call ${d.requests_per_call} (served p50 ${(d.served.p50_us / 1e3).toFixed(1)} ms)\n`);
  }
  process.stderr.write(`daytona-sdk-bench: peak RSS ${(out.max_rss_kib / 1024).toFixed(1)} MiB` +
    (out.ttfr ? `; first result ${out.ttfr.median_ms.toFixed(0)} ms (median of ${out.ttfr.n}; ` +
      `${out.ttfr.warm.median_ms.toFixed(0)} ms on a client already used)\n` : '\n'));
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`daytona-sdk-bench: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
