package gguf

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// The malformed-input catalogue is built with this small encoder, written independently of
// the package's writer so that the writer's bugs cannot hide the reader's.

// rb appends little-endian fields.
type rb []byte

func (b rb) u32(v uint32) rb { return binary.LittleEndian.AppendUint32(b, v) }
func (b rb) u64(v uint64) rb { return binary.LittleEndian.AppendUint64(b, v) }
func (b rb) str(s string) rb { return append(b.u64(uint64(len(s))), s...) }

// kvU32 is an encoded UINT32 entry.
func kvU32(key string, v uint32) rb { return rb{}.str(key).u32(4).u32(v) }

// kvStr is an encoded STRING entry.
func kvStr(key, v string) rb { return rb{}.str(key).u32(8).str(v) }

// kvRaw is an entry with the given type id and encoded value.
func kvRaw(key string, typ uint32, value rb) rb { return append(rb{}.str(key).u32(typ), value...) }

// rt is one tensor info.
type rt struct {
	name string
	dims []uint64
	typ  uint32
	off  uint64
}

// rf is a whole file; zero fields take valid defaults.
type rf struct {
	magic      string
	version    uint32
	nTensors   *uint64 // override of len(tensors)
	nKV        *uint64 // override of len(kvs)
	kvs        []rb
	tensors    []rt
	dataLen    int  // bytes of data after the padding
	noPadding  bool // stop right after the tensor infos
	truncateAt int  // cut the file to this length when > 0
}

func u64p(v uint64) *uint64 { return &v }

func (f rf) bytes() []byte {
	if f.magic == "" {
		f.magic = "GGUF"
	}
	if f.version == 0 {
		f.version = 3
	}
	b := append(rb{}, f.magic...).u32(f.version)
	nt, nk := uint64(len(f.tensors)), uint64(len(f.kvs))
	if f.nTensors != nil {
		nt = *f.nTensors
	}
	if f.nKV != nil {
		nk = *f.nKV
	}
	b = b.u64(nt).u64(nk)
	for _, kv := range f.kvs {
		b = append(b, kv...)
	}
	for _, t := range f.tensors {
		b = b.str(t.name).u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			b = b.u64(d)
		}
		b = b.u32(t.typ).u64(t.off)
	}
	if !f.noPadding {
		for len(b)%32 != 0 {
			b = append(b, 0)
		}
		b = append(b, make([]byte, f.dataLen)...)
	}
	if f.truncateAt > 0 {
		b = b[:f.truncateAt]
	}
	return b
}

// f32t is a valid F32 tensor of n elements at off.
func f32t(name string, n, off uint64) rt { return rt{name, []uint64{n}, 0, off} }

// malformed lists bad files and a fragment of the error each must give, after "bad.gguf: ".
var malformed = []struct {
	name string
	file rf
	want string
}{
	{"bad magic", rf{magic: "GGUX"}, `header: bad magic "GGUX", want "GGUF"`},
	{"truncated magic", rf{truncateAt: 3}, "header: truncated: magic at offset 0 needs 4 bytes, 3 left"},
	{"truncated header", rf{truncateAt: 10}, "header: truncated: tensor count at offset 8 needs 8 bytes, 2 left"},
	{"version 1", rf{version: 1}, "header: GGUF version 1 is no longer supported"},
	{"version 4", rf{version: 4}, "header: GGUF version 4 is newer than the supported 3"},
	{"big endian", rf{version: 0x03000000}, "header: version 0x3000000: big-endian file"},
	{"lying tensor count", rf{nTensors: u64p(1 << 40)}, "header: tensor count 1099511627776 is impossible in a file of 32 bytes"},
	{"negative tensor count", rf{nTensors: u64p(1<<64 - 1)}, "header: tensor count -1 is impossible"},
	{"lying metadata count", rf{nKV: u64p(1 << 60), kvs: []rb{kvU32("a", 1)}}, "header: metadata count 1152921504606846976 is impossible"},
	{"truncated metadata", rf{kvs: []rb{kvU32("a", 1), kvU32("b", 2)}, noPadding: true, truncateAt: 56},
		"b: truncated: UINT32 value at offset 54 needs 4 bytes, 2 left"},
	{"key length past end", rf{kvs: []rb{rb{}.u64(1 << 40).u32(0).u32(0)}, noPadding: true}, "key #0: key length 1099511627776 at offset 24 exceeds the 8 bytes left"},
	{"string length past end", rf{kvs: []rb{kvRaw("s", 8, rb{}.u64(100).str("x"))}, noPadding: true}, "s: string length 100 at offset 37 exceeds the 9 bytes left"},
	{"empty key", rf{kvs: []rb{kvU32("", 1)}}, "key #0: empty key"},
	{"duplicate key", rf{kvs: []rb{kvU32("a.b", 1), kvStr("a.b", "x")}}, "a.b: duplicate key (entries #0 and #1)"},
	{"unknown value type", rf{kvs: []rb{kvRaw("k", 13, rb{}.u32(0))}}, "k: unknown value type 13"},
	{"unknown element type", rf{kvs: []rb{kvRaw("k", 9, rb{}.u32(77).u64(0))}}, "k: array has unknown element type 77"},
	{"lying array count", rf{kvs: []rb{kvRaw("k", 9, rb{}.u32(10).u64(1<<29).u64(1))}, noPadding: true}, "k: array of 536870912 UINT64 elements at offset 49 does not fit in the 8 bytes left"},
	{"lying string array count", rf{kvs: []rb{kvRaw("k", 9, rb{}.u32(8).u64(1<<20).str("x"))}}, "k: array of 1048576 STRING elements"},
	{"array over llama.cpp limit", rf{kvs: []rb{kvRaw("k", 9, rb{}.u32(0).u64(1<<31))}}, "k: array of 2147483648 elements exceeds the limit of 1073741824"},
	{"nested too deep", rf{kvs: []rb{kvRaw("k", 9, func() rb {
		b := rb{}
		for range 9 {
			b = b.u32(9).u64(1)
		}
		return b.u32(0).u64(0)
	}())}}, "k: element 0: element 0: element 0: element 0: element 0: element 0: element 0: arrays nested deeper than 8 levels"},
	{"alignment type", rf{kvs: []rb{kvRaw(KeyAlignment, 5, rb{}.u32(32))}}, "general.alignment: has type INT32, want UINT32"},
	{"alignment not power of two", rf{kvs: []rb{kvU32(KeyAlignment, 48)}}, "general.alignment: alignment 48 is not a power of two"},
	{"alignment zero", rf{kvs: []rb{kvU32(KeyAlignment, 0)}}, "general.alignment: alignment 0 is not a power of two"},
	{"tensor name too long", rf{tensors: []rt{f32t(strings.Repeat("n", 64), 1, 0)}, dataLen: 4}, "tensor #0: name of 64 bytes is longer than 63"},
	{"duplicate tensor", rf{tensors: []rt{f32t("w", 1, 0), f32t("w", 1, 32)}, dataLen: 36}, "w: duplicate tensor name (tensors #0 and #1)"},
	{"too many dims", rf{tensors: []rt{{"w", []uint64{1, 1, 1, 1, 1}, 0, 0}}, dataLen: 4}, "w: 5 dimensions, at most 4 allowed"},
	{"negative dim", rf{tensors: []rt{{"w", []uint64{1, 1<<64 - 2}, 0, 0}}, dataLen: 4}, "w: dimension 1 is negative (-2)"},
	{"unknown tensor type", rf{tensors: []rt{{"w", []uint64{1}, 99, 0}}, dataLen: 4}, "w: unknown tensor type 99"},
	{"row not whole blocks", rf{tensors: []rt{{"w", []uint64{100}, uint32(Q4_K), 0}}, dataLen: 144}, "w: row length 100 is not a multiple of the Q4_K block size 256"},
	{"element count overflow", rf{tensors: []rt{{"w", []uint64{1 << 32, 1 << 32}, 0, 0}}}, "w: shape [4294967296 4294967296] has more than 2^63-1 elements"},
	{"truncated tensor info", rf{tensors: []rt{f32t("weight", 1, 0)}, noPadding: true, truncateAt: 52},
		"weight: truncated: type at offset 50 needs 4 bytes, 2 left"},
	{"first offset not zero", rf{tensors: []rt{f32t("w", 1, 32)}, dataLen: 64}, "w: data offset 32, want 0 (the padded end of the previous tensor)"},
	{"offset not padded", rf{tensors: []rt{f32t("a", 1, 0), f32t("b", 1, 4)}, dataLen: 64}, "b: data offset 4, want 32"},
	{"overlapping offset", rf{tensors: []rt{f32t("a", 16, 0), f32t("b", 1, 32)}, dataLen: 128}, "b: data offset 32, want 64"},
	{"data past end", rf{tensors: []rt{f32t("a", 1, 0), f32t("b", 16, 32)}, dataLen: 40}, "b: 64 bytes of data at offset 128 lie past the end of the file (136 bytes)"},
	{"data section past end", rf{tensors: []rt{f32t("w", 0, 0)}, noPadding: true}, "header: data section at offset 64 starts past the end of the file (57 bytes)"},
}

// TestMalformed checks that each malformed file gives its one-line error naming the file and
// the key or tensor, without panicking.
func TestMalformed(t *testing.T) {
	for _, c := range malformed {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.file.bytes(), "bad.gguf")
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad.gguf: ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q\nwant one line \"bad.gguf: ...%s...\"", msg, c.want)
			}
		})
	}
}

// TestMinimalValid checks that the catalogue's builder makes valid files when left alone, so
// that each malformed case fails for its own reason.
func TestMinimalValid(t *testing.T) {
	for _, f := range []rf{
		{},
		{version: 2, kvs: []rb{kvU32("a", 1), kvStr("b", "")}},
		{tensors: []rt{f32t("a", 1, 0), f32t("b", 16, 32)}, dataLen: 96},
		{kvs: []rb{kvU32(KeyAlignment, 1)}, tensors: []rt{f32t("a", 1, 0), f32t("b", 1, 4)}, dataLen: 8},
		{tensors: []rt{f32t("empty", 0, 0)}, noPadding: false},
	} {
		if _, err := Parse(f.bytes(), "ok.gguf"); err != nil {
			t.Errorf("%+v: %v", f, err)
		}
	}
}

// TestOpenErrors checks errors from Open itself.
func TestOpenErrors(t *testing.T) {
	if _, err := Open("testdata/does-not-exist.gguf"); err == nil || !strings.Contains(err.Error(), "does-not-exist.gguf") {
		t.Errorf("missing file: %v", err)
	}
	dir := t.TempDir()
	if _, err := Open(dir); err == nil {
		t.Error("opening a directory succeeded")
	}
	empty := dir + "/empty.gguf"
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); err == nil || err.Error() != empty+": header: file is empty" {
		t.Errorf("empty file: %v", err)
	}
}

func TestElementCount(t *testing.T) {
	for _, c := range []struct {
		shape []uint64
		want  uint64
	}{{nil, 1}, {[]uint64{7}, 7}, {[]uint64{4096, 32000}, 131072000}, {[]uint64{2, 0, 3}, 0}} {
		if got := ElementCount(c.shape); got != c.want {
			t.Errorf("ElementCount(%v) = %d, want %d", c.shape, got, c.want)
		}
	}
}
