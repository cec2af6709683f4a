package safetensors

import (
	"encoding/binary"
	"strings"
	"testing"
)

// TestCheckHeaderMalformed runs the catalogue of malformed single files: each must give an
// error naming the file and, where there is one, the tensor, with the expected text.
func TestCheckHeaderMalformed(t *testing.T) {
	valid := rawFile(validHeader, 18)
	longLen := binary.LittleEndian.AppendUint64(nil, 1000)
	longLen = append(longLen, `{"a":1}`...)
	cases := []struct {
		name string
		file []byte
		want []string
	}{
		{"empty file", nil, []string{"x.safetensors: file is 0 bytes, too short"}},
		{"short file", []byte{1, 2, 3}, []string{"x.safetensors: file is 3 bytes"}},
		{"header length past end", longLen, []string{"x.safetensors: header length 1000 runs past the end of the file (15 bytes)"}},
		{"truncated", valid[:len(valid)-3], []string{"x.safetensors: b: data_offsets [8, 16] run past the end of the data section (15 bytes)", "x.safetensors: c: data_offsets [16, 18] run past"}},
		{"bad json", rawFile(`{"a":{"dtype":"F32",`, 0), []string{"x.safetensors: header: not valid JSON"}},
		{"not an object", rawFile(`[1,2]`, 0), []string{"x.safetensors: header: is an array, want a JSON object"}},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12),
			[]string{"x.safetensors: b: data_offsets [4, 12] overlap those of a [0, 8]"}},
		{"same range twice", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4),
			[]string{"x.safetensors: b: data_offsets [0, 4] overlap those of a [0, 4]"}},
		{"gap", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), []string{"x.safetensors: a: data_offsets [4, 8] leave a gap of 4 unused bytes"}},
		{"trailing bytes", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 6), []string{"x.safetensors: 2 unused bytes after the last tensor's data"}},
		{"shape bytes mismatch", rawFile(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8),
			[]string{"x.safetensors: w: shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8"}},
		{"shape overflow", rawFile(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), []string{"x.safetensors: w: shape [4294967296,4294967296] is too large"}},
		{"negative dim", rawFile(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), []string{"x.safetensors: w: shape [-1]: -1 is not a natural number"}},
		{"string dim", rawFile(`{"w":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}`, 4), []string{`x.safetensors: w: shape ["1"]: "1" is not a natural number`}},
		{"I64", rawFile(`{"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8), []string{"x.safetensors: ids: unsupported dtype I64 (gquant reads BF16, F16 and F32)"}},
		{"F8_E4M3", rawFile(`{"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}`, 4), []string{"x.safetensors: w: unsupported dtype F8_E4M3"}},
		{"unknown dtype", rawFile(`{"w":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}}`, 4), []string{`x.safetensors: w: unknown dtype "Q4"`}},
		{"dtype not string", rawFile(`{"w":{"dtype":5,"shape":[1],"data_offsets":[0,4]}}`, 4), []string{"x.safetensors: w: dtype is a number, want a string"}},
		{"reversed offsets", rawFile(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), []string{"x.safetensors: w: data_offsets [4, 0] end before they start"}},
		{"offsets not pair", rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, 4), []string{"x.safetensors: w: data_offsets [0] is not a pair"}},
		{"missing field", rawFile(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, 4), []string{`x.safetensors: w: entry has no "shape"`}},
		{"extra field", rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, 4), []string{`x.safetensors: w: unexpected key "x" in the entry`}},
		{"entry not object", rawFile(`{"w":[1]}`, 0), []string{"x.safetensors: w: entry is an array, want a JSON object"}},
		{"tensor twice", rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), []string{"x.safetensors: w: appears twice in the header"}},
		{"metadata not string", rawFile(`{"__metadata__":{"n":1}}`, 0), []string{`x.safetensors: __metadata__: value of "n" is a number, want a string`}},
		{"empty name", rawFile(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4), []string{"x.safetensors: a tensor has an empty name"}},
		{"name with newline", rawFile(`{"a\nb":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}}`, 1), []string{`x.safetensors: "a\nb": unsupported dtype I8`}},
		{"several problems", rawFile(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[3],"data_offsets":[8,12]}}`, 12),
			[]string{"x.safetensors: a: unsupported dtype I64 (gquant reads BF16, F16 and F32); x.safetensors: b: shape [3] of F32 needs 12 bytes but data_offsets [8, 12] hold 4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ps problemList
			if h := checkHeader("x.safetensors", tc.file, &ps); h != nil {
				t.Fatalf("header accepted: %+v", h.tensors)
			}
			wantErr(t, ps.err(), tc.want...)
		})
	}
}

// TestCheckHeaderValid checks the listing of a valid header, scalars and empty tensors
// included, against values written out by hand.
func TestCheckHeaderValid(t *testing.T) {
	var ps problemList
	h := checkHeader("x", rawFile(validHeader, 18), &ps)
	if h == nil {
		t.Fatal(ps.err())
	}
	base := int64(8 + len(validHeader))
	want := []TensorInfo{
		{Name: "a", DType: F32, Shape: []int{2}, File: "x", Offset: base, Size: 8},
		{Name: "b", DType: BF16, Shape: []int{2, 2}, File: "x", Offset: base + 8, Size: 8},
		{Name: "c", DType: F16, Shape: []int{}, File: "x", Offset: base + 16, Size: 2},
	}
	if len(h.tensors) != len(want) {
		t.Fatalf("got %d tensors, want %d", len(h.tensors), len(want))
	}
	for i, w := range want {
		g := h.tensors[i]
		if g.Name != w.Name || g.DType != w.DType || g.File != w.File || g.Offset != w.Offset || g.Size != w.Size || !equalInts(g.Shape, w.Shape) {
			t.Errorf("tensor %d = %+v, want %+v", i, g, w)
		}
	}
	if h.metadata["format"] != "pt" {
		t.Errorf("metadata = %v", h.metadata)
	}

	// Empty tensors may share an offset with each other and with the next tensor.
	hdr := `{"e1":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"e2":{"dtype":"BF16","shape":[0],"data_offsets":[0,0]},` +
		`"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"F16","shape":[3,0],"data_offsets":[4,4]}}`
	if h := checkHeader("x", rawFile(hdr, 4), &ps); h == nil || len(h.tensors) != 4 {
		t.Fatalf("empty tensors rejected: %v", ps.err())
	}
	// A file without tensors is valid.
	if h := checkHeader("x", rawFile(`{}      `, 0), &ps); h == nil || len(h.tensors) != 0 {
		t.Fatalf("empty file rejected: %v", ps.err())
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestErrorCap checks that a huge problem list is cut to a readable line.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 150 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"t` + strings.Repeat("x", i) + `":{"dtype":"I8","shape":[0],"data_offsets":[0,0]}`)
	}
	b.WriteString("}")
	var ps problemList
	checkHeader("x", rawFile(b.String(), 0), &ps)
	wantErr(t, ps.err(), "; ... and 50 more problems")
}
