package arch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gquant/gquant/formats/gguf"
)

// SpecFromGGUFFile returns the family and spec of a GGUF model (one file, or every part of a
// split one), checking every stored tensor against the spec as llama.cpp's loader does. The
// metadata does not say whether the output is tied: llama.cpp falls back to token_embd when
// output.weight is absent, and so does the spec. Errors name the file.
func SpecFromGGUFFile(f *gguf.SplitFile) (Family, *Spec, error) {
	path := f.File.Name
	get := func(key string) (any, bool) {
		kv, found := f.Get(key)
		return kv.Value, found
	}
	name, err := f.String("general.architecture")
	if err != nil {
		return nil, nil, err
	}
	fam, err := ForGGUF(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	spec, err := fam.SpecFromGGUF(get)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if fam, err = ForSpec(spec); err != nil { // a llama file with experts: Mixtral
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	_, hasOutput := f.TensorIndex(string(Output))
	spec.Tied = !hasOutput
	if _, fused := f.TensorIndex("blk.0.attn_qkv.weight"); fused && spec.Family == "phi3" {
		spec.FusedQKV = true
	}
	if err := longRopeFromGGUF(f, spec); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	stored := make([]Stored, len(f.Tensors))
	for i, t := range f.Tensors {
		stored[i] = Stored{Name: t.Name, Shape: HFShape(t.Shape)}
	}
	where := "the file"
	if len(f.Parts) > 1 {
		where = fmt.Sprintf("its %d parts", len(f.Parts))
	}
	if err := CheckStored(spec, fam, "gguf", where, stored); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return fam, spec, nil
}

// HFShape turns a ggml shape (ne order) into HF order, its reverse.
func HFShape(ne []uint64) []int {
	shape := make([]int, len(ne))
	for j, d := range ne {
		shape[len(shape)-1-j] = int(d)
	}
	return shape
}

// longRopeFromGGUF makes a Phi-3 spec's longrope scaling from the file's rope_factors_long and
// rope_factors_short tensors (F32, half the rotated dimensions each) and its attn_factor.
func longRopeFromGGUF(f *gguf.SplitFile, s *Spec) error {
	if s.Family != "phi3" {
		return nil
	}
	il, okL := f.TensorIndex(string(RopeFactorsLong))
	is, okS := f.TensorIndex(string(RopeFactorsShort))
	if !okL && !okS {
		return nil
	}
	sc := &RopeScaling{Type: "longrope", OriginalContext: s.OriginalContext, LongAttnFactor: s.RopeAttnFactor,
		Factor: float64(s.Context) / float64(max(s.OriginalContext, 1))}
	for _, t := range []struct {
		ok  bool
		i   int
		dst *[]float64
	}{{okL, il, &sc.LongFactor}, {okS, is, &sc.ShortFactor}} {
		if !t.ok {
			return fmt.Errorf("%s and %s: one without the other", RopeFactorsLong, RopeFactorsShort)
		}
		info := f.Tensors[t.i]
		if info.Type != gguf.F32 || len(info.Shape) != 1 || int(info.Shape[0]) != s.RotDims()/2 {
			return fmt.Errorf("%s: %s %v, want F32 [%d]", info.Name, info.Type, info.Shape, s.RotDims()/2)
		}
		data := f.TensorData(t.i)
		for k := 0; k < len(data)/4; k++ {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*k:]))
			if !(v > 0) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%s: value %d is %g, want a positive frequency divisor", info.Name, k, v)
			}
			*t.dst = append(*t.dst, float64(v))
		}
	}
	s.RopeScaling = sc
	return nil
}
