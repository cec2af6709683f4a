//go:build amd64 && !purego

package quantize

// iq3KernelAVX512 runs 16 trials of the IQ3 sub-block search side by side, one per lane
// (iq3search_amd64.s): for trial lane it reads b.id[lane] and b.tscale[lane], puts each group
// of 4 on its nearest levels clamp(nearest_int(0.5·(id·x − 1)), 0, 7) or, off the grid, on
// the listed neighbour of least Σ waux·(tscale·q − x)·(tscale·q − x) (the first on a tie,
// the first listed when none is below FLT_MAX), and writes b.levels[·][lane],
// bit lane of b.onMask and b.sumqx[lane], b.sumq2[lane]. Each lane performs the float32
// operations of trials' Go loop in the same order, with separate multiplies and adds (no
// FMA), so the lanes hold exactly the Go code's values. It needs AVX-512 F (useSIMDSearch).
//
//go:noescape
func iq3KernelAVX512(b *iq3Block)

// trialsSIMD runs the trial pass set up in b.id and b.tscale on lat.
func (lat *iq3Lattice) trialsSIMD(b *iq3Block) {
	b.kmap, b.nb = &lat.kmap32[0], &lat.nb[0]
	iq3KernelAVX512(b)
	b.kmap, b.nb = nil, nil
}
