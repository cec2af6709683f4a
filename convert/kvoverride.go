package convert

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gquant/gquant/formats/gguf"
	"github.com/gquant/gquant/formats/stats"
)

// KVOverride sets one metadata key of the output, as llama-quantize --override-kv does:
// KEY=int:N (written as uint32 |N|, as llama-quantize writes it), KEY=float:X (float32),
// KEY=bool:true|false or KEY=str:S (at most 127 bytes).
type KVOverride struct {
	Key   string
	Value any
}

// ParseKVOverride parses KEY=TYPE:VALUE.
func ParseKVOverride(s string) (KVOverride, error) {
	key, val, ok := strings.Cut(s, "=")
	if !ok || key == "" || len(key) >= 128 {
		return KVOverride{}, fmt.Errorf("%q: want KEY=TYPE:VALUE with a key of 1 to 127 bytes", s)
	}
	typ, v, ok := strings.Cut(val, ":")
	if !ok {
		return KVOverride{}, fmt.Errorf("%q: want KEY=TYPE:VALUE (TYPE int, float, bool or str)", s)
	}
	o := KVOverride{Key: key}
	switch typ {
	case "int":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -math.MaxUint32 || n > math.MaxUint32 {
			return o, fmt.Errorf("%q: %q is not an integer of at most 32 bits", s, v)
		}
		if n < 0 {
			n = -n
		}
		o.Value = uint32(n)
	case "float":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return o, fmt.Errorf("%q: %q is not a number", s, v)
		}
		o.Value = float32(x)
	case "bool":
		switch v {
		case "true":
			o.Value = true
		case "false":
			o.Value = false
		default:
			return o, fmt.Errorf("%q: %q is not true or false", s, v)
		}
	case "str":
		if len(v) > 127 {
			return o, fmt.Errorf("%q: the value exceeds 127 bytes", s)
		}
		o.Value = v
	default:
		return o, fmt.Errorf("%q: type %q is not int, float, bool or str", s, typ)
	}
	return o, nil
}

// setKV sets key to v in place, or appends it (gguf_set_val's order).
func setKV(kvs []gguf.KV, key string, v any) []gguf.KV {
	for i := range kvs {
		if kvs[i].Key == key {
			kvs[i].Value = v
			return kvs
		}
	}
	return append(kvs, gguf.KV{Key: key, Value: v})
}

// applyOverrides sets the user's overrides, then the keys llama-quantize records for an
// importance matrix (st from path; nil: none): quantize.imatrix.file (the path as given),
// .dataset (the first), .entries_count and, when known, .chunks_count, in that order.
func applyOverrides(kvs []gguf.KV, overrides []KVOverride, path string, st *stats.Stats) []gguf.KV {
	for _, o := range overrides {
		kvs = setKV(kvs, o.Key, o.Value)
	}
	if st == nil {
		return kvs
	}
	kvs = setKV(kvs, "quantize.imatrix.file", truncate127(path))
	if st.Meta.CorpusName != "" {
		kvs = setKV(kvs, "quantize.imatrix.dataset", truncate127(strings.Split(st.Meta.CorpusName, ",")[0]))
	}
	kvs = setKV(kvs, "quantize.imatrix.entries_count", uint32(len(st.Linear)))
	if st.Meta.Chunks > 0 {
		kvs = setKV(kvs, "quantize.imatrix.chunks_count", uint32(st.Meta.Chunks))
	}
	return kvs
}

// truncate127 is llama-quantize's strncpy into a 128-byte field.
func truncate127(s string) string {
	if len(s) > 127 {
		return s[:127]
	}
	return s
}
