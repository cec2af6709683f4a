package half

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refF16 rounds x to binary16 by searching the table of every finite half value (decoded with
// math.Ldexp, independently of F16ToF32) for the nearest, ties to the even code.
type f16table struct {
	vals  []float64 // positive finite values, ascending
	codes []uint16
}

func newTable() *f16table {
	t := &f16table{}
	for c := 0; c < 0x7c00; c++ {
		e, m := c>>10, c&0x3ff
		var v float64
		if e == 0 {
			v = math.Ldexp(float64(m), -24)
		} else {
			v = math.Ldexp(float64(1024+m), e-25)
		}
		t.vals = append(t.vals, v)
		t.codes = append(t.codes, uint16(c))
	}
	return t
}

func (t *f16table) round(x float32) uint16 {
	sign := uint16(0)
	v := float64(x)
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	maxV := t.vals[len(t.vals)-1]
	// above max + half an ulp (65520) rounds to infinity
	if v >= maxV+math.Ldexp(1, 4) {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(t.vals, v)
	if i == len(t.vals) {
		return sign | t.codes[i-1]
	}
	if t.vals[i] == v || i == 0 {
		return sign | t.codes[i]
	}
	lo, hi := t.vals[i-1], t.vals[i]
	switch {
	case v-lo < hi-v:
		return sign | t.codes[i-1]
	case v-lo > hi-v:
		return sign | t.codes[i]
	}
	if t.codes[i-1]&1 == 0 {
		return sign | t.codes[i-1]
	}
	return sign | t.codes[i]
}

func TestF16RoundTripEveryCode(t *testing.T) {
	for c := 0; c < 1<<16; c++ {
		h := uint16(c)
		f := F16ToF32(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%04x: want NaN, got %v", h, f)
			}
			continue
		}
		if got := F32ToF16(f); got != h {
			t.Fatalf("%04x -> %v -> %04x", h, f, got)
		}
	}
}

func TestF32ToF16MatchesNearestEven(t *testing.T) {
	tab := newTable()
	r := rand.New(rand.NewPCG(1, 2))
	check := func(x float32) {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return
		}
		if got, want := F32ToF16(x), tab.round(x); got != want {
			t.Fatalf("F32ToF16(%g [%08x]) = %04x, want %04x", x, math.Float32bits(x), got, want)
		}
	}
	for i := 0; i < 200000; i++ {
		check(math.Float32frombits(r.Uint32() & 0x7fffffff))                  // everything, mostly huge or tiny
		check(float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-28)))) // the range weights live in
	}
	if F32ToF16(float32(math.Inf(-1))) != 0xfc00 || F32ToF16(float32(math.NaN()))&0x7fff <= 0x7c00 {
		t.Fatal("infinity or NaN not kept")
	}
	// exact midpoints between neighbouring halves, including subnormals
	for c := 0; c < 0x7bff; c++ {
		mid := float32((tab.vals[c] + tab.vals[c+1]) / 2)
		check(mid)
		check(-mid)
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80},
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81},
		{0x7f7fffff, 0x7f80}, // max float rounds to inf
		{0x7fc00001, 0x7fc0}, // NaN stays NaN
		{0xff800000, 0xff80},
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("F32ToBF16(%08x) = %04x, want %04x", c.in, got, c.want)
		}
	}
	for c := 0; c < 1<<16; c++ {
		f := BF16ToF32(uint16(c))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := F32ToBF16(f); got != uint16(c) {
			t.Fatalf("bf16 %04x round trip gave %04x", c, got)
		}
	}
}
