package calibrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
	"github.com/gquant/gquant/runtime"
)

// The fit and held-out extremes of a real calibration equal those computed here by running the
// model over the same chunks with a hook of our own: held-out chunks are every stats.HoldoutEvery-th.
func TestHeldOutExtremes(t *testing.T) {
	o := Options{Ctx: 32, Tokens: 256}
	res := calib(t, o)

	type pair struct{ lo, hi float32 }
	fit, held := map[string]*pair{}, map[string]*pair{}
	cur := fit
	hook := func(name string, x []float32, n, dim int) {
		p := cur[name]
		for _, v := range x {
			if p == nil {
				p = &pair{v, v}
				cur[name] = p
			}
			p.lo, p.hi = min(p.lo, v), max(p.hi, v)
		}
	}
	m, err := runtime.Load(model260k, runtime.Options{Threads: 1, Hooks: &runtime.Hooks{Activation: hook}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	text, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	tok := m.Tokenizer()
	bos := -1
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	chunks, err := Chunks(Tokenize(tok, string(text)), Chunking{Ctx: o.Ctx, Tokens: o.Tokens}, bos, corpus)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 8 {
		t.Fatalf("%d chunks, want 8", len(chunks))
	}
	st := m.NewState(o.Ctx)
	for i, c := range chunks {
		cur = fit
		if i%4 == 3 {
			cur = held
		}
		st.Reset()
		if _, err := m.Eval(st, c, true); err != nil {
			t.Fatal(err)
		}
	}
	differ := 0
	for _, a := range res.Stats.Acts {
		f, h := fit[a.Name], held[a.Name]
		if f == nil || h == nil {
			t.Fatalf("%s: not observed by the test's hook", a.Name)
		}
		if !a.Held || a.FitMin != f.lo || a.FitMax != f.hi || a.HeldMin != h.lo || a.HeldMax != h.hi {
			t.Errorf("%s: held %v, fit [%g, %g] held-out [%g, %g], want fit [%g, %g] held-out [%g, %g]",
				a.Name, a.Held, a.FitMin, a.FitMax, a.HeldMin, a.HeldMax, f.lo, f.hi, h.lo, h.hi)
		}
		if a.HeldMin < a.FitMin || a.HeldMax > a.FitMax {
			differ++
		}
	}
	if differ == 0 {
		t.Error("no held-out extreme passes a fit one: the test cannot tell the two apart")
	}

	// Fewer than stats.HoldoutEvery chunks: nothing held out, nothing widened.
	few := calib(t, Options{Ctx: 32, Tokens: 96})
	for _, a := range few.Stats.Acts {
		if a.Held {
			t.Fatalf("%s: held-out extremes from 3 chunks", a.Name)
		}
	}
}

// Held-out extremes survive a write and read; files without them (as written before they
// existed) read with Held false; a file with one of the pair, or with a held-out range outside
// the activation's range, is refused with the activation's name.
func TestHeldOutFile(t *testing.T) {
	dir := t.TempDir()
	res := calib(t, Options{Ctx: 32, Tokens: 256})
	path := filepath.Join(dir, "s.stats")
	if err := stats.Write(path, res.Stats); err != nil {
		t.Fatal(err)
	}
	got, err := stats.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range res.Stats.Acts {
		g := got.Acts[i]
		if g.Name != w.Name || !g.Held || g.FitMin != w.FitMin || g.FitMax != w.FitMax || g.HeldMin != w.HeldMin || g.HeldMax != w.HeldMax {
			t.Errorf("%s: held-out extremes differ after the round trip", w.Name)
		}
	}

	// rewrite copies the file, dropping tensors whose names end with drop.
	rewrite := func(name, drop string) string {
		gf, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer gf.Close()
		h := &gguf.Header{KVs: gf.KVs}
		var data [][]byte
		for i, ti := range gf.Tensors {
			if strings.HasSuffix(ti.Name, drop) {
				continue
			}
			h.Tensors = append(h.Tensors, gguf.TensorInfo{Name: ti.Name, Type: ti.Type, Shape: ti.Shape})
			data = append(data, gf.TensorData(i))
		}
		p := filepath.Join(dir, name)
		if err := gguf.WriteFile(p, h, func(i int) ([]byte, error) { return data[i], nil }); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old, err := stats.Read(rewrite("old.stats", "_range"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range old.Acts {
		if a.Held {
			t.Fatalf("%s: held-out extremes read from a file without them", a.Name)
		}
	}
	// From version 3 a file may hold one pair only (a shard of fit or held-out chunks only),
	// which must then be the range: here it is not.
	half := rewrite("half.stats", ".held_range")
	if _, err := stats.Read(half); err == nil || !strings.Contains(err.Error(), half+": ") || !strings.Contains(err.Error(), "fit range [") ||
		!strings.Contains(err.Error(), "of the only kind of chunk seen is not the range") {
		t.Errorf("file with .fit_range only: %v", err)
	}

	bad := res.Stats.Acts[0]
	bad.HeldMax = bad.Max + 1
	if err := stats.Write(filepath.Join(dir, "bad.stats"), res.Stats); err == nil || !strings.Contains(err.Error(), bad.Name+": fit/held-out range") {
		t.Errorf("held-out maximum above the maximum: %v", err)
	}
}
