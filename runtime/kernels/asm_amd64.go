//go:build amd64 && !purego

package kernels

// Assembly entry points (see the .s files). Pointers address the first element; counts are
// validated by the Go callers.

// iq4nlPlus128 is IQ4_NL's codebook plus 128, as bytes: the VPSHUFB table with which the
// IQ4_NL and IQ4_XS kernels of every assembly file map codes to unsigned values
// (·iq4nlPlus128(SB)).
var iq4nlPlus128 = func() (t [16]byte) {
	for i, v := range kvaluesIQ4NL {
		t[i] = byte(int(v) + 128)
	}
	return t
}()

//go:noescape
func gemvF32(y *float32, w *byte, stride, rows int, x *float32, n int)

//go:noescape
func gemvF16(y *float32, w *byte, stride, rows int, x *float32, n int)

//go:noescape
func gemvBF16(y *float32, w *byte, stride, rows int, x *float32, n int)

//go:noescape
func gemvQ4_0(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvIQ4_NL(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ4_1(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ5_0(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ5_1(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ8_0(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ4_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ5_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ6_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func fgemvQ4_0(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvIQ4_NL(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ4_1(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ5_0(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ5_1(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ8_0(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ4_K(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ5_K(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func fgemvQ6_K(y *float32, w *byte, stride, rows, nb int, x *float32)

//go:noescape
func gemm4x4F32(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)

//go:noescape
func gemm4x4F16(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)

//go:noescape
func gemm4x4BF16(y *float32, ldy int, w *byte, stride int, x *float32, ldx int, n int)

//go:noescape
func gemmQ4_0x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ4_0x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ4_NLx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ4_NLx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ4_1x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ4_1x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ5_0x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ5_0x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ5_1x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ5_1x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ8_0x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ8_0x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func softmaxAsm(x *float32, n int)

//go:noescape
func siluMulAsm(dst, gate, u *float32, n int)

//go:noescape
func dotRowsAsm(y, q, k *float32, stride, rows, n int, scale float32)

//go:noescape
func axpyRowsAsm(out, p, v *float32, stride, rows, n int)

//go:noescape
func quantQ8Asm(x *float32, qs *int8, d, s *float32, il *byte, rec *float32, nb, ntok int)

//go:noescape
func quantQ8KAsm(x *float32, qs *int8, d *float32, bsums *int16, il *byte, rec *float32, nb, ntok int)

//go:noescape
func gemmQ4_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ5_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ6_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ6_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func sumSquaresAsm(x *float32, n int) float64

//go:noescape
func colSumsAsm(s2, s1 *float64, am *float32, x *float32, n, ld, blocks int)

//go:noescape
func toBF16Asm(bf *uint16, f *float32, x *float32, n int)

//go:noescape
func scaleMulAsm(dst, x, w *float32, n int, scale float32)

//go:noescape
func addAsm(dst, x *float32, n int)

//go:noescape
func gemmQ4_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ5_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func amxQ8Tile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)

//go:noescape
func amxQ4KTile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)

//go:noescape
func amxQ6KTile(cfg *byte, acc *float32, cbuf *int32, a *int8, lda int, b *int8, kw *float32, tk *float32, nsteps, nt int, y *float32, ldy int, mask uint64)

//go:noescape
func amxTranspose16(dst *uint32, src *byte, stride, chunks int)

//go:noescape
func gemvBF16Dot(y *float32, w *byte, stride, rows int, x *uint16, n int)

//go:noescape
func gemm4x4BF16Dot(y *float32, ldy int, w *byte, stride int, x *uint16, ldx int, n int)

//go:noescape
func gemvQ2_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvQ3_K(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvIQ4_XS(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ2_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ2_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ3_Kx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmQ3_Kx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ4_XSx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ4_XSx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

// The AMX B-tile builders (amx_buildb_amd64.s).

//go:noescape
func amxBuildBQ4_0(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBIQ4_NL(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ5_0(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ8_0(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ4_K(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ2_K(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ5_K(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ6_K(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBQ3_K(dst, src *byte, stride, groups int)

//go:noescape
func amxBuildBIQ4_XS(dst, src *byte, stride, groups int)

// The i-quant and ternary kernels (gemv_iq_amd64.s, gemm_iq_amd64.s). IQ2_XXS, IQ2_XS and
// IQ2_S share one packed layout and so one kernel, as do IQ1_S and IQ1_M, and TQ1_0 and TQ2_0.

// iqLUT returns the VPSHUFB table of an i-quant's packed codes (pack.go): code c (the
// magnitude's rank) maps to magnitude + 64, c + plus (the value's sign bit) to 64 − magnitude;
// entries past the codes are 64 (value 0).
func iqLUT(mags []int, plus int) (t [16]byte) {
	for i := range t {
		t[i] = 64
	}
	for c, v := range mags {
		t[c], t[c+plus] = byte(64+v), byte(64-v)
	}
	return t
}

var (
	iq2LUT    = iqLUT(iq2Magnitudes, 4)
	iq3XXSLUT = iqLUT(iq3XXSMagnitudes, 8)
	iq3SLUT   = iqLUT(iq3SMagnitudes, 8)
	// iq1LUT maps IQ1's code c (grid value + 1) to 8·(c−1) + 1 + 16, c + 4 (a negative
	// delta) to 8·(c−1) − 1 + 16: eight times the value, so that the ±1/8 delta is an integer.
	iq1LUT = func() (t [16]byte) {
		for c := 0; c < 3; c++ {
			t[c], t[c+4] = byte(8*(c-1)+1+16), byte(8*(c-1)-1+16)
		}
		return t
	}()
)

//go:noescape
func gemvIQ2(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvIQ1(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvIQ3_XXS(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvIQ3_S(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemvTQ(y *float32, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ2x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ2x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ1x8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ1x4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ3XXSx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ3XXSx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ3Sx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmIQ3Sx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmTQx8(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

//go:noescape
func gemmTQx4(y *float32, ldy int, w *byte, stride, rows, groups int, act *byte, meta *float32, ntok int)

// Peak loops (BenchmarkFloatPeak): n × 16 register-only VDPBF16PS / VFMADD231PS.
func dpbf16PeakLoop(n int)
func fmaPeakLoop(n int)
