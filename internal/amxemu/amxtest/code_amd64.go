//go:build amd64

package amxtest

import (
	"runtime"
	"slices"
	"unsafe"
)

// Names lists the assembly functions of the package, in the order of abi0Entries.
var Names = []string{"LoadConfig", "StoreConfig", "LoadConfigInline", "Release", "GemmSSD", "GemmSUD",
	"GemmUSD", "GemmUUD", "GemmBF16", "LoadABC", "DotSSD", "StoreC", "ZeroTile", "LoadBroadcast", "UD2"}

const numFuncs = 15

// abi0Entries stores the entry addresses of the assembly functions themselves (not of the
// ABIInternal wrappers that Go func values point to), in the order of Names.
//
//go:noescape
func abi0Entries(out *[numFuncs]unsafe.Pointer)

// CodeRange returns the address range [lo, hi) of the machine code of the assembly function
// name (one of Names) in the running binary; hi may include alignment padding. It returns
// 0, 0 for an unknown name.
func CodeRange(name string) (lo, hi uintptr) {
	i := slices.Index(Names, name)
	if i < 0 {
		return 0, 0
	}
	lo = uintptr(entry(i))
	f := runtime.FuncForPC(lo)
	if f == nil || f.Entry() != lo {
		return 0, 0
	}
	hi = lo + 1
	for hi-lo < 4096 {
		g := runtime.FuncForPC(hi)
		if g == nil || g.Entry() != lo {
			break
		}
		hi++
	}
	return lo, hi
}

// entry returns the entry address of the i-th function of Names.
func entry(i int) unsafe.Pointer {
	var entries [numFuncs]unsafe.Pointer
	abi0Entries(&entries)
	return entries[i]
}

// Code returns a copy of the machine code of the assembly function name (see CodeRange).
func Code(name string) []byte {
	lo, hi := CodeRange(name)
	if lo == 0 {
		return nil
	}
	return slices.Clone(unsafe.Slice((*byte)(entry(slices.Index(Names, name))), hi-lo))
}
