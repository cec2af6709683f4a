package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// maxHeaderLen is the largest JSON header accepted, the same limit as the safetensors
// reference implementation and the nlpodyssey library.
const maxHeaderLen = 100_000_000

// header is the checked header of one safetensors file.
type header struct {
	dataStart int64             // 8 + header length: where the data section starts
	tensors   []TensorInfo      // sorted by name; Offset is absolute in the file
	metadata  map[string]string // the optional __metadata__ object
}

// pastEndMark in span.start flags a tensor whose data runs past the end of the file.
const pastEndMark = math.MaxUint64

// span is a tensor's [start, end) range inside the data section, for the overlap check.
type span struct {
	name       string
	start, end uint64
}

// checkHeader validates the header of a whole safetensors file held in buf (usually the
// mapping), recording every problem in ps under the name path. It checks more than the
// nlpodyssey library does, and everything that library checks, so that a file that passes is
// always accepted by it. It returns nil when the file cannot be used.
func checkHeader(path string, buf []byte, ps *problemList) *header {
	before := len(ps.list)
	size := uint64(len(buf))
	if size < 8 {
		ps.add(path, "", "file is %d bytes, too short for the 8-byte header length", size)
		return nil
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > size-8 {
		ps.add(path, "", "header length %d runs past the end of the file (%d bytes): truncated or not a safetensors file", n, size)
		return nil
	}
	if n > maxHeaderLen {
		ps.add(path, "", "header length %d exceeds the limit of %d bytes", n, maxHeaderLen)
		return nil
	}
	js := buf[8 : 8+n]
	if err := jsonError(js); err != nil {
		ps.add(path, "header", "not valid JSON: %v", err)
		return nil
	}
	members, err := objectMembers(js)
	if err != nil {
		ps.add(path, "header", "%v", err)
		return nil
	}

	h := &header{dataStart: int64(8 + n)}
	dataLen := size - 8 - n
	seen := make(map[string]bool, len(members))
	var spans []span
	pastEnd := false
	for _, m := range members {
		if seen[m.Key] {
			ps.add(path, m.Key, "appears twice in the header")
			continue
		}
		seen[m.Key] = true
		if m.Key == "__metadata__" {
			h.metadata = checkMetadata(path, m.Value, ps)
			continue
		}
		if m.Key == "" {
			ps.add(path, "", "a tensor has an empty name")
			continue
		}
		info, sp, ok := checkEntry(path, m.Key, m.Value, dataLen, ps)
		if sp.end >= sp.start {
			spans = append(spans, sp) // in range: take part in the overlap check
		} else if sp.start == pastEndMark {
			pastEnd = true
		}
		if ok {
			info.Offset += h.dataStart
			h.tensors = append(h.tensors, info)
		}
	}
	checkLayout(path, spans, dataLen, pastEnd, ps)
	if len(ps.list) > before {
		return nil
	}
	slices.SortFunc(h.tensors, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) })
	return h
}

// checkMetadata validates the __metadata__ object: null or an object of strings.
func checkMetadata(path string, raw json.RawMessage, ps *problemList) map[string]string {
	if jsonKind(raw) == "null" {
		return nil
	}
	members, err := objectMembers(raw)
	if err != nil {
		ps.add(path, "__metadata__", "%v", err)
		return nil
	}
	meta := make(map[string]string, len(members))
	for _, m := range members {
		s, ok := rawString(m.Value)
		if !ok {
			ps.add(path, "__metadata__", "value of %q is %s, want a string", m.Key, jsonKind(m.Value))
			continue
		}
		meta[m.Key] = s
	}
	return meta
}

// checkEntry validates one tensor entry. The returned span is meaningful only when the
// data_offsets parsed (end >= start); ok is true when the tensor has no problem at all.
func checkEntry(path, name string, raw json.RawMessage, dataLen uint64, ps *problemList) (TensorInfo, span, bool) {
	bad := func(format string, args ...any) { ps.add(path, name, format, args...) }
	info := TensorInfo{Name: name, File: path}
	sp := span{name: name, start: 1, end: 0} // an invalid span until data_offsets parse

	members, err := objectMembers(raw)
	if err != nil {
		bad("entry %v", err)
		return info, sp, false
	}
	fields := make(map[string]json.RawMessage, 3)
	ok := true
	for _, m := range members {
		switch m.Key {
		case "dtype", "shape", "data_offsets":
			fields[m.Key] = m.Value
		default:
			bad("unexpected key %q in the entry", m.Key)
			ok = false
		}
	}
	for _, k := range []string{"dtype", "shape", "data_offsets"} {
		if _, found := fields[k]; !found {
			bad("entry has no %q", k)
			ok = false
		}
	}

	// dtype
	elemSize := 0
	if raw, found := fields["dtype"]; found {
		s, isStr := rawString(raw)
		size, known := knownSizes[s]
		switch {
		case !isStr:
			bad("dtype is %s, want a string", jsonKind(raw))
			ok = false
		case DType(s).Supported():
			info.DType = DType(s)
			elemSize = size
		case known:
			bad("unsupported dtype %s (gquant reads BF16, F16 and F32)", s)
			elemSize, ok = size, false
		default:
			bad("unknown dtype %q", s)
			ok = false
		}
	}

	// shape: natural numbers whose product, in bytes, fits in an int64
	elems, shapeOK := uint64(1), false
	if raw, found := fields["shape"]; found {
		dims, isArr := rawArray(raw)
		shapeOK = isArr
		if !isArr {
			bad("shape is %s, want an array", jsonKind(raw))
		}
		info.Shape = make([]int, 0, len(dims))
		for _, d := range dims {
			v, isNat := rawNatural(d)
			if !isNat {
				bad("shape %s: %s is not a natural number", short(raw), short(d))
				shapeOK = false
				break
			}
			hi, lo := bits.Mul64(elems, v)
			if hi != 0 || lo > math.MaxInt64 || v > math.MaxInt64 {
				bad("shape %s is too large", short(raw))
				shapeOK = false
				break
			}
			elems = lo
			info.Shape = append(info.Shape, int(v))
		}
		ok = ok && shapeOK
	}

	// data_offsets: [start, end] inside the data section
	if raw, found := fields["data_offsets"]; found {
		offs, isArr := rawArray(raw)
		var start, end uint64
		var sOK, eOK bool
		if isArr && len(offs) == 2 {
			start, sOK = rawNatural(offs[0])
			end, eOK = rawNatural(offs[1])
		}
		switch {
		case !sOK || !eOK:
			bad("data_offsets %s is not a pair of natural numbers", short(raw))
			ok = false
		case end < start:
			bad("data_offsets [%d, %d] end before they start", start, end)
			ok = false
		case end > dataLen:
			bad("data_offsets [%d, %d] run past the end of the data section (%d bytes): file truncated?", start, end, dataLen)
			sp.start, ok = pastEndMark, false
		default:
			sp.start, sp.end = start, end
			info.Offset, info.Size = int64(start), int64(end-start)
		}
		if shapeOK && elemSize > 0 && sOK && eOK && end >= start {
			hi, want := bits.Mul64(elems, uint64(elemSize))
			if hi != 0 || want != end-start {
				bad("shape %s of %s needs %s bytes but data_offsets [%d, %d] hold %d", short(fields["shape"]), jsonString(fields["dtype"]), mulString(elems, uint64(elemSize)), start, end, end-start)
				ok = false
			}
		}
	}
	return info, sp, ok
}

// checkLayout checks that the tensors tile the data section: sorted by offset, each starts
// where the previous one ended (no overlap, no gap), and the last one ends at the end of the
// file. The reference implementation requires exactly this layout.
func checkLayout(path string, spans []span, dataLen uint64, pastEnd bool, ps *problemList) {
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return cmpU64(a.start, b.start)
		}
		if a.end != b.end {
			return cmpU64(a.end, b.end)
		}
		return strings.Compare(a.name, b.name)
	})
	var cursor uint64
	var prev span
	for _, s := range spans {
		switch {
		case s.start < cursor:
			ps.add(path, s.name, "data_offsets [%d, %d] overlap those of %s [%d, %d]", s.start, s.end, quoteName(prev.name), prev.start, prev.end)
		case s.start > cursor:
			ps.add(path, s.name, "data_offsets [%d, %d] leave a gap of %d unused bytes before the tensor", s.start, s.end, s.start-cursor)
		}
		if s.end > cursor || prev.name == "" {
			cursor, prev = max(cursor, s.end), s
		}
	}
	if cursor < dataLen && !pastEnd {
		ps.add(path, "", "%d unused bytes after the last tensor's data", dataLen-cursor)
	}
}

func cmpU64(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// short renders raw JSON on one line, cut to a readable length, for error messages.
func short(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// jsonString returns the string in a raw JSON string, or the raw text.
func jsonString(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	return string(raw)
}

// mulString prints a*b, or "more than 2^64" when it overflows.
func mulString(a, b uint64) string {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return "more than 2^64"
	}
	return fmt.Sprint(lo)
}
