package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/half"
)

// ToFloat32 widens a tensor to float32 (exact for every supported dtype). dst is reused when
// its capacity suffices; the result has one element per tensor element.
func (c *Checkpoint) ToFloat32(name string, dst []float32) ([]float32, error) {
	data, err := c.Data(name)
	if err != nil {
		return nil, err
	}
	t, _ := c.Lookup(name)
	n := int(t.Elements())
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]float32, n)
	}
	if err := Widen(dst, data, t.DType); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", t.File, quoteName(name), err)
	}
	return dst, nil
}

// Widen converts little-endian elements of dtype d in src to float32 in dst; len(src) must be
// len(dst) times the dtype's size.
func Widen(dst []float32, src []byte, d DType) error {
	size := d.Size()
	if size == 0 {
		return fmt.Errorf("unsupported dtype %s", d)
	}
	if len(src) != len(dst)*size {
		return fmt.Errorf("%d bytes of %s for %d elements", len(src), d, len(dst))
	}
	switch d {
	case BF16:
		for i := range dst {
			dst[i] = half.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = half.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
	return nil
}
