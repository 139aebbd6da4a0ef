#!/usr/bin/env node
// Drives the official Modal JavaScript SDK (npm "modal", pinned in package.json) against the fake
// and checks every answer, plus the fake's own state through its admin API.  Prints one TAP-like
// line per check and "N passed, M failed"; exits 1 on any failure.
// Env: MODAL_SERVER_URL, MODAL_TOKEN_ID, MODAL_TOKEN_SECRET (the SDK's own), FAKE_ADMIN (the admin
// URL), FAKE_EXEC_MODE (tmpdir | bwrap), MODAL_SANDBOX_V2 (0: the SDK's V1 RPCs).
import { ModalClient } from 'modal';

const ADMIN = process.env.FAKE_ADMIN;
const MODE = process.env.FAKE_EXEC_MODE || 'tmpdir';
const V = process.env.MODAL_SANDBOX_V2 === '0' ? 'v1' : 'v2';
const RUN = Math.random().toString(36).slice(2, 8);
let passed = 0;
let failed = 0;

function ok(cond, what, detail = '') {
  if (cond) {
    passed++;
    process.stdout.write(`ok - [${V}] ${what}\n`);
  } else {
    failed++;
    process.stdout.write(`not ok - [${V}] ${what}${detail ? ` # ${detail}` : ''}\n`);
  }
}

async function check(what, fn) {
  try {
    await fn();
  } catch (e) {
    ok(false, what, String(e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e));
  }
}

async function admin(method, p, body) {
  const r = await fetch(ADMIN + p, { method, body: body ? JSON.stringify(body) : undefined,
    headers: body ? { 'content-type': 'application/json' } : {} });
  return r.json();
}
const state = () => admin('GET', '/__fake/state');
const log = () => admin('GET', '/__fake/log');

async function run(sb, argv, params) {
  const p = await sb.exec(argv, params);
  const [out, err] = await Promise.all([p.stdout.readText(), p.stderr.readText()]);
  const code = await p.wait();
  return { out, err, code };
}

const modal = new ModalClient();
const tags = { owner: 'sdk-check', run: RUN };
let app;
let sb;
let sb2;
const name = `sdk-check-${V}-${RUN}`;

await check('retried call: UNAVAILABLE once, then the same idempotency key', async () => {
  await admin('POST', '/__fake/log/clear');
  await admin('POST', '/__fake/faults', { method: 'AppGetOrCreate', kind: 'status', code: 14, message: 'try again' });
  app = await modal.apps.fromName('sdk-check', { createIfMissing: true });
  const calls = (await log()).filter((e) => e.method === 'AppGetOrCreate');
  ok(calls.length === 2 && calls[0].status === 14 && calls[1].status === 0, 'the SDK retried AppGetOrCreate once',
    JSON.stringify(calls.map((c) => c.status)));
  const key = (c) => c.metadata['x-idempotency-key'];
  ok(calls.length === 2 && key(calls[0]) && key(calls[0]) === key(calls[1]), 'the retry kept x-idempotency-key');
  ok(calls.length === 2 && calls[0].metadata['x-retry-attempt'] === '0' && calls[1].metadata['x-retry-attempt'] === '1',
    'x-retry-attempt counts the tries');
  ok(typeof app.appId === 'string' && app.appId.startsWith('ap-'), 'apps.fromName gives an app id');
});

await check('create', async () => {
  const image = modal.images.fromRegistry('python:3.13-slim');
  sb = await modal.sandboxes.create(app, image, {
    cpu: 2, memoryMiB: 1024, timeoutMs: 600000, idleTimeoutMs: 300000, blockNetwork: true, tags,
    env: { FOO: 'bar' }, name, workdir: '/workspace',
  });
  ok(typeof sb.sandboxId === 'string' && sb.sandboxId.startsWith('sb-'), 'sandboxes.create gives a sandbox id');
  const s = (await state()).sandboxes.find((x) => x.id === sb.sandboxId);
  ok(!!s, 'the fake holds the sandbox');
  ok(s && s.resources.milliCpu === 2000 && s.resources.memoryMb === 1024, 'cpu and memory arrived as milli_cpu, memory_mb',
    JSON.stringify(s && s.resources));
  ok(s && s.timeoutSecs === 600 && s.idleTimeoutSecs === 300, 'timeout and idle timeout arrived in seconds');
  ok(s && s.network.type === 2, 'blockNetwork arrived as network_access BLOCKED');
  ok(s && s.name === name && s.workdir === '/workspace', 'name and workdir arrived');
  ok(s && s.tags.length === 2 && s.tags.some((t) => t.tagName === 'run' && t.tagValue === RUN), 'tags arrived');
  ok(s && s.env.includes('FOO'), 'env arrived (inline secret)');
});

await check('exec', async () => {
  const r = await run(sb, ['echo', 'hi']);
  ok(r.out === 'hi\n' && r.code === 0, 'exec echo: stdout and exit code', JSON.stringify(r));
  const e = await run(sb, ['sh', '-c', 'echo $FOO $A'], { env: { A: 'b' } });
  ok(e.out === 'bar b\n', 'exec sees the sandbox env and its own env', JSON.stringify(e));
  const f = await run(sb, ['sh', '-c', 'echo err >&2; printf out; exit 3']);
  ok(f.out === 'out' && f.err === 'err\n' && f.code === 3, 'stderr apart, and a failing exit code', JSON.stringify(f));
  const w = await run(sb, ['pwd'], { workdir: '/tmp' });
  ok(w.out === '/tmp\n', 'exec workdir', JSON.stringify(w));
  const d = await run(sb, ['pwd']);
  ok(d.out.trim().endsWith('/workspace'), "the sandbox's workdir is the default", JSON.stringify(d));
  const big = await run(sb, ['sh', '-c', 'head -c 3000000 /dev/zero | tr "\\0" x']);
  ok(big.out.length === 3000000 && big.code === 0, 'a 3 MB stdout arrives whole', String(big.out.length));
  const p = await sb.exec(['cat']);
  await p.stdin.writeText('abc');
  await p.stdin.close();
  const echoed = await p.stdout.readText();
  ok(echoed === 'abc' && (await p.wait()) === 0, 'stdin reaches the command', JSON.stringify(echoed));
  // The SDK stops reading at the exec's timeout itself, so only wait() is asked here.
  const t0 = Date.now();
  const slow = await sb.exec(['sleep', '5'], { timeoutMs: 1000 });
  const code = await slow.wait();
  ok(code !== 0 && Date.now() - t0 < 4000, 'an exec timeout ends the command', `code ${code}`);
});

await check('filesystem', async () => {
  await sb.filesystem.writeText('hello from sdk-check\n', '/workspace/hello.txt');
  const back = await sb.filesystem.readText('/workspace/hello.txt');
  ok(back === 'hello from sdk-check\n', 'filesystem write then read', JSON.stringify(back));
  const cat = await run(sb, ['cat', 'hello.txt']);
  ok(cat.out === 'hello from sdk-check\n', 'a command sees the written file', JSON.stringify(cat));
});

await check('tags', async () => {
  await sb.setTags({ ...tags, extra: 'yes' });
  const t = await sb.getTags();
  ok(t.extra === 'yes' && t.run === RUN, 'setTags then getTags', JSON.stringify(t));
  await sb.setTags(tags);
});

await check('faults', async () => {
  // Each fault once on a unary call the SDK retries; the call must still succeed, after the
  // faulted try, which shows the fault reached a real gRPC client as a retryable failure.
  const faults = [
    { kind: 'status', code: 14, what: 'UNAVAILABLE, trailers-only' },
    { kind: 'status-after-headers', code: 4, what: 'DEADLINE_EXCEEDED in trailers' },
    { kind: 'goaway', what: 'GOAWAY before the reply' },
    { kind: 'cut', what: 'a reply cut inside a message' },
  ];
  for (const f of faults) {
    await admin('POST', '/__fake/log/clear');
    await admin('POST', '/__fake/faults', { method: 'SandboxTagsGet', kind: f.kind, code: f.code });
    const t = await sb.getTags();
    const calls = (await log()).filter((e) => e.method === 'SandboxTagsGet');
    ok(t.run === RUN && calls.length === 2 && calls[1].status === 0, `${f.what}: the SDK recovers`,
      JSON.stringify(calls.map((c) => [c.status, c.note])));
  }
});

await check('by name', async () => {
  const again = await modal.sandboxes.fromName('sdk-check', name);
  ok(again.sandboxId === sb.sandboxId, 'sandboxes.fromName finds it');
  let err = null;
  try {
    await modal.sandboxes.create(app, modal.images.fromRegistry('python:3.13-slim'), { name });
  } catch (e) {
    err = e;
  }
  ok(err !== null && /already exists/i.test(String(err.message || err)), 'a second sandbox with the name is refused',
    String(err));
});

await check('snapshot', async () => {
  const img = await sb.snapshotFilesystem();
  ok(typeof img.imageId === 'string' && img.imageId.startsWith('im-'), 'snapshotFilesystem gives an image id');
  // The fake refuses a snapshot without ttl_seconds; the SDK's default lifetime is 30 days.
  const st = await (await fetch(`${ADMIN}/__fake/state`)).json();
  const rec = st.images.find((i) => i.id === img.imageId);
  ok(rec && rec.ttlSeconds === 30 * 24 * 3600, 'the snapshot carries the SDK\'s default lifetime',
    JSON.stringify(rec));
  sb2 = await modal.sandboxes.create(app, img, { tags: { owner: 'sdk-check', run: RUN, copy: '1' }, workdir: '/workspace' });
  const r = await run(sb2, ['cat', 'hello.txt']);
  ok(r.out === 'hello from sdk-check\n', 'a sandbox made from the snapshot has the file', JSON.stringify(r));
});

await check('list', async () => {
  const seen = [];
  for await (const s of modal.sandboxes.list({ appId: app.appId, tags })) seen.push(s.sandboxId);
  ok(seen.length === 2 && seen.includes(sb.sandboxId) && sb2 && seen.includes(sb2.sandboxId),
    'list by tags finds both sandboxes', JSON.stringify(seen));
  const only = [];
  for await (const s of modal.sandboxes.list({ appId: app.appId, tags: { ...tags, copy: '1' } })) only.push(s.sandboxId);
  ok(only.length === 1 && only[0] === sb2.sandboxId, 'tags are ANDed', JSON.stringify(only));
});

await check('terminate', async () => {
  await sb.terminate();
  if (sb2) await sb2.terminate();
  const left = [];
  for await (const s of modal.sandboxes.list({ appId: app.appId, tags })) left.push(s.sandboxId);
  ok(left.length === 0, 'nothing is listed after terminate', JSON.stringify(left));
  const st = await state();
  ok(st.sandboxes.filter((s) => s.running).length === 0, 'the fake holds no running sandbox');
  ok(st.liveProcesses === 0, 'no process of a sandbox is left', String(st.liveProcesses));
});

await check('credentials', async () => {
  const bad = new ModalClient({ tokenId: 'ak-test', tokenSecret: 'as-wrong' });
  let err = null;
  try {
    await bad.apps.fromName('sdk-check', { createIfMissing: true });
  } catch (e) {
    err = e;
  }
  ok(err !== null, 'a wrong token secret is refused', String(err));
  bad.close();
});

modal.close();
process.stdout.write(`${passed} passed, ${failed} failed\n`);
process.exit(failed ? 1 : 0);
void MODE;
