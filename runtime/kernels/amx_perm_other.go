//go:build amd64 && !purego && !linux

package kernels

// amxPermitted reports false: the tiles are used only where the OS is known to enable them
// (Linux, amx_perm_linux.go).
func amxPermitted() bool { return false }
