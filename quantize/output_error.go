package quantize

// outputErrorRows is the block of rows OutputError works on at a time (two float64 buffers of
// outputErrorRows × cols).
const outputErrorRows = 64

// OutputError returns Σ_r (ŵ_r − w_r)·H·(ŵ_r − w_r)ᵀ over the rows × cols weights w and their
// encoding's decoded values wq (row-major, rows in any order): the squared error the encoding
// leaves in the layer's outputs, summed over the inputs whose Σ xᵀx is H (cols × cols,
// row-major). GPTQ minimises it; convert's --target-bpw allocation weighs encodings by it.
// With H nil, diag (cols values, Σx² per column) stands for H's diagonal: Σ_rj (ŵ − w)²·diag_j.
// Rows are taken in blocks, so the work memory is two blocks of float64.
func OutputError(w, wq []float32, rows, cols int, H []float64, diag []float32) float64 {
	var d64 []float64
	if H == nil {
		d64 = make([]float64, cols)
		for j, v := range diag[:cols] {
			d64[j] = float64(v)
		}
	}
	var sum float64
	D := make([]float64, min(rows, outputErrorRows)*cols)
	for r0 := 0; r0 < rows; r0 += outputErrorRows {
		n := min(rows-r0, outputErrorRows)
		d := D[:n*cols]
		for i := range d {
			d[i] = float64(wq[r0*cols+i]) - float64(w[r0*cols+i])
		}
		sum += quadLoss(d, n, cols, H, d64)
	}
	return sum
}
