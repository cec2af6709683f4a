// Drives an onnx-kv export (gquant export --to onnx-kv) in ONNX Runtime (onnxruntime-node,
// CPU) as a phone host would: a KV cache of metadata.json's context kept by the host, the
// rotation tables computed from rope_inv_freq, the additive attention mask built per run, and
// the parts of a graph chained through the residual stream they pass on.
//
// usage: node ortkv.mjs REQUEST.json
// REQUEST: {"dir": "DIR", "windows": [[ids...], ...], "out": "logits.bin",
//           "greedy": {"prompt": [ids...], "n": N}}   (greedy optional)
//   For each window, the logits of every position, twice: the prompt graph fed AR tokens at a
//   time (the last run padded), then the token graph fed one token at a time; written to out
//   as float32 little-endian, window by window, prompt first.
// ANSWER (stdout): {"ar": AR, "vocab": V, "greedy": [ids...]}: greedy continuation of
//   greedy.prompt (prompt graph for the prompt, token graph after it), stopping at an EOS or
//   BOS id as gquant run does.
// The onnxruntime-node package is found through GQUANT_NODE_MODULES (a node_modules folder).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const nm = process.env.GQUANT_NODE_MODULES;
if (!nm) throw new Error("GQUANT_NODE_MODULES is not set");
const require = createRequire(path.join(nm, "noop.js"));
const ort = require("onnxruntime-node");

const meta = JSON.parse(fs.readFileSync(path.join(req.dir, "metadata.json"), "utf8"));
const CTX = meta.context_length, HD = meta.head_dim, KVH = meta.kv_heads, V = meta.vocab;
const MASK = meta.attention_mask_value;
const half = meta.rope_inv_freq.length; // rotated pairs: HD/2 unless partial rotary
const W = meta.sliding_window ?? 0;     // attention_mask_sliding's window (0: none)

async function load(g) {
  const parts = [];
  for (const p of g.parts) {
    const session = await ort.InferenceSession.create(path.join(req.dir, p.file), {
      executionProviders: ["cpu"], intraOpNumThreads: 1, interOpNumThreads: 1,
    });
    parts.push({ info: p, session });
  }
  return { ar: g.ar, parts };
}
const graphs = {};
for (const g of meta.graphs) graphs[g.name] = await load(g);

// The host's cache: per layer, keys [KVH][HD][CTX] and values [KVH][CTX][HD].
function newCache() {
  const c = { n: 0, k: [], v: [] };
  for (let l = 0; l < meta.layers; l++) {
    c.k.push(new Float32Array(KVH * HD * CTX));
    c.v.push(new Float32Array(KVH * CTX * HD));
  }
  return c;
}

// run evaluates tokens (at most the graph's AR) at the cache's next positions, appends their
// keys and values, and returns their logits.
async function run(g, cache, tokens) {
  const AR = g.ar, P = CTX - AR, n0 = cache.n, m = tokens.length;
  if (m > AR || n0 + m > CTX || n0 > P) throw new Error(`run of ${m} tokens at ${n0} (ar ${AR}, ctx ${CTX})`);
  const ids = new Int32Array(AR);
  for (let i = 0; i < AR; i++) ids[i] = tokens[Math.min(i, m - 1)];
  // The masks: past slot j holds position j, new slot k position n0 + k; a sliding layer's
  // mask also hides the positions W or more before the query's own.
  const masks = (w) => {
    const mask = new Float32Array(AR * CTX);
    for (let i = 0; i < AR; i++) {
      const q = n0 + i;
      for (let j = 0; j < P; j++) mask[i * CTX + j] = j < n0 && (!w || q - j < w) ? 0 : MASK;
      for (let k = 0; k < AR; k++) mask[i * CTX + P + k] = k <= i && (!w || i - k < w) ? 0 : MASK;
    }
    return new ort.Tensor("float32", mask, [1, 1, AR, CTX]);
  };
  const tables = (inv, factor) => {
    const cos = new Float32Array(AR * half), sin = new Float32Array(AR * half);
    for (let i = 0; i < AR; i++) {
      for (let j = 0; j < half; j++) {
        const a = Math.fround((n0 + i) * inv[j]);
        cos[i * half + j] = Math.cos(a) * factor;
        sin[i * half + j] = Math.sin(a) * factor;
      }
    }
    return [new ort.Tensor("float32", cos, [1, 1, AR, half]), new ort.Tensor("float32", sin, [1, 1, AR, half])];
  };
  const [cos, sin] = tables(meta.rope_inv_freq, meta.rope_attention_factor);
  const feeds = {
    input_ids: new ort.Tensor("int32", ids, [1, AR]),
    attention_mask: masks(0),
    position_ids_cos: cos,
    position_ids_sin: sin,
  };
  if (W) feeds.attention_mask_sliding = masks(W);
  if (meta.rope_inv_freq_local) {
    [feeds.position_ids_cos_local, feeds.position_ids_sin_local] = tables(meta.rope_inv_freq_local, 1);
  }
  let logits = null;
  for (const { info, session } of g.parts) {
    const inputs = {};
    for (const io of info.inputs) {
      const mk = /^past_key_(\d+)_in$/.exec(io.name), mv = /^past_value_(\d+)_in$/.exec(io.name);
      if (mk) {
        const src = cache.k[+mk[1]], d = new Float32Array(KVH * HD * P);
        for (let h = 0; h < KVH; h++) for (let e = 0; e < HD; e++) for (let t = 0; t < n0; t++)
          d[(h * HD + e) * P + t] = src[(h * HD + e) * CTX + t];
        inputs[io.name] = new ort.Tensor("float32", d, io.shape);
      } else if (mv) {
        const src = cache.v[+mv[1]], d = new Float32Array(KVH * P * HD);
        for (let h = 0; h < KVH; h++) for (let t = 0; t < n0; t++) for (let e = 0; e < HD; e++)
          d[(h * P + t) * HD + e] = src[(h * CTX + t) * HD + e];
        inputs[io.name] = new ort.Tensor("float32", d, io.shape);
      } else if (feeds[io.name]) {
        inputs[io.name] = feeds[io.name];
      } else {
        throw new Error(`${info.file}: input ${io.name} has no value`);
      }
    }
    const res = await session.run(inputs);
    for (const io of info.outputs) {
      const t = res[io.name];
      const mk = /^past_key_(\d+)_out$/.exec(io.name), mv = /^past_value_(\d+)_out$/.exec(io.name);
      if (mk) {
        const dst = cache.k[+mk[1]];
        for (let h = 0; h < KVH; h++) for (let e = 0; e < HD; e++) for (let t2 = 0; t2 < m; t2++)
          dst[(h * HD + e) * CTX + n0 + t2] = t.data[(h * HD + e) * AR + t2];
      } else if (mv) {
        const dst = cache.v[+mv[1]];
        for (let h = 0; h < KVH; h++) for (let t2 = 0; t2 < m; t2++) for (let e = 0; e < HD; e++)
          dst[(h * CTX + n0 + t2) * HD + e] = t.data[(h * AR + t2) * HD + e];
      } else if (io.name === "logits") {
        logits = t.data.subarray(0, m * V);
      } else {
        feeds[io.name] = t; // the residual stream, for the next part
      }
    }
  }
  cache.n += m;
  return logits;
}

async function evalAll(g, ids, step) {
  const cache = newCache(), out = new Float32Array(ids.length * V);
  for (let i = 0; i < ids.length; i += step) {
    const chunk = ids.slice(i, i + step);
    out.set(await run(g, cache, chunk), i * V);
  }
  return { out, cache };
}

const fd = req.out ? fs.openSync(req.out, "w") : null;
for (const w of req.windows || []) {
  for (const [g, step] of [[graphs.prompt, graphs.prompt.ar], [graphs.token, 1]]) {
    const { out } = await evalAll(g, w, step);
    fs.writeSync(fd, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
  }
}
if (fd !== null) fs.closeSync(fd);

const answer = { ar: graphs.prompt.ar, vocab: V, greedy: [] };
if (req.greedy) {
  const stop = new Set([...meta.eos_ids, meta.bos_id]);
  const { out, cache } = await evalAll(graphs.prompt, req.greedy.prompt, graphs.prompt.ar);
  let last = out.subarray(out.length - V);
  for (let i = 0; i < req.greedy.n; i++) {
    let best = 0;
    for (let j = 1; j < V; j++) if (last[j] > last[best]) best = j;
    if (stop.has(best)) break;
    answer.greedy.push(best);
    if (i === req.greedy.n - 1 || cache.n >= CTX) break;
    last = await run(graphs.token, cache, [best]);
  }
}
process.stdout.write(JSON.stringify(answer));
