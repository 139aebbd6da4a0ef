// Drives the official @daytonaio/sdk against the fake Daytona and prints one TAP-like line per
// step, then "N passed, M failed". Usage: FAKE_URL=http://127.0.0.1:<port> node sdk-check.mjs
//
// The SDK is the truth about the wire format: every step goes through its public API, and the
// fake's admin endpoints (/__fake/...) are used only to look at the real state behind it.

import { Daytona } from '@daytonaio/sdk';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const FAKE = process.env.FAKE_URL;
const API_KEY = process.env.FAKE_API_KEY || 'test-key';
const MODE = process.env.FAKE_EXEC_MODE || 'tmpdir';
const REQUEST_LOG = process.env.FAKE_REQUEST_LOG || '';
if (!FAKE) {
  process.stderr.write('FAKE_URL is required\n');
  process.exit(2);
}

let passed = 0;
let failed = 0;
let n = 0;

async function step(name, fn) {
  n += 1;
  const t0 = Date.now();
  try {
    await fn();
    passed += 1;
    process.stdout.write(`ok ${n} - [${MODE}] ${name} (${Date.now() - t0} ms)\n`);
  } catch (e) {
    failed += 1;
    process.stdout.write(`not ok ${n} - [${MODE}] ${name}\n`);
    for (const line of String(e && e.stack ? e.stack : e).split('\n').slice(0, 6)) {
      process.stdout.write(`#   ${line}\n`);
    }
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

function eq(actual, expected, msg) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${msg}: expected ${e}, got ${a}`);
}

// Expects fn to throw an SDK error carrying HTTP status `status`; returns the error.
async function expectStatus(status, fn, msg) {
  try {
    await fn();
  } catch (e) {
    if (e && e.statusCode === status) return e;
    throw new Error(`${msg}: expected HTTP ${status}, got ${e && e.statusCode} (${e && e.message})`);
  }
  throw new Error(`${msg}: expected HTTP ${status}, but the call succeeded`);
}

async function admin(method, p, body) {
  const res = await fetch(`${FAKE}/__fake${p}`, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) return null;
  const json = await res.json();
  if (res.status >= 300) throw new Error(`admin ${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function fakeSandbox(id) {
  const st = await admin('GET', '/state');
  return st.sandboxes.find((s) => s.id === id) || null;
}

async function requestsSince(seq) {
  return (await admin('GET', `/requests?since=${seq}`)).requests;
}

async function lastSeq() {
  const r = (await admin('GET', '/requests')).requests;
  return r.length ? r[r.length - 1].seq : 0;
}

const PHASE = process.env.FAKE_PHASE || 'main';
const runId = process.env.FAKE_RUN_ID || crypto.randomBytes(4).toString('hex');
const labels = { 'sandgate.owner': 'sdk-check', 'sandgate.run': runId };

const daytona = new Daytona({ apiUrl: `${FAKE}/api`, apiKey: API_KEY, target: 'us' });

// --- persistence phases: run-sdk-check.sh restarts the fake (same --state-dir) between them ---
if (PHASE === 'persist-before' || PHASE === 'persist-after') {
  const keepName = `persist-keep-${runId}`;
  const stopName = `persist-stopped-${runId}`;
  const content = Buffer.from(`kept across a restart ${runId}\n`);
  if (PHASE === 'persist-before') {
    await step('persist: create a started and a stopped sandbox, with a file', async () => {
      const keep = await daytona.create({ name: keepName, labels }, { timeout: 30 });
      await keep.fs.uploadFile(content, '/home/daytona/kept.txt');
      await keep.process.executeCommand('nohup sleep 600 >/dev/null 2>&1 &');
      const stopped = await daytona.create({ name: stopName, labels }, { timeout: 30 });
      await stopped.stop(30);
      eq(stopped.state, 'stopped', 'second sandbox stopped');
    });
  } else {
    await step('persist: after a restart both sandboxes are back in their states', async () => {
      const keep = await daytona.get(keepName);
      eq(keep.state, 'started', 'started sandbox');
      const back = await keep.fs.downloadFile('/home/daytona/kept.txt');
      assert(back.equals(content), 'file kept');
      const r = await keep.process.executeCommand('cat kept.txt');
      eq(r.result, content.toString(), 'commands run after a restart');
      const stopped = await daytona.get(stopName);
      eq(stopped.state, 'stopped', 'stopped sandbox');
      await stopped.start(30);
      eq(stopped.state, 'started', 'restarted');
      const found = [];
      for await (const s of daytona.list({ labels })) found.push(s.name);
      eq(found.sort(), [keepName, stopName].sort(), 'list by labels after a restart');
      await keep.delete();
      await stopped.delete();
    });
  }
  await daytona[Symbol.asyncDispose]();
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  process.exit(failed ? 1 : 0);
}
let sandbox;
let sandboxId;
let hostRoot;

await step('create from image with labels, env, resources and lifecycle intervals; wait until started', async () => {
  sandbox = await daytona.create(
    {
      image: 'debian:12',
      resources: { cpu: 2, memory: 4, disk: 10 },
      labels: { ...labels },
      envVars: { FOO: 'bar' },
      networkBlockAll: true,
      autoStopInterval: 30,
      autoArchiveInterval: 60,
      autoDeleteInterval: 120,
    },
    { timeout: 30 },
  );
  sandboxId = sandbox.id;
  eq(sandbox.state, 'started', 'sandbox state after create');
  const f = await fakeSandbox(sandbox.id);
  assert(f, 'the fake knows the sandbox');
  eq([f.cpu, f.memory, f.disk], [2, 4, 10], 'resources applied');
  eq(f.labels['sandgate.run'], runId, 'label sandgate.run');
  eq(f.labels['code-toolbox-language'], 'python', 'label the SDK adds');
  eq(f.env, { FOO: 'bar' }, 'env');
  eq([f.networkBlockAll, f.autoStopInterval, f.autoArchiveInterval, f.autoDeleteInterval], [true, 30, 60, 120], 'settings');
  assert(f.buildInfo && f.buildInfo.dockerfileContent.startsWith('FROM debian:12'), 'buildInfo from image');
});

await step('create went POST /api/sandbox then GET polling, with SDK headers and a good key', async () => {
  const reqs = (await requestsSince(0)).filter((r) => r.sandboxId === sandboxId || r.route === 'createSandbox');
  const create = reqs.find((r) => r.route === 'createSandbox');
  assert(create && create.status === 200, 'POST /api/sandbox answered 200');
  // The ESM build labels itself sdk-typescript, the CJS build sdk-typescript-legacy (README).
  const source = create.headers['x-daytona-source'];
  assert(/^sdk-typescript(-legacy)?$/.test(source || ''), `X-Daytona-Source: ${source}`);
  const version = create.headers['x-daytona-sdk-version'];
  assert(/^\d+\.\d+\.\d+/.test(version || ''), 'X-Daytona-SDK-Version sent');
  eq(create.headers['user-agent'], `${source}/${version}`, 'User-Agent');
  assert(reqs.every((r) => r.auth === 'ok'), 'every request authenticated');
  assert(reqs.some((r) => r.route === 'getSandbox'), 'the SDK polled GET /api/sandbox/{id}');
});

await step('the SDK subscribed to state events over Socket.IO', async () => {
  const st = await admin('GET', '/state');
  assert(st.socketIoClients >= 1, `socket.io clients: ${st.socketIoClients}`);
  const ws = (await requestsSince(0)).find((r) => r.route === 'socketIo');
  assert(ws && ws.status === 101, 'socket.io upgrade accepted');
});

await step('process.executeCommand: exit code and output', async () => {
  const r = await sandbox.process.executeCommand('echo hi; echo to-stderr >&2');
  eq(r.exitCode, 0, 'exit code');
  eq(r.result, 'hi\nto-stderr\n', 'combined output');
  const r2 = await sandbox.process.executeCommand('exit 3');
  eq(r2.exitCode, 3, 'non-zero exit code');
});

await step('process.executeCommand with cwd, env and timeout; sandbox env and workspace', async () => {
  const r = await sandbox.process.executeCommand('echo "$A $FOO"; pwd', '/tmp', { A: 'b' }, 5);
  eq(r.exitCode, 0, 'exit code');
  const lines = r.result.trim().split('\n');
  eq(lines[0], 'b bar', 'request env and sandbox env');
  if (MODE === 'bwrap') eq(lines[1], '/tmp', 'cwd seen inside the sandbox');
  else assert(lines[1].endsWith('/root/tmp'), `cwd mapped into the sandbox dir: ${lines[1]}`);
  const home = await sandbox.process.executeCommand('pwd');
  if (MODE === 'bwrap') eq(home.result.trim(), '/home/daytona', 'default work dir');
  eq(await sandbox.getWorkDir(), '/home/daytona', 'GET /work-dir');
});

await step('process.executeCommand past its timeout gets HTTP 408', async () => {
  const t0 = Date.now();
  await expectStatus(408, () => sandbox.process.executeCommand('sleep 20', undefined, undefined, 1), 'timeout');
  assert(Date.now() - t0 < 10000, 'the command was killed, not waited for');
});

await step('process.executeCommand past the toolbox limit (--exec-limit-ms) gets HTTP 408', async () => {
  await admin('POST', '/config', { execLimitMs: 700 });
  try {
    await expectStatus(408, () => sandbox.process.executeCommand('sleep 20'), 'toolbox limit');
  } finally {
    await admin('POST', '/config', { execLimitMs: 5000 });
  }
});

const payload = crypto.randomBytes(70000);
payload[0] = 0;
payload[1] = 0x0d;
payload[2] = 0x0a;

await step('fs.uploadFile then fs.downloadFile: bytes equal, file really in the sandbox', async () => {
  await sandbox.fs.uploadFile(payload, '/home/daytona/dir/data.bin');
  const back = await sandbox.fs.downloadFile('/home/daytona/dir/data.bin');
  assert(Buffer.isBuffer(back), 'download returns a Buffer');
  assert(back.equals(payload), `downloaded ${back.length} bytes equal the ${payload.length} uploaded`);
  const f = await fakeSandbox(sandboxId);
  hostRoot = f._fake.hostRoot;
  const onDisk = fs.readFileSync(path.join(f._fake.hostRoot, 'home/daytona/dir/data.bin'));
  assert(onDisk.equals(payload), 'the file is on disk in the sandbox root');
  const r = await sandbox.process.executeCommand('wc -c < dir/data.bin');
  eq(r.result.trim(), String(payload.length), 'a command sees the uploaded file');
});

await step('fs.uploadFiles (bulk) and fs.downloadFiles with one missing path', async () => {
  await sandbox.fs.uploadFiles([
    { source: Buffer.from('one\n'), destination: '/tmp/a/one.txt' },
    { source: Buffer.from('two\n'), destination: 'rel/two.txt' },
  ]);
  const res = await sandbox.fs.downloadFiles([
    { source: '/tmp/a/one.txt' },
    { source: '/home/daytona/rel/two.txt' },
    { source: '/nope/missing.txt' },
  ]);
  eq(res[0].result.toString(), 'one\n', 'first file');
  eq(res[1].result.toString(), 'two\n', 'relative path resolved against the home dir');
  assert(res[2].error && !res[2].result, `missing file reported as an error part: ${res[2].error}`);
  const info = await sandbox.fs.getFileDetails('/tmp/a/one.txt');
  eq([info.size, info.isDir], [4, false], 'GET /files/info');
  const list = await sandbox.fs.listFiles('/tmp/a');
  eq(list.map((x) => x.name), ['one.txt'], 'GET /files');
});

let cmdId;
await step('sessions: cd and export carry over; async command; status while running', async () => {
  await sandbox.process.createSession('s1');
  const sync = await sandbox.process.executeSessionCommand('s1', { command: 'cd /tmp && export X=42' });
  eq(sync.exitCode, 0, 'sync command exit code');
  const res = await sandbox.process.executeSessionCommand('s1', {
    command: 'echo "$X"; pwd; echo oops >&2; sleep 1; echo done; exit 4',
    runAsync: true,
  });
  cmdId = res.cmdId;
  assert(typeof cmdId === 'string' && cmdId.length > 0, 'async exec returns a cmdId');
  const running = await sandbox.process.getSessionCommand('s1', cmdId);
  eq(running.exitCode, undefined, 'no exitCode while running');
  eq(running.command.startsWith('echo "$X"'), true, 'command echoed back');
});

await step('sessions: follow logs over WebSocket, then exit code and log snapshot', async () => {
  let out = '';
  let err = '';
  await sandbox.process.getSessionCommandLogs(
    's1',
    cmdId,
    (c) => (out += c),
    (c) => (err += c),
  );
  const cwd = MODE === 'bwrap' ? '/tmp' : out.split('\n')[1];
  eq(out, `42\n${cwd}\ndone\n`, 'followed stdout');
  eq(err, 'oops\n', 'followed stderr');
  const fin = await sandbox.process.getSessionCommand('s1', cmdId);
  eq(fin.exitCode, 4, 'exit code after the end');
  const logs = await sandbox.process.getSessionCommandLogs('s1', cmdId);
  eq([logs.stdout, logs.stderr], [out, err], 'snapshot stdout/stderr');
  assert(logs.output.includes('oops\n') && logs.output.includes('done\n'), 'combined output');
});

await step('sessions: send input to a running command, list and delete the session', async () => {
  const res = await sandbox.process.executeSessionCommand('s1', { command: 'read line; echo "got:$line"', runAsync: true });
  // The command may still be queued or starting; input goes to its stdin pipe once it runs.
  for (let i = 0; i < 50; i++) {
    const st = await fakeSandbox(sandboxId);
    const c = st._fake.sessions.find((s) => s.sessionId === 's1').commands.find((x) => x.id === res.cmdId);
    if (c && c.running) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await sandbox.process.sendSessionCommandInput('s1', res.cmdId, 'hello\n');
  for (let i = 0; i < 100; i++) {
    const c = await sandbox.process.getSessionCommand('s1', res.cmdId);
    if (c.exitCode !== undefined) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const logs = await sandbox.process.getSessionCommandLogs('s1', res.cmdId);
  eq(logs.stdout, 'got:hello\n', 'stdin reached the command');
  const sessions = await sandbox.process.listSessions();
  eq(sessions.map((s) => s.sessionId), ['s1'], 'listSessions');
  eq(sessions[0].commands.length, 3, 'three commands in the session');
  await sandbox.process.deleteSession('s1');
  await expectStatus(404, () => sandbox.process.getSession('s1'), 'deleted session');
});

let bgPid;
await step('a background process outlives its command; new top-level dirs work', async () => {
  const r = await sandbox.process.executeCommand('nohup sleep 300 >/dev/null 2>&1 & echo $!');
  bgPid = r.result.trim();
  assert(/^\d+$/.test(bgPid), `pid of the background job: ${r.result}`);
  const alive = await sandbox.process.executeCommand(`kill -0 ${bgPid} && echo alive`);
  eq(alive.result, 'alive\n', 'still running in a later command');
  if (MODE === 'bwrap') {
    const mk = await sandbox.process.executeCommand('mkdir -p /opt/tool && echo v1 > /opt/tool/ver && hostname');
    eq(mk.exitCode, 0, 'mkdir at the top level');
    eq(mk.result.trim(), sandboxId.slice(0, 12), 'the sandbox has its own hostname');
    eq((await sandbox.fs.downloadFile('/opt/tool/ver')).toString(), 'v1\n', 'files API sees it');
  }
});

await step('stop: stopping then stopped; the toolbox refuses a stopped sandbox', async () => {
  await sandbox.stop(30);
  eq(sandbox.state, 'stopped', 'SDK state');
  eq((await fakeSandbox(sandboxId)).state, 'stopped', 'fake state');
  const stop = (await requestsSince(0)).find((r) => r.route === 'stopSandbox');
  eq(stop.query, { force: 'false' }, 'stop sends force=false');
  await expectStatus(400, () => sandbox.process.executeCommand('true'), 'toolbox on a stopped sandbox');
  await expectStatus(400, () => sandbox.stop(5), 'stopping a stopped sandbox');
});

await step('start: back to started, files kept', async () => {
  await sandbox.start(30);
  eq(sandbox.state, 'started', 'SDK state');
  const back = await sandbox.fs.downloadFile('/home/daytona/dir/data.bin');
  assert(back.equals(payload), 'file survived stop/start');
  if (MODE === 'bwrap') {
    const ps = await sandbox.process.executeCommand('ps -e -o args');
    assert(!ps.result.includes('sleep 300'), `the background job died with the stop:\n${ps.result}`);
  } else {
    // A killed orphan can linger as a zombie until the host's pid 1 reaps it: that is gone too.
    const r = await sandbox.process.executeCommand(
      `st=$(ps -o stat= -p ${bgPid} 2>/dev/null); case "$st" in ""|Z*) echo gone;; *) echo alive;; esac`,
    );
    eq(r.result, 'gone\n', 'the background job died with the stop');
  }
});

await step('list by labels finds exactly this sandbox; other labels find none', async () => {
  const seq = await lastSeq();
  const found = [];
  for await (const s of daytona.list({ labels })) found.push(s.id);
  eq(found, [sandboxId], 'list by labels');
  const none = [];
  for await (const s of daytona.list({ labels: { 'sandgate.run': 'no-such-run' } })) none.push(s.id);
  eq(none, [], 'list by other labels');
  const reqs = (await requestsSince(seq)).filter((r) => r.route === 'listSandboxes');
  eq(reqs.length, 2, 'one page each');
  eq(JSON.parse(reqs[0].query.labels), labels, 'labels sent as a JSON object');
  eq(Object.keys(reqs[0].query), ['labels'], 'no limit or cursor on the first page');
});

let named;
await step('create from a snapshot blocks until started; a duplicate name gets 409', async () => {
  const name = `sdk-check-${runId}`;
  const seq = await lastSeq();
  named = await daytona.create({ name, labels: { ...labels, kind: 'named' } }, { timeout: 30 });
  eq(named.state, 'started', 'started when POST returns');
  const gets = (await requestsSince(seq)).filter((r) => r.route === 'getSandbox' && r.sandboxId === named.id);
  eq(gets.length, 0, 'no polling needed after a blocking create');
  const e = await expectStatus(409, () => daytona.create({ name }), 'duplicate name');
  assert(/already exists/.test(e.message), `message: ${e.message}`);
  const got = await daytona.get(name);
  eq(got.id, named.id, 'get by name finds the existing sandbox (adoption)');
});

await step('resources without an image are refused with 400', async () => {
  await expectStatus(400, () => daytona.create({ resources: { cpu: 2 } }), 'resources with a snapshot');
});

await step('a state change in progress gets 409', async () => {
  await admin('POST', '/config', { stateDelayMs: { stopping: 1500 } });
  try {
    const pending = named.stop(30);
    await new Promise((r) => setTimeout(r, 200));
    eq((await fakeSandbox(named.id)).state, 'stopping', 'held in stopping');
    await expectStatus(409, () => daytona.get(named.id).then((s) => s.start(5)), 'start while stopping');
    await expectStatus(409, () => daytona.get(named.id).then((s) => s.delete()), 'delete while stopping');
    await pending;
    eq(named.state, 'stopped', 'stop completed');
  } finally {
    await admin('POST', '/config', { stateDelayMs: {} });
  }
});

await step('fault injection: 503, then 429 with rate-limit headers, on GET /api/sandbox/{id}', async () => {
  await admin('POST', '/faults', { method: 'GET', path: `^/api/sandbox/${sandboxId}$`, status: 503, count: 1 });
  await expectStatus(503, () => sandbox.refreshData(), 'injected 503');
  await admin('POST', '/faults', { method: 'GET', path: `^/api/sandbox/${sandboxId}$`, status: 429, retryAfter: 7 });
  const e = await expectStatus(429, () => sandbox.refreshData(), 'injected 429');
  eq(e.headers['retry-after-authenticated'], '7', 'Retry-After-<throttler> header');
  eq(e.headers['x-ratelimit-remaining-authenticated'], '0', 'X-RateLimit-Remaining-<throttler> header');
  await sandbox.refreshData();
  eq(sandbox.state, 'started', 'faults consumed; normal service resumes');
});

await step('fault injection: a dropped GET is retried by the SDK and succeeds', async () => {
  const seq = await lastSeq();
  await admin('POST', '/faults', { method: 'GET', path: `^/api/sandbox/${sandboxId}$`, action: 'drop' });
  await sandbox.refreshData();
  const gets = (await requestsSince(seq)).filter((r) => r.route === 'getSandbox' || r.fault);
  eq(gets.map((r) => [r.status, r.fault ? r.fault.action : null]), [[0, 'drop'], [200, null]], 'drop then retry');
});

await step('fault injection: a create that succeeds but whose reply is lost; the retry gets 409', async () => {
  const name = `lost-reply-${runId}`;
  await admin('POST', '/faults', { method: 'POST', path: '^/api/sandbox$', action: 'drop', after: true });
  try {
    await daytona.create({ name }, { timeout: 30 });
    throw new Error('create should have failed with a connection error');
  } catch (e) {
    assert(e.statusCode === undefined, `no HTTP status on a dropped reply (${e.message})`);
  }
  const st = await admin('GET', '/state');
  assert(st.sandboxes.some((s) => s.name === name), 'the sandbox exists although the reply was lost');
  await expectStatus(409, () => daytona.create({ name }), 'retried create');
  const adopted = await daytona.get(name);
  await adopted.delete();
});

await step('delete: destroying, then GET is 404', async () => {
  await sandbox.delete();
  eq(sandbox.state, 'destroying', 'state right after delete');
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    try {
      await daytona.get(sandboxId);
      await new Promise((r) => setTimeout(r, 50));
    } catch (e) {
      if (e.statusCode !== 404) throw e;
      gone = true;
    }
  }
  assert(gone, 'GET /api/sandbox/{id} became 404');
  const st = await admin('GET', '/state');
  assert(st.destroyed.includes(sandboxId), 'the fake recorded the destruction');
  assert(!st.sandboxes.some((s) => s.id === sandboxId), 'gone from the fake state');
  assert(!fs.existsSync(hostRoot), 'the sandbox directory was removed');
  await named.delete();
});

await step('a client in deprecated polling mode works without Socket.IO', async () => {
  const polling = new Daytona({ apiUrl: `${FAKE}/api`, apiKey: API_KEY, target: 'us', useDeprecatedPolling: true });
  const s = await polling.create({ image: 'debian:12', labels: { ...labels, kind: 'polling' } }, { timeout: 30 });
  eq(s.state, 'started', 'started by polling');
  await s.stop(30);
  eq(s.state, 'stopped', 'stopped by polling');
  await s.delete();
  await polling[Symbol.asyncDispose]();
});

await step('a wrong API key gets 401 on the control plane and the toolbox', async () => {
  const bad = new Daytona({ apiUrl: `${FAKE}/api`, apiKey: 'wrong-key', target: 'us', useDeprecatedPolling: true });
  await expectStatus(401, () => bad.get('anything'), 'control plane');
  const res = await fetch(`${FAKE}/toolbox/whatever/process/execute`, {
    method: 'POST',
    headers: { Authorization: 'Bearer wrong-key', 'Content-Type': 'application/json' },
    body: '{"command":"true"}',
  });
  eq(res.status, 401, 'toolbox');
  const body = await res.json();
  eq(body.code, 'UNAUTHORIZED', 'toolbox error body code');
  await bad[Symbol.asyncDispose]();
});

await step('request log: one JSON line per request, no credentials', async () => {
  if (!REQUEST_LOG) throw new Error('FAKE_REQUEST_LOG not set');
  const text = fs.readFileSync(REQUEST_LOG, 'utf8');
  const lines = text.trim().split('\n').map((l) => JSON.parse(l));
  assert(lines.length > 20, `${lines.length} lines`);
  assert(!text.includes(API_KEY) && !text.includes('wrong-key'), 'no API key in the log');
  assert(lines.every((l) => ['ok', 'bad', 'missing'].includes(l.auth)), 'auth recorded as ok/bad/missing');
  assert(lines.some((l) => l.auth === 'bad' && l.status === 401), 'bad key recorded');
});

await daytona[Symbol.asyncDispose]();
process.stdout.write(`${passed} passed, ${failed} failed\n`);
process.exit(failed ? 1 : 0);
