package safetensors

// DType is a safetensors element type, spelled as in the file header. gquant reads BF16, F16
// and F32 checkpoints; every other dtype is reported as unsupported by the header check.
type DType string

// The dtypes gquant reads.
const (
	BF16 DType = "BF16"
	F16  DType = "F16"
	F32  DType = "F32"
)

// Size returns the bytes per element of a supported dtype, or 0 for any other.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	}
	return 0
}

// Supported reports whether gquant reads this dtype.
func (d DType) Supported() bool { return d.Size() != 0 }

// knownSizes gives the element size in bytes of every dtype the safetensors format defines,
// including those gquant refuses, so that a refused tensor's offsets can still be checked.
// Sub-byte types (F4, F6_*) have no whole-byte size and map to 0.
var knownSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8, "C64": 8,
	"F4": 0, "F6_E2M3": 0, "F6_E3M2": 0,
}
