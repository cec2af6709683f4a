package verify

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/gquant/gquant/internal/atomicfile"
)

// klFloor is the smallest KL the histogram shows (log10 scale); smaller values land in its first bin.
const klFloor = 1e-10

// The page WritePlot draws: the SNR panel above the KL histogram, both the full width. The size
// does not depend on the number of blocks; the SNR panel's layout adapts instead (see fit).
const (
	plotWidth     = 12 * vg.Inch
	plotSNRHeight = 4.75 * vg.Inch
	plotKLHeight  = 3.25 * vg.Inch
	plotPad       = vg.Inch / 8
	plotDPI       = 96
)

// maxValueLabels is the most bars that each get their value printed; with more (or when the
// values do not fit the bars' width) only the lowest and highest blocks and the logits do.
const maxValueLabels = 40

var (
	colorLayer     = color.RGBA{R: 0x4c, G: 0x78, B: 0xa8, A: 0xff} // blocks
	colorLogits    = color.RGBA{R: 0xf5, G: 0x85, B: 0x18, A: 0xff} // the logits bar
	colorInf       = color.RGBA{R: 0xb8, G: 0xc9, B: 0xdc, A: 0xff} // identical (+Inf) bars, drawn above the top
	colorThreshold = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // limits: --min-snr, --max-kl
	colorMean      = color.RGBA{R: 0x1f, G: 0x3a, B: 0x93, A: 0xff} // the mean KL
	colorHist      = color.RGBA{R: 0x9a, G: 0x9a, B: 0x9a, A: 0xff}
	colorGrid      = color.Gray{Y: 0xe0}
)

// WritePlot draws one PNG page through a temporary file: the SNR of the hidden state after every
// block and of the logits as bars, with the --min-snr limit as a dashed line (above), and the
// histogram of log10 KL(ref‖test) per scored position with the mean and the --max-kl limit as
// vertical lines (below; the histogram only for a report made by Run in this process, since JSON
// keeps no per-position values). The limits are those Apply recorded in r.Thresholds. The same
// report gives the same bytes.
func (r *Report) WritePlot(path string) error {
	b, err := r.plotPNG()
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return atomicfile.WriteFile(path, b)
}

// plotPNG renders the page WritePlot writes.
func (r *Report) plotPNG() ([]byte, error) {
	return renderPNG(plotWidth, plotSNRHeight+plotKLHeight, func(c draw.Canvas) error {
		top, bottom := pagePanels(c)
		if err := r.drawSNR(top); err != nil {
			return err
		}
		return r.drawKL(bottom)
	})
}

// pagePanels splits the page into the SNR panel (top) and the KL panel (bottom).
func pagePanels(c draw.Canvas) (top, bottom draw.Canvas) {
	top = draw.Crop(c, plotPad, -plotPad, plotKLHeight, -plotPad)
	bottom = draw.Crop(c, plotPad, -plotPad, plotPad, -(plotSNRHeight + plotPad))
	return top, bottom
}

// snrPNG and klPNG render the two panels on their own (for the HTML report).
func (r *Report) snrPNG() ([]byte, error) {
	return renderPNG(plotWidth, plotSNRHeight, func(c draw.Canvas) error {
		return r.drawSNR(draw.Crop(c, plotPad, -plotPad, plotPad, -plotPad))
	})
}

func (r *Report) klPNG() ([]byte, error) {
	return renderPNG(plotWidth, plotKLHeight, func(c draw.Canvas) error {
		return r.drawKL(draw.Crop(c, plotPad, -plotPad, plotPad, -plotPad))
	})
}

func renderPNG(w, h vg.Length, paint func(draw.Canvas) error) ([]byte, error) {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(plotDPI), vgimg.UseBackgroundColor(color.White))
	if err := paint(draw.New(img)); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (r *Report) drawSNR(c draw.Canvas) error {
	ch := r.snrChart()
	ch.fit(c)
	ch.p.Draw(c)
	return nil
}

func (r *Report) drawKL(c draw.Canvas) error {
	p, err := r.klPlot()
	if err != nil {
		return err
	}
	p.Draw(c)
	return nil
}

// threshold returns the limit Apply recorded under key, if any.
func (r *Report) threshold(key string) (Threshold, bool) {
	t, ok := r.Thresholds[key]
	return t, ok && !math.IsNaN(t.Limit) && !math.IsInf(t.Limit, 0)
}

func verdict(passed bool) string {
	if passed {
		return "pass"
	}
	return "FAIL"
}

// barKind says how a bar is drawn.
type barKind int

const (
	barLayer  barKind = iota
	barLogits         // the logits SNR
	barInf            // identical: +Inf, drawn above the top finite bar
	barNegInf         // −Inf, drawn below the lowest
	barNaN            // not measured: no bar, "n/a"
)

// snrChart is the SNR panel: the plot, its bars, and what fit chose for the canvas it is drawn on.
type snrChart struct {
	p      *plot.Plot
	bars   *snrBars
	layers int      // blocks; the logits bar, when there is one, follows them after a gap
	names  []string // the blocks' tick labels
	logits bool
	layout snrLayout
}

// snrLayout is where fit put things, in canvas coordinates (for the tests).
type snrLayout struct {
	Data       vg.Rectangle   // the data area
	TickValues []float64      // the x of each labelled tick
	TickBoxes  []vg.Rectangle // their labels (x extent; y is the label row)
	Bars       []vg.Rectangle // every bar (empty for n/a)
	Values     []vg.Rectangle // the printed values, in the order of ValueBars
	ValueBars  []int          // the bar of each printed value
	Step       int            // every Step-th block is labelled (plus the last block and "logits")
}

// snrBars draws the bars (their widths follow the data area's scale) and holds the values
// snrValues prints.
type snrBars struct {
	xs, ys []float64 // bar centres and drawn ends (from 0)
	kinds  []barKind
	values []string // the value printed for each bar
	show   []bool   // which values fit picked
	style  text.Style
}

// barWidth is the share of the spacing a bar takes, and barMaxWidth its cap (for a few bars).
const (
	barWidth    = 0.8
	barMaxWidth = 20 * vg.Millimeter
)

func (b *snrBars) width(trX func(float64) vg.Length) vg.Length {
	w := vg.Length(barWidth) * (trX(1) - trX(0))
	return min(w, barMaxWidth)
}

func (b *snrBars) barRect(i int, trX, trY func(float64) vg.Length) vg.Rectangle {
	if b.kinds[i] == barNaN {
		return vg.Rectangle{}
	}
	x, w := trX(b.xs[i]), b.width(trX)
	y0, y1 := trY(0), trY(b.ys[i])
	return vg.Rectangle{Min: vg.Point{X: x - w/2, Y: min(y0, y1)}, Max: vg.Point{X: x + w/2, Y: max(y0, y1)}}
}

// valueAnchor is where bar i's value is printed: above a bar that goes up, below one that goes
// down, at the zero line for n/a; moved sideways to stay inside area.
func (b *snrBars) valueAnchor(i int, trX, trY func(float64) vg.Length, area vg.Rectangle) (vg.Point, text.Style) {
	sty := b.style
	pt := vg.Point{X: trX(b.xs[i]), Y: trY(b.ys[i])}
	const gap = vg.Millimeter
	if b.ys[i] < 0 {
		sty.YAlign = draw.YTop
		pt.Y -= gap
	} else {
		sty.YAlign = draw.YBottom
		pt.Y += gap
	}
	rc := sty.Rectangle(b.values[i]).Add(pt)
	if d := area.Min.X - rc.Min.X; d > 0 {
		pt.X += d
	} else if d := rc.Max.X - area.Max.X; d > 0 {
		pt.X -= d
	}
	return pt, sty
}

func (b *snrBars) valueRect(i int, trX, trY func(float64) vg.Length, area vg.Rectangle) vg.Rectangle {
	pt, sty := b.valueAnchor(i, trX, trY, area)
	return sty.Rectangle(b.values[i]).Add(pt)
}

// Plot implements plot.Plotter: the bars (their values are snrValues, drawn above the lines).
func (b *snrBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i := range b.xs {
		if b.kinds[i] == barNaN {
			continue
		}
		fill := colorLayer
		switch b.kinds[i] {
		case barLogits:
			fill = colorLogits
		case barInf, barNegInf:
			fill = colorInf
		}
		rc := b.barRect(i, trX, trY)
		c.SetColor(fill)
		c.Fill(rc.Path())
	}
}

// snrValues draws the values fit picked, each on a white patch so that a line behind stays
// out of the digits.
type snrValues struct{ b *snrBars }

func (v snrValues) Plot(c draw.Canvas, p *plot.Plot) {
	b := v.b
	trX, trY := p.Transforms(&c)
	for i := range b.xs {
		if !b.show[i] {
			continue
		}
		pt, sty := b.valueAnchor(i, trX, trY, c.Rectangle)
		rc := sty.Rectangle(b.values[i]).Add(pt)
		c.SetColor(color.White)
		c.Fill(vg.Rectangle{Min: rc.Min.Sub(vg.Point{X: 1, Y: 0}), Max: rc.Max.Add(vg.Point{X: 1, Y: 0})}.Path())
		c.FillText(sty, pt, b.values[i])
	}
}

// niceTicks returns about n labelled ticks over [lo, hi] at 1, 2, 2.5 or 5 × 10^k apart, with a
// minor tick between two labelled ones; labels have the fewest decimals the step needs.
func niceTicks(lo, hi float64, n int) []plot.Tick {
	step := niceStep(lo, hi, n)
	if step == 0 {
		return nil
	}
	e := math.Floor(math.Log10(step))
	mag := math.Pow(10, e)
	dec := 0
	if e < 0 {
		dec = int(-e)
	}
	if math.Abs(step/mag-2.5) < 1e-9 && e <= 0 {
		dec++
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo / step * 2); i/2*step <= hi; i++ {
		v := i / 2 * step
		if int64(i)%2 != 0 {
			ticks = append(ticks, plot.Tick{Value: v})
			continue
		}
		l := strconv.FormatFloat(v, 'f', dec, 64)
		if l == "-0" || strings.Trim(l, "-0.") == "" {
			l = "0"
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: l})
	}
	return ticks
}

// niceStep is the distance niceTicks puts between labelled ticks (0 for an empty range).
func niceStep(lo, hi float64, n int) float64 {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return 0
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// decadeTicks labels the powers of ten of a log10 axis over [lo, hi] (every k-th decade when
// there are many), with minor ticks at 2 … 9 × 10^k when every decade is labelled.
func decadeTicks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	k := 1
	for (hi-lo)/float64(k) > 10 {
		k++
	}
	var ticks []plot.Tick
	for d := math.Floor(lo); d <= hi; d++ {
		if d >= lo && int64(d)%int64(k) == 0 {
			l := fmt.Sprintf("1e%d", int(d))
			if d == 0 {
				l = "1"
			}
			ticks = append(ticks, plot.Tick{Value: d, Label: l})
		}
		if k == 1 {
			for m := 2.0; m < 10; m++ {
				if v := d + math.Log10(m); v >= lo && v <= hi {
					ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprintf("%ge%d", m, int(d))})
				}
			}
		}
	}
	// The minor ticks keep their labels only when fewer than two powers of ten are in range.
	labelled := 0
	for _, t := range ticks {
		if math.Mod(t.Value, 1) == 0 {
			labelled++
		}
	}
	for i := range ticks {
		if math.Mod(ticks[i].Value, 1) == 0 {
			continue
		}
		if m := math.Pow(10, ticks[i].Value-math.Floor(ticks[i].Value)); labelled >= 2 ||
			hi-lo > 1 && math.Abs(m-2) > 1e-6 && math.Abs(m-5) > 1e-6 {
			ticks[i].Label = ""
		}
	}
	return ticks
}

// hline is a horizontal line across the data area at Y; vline a vertical one at X.
type hline struct {
	Y     float64
	Style draw.LineStyle
}

func (l hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(l.Y)
	c.StrokeLine2(l.Style, c.Min.X, y, c.Max.X, y)
}

type vline struct {
	X     float64
	Style draw.LineStyle
}

func (l vline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(l.X)
	c.StrokeLine2(l.Style, x, c.Min.Y, x, c.Max.Y)
}

func dashed(clr color.Color) draw.LineStyle {
	return draw.LineStyle{Color: clr, Width: vg.Points(1.75), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}
}

// snrChart builds the SNR panel: blocks at x = 0 … L−1, the logits at L + 0.5. +Inf (identical)
// bars are drawn 10 dB above the largest finite one (or the limit) and labelled "inf".
func (r *Report) snrChart() *snrChart {
	p := plot.New()
	p.Title.Text = "SNR (energy) of the hidden state after each block and of the logits, dB"
	p.Title.Padding = vg.Points(6)
	p.Y.Label.Text = "SNR, dB"
	p.X.Label.Text = "block"
	ch := &snrChart{p: p, layers: len(r.Layers), logits: r.Logits.Available()}
	b := &snrBars{style: text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 9),
		XAlign: draw.XCenter, Handler: p.TextHandler}}
	// Blocks are placed by position and labelled with their Index.
	for i, l := range r.Layers {
		b.xs = append(b.xs, float64(i))
		b.ys = append(b.ys, float64(l.SNR))
		b.kinds = append(b.kinds, barLayer)
		ch.names = append(ch.names, fmt.Sprint(l.Index))
	}
	if ch.logits {
		b.xs = append(b.xs, float64(ch.layers)+0.5)
		b.ys = append(b.ys, float64(r.Logits.SNR))
		b.kinds = append(b.kinds, barLogits)
	}
	n := len(b.xs)
	if n == 0 {
		p.Title.Text = "SNR (energy): not measured (run with --snr for the blocks)"
		p.HideAxes()
		p.X.Label.Text, p.Y.Label.Text = "", ""
		return ch
	}
	thr, hasThr := r.threshold("min_snr_db")
	lo, hi, anyInf, anyNegInf := 0.0, 0.0, false, false
	for _, v := range b.ys {
		switch {
		case math.IsInf(v, 1):
			anyInf = true
		case math.IsInf(v, -1):
			anyNegInf = true
		case !math.IsNaN(v):
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	top, bottom := hi, lo
	if hasThr {
		top, bottom = math.Max(top, thr.Limit), math.Min(bottom, thr.Limit)
	}
	span := math.Max(top-bottom, 1)
	b.values = make([]string, n)
	b.show = make([]bool, n)
	for i, v := range b.ys {
		switch {
		case math.IsInf(v, 1):
			b.ys[i], b.values[i], b.kinds[i] = top+math.Max(10, 0.1*span), "inf", barInf
		case math.IsInf(v, -1):
			b.ys[i], b.values[i], b.kinds[i] = bottom-math.Max(10, 0.1*span), "-inf", barNegInf
		case math.IsNaN(v):
			b.ys[i], b.values[i], b.kinds[i] = 0, "n/a", barNaN
		default:
			b.values[i] = fmt.Sprintf("%.1f", v)
		}
		lo, hi = math.Min(lo, b.ys[i]), math.Max(hi, b.ys[i])
	}
	ch.bars = b
	// The y range: every bar, the limit and zero, with room for the printed values.
	ylo, yhi := lo, hi
	if hasThr {
		ylo, yhi = math.Min(ylo, thr.Limit), math.Max(yhi, thr.Limit)
	}
	span = math.Max(yhi-ylo, 1)
	p.Y.Max = yhi + 0.12*span
	if ylo < 0 {
		p.Y.Min = ylo - 0.12*span
	} else {
		p.Y.Min = 0
	}
	p.X.Min, p.X.Max = -0.75, b.xs[n-1]+0.75
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	grid.Horizontal = draw.LineStyle{Color: colorGrid, Width: vg.Points(0.5)}
	p.Add(grid)
	if p.Y.Min < 0 {
		p.Add(hline{Y: 0, Style: draw.LineStyle{Color: color.Black, Width: vg.Points(0.75)}})
	}
	if hasThr {
		p.Add(hline{Y: thr.Limit, Style: dashed(colorThreshold)})
	}
	p.Add(b, snrValues{b})
	if p.Y.Min < 0 { // end the axis on a labelled tick
		step := niceStep(p.Y.Min, p.Y.Max, 8)
		p.Y.Min = math.Floor(p.Y.Min/step) * step
	}
	p.Y.Tick.Marker = plot.ConstantTicks(niceTicks(p.Y.Min, p.Y.Max, 8))
	if hasThr {
		p.Title.Text += fmt.Sprintf("\ndashed red: --min-snr %g dB on the logits SNR (%s dB: %s)",
			thr.Limit, Decibels(thr.Value), verdict(thr.Passed))
	}
	switch {
	case anyInf && anyNegInf:
		p.Title.Text += "\nlight bars: inf (identical to the reference) drawn above the top, -inf below the lowest"
	case anyInf:
		p.Title.Text += "\nlight bars: identical to the reference (inf), drawn above the top"
	case anyNegInf:
		p.Title.Text += "\nlight bars: -inf, drawn below the lowest"
	}
	if ch.logits {
		p.X.Label.Text = "block (hidden state after it); logits: the model's output"
	}
	return ch
}

// tickSteps are the label strides fit tries, in order.
var tickSteps = []int{1, 2, 4, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000}

// fit lays the chart out for canvas c: which x ticks are labelled (so that no two labels overlap)
// and which bar values are printed (every one when at most maxValueLabels bars and they fit the
// bars' width, else the lowest and highest block and the logits, where they do not collide).
func (ch *snrChart) fit(c draw.Canvas) {
	b := ch.bars
	if b == nil {
		return
	}
	p := ch.p
	sty := p.X.Tick.Label
	const gap = 4 // points between two tick labels, at least
	type label struct {
		x    float64
		text string
	}
	boxes := func(dc draw.Canvas, ls []label) []vg.Rectangle {
		trX, _ := p.Transforms(&dc)
		out := make([]vg.Rectangle, len(ls))
		for i, l := range ls {
			w := sty.Width(l.text)
			x := trX(l.x)
			out[i] = vg.Rectangle{Min: vg.Point{X: x - w/2, Y: dc.Min.Y - sty.Height(l.text)},
				Max: vg.Point{X: x + w/2, Y: dc.Min.Y}}
		}
		return out
	}
	apart := func(a, b vg.Rectangle) bool { return a.Max.X+gap <= b.Min.X || b.Max.X+gap <= a.Min.X }
	setTicks := func(ls []label) {
		labelled := map[float64]string{}
		for _, l := range ls {
			labelled[l.x] = l.text
		}
		var ticks []plot.Tick
		for _, x := range b.xs { // ascending; one tick per bar, labelled or minor
			ticks = append(ticks, plot.Tick{Value: x, Label: labelled[x]})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	// Start from every bar labelled, to measure the data area.
	var all []label
	for i := 0; i < ch.layers; i++ {
		all = append(all, label{b.xs[i], ch.names[i]})
	}
	if ch.logits {
		all = append(all, label{b.xs[len(b.xs)-1], "logits"})
	}
	setTicks(all)
	var chosen []label
	var chosenBoxes []vg.Rectangle
	step := tickSteps[len(tickSteps)-1]
	for _, k := range tickSteps {
		dc := p.DataCanvas(c)
		// Priority: "logits", the last block, then every k-th block from 0; a label that would
		// touch one already kept is left out.
		var cand []label
		if ch.logits {
			cand = append(cand, all[len(all)-1])
		}
		if ch.layers > 0 {
			cand = append(cand, all[ch.layers-1])
		}
		var multiples []label
		for i := 0; i < ch.layers-1; i += k {
			multiples = append(multiples, all[i])
		}
		// The stride works when consecutive multiples stand apart.
		mb := boxes(dc, multiples)
		ok := true
		for i := 1; i < len(mb); i++ {
			if !apart(mb[i-1], mb[i]) {
				ok = false
				break
			}
		}
		if !ok && k != tickSteps[len(tickSteps)-1] {
			continue
		}
		cand = append(cand, multiples...)
		cb := boxes(dc, cand)
		var keep []label
		var kb []vg.Rectangle
		for i, l := range cand {
			fits := true
			for _, o := range kb {
				if !apart(cb[i], o) {
					fits = false
					break
				}
			}
			if fits {
				keep, kb = append(keep, l), append(kb, cb[i])
			}
		}
		// Ticks ascending, then check again on the data area these labels give (the outer
		// labels may move its edges).
		sort.Slice(keep, func(i, j int) bool { return keep[i].x < keep[j].x })
		setTicks(keep)
		final := boxes(p.DataCanvas(c), keep)
		ok = true
		for i := 1; i < len(final); i++ {
			if !apart(final[i-1], final[i]) {
				ok = false
				break
			}
		}
		chosen, chosenBoxes, step = keep, final, k
		if ok {
			break
		}
	}
	dc := p.DataCanvas(c)
	trX, trY := p.Transforms(&dc)
	lay := snrLayout{Data: dc.Rectangle, TickBoxes: chosenBoxes, Step: step}
	for _, l := range chosen {
		lay.TickValues = append(lay.TickValues, l.x)
	}
	for i := range b.xs {
		lay.Bars = append(lay.Bars, b.barRect(i, trX, trY))
	}
	// Values: all when they fit, else the extremes.
	n := len(b.xs)
	spacing := trX(1) - trX(0)
	widest := vg.Length(0)
	for _, v := range b.values {
		widest = max(widest, b.style.Width(v))
	}
	for i := range b.show {
		b.show[i] = false
	}
	var order []int
	if n <= maxValueLabels && widest+vg.Points(2) <= spacing {
		for i := range b.xs {
			order = append(order, i)
		}
	} else {
		if ch.logits {
			order = append(order, n-1)
		}
		lowest, highest := -1, -1
		for i := 0; i < ch.layers; i++ {
			if b.kinds[i] != barLayer {
				continue
			}
			if lowest < 0 || b.ys[i] < b.ys[lowest] {
				lowest = i
			}
			if highest < 0 || b.ys[i] > b.ys[highest] {
				highest = i
			}
		}
		for _, i := range []int{lowest, highest} {
			if i >= 0 {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		rc := b.valueRect(i, trX, trY, dc.Rectangle)
		clash := false
		for _, o := range lay.Values {
			if rc.Min.X < o.Max.X && o.Min.X < rc.Max.X && rc.Min.Y < o.Max.Y && o.Min.Y < rc.Max.Y {
				clash = true
				break
			}
		}
		if clash || b.show[i] {
			continue
		}
		b.show[i] = true
		lay.Values = append(lay.Values, rc)
		lay.ValueBars = append(lay.ValueBars, i)
	}
	ch.layout = lay
}

// klPlot draws the histogram of log10 KL per position, with the mean and the --max-kl limit (a
// limit on the mean) as vertical lines.
func (r *Report) klPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Padding = vg.Points(6)
	p.Title.Text = fmt.Sprintf("KL(ref || test) per scored position: mean %.4g nats (solid blue line)", r.KL.Mean)
	p.X.Label.Text = "KL per position, nats (log scale; below 1e-10 counted at 1e-10)"
	p.Y.Label.Text = "positions"
	lg := func(v float64) float64 { return math.Log10(math.Max(v, klFloor)) }
	var marks []float64
	thr, hasThr := r.threshold("max_kl")
	if hasThr {
		p.Title.Text += fmt.Sprintf("\ndashed red: --max-kl %g on the mean KL (%s)", thr.Limit, verdict(thr.Passed))
	}
	if len(r.klValues) == 0 {
		p.Title.Text += "\n(no per-position values: the histogram needs a report made in this run)"
		p.Y.Min, p.Y.Max = 0, 1
		p.HideY()
		p.Y.Label.Text = ""
	} else {
		vs := make(plotter.Values, len(r.klValues))
		for i, v := range r.klValues {
			vs[i] = lg(v) // identical values make one bin of width 1
		}
		bins := 50
		if len(vs) < 200 {
			bins = 20
		}
		h, err := plotter.NewHist(vs, bins)
		if err != nil {
			return nil, err
		}
		if lo, hi := floats(vs); lo == hi { // one value: a narrow bin centred on it
			h.Bins = []plotter.HistogramBin{{Min: lo - 0.1, Max: lo + 0.1, Weight: float64(len(vs))}}
			h.Width = 0.2
		}
		h.FillColor = colorHist
		h.LineStyle.Width = vg.Points(0.5)
		h.LineStyle.Color = color.Gray{Y: 0x60}
		grid := plotter.NewGrid()
		grid.Vertical.Color = nil
		grid.Horizontal = draw.LineStyle{Color: colorGrid, Width: vg.Points(0.5)}
		p.Add(grid, h)
		p.Y.Max *= 1.05
	}
	mean := lg(r.KL.Mean)
	marks = append(marks, mean)
	p.Add(vline{X: mean, Style: draw.LineStyle{Color: colorMean, Width: vg.Points(1.5)}})
	if hasThr {
		marks = append(marks, lg(thr.Limit))
		p.Add(vline{X: lg(thr.Limit), Style: dashed(colorThreshold)})
	}
	// The x range covers the histogram and both lines, with a margin.
	xlo, xhi := math.Inf(1), math.Inf(-1)
	if len(r.klValues) > 0 {
		xlo, xhi = p.X.Min, p.X.Max
	}
	for _, m := range marks {
		xlo, xhi = math.Min(xlo, m), math.Max(xhi, m)
	}
	pad := math.Max(0.04*(xhi-xlo), 0.25)
	p.X.Min, p.X.Max = xlo-pad, xhi+pad
	p.X.Tick.Marker = plot.ConstantTicks(decadeTicks(p.X.Min, p.X.Max))
	if len(r.klValues) > 0 {
		p.Y.Tick.Marker = plot.ConstantTicks(niceTicks(0, p.Y.Max, 5))
	}
	return p, nil
}

// floats returns the smallest and largest of vs.
func floats(vs plotter.Values) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}
