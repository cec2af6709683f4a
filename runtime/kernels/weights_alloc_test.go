package kernels

import (
	"math/rand/v2"
	"testing"
)

// Packed weights above bigAlloc live in mapped memory: a group matrix and a ggml matrix that
// large give the products of their heap-sized rows (the first 16 rows, packed again as a small
// matrix), and Free releases them.
func TestMappedWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	rows, cols := 2048, 1024 // 2 MiB of int8 codes
	codes := make([]byte, rows*cols)
	for i := range codes {
		codes[i] = byte(r.IntN(255) - 127)
	}
	scales := make([]float32, rows)
	for i := range scales {
		scales[i] = 0.01 + r.Float32()
	}
	big, err := NewGroupMatrix(GroupFormat{Bits: 8, Signed: true}, rows, cols, codes, scales, nil)
	if err != nil {
		t.Fatal(err)
	}
	if big.buf == nil {
		t.Skip("no mapped memory on this system")
	}
	small, err := NewGroupMatrix(GroupFormat{Bits: 8, Signed: true}, 16, cols, codes[:16*cols], scales[:16], nil)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var s Scratch
	yb, ys := make([]float32, rows), make([]float32, 16)
	big.MatVec(yb, x, 0, 16, &s)
	small.MatVec(ys, x, 0, 16, &s)
	for i := range ys {
		if yb[i] != ys[i] {
			t.Fatalf("row %d: mapped %g, heap %g", i, yb[i], ys[i])
		}
	}
	big.Free()
	if big.Data != nil || big.buf.data != nil {
		t.Error("Free kept the weights")
	}
	big.Free() // twice is harmless
}
