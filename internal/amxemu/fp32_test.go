package amxemu

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refFMA32 is an independent reference for fma32 built on math/big: the exact value of a*b+c,
// rounded once to 24 significant bits (unbounded exponent), with DAZ, FTZ and the NaN rules
// written out separately.
func refFMA32(a, b, c uint32) uint32 {
	denormal := func(x uint32) bool { return x&0x7f800000 == 0 && x&0x007fffff != 0 }
	nan := func(x uint32) bool { return x&0x7f800000 == 0x7f800000 && x&0x007fffff != 0 }
	for _, x := range []*uint32{&a, &b, &c} {
		if denormal(*x) {
			*x &= 0x80000000
		}
	}
	for _, x := range []uint32{a, b, c} {
		if nan(x) {
			return x | 0x00400000
		}
	}
	fa, fb, fc := math.Float32frombits(a), math.Float32frombits(b), math.Float32frombits(c)
	if math.IsInf(float64(fa), 0) || math.IsInf(float64(fb), 0) || math.IsInf(float64(fc), 0) {
		r := float64(fa)*float64(fb) + float64(fc) // infinities are exact in binary64
		if math.IsNaN(r) {
			return 0xffc00000
		}
		return math.Float32bits(float32(r))
	}
	x := new(big.Float).SetPrec(2000).SetFloat64(float64(fa))
	x.Mul(x, new(big.Float).SetFloat64(float64(fb)))
	x.Add(x, new(big.Float).SetFloat64(float64(fc)))
	if x.Sign() == 0 {
		productNeg := math.Signbit(float64(fa)) != math.Signbit(float64(fb))
		if fa*fb == 0 && fc == 0 && productNeg && math.Signbit(float64(fc)) {
			return 0x80000000 // (-0) + (-0)
		}
		return 0 // exact cancellation or +0: +0 under round to nearest
	}
	r := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Set(x)
	mag := new(big.Float).Abs(r)
	sign := uint32(0)
	if r.Signbit() {
		sign = 0x80000000
	}
	if mag.Cmp(big.NewFloat(0x1p-126)) < 0 {
		return sign // FTZ
	}
	if mag.Cmp(new(big.Float).SetFloat64(math.MaxFloat32)) > 0 {
		return sign | 0x7f800000
	}
	f, _ := r.Float32()
	return math.Float32bits(f)
}

// randF32 returns a binary32 pattern biased towards interesting cases.
func randF32(r *rand.Rand) uint32 {
	sign := uint32(r.IntN(2)) << 31
	switch r.IntN(20) {
	case 0:
		return sign // zero
	case 1:
		return sign | uint32(r.IntN(1<<23)) | 1 // denormal
	case 2:
		return sign | 0x7f800000 // infinity
	case 3:
		return sign | 0x7f800000 | uint32(r.IntN(1<<22)) | 1 // NaN (signalling or quiet)
	case 4, 5:
		return sign | uint32(1+r.IntN(4))<<23 | uint32(r.IntN(1<<23)) // near the FTZ threshold
	case 6:
		return sign | uint32(250+r.IntN(4))<<23 | uint32(r.IntN(1<<23)) // near overflow
	case 7, 8, 9:
		return sign | uint32(120+r.IntN(15))<<23 | uint32(r.IntN(8))<<20 // few significant bits
	}
	return sign | uint32(60+r.IntN(135))<<23 | uint32(r.IntN(1<<23))
}

func TestFMA32AgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bad := 0
	for i := range 60000 {
		a, b, c := randF32(r), randF32(r), randF32(r)
		if i%3 == 0 {
			// c close to -a*b: cancellation.
			p := math.Float32bits(-math.Float32frombits(a) * math.Float32frombits(b))
			c = p ^ uint32(r.IntN(4))
		}
		if got, want := fma32(a, b, c), refFMA32(a, b, c); got != want {
			t.Errorf("fma32(%08x, %08x, %08x) = %08x, want %08x", a, b, c, got, want)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
}

func TestFMA32Cases(t *testing.T) {
	f := math.Float32bits
	for _, v := range []struct {
		name    string
		a, b, c uint32
		want    uint32
	}{
		// (1+2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie at binary32; with +2^-80 added the single
		// rounding goes up. Adding in binary64 and rounding again would go down (to even).
		{"single rounding", f(1 + 0x1p-12), f(1 + 0x1p-12), f(0x1p-80), f(1 + 0x1p-11 + 0x1p-23)},
		{"tie to even", f(1 + 0x1p-12), f(1 + 0x1p-12), 0, f(1 + 0x1p-11)},
		{"DAZ on a", 0x00000001, f(0x1p100), f(1), f(1)},
		{"DAZ on c", f(1), f(1), 0x807fffff, f(1)},
		{"FTZ", f(0x1p-70), f(0x1p-60), 0, 0},
		{"FTZ keeps sign", f(-0x1p-70), f(0x1p-60), 0, 0x80000000},
		// 2^-126 - 2^-151 is tiny before rounding but rounds (tie to even) to 2^-126: kept.
		{"rounds up to min normal", f(0x1p-75), f(-0x1p-76), f(0x1p-126), 0x00800000},
		// Slightly less rounds to 2^-126 - 2^-150, tiny after rounding: flushed.
		{"tiny after rounding", f(0x1p-75), f(-0x1p-76 * (1 + 0x1p-10)), f(0x1p-126), 0},
		{"overflow", f(0x1p100), f(0x1p100), 0, 0x7f800000},
		{"inf*0", 0x7f800000, 0, f(1), 0xffc00000},
		{"inf-inf", 0x7f800000, f(1), 0xff800000, 0xffc00000},
		{"NaN of b quieted", f(1), 0x7f800001, 0x7fc00002, 0x7fc00001},
		{"cancellation gives +0", f(3), f(5), f(-15), 0},
		{"-0 + -0", 0x80000000, f(1), 0x80000000, 0x80000000},
	} {
		if got := fma32(v.a, v.b, v.c); got != v.want {
			t.Errorf("%s: fma32(%08x, %08x, %08x) = %08x, want %08x", v.name, v.a, v.b, v.c, got, v.want)
		}
		if ref := refFMA32(v.a, v.b, v.c); ref != v.want {
			t.Errorf("%s: reference gives %08x, want %08x", v.name, ref, v.want)
		}
	}
}
