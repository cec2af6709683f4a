package arch

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gqf"
)

func qwen3Spec(t *testing.T) *Spec {
	t.Helper()
	fam, _ := ForHF("Qwen3ForCausalLM")
	s, err := fam.SpecFromHF(map[string]any{"hidden_size": 64.0, "intermediate_size": 96.0, "num_hidden_layers": 3.0,
		"num_attention_heads": 4.0, "num_key_value_heads": 2.0, "head_dim": 24.0, "vocab_size": 100.0,
		"max_position_embeddings": 256.0, "tie_word_embeddings": true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLowerKVPoints: every activation of the deployment graph (a Qwen3 shape with QK norms,
// GQA and head_dim ≠ hidden/heads, in parts) belongs to a point of Lower's graph, or to one of
// the inputs computed by the host, so the gqf file's encodings cover it; the cache tensors
// belong to the keys after RoPE and the values; the parts chain, each reading what the one
// before writes.
func TestLowerKVPoints(t *testing.T) {
	g := ModelGraph(qwen3Spec(t))
	full, err := g.Lower(8)
	if err != nil {
		t.Fatal(err)
	}
	points := map[string]bool{}
	for _, p := range full.Point {
		points[p] = true
	}
	host := map[string]bool{InputCos: true, InputSin: true, "rope.sin_signed": true, InputAttentionMask: true}
	var prevOut []string
	for _, part := range [][2]int{{0, 1}, {1, 3}} {
		low, err := g.LowerKV(KVOptions{AR: 4, Ctx: 16, First: part[0], Last: part[1]})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range low.Graph.Activations {
			if p := low.Point[a.Name]; !points[p] && !host[p] {
				t.Errorf("part %v: %s belongs to %q, no point of the graph", part, a.Name, p)
			}
		}
		for _, in := range low.Graph.Inputs {
			if p := low.Point[in.Name]; in.Dtype == gqf.DataType_F32 && !points[p] && !host[p] {
				t.Errorf("part %v: input %s belongs to %q", part, in.Name, p)
			}
		}
		l := part[0]
		for name, want := range map[string]string{PastKeyIn(l): "blk.%d.k_rope", PastKeyOut(l): "blk.%d.k_rope",
			PastValueIn(l): "blk.%d.v", PastValueOut(l): "blk.%d.v", "blk.%d.k_cache": "blk.%d.k_rope"} {
			name, want = strings.Replace(name, "%d", strconv.Itoa(l), 1), strings.Replace(want, "%d", strconv.Itoa(l), 1)
			if low.Point[name] != want {
				t.Errorf("%s belongs to %q, want %q", name, low.Point[name], want)
			}
		}
		shapes := map[string][]int64{}
		for _, v := range low.Graph.Inputs {
			shapes[v.Name] = v.Shape
		}
		for _, v := range low.Graph.Activations {
			shapes[v.Name] = v.Shape
		}
		for name, want := range map[string][]int64{PastKeyIn(l): {2, 1, 24, 12}, PastValueIn(l): {2, 1, 12, 24},
			PastKeyOut(l): {2, 1, 24, 4}, PastValueOut(l): {2, 1, 4, 24}, InputAttentionMask: {1, 1, 4, 16},
			InputCos: {1, 1, 4, 12}, "blk." + strconv.Itoa(l) + ".kq": {2, 2, 4, 16}} {
			if got := shapes[name]; !slices.Equal(got, want) {
				t.Errorf("%s: shape %v, want %v", name, got, want)
			}
		}
		var ins []string
		for _, v := range low.Graph.Inputs {
			ins = append(ins, v.Name)
		}
		if part[0] == 0 {
			if ins[0] != InputIDs || low.Graph.Inputs[0].Dtype != gqf.DataType_INT32 {
				t.Errorf("first part inputs %v", ins)
			}
			if low.Graph.Outputs[0] != "blk.0.out" {
				t.Errorf("first part outputs %v", low.Graph.Outputs)
			}
		} else {
			if ins[0] != prevOut[0] || low.Graph.Outputs[0] != "logits" {
				t.Errorf("second part: inputs %v, outputs %v after %v", ins, low.Graph.Outputs, prevOut)
			}
		}
		prevOut = low.Graph.Outputs
	}
}

// TestLowerKVErrors: shapes the deployment graph cannot have are refused by name.
func TestLowerKVErrors(t *testing.T) {
	g := ModelGraph(qwen3Spec(t))
	for _, c := range []struct {
		o    KVOptions
		want string
	}{
		{KVOptions{AR: 0, Ctx: 16}, "ar: must be at least 1, got 0"},
		{KVOptions{AR: 16, Ctx: 16}, "ctx: 16 must exceed ar 16"},
		{KVOptions{AR: 4, Ctx: 512}, "ctx: 512 exceeds the model's context length 256"},
		{KVOptions{AR: 4, Ctx: 16, First: 2, Last: 2}, "layers [2, 2): not a range of the model's 3 layers"},
		{KVOptions{AR: 4, Ctx: 16, First: 1, Last: 4}, "layers [1, 4)"},
	} {
		if _, err := g.LowerKV(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}
