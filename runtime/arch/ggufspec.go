package arch

import (
	"fmt"

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
	_, hasOutput := f.TensorIndex(string(Output))
	spec.Tied = !hasOutput
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
