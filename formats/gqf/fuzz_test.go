package gqf

import (
	"encoding/binary"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the reader: it must return an error or a file whose
// every tensor decodes and whose report renders, never panic. Run it by hand:
//
//	go test ./formats/gqf -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 2s
func FuzzParse(f *testing.F) {
	good, _ := sample(f)
	f.Add(good)
	f.Add(good[:16])
	f.Add([]byte("GQF\x00\x01\x00\x00\x00"))
	bad := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(bad[8:], 1<<62)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.gqf", data)
		if err != nil {
			return
		}
		for _, tn := range file.Manifest.Tensors {
			if tn.Encoding.Dtype == DataType_INT64 || tn.Encoding.Dtype == DataType_INT32 {
				continue
			}
			if _, err := file.Decode(tn); err != nil {
				continue
			}
			file.Codes(tn)
			file.Scales(tn)
			file.Zeros(tn)
		}
		_ = file.Report().String()
		if g := file.Manifest.Graph; g != nil {
			for _, a := range g.Activations {
				if a.Encoding != nil {
					QDQ(a.Encoding, []float32{0, 1, -1})
				}
			}
		}
	})
}
