package convert

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/runtime/arch"
)

// llamaTypes is testdata/llamacpp/quantize-types.json.gz: the type llama-quantize --dry-run
// gave every tensor, per model shape, file type and option set (provenance in
// testdata/llamacpp/README.md).
type llamaTypes map[string]struct {
	Spec struct {
		Family                                     string
		Hidden, Intermediate, Layers, Heads, Vocab int
		KVHeads                                    int `json:"kv_heads"`
		HeadDim                                    int `json:"head_dim"`
		Tied                                       bool
		// Mixtures of experts (0 for the dense shapes).
		Experts     int
		ExpertsUsed int `json:"experts_used"`
		ExpertFF    int `json:"expert_ff"`
	}
	Names []string
	Cases map[string]string
}

func readLlamaTypes(t *testing.T) llamaTypes {
	t.Helper()
	f, err := os.Open("../testdata/llamacpp/quantize-types.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var lt llamaTypes
	dec := json.NewDecoder(zr)
	if err := dec.Decode(&lt); err != nil {
		t.Fatal(err)
	}
	return lt
}

// TestPolicyMatchesLlamaQuantizeDryRun: for 12 model shapes (stories260k, stories3m, 32 layers
// with GQA 4, 32 tied layers without GQA, 80-layer Llama with GQA 8 and Qwen2 (llama.cpp's
// 70B rule), rows of 320; mixtures of experts: Mixtral of 16 layers with 8 experts and GQA 4
// and with 4 experts, tied, no GQA, Mixtral of 80 layers with 4 experts (70B again), Qwen3-MoE
// of 16 layers with 8 and with 4 experts), every file type llama-quantize writes and six option sets (none,
// --imatrix, --pure, --leave-output-tensor, --output-tensor-type with --token-embedding-type,
// two --tensor-type overrides), gquant's plan gives every tensor llama-quantize's type and
// says when an importance matrix is required. Where llama-quantize aborts (no fallback for a
// 172-long row) gquant falls back to F16 instead, which the byte-identity tests cover.
func TestPolicyMatchesLlamaQuantizeDryRun(t *testing.T) {
	lt := readLlamaTypes(t)
	models := make([]string, 0, len(lt))
	for m := range lt {
		models = append(models, m)
	}
	sort.Strings(models)
	checked := 0
	for _, m := range models {
		mod := lt[m]
		s := mod.Spec
		spec := &arch.Spec{Family: s.Family, GGUFArch: s.Family, Hidden: s.Hidden, Intermediate: s.Intermediate, Layers: s.Layers,
			Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: s.HeadDim, Vocab: s.Vocab, Context: 256, RMSEps: 1e-5, RopeTheta: 10000,
			Tied: s.Tied, QKVBias: s.Family == "qwen2", QKNorm: s.Family == "qwen3moe",
			Experts: s.Experts, ExpertsUsed: s.ExpertsUsed, ExpertFF: s.ExpertFF, NormTopK: s.Experts > 0}
		if s.Family == "mixtral" {
			spec.GGUFArch = "llama"
		}
		fam, err := arch.ForSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		cases := make([]string, 0, len(mod.Cases))
		for c := range mod.Cases {
			cases = append(cases, c)
		}
		sort.Strings(cases)
		for _, c := range cases {
			want := mod.Cases[c]
			scheme, variant, _ := strings.Cut(c, "/")
			if want == "abort" {
				continue
			}
			p, err := PresetByName(scheme)
			if err != nil {
				t.Errorf("%s %s: %v", m, c, err)
				continue
			}
			if !isQuantized(p.Base) && variant == "tensor-type" {
				// llama-quantize ignores --tensor-type for float file types; gquant applies it.
				continue
			}
			st := &policyState{preset: p, spec: spec, tied: spec.Tied,
				source: func(arch.TensorRef) (gguf.Type, bool) { return gguf.F32, true }}
			switch variant {
			case "imatrix":
				st.hasImatrix = true
			case "pure":
				st.pure = true
			case "leave-output":
				st.leaveOutput = true
			case "output-q8_0,embd-q4_k":
				q8, q4k := gguf.Q8_0, gguf.Q4_K
				st.outputType, st.tokenEmbdType = &q8, &q4k
			case "tensor-type":
				for _, o := range []string{`blk\.0\.attn_v=q8_0`, `blk\.1\.ffn_down=q8_0`} {
					i := strings.LastIndexByte(o, '=')
					st.overrides = append(st.overrides, Override{Pattern: regexp.MustCompile(o[:i]), Type: gguf.Q8_0, Text: o})
				}
			case "plain":
			default:
				t.Fatalf("%s %s: unknown variant", m, c)
			}
			needs := strings.HasPrefix(want, "needs-imatrix ")
			wantTypes := strings.Fields(strings.TrimPrefix(want, "needs-imatrix "))
			got := planTypes(st, fam.Tensors(spec))
			rowLen := map[string]int{}
			for _, x := range fam.Tensors(spec) {
				rowLen[x.Ref.GGUFName()] = x.Shape[len(x.Shape)-1]
			}
			if len(got) != len(mod.Names) {
				t.Fatalf("%s: %d tensors, llama-quantize saw %d", m, len(got), len(mod.Names))
			}
			anyNeeds := false
			for i, name := range mod.Names {
				g, ok := got[name]
				if !ok {
					t.Fatalf("%s: no tensor %s in gquant's plan", m, name)
				}
				anyNeeds = anyNeeds || g.NeedsImatrix
				if w, err := gguf.ParseType(wantTypes[i]); err == nil && g.Fallback != "" && rowLen[name]%w.BlockSize() != 0 {
					// --token-embedding-type and --output-tensor-type skip llama-quantize's
					// fallback: its quantizer then aborts on the row; gquant falls back.
					continue
				}
				if g.Type.String() != wantTypes[i] {
					t.Errorf("%s %s: %s: gquant %s (%s; %s), llama-quantize %s", m, c, name, g.Type, g.Reason, g.Fallback, wantTypes[i])
				}
			}
			if !st.hasImatrix && anyNeeds != needs { // with an imatrix llama-quantize does not say
				t.Errorf("%s %s: gquant says an imatrix is needed: %v, llama-quantize: %v", m, c, anyNeeds, needs)
			}
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d cases checked", checked)
	}
}

// planTypes runs the policy over the tensors in llama-quantize's order.
func planTypes(st *policyState, tensors []arch.Tensor) map[string]Choice {
	for _, x := range tensors {
		if c := categoryOf(x.Ref.GGUFName()); c == catAttnV || c == catAttnQKV {
			st.nAttnV++
		}
	}
	out := map[string]Choice{}
	for _, x := range tensors {
		var shape []uint64
		for i := len(x.Shape) - 1; i >= 0; i-- {
			shape = append(shape, uint64(x.Shape[i]))
		}
		out[x.Ref.GGUFName()] = st.choose(x.Ref, shape)
	}
	return out
}
