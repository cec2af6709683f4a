package quantize

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gquant/gquant/formats/half"
)

// TestGroupPackingByHand checks codes, packing and scales on rows worked out by hand.
func TestGroupPackingByHand(t *testing.T) {
	// int4 symmetric, group 32: the largest magnitude is −8, so s = −8/−8 = 1 and u = w + 8.
	row := make([]float32, 32)
	for i := range row {
		row[i] = float32(i%16 - 8) // −8 … 7, twice
	}
	gt, err := QuantizeGroups(GroupSpec{Bits: 4, Group: 32, Symmetric: true}, row, 1, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gt.Scales[0] != 1 || gt.Zeros != nil || len(gt.Q) != 16 {
		t.Fatalf("scale %v zeros %v, %d bytes", gt.Scales, gt.Zeros, len(gt.Q))
	}
	// Column 2i in the low nibble: codes 0,1 → 0x10; 2,3 → 0x32; …
	for i, b := range gt.Q {
		want := byte((2*i)%16 | ((2*i+1)%16)<<4)
		if b != want {
			t.Fatalf("byte %d = %#x, want %#x", i, b, want)
		}
	}
	assertEqual(t, gt.Dequantize(), row)

	// int4 asymmetric per channel: range [−1, 2] → s = fp16(3/15), z = round(1/s) = 5; 0 exact.
	row = []float32{-1, 0, 2, 0.5}
	gt, err = QuantizeGroups(GroupSpec{Bits: 4}, row, 1, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := half.F16ToF32(half.F32ToF16(0.2))
	if gt.Scales[0] != s || gt.Zeros[0] != 5 {
		t.Fatalf("scale %v zero %v, want %v and 5", gt.Scales[0], gt.Zeros[0], s)
	}
	// codes: −1/s+5 = 0, 5, 2/s+5 = 15, 0.5/s+5 = 7.5 → 8 (half to even) → bytes 0x50, 0x8F
	if gt.Q[0] != 0x50 || gt.Q[1] != 0x8F {
		t.Fatalf("bytes % x, want 50 8f", gt.Q)
	}
	if d := gt.Dequantize(); d[1] != 0 {
		t.Fatalf("zero reconstructs as %v", d[1])
	}

	// int8 symmetric per channel: s = 127/127 = 1 for the first row, codes are the values.
	rows := []float32{127, -127, 3, -4, 0.5, 1, 2, -2}
	gt, err = QuantizeGroups(GroupSpec{Bits: 8, Symmetric: true}, rows, 2, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gt.Scales[0] != 1 || gt.Scales[1] != float32(2)/127 {
		t.Fatalf("scales %v", gt.Scales)
	}
	if int8(gt.Q[0]) != 127 || int8(gt.Q[1]) != -127 || int8(gt.Q[2]) != 3 || int8(gt.Q[3]) != -4 || int8(gt.Q[7]) != -127 {
		t.Fatalf("codes % x", gt.Q)
	}
	if gt.Spec.String() != "int8-sym-channel" || (GroupSpec{Bits: 4, Group: 128}).String() != "int4-asym-g128" {
		t.Fatal("spec names")
	}
}

func assertEqual(t *testing.T, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

// randWeights draws rows × cols values: Student-t-like heavy tails (normal / sqrt(χ²/3)) when
// heavy, else N(0, 1).
func randWeights(rng *rand.Rand, rows, cols int, heavy bool) []float32 {
	w := make([]float32, rows*cols)
	for i := range w {
		v := rng.NormFloat64()
		if heavy {
			var c float64
			for k := 0; k < 3; k++ {
				z := rng.NormFloat64()
				c += z * z
			}
			v /= math.Sqrt(c/3) + 1e-3
		}
		w[i] = float32(v * 0.05)
	}
	return w
}

// TestGroupRTNProperties checks every spec on random rows with an independent float64 check:
// each reconstruction is on the group's grid, within half a step of the weight unless clipped
// at the end of the code range, and nothing closer exists on the grid.
func TestGroupRTNProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 8, 256
	w := randWeights(rng, rows, cols, true)
	w[5] = 0 // an exact zero stays zero in every encoding
	for _, spec := range allSpecs() {
		gt, err := QuantizeGroups(spec, w, rows, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		deq := gt.Dequantize()
		lo, hi := spec.codeRange()
		gl := spec.groupLen(cols)
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				gi := r*gt.Groups() + c/gl
				s, z := float64(gt.Scales[gi]), gt.zeroOf(gi)
				if spec.Bits == 4 && float64(half.F16ToF32(half.F32ToF16(float32(s)))) != s {
					t.Fatalf("%v: scale %v is not an fp16 value", spec, s)
				}
				x, y := float64(w[r*cols+c]), float64(deq[r*cols+c])
				u := gt.code(r, c)
				if u < lo || u > hi || y != float64(u-z)*s && float32(y) != float32(float64(u-z)*s) {
					t.Fatalf("%v: (%d,%d) code %d zero %d scale %g gives %g", spec, r, c, u, z, s, y)
				}
				// Nearest grid point (codes lo…hi) by brute force in float64.
				best := math.Inf(1)
				for v := lo; v <= hi; v++ {
					best = math.Min(best, math.Abs(x-float64(v-z)*s))
				}
				if d := math.Abs(x - y); d > best+2e-5*math.Abs(s) { // float32 x/s may misround a near-tie
					t.Fatalf("%v: (%d,%d) %g → %g, error %g but the grid has %g", spec, r, c, x, y, d, best)
				}
			}
		}
		if deq[5] != 0 {
			t.Fatalf("%v: zero reconstructs as %g", spec, deq[5])
		}
	}
}

func allSpecs() []GroupSpec {
	return []GroupSpec{
		{Bits: 4, Group: 32, Symmetric: true}, {Bits: 4, Group: 64}, {Bits: 4, Group: 128, Symmetric: true},
		{Bits: 4, Group: 128}, {Bits: 4}, {Bits: 8, Symmetric: true}, {Bits: 8, Group: 128}, {Bits: 8, Group: 32, Symmetric: true},
	}
}

// weightedErr is Σ_ij imp_j (w_ij − ŵ_ij)² in float64.
func weightedErr(w, deq, imp []float32, cols int) float64 {
	var e float64
	for i := range w {
		d := float64(w[i]) - float64(deq[i])
		m := 1.0
		if imp != nil {
			m = float64(imp[i%cols])
		}
		e += m * d * d
	}
	return e
}

// TestGroupClipSearch: the importance-weighted search never does worse than RTN on any group
// (it includes the RTN range) and, on heavy-tailed weights, clearly better overall.
func TestGroupClipSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 16, 256
	w := randWeights(rng, rows, cols, true)
	imp := make([]float32, cols)
	for j := range imp {
		imp[j] = float32(math.Exp(rng.NormFloat64())) // log-normal, like imatrix columns
	}
	for _, spec := range allSpecs() {
		rtn, err := QuantizeGroups(spec, w, rows, cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		srch, err := QuantizeGroups(spec, w, rows, cols, imp)
		if err != nil {
			t.Fatal(err)
		}
		a, b := rtn.Dequantize(), srch.Dequantize()
		gl := spec.groupLen(cols)
		for r := 0; r < rows; r++ {
			for k := 0; k < cols; k += gl {
				o := r*cols + k
				ea := weightedErr(w[o:o+gl], a[o:o+gl], imp[k:k+gl], gl)
				eb := weightedErr(w[o:o+gl], b[o:o+gl], imp[k:k+gl], gl)
				if eb > ea*(1+1e-9) {
					t.Fatalf("%v: row %d group %d: search %g > RTN %g", spec, r, k/gl, eb, ea)
				}
			}
		}
		ea, eb := weightedErr(w, a, imp, cols), weightedErr(w, b, imp, cols)
		t.Logf("%v: weighted error RTN %.4g, search %.4g (%.1f%% less)", spec, ea, eb, 100*(1-eb/ea))
		if spec.Bits == 4 && eb > 0.95*ea {
			t.Errorf("%v: search %g is not 5%% below RTN %g", spec, eb, ea)
		}
	}
}

func TestGroupErrors(t *testing.T) {
	w := make([]float32, 64)
	cases := []struct {
		spec       GroupSpec
		rows, cols int
		w, imp     []float32
		want       string
	}{
		{GroupSpec{Bits: 3}, 1, 64, w, nil, "3 bits unsupported"},
		{GroupSpec{Bits: 4, Group: 48}, 1, 64, w, nil, "group size 48 unsupported"},
		{GroupSpec{Bits: 4, Group: 128}, 1, 64, w, nil, "row length 64 is not a multiple of the group size 128"},
		{GroupSpec{Bits: 4}, 1, 63, w[:63], nil, "row length 63 is odd"},
		{GroupSpec{Bits: 8}, 2, 64, w, nil, "64 weights for a 2 × 64 matrix"},
		{GroupSpec{Bits: 8}, 1, 64, w, w[:3], "importance has 3 values, want 64"},
		{GroupSpec{Bits: 4, Group: 32}, 1, 64, withValue(w, 40, float32(math.NaN())), nil, "weight [0, 40] is NaN"},
		{GroupSpec{Bits: 4, Group: 32}, 1, 64, w, withValue(w, 3, -1), "importance [3] is -1"},
		{GroupSpec{Bits: 4, Group: 32, Symmetric: true}, 1, 64, withValue(w, 33, 1e6), nil, "row 0 group 1: the scale overflows fp16"},
	}
	for _, c := range cases {
		_, err := QuantizeGroups(c.spec, c.w, c.rows, c.cols, c.imp)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.spec, err, c.want)
		}
	}
}

func withValue(w []float32, i int, v float32) []float32 {
	c := append([]float32(nil), w...)
	c[i] = v
	return c
}

func TestGroupBitsPerWeight(t *testing.T) {
	for _, c := range []struct {
		spec GroupSpec
		want float64
	}{
		{GroupSpec{Bits: 4, Group: 128, Symmetric: true}, 4.125},
		{GroupSpec{Bits: 4, Group: 128}, 4 + 20.0/128},
		{GroupSpec{Bits: 4, Group: 32, Symmetric: true}, 4.5},
		{GroupSpec{Bits: 8, Symmetric: true}, 8 + 32.0/1024},
	} {
		if got := c.spec.BitsPerWeight(1024); got != c.want {
			t.Errorf("%v: %g bpw, want %g", c.spec, got, c.want)
		}
	}
}
