// Golden tokenizer vectors from HF tokenizers (Rust, via @anush008/tokenizers 0.6.0 = tokenizers 0.22.2)
// cross-checked with transformers.js (@huggingface/transformers, or its fork @lenml/tokenizers when
// that is what is installed).
//
// usage: node gen.js NAME TOKENIZER.json OUT.json [EXTRA_SAMPLES.js]
// EXTRA_SAMPLES.js (optional) lists texts appended to those of samples.js.
const { Tokenizer } = require('@anush008/tokenizers');
const fs = require('fs');
const path = require('path');
const baseSamples = require('./samples.js');

async function main() {
  const [name, tokjson, outfile, extra] = process.argv.slice(2);
  const samples = extra ? baseSamples.concat(require(path.resolve(extra))) : baseSamples;
  const tok = Tokenizer.fromFile(tokjson);
  let tjs = null, tjsName = '';
  const dir = path.dirname(tokjson);
  const tj = JSON.parse(fs.readFileSync(tokjson, 'utf8'));
  let tc = {};
  const tcPath = path.join(dir, 'tokenizer_config.json');
  if (fs.existsSync(tcPath)) tc = JSON.parse(fs.readFileSync(tcPath, 'utf8'));
  try {
    const { PreTrainedTokenizer } = await import('@huggingface/transformers');
    tjs = new PreTrainedTokenizer(tj, tc);
    tjsName = 'transformers.js @huggingface/transformers 4.3.2';
  } catch (e) {
    try {
      const { TokenizerLoader } = require('@lenml/tokenizers');
      tjs = TokenizerLoader.fromPreTrained({ tokenizerJSON: tj, tokenizerConfig: tc });
      const pkg = path.join(path.dirname(require.resolve('@lenml/tokenizers')), '..', 'package.json');
      tjsName = 'transformers.js fork @lenml/tokenizers ' + JSON.parse(fs.readFileSync(pkg, 'utf8')).version;
    } catch (e2) { console.error('transformers.js unavailable:', e.message, '/', e2.message); }
  }
  const cases = [];
  let disagree = 0;
  for (const text of samples) {
    const withSp = Array.from((await tok.encode(text, null, { addSpecialTokens: true })).getIds());
    const noSp = Array.from((await tok.encode(text, null, { addSpecialTokens: false })).getIds());
    const dec = await tok.decode(noSp, false);
    const decSkip = await tok.decode(withSp, true);
    const c = { text, ids: withSp, ids_no_special: noSp, decoded: dec, decoded_skip_special: decSkip };
    if (tjs) {
      const j = Array.from(tjs.encode(text, { add_special_tokens: false }));
      if (JSON.stringify(j) !== JSON.stringify(noSp)) { disagree++; c.transformers_js_ids_no_special = j; }
    }
    cases.push(c);
  }
  const out = { tokenizer: name, generator: 'HF tokenizers 0.22.2 (Rust) via npm @anush008/tokenizers 0.6.0', cross_check: tjs ? tjsName + ' (ids_no_special); disagreements recorded as transformers_js_ids_no_special' : 'none', cases };
  const head = JSON.stringify({ ...out, cases: undefined });
  fs.writeFileSync(outfile, head.slice(0, -1) + ',"cases":[\n' + cases.map(c => JSON.stringify(c)).join(',\n') + '\n]}\n');
  console.error(name, 'cases', cases.length, 'transformers.js disagreements', disagree);
}
main().catch(e => { console.error(e); process.exit(1); });
