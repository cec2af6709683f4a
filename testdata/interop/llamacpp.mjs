// Drives stock llama.cpp through node-llama-cpp for gquant's interop tests.
//
// usage: node llamacpp.mjs REQUEST.json
// REQUEST: {"model": "m.gguf", "ctx": 256, "ops": [
//   {"op": "tokenize", "text": "..."}                    -> {"ids": [...]}   (no BOS, no special parsing)
//   {"op": "tokenize", "text": "...", "special": true}   -> {"ids": [...]}   (no BOS; special tokens written in the text are parsed)
//   {"op": "greedy", "ids": [...], "n": 32}              -> {"ids": [...]}   (greedy continuation)
//   {"op": "next", "ids": [...]}                         -> {"id": N}        (argmax after the prompt)
//   {"op": "probs", "ids": [...], "from": K}             -> {"probs": [[p_0..p_V-1], ...]} for positions K..len-1
//   {"op": "probs", "ids": [...], "from": K, "file": F}  -> {"file": F}: the same rows as little-endian float32 in F
//                                                           (large vocabularies: no JSON of millions of numbers)
// ]}
// The node-llama-cpp package is found through GQUANT_NODE_MODULES (a node_modules folder).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const nm = process.env.GQUANT_NODE_MODULES;
if (!nm) throw new Error("GQUANT_NODE_MODULES is not set");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(nm, "node-llama-cpp", "dist", "index.js")).href);

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: req.model, gpuLayers: 0 });
const context = await model.createContext({ contextSize: req.ctx ?? 256, threads: 1, batchSize: req.ctx ?? 256 });
const seq = context.getSequence();

const out = [];
for (const op of req.ops) {
  switch (op.op) {
    case "tokenize":
      out.push({ ids: Array.from(model.tokenize(op.text ?? "", op.special === true)) });
      break;
    case "greedy": {
      await seq.clearHistory();
      const ids = [];
      let input = op.ids;
      for (let i = 0; i < op.n; i++) {
        const items = input.map((t, j) => j === input.length - 1 ? [t, { generateNext: { token: true } }] : t);
        const res = await seq.controlledEvaluate(items, { temperature: 0 });
        const tok = res[res.length - 1].next.token;
        ids.push(tok);
        input = [tok];
      }
      out.push({ ids });
      break;
    }
    case "next": {
      await seq.clearHistory();
      const items = op.ids.map((t, j) => j === op.ids.length - 1 ? [t, { generateNext: { token: true } }] : t);
      const res = await seq.controlledEvaluate(items, { temperature: 0 });
      out.push({ id: res[res.length - 1].next.token });
      break;
    }
    case "probs": {
      await seq.clearHistory();
      const from = op.from ?? op.ids.length - 1;
      const items = op.ids.map((t, j) => j >= from ? [t, { generateNext: { probabilities: true } }] : t);
      const res = await seq.controlledEvaluate(items);
      if (op.file) {
        const rows = new Float32Array((op.ids.length - from) * req.vocab);
        for (let j = from; j < op.ids.length; j++) {
          const base = (j - from) * req.vocab;
          for (const [k, v] of res[j].next.probabilities) rows[base + k] = v;
        }
        fs.writeFileSync(op.file, Buffer.from(rows.buffer, rows.byteOffset, rows.byteLength));
        out.push({ file: op.file });
        break;
      }
      const probs = [];
      for (let j = from; j < op.ids.length; j++) {
        const m = res[j].next.probabilities;
        const row = new Array(req.vocab).fill(0);
        for (const [k, v] of m) row[k] = v;
        probs.push(row);
      }
      out.push({ probs });
      break;
    }
    default:
      throw new Error("unknown op " + op.op);
  }
}
process.stdout.write(JSON.stringify(out));
await context.dispose();
await model.dispose();
await llama.dispose();
