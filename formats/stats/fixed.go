package stats

import (
	"math"
	"math/bits"
)

// Fixed is an exact sum: a 128-bit two's-complement integer (Lo the low word, Hi the high one)
// counting units of 2⁻⁶⁴, so it spans ±2⁶³ on a grid of 2⁻⁶⁴. Calibration rounds each chunk's
// float64 partial sum to the grid (round half to even: the same bits for the same chunk) and
// adds the integers, which is exact and associative: shards merged in any order give the sums
// of one run, bit for bit. The float64 statistics are the correctly rounded values (Float64).
type Fixed struct{ Lo, Hi uint64 }

// fixedUnit is the exponent of the grid: one unit is 2^-fixedUnit.
const fixedUnit = 64

// errFixedRange is the reason FixedOf and Add give for a value they cannot hold.
const errFixedRange = "outside the exact range ±2^63"

// FixedOf rounds x to the grid (half to even); ok is false when x is not finite or |x| ≥ 2⁶³.
func FixedOf(x float64) (f Fixed, ok bool) {
	// x·2^64 is exact (a power of two), and so are the steps below: a value under 2^62 units
	// rounds (half to even) to an int64; a larger one is a whole number already, split into
	// words from its magnitude (whose low word, a multiple of its unit below 2^64, has at most
	// 53 significant bits).
	y := x * 0x1p64
	a := math.Abs(y)
	if a < 0x1p62 {
		r := int64(math.RoundToEven(y))
		return Fixed{uint64(r), uint64(r >> 63)}, true
	}
	if !(a < 0x1p127) { // NaN too
		return Fixed{}, false
	}
	h := math.Floor(a * 0x1p-64)
	f = Fixed{uint64(a - h*0x1p64), uint64(h)}
	if y < 0 {
		f = f.neg()
	}
	return f, true
}

// gridFloat is x rounded to the grid (half to even) as a float64, which holds it exactly: x
// itself from 2⁻¹¹ up (its last bit is worth 2⁻⁶³ or more); ok is false when x is not finite
// or |x| ≥ 2⁶³. FixedOf(v) is then the value's Fixed.
func gridFloat(x float64) (v float64, ok bool) {
	a := math.Abs(x)
	switch {
	case !(a < 0x1p63):
		return 0, false
	case a >= 0x1p-11:
		return x, true
	}
	return math.RoundToEven(x*0x1p64) * 0x1p-64, true // x·2^64 < 2^53: exact
}

// neg is −f (two's complement).
func (f Fixed) neg() Fixed {
	lo, c := bits.Add64(^f.Lo, 1, 0)
	return Fixed{lo, ^f.Hi + c}
}

// Neg reports whether f is negative.
func (f Fixed) Neg() bool { return f.Hi>>63 != 0 }

// Add returns f + g; ok is false when the sum leaves the range.
func (f Fixed) Add(g Fixed) (s Fixed, ok bool) {
	lo, c := bits.Add64(f.Lo, g.Lo, 0)
	hi, _ := bits.Add64(f.Hi, g.Hi, c)
	s = Fixed{lo, hi}
	// Signed overflow: both operands of one sign, the sum of the other.
	return s, !((f.Hi^g.Hi)>>63 == 0 && (f.Hi^hi)>>63 != 0)
}

// Float64 is f correctly rounded to float64 (half to even).
func (f Fixed) Float64() float64 {
	if f.Hi == uint64(int64(f.Lo)>>63) { // an int64: the conversion rounds half to even
		return float64(int64(f.Lo)) * 0x1p-64
	}
	neg := f.Neg()
	m := f
	if neg {
		m = f.neg() // −2^127 becomes 2^127 as an unsigned magnitude
	}
	var v float64
	switch {
	case m.Hi == 0 && m.Lo < 1<<53:
		v = math.Ldexp(float64(m.Lo), -fixedUnit)
	default:
		n := 128 - bits.LeadingZeros64(m.Hi) // bit length
		if m.Hi == 0 {
			n = 64 - bits.LeadingZeros64(m.Lo)
		}
		k := uint(n - 53) // bits to drop, ≥ 1
		// q = m >> k (53 bits), rem = m mod 2^k, compared with half = 2^(k−1).
		var q uint64
		var above, tie bool
		if k >= 64 {
			q = m.Hi >> (k - 64)
			remHi := m.Hi & (1<<(k-64) - 1) // the high word's part of rem
			halfHi := uint64(1) << (k - 64) >> 1
			if k == 64 {
				above, tie = m.Lo > 1<<63, m.Lo == 1<<63
			} else {
				above = remHi > halfHi || (remHi == halfHi && m.Lo > 0)
				tie = remHi == halfHi && m.Lo == 0
			}
		} else {
			q = m.Lo>>k | m.Hi<<(64-k)
			rem, half := m.Lo&(1<<k-1), uint64(1)<<(k-1)
			above, tie = rem > half, rem == half
		}
		if above || (tie && q&1 == 1) {
			q++ // may reach 2^53: still exact
		}
		v = math.Ldexp(float64(q), int(k)-fixedUnit)
	}
	if neg {
		return -v
	}
	return v
}

// fixedBytes is the size of a Fixed in a file: Lo then Hi, little-endian.
const fixedBytes = 16

// FoldFloats adds the float64 partial sums v, each rounded to the grid, into acc (same length);
// on failure it returns the index of the first value that is not finite, does not fit or whose
// sum leaves the range, and acc holds the values before it added.
func FoldFloats(acc []Fixed, v []float64) (bad int, ok bool) {
	acc = acc[:len(v)]
	for j, x := range v {
		// FixedOf's common case, inline: 2^-11 ≤ |x| < 2^52, whose 53-bit significand
		// shifted left by 1 to 63 places is the value in units, exactly.
		b := math.Float64bits(x)
		e := uint(b>>52&0x7ff) - 1011
		var f Fixed
		if e-1 < 63 {
			m := b&(1<<52-1) | 1<<52
			neg := -(b >> 63) // all ones for a negative x
			lo, c := bits.Add64(m<<e^neg, b>>63, 0)
			f = Fixed{lo, (m>>(64-e) ^ neg) + c}
		} else if x == 0 {
			continue
		} else if f, ok = FixedOf(x); !ok {
			return j, false
		}
		a := acc[j]
		lo, c := bits.Add64(a.Lo, f.Lo, 0)
		hi, _ := bits.Add64(a.Hi, f.Hi, c)
		if (a.Hi^f.Hi)>>63 == 0 && (a.Hi^hi)>>63 != 0 {
			return j, false // both of one sign, the sum of the other
		}
		acc[j] = Fixed{lo, hi}
	}
	return 0, true
}

// AddFixed adds b into acc (same length), reporting the first index whose sum leaves the range
// (acc is then left with that element wrapped; callers discard it).
func AddFixed(acc, b []Fixed) (bad int, ok bool) {
	for j, g := range b[:len(acc)] {
		if acc[j], ok = acc[j].Add(g); !ok {
			return j, false
		}
	}
	return 0, true
}

// Floats converts exact sums to float64 (Float64 of each).
func Floats(dst []float64, v []Fixed) []float64 {
	if cap(dst) < len(v) {
		dst = make([]float64, len(v))
	}
	dst = dst[:len(v)]
	for j, f := range v {
		dst[j] = f.Float64()
	}
	return dst
}

// TriangleLen is the number of elements of the upper triangle (diagonal included) of a c × c
// matrix, the length of an exact Hessian.
func TriangleLen(c int) int { return c * (c + 1) / 2 }

// triRow is the index in the upper triangle, stored row by row, of element (i, i).
func triRow(i, c int) int { return i*c - i*(i-1)/2 }

// FoldUpper adds the upper triangle (j ≥ i) of the c × c row-major float64 matrix h, each
// element rounded to the grid, into the exact triangle acc (TriangleLen(c), row by row), rows
// split between up to threads goroutines. On failure it returns the first element (row, column)
// that does not fit, with acc left partly added (callers stop).
func FoldUpper(acc []Fixed, h []float64, c, threads int) (i, j int, ok bool) {
	return foldUpper(acc, h, c, threads, false)
}

// FoldUpperZero is FoldUpper, then zeroes what it added, h's upper triangle, each row as soon
// as it is added, while it is in cache: a partial sum folded, its matrix ready for the next
// one. The strict lower triangle, which nothing reads, is left untouched (kernels.AddGram
// writes a band of it, and the rest is never paged in).
func FoldUpperZero(acc []Fixed, h []float64, c, threads int) (i, j int, ok bool) {
	return foldUpper(acc, h, c, threads, true)
}

// foldUpper is FoldUpper, zeroing h's rows when zero is set.
func foldUpper(acc []Fixed, h []float64, c, threads int, zero bool) (i, j int, ok bool) {
	bounds := triangleSplit(c, threads)
	if len(bounds) == 2 {
		return foldRows(acc, h, c, 0, c, zero)
	}
	type bad struct{ i, j int }
	fails := make([]*bad, len(bounds)-1)
	done := make(chan struct{}, len(bounds)-1)
	for p := 0; p+1 < len(bounds); p++ {
		go func(p int) {
			if i, j, ok := foldRows(acc, h, c, bounds[p], bounds[p+1], zero); !ok {
				fails[p] = &bad{i, j}
			}
			done <- struct{}{}
		}(p)
	}
	for range fails {
		<-done
	}
	for _, f := range fails {
		if f != nil {
			return f.i, f.j, false
		}
	}
	return 0, 0, true
}

// foldRows is FoldUpper over rows [i0, i1), each row's upper part zeroed after it is added when
// zero is set.
func foldRows(acc []Fixed, h []float64, c, i0, i1 int, zero bool) (int, int, bool) {
	for i := i0; i < i1; i++ {
		row := h[i*c+i : i*c+c]
		a := acc[triRow(i, c):][:len(row)]
		if k, ok := FoldFloats(a, row); !ok {
			return i, i + k, false
		}
		if zero {
			clear(row)
		}
	}
	return 0, 0, true
}

// foldMinWork is the triangle size below which FoldUpper stays on one goroutine.
const foldMinWork = 1 << 16

// triangleSplit splits the rows of a c × c upper triangle into up to threads parts of about
// equal area: bounds[0] = 0 … bounds[len−1] = c.
func triangleSplit(c, threads int) []int {
	if threads <= 1 || TriangleLen(c) < foldMinWork {
		return []int{0, c}
	}
	parts := min(threads, c)
	bounds := []int{0}
	total := float64(TriangleLen(c))
	acc := 0.0
	for i := 0; i < c && len(bounds) < parts; i++ {
		acc += float64(c - i)
		if acc >= total*float64(len(bounds))/float64(parts) {
			bounds = append(bounds, i+1)
		}
	}
	if bounds[len(bounds)-1] != c {
		bounds = append(bounds, c)
	}
	return bounds
}

// UpperToFull writes the exact upper triangle tri (row by row) of a c × c matrix into h as the
// full symmetric float64 matrix, row-major.
func UpperToFull(h []float64, tri []Fixed, c int) {
	for i := 0; i < c; i++ {
		row := tri[triRow(i, c):][:c-i]
		for k, f := range row {
			v := f.Float64()
			h[i*c+i+k] = v
			h[(i+k)*c+i] = v
		}
	}
}
