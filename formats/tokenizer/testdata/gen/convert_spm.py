"""Reference GGUF tokenizer metadata (testdata/golden/convert-spm.json) computed by llama.cpp's
own conversion code, read from a llama.cpp source tree (commit 34af94cd was used), nothing of
which is copied here:

 - conversion/gemma.py Gemma3Model.set_vocab / Gemma2Model.set_vocab, and conversion/base.py
   TextModel._set_vocab_sentencepiece, _create_vocab_sentencepiece, does_token_look_special,
   find_hparam: extracted with ast from the source and run unchanged, with a stand-in
   SentencePieceProcessor answering from tokenizer.json (class Spm below: the model's pieces are
   not available as tokenizer.model, so their scores are unknown);
 - gguf-py/gguf/vocab.py (SpecialVocab), gguf-py/gguf/constants.py and the add_* methods of
   gguf-py/gguf/gguf_writer.py's GGUFWriter: run unchanged, writing into a recorder.

usage: python3 convert_spm.py LLAMA_SRC OUT.json NAME=DIR[:CONFIG.json][+FIXTURE_DIR] ...
tokenizer.json comes from DIR, the other tokenizer files from FIXTURE_DIR when given, else DIR;
config.json is CONFIG.json. NAME gemma3 or gemma2 runs Gemma3Model.set_vocab or
Gemma2Model.set_vocab, any other name _set_vocab_sentencepiece (Llama's path with
tokenizer.model). Python 3.11, standard library only. The command that made the golden file is
in testdata/README.md.
"""
import __future__, ast, hashlib, json, logging, os, re, sys, tempfile, types
from enum import IntEnum
from pathlib import Path

src = Path(sys.argv[1])
out_path = sys.argv[2]

# gguf-py's vocab.py, imported without numpy: a stand-in package "gguf" holding only it.
pkg = types.ModuleType("gguf"); pkg.__path__ = []
sys.modules["gguf"] = pkg
gw = types.ModuleType("gguf.gguf_writer")
class GGUFWriter: pass
gw.GGUFWriter = GGUFWriter
sys.modules["gguf.gguf_writer"] = gw
vocab_src = (src / "gguf-py/gguf/vocab.py").read_text()
vocab = types.ModuleType("gguf.vocab"); vocab.__package__ = "gguf"
exec(compile(vocab_src, "gguf/vocab.py", "exec"), vocab.__dict__)
SpecialVocab = vocab.SpecialVocab

# base.py's two methods, extracted from the class TextModel/ModelBase source.
base_src = (src / "conversion/base.py").read_text()
tree = ast.parse(base_src)
wanted = {"_set_vocab_sentencepiece", "_create_vocab_sentencepiece", "does_token_look_special", "find_hparam"}
funcs = {}
for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and node.name in wanted and node.name not in funcs:
        funcs[node.name] = node
# conversion/gemma.py: Gemma2Model.set_vocab and Gemma3Model.set_vocab, renamed.
for node in ast.parse((src / "conversion/gemma.py").read_text()).body:
    if isinstance(node, ast.ClassDef) and node.name in ("Gemma2Model", "Gemma3Model"):
        for f in node.body:
            if isinstance(f, ast.FunctionDef) and f.name == "set_vocab":
                f.name = node.name + "_set_vocab"
                funcs[f.name] = f
class SentencePieceTokenTypes(IntEnum):
    NORMAL = 1; UNKNOWN = 2; CONTROL = 3; USER_DEFINED = 4; UNUSED = 5; BYTE = 6
pkg.SpecialVocab = SpecialVocab
ns = {"SentencePieceTokenTypes": SentencePieceTokenTypes, "json": json, "logger": logging.getLogger("conv"), "gguf": pkg}
mod = ast.Module(body=list(funcs.values()), type_ignores=[])
import __future__
exec(compile(mod, "conversion/base.py", "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), ns)

class Spm:
    """Stands in for sentencepiece.SentencePieceProcessor on the tokenizer.json beside the
    (empty) tokenizer.model: pieces are model.vocab by id; the unknown piece is
    model.unk_token; byte pieces are <0xXX>; added tokens of tokenizer.json are control
    (what they are in the model does not matter: the added_tokens_decoder pass of
    _create_vocab_sentencepiece retypes each of them); scores are not known (0)."""
    def LoadFromFile(self, path):
        tj = json.load(open(Path(path).parent / "tokenizer.json"))
        v = tj["model"]["vocab"]
        self.pieces = [None] * len(v)
        for k, i in v.items():
            self.pieces[i] = k
        self.unk = v.get(tj["model"].get("unk_token"))
        self.added = {a["id"] for a in tj["added_tokens"]}
    def vocab_size(self): return len(self.pieces)
    def IdToPiece(self, i): return self.pieces[i]
    def GetScore(self, i): return 0.0
    def IsUnknown(self, i): return i == self.unk
    def IsControl(self, i): return i in self.added and i != self.unk
    def IsUnused(self, i): return False
    def IsByte(self, i): return re.fullmatch(r"<0x[0-9A-F]{2}>", self.pieces[i]) is not None
spm_mod = types.ModuleType("sentencepiece"); spm_mod.SentencePieceProcessor = Spm
sys.modules["sentencepiece"] = spm_mod

class Model:
    def __init__(self, d, hparams):
        self.dir_model = d; self.hparams = hparams
for name in funcs:
    setattr(Model, name, ns[name])

# gguf-py's constants (Keys) and GGUFWriter's add_* methods (extracted with ast and run as is),
# over a writer that records key/value pairs instead of writing a file.
consts = types.ModuleType("gguf.constants")
exec(compile((src / "gguf-py/gguf/constants.py").read_text(), "gguf/constants.py", "exec"), consts.__dict__)
from string import ascii_letters, digits
wns = {"Keys": consts.Keys, "ascii_letters": ascii_letters, "digits": digits}
wtree = ast.parse((src / "gguf-py/gguf/gguf_writer.py").read_text())
primitives = {"add_uint32", "add_bool", "add_string", "add_array", "add_key_value", "add_int32", "add_float32"}
wfuncs = []
for node in wtree.body:
    if isinstance(node, ast.ClassDef) and node.name == "GGUFWriter":
        wfuncs = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name.startswith("add_") and f.name not in primitives]
exec(compile(ast.Module(body=wfuncs, type_ignores=[]), "gguf/gguf_writer.py", "exec",
             flags=__future__.annotations.compiler_flag, dont_inherit=True), wns)

class Recorder:
    def __init__(self): self.kv = {}
    def add_uint32(self, k, v): self.kv[k] = v
    def add_bool(self, k, v): self.kv[k] = v
    def add_string(self, k, v): self.kv[k] = v
    def add_array(self, k, v): self.kv[k] = list(v)
    def remove_key(self, k): self.kv.pop(k, None)
for f in wfuncs:
    setattr(Recorder, f.name, wns[f.name])

def ranges(types_):
    out = []
    for i, t in enumerate(types_):
        t = int(t)
        if out and out[-1][2] == t and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1, t])
    return out

result = {"generator": "llama.cpp 34af94cd conversion/base.py _create_vocab_sentencepiece + gguf-py SpecialVocab (see README)", "cases": {}}
for arg in sys.argv[3:]:
    name, rest = arg.split("=", 1)
    rest, _, fixture = rest.partition("+")
    d, _, cfg = rest.partition(":")
    config = json.load(open(cfg)) if cfg else {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja",
                 "chat_template.json", "additional_chat_templates")
        # tokenizer.json from d; the other files from the fixture folder when given, else from d
        for f in files:
            src_dir = Path(fixture) if fixture and f != "tokenizer.json" else Path(d)
            if (src_dir / f).exists():
                os.symlink((src_dir / f).resolve(), tmp / f)
        (tmp / "config.json").write_text(json.dumps(config))
        (tmp / "tokenizer.model").write_bytes(b"")
        m = Model(tmp, config)
        rec = m.gguf_writer = Recorder()
        {"gemma3": m.Gemma3Model_set_vocab, "gemma2": m.Gemma2Model_set_vocab}.get(name, m._set_vocab_sentencepiece)()
    kv = rec.kv
    tokens = kv.pop("tokenizer.ggml.tokens")
    scores = kv.pop("tokenizer.ggml.scores")
    toktypes = kv.pop("tokenizer.ggml.token_type")
    toks = [t.decode("utf-8") for t in tokens]
    h = hashlib.sha256("\n".join(toks).encode("utf-8")).hexdigest()
    special_scores = {str(i): s for i, (s, t) in enumerate(zip(scores, toktypes)) if int(t) not in (1, 6)}
    result["cases"][name] = {
        "config": config,
        "n_tokens": len(toks),
        "tokens_sha256": h,
        "token_type_ranges": ranges(toktypes),
        "scores_of_non_normal": special_scores,
        "first_tokens": toks[:8],
        "kv": kv,
    }
    print(name, len(toks), "tokens;", {k: (v if not isinstance(v, str) or len(v) < 40 else v[:40] + "...") for k, v in kv.items()}, file=sys.stderr)
json.dump(result, open(out_path, "w"), ensure_ascii=False, indent=None, separators=(",", ":"))
