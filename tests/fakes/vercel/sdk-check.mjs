// Drives the official @vercel/sandbox SDK (pinned in package.json) against the fake and checks
// what it sees: every SDK call the sandgate adapter relies on, the fake's statefulness (names,
// sessions, snapshots, timeouts) and its fault injection. The SDK has no base-URL setting; its
// public `fetch` parameter is the hook: the fetch given here rewrites the SDK's fixed base URL
// to the fake's loopback address and leaves path, query, headers and body untouched.
// Env: FAKE_URL (http://127.0.0.1:<port>), FAKE_EXEC_MODE (tmpdir|bwrap), FAKE_REQUEST_LOG
// (the fake's --request-log file, optional). Prints "ok - ..." / "not ok - ..." lines and
// "N passed, M failed"; exits 1 on any failure.

import fs from 'node:fs';
import { APIError, Sandbox, StreamError } from '@vercel/sandbox';

const FAKE = process.env.FAKE_URL;
const MODE = process.env.FAKE_EXEC_MODE || 'tmpdir';
const SDK_BASE = 'https://vercel.com/api';
const CREDS = { token: 'test-token', teamId: 'team_fake', projectId: 'prj_fake' };
const RUN = Math.random().toString(36).slice(2, 8);

if (!FAKE || !FAKE.startsWith('http://127.0.0.1:')) {
  console.log('not ok - FAKE_URL must be the fake on 127.0.0.1');
  console.log('0 passed, 1 failed');
  process.exit(1);
}

// Never lets a request leave for a public address: only the SDK's base URL is rewritten,
// anything else fails the check.
const stray = [];
async function fakeFetch(url, opts) {
  const u = String(url);
  if (!u.startsWith(SDK_BASE)) {
    stray.push(u);
    throw new Error(`sdk-check: refusing a request to ${u}`);
  }
  return fetch(FAKE + u.slice(SDK_BASE.length), opts);
}
const P = { ...CREDS, fetch: fakeFetch };

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed += 1;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`not ok - ${name}`);
    for (const l of String(e?.stack || e).split('\n').slice(0, 8)) console.log(`#   ${l}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function eq(a, b, what) {
  if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${what}: expected ${JSON.stringify(b)}, got ${JSON.stringify(a)}`);
}
async function rejects(p, status, code, what) {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof APIError)) throw new Error(`${what}: expected an APIError ${status}, got ${e?.stack || e}`);
    eq(e.response.status, status, `${what}: status`);
    if (code) eq(e.json?.error?.code, code, `${what}: error code`);
    return e;
  }
  throw new Error(`${what}: expected a ${status} error, the call succeeded`);
}
async function admin(method, p, body) {
  const r = await fetch(FAKE + p, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const t = await r.text();
  return t ? JSON.parse(t) : null;
}
const state = () => admin('GET', '/__fake/state');
const requestsSince = async (seq) => (await admin('GET', `/__fake/requests?since=${seq}`)).requests;
const lastSeq = async () => {
  const r = (await admin('GET', '/__fake/requests')).requests;
  return r.length ? r[r.length - 1].seq : 0;
};
const fakeSandbox = async (name) => (await state()).sandboxes.find((s) => s.name === name);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Polls the fake's state until pred(sandbox view) holds (a loaded CI machine is slow).
async function until(sbName, pred, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const f = await fakeSandbox(sbName);
    if (f && pred(f)) return f;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const name = `sdk-check-${RUN}`;
let sb;
let firstSession;

await check('create: name, tags, resources, timeout, networkPolicy, env', async () => {
  sb = await Sandbox.create({
    ...P,
    name,
    tags: { owner: 'sdk-check', run: RUN },
    resources: { vcpus: 2 },
    timeout: 600000,
    networkPolicy: 'deny-all',
    env: { FOO: 'bar' },
  });
  eq(sb.name, name, 'name');
  eq(sb.status, 'running', 'status');
  eq(sb.vcpus, 2, 'vcpus');
  eq(sb.memory, 4096, 'memory (2048 MB per vCPU)');
  eq(sb.timeout, 600000, 'timeout');
  eq(sb.tags, { owner: 'sdk-check', run: RUN }, 'tags');
  eq(sb.networkPolicy, 'deny-all', 'networkPolicy');
  const f = await fakeSandbox(name);
  assert(f && f.sessions.length === 1 && f.sessions[0].status === 'running', 'the fake holds one running session');
  firstSession = f.sessions[0].id;
});

await check('create with a name that exists: 409, nothing new started', async () => {
  await rejects(Sandbox.create({ ...P, name }), 409, null, 'second create');
  const f = await fakeSandbox(name);
  eq(f.sessions.length, 1, 'sessions of the named sandbox');
});

await check('invalid resources, timeout and tags: 400', async () => {
  await rejects(Sandbox.create({ ...P, name: `bad-${RUN}`, resources: { vcpus: 3 } }), 400, 'bad_request', 'vcpus 3');
  await rejects(Sandbox.create({ ...P, name: `bad-${RUN}`, resources: { vcpus: 2, memory: 2048 } }), 400, 'bad_request', 'memory 2048 for 2 vCPUs');
  await rejects(Sandbox.create({ ...P, name: `bad-${RUN}`, timeout: 500 }), 400, 'sandbox_timeout_invalid', 'timeout 500 ms');
  const tags = Object.fromEntries([1, 2, 3, 4, 5, 6].map((i) => [`k${i}`, 'v']));
  await rejects(Sandbox.create({ ...P, name: `bad-${RUN}`, tags }), 400, 'bad_request', 'six tags');
  assert(!(await fakeSandbox(`bad-${RUN}`)), 'no sandbox was made by an invalid create');
});

await check('a create whose answer is lost (500 after it was done): the SDK retry gets 409', async () => {
  await admin('POST', '/__fake/faults', { method: 'POST', path: '^/v3/sandboxes$', status: 500, after: true });
  await rejects(Sandbox.create({ ...P, name: `lost-${RUN}`, timeout: 60000 }), 409, 'sandbox_already_exists', 'create');
  const f = await fakeSandbox(`lost-${RUN}`);
  assert(f && f.sessions.length === 1, 'exactly one sandbox with one session exists');
  await (await Sandbox.get({ ...P, name: `lost-${RUN}` })).delete();
});

await check('OIDC-style token (raw API): team and project from its claims; expired or foreign: 401', async () => {
  const jwt = (claims) => ['e30', Buffer.from(JSON.stringify(claims)).toString('base64url'), 'sig'].join('.');
  const list = (tok) => fetch(`${FAKE}/v2/sandboxes?teamId=team_fake`, { headers: { authorization: `Bearer ${tok}` } });
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const ok = await list(jwt({ owner_id: 'team_fake', project_id: 'prj_fake', exp }));
  eq(ok.status, 200, 'status with a valid token');
  assert((await ok.json()).sandboxes.some((s) => s.name === name), 'the project comes from the token');
  eq((await list(jwt({ owner_id: 'team_fake', project_id: 'prj_fake', exp: 1000 }))).status, 401, 'expired token');
  eq((await list(jwt({ owner_id: 'team_other', project_id: 'prj_fake', exp }))).status, 401, 'token of another team');
  const noTeam = await fetch(`${FAKE}/v2/sandboxes?project=prj_fake`, { headers: { authorization: 'Bearer test-token' } });
  eq(noTeam.status, 400, 'no teamId');
});

await check('wrong token: 401', async () => {
  await rejects(Sandbox.get({ ...P, token: 'wrong', name }), 401, 'unauthorized', 'get with a wrong token');
});

await check('runCommand (wait): stdout, stderr, exit code, cwd, env', async () => {
  const c = await sb.runCommand('echo', ['hi']);
  eq(c.exitCode, 0, 'exit code');
  eq(await c.stdout(), 'hi\n', 'stdout');
  const d = await sb.runCommand({
    cmd: 'bash',
    args: ['-c', 'echo "$FOO $BAR $(pwd)"; echo oops >&2; exit 7'],
    cwd: '/tmp',
    env: { BAR: 'baz' },
  });
  eq(d.exitCode, 7, 'exit code');
  const out = await d.stdout();
  assert(out.startsWith('bar baz ') && out.trim().endsWith('/tmp'), `stdout ${JSON.stringify(out)}`);
  eq(await d.stderr(), 'oops\n', 'stderr');
  const e = await sb.runCommand('no-such-command-xyz', []);
  eq(e.exitCode, 127, 'exit code of a missing command');
});

await check('runCommand (detached) + logs + kill + wait', async () => {
  const c = await sb.runCommand({ cmd: 'sh', args: ['-c', 'i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done'], detached: true });
  eq(c.exitCode, null, 'exit code of a running command');
  let seen = '';
  for await (const l of c.logs()) {
    eq(l.stream, 'stdout', 'stream');
    seen += l.data;
    if (seen.split('\n').length > 2) break;
  }
  assert(seen.startsWith('tick 1\ntick 2\n'), `first two log lines: ${JSON.stringify(seen)}`);
  await c.kill();
  const done = await c.wait();
  eq(done.exitCode, 143, 'exit code after SIGTERM');
  const f = await fakeSandbox(name);
  const cmd = f.sessions[0].commands.find((x) => x.id === c.cmdId);
  eq(cmd.running, false, 'the command no longer runs in the fake');
});

await check('writeFiles (tar.gz) + readFile + a command sees the files', async () => {
  await sb.writeFiles([
    { path: '/tmp/hello.txt', content: Buffer.from('hello from sdk-check\n') },
    { path: 'rel/dir/note.txt', content: Buffer.from('note\n') },
  ]);
  const b = await sb.readFileToBuffer({ path: '/tmp/hello.txt' });
  eq(b?.toString(), 'hello from sdk-check\n', 'read back');
  const c = await sb.runCommand('cat', ['rel/dir/note.txt']);
  eq(await c.stdout(), 'note\n', 'cat of the relative path (under /vercel/sandbox)');
  eq(await sb.readFileToBuffer({ path: '/tmp/missing.txt' }), null, 'a missing file reads as null (404)');
});

await check('mkDir: made, and an existing path is refused', async () => {
  await sb.mkDir('/tmp/newdir');
  const c = await sb.runCommand('test', ['-d', '/tmp/newdir']);
  if (MODE === 'bwrap') eq(c.exitCode, 0, 'test -d in the sandbox');
  const f = await fakeSandbox(name);
  assert(fs.statSync(`${f.sessions[0].hostRoot}/tmp/newdir`).isDirectory(), 'the directory exists in the session root');
  await rejects(sb.mkDir('/tmp/newdir'), 400, 'bad_request', 'mkdir of an existing directory');
});

if (MODE === 'bwrap') {
  await check('deny-all: no network inside the sandbox (bwrap)', async () => {
    const port = new URL(FAKE).port;
    const c = await sb.runCommand('bash', ['-c', `exec 3<>/dev/tcp/127.0.0.1/${port} && echo connected`]);
    assert(c.exitCode !== 0, `a connection to the fake succeeded from a deny-all sandbox: ${await c.stdout()}`);
  });
}

await check('extendTimeout adds to the running session', async () => {
  await sb.extendTimeout(60000);
  const f = await fakeSandbox(name);
  eq(f.sessions[0].timeout, 660000, 'session timeout');
  await rejects(sb.extendTimeout(5 * 3600 * 1000), 400, 'sandbox_timeout_invalid', 'extend beyond the plan maximum');
});

await check('update (PATCH) tags and timeout, network policy, listSessions', async () => {
  await sb.update({ tags: { owner: 'sdk-check', run: RUN, extra: 'x' }, timeout: 720000 });
  eq(sb.tags, { owner: 'sdk-check', run: RUN, extra: 'x' }, 'tags after update');
  let f = await fakeSandbox(name);
  eq(f.timeout, 720000, 'sandbox timeout');
  eq(f.sessions[0].timeout, 720000, 'session timeout (the SDK extended it to the new value)');
  const np = await sb.updateNetworkPolicy({ allow: ['example.com'], subnets: { deny: ['10.0.0.0/8'] } });
  eq(np, { allow: ['example.com'], subnets: { deny: ['10.0.0.0/8'] } }, 'policy as the SDK reads it back');
  f = await fakeSandbox(name);
  eq(f.networkPolicy, { mode: 'custom', allowedDomains: ['example.com'], deniedCIDRs: ['10.0.0.0/8'] }, 'policy recorded');
  await sb.updateNetworkPolicy('deny-all');
  const sessions = await sb.listSessions();
  eq(sessions.sessions.map((x) => x.id), [f.sessions[0].id], 'sessions');
});

let snapId;
await check('snapshot: the session stops, files kept in the snapshot', async () => {
  const s = await sb.snapshot({ expiration: 86400000 });
  snapId = s.snapshotId;
  assert(/^snap_/.test(snapId), `snapshot id ${snapId}`);
  eq(s.status, 'created', 'snapshot status');
  const f = await fakeSandbox(name);
  eq(f.sessions[0].status, 'stopped', 'session status');
  eq(f.currentSnapshotId, snapId, 'the sandbox resumes from it');
});

await check('a call on the stopped session: 410, the SDK resumes into a new session with the files', async () => {
  const seq = await lastSeq();
  const c = await sb.runCommand('cat', ['rel/dir/note.txt']);
  eq(await c.stdout(), 'note\n', 'file restored from the snapshot');
  const r = await requestsSince(seq);
  const b = await sb.readFileToBuffer({ path: '/tmp/hello.txt' });
  eq(b?.toString(), 'hello from sdk-check\n', 'the other file too');
  eq(r.map((x) => `${x.route} ${x.status}`), ['runCommand 410', 'getSandbox 200', 'runCommand 200'], 'requests');
  eq(r[0].query.teamId, 'team_fake', 'teamId on the call');
  const f = await fakeSandbox(name);
  eq(f.sessions.length, 2, 'sessions');
  assert(f.currentSessionId !== firstSession, 'a new session id');
});

await check('stop (persistent): snapshot on stop, Sandbox.get sees stopped', async () => {
  await sb.runCommand('bash', ['-c', 'echo second > second.txt']);
  const st = await sb.stop();
  eq(st.status, 'stopped', 'session status');
  assert(st.snapshot && /^snap_/.test(st.snapshot.id), 'the stop answered the auto-snapshot');
  const again = await Sandbox.get({ ...P, name });
  eq(again.status, 'stopped', 'status from get');
  const b = await again.readFileToBuffer({ path: '/vercel/sandbox/second.txt' });
  eq(b?.toString(), 'second\n', 'read after the resume the get-then-read caused');
  sb = again;
});

await check('list by tag', async () => {
  const other = await Sandbox.create({ ...P, name: `other-${RUN}`, tags: { owner: 'someone-else' }, timeout: 60000 });
  const page = await Sandbox.list({ ...P, tags: { owner: 'sdk-check' } });
  const names = page.sandboxes.map((s) => s.name);
  assert(names.includes(name), `${name} listed`);
  assert(!names.includes(`other-${RUN}`), 'a sandbox with another tag is not listed');
  await other.delete();
});

await check('slow stop: 422 sandbox_stopping, the SDK resumes after it', async () => {
  await admin('POST', '/__fake/config', { stopMs: 600 });
  try {
    const seq = await lastSeq();
    const stopping = sb.stop();
    await until(name, (f) => f.status === 'stopping', 'the stop to begin');
    const c = await sb.runCommand('echo', ['after-stop']);
    eq(await c.stdout(), 'after-stop\n', 'output');
    await stopping;
    const r = await requestsSince(seq);
    assert(r.some((x) => x.route === 'runCommand' && x.status === 422), `a 422 was answered: ${r.map((x) => `${x.route} ${x.status}`)}`);
  } finally {
    await admin('POST', '/__fake/config', { stopMs: 0 });
  }
});

await check('timeout: the session stops when it expires; the SDK resumes with the files', async () => {
  const t0 = Date.now();
  const t = await Sandbox.create({ ...P, name: `short-${RUN}`, timeout: 1500 });
  await t.writeFiles([{ path: 'kept.txt', content: Buffer.from('kept\n') }]);
  await until(`short-${RUN}`, (f) => f.status === 'stopped', 'the timeout');
  assert(Date.now() - t0 >= 1400, `stopped after ${Date.now() - t0} ms, before its timeout`);
  const c = await t.runCommand('cat', ['kept.txt']);
  eq(await c.stdout(), 'kept\n', 'file after resume');
  await t.delete();
});

await check('the session times out under a waiting command: the stream ends with sandbox_stream_closed', async () => {
  const t = await Sandbox.create({ ...P, name: `closed-${RUN}`, timeout: 60000, persistent: false });
  const sid = (await fakeSandbox(`closed-${RUN}`)).currentSessionId;
  const running = t.runCommand('sleep', ['30']).then(() => null, (e) => e);
  await until(`closed-${RUN}`, (f) => f.sessions[0].commands.some((c) => c.running), 'the command to start');
  await admin('POST', `/__fake/sessions/${sid}/expire`);
  const err = await running;
  assert(err instanceof StreamError, `a StreamError, got ${err?.stack || err}`);
  eq(err.code, 'sandbox_stream_closed', 'stream error code');
  const f = await fakeSandbox(`closed-${RUN}`);
  eq([f.status, f.sessions[0].processes], ['stopped', 0], 'stopped, no process left');
  eq(f.currentSnapshotId, undefined, 'a non-persistent sandbox is not snapshotted');
  await t.delete();
});

await check('expired snapshot: resume is 410 snapshot_not_found', async () => {
  const t = await Sandbox.create({ ...P, name: `exp-${RUN}`, timeout: 60000 });
  const st = await t.stop();
  await admin('POST', `/__fake/snapshots/${st.snapshot.id}/expire`);
  await rejects(Sandbox.get({ ...P, name: `exp-${RUN}`, resume: true }), 410, 'snapshot_not_found', 'resume');
  const fresh = await Sandbox.getOrCreate({ ...P, name: `exp-${RUN}`, resume: true, timeout: 60000 });
  eq(fresh.status, 'running', 'getOrCreate deleted and recreated it');
  await fresh.delete();
});

await check('faults: 429 with Retry-After and a 503 are retried by the SDK; a dropped connection too', async () => {
  await admin('POST', '/__fake/faults', [
    { method: 'POST', path: '/cmd$', status: 429, retryAfter: 1 },
    { method: 'GET', path: `^/v2/sandboxes/${name}$`, status: 503 },
    { method: 'POST', path: '/fs/read$', action: 'drop' },
  ]);
  const seq = await lastSeq();
  const c = await sb.runCommand('echo', ['retried']);
  eq(await c.stdout(), 'retried\n', 'output after a 429');
  const g = await Sandbox.get({ ...P, name });
  eq(g.name, name, 'get after a 503');
  const b = await sb.readFileToBuffer({ path: '/tmp/hello.txt' });
  eq(b?.toString(), 'hello from sdk-check\n', 'read after a dropped connection');
  const r = await requestsSince(seq);
  const cmd = r.filter((x) => x.route === 'runCommand').map((x) => x.status);
  eq(cmd, [429, 200], 'runCommand statuses');
  const rd = r.filter((x) => x.route === 'readFile').map((x) => x.status);
  eq(rd, [0, 200], 'readFile statuses (0 = dropped)');
  const gap = Date.parse(r.find((x) => x.route === 'runCommand' && x.status === 200).ts) - Date.parse(r.find((x) => x.status === 429).ts);
  assert(gap >= 900, `the SDK waited Retry-After (1 s) before retrying: ${gap} ms`);
});

await check('faults: an NDJSON stream cut after N bytes fails the SDK call', async () => {
  await admin('POST', '/__fake/faults', { method: 'POST', path: '/cmd$', action: 'cut', bytes: 100 });
  let err = null;
  try {
    await sb.runCommand('echo', ['cut']);
  } catch (e) {
    err = e;
  }
  assert(err, 'the SDK call failed');
  const r = (await admin('GET', '/__fake/requests')).requests.filter((x) => x.route === 'runCommand');
  eq(r[r.length - 1].cut, 100, 'the log records the cut');
});

await check('nth fault: only the 2nd matching request fails', async () => {
  await admin('POST', '/__fake/faults', { method: 'POST', path: '/fs/mkdir$', nth: 2, status: 400, code: 'bad_request', message: 'injected' });
  await sb.mkDir('/tmp/nth1');
  await rejects(sb.mkDir('/tmp/nth2'), 400, 'bad_request', 'second mkdir');
  await sb.mkDir('/tmp/nth3');
});

await check('--delay-ms: every request is delayed, the log shows the serving time', async () => {
  await admin('POST', '/__fake/config', { delayMs: 67 });
  try {
    const seq = await lastSeq();
    const t0 = Date.now();
    await Sandbox.get({ ...P, name });
    const took = Date.now() - t0;
    assert(took >= 67, `the get took ${took} ms`);
    const r = await requestsSince(seq);
    assert(r.length === 1 && r[0].durationMs >= 67, `durationMs ${r[0]?.durationMs}`);
  } finally {
    await admin('POST', '/__fake/config', { delayMs: 0 });
  }
});

await check('delete: gone (404), nothing left running in the fake', async () => {
  await sb.delete();
  await rejects(Sandbox.get({ ...P, name }), 404, 'not_found', 'get after delete');
  const st = await state();
  eq(st.sandboxes.filter((s) => s.name.endsWith(RUN)).map((s) => s.name), [], 'sandboxes of this run');
  eq(st.runningSessions, [], 'running sessions');
  eq(st.liveProcesses, 0, 'live processes');
});

if (process.env.FAKE_REQUEST_LOG) {
  await check('request log file: one JSON line per request with method, path, status, ts, durationMs', async () => {
    const lines = fs.readFileSync(process.env.FAKE_REQUEST_LOG, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert(lines.length > 20, `${lines.length} lines`);
    for (const l of lines) {
      for (const k of ['method', 'path', 'status', 'ts', 'durationMs']) assert(k in l, `${k} missing in ${JSON.stringify(l)}`);
    }
    assert(!JSON.stringify(lines).includes('test-token'), 'no token in the log');
  });
}

await check('no request went anywhere but the fake', async () => {
  eq(stray, [], 'stray requests');
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
