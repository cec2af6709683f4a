package quantize

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"
)

// The stress vectors are 512 pseudo-random rows of 256 that both this test and the C harness
// that ran ggml generate from splitmix64 with exact float arithmetic; only the SHA-256 of ggml's
// outputs is stored (testdata/ggml/stress.sha256). With 131072 values per type they catch
// rounding slips that the small committed vectors can miss (for instance a product fused into
// an FMA under GOAMD64=v3).

type splitmix struct{ s uint64 }

func (r *splitmix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *splitmix) unif() float32 { return float32(float32(r.next()>>40) * 0x1p-24) }

// stressInput regenerates qstress.c's rows and imatrix.
func stressInput() (src, im []float32, nrows, n int) {
	nrows, n = 512, 256
	r := &splitmix{s: 0x67717561}
	src = make([]float32, nrows*n)
	for row := 0; row < nrows; row++ {
		scale := float32(1+row%7) * float32(math.Ldexp(1, row%11-8))
		for j := 0; j < n; j++ {
			s := r.unif() + r.unif()
			s = s + r.unif()
			s = s + r.unif()
			s = s - 2
			x := float32(s * scale)
			if r.next()%64 == 0 {
				x = x * 8
			}
			src[row*n+j] = x
		}
	}
	im = make([]float32, n)
	for j := range im {
		im[j] = float32((r.unif() + 0.015625) * float32(math.Ldexp(1, j%5-2)))
	}
	return src, im, nrows, n
}

func loadStressHashes(t *testing.T) map[string]string {
	t.Helper()
	h := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(readMaybeGz(t, "stress.sha256"))), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("stress.sha256: bad line %q", line)
		}
		h[f[0]] = f[1]
	}
	return h
}

func sum256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func floatBytes(f []float32) []byte {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestStressMatchesGGML(t *testing.T) {
	if testing.Short() {
		t.Skip("stress vectors skipped in -short mode")
	}
	hashes := loadStressHashes(t)
	src, im, nrows, n := stressInput()
	if got, want := sum256(floatBytes(src)), hashes["f32"]; got != want {
		t.Fatalf("regenerated stress input differs from the C harness's (sha256 %s, want %s)", got, want)
	}
	for typ, gname := range ggmlNames {
		e, _ := For(typ)
		q := make([]byte, RowBytes(typ, n)*nrows)
		for _, variant := range []string{"plain", "imat"} {
			var w []float32
			if variant == "imat" {
				w = im
			} else if needsImatrix[typ] {
				continue // refused; TestQuantizeMatchesGGML checks that
			}
			e.Quantize(q, src, nrows, n, w)
			if got, want := sum256(q), hashes[fmt.Sprintf("%s.%s.q", gname, variant)]; got != want {
				t.Errorf("%s %s: quantized bytes differ from ggml_quantize_chunk (sha256 %s, want %s)", typ, variant, got, want)
			}
			if variant == decodedVariant(typ) {
				deq := make([]float32, nrows*n)
				e.Dequantize(deq, q)
				if got, want := sum256(floatBytes(deq)), hashes[gname+".deq"]; got != want {
					t.Errorf("%s: decoded floats differ from ggml's to_float (sha256 %s, want %s)", typ, got, want)
				}
			}
		}
	}
}
