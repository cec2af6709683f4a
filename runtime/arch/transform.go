package arch

import "math"

// SourceRow maps a row of the transformed (GGUF-layout) tensor to the row of the source (HF)
// tensor it comes from. For 1-D tensors (biases) rows are elements. Applying a transform row by
// row lets the converter stream row blocks of big tensors.
//
// The permutation is the one of transformers' convert_llama_weights_to_hf, undone as
// llama.cpp's convert_hf_to_gguf.py does: within each head of hd rows, GGUF row 2j+p comes from
// HF row p·hd/2 + j.
func SourceRow(tr Transform, s *Spec, row int) int {
	if tr == NoTransform {
		return row
	}
	hd := s.HeadDim
	h, r := row/hd, row%hd
	j, p := r/2, r%2
	return h*hd + p*(hd/2) + j
}

// DestRow is the inverse of SourceRow: the GGUF row that HF row lands on.
func DestRow(tr Transform, s *Spec, row int) int {
	if tr == NoTransform {
		return row
	}
	hd := s.HeadDim
	h, r := row/hd, row%hd
	p, j := r/(hd/2), r%(hd/2)
	return h*hd + 2*j + p
}

// RopeFreqFactors computes llama.cpp's rope_freqs tensor for llama3 rope scaling, as
// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors does (in float32).
func RopeFreqFactors(s *Spec) []float32 {
	sc := s.RopeScaling
	if sc == nil || sc.Type != "llama3" {
		return nil
	}
	dim := s.HeadDim
	base := float32(s.RopeTheta)
	lowWave := float32(float64(sc.OriginalContext) / sc.LowFreqFactor)
	highWave := float32(float64(sc.OriginalContext) / sc.HighFreqFactor)
	out := make([]float32, 0, dim/2)
	for i := 0; i < dim; i += 2 {
		freq := 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(dim))))
		wavelen := float32(2*math.Pi) / freq
		switch {
		case wavelen < highWave:
			out = append(out, 1)
		case wavelen > lowWave:
			out = append(out, float32(sc.Factor))
		default:
			smooth := (float32(sc.OriginalContext)/wavelen - float32(sc.LowFreqFactor)) /
				float32(sc.HighFreqFactor-sc.LowFreqFactor)
			out = append(out, 1/((1-smooth)/float32(sc.Factor)+smooth))
		}
	}
	return out
}
