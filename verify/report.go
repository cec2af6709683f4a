package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/gquant/gquant/internal/atomicfile"
)

// Schema is the version tag of the JSON report.
const Schema = "gquant.verify/v1"

// Decibels is a level in dB. It is +Inf when the test reproduces the reference exactly; JSON has
// no infinity, so non-finite values are written as null (the section's "identical" flag says why).
type Decibels float64

// MarshalJSON writes finite values as numbers and ±Inf or NaN as null.
func (d Decibels) MarshalJSON() ([]byte, error) {
	f := float64(d)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads null as NaN (the section's flags tell +Inf from unavailable).
func (d *Decibels) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*d = Decibels(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*d = Decibels(f)
	return nil
}

// String prints the level with two decimals, "inf" for +Inf and "n/a" for NaN.
func (d Decibels) String() string {
	f := float64(d)
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "n/a"
	}
	return fmt.Sprintf("%.2f", f)
}

// LogitsSNR compares the test's logits with the reference's over every scored position.
type LogitsSNR struct {
	// SNR is the energy signal-to-noise ratio, 10·log10(Σ ref² / Σ (ref − test)²).
	SNR Decibels `json:"snr_db"`
	// PSNR is the peak SNR, 20·log10(max |ref| / RMS(ref − test)).
	PSNR Decibels `json:"psnr_db"`
	// Identical: the logits are equal, SNR and PSNR are +Inf (null in JSON).
	Identical bool `json:"identical"`
	// Note says why SNR is missing, when it is.
	Note string `json:"note,omitempty"`
}

func newLogitsSNR(snr, psnr float64, note string) LogitsSNR {
	return LogitsSNR{SNR: Decibels(snr), PSNR: Decibels(psnr), Identical: math.IsInf(snr, 1), Note: note}
}

// Available reports whether an SNR was measured (finite or +Inf).
func (l LogitsSNR) Available() bool { return !math.IsNaN(float64(l.SNR)) }

// LayerSNR is the energy SNR of the hidden state after block Index.
type LayerSNR struct {
	Index     int      `json:"index"`
	SNR       Decibels `json:"snr_db"`
	Identical bool     `json:"identical"`
}

func newLayerSNR(i int, snr float64) LayerSNR {
	return LayerSNR{Index: i, SNR: Decibels(snr), Identical: math.IsInf(snr, 1)}
}

// KLStats summarises KL(ref‖test) per scored position, in nats.
type KLStats struct {
	Mean    float64 `json:"mean"`
	MeanErr float64 `json:"mean_err"`
	Median  float64 `json:"median"`
	P90     float64 `json:"p90"`
	P99     float64 `json:"p99"`
	P999    float64 `json:"p999"`
	Max     float64 `json:"max"`
	Min     float64 `json:"min"`
}

// DeltaP summarises Δp = p_test(next) − p_ref(next) (fractions, not percent).
type DeltaP struct {
	Mean    float64 `json:"mean"`
	MeanErr float64 `json:"mean_err"`
	RMS     float64 `json:"rms"`
}

// PPL holds the perplexities over the scored positions and their ratio test/ref.
type PPL struct {
	Ref   float64 `json:"ref"`
	Test  float64 `json:"test"`
	Ratio float64 `json:"ratio"`
}

// Metrics are the corpus metrics of one comparison.
type Metrics struct {
	TokensScored int        `json:"tokens_scored"`
	Logits       LogitsSNR  `json:"logits"`
	Layers       []LayerSNR `json:"layers"`
	KL           KLStats    `json:"kl"`
	Top1         float64    `json:"top1"` // fraction of positions with the same argmax
	Top1Err      float64    `json:"top1_err"`
	DeltaP       DeltaP     `json:"delta_p"`
	PPL          PPL        `json:"ppl"`
}

// Greedy compares greedy continuations of the prompts.
type Greedy struct {
	Prompts int `json:"prompts"`
	Exact   int `json:"exact"` // continuations reproduced token for token
	Gen     int `json:"gen"`   // tokens generated per prompt (fewer when the reference stops at EOS)
	// FirstDivergence is, per prompt, the index of the first generated token that differs, or null
	// for an exact reproduction.
	FirstDivergence []*int `json:"first_divergence"`
	// RefLength is, per prompt, the length of the reference's continuation.
	RefLength []int `json:"ref_length"`
}

// Artifact describes the model under test.
type Artifact struct {
	Path      string  `json:"path"`
	BPW       float64 `json:"bpw"`        // bits per weight over all tensors
	BPWLinear float64 `json:"bpw_linear"` // over the linear layers' weights only
	// ActivationEncodings, for a gqf file with static activation encodings, counts those the
	// runtime applied (simulating the NPU's activation quantization) and those the file has:
	// the runtime refuses a file with encodings it cannot place, so the two are equal.
	ActivationEncodings *EncodingCount `json:"activation_encodings,omitempty"`
}

// EncodingCount counts a gqf file's activation encodings.
type EncodingCount struct {
	Simulated int `json:"simulated"`
	InFile    int `json:"in_file"`
}

// Reference says what the test was compared with.
type Reference struct {
	Path      string  `json:"path,omitempty"`       // the reference model
	Logits    string  `json:"logits,omitempty"`     // the stored log-probabilities file, when used
	BPW       float64 `json:"bpw,omitempty"`        // when the model was loaded
	BPWLinear float64 `json:"bpw_linear,omitempty"` // when the model was loaded
}

// Protocol records the windows.
type Protocol struct {
	Ctx    int    `json:"ctx"`
	Chunks int    `json:"chunks"`
	First  int    `json:"first_scored"`
	BOS    int    `json:"bos"` // −1: no BOS substitution
	KL     string `json:"kl"`  // "exact" (float64, live reference) or "llama.cpp" (stored uint16 rows)
}

// Threshold is one limit and whether the measurement met it.
type Threshold struct {
	Limit  float64  `json:"limit"`
	Value  Decibels `json:"value"` // the measured value (in its own unit; null for +Inf)
	Passed bool     `json:"passed"`
}

// Report is the versioned result of gquant verify.
type Report struct {
	Schema        string            `json:"schema"`
	Command       string            `json:"command"`
	GquantVersion string            `json:"gquant_version"`
	Inputs        map[string]string `json:"inputs"` // path → sha256
	Artifact      Artifact          `json:"artifact"`
	Reference     Reference         `json:"reference"`
	Protocol      Protocol          `json:"protocol"`
	Metrics
	Greedy     *Greedy              `json:"greedy"`
	Thresholds map[string]Threshold `json:"thresholds"`
	Passed     bool                 `json:"passed"`
	Notes      []string             `json:"notes,omitempty"` // what was skipped, and why

	klValues []float64 // per-position KL, for the plot
}

// Limits are the pass/fail thresholds; nil fields are not checked.
type Limits struct {
	MinSNR  *float64 // logits SNR in dB, at least
	MaxKL   *float64 // mean KL, at most
	MinTop1 *float64 // same-top-1 fraction, at least
}

// Apply records the thresholds in the report, sets Passed and returns one message per failure.
func (r *Report) Apply(l Limits) []string {
	r.Thresholds = map[string]Threshold{}
	var fails []string
	check := func(key, flag string, limit *float64, value float64, ok bool, unit string) {
		if limit == nil {
			return
		}
		r.Thresholds[key] = Threshold{Limit: *limit, Value: Decibels(value), Passed: ok}
		if !ok {
			shown, lim := value, *limit
			if unit == " %" { // the flag and the text report give the top-1 rate in percent
				shown, lim = 100*value, 100*lim
			}
			fails = append(fails, fmt.Sprintf("%s %s%s fails %s %g%s", key, fmtValue(shown), unit, flag, lim, unit))
		}
	}
	snr := float64(r.Logits.SNR)
	check("min_snr_db", "--min-snr", l.MinSNR, snr, !math.IsNaN(snr) && l.MinSNR != nil && snr >= *l.MinSNR, " dB")
	check("max_kl", "--max-kl", l.MaxKL, r.KL.Mean, l.MaxKL != nil && r.KL.Mean <= *l.MaxKL, "")
	check("min_top1", "--min-top1", l.MinTop1, r.Top1, l.MinTop1 != nil && r.Top1 >= *l.MinTop1, " %")
	r.Passed = len(fails) == 0
	return fails
}

func fmtValue(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return Decibels(v).String()
	}
	return fmt.Sprintf("%.6g", v)
}

// WriteJSON writes the report, indented, to path through a temporary file.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'))
}

// ReadReport parses a JSON report, turning the null SNRs of identical sections back into +Inf.
func ReadReport(b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("schema: %q, want %q", r.Schema, Schema)
	}
	if r.Logits.Identical {
		r.Logits.SNR, r.Logits.PSNR = Decibels(math.Inf(1)), Decibels(math.Inf(1))
	}
	for i := range r.Layers {
		if r.Layers[i].Identical {
			r.Layers[i].SNR = Decibels(math.Inf(1))
		}
	}
	return &r, nil
}
