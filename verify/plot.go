package verify

import (
	"bytes"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/gquant/gquant/internal/atomicfile"
)

// klFloor is the smallest KL the histogram shows (log10 scale); smaller values land in its first bin.
const klFloor = 1e-10

// WritePlot draws one PNG page: the SNR of the hidden state after every block and of the logits
// as bars (left), and the histogram of log10 KL(ref‖test) per scored position (right; only for a
// report made by Run in this process, since JSON keeps no per-position values).
func (r *Report) WritePlot(path string) error {
	bars, err := r.snrPlot()
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	hist, err := klPlot(r.klValues, r.KL.Mean)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	const w, h = 12 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 2, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8,
		PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	plots := [][]*plot.Plot{{bars, hist}}
	canvases := plot.Align(plots, t, dc)
	bars.Draw(canvases[0][0])
	hist.Draw(canvases[0][1])
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// snrPlot draws the per-layer and logits SNR bars; +Inf (identical) bars are drawn 10 dB above
// the largest finite one and labelled so.
func (r *Report) snrPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "SNR (energy), dB"
	p.Y.Label.Text = "dB"
	var names []string
	var vals []float64
	for _, l := range r.Layers {
		names = append(names, fmt.Sprintf("blk.%d", l.Index))
		vals = append(vals, float64(l.SNR))
	}
	if r.Logits.Available() {
		names = append(names, "logits")
		vals = append(vals, float64(r.Logits.SNR))
	}
	if len(vals) == 0 {
		p.Title.Text = "SNR (energy): not measured"
		return p, nil
	}
	top, inf := 0.0, false
	for _, v := range vals {
		if math.IsInf(v, 1) {
			inf = true
		} else if !math.IsNaN(v) {
			top = math.Max(top, v)
		}
	}
	ys := make(plotter.Values, len(vals))
	for i, v := range vals {
		switch {
		case math.IsInf(v, 1):
			ys[i] = top + 10
			names[i] += " (inf)"
		case math.IsNaN(v), math.IsInf(v, -1):
			ys[i] = 0
		default:
			ys[i] = v
		}
	}
	if inf {
		p.Title.Text += " (inf: identical, drawn 10 dB above the top)"
	}
	b, err := plotter.NewBarChart(ys, vg.Points(20))
	if err != nil {
		return nil, err
	}
	p.Add(b)
	p.NominalX(names...)
	return p, nil
}

// klPlot draws the histogram of log10 KL per position, with the mean as a title figure.
func klPlot(kl []float64, mean float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("KL(ref || test) per position (mean %.3g nats)", mean)
	p.X.Label.Text = "log10 KL"
	p.Y.Label.Text = "positions"
	if len(kl) == 0 {
		return p, nil
	}
	vs := make(plotter.Values, len(kl))
	for i, v := range kl {
		vs[i] = math.Log10(math.Max(v, klFloor)) // identical values make one bin of width 1
	}
	bins := 50
	if len(kl) < 200 {
		bins = 20
	}
	h, err := plotter.NewHist(vs, bins)
	if err != nil {
		return nil, err
	}
	p.Add(h)
	return p, nil
}
