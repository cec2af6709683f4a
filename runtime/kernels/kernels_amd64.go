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
		return []*implTable{avx512Impl}
	}
	return nil
}

var avx512Impl = &implTable{
	name:    "avx512vnni",
	mul:     avx512Mul,
	wantsIL: func(k actKind) bool { return k == actQ8_0 || k == actQ8_1 || k == actQ8_K },
	packs:   func(t WType) bool { _, ok := qKernels[t]; return ok },
}

// qKernel is the signature of the integer GEMV kernels.
type qKernel func(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

var qKernels = map[WType]qKernel{
	Q4_0: gemvQ4_0, IQ4_NL: gemvIQ4_NL, Q4_1: gemvQ4_1, Q5_0: gemvQ5_0, Q5_1: gemvQ5_1,
	Q8_0: gemvQ8_0, Q4_K: gemvQ4_K, Q5_K: gemvQ5_K, Q6_K: gemvQ6_K,
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
		_, groups := ilLayout(a.kind, a.cols)
		var perTok, dPerTok, sPerTok int
		if a.kind == actQ8_K {
			perTok, dPerTok, sPerTok = a.cols, groups, 16*groups
		} else {
			perTok, dPerTok, sPerTok = 512*groups, 16*groups, 16*groups
			if a.kind == actQ8_1 {
				dPerTok = 32 * groups
			}
		}
		for rb := r0; rb < r1; rb += tile {
			re := min(rb+tile, r1)
			w := &pk.data[rb*pk.rowBytes]
			for t := 0; t < a.nTok; t++ {
				k(&Y[t*rows+rb], w, pk.rowBytes, re-rb, pk.groups,
					&a.il[t*perTok], &a.ilD[t*dPerTok], &a.ilSm[t*sPerTok])
			}
		}
		return true
	}
	// Float activations.
	cols := a.cols
	switch m.Type {
	case F32, F16, BF16:
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
