// Package safetensors opens safetensors checkpoints, single files or sharded with a
// model.safetensors.index.json, as read-only memory mappings, and gives zero-copy views of
// their tensors. Every header is checked before any tensor is used: dtypes (BF16, F16, F32),
// data offsets, sizes, overlaps, and the agreement between a shard index and its shards.
// All problems of a checkpoint are reported together in one error.
//
// Parsing over the mapping is done by github.com/nlpodyssey/safetensors, after this package's
// own stricter check; the library is also what produces the tensor views.
package safetensors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	st "github.com/nlpodyssey/safetensors"

	"github.com/gquant/gquant/internal/mapped"
)

// IndexName is the file name of a sharded checkpoint's index.
const IndexName = "model.safetensors.index.json"

// TensorInfo describes one tensor of a checkpoint.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int  // empty for a scalar
	File   string // the file that holds the tensor
	Offset int64  // absolute byte offset of the data within File
	Size   int64  // bytes of data
}

// Elements returns the number of elements (1 for a scalar).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Checkpoint is an open, checked safetensors checkpoint. Its methods may be called from
// several goroutines at once, except Close.
type Checkpoint struct {
	files   []*mappedFile
	tensors []TensorInfo   // sorted by name
	index   map[string]int // name -> position in tensors
	where   []int          // position in tensors -> position in files
	closed  bool
}

// mappedFile is one mapped safetensors file and its parsed header.
type mappedFile struct {
	path    string
	mapping []byte
	header  *header
	lib     st.SafeTensors // the library's view over mapping
}

// Open opens a checkpoint. path is a .safetensors file, an index file, or a directory: there
// the index (model.safetensors.index.json) is used when present, else model.safetensors,
// else every *.safetensors file in name order. The error, if any, lists every problem found.
func Open(path string) (*Checkpoint, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	if !fi.IsDir() {
		if strings.HasSuffix(path, ".index.json") {
			return openIndex(path)
		}
		return openFiles([]string{path})
	}
	if index := filepath.Join(path, IndexName); exists(index) {
		return openIndex(index)
	}
	if single := filepath.Join(path, "model.safetensors"); exists(single) {
		return openFiles([]string{single})
	}
	files, err := filepath.Glob(filepath.Join(path, "*.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.safetensors files", path)
	}
	slices.Sort(files)
	return openFiles(files)
}

// openFiles opens independent safetensors files as one checkpoint; a tensor name may occur
// in only one of them.
func openFiles(paths []string) (*Checkpoint, error) {
	var ps problemList
	c := &Checkpoint{}
	for _, p := range paths {
		if f := openFile(p, &ps); f != nil {
			c.files = append(c.files, f)
		}
	}
	if err := ps.err(); err != nil {
		c.Close()
		return nil, err
	}
	c.build(&ps)
	if err := ps.err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// openFile maps one file and checks its header, recording problems in ps. It returns nil
// (with nothing left mapped) when the file cannot be used.
func openFile(path string, ps *problemList) *mappedFile {
	f, err := os.Open(path)
	if err != nil {
		ps.add(path, "", "%v", unwrapPathError(err))
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		ps.add(path, "", "%v", unwrapPathError(err))
		return nil
	}
	if fi.IsDir() {
		ps.add(path, "", "is a directory, want a .safetensors file")
		return nil
	}
	mapping, err := mapped.Map(f, fi.Size())
	if err != nil {
		ps.add(path, "", "cannot map the file: %v", err)
		return nil
	}
	mapped.Random(mapping) // reading the header must not pull the data behind it in
	h := checkHeader(path, mapping, ps)
	if h == nil {
		_ = mapped.Unmap(mapping)
		return nil
	}
	lib, err := st.Deserialize(mapping)
	if err != nil { // checkHeader accepts only what the library accepts: a bug if reached
		ps.add(path, "", "safetensors library rejects the header: %v", err)
		_ = mapped.Unmap(mapping)
		return nil
	}
	return &mappedFile{path: path, mapping: mapping, header: h, lib: lib}
}

// build merges the files' tensors into the sorted listing; a name in two files is a problem.
func (c *Checkpoint) build(ps *problemList) {
	c.index = make(map[string]int)
	owner := make(map[string]int)
	type entry struct {
		info TensorInfo
		file int
	}
	var all []entry
	for fi, f := range c.files {
		for _, t := range f.header.tensors {
			if prev, dup := owner[t.Name]; dup {
				ps.add(f.path, t.Name, "also in %s", c.files[prev].path)
				continue
			}
			owner[t.Name] = fi
			all = append(all, entry{t, fi})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.info.Name, b.info.Name) })
	c.tensors = make([]TensorInfo, len(all))
	c.where = make([]int, len(all))
	for i, e := range all {
		c.tensors[i], c.where[i] = e.info, e.file
		c.index[e.info.Name] = i
	}
}

// Tensors lists every tensor, sorted by name. The slice must not be modified.
func (c *Checkpoint) Tensors() []TensorInfo { return c.tensors }

// Lookup returns a tensor's description.
func (c *Checkpoint) Lookup(name string) (TensorInfo, bool) {
	i, ok := c.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return c.tensors[i], true
}

// Files lists the checkpoint's safetensors files in the order they were opened.
func (c *Checkpoint) Files() []string {
	out := make([]string, len(c.files))
	for i, f := range c.files {
		out[i] = f.path
	}
	return out
}

// Metadata returns the __metadata__ strings of one of the checkpoint's files (nil if none).
func (c *Checkpoint) Metadata(file string) map[string]string {
	for _, f := range c.files {
		if f.path == file {
			return f.header.metadata
		}
	}
	return nil
}

// Data returns the tensor's bytes, little-endian, as a read-only view of the mapping: no copy
// is made, and the slice is valid until Close. Writing to it faults. It tells the kernel that
// the tensor's pages are about to be read.
func (c *Checkpoint) Data(name string) ([]byte, error) {
	i, ok := c.index[name]
	if !ok {
		return nil, fmt.Errorf("%s: %s: no such tensor", c.describe(), quoteName(name))
	}
	t, f := c.tensors[i], c.files[c.where[i]]
	if c.closed {
		return nil, fmt.Errorf("%s: %s: checkpoint is closed", t.File, quoteName(name))
	}
	view, ok := f.lib.Tensor(name)
	if !ok || view.DataLen() != uint64(t.Size) {
		return nil, fmt.Errorf("%s: %s: library view disagrees with the header", t.File, quoteName(name))
	}
	mapped.Advise(f.mapping, t.Offset, t.Size, true)
	return view.Data(), nil
}

// Release tells the kernel that a tensor's pages will not be needed soon, so that streaming
// through a large checkpoint keeps the resident set small. Views stay valid: pages are read
// again on access.
func (c *Checkpoint) Release(name string) {
	if i, ok := c.index[name]; ok && !c.closed {
		t := c.tensors[i]
		mapped.Advise(c.files[c.where[i]].mapping, t.Offset, t.Size, false)
	}
}

// Close unmaps every file. Views returned by Data must not be used afterwards.
func (c *Checkpoint) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var first error
	for _, f := range c.files {
		if err := mapped.Unmap(f.mapping); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", f.path, err)
		}
		f.mapping = nil
	}
	return first
}

// describe names the checkpoint in errors that concern no particular file.
func (c *Checkpoint) describe() string {
	if len(c.files) == 0 {
		return "checkpoint"
	}
	return filepath.Dir(c.files[0].path)
}

// exists reports whether path names an existing file or directory.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// unwrapPathError drops the *PathError wrapper, whose text repeats the path.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
