package quantize

import "math"

// LPBQ (Qualcomm's low-power blockwise quantization) for 4-bit weights: each block of bs
// consecutive input channels of an output channel r has the scale c_r·k, where c_r is a
// float32 per-channel scale and k ∈ [1, 2^(dec−bits)] a per-block integer; codes are signed
// and symmetric, q ∈ [−2^(bits−1), 2^(bits−1)−1], and w ≈ q·float32(c_r·k).
//
// The encoder takes each block's ideal scale s = max|w|/(2^(bits−1)−1), sets
// c_r = max(s)/2^(dec−bits) and k = ⌈s/c_r⌉ (rounding up, so that no weight is clipped),
// then rounds each weight to the nearest code (half to even).

// LPBQTensor is an LPBQ-encoded matrix.
type LPBQTensor struct {
	Codes  []int8    // rows × cols codes
	Scales []float32 // per output channel
	Blocks []uint8   // rows × cols/bs integer scales
}

// EncodeLPBQ encodes the rows × cols weights w in blocks of bs with bits-bit codes and
// dec-bit decompressed products (Qualcomm's 4 and 8).
func EncodeLPBQ(w []float32, rows, cols, bs, bits, dec int) *LPBQTensor {
	nb := cols / bs
	qmax := float64(int(1)<<(bits-1) - 1)
	qmin := -qmax - 1
	kmax := float64(int(1) << (dec - bits))
	t := &LPBQTensor{Codes: make([]int8, rows*cols), Scales: make([]float32, rows), Blocks: make([]uint8, rows*nb)}
	ideal := make([]float64, nb)
	for r := 0; r < rows; r++ {
		row := w[r*cols : (r+1)*cols]
		var smax float64
		for b := 0; b < nb; b++ {
			var amax float64
			for _, v := range row[b*bs : (b+1)*bs] {
				amax = max(amax, math.Abs(float64(v)))
			}
			ideal[b] = amax / qmax
			smax = max(smax, ideal[b])
		}
		c := float32(smax / kmax)
		if c == 0 || math.IsInf(float64(c), 0) {
			c = 1 // an all-zero row: any scale, codes 0
		}
		t.Scales[r] = c
		for b := 0; b < nb; b++ {
			k := math.Min(kmax, math.Max(1, math.Ceil(ideal[b]/float64(c))))
			t.Blocks[r*nb+b] = uint8(k)
			s := float32(c * float32(k))
			for i, v := range row[b*bs : (b+1)*bs] {
				q := math.RoundToEven(float64(v) / float64(s))
				t.Codes[r*cols+b*bs+i] = int8(math.Min(qmax, math.Max(qmin, q)))
			}
		}
	}
	return t
}
