#!/usr/bin/env node
// A gRPC probe server for core/grpc.c's unit test (tests/unit/test_grpc.c).
//
// Two servers on 127.0.0.1, ports picked by the kernel, printed on stdout once listening:
//   GRPC <port>   a real gRPC server (@grpc/grpc-js), cleartext HTTP/2 (h2c), service probe.Probe;
//   GRPCS <port>  the same over TLS (a certificate for 127.0.0.1 made at start-up with the openssl
//                 command; its path is printed as "CA <file>"); only with --tls;
//   RAW <port>    a bare node:http2 server that misbehaves on purpose (faults grpc-js will not make).
// It exits when its stdin closes, so a test that dies leaves nothing behind.
//
// Messages are opaque bytes (no protobuf): the request is a line of ASCII words, "key=value".
//
// probe.Probe (grpc-js):
//   Echo     the request back, unchanged
//   Meta     the value of the metadata named in the request ("" if absent), all values joined by ","
//   Count    "n=N gap=MS size=B failat=K": N messages ("msg <i>" or B bytes of 'x'), MS apart;
//            with failat, RESOURCE_EXHAUSTED in the trailers after K messages
//   Fail     NOT_FOUND, with a message that needs percent-encoding
//   Slow     "ms=N id=X": replies "done" after N ms; a cancel is logged with its time
//   Flaky    "id=X fail=K code=C": fails with code C (default UNAVAILABLE) on the first K calls of X,
//            then replies "attempts=<n> keys=<x-idempotency-key values> retry=<x-retry-attempt values>"
//   Log      "id=X": JSON {calls, cancelledAtMs, startedAtMs} for Slow/Flaky calls with that id
// Unknown methods get grpc-js's own trailers-only UNIMPLEMENTED.
//
// RAW paths (any package/service prefix; the last path element picks the behaviour):
//   TrailersOnly  one HEADERS frame with grpc-status 5 and a message, END_STREAM
//   Http503       HTTP 503 text/plain, no gRPC at all
//   NoStatus      200, one message, then the stream ends without trailers
//   CutMid        200, a prefix announcing 100 bytes and 10 of them, then the stream is reset
//   CutMidConn    the same, then the whole connection is destroyed
//   Goaway        GOAWAY before any reply (the stream was never processed)
//   Compressed    a message with the compressed flag set
//   Huge          a prefix announcing 200 MiB
//   TwoUnary      two messages, then status OK (wrong for a unary method)
//   Trickle       one 100-byte message sent a byte at a time, then OK
//   Echo          the request's message back, then OK
//   Conns         "<n>": how many TCP connections this server has accepted so far, then OK
//   Bye           "bye", OK, then the server closes every connection it has (idle ones, as an idle
//                 timeout does)

import grpc from '@grpc/grpc-js';
import http2 from 'node:http2';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

const tls = process.argv.includes('--tls');

const parse = (buf) => {
  const o = {};
  for (const w of buf.toString('utf8').split(/\s+/)) {
    const i = w.indexOf('=');
    if (i > 0) o[w.slice(0, i)] = w.slice(i + 1);
  }
  return o;
};
const raw = { path: '', requestStream: false, responseStream: false,
  requestSerialize: (b) => b, requestDeserialize: (b) => b,
  responseSerialize: (b) => b, responseDeserialize: (b) => b };
const def = (name, stream) => ({ ...raw, path: `/probe.Probe/${name}`, responseStream: !!stream });
const service = {
  Echo: def('Echo'), Meta: def('Meta'), Count: def('Count', true), Fail: def('Fail'),
  Slow: def('Slow'), Flaky: def('Flaky'), Log: def('Log'),
};

const t0 = Date.now();
const logs = new Map(); // id -> {calls, cancelledAtMs, startedAtMs, keys[], attempts[]}
const entry = (id) => {
  if (!logs.has(id)) logs.set(id, { calls: 0, cancelledAtMs: null, startedAtMs: null, keys: [], attempts: [] });
  return logs.get(id);
};

const impl = {
  Echo: (call, cb) => cb(null, call.request),
  Meta: (call, cb) => {
    const name = call.request.toString('utf8').trim();
    cb(null, Buffer.from(call.metadata.get(name).map(String).join(',')));
  },
  Count: (call) => {
    const a = parse(call.request);
    const n = Number(a.n ?? 3), gap = Number(a.gap ?? 0), size = Number(a.size ?? 0);
    const failat = a.failat === undefined ? -1 : Number(a.failat);
    let i = 0, timer = null, done = false;
    call.on('cancelled', () => { done = true; if (timer) clearTimeout(timer); });
    const next = () => {
      if (done) return;
      if (i === failat) {
        call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: `failed at ${i}` });
        return;
      }
      if (i >= n) { call.end(); return; }
      call.write(size > 0 ? Buffer.alloc(size, 'x') : Buffer.from(`msg ${i}`));
      i++;
      timer = setTimeout(next, gap);
    };
    next();
  },
  Fail: (call, cb) => cb({ code: grpc.status.NOT_FOUND, details: 'no such thing: widget-7 (100% gone, café)' }),
  Slow: (call, cb) => {
    const a = parse(call.request);
    const e = entry(a.id ?? '');
    e.calls++;
    e.startedAtMs = Date.now() - t0;
    const timer = setTimeout(() => cb(null, Buffer.from('done')), Number(a.ms ?? 1000));
    call.on('cancelled', () => { clearTimeout(timer); e.cancelledAtMs = Date.now() - t0; });
  },
  Flaky: (call, cb) => {
    const a = parse(call.request);
    const e = entry(a.id ?? '');
    e.calls++;
    e.keys.push(call.metadata.get('x-idempotency-key').map(String).join(','));
    e.attempts.push(call.metadata.get('x-retry-attempt').map(String).join(','));
    if (e.calls <= Number(a.fail ?? 0)) {
      cb({ code: Number(a.code ?? grpc.status.UNAVAILABLE), details: `flaky ${e.calls}` });
      return;
    }
    cb(null, Buffer.from(`attempts=${e.calls} keys=${e.keys.join('|')} retry=${e.attempts.join('|')}`));
  },
  Log: (call, cb) => {
    const a = parse(call.request);
    const e = entry(a.id ?? '');
    cb(null, Buffer.from(JSON.stringify({ calls: e.calls, cancelledAtMs: e.cancelledAtMs,
      startedAtMs: e.startedAtMs, nowMs: Date.now() - t0 })));
  },
};

const frame = (buf, flag = 0) => {
  const p = Buffer.alloc(5);
  p[0] = flag;
  p.writeUInt32BE(buf.length, 1);
  return Buffer.concat([p, buf]);
};

function rawServer() {
  const srv = http2.createServer();
  let conns = 0;
  const sessions = new Set();
  srv.on('connection', () => { conns++; });
  srv.on('session', (s) => {
    s.on('error', () => {});
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  srv.on('stream', (stream, headers) => {
    const body = [];
    stream.on('error', () => {});
    // Like a real handler, answer once the request has arrived (an answer that races the request
    // body is the client library's problem, tested apart with grpc-js's unknown method).
    stream.on('data', (d) => body.push(d));
    stream.on('end', () => answer(stream, headers, Buffer.concat(body)));
  });
  const unary = (stream, msg, after) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    if (after) stream.on('close', after);
    stream.end(frame(msg));
  };
  const answer = (stream, headers, body) => {
    const what = String(headers[':path']).split('/').pop();
    const ok = { ':status': 200, 'content-type': 'application/grpc+proto' };
    switch (what) {
      case 'Echo':
        unary(stream, body.subarray(5));
        break;
      case 'Conns':
        unary(stream, Buffer.from(String(conns)));
        break;
      case 'Bye':
        unary(stream, Buffer.from('bye'), () => setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, 20));
        break;
      case 'TrailersOnly':
        stream.respond({ ...ok, 'grpc-status': '5', 'grpc-message': 'gone%20away' }, { endStream: true });
        break;
      case 'Http503':
        stream.respond({ ':status': 503, 'content-type': 'text/plain' });
        stream.end('upstream unavailable');
        break;
      case 'NoStatus':
        stream.respond(ok);
        stream.end(frame(Buffer.from('lonely')));
        break;
      case 'CutMid':
      case 'CutMidConn': {
        stream.respond(ok);
        const p = Buffer.alloc(5);
        p.writeUInt32BE(100, 1);
        stream.write(Buffer.concat([p, Buffer.alloc(10, 'y')]));
        setTimeout(() => {
          if (what === 'CutMid') stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
          else stream.session.destroy();
        }, 50);
        break;
      }
      case 'Goaway':
        stream.session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0);
        setTimeout(() => stream.session.destroy(), 50);
        break;
      case 'Compressed':
        stream.respond(ok, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(frame(Buffer.from('zz'), 1));
        break;
      case 'Huge': {
        stream.respond(ok, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        const p = Buffer.alloc(5);
        p.writeUInt32BE(200 * 1024 * 1024, 1);
        stream.end(p);
        break;
      }
      case 'TwoUnary':
        stream.respond(ok, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(Buffer.concat([frame(Buffer.from('one')), frame(Buffer.from('two'))]));
        break;
      case 'Trickle': {
        stream.respond(ok, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'OK' }));
        const bytes = frame(Buffer.alloc(100, 'z'));
        let i = 0;
        const tick = () => {
          if (stream.destroyed) return;
          if (i >= bytes.length) { stream.end(); return; }
          stream.write(bytes.subarray(i, i + 1));
          i++;
          setImmediate(tick);
        };
        tick();
        break;
      }
      default:
        stream.respond({ ...ok, 'grpc-status': '12', 'grpc-message': 'unknown raw path' }, { endStream: true });
    }
  };
  return srv;
}

function makeCert(dir) {
  const key = path.join(dir, 'key.pem'), cert = path.join(dir, 'cert.pem');
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { key: fs.readFileSync(key), cert: fs.readFileSync(cert), certFile: cert };
}

const bindGrpc = (server, creds) => new Promise((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', creds, (err, port) => (err ? reject(err) : resolve(port))));

const server = new grpc.Server();
server.addService(service, impl);
const port = await bindGrpc(server, grpc.ServerCredentials.createInsecure());
process.stdout.write(`GRPC ${port}\n`);
let dir = null;
if (tls) {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grpc-probe-'));
  const c = makeCert(dir);
  const tport = await bindGrpc(server, grpc.ServerCredentials.createSsl(null,
    [{ private_key: c.key, cert_chain: c.cert }], false));
  process.stdout.write(`CA ${c.certFile}\nGRPCS ${tport}\n`);
}
const rs = rawServer();
rs.listen(0, '127.0.0.1', () => process.stdout.write(`RAW ${rs.address().port}\nREADY\n`));

const quit = () => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
process.stdin.on('end', quit);
process.stdin.on('error', quit);
process.stdin.resume();
process.on('SIGTERM', quit);
