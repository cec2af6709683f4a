package quantize

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// TestBlocks32GPTQ: for Q4_1, Q5_0, Q5_1, Q8_0 and IQ4_NL, the bytes GPTQ writes decode (with
// the codec that matches ggml) to the values GPTQ accounted for; with a diagonal Hessian (no
// error to spread) every value is the nearest point of the block's grid, so the weighted error
// is at most llama.cpp's quantizer's with the same importance; on inputs with correlated
// columns GPTQ lowers the output error ‖X(W − Ŵ)ᵀ‖ below that quantizer's.
func TestBlocks32GPTQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols, n = 8, 256, 2048
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	X := make([]float32, n*cols)
	for t0 := 0; t0 < n; t0++ {
		base := rng.NormFloat64()
		for j := 0; j < cols; j++ {
			X[t0*cols+j] = float32(0.8*base + 0.6*rng.NormFloat64()*math.Exp(float64(j%7)/4))
		}
	}
	H := make([]float64, cols*cols)
	for t0 := 0; t0 < n; t0++ {
		x := X[t0*cols : (t0+1)*cols]
		for i := 0; i < cols; i++ {
			for j := 0; j < cols; j++ {
				H[i*cols+j] += float64(x[i]) * float64(x[j])
			}
		}
	}
	imp := make([]float32, cols)
	Hd := make([]float64, cols*cols)
	for j := range imp {
		imp[j] = float32(H[j*cols+j] / n)
		Hd[j*cols+j] = H[j*cols+j]
	}
	outErr := func(wq []float32) float64 {
		var e float64
		for t0 := 0; t0 < n; t0++ {
			for r := 0; r < rows; r++ {
				var s float64
				for j := 0; j < cols; j++ {
					s += float64(X[t0*cols+j]) * float64(w[r*cols+j]-wq[r*cols+j])
				}
				e += s * s
			}
		}
		return e
	}
	weighted := func(wq []float32) float64 {
		var e float64
		for i, v := range wq {
			d := float64(w[i] - v)
			e += float64(imp[i%cols]) * d * d
		}
		return e
	}
	for _, typ := range []gguf.Type{gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.IQ4_NL, gguf.IQ4_XS} {
		enc, _ := For(typ)
		ref := make([]byte, rows*typ.RowBytes(cols))
		enc.Quantize(ref, w, rows, cols, imp)
		wRef := make([]float32, rows*cols)
		enc.Dequantize(wRef, ref)
		run := func(H []float64) ([]float32, []float32) {
			var k interface {
				GPTQQuantizer
				Bytes() []byte
			}
			var err error
			if typ == gguf.IQ4_XS {
				k, err = NewKBlocksGPTQ(typ, rows, cols)
			} else {
				k, err = NewBlocks32GPTQ(typ, rows, cols)
			}
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{q: k, vals: make([]float32, rows*cols)}
			if _, err := GPTQWith(rec, w, rows, cols, H, GPTQOptions{ClipSearch: true}); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, rows*cols)
			enc.Dequantize(got, k.Bytes())
			return got, rec.vals
		}
		diag, diagVals := run(Hd)
		full, fullVals := run(H)
		for i := range full {
			if full[i] != fullVals[i] || diag[i] != diagVals[i] {
				t.Fatalf("%v: element %d decodes to %v, GPTQ accounted for %v", typ, i, full[i], fullVals[i])
			}
		}
		if e, eRef := weighted(diag), weighted(wRef); e > eRef*(1+1e-6) {
			t.Errorf("%v: diagonal Hessian: weighted error %.6g above llama.cpp's %.6g", typ, e, eRef)
		}
		eRef, eGPTQ := outErr(wRef), outErr(full)
		t.Logf("%v: output error llama.cpp %.4g, GPTQ %.4g (%.2f×)", typ, eRef, eGPTQ, eGPTQ/eRef)
		if !(eGPTQ < 0.95*eRef) {
			t.Errorf("%v: GPTQ output error %.4g, not below 0.95× llama.cpp's %.4g", typ, eGPTQ, eRef)
		}
	}
	if _, err := NewBlocks32GPTQ(gguf.Q4_0, 2, 32); err == nil {
		t.Error("Q4_0 accepted (it has its own path)")
	}
	if _, err := NewBlocks32GPTQ(gguf.Q8_0, 2, 48); err == nil {
		t.Error("48 columns accepted")
	}
}

// recorder records the values a codec's Round returns.
type recorder struct {
	q    GPTQQuantizer
	vals []float32
}

func (r *recorder) GroupSize() int                         { return r.q.GroupSize() }
func (r *recorder) Fit(row, g int, x, imp []float32) error { return r.q.Fit(row, g, x, imp) }
func (r *recorder) Round(row, g, c int, x float32) float32 {
	v := r.q.Round(row, g, c, x)
	r.vals[row*256+c] = v
	return v
}
