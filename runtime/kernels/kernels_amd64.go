//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// asmImpls returns the assembly implementations this CPU can run.
func asmImpls() []*implTable {
	x := cpu.X86
	if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI {
		if amxUsable() {
			return []*implTable{amxImpl, avx512Impl}
		}
		return []*implTable{avx512Impl}
	}
	return nil
}

var avx512Impl = &implTable{
	name:    "avx512vnni",
	mul:     avx512Mul,
	wantsIL: func(k actKind) bool { return k == actQ8_0 || k == actQ8_1 || k == actQ8_K },
	packs:   func(t WType) bool { _, ok := qKernels[t]; return ok },
	bf16Dot: cpu.X86.HasAVX512BF16,
	accel: func(t WType, mode ActMode) bool {
		if t == F32 || t == F16 || t == BF16 {
			return true
		}
		if mode == ActFloat {
			_, ok := fKernels[t]
			return ok
		}
		_, ok := qKernels[t]
		return ok
	},

	quantActs: quantActsAVX512,

	groupLayout: groupLayoutAVX512,
	groupMul:    groupMulAVX512,
	groupAccel:  func(GroupFormat, ActMode) bool { return true },

	groupQuant16: groupQuant16AVX512,
	groupQuant8:  groupQuant8AVX512,
	groupSplit:   groupSplitAVX512,

	softmax:  softmaxAsm,
	siluMul:  siluMulAsm,
	dotRows:  dotRowsAsm,
	axpyRows: axpyRowsAsm,

	attnScores: attnScoresAVX512,
	attnValues: attnValuesAVX512,
	expSums:    expSumsAsm,
	expSum:     expSumAsm,

	sumSquares: sumSquaresAsm,
	colSums:    colSumsAsm,
	toBF16:     toBF16Asm,
	scaleMul:   scaleMulAsm,
	add:        addAsm,
}

// qKernel is the signature of the integer GEMV kernels.
type qKernel func(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

// gKernel is the signature of the integer GEMM kernels (a tile of 8 or 4 tokens).
type gKernel func(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

// gemmKernels holds, per weight type, the 8- and 4-token GEMM kernels (nil: GEMV per token).
var gemmKernels = map[WType]struct{ x8, x4 gKernel }{
	Q4_0:   {gemmQ4_0x8, gemmQ4_0x4},
	IQ4_NL: {gemmIQ4_NLx8, gemmIQ4_NLx4},
	Q4_1:   {gemmQ4_1x8, gemmQ4_1x4},
	Q5_0:   {gemmQ5_0x8, gemmQ5_0x4},
	Q5_1:   {gemmQ5_1x8, gemmQ5_1x4},
	Q8_0:   {gemmQ8_0x8, gemmQ8_0x4},
	Q4_K:   {gemmQ4_Kx8, gemmQ4_Kx4},
	Q5_K:   {gemmQ5_Kx8, gemmQ5_Kx4},
	Q6_K:   {gemmQ6_Kx8, gemmQ6_Kx4},
	Q2_K:   {gemmQ2_Kx8, gemmQ2_Kx4},
	Q3_K:   {gemmQ3_Kx8, gemmQ3_Kx4},
	IQ4_XS: {gemmIQ4_XSx8, gemmIQ4_XSx4},

	IQ2_XXS: {gemmIQ2x8, gemmIQ2x4}, IQ2_XS: {gemmIQ2x8, gemmIQ2x4}, IQ2_S: {gemmIQ2x8, gemmIQ2x4},
	IQ1_S: {gemmIQ1x8, gemmIQ1x4}, IQ1_M: {gemmIQ1x8, gemmIQ1x4},
	IQ3_XXS: {gemmIQ3XXSx8, gemmIQ3XXSx4}, IQ3_S: {gemmIQ3Sx8, gemmIQ3Sx4},
	TQ1_0: {gemmTQx8, gemmTQx4}, TQ2_0: {gemmTQx8, gemmTQx4},
}

// gemmRowBlock is how many rows a multi-token product runs through every token tile before
// moving on: the block's weights stay in L2 while the tiles pass over them.
const gemmRowBlock = 64

var qKernels = map[WType]qKernel{
	Q4_0: gemvQ4_0, IQ4_NL: gemvIQ4_NL, Q4_1: gemvQ4_1, Q5_0: gemvQ5_0, Q5_1: gemvQ5_1,
	Q8_0: gemvQ8_0, Q4_K: gemvQ4_K, Q5_K: gemvQ5_K, Q6_K: gemvQ6_K,
	Q2_K: gemvQ2_K, Q3_K: gemvQ3_K, IQ4_XS: gemvIQ4_XS,
	IQ2_XXS: gemvIQ2, IQ2_XS: gemvIQ2, IQ2_S: gemvIQ2, IQ1_S: gemvIQ1, IQ1_M: gemvIQ1,
	IQ3_XXS: gemvIQ3_XXS, IQ3_S: gemvIQ3_S, TQ1_0: gemvTQ, TQ2_0: gemvTQ,
}

// rowTile is how many rows a multi-token product handles before moving to the next token, so
// that the tile's weights stay in cache while every token passes over them.
const rowTile = 16

func avx512Mul(m *Matrix, pk *packed, Y []float32, a *Acts, r0, r1 int) bool {
	rows := m.Rows
	tile := r1 - r0
	if a.nTok > 1 {
		tile = rowTile
	}
	switch a.kind {
	case actQ8_0, actQ8_1, actQ8_K:
		k := qKernels[m.Type]
		if k == nil || pk == nil {
			return false
		}
		lane, groups := ilLayout(a.kind, a.cols)
		gE, n := 16*lane, a.nTok
		if n == 1 {
			k(&Y[r0], &pk.data[r0*pk.rowBytes], pk.rowBytes, r1-r0, pk.groups, &a.il[0], &a.ilM[0], 1)
			return true
		}
		g := gemmKernels[m.Type]
		for rb := r0; rb < r1; rb += gemmRowBlock {
			re := min(rb+gemmRowBlock, r1)
			w := &pk.data[rb*pk.rowBytes]
			t := 0
			if g.x8 != nil {
				for ; t+8 <= n; t += 8 {
					g.x8(&Y[t*rows+rb], rows, w, pk.rowBytes, re-rb, groups, &a.il[t*gE], &a.ilM[t*ilRecord], n)
				}
			}
			if g.x4 != nil {
				for ; t+4 <= n; t += 4 {
					g.x4(&Y[t*rows+rb], rows, w, pk.rowBytes, re-rb, groups, &a.il[t*gE], &a.ilM[t*ilRecord], n)
				}
			}
			for ; t < n; t++ {
				k(&Y[t*rows+rb], w, pk.rowBytes, re-rb, groups, &a.il[t*gE], &a.ilM[t*ilRecord], n)
			}
		}
		return true
	}
	// Float activations.
	cols := a.cols
	switch m.Type {
	case F32, F16, BF16:
		if m.Type == BF16 && a.kind == actBF16 && len(a.bf) > 0 {
			bf16DotProduct(m, Y, a, r0, r1, tile)
			return true
		}
		// amx: AMX-BF16 tiles over float32 activations split into bf16 parts (amx_bf16_amd64.go).
		if m.Type == BF16 && a.kind == actF32 && a.impl == amxBF16Impl && amxBF16Mul(m, Y, a, r0, r1) {
			return true
		}
		floatProduct(m, Y, a, r0, r1, tile)
		return true
	}
	// Quantized weights with float activations: blocks decoded in registers.
	k := fKernels[m.Type]
	if k == nil {
		return false
	}
	nb := cols / m.Type.BlockSize()
	for r := r0; r < r1; r += tile {
		re := min(r+tile, r1)
		for t := 0; t < a.nTok; t++ {
			k(&Y[t*rows+r], &m.Data[r*m.rowBytes], m.rowBytes, re-r, nb, &a.f[t*cols])
		}
	}
	return true
}

// fKernel is the signature of the float-activation kernels for quantized weights.
type fKernel func(y *float32, w *byte, stride, rows, nb int, x *float32)

var fKernels = map[WType]fKernel{
	Q4_0: fgemvQ4_0, IQ4_NL: fgemvIQ4_NL, Q4_1: fgemvQ4_1, Q5_0: fgemvQ5_0, Q5_1: fgemvQ5_1,
	Q8_0: fgemvQ8_0, Q4_K: fgemvQ4_K, Q5_K: fgemvQ5_K, Q6_K: fgemvQ6_K,
}

// floatProduct computes F32/F16/BF16 products: 4-row × 4-token GEMM blocks where there are
// at least 4 tokens, GEMV for the rest, and the columns past the last multiple of 16 in Go.
func floatProduct(m *Matrix, Y []float32, a *Acts, r0, r1, tile int) {
	gemv, gemm := gemvF32, gemm4x4F32
	switch m.Type {
	case F16:
		gemv, gemm = gemvF16, gemm4x4F16
	case BF16:
		gemv, gemm = gemvBF16, gemm4x4BF16
	}
	rows, cols, rb := m.Rows, a.cols, m.rowBytes
	n16 := cols &^ 15
	for r := r0; r < r1; r += tile {
		re := min(r+tile, r1)
		t := 0
		if n16 > 0 {
			for ; t+4 <= a.nTok; t += 4 {
				rr := r
				for ; rr+4 <= re; rr += 4 {
					gemm(&Y[t*rows+rr], rows, &m.Data[rr*rb], rb, &a.f[t*cols], cols, n16)
				}
				for tt := t; rr < re && tt < t+4; tt++ {
					gemv(&Y[tt*rows+rr], &m.Data[rr*rb], rb, re-rr, &a.f[tt*cols], n16)
				}
			}
			for ; t < a.nTok; t++ {
				gemv(&Y[t*rows+r], &m.Data[r*rb], rb, re-r, &a.f[t*cols], n16)
			}
		}
		for t := 0; t < a.nTok && n16 < cols; t++ {
			x := a.f[t*cols : (t+1)*cols]
			for i := r; i < re; i++ {
				row := m.Data[i*rb : (i+1)*rb]
				var s float32
				for k := n16; k < cols; k++ {
					s += float32(wordAt(m.Type, row, k) * x[k])
				}
				if n16 == 0 {
					Y[t*rows+i] = s
				} else {
					Y[t*rows+i] += s
				}
			}
		}
	}
}

// bf16DotProduct computes BF16 × bf16-rounded activation products with VDPBF16PS: 4-row ×
// 4-token blocks where there are at least 4 tokens, GEMV for the rest, and the columns past
// the last multiple of 32 in Go (exact bf16 products added in float32).
func bf16DotProduct(m *Matrix, Y []float32, a *Acts, r0, r1, tile int) {
	rows, cols, rb := m.Rows, a.cols, m.rowBytes
	n32 := cols &^ 31
	for r := r0; r < r1; r += tile {
		re := min(r+tile, r1)
		t := 0
		if n32 > 0 {
			for ; t+4 <= a.nTok; t += 4 {
				rr := r
				for ; rr+4 <= re; rr += 4 {
					gemm4x4BF16Dot(&Y[t*rows+rr], rows, &m.Data[rr*rb], rb, &a.bf[t*cols], cols, n32)
				}
				for tt := t; rr < re && tt < t+4; tt++ {
					gemvBF16Dot(&Y[tt*rows+rr], &m.Data[rr*rb], rb, re-rr, &a.bf[tt*cols], n32)
				}
			}
			for ; t < a.nTok; t++ {
				gemvBF16Dot(&Y[t*rows+r], &m.Data[r*rb], rb, re-r, &a.bf[t*cols], n32)
			}
		}
		for t := 0; t < a.nTok && n32 < cols; t++ {
			x := a.f[t*cols : (t+1)*cols]
			for i := r; i < re; i++ {
				row := m.Data[i*rb : (i+1)*rb]
				var s float32
				for k := n32; k < cols; k++ {
					s += float32(bf16ToF32(le16(row[2*k:])) * x[k])
				}
				if n32 == 0 {
					Y[t*rows+i] = s
				} else {
					Y[t*rows+i] += s
				}
			}
		}
	}
}

// wordAt returns element k of a float-typed row.
func wordAt(t WType, row []byte, k int) float32 {
	switch t {
	case F16:
		return f16ToF32(le16(row[2*k:]))
	case BF16:
		return bf16ToF32(le16(row[2*k:]))
	}
	return *(*float32)(unsafe.Pointer(&row[4*k]))
}

// quantActsAVX512 quantizes tokens [t0,t1) with the assembly quantizers, which write the ggml
// layout and the interleaved copy in one pass.
func quantActsAVX512(a *Acts, X []float32, t0, t1 int) bool {
	cols, n := a.cols, a.nTok
	switch a.kind {
	case actQ8_0, actQ8_1:
		nb, groups := cols/32, (cols+511)/512
		for t := t0; t < t1; t++ {
			if nb%16 != 0 { // zero the padding blocks of the last group
				g := groups - 1
				clear(a.il[(g*n+t)*512 : (g*n+t+1)*512])
				clear(a.ilM[(g*n+t)*ilRecord : (g*n+t+1)*ilRecord])
			}
			var s *float32
			if a.kind == actQ8_1 {
				s = &a.s[t*nb]
			}
			quantQ8Asm(&X[t*cols], &a.qs[t*cols], &a.d[t*nb], s, &a.il[t*512], &a.ilM[t*ilRecord], nb, n)
		}
	case actQ8_K:
		nb := cols / 256
		for t := t0; t < t1; t++ {
			quantQ8KAsm(&X[t*cols], &a.qs[t*cols], &a.d[t*nb], &a.bsums[16*t*nb], &a.il[t*256], &a.ilM[t*ilRecord], nb, n)
		}
	default:
		return false
	}
	return true
}
