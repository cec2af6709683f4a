package synth

import (
	"encoding/binary"
	"hash/fnv"
	"io"
	"math/rand/v2"

	"github.com/gquant/gquant/formats/half"
)

// Values are approximately normal: the centred sum of four uniform 16-bit integers drawn
// from one PCG output (an Irwin-Hall distribution), scaled to a standard deviation of 0.02.
// Only integer arithmetic, one exact int-to-float conversion, one multiplication and (for
// norms) one addition with an explicit conversion are involved, so the bytes are the same on
// every platform, every GOAMD64 level and every Go version (math/rand/v2 fixes PCG's
// algorithm; its NormFloat64 is not used because it may change).
const (
	// sumMean is the mean of the sum of four uniform integers in [0, 65535].
	sumMean = 2 * 65535
	// sumStd is that sum's standard deviation, sqrt(4 * (65536^2 - 1) / 12).
	sumStd = 37837.228
	// std is the target standard deviation, transformers' initializer_range.
	std = 0.02
	// scale maps the centred sum to values of standard deviation std.
	scale float32 = std / sumStd
)

// tensorRNG returns the generator of one tensor: PCG seeded with the run's seed and a hash
// of the tensor's name, so that a tensor's values do not depend on which other tensors
// exist, their order or the sharding.
func tensorRNG(seed uint64, name string) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.NewPCG(seed, h.Sum64())
}

// value draws the next value of a tensor.
func value(rng *rand.PCG, init initKind) float32 {
	u := rng.Uint64()
	sum := int32(u&0xffff) + int32(u>>16&0xffff) + int32(u>>32&0xffff) + int32(u>>48)
	x := float32(float32(sum-sumMean) * scale) // explicit conversion: no fused multiply-add
	switch init {
	case normInit:
		return 1 + x
	case routerInit:
		return x * 8 // exact: a power of two
	}
	return x
}

// chunkElems is how many values are produced per write: 64 KiB of bf16.
const chunkElems = 32 << 10

// source returns a streaming writer of a tensor's bf16 bytes, for safetensors.NamedTensor.
func source(seed uint64, t tensorSpec) func(w io.Writer) error {
	return func(w io.Writer) error {
		rng := tensorRNG(seed, t.name)
		buf := make([]byte, 2*chunkElems)
		for left := t.elements(); left > 0; {
			n := int(min(left, chunkElems))
			for i := range n {
				binary.LittleEndian.PutUint16(buf[2*i:], half.F32ToBF16(value(rng, t.init)))
			}
			if _, err := w.Write(buf[:2*n]); err != nil {
				return err
			}
			left -= int64(n)
		}
		return nil
	}
}
