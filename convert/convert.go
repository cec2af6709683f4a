package convert

import (
	"errors"
	"fmt"
	"os"
)

// Options are the inputs of one conversion besides the folder and the output path.
type Options struct {
	Scheme       string
	Overrides    []Override
	Pre          string // tokenizer.ggml.pre override
	Name         string // general.name
	Threads      int
	Force        bool  // overwrite an existing output
	SplitMaxSize int64 // split the output into files of at most this many bytes (0: one file)
	DryRun       bool  // plan only
	Imatrix      map[string][]float32
	Progress     func(done, total int64)
}

// Convert runs inventory → plan → execute for one HuggingFace folder. With DryRun it returns
// the plan and writes nothing. The output appears only when complete (temp file + rename).
func Convert(dir, out string, o Options) (*Plan, error) {
	if !o.DryRun && !o.Force {
		if _, err := os.Stat(out); err == nil {
			return nil, fmt.Errorf("%s: output exists (use --force to overwrite)", out)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	inv, err := Open(dir, InventoryOptions{Pre: o.Pre})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	plan, err := MakePlan(inv, PlanOptions{Scheme: o.Scheme, Overrides: o.Overrides, HasImatrix: o.Imatrix != nil, Name: o.Name})
	if err != nil {
		return nil, err
	}
	if o.DryRun {
		return plan, nil
	}
	kvs, err := Metadata(inv, plan, o.Name)
	if err != nil {
		return nil, err
	}
	if err := writeGGUF(inv, plan, kvs, out, o); err != nil {
		return nil, err
	}
	return plan, nil
}
