package kernels

import "math"

// actKind is the form activations take for one weight type and mode.
type actKind uint8

const (
	actF32  actKind = iota // float32 as given
	actF16                 // rounded to fp16 (llama.cpp's vec_dot_type for F16 weights)
	actBF16                // rounded to bf16 (llama.cpp's vec_dot_type for BF16 weights)
	actQ8_0                // blocks of 32: fp16 scale, int8 values
	actQ8_1                // Q8_0 plus s = d·Σq per block (for Q4_1, Q5_1)
	actQ8_K                // super-blocks of 256: float scale, int8 values, sums per 16
	actG16                 // group matrices, a16: int16 codes, a scale per block (group_acts.go)
	actG8                  // group matrices, a8: int8 codes, one scale per token
)

// Acts holds a batch of activation rows (tokens) converted for the kernels of one kind of
// matrix. Matrix.Prepare (or PrepareOn) fills it; it can then be shared by every matrix with
// the same column count, activation kind and implementation (Matrix.SharesActs: for example
// Q, K and V projections), and read concurrently by any number of workers. The zero value is
// ready to use; its buffers grow as needed and are reused.
type Acts struct {
	kind actKind
	impl *implTable // implementation whose layout the asm fields follow
	nTok int
	cols int

	f  []float32 // nTok×cols: float forms (actF32 copies, actF16/actBF16 rounded)
	bf []uint16  // nTok×cols: actBF16 as bf16 bits for VDPBF16PS (implTable.bf16Dot), else empty
	// xp: actF32 in the layout the implementation's tiles read (implTable.floatPacked: amx's
	// BF16 × float32 products, the split into bf16 parts in TDPBF16PS's pair layout), built
	// by every Prepare of a matrix whose products read it, else empty (the products then
	// pack for themselves). Its capacity is kept (alignedBytes, 64-byte aligned).
	xp []byte

	// Quantized forms in ggml's layout (the generic code reads these).
	qs    []int8    // nTok×cols values
	d     []float32 // per block: Q8_0/Q8_1 the fp16 scale widened, Q8_K the float scale
	s     []float32 // per block, Q8_1: fp16(d·Σq) widened
	bsums []int16   // per 16 values, Q8_K

	// Interleaved copies for the assembly kernels (see pack.go), group-major: group g of token
	// t at index g·nTok + t, so that the tokens of a tile sit together. Filled only when the
	// implementation wants them.
	il  []byte    // values, ilGroupBytes per (group, token)
	ilM []float32 // one ilRecord-float record per (group, token): scales and sums

	// Group matrices (actG16, actG8): the activation block and code width of the matrices
	// served, and the codes and scales in the layout glay (group_acts.go).
	grp  groupActs
	glay groupLayout
	g16  []int16   // a16 codes (glNatural, glChunk)
	g8   []int8    // a8 codes
	gh   []byte    // a16 codes' high bytes (glAMX)
	gl   []byte    // a16 codes' low bytes (glAMX)
	gd   []float32 // scales: a16 per block, a8 per token
	gs   []int32   // glChunk: code sums per block (a16) or unit (a8)
}

// Tokens returns the number of activation rows held.
func (a *Acts) Tokens() int { return a.nTok }

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func growI8(s []int8, n int) []int8 {
	if cap(s) < n {
		return make([]int8, n)
	}
	return s[:n]
}

func growU16(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
}

func growI16(s []int16, n int) []int16 {
	if cap(s) < n {
		return make([]int16, n)
	}
	return s[:n]
}

func growI32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func growU8(s []byte, n int) []byte {
	if cap(s) < n {
		return make([]byte, n)
	}
	return s[:n]
}

// quantizeQ8_0 converts 32·len(d) values of x into Q8_0 blocks exactly as ggml's x86
// quantize_row_q8_0 (AVX2 path) does: d = max|x|/127 stored as fp16, values round(x·127/max)
// with ties to even. When s is not nil it also stores Q8_1's s = fp16(d·Σq) per block (the
// float d, before its fp16 rounding, as ggml's quantize_row_q8_1).
func quantizeQ8_0(qs []int8, d, s []float32, x []float32) {
	for b := range d {
		xb := x[32*b : 32*b+32]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		dd := amax / 127
		d[b] = roundF16(dd)
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		q := qs[32*b : 32*b+32]
		sum := int32(0)
		for j, v := range xb {
			r := math.RoundToEven(float64(v * id))
			r = max(-128, min(127, r)) // VPACKSSDW/VPACKSSWB saturate
			q[j] = int8(r)
			sum += int32(r)
		}
		if s != nil {
			s[b] = roundF16(dd * float32(sum))
		}
	}
}

// quantizeQ8_K converts 256·len(d) values of x into Q8_K blocks exactly as ggml's
// quantize_row_q8_K_ref (which the x86 build also uses).
func quantizeQ8_K(qs []int8, d []float32, bsums []int16, x []float32) {
	for b := range d {
		xb := x[256*b : 256*b+256]
		q := qs[256*b : 256*b+256]
		var amax, mx float32
		for _, v := range xb {
			if av := float32(math.Abs(float64(v))); av > amax {
				amax, mx = av, v
			}
		}
		bs := bsums[16*b : 16*b+16]
		if amax == 0 {
			d[b] = 0
			clear(q)
			clear(bs)
			continue
		}
		iscale := -127 / mx
		for j, v := range xb {
			q[j] = int8(min(127, nearestInt(iscale*v)))
		}
		for j := range bs {
			sum := 0
			for _, v := range q[16*j : 16*j+16] {
				sum += int(v)
			}
			bs[j] = int16(sum)
		}
		d[b] = 1 / iscale
	}
}

// nearestInt rounds to nearest, ties to even, as ggml's nearest_int (valid for |f| < 2^22).
func nearestInt(f float32) int {
	return int(math.RoundToEven(float64(f)))
}
