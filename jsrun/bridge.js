// bridge.js - the program's whole world inside sg-jsrun (compiled into the
// binary by cmake/jsrun.cmake as a string).
//
// Invariants:
// - This file is evaluated once, as a function expression, before the
//   program; it receives the native `send` (one line to the gateway), the
//   boot request and the native `loadStrip` (the TypeScript stripper, or
//   null), and returns `receive` (one line from the gateway).  No native
//   is ever reachable from the program: they live only in this closure.
// - A program is JavaScript, or TypeScript whose types are stripped as the
//   host strips them (the body of `async function __program__() {...}`);
//   the stripper runs only when the text does not compile as JavaScript,
//   and always before the program's first statement.
// - The global keeps the standard JavaScript built-ins plus exactly tools,
//   console, ToolCallError, searchTools, describeTool, store, load, remove.
// - Every built-in the bridge needs after the program starts is captured
//   here first, so a program that rewrites Array.prototype or JSON only
//   confuses itself; the gateway checks every line it is sent anyway.
// - Only lossless plain JSON crosses to the gateway (jsonValue), as on the
//   host.
(function (send, bootLine, loadStrip) {
  "use strict";
  const parse = JSON.parse, stringify = JSON.stringify;
  const isArray = Array.isArray, getProto = Object.getPrototypeOf;
  const objProto = Object.prototype, isFinite_ = Number.isFinite;
  const keysOf = Object.keys, freeze = Object.freeze, defineProp = Object.defineProperty;
  const create = Object.create, apply = Reflect.apply;
  const MapC = Map, SetC = Set, StringC = String, ErrorC = Error, PromiseC = Promise;
  const mapGet = Map.prototype.get, mapSet = Map.prototype.set, mapHas = Map.prototype.has;
  const mapDel = Map.prototype.delete;
  const setAdd = Set.prototype.add, setHas = Set.prototype.has, setDel = Set.prototype.delete;
  const strLower = String.prototype.toLowerCase, strIncludes = String.prototype.includes;
  const strSlice = String.prototype.slice, charCodeAt = String.prototype.charCodeAt;
  const mapSize = Object.getOwnPropertyDescriptor(Map.prototype, "size").get;
  const promiseThen = Promise.prototype.then, promiseReject = Promise.reject;
  const SyntaxErrorC = SyntaxError, strStarts = String.prototype.startsWith;
  const strEnds = String.prototype.endsWith;
  const global = Function("return this")();

  const boot = parse(bootLine);
  const maxOutput = boot.max_output_bytes;
  const maxPending = boot.max_pending;
  const stateKeysMax = boot.state_keys_max, stateBytesMax = boot.state_bytes_max;
  const catalog = boot.tools || [];

  function utf8Length(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = apply(charCodeAt, s, [i]);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c < 0xdc00) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }

  // The host's rule: only values that survive JSON unchanged.
  function jsonValue(value, seen) {
    if (value === null || typeof value === "string" || typeof value === "boolean") return value;
    if (typeof value === "number" && isFinite_(value)) return value;
    if (typeof value !== "object" || apply(setHas, seen, [value]))
      throw new ErrorC("Expected lossless JSON");
    const proto = getProto(value);
    if (!isArray(value) && proto !== objProto && proto !== null)
      throw new ErrorC("Expected plain JSON");
    apply(setAdd, seen, [value]);
    let out;
    if (isArray(value)) {
      out = [];
      for (let i = 0; i < value.length; i++) defineProp(out, i, {
        value: jsonValue(value[i], seen), enumerable: true, writable: true, configurable: true });
    } else {
      out = {};
      const ks = keysOf(value);
      for (let i = 0; i < ks.length; i++) defineProp(out, ks[i], {
        value: jsonValue(value[ks[i]], seen), enumerable: true, writable: true, configurable: true });
    }
    apply(setDel, seen, [value]);
    return out;
  }
  const plain = v => jsonValue(v, new SetC());

  class ToolCallError extends ErrorC {
    constructor(toolName, message) { super(message); this.name = "ToolCallError"; this.toolName = toolName; }
  }

  let printed = 0;
  function emit(msg) { send(stringify(msg)); }
  function show(v) {
    if (typeof v === "string") return v;
    if (v === undefined) return "undefined";
    try { const s = stringify(v); return s === undefined ? StringC(v) : s; }
    catch (e) { return StringC(v); }
  }
  function log(...values) {
    let text = "";
    for (let i = 0; i < values.length; i++) text += (i ? " " : "") + show(values[i]);
    printed += utf8Length(stringify(text)) + 1;
    if (printed > maxOutput) throw new ErrorC("PTC output exceeded the byte limit");
    emit({ t: "log", text });
  }
  const consoleShim = create(null);
  const levels = ["log", "info", "warn", "error", "debug"];
  for (let i = 0; i < levels.length; i++) consoleShim[levels[i]] = log;
  freeze(consoleShim);

  const pending = new MapC();
  let nextID = 1;
  const tools = create(null);
  for (let i = 0; i < catalog.length; i++) {
    const name = StringC(catalog[i].name);
    // Not an async function: returning a promise from one would look up
    // the program's (possibly replaced) Promise.prototype.then.
    defineProp(tools, name, { enumerable: true, value: args => {
      let normalized;
      try { normalized = plain(args); } catch (e) { return apply(promiseReject, PromiseC, [e]); }
      if (apply(mapSize, pending, []) >= maxPending)
        return apply(promiseReject, PromiseC, [new ToolCallError(name,
          "Too many pending tool calls; process in bounded batches")]);
      return new PromiseC((resolve, reject) => {
        const id = nextID++;
        apply(mapSet, pending, [id, { name, resolve, reject }]);
        emit({ t: "call", id, name, arguments: stringify(normalized) });
      });
    } });
  }
  freeze(tools);

  function lower(s) { return apply(strLower, StringC(s), []); }
  function searchTools(query, options) {
    const q = lower(query === undefined ? "" : query);
    let limit = options && options.limit !== undefined ? options.limit : 8;
    let offset = options && options.offset !== undefined ? options.offset : 0;
    if (typeof limit !== "number" || limit < 1 || limit > 20) throw new ErrorC("limit must be between 1 and 20");
    if (typeof offset !== "number" || offset < 0) throw new ErrorC("offset must not be negative");
    const hits = [];
    for (let i = 0; i < catalog.length; i++) {
      const t = catalog[i], d = StringC(t.description || "");
      if (q === "" || apply(strIncludes, lower(t.name), [q]) || apply(strIncludes, lower(d), [q]))
        hits[hits.length] = { name: t.name, description: apply(strSlice, d, [0, 240]) };
    }
    const page = [];
    for (let i = offset; i < hits.length && page.length < limit; i++) page[page.length] = hits[i];
    const out = { tools: page, total: hits.length };
    if (offset + page.length < hits.length) out.next_offset = offset + page.length;
    return out;
  }
  function describeTool(name) {
    for (let i = 0; i < catalog.length; i++) {
      const t = catalog[i];
      if (t.name === name)
        return parse(stringify({ name: t.name, description: t.description || "",
                                 input_schema: t.input_schema || {} }));
    }
    throw new ErrorC("unknown tool: " + StringC(name));
  }

  // Working copy of this scope's state; the gateway commits it only when
  // the program succeeds.
  const state = create(null);
  let stateBytes = 0, stateKeys = 0;
  const initial = boot.state || {}, initialKeys = keysOf(initial);
  for (let i = 0; i < initialKeys.length; i++) {
    const k = initialKeys[i], text = stringify(initial[k]);
    state[k] = text;
    stateKeys++;
    stateBytes += utf8Length(k) + utf8Length(text);
  }
  function stateKey(key) {
    if (typeof key !== "string" || key === "") throw new ErrorC("PTC state key must be a non-empty string");
    return key;
  }
  function store(key, value) {
    stateKey(key);
    const text = stringify(plain(value));
    const old = state[key];
    const had = old !== undefined;
    const bytes = stateBytes - (had ? utf8Length(key) + utf8Length(old) : 0) + utf8Length(key) + utf8Length(text);
    if (!had && stateKeys >= stateKeysMax) throw new ErrorC("PTC state exceeds its key limit");
    if (bytes > stateBytesMax) throw new ErrorC("PTC state exceeds its byte limit");
    state[key] = text;
    if (!had) stateKeys++;
    stateBytes = bytes;
    return true;
  }
  function load(key) {
    stateKey(key);
    const text = state[key];
    return text === undefined ? undefined : parse(text);
  }
  function remove(key) {
    stateKey(key);
    const text = state[key];
    if (text === undefined) return false;
    stateBytes -= utf8Length(key) + utf8Length(text);
    stateKeys--;
    delete state[key];
    return true;
  }

  const surface = { tools, console: consoleShim, ToolCallError, searchTools, describeTool, store, load, remove };
  const surfaceKeys = keysOf(surface);
  for (let i = 0; i < surfaceKeys.length; i++) {
    const k = surfaceKeys[i];
    defineProp(global, k, { value: surface[k], writable: false, enumerable: false, configurable: false });
  }

  let finished = false;
  function finish(msg) {
    if (finished) return;
    finished = true;
    emit(msg);
  }
  function fail(error) {
    let text;
    try { text = StringC(error !== null && error !== undefined && error.message !== undefined ? error.message : error); }
    catch (e) { text = "program failed"; }
    finish({ t: "done", error: apply(strSlice, text, [0, 8192]) });
  }
  function succeed(value) {
    try {
      const msg = { t: "done" };
      if (value !== undefined) {
        msg.value = plain(value);
        printed += utf8Length(stringify(msg.value));
        if (printed > maxOutput) throw new ErrorC("PTC output exceeded the byte limit");
      }
      const st = {}, ks = keysOf(state);
      for (let i = 0; i < ks.length; i++) st[ks[i]] = parse(state[ks[i]]);
      msg.state = st;
      finish(msg);
    } catch (e) { fail(e); }
  }

  // The program's text without its TypeScript types, or null when it has
  // none to strip or this build has no stripper (cmake/jsrun.cmake).
  function stripTypes(code) {
    const strip = loadStrip();
    if (strip === null) return null;
    const prefix = "async function __program__() {\n", suffix = "\n}";
    let out;
    try { out = strip(prefix + code + suffix); } catch (e) { return null; }
    if (!apply(strStarts, out, [prefix]) || !apply(strEnds, out, [suffix])) return null;
    return apply(strSlice, out, [prefix.length, out.length - suffix.length]);
  }
  function compile(code) {
    const AsyncFunction = (async () => {}).constructor;
    const make = body => new AsyncFunction("tools", "console", "ToolCallError", "searchTools",
                                           "describeTool", "store", "load", "remove",
                                           "'use strict';\n" + body);
    try { return make(code); } catch (e) {
      if (!(e instanceof SyntaxErrorC)) throw e;
      const stripped = stripTypes(code);
      if (stripped === null) throw e;
      return make(stripped);
    }
  }

  try {
    const program = compile(boot.code);
    apply(promiseThen, program(tools, consoleShim, ToolCallError, searchTools, describeTool,
                               store, load, remove), [succeed, fail]);
  } catch (e) { fail(e); }

  // One line from the gateway: a nested call's result.  null asks whether
  // the program can still make progress; it answers how many calls wait.
  return function receive(line) {
    if (finished) return -1;
    if (line === null) {
      const n = apply(mapSize, pending, []);
      if (n === 0) fail(new ErrorC("program is waiting for a promise that nothing can settle"));
      return n;
    }
    const msg = parse(line);
    const call = apply(mapGet, pending, [msg.id]);
    if (call === undefined) return apply(mapSize, pending, []);
    apply(mapDel, pending, [msg.id]);
    if (msg.error !== undefined) call.reject(new ToolCallError(call.name, StringC(msg.error)));
    else if (msg.value !== null && typeof msg.value === "object" && msg.value.is_error === true)
      call.reject(new ToolCallError(call.name, errorText(msg.value)));
    else call.resolve(msg.value);
    return apply(mapSize, pending, []);
  };

  function errorText(result) {
    let text = "";
    const parts = isArray(result.content) ? result.content : [];
    for (let i = 0; i < parts.length; i++) { const p = parts[i]; if (p && p.type === "text" && typeof p.text === "string") text += (text ? "\n" : "") + p.text; }
    return text || "tool call failed";
  }
})
