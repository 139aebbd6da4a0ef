// bench/vercel-sdk-bench.mjs - the official Vercel Sandbox SDK (@vercel/sandbox, pinned in
// tests/fakes/vercel/package.json) doing what sgbench's `cloud` set asks of sandgate, against the
// same fake Vercel (tests/fakes/vercel/server.mjs) on 127.0.0.1; the measurements are those of
// bench/cloud-sdk-bench.mjs. The SDK has no base-URL setting: its public `fetch` parameter gets a
// fetch that rewrites the SDK's fixed base https://vercel.com/api to the fake and refuses any
// other address. The operations, the most direct way the SDK offers:
//
//   write_file   sandbox.writeFiles([{path, content}])
//   read_file    sandbox.readFileToBuffer({path})
//   list_files   sandbox.fs.readdir(path) (the SDK runs `ls` in the sandbox)
//   bash         sandbox.runCommand({cmd: 'bash', args: ['-c', command], cwd}), then its output('both')
//   edit_file    readFileToBuffer, the one occurrence replaced, writeFiles
//
// Paths are under /vercel/sandbox, the sandbox's working directory. Time to ready runs from
// Sandbox.create until a first detached runCommand has resolved (the command has started). The
// sandbox is stopped and deleted at the end.
//
//   node bench/vercel-sdk-bench.mjs --url http://127.0.0.1:PORT --log http://127.0.0.1:PORT/__fake/requests
//        [--n 20] [--runs 3] [--mix bench/cloud-mix.json] [--json FILE] [--sdk-dir tests/fakes/vercel]
//        [--token test-token] [--team-id team_fake] [--project-id prj_fake]
//
// Exit status 0 on success, 1 on any failure, 2 on bad usage.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSdk, main, opsOf, parseArgs, run } from './cloud-sdk-bench.mjs';

const NAME = 'vercel-sdk-bench';
const here = path.dirname(fileURLToPath(import.meta.url));
const WS = '/vercel/sandbox';
const SDK_BASE = 'https://vercel.com/api';

main(NAME, async () => {
  const o = parseArgs(NAME, process.argv.slice(2), path.join(here, '..', 'tests', 'fakes', 'vercel'),
    { token: 'test-token', teamId: 'team_fake', projectId: 'prj_fake' });
  const { sdk, version } = await loadSdk(o.sdkDir, '@vercel/sandbox');
  const toFake = async (url, opts) => {
    const u = String(url);
    if (!u.startsWith(SDK_BASE)) throw new Error(`${NAME}: refusing a request to ${u}`);
    return fetch(o.url + u.slice(SDK_BASE.length), opts);
  };
  const P = { token: o.token, teamId: o.teamId, projectId: o.projectId, fetch: toFake };
  const abs = (p) => path.posix.join(WS, p);
  let sb = null;

  const exec = async (argv) => {
    const c = await sb.runCommand({ cmd: argv[0], args: argv.slice(1), cwd: WS });
    return { out: await c.output('both'), code: c.exitCode };
  };
  const readText = async (p) => {
    const b = await sb.readFileToBuffer({ path: abs(p) });
    if (b === null) throw new Error(`${p}: no such file`);
    return b.toString('utf8');
  };
  const writeText = (content, p) => sb.writeFiles([{ path: abs(p), content: Buffer.from(content) }]);

  const b = {
    name: NAME,
    sdk: '@vercel/sandbox',
    version,
    create: async () => {
      sb = await sdk.Sandbox.create({ ...P, name: `sgbench-sdk-${process.pid}`,
        tags: { 'sgbench.client': 'sdk' } });
    },
    firstExec: async () => {
      const c = await sb.runCommand({ cmd: 'true', detached: true });
      return async () => {
        if ((await c.wait()).exitCode !== 0) throw new Error('the first command failed');
      };
    },
    setup: async () => {},
    exec,
    ops: opsOf({ exec, readText, writeText, list: async (p) => JSON.stringify(await sb.fs.readdir(abs(p))) }),
    destroy: async () => {
      if (sb) {
        await sb.stop();
        await sb.delete();
      }
      sb = null;
    },
  };
  await run(b, o);
});
