package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/gqf"
	"github.com/gquant/gquant/formats/safetensors"
)

type inspectOptions struct {
	jsonOut bool
	all     bool
}

func newInspectCmd(g *globals) *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show the metadata and tensors of a GGUF, gqf or safetensors file (or a model folder)",
		Args:  argsN(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.OutOrStdout(), o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print JSON")
	cmd.Flags().BoolVar(&o.all, "all", false, "print long arrays whole")
	return cmd
}

// inspectTensor is one row of the tensor table.
type inspectTensor struct {
	Name  string   `json:"name"`
	Shape []uint64 `json:"shape"`
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
	if !st.IsDir() && hasMagic(path, gqf.Magic) {
		r, err := gqf.Inspect(path)
		if err != nil {
			return err
		}
		if o.jsonOut {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		}
		fmt.Fprint(w, r)
		return nil
	}
	var rep *inspectReport
	if !st.IsDir() && hasMagic(path, "GGUF") {
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
	if o.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "file:    %s\nformat:  %s", rep.File, rep.Format)
	if rep.Version != 0 {
		fmt.Fprintf(w, " v%d", rep.Version)
	}
	fmt.Fprintf(w, "\n\nmetadata (%d keys):\n", len(rep.Metadata))
	for _, kv := range rep.Metadata {
		fmt.Fprintf(w, "  %-44s %-10s %s\n", kv.Key, kv.Type, showValue(kv.Value))
	}
	fmt.Fprintf(w, "\ntensors (%d):\n", len(rep.Tensors))
	for _, t := range rep.Tensors {
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(w, "  %-40s %-18s %-7s %12d\n", t.Name, strings.Join(dims, "x"), t.Type, t.Bytes)
	}
	fmt.Fprintf(w, "\n%d parameters, %d bytes, %.4f bits per weight\n", rep.Params, rep.Bytes, rep.BPW)
	return nil
}

// hasMagic reports whether the file starts with the 4-byte magic.
func hasMagic(path, magic string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [4]byte
	_, err = io.ReadFull(f, head[:])
	return err == nil && string(head[:]) == magic
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
		rep.Tensors = append(rep.Tensors, inspectTensor{Name: t.Name, Shape: t.Shape, Type: t.Type.String(), Bytes: t.Size})
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
