//go:build amd64 && !purego

package kernels

// Assembly entry points (see the .s files). Pointers address the first element; counts are
// validated by the Go callers.

//go:noescape
func gemvF32(y *float32, w *byte, stride, rows int, x *float32, n int)

//go:noescape
func gemvF16(y *float32, w *byte, stride, rows int, x *float32, n int)

//go:noescape
func gemvBF16(y *float32, w *byte, stride, rows int, x *float32, n int)

//go:noescape
func gemvQ4_0(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvIQ4_NL(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ4_1(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ5_0(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ5_1(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ8_0(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ4_K(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ5_K(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

//go:noescape
func gemvQ6_K(y *float32, w *byte, stride, rows, groups int, act *byte, ad *float32, asum *int32)

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
