// bench/cloud-sdk-bench.mjs - what every cloud SDK script (bench/modal-sdk-bench.mjs,
// bench/vercel-sdk-bench.mjs) does around its SDK: the same measurements as sgbench's `cloud` set
// (bench/cloud.c), so the two sides of each table row come from one procedure.
//
// A script gives run() its backend's five operations, done the most direct way its official SDK
// offers, plus create/exec/destroy; run() then measures, against the fake's request log:
//
//   ready     from the first SDK call until a first exec has started (create included)
//   tasks     the pid steps of `cat /proc/self/stat` run by consecutive execs of `bash -l -c` (a
//             bash call as the host's worker runs it): tasks started in the sandbox per exec (the
//             fake's bwrap mode gives each sandbox a pid namespace)
//   ops       --n calls of each operation sgbench counts (write_file, read_file, list_files,
//             bash, edit_file: the host's tools), one kind at a time, with the log's sequence number read
//             before and after each call: requests per call and their routes, and the SDK's own share
//             of each call (its wall time less the fake's serving time of its requests), as sgbench's
//             C3 measures sandgate's
//   mix       the calls of bench/cloud-mix.json in order, --runs times; each run's wall time
//   ttfr      time to the first result, after the main sandbox is gone: --ttfr-n sessions with a
//             new client each and as many reusing one (firstResults below), each create() (a new
//             sandbox) and its first exec of `bash -l -c true` to completion; each sandbox is
//             destroyed untimed
//   rss       process.resourceUsage().maxRSS at the end (KiB)
//
// The SDK makes no request of its own between calls, so sequence fences count them exactly (sgbench
// needs time windows instead: the gateway's process watcher polls in the background).
//
// A `bash` call runs its command as `bash -l -c COMMAND`, the login shell the host's worker runs for
// its bash tool, so both sides of C1 and C4 pay for the same shell.
// Results: one JSON object to --json (else stdout); progress to stderr.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
// Fresh sessions timed to their first result at most (sgbench's TTFR_RUNS_MAX).
const TTFR_MAX = 16;

export function usage(name, msg, extra = '') {
  process.stderr.write(`${name}: ${msg}\n` +
    `usage: node ${name}.mjs --url http://127.0.0.1:PORT --log http://127.0.0.1:PORT/PATH\n` +
    `       [--n 20] [--runs 3] [--ttfr-n 5] [--mix FILE] [--json FILE] [--sdk-dir DIR]${extra}\n`);
  process.exit(2);
}

// Loopback only: the fakes bind 127.0.0.1 and nothing here may reach anywhere else.
function loopback(name, what, v) {
  const u = new URL(v);
  if (u.protocol !== 'http:' || u.hostname !== '127.0.0.1') usage(name, `${what} must be http://127.0.0.1:PORT..., not ${v}`);
  return u;
}

// The options every script takes; `more` maps extra option names to defaults.
export function parseArgs(name, argv, sdkDir, more = {}) {
  const o = { url: null, log: null, n: 20, runs: 3, ttfrN: 5, json: null, sdkDir,
    mix: path.join(here, 'cloud-mix.json'), ...more };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    const key = a.replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!a.startsWith('--') || !(key in o)) usage(name, `unknown option ${a}`);
    if (v === undefined) usage(name, `${a} needs a value`);
    i++;
    o[key] = typeof o[key] === 'number' ? Number(v) : v;
  }
  if (!o.url || !o.log) usage(name, '--url and --log are required');
  o.url = loopback(name, '--url', o.url).origin;
  loopback(name, '--log', o.log);
  if (!Number.isInteger(o.n) || o.n < 2 || !Number.isInteger(o.runs) || o.runs < 1) usage(name, '--n must be ≥ 2 and --runs ≥ 1');
  if (!Number.isInteger(o.ttfrN) || o.ttfrN < 0 || o.ttfrN > TTFR_MAX) usage(name, `--ttfr-n must be 0 to ${TTFR_MAX}`);
  return o;
}

// A package's ESM entry, resolved from the fake's own node_modules (the pinned version the fake's
// SDK check proves against it).
export async function loadSdk(sdkDir, pkgName) {
  // Not require.resolve('<pkg>/package.json'): a package's exports map may hide it.
  const dir = path.join(path.resolve(sdkDir), 'node_modules', pkgName);
  const pkgPath = path.join(dir, 'package.json');
  if (!fs.existsSync(pkgPath)) throw new Error(`${pkgName} is not installed under ${sdkDir} (run npm ci there)`);
  const pkg = JSON.parse(fs.readFileSync(pkgPath, 'utf8'));
  let entry = pkg.exports?.['.'] ?? pkg.exports;
  for (const k of ['import', 'default']) if (entry && typeof entry === 'object') entry = entry[k] ?? entry;
  if (entry && typeof entry === 'object') entry = entry.default;
  if (typeof entry !== 'string') entry = pkg.module ?? pkg.main ?? 'index.js';
  return { sdk: await import(pathToFileURL(path.join(dir, entry)).href), version: pkg.version };
}

// Nearest-rank percentiles of ms values, in µs, as sgbench computes them.
export function dist(v) {
  const s = [...v].sort((a, b) => a - b);
  const rank = (p) => s[Math.ceil((s.length * p) / 100) - 1];
  return { n: s.length, min_us: s[0] * 1e3, p50_us: rank(50) * 1e3, p90_us: rank(90) * 1e3,
    p99_us: rank(99) * 1e3, max_us: s[s.length - 1] * 1e3,
    mean_us: (s.reduce((a, b) => a + b, 0) / s.length) * 1e3 };
}

// The log's entries (each fake's shape: an array, or {requests}) after sequence number `since`.
async function logSince(log, since) {
  const res = await fetch(`${log}?since=${since}`);
  if (res.status !== 200) throw new Error(`GET ${log}: HTTP ${res.status}`);
  const j = await res.json();
  const a = Array.isArray(j) ? j : j.requests;
  if (!Array.isArray(a)) throw new Error(`GET ${log}: not a request log`);
  // Serving time and its end: Vercel's and Daytona's fakes log the start (ts) and durationMs,
  // Modal's the end (t_ms, since the fake started) and serving_ms.
  return a.filter((e) => e.seq > since).map((e) => {
    const served = Number(e.durationMs ?? e.serving_ms ?? 0);
    const end = e.ts !== undefined ? Date.parse(e.ts) + served : Number(e.t_ms ?? 0);
    return { seq: e.seq, name: e.route ?? e.method ?? e.path ?? '?', served_ms: served, end_ms: end };
  });
}

async function lastSeq(log) {
  const a = await logSince(log, 0);
  return a.length ? Math.max(...a.map((e) => e.seq)) : 0;
}

// The time the fake spent serving these requests, as sgbench counts a call's: requests side by side
// (the SDK reads stdout and stderr and waits at once) count once, as the span from the first's start
// to the last's end; the log's times are whole milliseconds, so an overlap under 1 ms is none.
function servedTime(reqs) {
  const v = reqs.map((e) => ({ start: e.end_ms - e.served_ms, end: e.end_ms, served: e.served_ms }))
    .sort((x, y) => x.start - y.start);
  let total = 0;
  for (let i = 0; i < v.length;) {
    let j = i + 1;
    let end = v[i].end;
    let sum = v[i].served;
    while (j < v.length && v[j].start < end - 1) {
      end = Math.max(end, v[j].end);
      sum += v[j].served;
      j++;
    }
    total += j - i > 1 ? Math.min(sum, end - v[i].start) : sum;
    i = j;
  }
  return total;
}

// "TaskExecStart + TaskExecWait ×2": routes per call, as sgbench writes them.
function routesText(entries, calls) {
  const c = {};
  for (const e of entries) c[e.name] = (c[e.name] || 0) + 1;
  return Object.entries(c).map(([k, v]) => (v === calls ? k : `${k} ×${+(v / calls).toPrecision(2)}`)).join(' + ');
}

// Requests made by fn() (the fake logs a request when it is answered; give the last one a moment).
async function fenced(log, fn) {
  const seq = await lastSeq(log);
  const out = await fn();
  await new Promise((r) => setTimeout(r, 50));
  return { out, reqs: await logSince(log, seq) };
}

const RT_FILE = 'sgbench-rt.txt';
// What the host's worker runs for a bash call: a login shell (its bash tool's `bash -l -c`).
const LOGIN_SHELL = ['bash', '-l', '-c'];
const PID_PROBE = 'cat /proc/self/stat';

// The five operations (the host's tools with sgbench's arguments), the same way for every SDK,
// from its primitives: exec(argv) -> {out, code}, readText(path), writeText(content, path),
// list(dir) -> text (paths relative to the workspace). Each returns the text the mixed calls'
// `expect` is looked for in. read_file's line limit (sgbench's, to get the whole file every time)
// is past every file's end, so the whole file is what the SDK reads too; bash's command string
// runs as `bash -l -c`, the login shell the host's worker runs for the bash tool.
export function opsOf({ exec, readText, writeText, list }) {
  return {
    write_file: async ({ path: p, content }) => {
      await writeText(content, p);
      return '';
    },
    read_file: ({ path: p }) => readText(p),
    list_files: ({ path: p }) => list(p || '.'),
    bash: async ({ command }) => {
      const r = await exec(LOGIN_SHELL.concat(command));
      if (r.code !== 0) throw new Error(`${command}: exit ${r.code}: ${r.out}`);
      return r.out;
    },
    edit_file: async ({ path: p, old_text: from, new_text: to }) => {
      const parts = (await readText(p)).split(from);
      if (parts.length !== 2) throw new Error(`edit ${p}: ${parts.length - 1} occurrences of the old string`);
      await writeText(parts.join(to), p);
      return '';
    },
  };
}

// Time to the first result (sgbench's C7 and D7): n pairs of sessions, one sandbox at a time, each
// from its first SDK call to the end of its first exec of `bash -l -c true` (exit 0 checked). The
// first of a pair starts a new client, as a new process does and as sgbench starts a new gateway
// (the SDK's own first requests, an auth token say, are paid again): that side's median is C7's.
// The second reuses that client, as a host that keeps one across sessions would: information. The
// medians are the nearest rank, as sgbench's. session(fresh) -> {ms, create_ms}.
export async function firstResults(n, session) {
  const fresh = { runs_ms: [], create_ms: [] };
  const warm = { runs_ms: [], create_ms: [] };
  for (let i = 0; i < n; i++) {
    for (const [side, isFresh] of [[fresh, true], [warm, false]]) {
      const t = await session(isFresh);
      side.runs_ms.push(t.ms);
      side.create_ms.push(t.create_ms);
    }
  }
  const median = (v) => [...v].sort((x, y) => x - y)[Math.ceil(v.length / 2) - 1];
  for (const side of [fresh, warm]) {
    side.median_ms = median(side.runs_ms);
    side.create_median_ms = median(side.create_ms);
  }
  // Every fresh session, in order, as sgbench prints its own: the spread a median hides.
  process.stderr.write(`sdk: time to first result, each session (create): ${fresh.runs_ms
    .map((ms, i) => `${ms.toFixed(0)} (${fresh.create_ms[i].toFixed(0)})`).join(' ')} ms\n`);
  return { n, ...fresh, warm, command: LOGIN_SHELL.concat('true') };
}

// One such session of a cloud SDK script's backend b, destroyed (untimed) whatever happens.
async function cloudSession(b, fresh) {
  // The client is made untimed (its constructor sends nothing; closing the old one is no part of
  // a session): the clock starts at the SDK's first call, as the SDK's first requests are timed.
  if (fresh && b.newClient) b.newClient();
  const t0 = performance.now();
  try {
    await b.create();
    const createMs = performance.now() - t0;
    await b.ops.bash({ command: 'true' });
    return { ms: performance.now() - t0, create_ms: createMs };
  } finally {
    await b.destroy();
  }
}

// b: { name, sdk, version, create(), firstExec() (resolves once an exec has started, to a function that
// waits for it to end), setup()
// (untimed: the workspace directory), exec(argv) -> {out, code}, ops: {tool: (args) -> text},
// destroy() (the sandbox), newClient() (optional: replaces the client, the old one closed), close()
// (optional: the client, once at the end), info() (optional: fields for the results) }.  Each op throws on failure.
export async function run(b, o) {
  const rssStart = process.memoryUsage().rss;
  const mix = JSON.parse(fs.readFileSync(o.mix, 'utf8')).ops;
  const out = { sdk: b.sdk, sdk_version: b.version, node: process.version, n: o.n, runs: o.runs };
  const say = (m) => process.stderr.write(`${b.name}: ${m}\n`);
  let created = false;
  try {
    say('creating a sandbox');
    let seq = await lastSeq(o.log);
    let t0 = performance.now();
    await b.create();
    created = true;
    const createMs = performance.now() - t0;
    const finish = await b.firstExec();
    const readyMs = performance.now() - t0;
    await finish();
    const rq = await logSince(o.log, seq);
    out.ready = { ms: readyMs, create_ms: createMs, requests: rq.length, routes_text: routesText(rq, 1) };
    await b.setup();

    say(`tasks per exec x ${o.n}`);
    const pid = async () => {
      // bash -l -c runs its one simple command by exec: the shell and cat are one task.
      const r = await b.exec(LOGIN_SHELL.concat(PID_PROBE));
      const m = /^(\d+) \(cat\)/.exec(r.out);
      if (!m) throw new Error(`cat /proc/self/stat printed ${r.out.slice(0, 80)}`);
      return Number(m[1]);
    };
    let prev = await pid();
    const steps = [];
    for (let i = 0; i < o.n; i++) {
      const p = await pid();
      steps.push(p - prev);
      prev = p;
    }
    steps.sort((x, y) => x - y);
    out.pid = { tasks_per_exec: steps[Math.floor(steps.length / 2)], min: steps[0], max: steps[steps.length - 1],
      command: LOGIN_SHELL.concat(PID_PROBE) };

    say(`requests per call x ${o.n}`);
    const counted = {
      write_file: () => ({ path: RT_FILE, content: 'sgbench a\n' }),
      read_file: () => ({ path: RT_FILE }),
      list_files: () => ({ path: '.' }),
      bash: () => ({ command: 'true' }),
      edit_file: (i) => ({ path: RT_FILE, old_text: i % 2 ? 'sgbench b' : 'sgbench a', new_text: i % 2 ? 'sgbench a' : 'sgbench b' }),
    };
    out.ops = {};
    for (const [tool, args] of Object.entries(counted)) {
      const times = [];
      const own = [];
      const reqs = [];
      // One fence per call: the SDK's own share of each call, as sgbench's C3 measures sandgate's
      // (wall time less the fake's serving time of the call's requests), so both give a p50.
      for (let i = 0; i < o.n; i++) {
        const { out: ms, reqs: r } = await fenced(o.log, async () => {
          const t = performance.now();
          await b.ops[tool](args(i));
          return performance.now() - t;
        });
        times.push(ms);
        own.push(ms - servedTime(r));
        reqs.push(...r);
      }
      const ownDist = dist(own);
      out.ops[tool] = { ...dist(times), requests_per_call: reqs.length / o.n, routes_text: routesText(reqs, o.n),
        own_mean_us: ownDist.mean_us, own: ownDist };
    }

    say(`${mix.length} mixed calls x ${o.runs}`);
    const runs = [];
    let mixReqs = 0;
    for (let r = 0; r < o.runs; r++) {
      const { out: ms, reqs } = await fenced(o.log, async () => {
        t0 = performance.now();
        for (const [i, op] of mix.entries()) {
          const text = await b.ops[op.tool](op.args);
          if (op.expect && !String(text).includes(op.expect)) {
            throw new Error(`mixed call ${i} (${op.tool}): the answer lacks "${op.expect}": ${String(text).slice(0, 200)}`);
          }
        }
        return performance.now() - t0;
      });
      runs.push(ms);
      mixReqs += reqs.length;
    }
    const sorted = [...runs].sort((x, y) => x - y);
    out.mix = { ops: mix.length, runs_ms: runs, median_ms: sorted[Math.ceil(sorted.length / 2) - 1],
      requests_per_call: mixReqs / (mix.length * o.runs) };

    if (b.info) Object.assign(out, b.info());
    t0 = performance.now();
    created = false;
    await b.destroy();
    out.destroy_ms = performance.now() - t0;

    if (o.ttfrN > 0) {
      say(`time to first result x ${o.ttfrN} fresh sandboxes`);
      out.ttfr = await firstResults(o.ttfrN, (fresh) => cloudSession(b, fresh));
    }
  } finally {
    if (created) await b.destroy().catch(() => {});
    if (b.close) b.close();
  }
  // ru_maxrss of this process: everything the SDK and its runtime held at their peak.
  out.rss_start_kib = Math.round(rssStart / 1024);
  out.max_rss_kib = process.resourceUsage().maxRSS;
  const text = JSON.stringify(out, null, 2) + '\n';
  if (o.json) fs.writeFileSync(o.json, text);
  else process.stdout.write(text);
  for (const [k, d] of Object.entries(out.ops)) {
    say(`${k.padEnd(12)} p50 ${(d.p50_us / 1e3).toFixed(2)} ms  requests/call ${d.requests_per_call} (${d.routes_text})`);
  }
  say(`mixed ${out.mix.median_ms.toFixed(0)} ms (median of ${o.runs}); ready ${out.ready.ms.toFixed(0)} ms; ` +
    `tasks per exec ${out.pid.tasks_per_exec}; peak RSS ${(out.max_rss_kib / 1024).toFixed(1)} MiB` +
    (out.ttfr ? `; first result ${out.ttfr.median_ms.toFixed(0)} ms (median of ${out.ttfr.n}; ` +
      `${out.ttfr.warm.median_ms.toFixed(0)} ms on a client already used)` : ''));
}

// Run main(), exit 0 on success and 1 on any failure.
export function main(name, fn) {
  fn().then(() => process.exit(0), (e) => {
    process.stderr.write(`${name}: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  });
}
