#!/usr/bin/env node
// Checks sandgate's protos (modal/modal.proto, modal/router.proto) against the official SDK's own
// generated codecs: every field of every message must be written by the SDK's encoder of the
// message of that name under the same field number and wire type. The SDK ships no .proto files,
// only ts-proto code (`var X = { encode(message, writer) { if (message.f …) writer.uint32(TAG)…`),
// so the tags are read from that code. A message the SDK has several of (the same name in two
// packages) passes when one of them matches. Empty messages have no fields to check.
// Prints one line per difference and a summary; exits 1 when anything differs.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PROTO_DIR = path.resolve(HERE, '../../../modal');
const SDK_DIR = path.join(HERE, 'node_modules/modal');
const SDK = path.join(SDK_DIR, 'dist/index.js');
const SDK_VERSION = JSON.parse(fs.readFileSync(path.join(SDK_DIR, 'package.json'), 'utf8')).version;

const root = new protobuf.Root();
root.resolvePath = (_origin, target) => path.join(PROTO_DIR, path.basename(target));
root.loadSync(['modal.proto', 'router.proto']);
root.resolveAll();
const src = fs.readFileSync(SDK, 'utf8');

// Wire types of scalar types; messages, strings, bytes, maps and packed repeated fields are 2.
const WIRE = { double: 1, float: 5, fixed64: 1, sfixed64: 1, fixed32: 5, sfixed32: 5,
  int32: 0, int64: 0, uint32: 0, uint64: 0, sint32: 0, sint64: 0, bool: 0 };

function wireOf(f) {
  if (f.map || f.resolvedType instanceof protobuf.Type) return 2;
  if (f.resolvedType instanceof protobuf.Enum) return f.repeated ? [0, 2] : 0;
  if (f.type in WIRE) return f.repeated ? [WIRE[f.type], 2] : WIRE[f.type];
  return 2;
}

// The SDK's field name -> tag, for each encoder of a message called name.
function sdkEncoders(name) {
  const re = new RegExp(`var ${name}\\d* = \\{\\n  encode\\(message, writer = new BinaryWriter\\(\\)\\) \\{([\\s\\S]*?)\\n  decode\\(`, 'g');
  return [...src.matchAll(re)].map((m) => {
    const tags = {};
    for (const w of m[1].matchAll(/message\.(\w+)(?:(?!message\.)[\s\S])*?writer\.uint32\((\d+)\)/g)) {
      if (!(w[1] in tags)) tags[w[1]] = Number(w[2]);
    }
    return tags;
  });
}

function differences(type, tags) {
  const out = [];
  for (const f of type.fieldsArray) {
    const tag = tags[f.name];
    if (tag === undefined) {
      out.push(`${f.name} (${f.id}) is not in the SDK's message`);
      continue;
    }
    const want = [].concat(wireOf(f));
    if (tag >>> 3 !== f.id) out.push(`${f.name} is field ${f.id}, the SDK's is ${tag >>> 3}`);
    else if (!want.includes(tag & 7)) out.push(`${f.name} has wire type ${want[0]}, the SDK's ${tag & 7}`);
  }
  return out;
}

let checked = 0;
let differ = 0;
const unmatched = [];
(function walk(ns) {
  for (const o of ns.nestedArray) {
    if (o instanceof protobuf.Type) {
      const encoders = sdkEncoders(o.name);
      if (!encoders.length) {
        if (o.fieldsArray.length) unmatched.push(o.fullName.slice(1));
      } else {
        checked++;
        const best = encoders.map((t) => differences(o, t)).sort((a, b) => a.length - b.length)[0];
        if (best.length) {
          differ++;
          console.log(`${o.fullName.slice(1)}: ${best.join('; ')}`);
        }
      }
    }
    if (o.nestedArray) walk(o);
  }
})(root);
for (const name of unmatched) console.log(`${name}: the SDK has no message of that name`);
console.log(`${checked} messages checked against modal ${SDK_VERSION}: ${differ} differ, ${unmatched.length} unknown to the SDK`);
process.exit(differ || unmatched.length ? 1 : 0);
