package quantize

// The scale searches shared by the k-quants and by the imatrix paths of the legacy quants:
// ports of make_qx_quants, make_q3_quants, make_qkx2_quants, make_qkx3_quants and
// make_qp_quants from ggml/src/ggml-quants.c. Every product that is summed is rounded by an
// explicit float32 conversion (see the package comment).

// makeQ3Quants is make_q3_quants with do_rmse: levels in [0, 2·nmax) weighted by x², refined
// by coordinate descent.
func makeQ3Quants(x []float32, nmax int, L []int8) float32 {
	n := len(x)
	var maxv, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, maxv = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-nmax) / maxv
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := clamp(nearestInt(iscale*x[i]), -nmax, nmax-1)
		L[i] = int8(l)
		w, fl := float32(x[i]*x[i]), float32(l)
		sumlx += float32(w * x[i] * fl)
		suml2 += float32(w * fl * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i := 0; i < n; i++ {
			w, li := float32(x[i]*x[i]), float32(L[i])
			slx := sumlx - float32(w*x[i]*li)
			if slx > 0 {
				sl2 := suml2 - float32(w*li*li)
				newL := clamp(nearestInt(x[i]*sl2/slx), -nmax, nmax-1)
				if newL != int(L[i]) {
					fl := float32(newL)
					slx += float32(w * x[i] * fl)
					sl2 += float32(w * fl * fl)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i], sumlx, suml2 = int8(newL), slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := 0; i < n; i++ {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQpQuants is make_qp_quants: non-negative levels L in [0, nmax] for non-negative x (the
// sub-block scales or mins of a super-block) weighted by quantWeights, refined by coordinate
// descent; it returns the scale.
func makeQpQuants(x []float32, nmax int, L []uint8, quantWeights []float32) float32 {
	n := len(x)
	var maxv float32
	for i := 0; i < n; i++ {
		if !(maxv > x[i]) { // MAX(max, x[i])
			maxv = x[i]
		}
	}
	if maxv < groupMaxEps {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(nmax) / maxv
	for i := 0; i < n; i++ {
		L[i] = uint8(nearestInt(iscale * x[i]))
	}
	scale := 1 / iscale
	var bestMse float32
	for i := 0; i < n; i++ {
		diff := x[i] - float32(scale*float32(L[i]))
		bestMse += float32(quantWeights[i] * diff * diff)
	}
	for is := -4; is <= 4; is++ {
		if is == 0 {
			continue
		}
		iscaleIs := (float32(0.1*float32(is)) + float32(nmax)) / maxv
		scaleIs := 1 / iscaleIs
		var mse float32
		for i := 0; i < n; i++ {
			l := min(nmax, nearestInt(iscaleIs*x[i]))
			diff := x[i] - float32(scaleIs*float32(l))
			mse += float32(quantWeights[i] * diff * diff)
		}
		if mse < bestMse {
			bestMse, iscale = mse, iscaleIs
		}
	}
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := min(nmax, nearestInt(iscale*x[i]))
		L[i] = uint8(l)
		w, fl := quantWeights[i], float32(l)
		sumlx += float32(w * x[i] * fl)
		suml2 += float32(w * fl * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i := 0; i < n; i++ {
			w, li := quantWeights[i], float32(L[i])
			slx := sumlx - float32(w*x[i]*li)
			sl2 := suml2 - float32(w*li*li)
			if slx > 0 && sl2 > 0 {
				newL := min(nmax, nearestInt(x[i]*sl2/slx))
				if newL != int(L[i]) {
					fl := float32(newL)
					slx += float32(w * x[i] * fl)
					sl2 += float32(w * fl * fl)
					if float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i], sumlx, suml2 = uint8(newL), slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// getScaleMinK4 is get_scale_min_k4: the 6-bit scale and min of sub-block j from the 12 packed
// bytes of a Q4_K or Q5_K block.
func getScaleMinK4(j int, q []byte) (d, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// packScaleMinK4 stores the 6-bit scale ls and min lm of sub-block j into the 12 scale bytes, as
// the Q4_K/Q5_K quantizers do (q must start zeroed for j ≥ 4 to combine correctly).
func packScaleMinK4(j int, q []byte, ls, lm uint8) {
	if j < 4 {
		q[j] = ls
		q[j+4] = lm
	} else {
		q[j+4] = ls&0xF | (lm&0xF)<<4
		q[j-4] |= (ls >> 4) << 6
		q[j] |= (lm >> 4) << 6
	}
}

// quantizeKMin quantizes one 256-element super-block of Q4_K (nmax 15) or Q5_K (nmax 31),
// which share everything but the level count and the bit packing; qw nil selects the
// reference path.
func quantizeKMin(y []byte, x, qw []float32, nmax int) {
	var L [256]uint8
	var weights [256]float32
	var scales, mins [8]float32
	scaleBytes := y[4:16]
	clear(scaleBytes)
	if qw == nil {
		// quantize_row_q4_K_ref / quantize_row_q5_K_ref
		for j := 0; j < 8; j++ {
			xs, ws := x[32*j:32*j+32], weights[32*j:32*j+32]
			var sumX2 float32
			for _, v := range xs {
				sumX2 += float32(v * v)
			}
			avX := sqrt32(float32(sumX2 / 32))
			for l, v := range xs {
				ws[l] = avX + abs32(v)
			}
		}
		p := qkxQ4KRef
		if nmax == 31 {
			p = qkxQ5KRef
		}
		qkxSearch(x[:256], weights[:], 32, L[:], scales[:], mins[:], p)
		var maxScale, maxMin float32
		for j := 0; j < 8; j++ {
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		for j := 0; j < 8; j++ {
			ls := min(63, uint8(nearestInt(invScale*scales[j])))
			lm := min(63, uint8(nearestInt(invMin*mins[j])))
			packScaleMinK4(j, scaleBytes, ls, lm)
		}
		putF16(y, maxScale/63)
		putF16(y[2:], maxMin/63)
	} else {
		// quantize_row_q4_K_impl / quantize_row_q5_K_impl with quant_weights
		var sumX2 float32
		for _, v := range x[:256] {
			sumX2 += float32(v * v)
		}
		sigma2 := float32(2 * sumX2 / 256)
		var sw [8]float32
		for j := 0; j < 8; j++ {
			xs, ws := x[32*j:32*j+32], weights[32*j:32*j+32]
			for l, v := range xs {
				ws[l] = qw[32*j+l] * sqrt32(sigma2+float32(v*v))
			}
			var sumw float32
			for _, w := range ws {
				sumw += w
			}
			sw[j] = sumw
		}
		p := qkxImatrix
		p.nmax = nmax
		qkxSearch(x[:256], weights[:], 32, L[:], scales[:], mins[:], p)
		var ls, lm [8]uint8
		dBlock := makeQpQuants(scales[:], 63, ls[:], sw[:])
		mBlock := makeQpQuants(mins[:], 63, lm[:], sw[:])
		for j := 0; j < 8; j++ {
			if nmax == 31 { // only quantize_row_q5_K_impl clamps the 6-bit values
				ls[j], lm[j] = min(63, ls[j]), min(63, lm[j])
			}
			packScaleMinK4(j, scaleBytes, ls[j], lm[j])
		}
		putF16(y, dBlock)
		putF16(y[2:], mBlock)
	}
	// Requantize every sub-block against the stored (fp16, 6-bit) scale and min.
	d0, dmin0 := getF16(y), getF16(y[2:])
	for j := 0; j < 8; j++ {
		sc, m := getScaleMinK4(j, scaleBytes)
		d := float32(d0 * float32(sc))
		if d == 0 {
			continue
		}
		dm := float32(dmin0 * float32(m))
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(clamp(nearestInt((x[32*j+ii]+dm)/d), 0, nmax))
		}
	}
	packKMin(y, L[:], nmax)
}

// packKMin writes the 256 levels L of a Q4_K (nmax 15) or Q5_K (nmax 31) super-block into
// y's quants (after its 16 bytes of scales).
func packKMin(y []byte, L []uint8, nmax int) {
	if nmax == 15 {
		q := y[16:144]
		for j := 0; j < 256; j += 64 {
			for l := 0; l < 32; l++ {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
		return
	}
	qh, ql := y[16:48], y[48:176]
	clear(qh)
	m1, m2 := uint8(1), uint8(2)
	for n := 0; n < 256; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[n/2+j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
	}
}
