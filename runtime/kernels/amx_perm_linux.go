//go:build amd64 && !purego

package kernels

import "syscall"

// amxPermitted asks Linux for the tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA), Linux 5.16 and later). The permission is per process: once granted,
// every thread of the process may use the tiles, the kernel giving each its tile state on
// first use (Documentation/arch/x86/xstate.rst).
func amxPermitted() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
