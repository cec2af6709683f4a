package quantize

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// TestKBlocksGPTQDiagonal: with a diagonal Hessian GPTQ spreads no error, so GPTQ into the
// super-block types (importance diag(H)) writes exactly the bytes of llama.cpp's quantizer with
// that importance matrix (the codec that matches ggml_quantize_chunk), with act-order and
// static groups and without.
func TestKBlocksGPTQDiagonal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 6, 512
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	H := make([]float64, cols*cols)
	imp := make([]float32, cols)
	for j := 0; j < cols; j++ {
		v := float32(math.Exp(rng.NormFloat64()))
		imp[j] = v
		H[j*cols+j] = float64(v)
	}
	for _, typ := range []gguf.Type{gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		enc, err := For(typ)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, rows*typ.RowBytes(cols))
		enc.Quantize(want, w, rows, cols, imp)
		for _, actOrder := range []bool{false, true} {
			k, err := NewKBlocksGPTQ(typ, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := GPTQWith(k, w, rows, cols, H, GPTQOptions{Damp: 1e-12, ActOrder: actOrder, StaticGroups: actOrder, ClipSearch: true}); err != nil {
				t.Fatal(err)
			}
			if got := k.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("%v act-order=%v: GPTQ with a diagonal Hessian differs from the imatrix quantizer", typ, actOrder)
			}
		}
	}
}

// TestKBlocksGPTQLowersOutputError: on inputs with correlated columns, GPTQ into Q4_K blocks in
// column order (each super-block's grid fitted from the weights as GPTQ has updated them) gives
// a smaller output error ‖X(W − Ŵ)ᵀ‖ than llama.cpp's Q4_K with the inputs' importance matrix,
// at the same bytes per weight. With act-order and static grids (fitted from the original
// weights) it is worse than llama.cpp's: the tight sub-block ranges clamp the updated weights
// of the columns processed last; that is why convert runs the K-quants in column order.
func TestKBlocksGPTQLowersOutputError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
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
	imp := make([]float32, cols)
	for t0 := 0; t0 < n; t0++ {
		x := X[t0*cols : (t0+1)*cols]
		for i := 0; i < cols; i++ {
			for j := 0; j < cols; j++ {
				H[i*cols+j] += float64(x[i]) * float64(x[j])
			}
		}
	}
	for j := range imp {
		imp[j] = float32(H[j*cols+j] / n)
	}
	outErr := func(b []byte) float64 {
		wq := make([]float32, rows*cols)
		enc, _ := For(gguf.Q4_K)
		enc.Dequantize(wq, b)
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
	enc, _ := For(gguf.Q4_K)
	ref := make([]byte, rows*gguf.Q4_K.RowBytes(cols))
	enc.Quantize(ref, w, rows, cols, imp)
	k, err := NewKBlocksGPTQ(gguf.Q4_K, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GPTQWith(k, w, rows, cols, H, GPTQOptions{ClipSearch: true}); err != nil {
		t.Fatal(err)
	}
	eRef, eGPTQ := outErr(ref), outErr(k.Bytes())
	k2, _ := NewKBlocksGPTQ(gguf.Q4_K, rows, cols)
	if _, err := GPTQWith(k2, w, rows, cols, H, GPTQOptions{ActOrder: true, StaticGroups: true, ClipSearch: true}); err != nil {
		t.Fatal(err)
	}
	eAct := outErr(k2.Bytes())
	t.Logf("output error: imatrix Q4_K %.4g, GPTQ Q4_K %.4g (%.2f×), with act-order and static grids %.4g (%.2f×)", eRef, eGPTQ, eGPTQ/eRef, eAct, eAct/eRef)
	if !(eGPTQ < 0.8*eRef) {
		t.Errorf("GPTQ into Q4_K: output error %.4g, not below 0.8× the imatrix quantizer's %.4g", eGPTQ, eRef)
	}
}

func TestKBlocksGPTQRefuses(t *testing.T) {
	for _, c := range []struct {
		typ  gguf.Type
		cols int
	}{{gguf.Q4_0, 256}, {gguf.Q8_0, 256}, {gguf.Q4_K, 300}, {gguf.Q2_K, 128}} {
		if _, err := NewKBlocksGPTQ(c.typ, 2, c.cols); err == nil {
			t.Errorf("%v × %d: accepted", c.typ, c.cols)
		}
	}
}

// recordingQuantizer remembers the value Round returned for every element.
type recordingQuantizer struct {
	GPTQQuantizer
	cols int
	got  []float32
}

func (q *recordingQuantizer) Round(r, g, c int, x float32) float32 {
	v := q.GPTQQuantizer.Round(r, g, c, x)
	q.got[r*q.cols+c] = v
	return v
}

// TestKBlocksGPTQLowBits: GPTQ into Q2_K and Q3_K on correlated inputs. The bytes decode, with
// the codec's own dequantize_row (the ggml layout), to exactly the values GPTQ's rounding
// assumed, and the output error ‖X(W − Ŵ)ᵀ‖² is below that of llama.cpp's quantizer with the
// inputs' importance matrix at the same bytes.
func TestKBlocksGPTQLowBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols, n = 8, 512, 2048
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	X := make([]float64, n*cols)
	for t0 := 0; t0 < n; t0++ {
		base := rng.NormFloat64()
		for j := 0; j < cols; j++ {
			X[t0*cols+j] = 0.8*base + 0.6*rng.NormFloat64()*math.Exp(float64(j%7)/4)
		}
	}
	H := make([]float64, cols*cols)
	for t0 := 0; t0 < n; t0++ {
		x := X[t0*cols : (t0+1)*cols]
		for i := 0; i < cols; i++ {
			for j := 0; j < cols; j++ {
				H[i*cols+j] += x[i] * x[j]
			}
		}
	}
	imp := make([]float32, cols)
	for j := range imp {
		imp[j] = float32(H[j*cols+j] / n)
	}
	for _, typ := range []gguf.Type{gguf.Q2_K, gguf.Q3_K} {
		enc, _ := For(typ)
		outErr := func(b []byte) float64 {
			wq := make([]float32, rows*cols)
			enc.Dequantize(wq, b)
			d := make([]float64, rows*cols)
			for i := range d {
				d[i] = float64(w[i]) - float64(wq[i])
			}
			return quadLoss(d, rows, cols, H, nil)
		}
		ref := make([]byte, rows*typ.RowBytes(cols))
		enc.Quantize(ref, w, rows, cols, imp)
		k, err := NewKBlocksGPTQ(typ, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		rq := &recordingQuantizer{GPTQQuantizer: k, cols: cols, got: make([]float32, rows*cols)}
		if _, err := GPTQWith(rq, w, rows, cols, H, GPTQOptions{ClipSearch: true}); err != nil {
			t.Fatal(err)
		}
		b := k.Bytes()
		dec := make([]float32, rows*cols)
		enc.Dequantize(dec, b)
		for i := range dec {
			if dec[i] != rq.got[i] {
				t.Fatalf("%v: element %d decodes to %g, GPTQ rounded it to %g", typ, i, dec[i], rq.got[i])
			}
		}
		eRef, eGPTQ := outErr(ref), outErr(b)
		t.Logf("%v output error: imatrix %.4g, GPTQ %.4g (%.2f×)", typ, eRef, eGPTQ, eGPTQ/eRef)
		if !(eGPTQ < 0.8*eRef) {
			t.Errorf("GPTQ into %v: output error %.4g, not below 0.8× the imatrix quantizer's %.4g", typ, eGPTQ, eRef)
		}
	}
}
