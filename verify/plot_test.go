package verify

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// synthReport builds a report with n blocks whose SNR falls from ~47 dB to a few dB below zero,
// a logits SNR of 27.5 dB, 2000 per-position KL values, and the thresholds Apply records
// (--min-snr 30 fails, --max-kl 0.05 and --min-top1 0.9 hold).
func synthReport(n int) *Report {
	rng := rand.New(rand.NewPCG(1, 2))
	r := &Report{Schema: Schema, Command: "gquant verify out/model.gguf --ref models/ref", GquantVersion: "test"}
	r.Artifact = Artifact{Path: "out/model-q4_k_m.gguf", BPW: 4.85, BPWLinear: 4.5}
	r.Reference = Reference{Path: "models/ref", BPW: 16, BPWLinear: 16}
	r.Protocol = Protocol{Ctx: 512, Chunks: 8, First: 256, BOS: 1, KL: "exact"}
	r.Inputs = map[string]string{"out/model-q4_k_m.gguf": "ab12", "models/ref": "cd34"}
	for i := 0; i < n; i++ {
		v := 45 - 50*float64(i)/math.Max(1, float64(n-1)) + rng.Float64()*3
		r.Layers = append(r.Layers, newLayerSNR(i, v))
	}
	r.Logits = newLogitsSNR(27.5, 41.2, "")
	r.klValues = make([]float64, 2000)
	for i := range r.klValues {
		r.klValues[i] = math.Exp(rng.NormFloat64()*1.5 - 5)
	}
	r.KL = KLStats{Mean: 0.0213, MeanErr: 0.0004, Median: 0.007, P90: 0.04, P99: 0.2, P999: 0.9, Max: 2.1}
	r.TokensScored = len(r.klValues)
	r.Top1, r.Top1Err = 0.93, 0.005
	r.PPL = PPL{Ref: 12.1, Test: 12.6, Ratio: 12.6 / 12.1}
	d2, d5 := 2, 5
	r.Greedy = &Greedy{Prompts: 3, Exact: 1, Gen: 32, FirstDivergence: []*int{nil, &d2, &d5}, RefLength: []int{32, 32, 20}}
	minSNR, maxKL, minTop1 := 30.0, 0.05, 0.9
	r.Apply(Limits{MinSNR: &minSNR, MaxKL: &maxKL, MinTop1: &minTop1})
	return r
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// renderPlot draws the plot of a synthetic report with n blocks and decodes it.
func renderPlot(t *testing.T, n int) image.Image {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.png")
	if err := synthReport(n).WritePlot(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodePNG(t, b)
}

// The page keeps its size whatever the number of blocks: 12 × 8 inches at 96 dpi.
func TestPlotSize(t *testing.T) {
	for _, n := range []int{2, 36, 80} {
		img := renderPlot(t, n)
		if got := img.Bounds().Size(); got != (image.Point{X: 1152, Y: 768}) {
			t.Errorf("%d blocks: %v pixels, want 1152×768", n, got)
		}
	}
}

// fitted lays out the SNR panel on the canvas WritePlot gives it.
func fitted(r *Report) *snrChart {
	img := vgimg.NewWith(vgimg.UseWH(plotWidth, plotSNRHeight+plotKLHeight), vgimg.UseDPI(plotDPI))
	top, _ := pagePanels(draw.New(img))
	ch := r.snrChart()
	ch.fit(top)
	return ch
}

func inside(in, out vg.Rectangle) bool {
	const eps = 0.01
	return in.Min.X >= out.Min.X-eps && in.Max.X <= out.Max.X+eps && in.Min.Y >= out.Min.Y-eps && in.Max.Y <= out.Max.Y+eps
}

// The layout for 1 to 120 blocks: tick labels apart and in order, one tick per bar (none twice),
// every bar and printed value inside the data area, values printed for every bar up to 40 bars
// and only for the extremes beyond, the y range covering every bar and the limit.
func TestPlotLayout(t *testing.T) {
	for _, n := range []int{1, 2, 12, 36, 39, 40, 80, 120} {
		r := synthReport(n)
		ch := fitted(r)
		l := ch.layout
		if len(l.Bars) != n+1 {
			t.Fatalf("%d blocks: %d bars", n, len(l.Bars))
		}
		for i := 1; i < len(l.TickBoxes); i++ {
			if l.TickBoxes[i-1].Max.X >= l.TickBoxes[i].Min.X {
				t.Errorf("%d blocks: tick labels at %g and %g overlap: %v %v", n, l.TickValues[i-1], l.TickValues[i], l.TickBoxes[i-1], l.TickBoxes[i])
			}
		}
		if last := l.TickValues[len(l.TickValues)-1]; last != float64(n)+0.5 {
			t.Errorf("%d blocks: the last labelled tick is at %g, not the logits", n, last)
		}
		if l.TickValues[0] != 0 {
			t.Errorf("%d blocks: block 0 is not labelled", n)
		}
		ticks := ch.p.X.Tick.Marker.Ticks(ch.p.X.Min, ch.p.X.Max)
		seen := map[float64]bool{}
		for _, tk := range ticks {
			if seen[tk.Value] {
				t.Errorf("%d blocks: tick %g twice", n, tk.Value)
			}
			seen[tk.Value] = true
		}
		if len(ticks) != n+1 {
			t.Errorf("%d blocks: %d ticks for %d bars", n, len(ticks), n+1)
		}
		for i, b := range l.Bars {
			if !inside(b, l.Data) {
				t.Errorf("%d blocks: bar %d %v outside the data area %v", n, i, b, l.Data)
			}
			if i > 0 && l.Bars[i-1].Max.X >= b.Min.X {
				t.Errorf("%d blocks: bars %d and %d touch", n, i-1, i)
			}
		}
		for i, v := range l.Values {
			if !inside(v, l.Data) {
				t.Errorf("%d blocks: value of bar %d %v outside the data area %v", n, l.ValueBars[i], v, l.Data)
			}
			for _, w := range l.Values[:i] {
				if v.Min.X < w.Max.X && w.Min.X < v.Max.X && v.Min.Y < w.Max.Y && w.Min.Y < v.Max.Y {
					t.Errorf("%d blocks: printed values overlap", n)
				}
			}
		}
		if bars := n + 1; bars <= maxValueLabels && len(l.Values) != bars {
			t.Errorf("%d blocks: %d values printed, want all %d", n, len(l.Values), bars)
		} else if bars > maxValueLabels && (len(l.Values) < 2 || len(l.Values) > 3) {
			t.Errorf("%d blocks: %d values printed, want the extremes and the logits", n, len(l.Values))
		}
		lo, hi := 30.0, 30.0 // the limit
		for _, v := range ch.bars.ys {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if ch.p.Y.Min > math.Min(lo, 0) || ch.p.Y.Max <= hi {
			t.Errorf("%d blocks: y range [%g, %g] does not cover [%g, %g]", n, ch.p.Y.Min, ch.p.Y.Max, lo, hi)
		}
		if n >= 80 && l.Step == 1 {
			t.Errorf("%d blocks: every block labelled", n)
		}
		if n <= 36 && l.Step != 1 {
			t.Errorf("%d blocks: only every %d-th block labelled", n, l.Step)
		}
	}
}

// isThreshold says whether a pixel has (about) the limit lines' colour.
func isThreshold(c interface{ RGBA() (r, g, b, a uint32) }) bool {
	r, g, b, _ := c.RGBA()
	return r>>8 > 180 && g>>8 < 90 && b>>8 < 90
}

// The limits are drawn: a long horizontal run of the threshold colour in the SNR panel (the old
// plot had no threshold line at all) and a vertical one in the KL panel.
func TestPlotThresholdLines(t *testing.T) {
	for _, n := range []int{2, 36, 80} {
		img := renderPlot(t, n)
		sz := img.Bounds().Size()
		split := int(float64(sz.Y) * float64(plotSNRHeight/(plotSNRHeight+plotKLHeight)))
		bestRow, bestCol := 0, 0
		for y := 0; y < split; y++ {
			c := 0
			for x := 0; x < sz.X; x++ {
				if isThreshold(img.At(x, y)) {
					c++
				}
			}
			bestRow = max(bestRow, c)
		}
		for x := 0; x < sz.X; x++ {
			c := 0
			for y := split; y < sz.Y; y++ {
				if isThreshold(img.At(x, y)) {
					c++
				}
			}
			bestCol = max(bestCol, c)
		}
		if bestRow < sz.X/5 {
			t.Errorf("%d blocks: no --min-snr line (longest red row %d pixels)", n, bestRow)
		}
		if bestCol < (sz.Y-split)/3 {
			t.Errorf("%d blocks: no --max-kl line (longest red column %d pixels)", n, bestCol)
		}
	}
	// Without thresholds there is no red.
	r := synthReport(36)
	r.Thresholds = nil
	path := filepath.Join(t.TempDir(), "p.png")
	if err := r.WritePlot(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, b)
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if isThreshold(img.At(x, y)) {
				t.Fatalf("no thresholds, but a red pixel at %d,%d", x, y)
			}
		}
	}
}

// The same report gives the same bytes, also from a report built again.
func TestPlotDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.png"), filepath.Join(dir, "b.png")
	if err := synthReport(36).WritePlot(a); err != nil {
		t.Fatal(err)
	}
	if err := synthReport(36).WritePlot(b); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ab) == 0 || !bytes.Equal(ab, bb) {
		t.Errorf("two plots of the same report differ (%d and %d bytes)", len(ab), len(bb))
	}
	if os.Getenv("GQUANT_PLOT_OUT") != "" { // look at it: GQUANT_PLOT_OUT=/tmp/plot36.png go test -run Deterministic ./verify/
		os.WriteFile(os.Getenv("GQUANT_PLOT_OUT"), ab, 0o644)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d files in the output folder, want 2 (a temporary file left?)", len(entries))
	}
}

// Odd reports still draw: nothing measured; identical everywhere (+Inf); n/a logits with
// blocks; −Inf; only the logits; a report read back from JSON (no per-position KL); a zero limit.
func TestPlotEdgeCases(t *testing.T) {
	inf := math.Inf(1)
	cases := map[string]func() *Report{
		"empty": func() *Report {
			r := &Report{Schema: Schema}
			r.Logits = newLogitsSNR(math.NaN(), math.NaN(), "not measured")
			return r
		},
		"identical": func() *Report {
			r := &Report{Schema: Schema, klValues: []float64{0, 0, 0}}
			r.Logits = newLogitsSNR(inf, inf, "")
			for i := 0; i < 5; i++ {
				r.Layers = append(r.Layers, newLayerSNR(i, inf))
			}
			z := 0.0
			r.Apply(Limits{MinSNR: &z, MaxKL: &z})
			return r
		},
		"na logits": func() *Report {
			r := synthReport(10)
			r.Logits = newLogitsSNR(math.NaN(), math.NaN(), "no logits in a llama.cpp file")
			r.Layers[3].SNR = Decibels(math.Inf(-1))
			r.Layers[4].SNR = Decibels(math.NaN())
			return r
		},
		"logits only": func() *Report {
			r := synthReport(0)
			return r
		},
		"from json": func() *Report {
			b, _ := json.Marshal(synthReport(36))
			r, err := ReadReport(b)
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	for name, mk := range cases {
		b, err := mk().plotPNG()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		decodePNG(t, b)
		if dir := os.Getenv("GQUANT_PLOT_DIR"); dir != "" { // to look at them
			os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644)
		}
		ch := fitted(mk())
		for i, bar := range ch.layout.Bars {
			if bar != (vg.Rectangle{}) && !inside(bar, ch.layout.Data) {
				t.Errorf("%s: bar %d outside the data area", name, i)
			}
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{-10, 53, []string{"-10", "0", "10", "20", "30", "40", "50"}},
		{0, 5.3, []string{"0", "1", "2", "3", "4", "5"}},
		{0, 0.12, []string{"0", "0.02", "0.04", "0.06", "0.08", "0.10", "0.12"}},
		{0, 170, []string{"0", "25", "50", "75", "100", "125", "150"}},
	} {
		var got []string
		for _, tk := range niceTicks(c.lo, c.hi, 7) {
			if !tk.IsMinor() {
				got = append(got, tk.Label)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("[%g, %g]: %q, want %q", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("[%g, %g]: %q, want %q", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
	if niceTicks(1, 1, 5) != nil || niceTicks(0, math.Inf(1), 5) != nil {
		t.Error("ticks for an empty or infinite range")
	}
}
