package quantize

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gquant/gquant/formats/gguf"
)

// The reference vectors in testdata/ggml come from llama.cpp's own quantizers and decoders
// (ggml_quantize_chunk and to_float at commit 34af94cd); see testdata/README.md.

// vectorSets are the input sets: rows × row length come from <set>.shape. Each has vectors
// for every type of ggmlNames, except iqedge (importance-matrix edge cases: zero and
// near-zero columns, sub-blocks whose best scale comes out negative), which has them for the
// types of iqedgeTypes.
var vectorSets = []string{"synth", "real256", "real768", "iqedge"}

// iqedgeTypes are the types with vectors for the iqedge set.
var iqedgeTypes = map[gguf.Type]bool{
	gguf.F16: true, gguf.BF16: true, gguf.Q8_0: true, gguf.Q4_0: true, gguf.Q4_1: true,
	gguf.Q5_0: true, gguf.Q5_1: true, gguf.Q2_K: true, gguf.Q3_K: true, gguf.Q4_K: true,
	gguf.Q5_K: true, gguf.Q6_K: true, gguf.IQ4_NL: true, gguf.IQ4_XS: true,
	gguf.IQ2_XXS: true, gguf.IQ2_XS: true, gguf.IQ2_S: true, gguf.IQ1_S: true, gguf.IQ1_M: true,
	gguf.IQ3_XXS: true, gguf.IQ3_S: true, gguf.TQ1_0: true, gguf.TQ2_0: true,
}

// hasVectors reports whether set has reference vectors for typ.
func hasVectors(set string, typ gguf.Type) bool { return set != "iqedge" || iqedgeTypes[typ] }

// ggmlNames are ggml_type_name for each type with vectors.
var ggmlNames = map[gguf.Type]string{
	gguf.F16: "f16", gguf.BF16: "bf16", gguf.Q8_0: "q8_0", gguf.Q4_0: "q4_0", gguf.Q4_1: "q4_1",
	gguf.Q5_0: "q5_0", gguf.Q5_1: "q5_1", gguf.Q2_K: "q2_K", gguf.Q3_K: "q3_K", gguf.Q4_K: "q4_K",
	gguf.Q5_K: "q5_K", gguf.Q6_K: "q6_K", gguf.IQ4_NL: "iq4_nl", gguf.IQ4_XS: "iq4_xs",
	gguf.IQ3_XXS: "iq3_xxs", gguf.IQ3_S: "iq3_s", gguf.TQ1_0: "tq1_0", gguf.TQ2_0: "tq2_0",
	gguf.IQ2_XXS: "iq2_xxs", gguf.IQ2_XS: "iq2_xs", gguf.IQ2_S: "iq2_s",
	gguf.IQ1_S: "iq1_s", gguf.IQ1_M: "iq1_m",
}

// ignoresImatrix lists the types for which ggml_quantize_chunk ignores the imatrix.
var ignoresImatrix = map[gguf.Type]bool{
	gguf.F16: true, gguf.BF16: true, gguf.Q8_0: true, gguf.TQ1_0: true, gguf.TQ2_0: true,
}

// needsImatrix lists the types for which ggml_quantize_chunk asserts an imatrix
// (ggml_quantize_requires_imatrix): there are no plain bytes, the decoder vectors decode the
// imat bytes, and gquant must refuse (panic) without one.
var needsImatrix = map[gguf.Type]bool{gguf.IQ2_XXS: true, gguf.IQ2_XS: true, gguf.IQ1_S: true}

// decodedVariant is the variant whose bytes <set>.<type>.deq decodes.
func decodedVariant(typ gguf.Type) string {
	if needsImatrix[typ] {
		return "imat"
	}
	return "plain"
}

// panics reports whether f panics.
func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

type vectorSet struct {
	name         string
	nrows, n     int
	src, imatrix []float32
}

func vecDir() string { return filepath.Join("testdata", "ggml") }

func readMaybeGz(t testing.TB, name string) []byte {
	t.Helper()
	path := filepath.Join(vecDir(), name)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Ext(name) != ".gz" {
		return raw
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

func floats(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

func loadSet(t testing.TB, name string) vectorSet {
	t.Helper()
	s := vectorSet{name: name}
	shape := readMaybeGz(t, name+".shape")
	if _, err := fmt.Sscan(string(shape), &s.nrows, &s.n); err != nil {
		t.Fatalf("%s.shape: %v", name, err)
	}
	s.src = floats(readMaybeGz(t, name+".f32"))
	s.imatrix = floats(readMaybeGz(t, name+".imatrix.f32"))
	if len(s.src) != s.nrows*s.n || len(s.imatrix) != s.n {
		t.Fatalf("%s: inputs do not match shape %d×%d", name, s.nrows, s.n)
	}
	return s
}

// firstDiff describes where two encodings first differ (row, block, byte).
func firstDiff(got, want []byte, e Encoding, n int) string {
	rb := RowBytes(e.Type(), n)
	for i := range want {
		if got[i] != want[i] {
			row, off := i/rb, i%rb
			blk := off / e.BlockBytes()
			b0 := row*rb + blk*e.BlockBytes()
			return fmt.Sprintf("row %d block %d byte %d: got % x, want % x", row, blk, off%e.BlockBytes(),
				got[b0:b0+e.BlockBytes()], want[b0:b0+e.BlockBytes()])
		}
	}
	return "equal"
}

func TestQuantizeMatchesGGML(t *testing.T) {
	for _, set := range vectorSets {
		s := loadSet(t, set)
		for typ, gname := range ggmlNames {
			if !hasVectors(set, typ) {
				continue
			}
			e, err := For(typ)
			if err != nil {
				t.Fatal(err)
			}
			for _, variant := range []string{"plain", "imat"} {
				t.Run(fmt.Sprintf("%s/%s/%s", set, typ, variant), func(t *testing.T) {
					if variant == "plain" && needsImatrix[typ] {
						got := make([]byte, RowBytes(typ, s.n)*s.nrows)
						if !panics(func() { e.Quantize(got, s.src, s.nrows, s.n, nil) }) {
							t.Errorf("quantized without an imatrix; ggml_quantize_chunk refuses %s without one", gname)
						}
						return
					}
					ref := "plain"
					var im []float32
					if variant == "imat" {
						im = s.imatrix
						if !ignoresImatrix[typ] {
							ref = "imat"
						}
					}
					want := readMaybeGz(t, fmt.Sprintf("%s.%s.%s.q.gz", set, gname, ref))
					got := make([]byte, RowBytes(typ, s.n)*s.nrows)
					e.Quantize(got, s.src, s.nrows, s.n, im)
					if !bytes.Equal(got, want) {
						t.Errorf("bytes differ from ggml_quantize_chunk: %s", firstDiff(got, want, e, s.n))
					}
				})
			}
		}
	}
}

func TestDequantizeMatchesGGML(t *testing.T) {
	for _, set := range vectorSets {
		s := loadSet(t, set)
		for typ, gname := range ggmlNames {
			if !hasVectors(set, typ) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", set, typ), func(t *testing.T) {
				e, _ := For(typ)
				q := readMaybeGz(t, fmt.Sprintf("%s.%s.%s.q.gz", set, gname, decodedVariant(typ)))
				want := floats(readMaybeGz(t, fmt.Sprintf("%s.%s.deq.gz", set, gname)))
				got := make([]float32, s.nrows*s.n)
				e.Dequantize(got, q)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("element %d (row %d): got %g (%#08x), ggml to_float gives %g (%#08x)",
							i, i/s.n, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			})
		}
	}
}

// TestRequiresImatrix checks RequiresImatrix against ggml_quantize_requires_imatrix's list.
func TestRequiresImatrix(t *testing.T) {
	for id := gguf.Type(0); id < 64; id++ {
		if got := RequiresImatrix(id); got != needsImatrix[id] {
			t.Errorf("RequiresImatrix(%s) = %v, ggml says %v", id, got, needsImatrix[id])
		}
	}
}
