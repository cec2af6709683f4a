// Drives ONNX Runtime (onnxruntime-node, CPU) for gquant's interop tests: runs an ONNX export
// of a gqf file over prompts and returns the logits of each prompt's positions.
//
// usage: node ort.mjs REQUEST.json
// REQUEST: {"model": "m.onnx", "max_len": L, "prompts": [[ids...], ...]}
//   Each prompt is padded to max_len with its last token (positions are causal, so padding
//   does not change the logits of the prompt's own positions); input_ids is [1, max_len].
// ANSWER (stdout): [{"logits": [[v_0..v_V-1] per position of the prompt]}, ...]
// The onnxruntime-node package is found through GQUANT_NODE_MODULES (a node_modules folder).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const nm = process.env.GQUANT_NODE_MODULES;
if (!nm) throw new Error("GQUANT_NODE_MODULES is not set");
const require = createRequire(path.join(nm, "noop.js"));
const ort = require("onnxruntime-node");

const session = await ort.InferenceSession.create(req.model, {
  executionProviders: ["cpu"],
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
});
const L = req.max_len;
const out = [];
for (const ids of req.prompts) {
  if (ids.length === 0 || ids.length > L) throw new Error(`prompt of ${ids.length} tokens for max_len ${L}`);
  const input = new BigInt64Array(L);
  for (let i = 0; i < L; i++) input[i] = BigInt(ids[Math.min(i, ids.length - 1)]);
  const res = await session.run({ input_ids: new ort.Tensor("int64", input, [1, L]) });
  const logits = res.logits;
  const V = logits.dims[2];
  const rows = [];
  for (let p = 0; p < ids.length; p++) rows.push(Array.from(logits.data.subarray(p * V, (p + 1) * V)));
  out.push({ logits: rows });
}
process.stdout.write(JSON.stringify(out));
