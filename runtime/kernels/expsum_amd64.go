//go:build amd64 && !purego

package kernels

//go:noescape
func expSumsAsm(x, y *float32, n int, mx, my float64) (sx, sy, w float64)

//go:noescape
func expSumAsm(x *float32, n int, m float64) float64
