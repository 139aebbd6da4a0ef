// bench/modal-sdk-bench.mjs - the official Modal JavaScript SDK (npm `modal`, pinned in
// tests/fakes/modal/package.json) doing what sgbench's `cloud` set asks of sandgate, against the
// same fake Modal (tests/fakes/modal/server.mjs) on 127.0.0.1; the measurements are those of
// bench/cloud-sdk-bench.mjs. The operations, the most direct way the SDK offers:
//
//   write_file   sandbox.filesystem.writeText(content, path)
//   read_file    sandbox.filesystem.readText(path)
//   list_files   sandbox.filesystem.listFiles(path); where the fake does not implement it,
//                sandbox.exec(['ls', '-la', ...]) (said in the results)
//   bash         sandbox.exec(['bash', '-c', command], {workdir}), stdout and stderr read, then wait()
//   edit_file    readText, the one occurrence replaced, writeText
//
// Paths are under /workspace, the sandbox's workdir. Time to ready runs from apps.fromName through
// images.fromRegistry('debian:12') and sandboxes.create until the first exec() has resolved (the
// command has started). The sandbox is terminated at the end.
//
//   node bench/modal-sdk-bench.mjs --url http://127.0.0.1:PORT --log http://127.0.0.1:ADMIN/__fake/log
//        [--n 20] [--runs 3] [--mix bench/cloud-mix.json] [--json FILE] [--sdk-dir tests/fakes/modal]
//        [--token-id ak-test] [--token-secret as-test]
//
// Exit status 0 on success, 1 on any failure, 2 on bad usage.

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSdk, main, opsOf, parseArgs, run } from './cloud-sdk-bench.mjs';

const NAME = 'modal-sdk-bench';
const here = path.dirname(fileURLToPath(import.meta.url));
const WS = '/workspace';

main(NAME, async () => {
  const o = parseArgs(NAME, process.argv.slice(2), path.join(here, '..', 'tests', 'fakes', 'modal'),
    { tokenId: 'ak-test', tokenSecret: 'as-test' });
  // The SDK's own variables, as a user sets them; the fake's router is dialled without TLS because
  // the control plane is on loopback.
  process.env.MODAL_SERVER_URL = o.url;
  process.env.MODAL_TOKEN_ID = o.tokenId;
  process.env.MODAL_TOKEN_SECRET = o.tokenSecret;
  const { sdk, version } = await loadSdk(o.sdkDir, 'modal');
  let modal = new sdk.ModalClient();
  const abs = (p) => path.posix.join(WS, p);
  let sb = null;
  let listViaExec = false;

  const exec = async (argv) => {
    const p = await sb.exec(argv, { workdir: WS });
    const [out, err] = await Promise.all([p.stdout.readText(), p.stderr.readText()]);
    return { out: out + err, code: await p.wait() };
  };
  const readText = (p) => sb.filesystem.readText(abs(p));
  const writeText = (content, p) => sb.filesystem.writeText(content, abs(p));

  const b = {
    name: NAME,
    sdk: 'modal',
    version,
    create: async () => {
      const app = await modal.apps.fromName('sgbench', { createIfMissing: true });
      const image = modal.images.fromRegistry('debian:12');
      sb = await modal.sandboxes.create(app, image, { workdir: WS, tags: { 'sgbench.client': 'sdk' } });
    },
    // The first exec waits for the task to be ready; it has started when exec() resolves.
    firstExec: async () => {
      const p = await sb.exec(['mkdir', '-p', WS], { workdir: '/' });
      return async () => {
        if ((await p.wait()) !== 0) throw new Error(`mkdir -p ${WS} failed`);
      };
    },
    setup: async () => {
      await writeText('x\n', 'sgbench-probe.txt');
      try {
        await sb.filesystem.listFiles(WS);
      } catch (e) {
        listViaExec = true;
        process.stderr.write(`${NAME}: filesystem.listFiles failed on the fake (${e.message.split('\n')[0]}); list_files is exec(['ls', ...])\n`);
      }
    },
    exec,
    ops: opsOf({
      exec,
      readText,
      writeText,
      list: async (p) => {
        if (!listViaExec) return JSON.stringify(await sb.filesystem.listFiles(abs(p)));
        const r = await exec(['ls', '-la', abs(p)]);
        if (r.code !== 0) throw new Error(`ls ${p}: exit ${r.code}: ${r.out}`);
        return r.out;
      },
    }),
    info: () => ({ list_files_via: listViaExec ? "exec(['ls', ...]) (the fake has no listFiles)" : 'filesystem.listFiles' }),
    destroy: async () => {
      if (sb) await sb.terminate();
      sb = null;
    },
    newClient: () => {
      modal.close();
      modal = new sdk.ModalClient();
    },
    close: () => modal.close(),
  };
  await run(b, o);
});
