//go:build amd64 && !purego

package kernels

func attnScoresAVX512(s, q [4]*float32, k *float32, blkStride, nblk, hd int, scale float32) {
	attnScoresAsm(&s, &q, k, blkStride, nblk, hd, scale)
}

func attnValuesAVX512(o, p [4]*float32, nq int, v *float32, ldv, rows, hd int) {
	attnValuesAsm(&o, &p, nq, v, ldv, rows, hd)
}

//go:noescape
func attnScoresAsm(s, q *[4]*float32, k *float32, blkStride, nblk, hd int, scale float32)

//go:noescape
func attnValuesAsm(o, p *[4]*float32, nq int, v *float32, ldv, rows, hd int)
