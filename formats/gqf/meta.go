package gqf

import "fmt"

// MetaEntryOf converts a GGUF-style metadata value (string, uint32, int32, float32, bool,
// uint64, int64, float64, []string, []float32, []int32) to a manifest entry.
func MetaEntryOf(key string, v any) (*MetaEntry, error) {
	e := &MetaEntry{Key: key}
	switch x := v.(type) {
	case string:
		e.Value = &MetaEntry_Str{Str: x}
	case uint32:
		e.Value = &MetaEntry_U32{U32: x}
	case int32:
		e.Value = &MetaEntry_I32{I32: x}
	case float32:
		e.Value = &MetaEntry_F32{F32: x}
	case bool:
		e.Value = &MetaEntry_B{B: x}
	case uint64:
		e.Value = &MetaEntry_U64{U64: x}
	case int64:
		e.Value = &MetaEntry_I64{I64: x}
	case float64:
		e.Value = &MetaEntry_F64{F64: x}
	case []string:
		e.Value = &MetaEntry_Strs{Strs: &StringList{Values: x}}
	case []float32:
		e.Value = &MetaEntry_F32S{F32S: &FloatList{Values: x}}
	case []int32:
		e.Value = &MetaEntry_I32S{I32S: &Int32List{Values: x}}
	default:
		return nil, fmt.Errorf("%s: metadata value of type %T is not supported", key, v)
	}
	return e, nil
}

// GoValue returns the entry's value as the Go type MetaEntryOf accepts (nil when unset).
func (e *MetaEntry) GoValue() any {
	switch x := e.Value.(type) {
	case *MetaEntry_Str:
		return x.Str
	case *MetaEntry_U32:
		return x.U32
	case *MetaEntry_I32:
		return x.I32
	case *MetaEntry_F32:
		return x.F32
	case *MetaEntry_B:
		return x.B
	case *MetaEntry_U64:
		return x.U64
	case *MetaEntry_I64:
		return x.I64
	case *MetaEntry_F64:
		return x.F64
	case *MetaEntry_Strs:
		return x.Strs.GetValues()
	case *MetaEntry_F32S:
		return x.F32S.GetValues()
	case *MetaEntry_I32S:
		return x.I32S.GetValues()
	}
	return nil
}

// Getter returns a lookup over the tokenizer metadata, in the form
// formats/tokenizer.FromGGUF takes.
func (t *Tokenizer) Getter() func(key string) (any, bool) {
	m := map[string]any{}
	for _, e := range t.GetMetadata() {
		if v := e.GoValue(); v != nil {
			m[e.Key] = v
		}
	}
	return func(key string) (any, bool) {
		v, ok := m[key]
		return v, ok
	}
}
