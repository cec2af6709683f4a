package kernels_test

import (
	"fmt"

	"github.com/gquant/gquant/runtime/kernels"
)

// A decode step: the activations are prepared once, then the pool's workers each compute a
// range of rows.
func Example() {
	const rows, cols = 64, 32
	data := make([]byte, rows*34) // Q8_0: one block of 34 bytes per row
	for r := 0; r < rows; r++ {
		blk := data[r*34:]
		blk[0], blk[1] = 0x00, 0x3c // d = 1.0 (fp16)
		for i := 0; i < 32; i++ {
			blk[2+i] = byte(r % 8) // every weight of row r is r mod 8
		}
	}
	m, err := kernels.NewMatrix(kernels.Q8_0, rows, cols, data)
	if err != nil {
		panic(err)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1
	}
	pool := kernels.NewPool(2)
	defer pool.Close()

	var acts kernels.Acts
	m.Prepare(&acts, x, 1) // Q8_0 activations, as llama.cpp forms them
	y := make([]float32, rows)
	pool.Run(rows, 16, func(w, lo, hi int) { m.MulActs(y, &acts, lo, hi) })
	// x is quantized with d = fp16(1/127): the products agree with llama.cpp, not with exact math.
	fmt.Printf("%.3f %.3f %.3f\n", y[1], y[7], y[9])
	// Output: 31.998 223.986 31.998
}
