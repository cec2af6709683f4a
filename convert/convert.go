package convert

import (
	"fmt"

	"github.com/gquant/gquant/internal/atomicfile"
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
	// Method is rtn or imatrix (GGUF); empty: imatrix when Stats is set, else rtn.
	Method string
	// Stats is an importance matrix (llama.cpp GGUF imatrix or .dat, or gquant calibrate stats).
	Stats    string
	Imatrix  map[string][]float32
	Progress func(done, total int64)
}

// Convert runs inventory → plan → execute for one HuggingFace folder. With DryRun it returns
// the plan and writes nothing. The output appears only when complete (temp file + rename).
func Convert(dir, out string, o Options) (*Plan, error) {
	if !o.DryRun {
		if err := atomicfile.CheckNew(out, o.Force); err != nil {
			return nil, err
		}
	}
	inv, err := Open(dir, InventoryOptions{Pre: o.Pre})
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	method := o.Method
	if method == "" {
		method = "rtn"
		if o.Stats != "" {
			method = "imatrix"
		}
	}
	switch method {
	case "rtn":
	case "imatrix":
		if o.Stats == "" && o.Imatrix == nil {
			return nil, fmt.Errorf("--method imatrix needs --stats FILE (gquant calibrate or llama-imatrix output)")
		}
	case "gptq", "awq":
		return nil, fmt.Errorf("--method %s: GGUF output takes rtn or imatrix; %s writes --format gqf", method, method)
	default:
		return nil, fmt.Errorf("--method: unknown method %q (rtn, imatrix, gptq, awq)", method)
	}
	useImatrix := method == "imatrix"
	plan, err := MakePlan(inv, PlanOptions{Scheme: o.Scheme, Overrides: o.Overrides, HasImatrix: useImatrix, Name: o.Name})
	if err != nil {
		return nil, err
	}
	if useImatrix && o.Imatrix == nil {
		if o.Imatrix, err = LoadImportance(o.Stats, plan); err != nil {
			return nil, err
		}
	}
	if !useImatrix {
		o.Imatrix = nil
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
