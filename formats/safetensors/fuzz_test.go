package safetensors

import (
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"

	st "github.com/nlpodyssey/safetensors"
)

// FuzzHeader feeds arbitrary files to the header check. It must never panic; a rejection
// must be a one-line error; and whatever it accepts, the nlpodyssey library must accept too,
// with the same tensors at the same places (the check is meant to be stricter than the
// library, so that Open never hands the library a file it would reject).
//
//	go test -run='^$' -fuzz=FuzzHeader -fuzztime=60s ./formats/safetensors/
func FuzzHeader(f *testing.F) {
	f.Add(rawFile(validHeader, 18))
	f.Add(rawFile(`{}      `, 0))
	f.Add(rawFile(`{"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4))
	f.Add(rawFile(validHeader, 15))
	f.Add(append(binary.LittleEndian.AppendUint64(nil, 1000), `{"a":1}`...))
	f.Add(rawFile(`{"a":{"dtype":"F32",`, 0))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12))
	f.Add(rawFile(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8))
	f.Add(rawFile(`{"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	f.Add(rawFile(`{"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}`, 4))
	f.Add(rawFile(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8))
	f.Add(rawFile(`{"__metadata__":{"n":1}}`, 0))
	f.Add(rawFile(`{"__metadata__":null,"w":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}`, 2))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, file []byte) {
		var ps problemList
		h := checkHeader("f", file, &ps)
		if h == nil {
			err := ps.err()
			if err == nil {
				t.Fatal("rejected without a problem")
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error not on one line: %q", err)
			}
			return
		}
		if len(ps.list) != 0 {
			t.Fatalf("accepted with problems: %v", ps.err())
		}
		lib, err := st.Deserialize(file)
		if err != nil {
			t.Fatalf("accepted, but the library rejects it: %v", err)
		}
		if lib.Len() != len(h.tensors) {
			t.Fatalf("library sees %d tensors, check %d", lib.Len(), len(h.tensors))
		}
		for _, info := range h.tensors {
			v, ok := lib.Tensor(info.Name)
			if !ok {
				t.Fatalf("%q: missing in the library", info.Name)
			}
			if v.DType().String() != string(info.DType) || len(v.Shape()) != len(info.Shape) || v.DataLen() != uint64(info.Size) {
				t.Fatalf("%q: library %v %v %d, check %+v", info.Name, v.DType(), v.Shape(), v.DataLen(), info)
			}
			for i, d := range v.Shape() {
				if uint64(info.Shape[i]) != d {
					t.Fatalf("%q: shape %v vs %v", info.Name, v.Shape(), info.Shape)
				}
			}
			if info.Size > 0 {
				off := uintptr(unsafe.Pointer(&v.Data()[0])) - uintptr(unsafe.Pointer(&file[0]))
				if int64(off) != info.Offset {
					t.Fatalf("%q: library data at %d, check says %d", info.Name, off, info.Offset)
				}
			}
			if info.Offset < h.dataStart || info.Offset+info.Size > int64(len(file)) {
				t.Fatalf("%q: out of the file: %+v", info.Name, info)
			}
		}
	})
}
