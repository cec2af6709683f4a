package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/safetensors"
	"github.com/gquant/gquant/internal/problems"
)

type inspectOptions struct {
	jsonOut string
	all     bool
	force   bool
}

func newInspectCmd(g *globals) *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show the metadata and tensors of a GGUF, gqf or safetensors file (or a model folder)",
		Args:  argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.jsonOut != "" && o.jsonOut != stdoutName {
				if err := checkOutputs(o.force, []string{args[0]}, o.jsonOut); err != nil {
					return err
				}
			}
			return runInspect(cmd.OutOrStdout(), o, args[0])
		},
	}
	addJSONFlag(cmd.Flags(), &o.jsonOut, "the inspection")
	cmd.Flags().BoolVar(&o.all, "all", false, "print long arrays whole")
	cmd.Flags().BoolVar(&o.force, "force", false, "overwrite an existing --json file")
	return cmd
}

// inspectTensor is one row of the tensor table.
type inspectTensor struct {
	Name  string   `json:"name"`
	Shape []uint64 `json:"shape"`        // outermost dimension first, in every format
	NE    []uint64 `json:"ne,omitempty"` // GGUF: ggml's order (ne[0] the row length)
	Type  string   `json:"type"`
	Bytes uint64   `json:"bytes"`
}

// inspectReport is what inspect prints.
type inspectReport struct {
	File     string          `json:"file"`
	Format   string          `json:"format"`
	Version  uint32          `json:"version,omitempty"`
	Metadata []inspectKV     `json:"metadata"`
	Tensors  []inspectTensor `json:"tensors"`
	Params   uint64          `json:"parameters"`
	Bytes    uint64          `json:"tensor_bytes"`
	BPW      float64         `json:"bpw"`
}

type inspectKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func runInspect(w io.Writer, o *inspectOptions, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	kind := "safetensors"
	if !st.IsDir() {
		if kind, err = fileKind(path); err != nil {
			return err
		}
	}
	if kind == "gqf" {
		r, err := gqf.Inspect(path)
		if err != nil {
			return err
		}
		if o.jsonOut != "" {
			return writeJSON(w, o.jsonOut, r)
		}
		fmt.Fprint(w, r)
		return nil
	}
	var rep *inspectReport
	if kind == "gguf" {
		rep, err = inspectGGUF(path, o)
	} else {
		rep, err = inspectSafetensors(path)
	}
	if err != nil {
		return err
	}
	for _, t := range rep.Tensors {
		rep.Params += gguf.ElementCount(t.Shape)
		rep.Bytes += t.Bytes
	}
	if rep.Params > 0 {
		rep.BPW = float64(rep.Bytes*8) / float64(rep.Params)
	}
	if o.jsonOut != "" {
		return writeJSON(w, o.jsonOut, rep)
	}
	fmt.Fprintf(w, "file:    %s\nformat:  %s", rep.File, rep.Format)
	if rep.Version != 0 {
		fmt.Fprintf(w, " v%d", rep.Version)
	}
	fmt.Fprintf(w, "\n\nmetadata (%d keys):\n", len(rep.Metadata))
	for _, kv := range rep.Metadata {
		fmt.Fprintf(w, "  %-44s %-10s %s\n", problems.Printable(kv.Key), kv.Type, showValue(kv.Value))
	}
	fmt.Fprintf(w, "\ntensors (%d; shapes outermost first, as numpy):\n", len(rep.Tensors))
	for _, t := range rep.Tensors {
		dims := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = int64(d)
		}
		fmt.Fprintf(w, "  %-40s %-18s %-7s %12d\n", problems.Printable(t.Name), gqf.ShapeString(dims), problems.Printable(t.Type), t.Bytes)
	}
	fmt.Fprintf(w, "\n%d parameters, %d bytes, %.4f bits per weight\n", rep.Params, rep.Bytes, rep.BPW)
	return nil
}

// fileKind tells a GGUF, gqf or safetensors file by its magic or, for a file whose magic is
// damaged, its extension; anything else is an error naming what the file starts with.
func fileKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var head [9]byte
	n, _ := io.ReadFull(f, head[:])
	switch {
	case n >= 4 && string(head[:4]) == "GGUF":
		return "gguf", nil
	case n >= 4 && string(head[:4]) == gqf.Magic:
		return "gqf", nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".gguf":
		return "gguf", nil // its reader names the bad magic
	case ".gqf":
		return "gqf", nil
	case ".safetensors":
		return "safetensors", nil
	}
	if n == 9 && head[8] == '{' { // a safetensors header: its length, then JSON
		return "safetensors", nil
	}
	return "", fmt.Errorf("%s: not a GGUF, gqf or safetensors file (it starts with %q)", path, head[:min(n, 8)])
}

func inspectGGUF(path string, o *inspectOptions) (*inspectReport, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep := &inspectReport{File: path, Format: "gguf", Version: f.Version}
	for _, kv := range f.KVs {
		v := kv.Value
		if !o.all {
			v = shorten(v)
		}
		rep.Metadata = append(rep.Metadata, inspectKV{Key: kv.Key, Type: valueTypeName(kv.Value), Value: v})
	}
	for _, t := range f.Tensors {
		// Shape outermost first, as every format's report gives it; NE in ggml's order.
		rep.Tensors = append(rep.Tensors, inspectTensor{Name: t.Name, Shape: reversed(t.Shape), NE: t.Shape, Type: t.Type.String(), Bytes: t.Size})
	}
	return rep, nil
}

func inspectSafetensors(path string) (*inspectReport, error) {
	c, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rep := &inspectReport{File: path, Format: "safetensors"}
	for _, file := range c.Files() {
		for k, v := range c.Metadata(file) {
			rep.Metadata = append(rep.Metadata, inspectKV{Key: k, Type: "string", Value: v})
		}
	}
	for _, t := range c.Tensors() {
		// report shapes in HF order, as the file stores them
		shape := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = uint64(d)
		}
		rep.Tensors = append(rep.Tensors, inspectTensor{Name: t.Name, Shape: shape, Type: string(t.DType), Bytes: uint64(t.Size)})
	}
	return rep, nil
}

// shorten keeps the first few elements of long arrays.
func shorten(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Len() <= 8 {
		return v
	}
	return map[string]any{"length": rv.Len(), "head": rv.Slice(0, 4).Interface()}
}

func valueTypeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "nil"
	}
	if t.Kind() == reflect.Slice {
		return "[]" + t.Elem().String()
	}
	return t.String()
}

func showValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// reversed returns a reversed copy of s.
func reversed(s []uint64) []uint64 {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
