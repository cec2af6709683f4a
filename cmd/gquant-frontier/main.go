// Command gquant-frontier draws the fidelity frontier of docs/quality.md: mean KL against bits
// per weight over the linear layers, one curve per series, from gquant verify's JSON reports
// or from the CSV it writes, and prints the points as a Markdown table.
//
//	gquant-frontier --csv points.csv 'llama.cpp + imatrix:Q4_K_M=q4_k_m.verify.json' …
//	gquant-frontier --from points.csv --png frontier.png --table
//	gquant-frontier --from points.csv --table --against 'llama.cpp + imatrix'
//
// An argument SERIES:LABEL=REPORT adds the report's point to the series; --csv writes every
// point (series, label, bpw over the linear layers and over every weight, KL mean and its
// standard error) in the order given; --from reads such a file instead of reports. --plot
// names the series drawn (all by default); the first one drawn has its points labelled.
// --table prints the points; with --against SERIES, a comparison instead: one row per label
// of that series, with the KL of every other series (those of --plot, when given) at the same
// label and its ratio to that series'. The same points always give the same bytes.
package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gquant-frontier:", err)
		if _, usage := err.(usageError); usage {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks errors in the command line (exit code 2).
type usageError struct{ error }

// point is one artifact's measurement.
type point struct {
	Series, Label  string
	BPWLinear, BPW float64
	KL, KLErr      float64
}

var header = []string{"series", "label", "bpw_linear", "bpw", "kl_mean", "kl_mean_err"}

// run parses the flags, reads the points and writes what was asked.
func run(args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("gquant-frontier", pflag.ContinueOnError)
	from := fs.String("from", "", "read the points from this CSV instead of reports")
	csvOut := fs.String("csv", "", "write the points to this CSV")
	pngOut := fs.String("png", "", "draw the frontier into this PNG")
	table := fs.Bool("table", false, "print the points as a Markdown table")
	title := fs.String("title", "", "the plot's title")
	drawn := fs.StringArray("plot", nil, "a series to draw (repeatable; default: every series)")
	x := fs.String("x", "linear", "the plot's abscissa: bits per weight over the linear layers (linear) or over every weight (all: the file's size)")
	against := fs.String("against", "", "with --table: compare the other series (those of --plot, when given) with this one, label by label")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	var pts []point
	var err error
	switch {
	case *from != "" && fs.NArg() > 0:
		return usageError{fmt.Errorf("--from and reports exclude each other")}
	case *from != "":
		pts, err = readCSV(*from)
	default:
		pts, err = readReports(fs.Args())
	}
	if err != nil {
		return err
	}
	if len(pts) == 0 {
		return usageError{fmt.Errorf("no points: give SERIES:LABEL=REPORT arguments or --from FILE")}
	}
	if *csvOut != "" {
		if err := os.WriteFile(*csvOut, csvBytes(pts), 0o644); err != nil {
			return err
		}
	}
	if *x != "linear" && *x != "all" {
		return usageError{fmt.Errorf("--x %q: want linear or all", *x)}
	}
	if *pngOut != "" {
		b, err := plotPNG(pts, *title, *drawn, *x == "all")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*pngOut, b, 0o644); err != nil {
			return err
		}
	}
	switch {
	case *against != "" && !*table:
		return usageError{fmt.Errorf("--against goes with --table")}
	case *against != "":
		t, err := comparison(pts, *against, *drawn)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, t)
	case *table:
		fmt.Fprint(stdout, markdown(pts))
	}
	return nil
}

// readReports reads SERIES:LABEL=REPORT arguments (gquant verify --json reports).
func readReports(args []string) ([]point, error) {
	var pts []point
	for _, a := range args {
		name, path, ok := strings.Cut(a, "=")
		series, label, ok2 := strings.Cut(name, ":")
		if !ok || !ok2 || series == "" || label == "" || path == "" {
			return nil, usageError{fmt.Errorf("%q: want SERIES:LABEL=REPORT.json", a)}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var r struct {
			Artifact struct {
				BPW       float64 `json:"bpw"`
				BPWLinear float64 `json:"bpw_linear"`
			} `json:"artifact"`
			KL struct {
				Mean    float64 `json:"mean"`
				MeanErr float64 `json:"mean_err"`
			} `json:"kl"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if !(r.KL.Mean > 0) || !(r.Artifact.BPWLinear > 0) {
			return nil, fmt.Errorf("%s: no KL mean or bpw_linear (not a gquant verify report?)", path)
		}
		pts = append(pts, point{series, label, r.Artifact.BPWLinear, r.Artifact.BPW, r.KL.Mean, r.KL.MeanErr})
	}
	return pts, nil
}

// readCSV reads what csvBytes writes.
func readCSV(path string) ([]point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != strings.Join(header, ",") {
		return nil, fmt.Errorf("%s: the first row is not %s", path, strings.Join(header, ","))
	}
	var pts []point
	for i, r := range rows[1:] {
		var v [4]float64
		for j := range v {
			if v[j], err = strconv.ParseFloat(r[2+j], 64); err != nil || math.IsNaN(v[j]) {
				return nil, fmt.Errorf("%s: row %d: %s: %q is not a number", path, i+2, header[2+j], r[2+j])
			}
		}
		pts = append(pts, point{r[0], r[1], v[0], v[1], v[2], v[3]})
	}
	return pts, nil
}

// csvBytes writes the points with every digit their float64 holds.
func csvBytes(pts []point) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(header)
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, p := range pts {
		w.Write([]string{p.Series, p.Label, g(p.BPWLinear), g(p.BPW), g(p.KL), g(p.KLErr)})
	}
	w.Flush()
	return b.Bytes()
}

// markdown is the points as a table, in the order given.
func markdown(pts []point) string {
	var b strings.Builder
	b.WriteString("| series | artifact | bpw linear | bpw all | KL mean |\n|---|---|---|---|---|\n")
	for _, p := range pts {
		fmt.Fprintf(&b, "| %s | %s | %.4f | %.4f | %.6f ± %.6f |\n", p.Series, p.Label, p.BPWLinear, p.BPW, p.KL, p.KLErr)
	}
	return b.String()
}

// comparison is the table of --against: a row per label of the series base, in order, with its
// bits per weight over the linear layers and KL, then each other series' KL at the label and
// its ratio to base's (empty where the series has no such label). others names the series
// compared (nil: every other one, in order of appearance).
func comparison(pts []point, base string, others []string) (string, error) {
	var order []string
	at := map[string]map[string]point{}
	for _, p := range pts {
		if at[p.Series] == nil {
			at[p.Series] = map[string]point{}
			order = append(order, p.Series)
		}
		at[p.Series][p.Label] = p
	}
	if at[base] == nil {
		return "", usageError{fmt.Errorf("--against %q: no such series (%s)", base, strings.Join(order, "; "))}
	}
	if others == nil {
		others = order
	}
	var cols []string
	for _, s := range others {
		switch {
		case at[s] == nil:
			return "", usageError{fmt.Errorf("--plot %q: no such series (%s)", s, strings.Join(order, "; "))}
		case s != base:
			cols = append(cols, s)
		}
	}
	var b strings.Builder
	b.WriteString("| label | bpw linear | " + base)
	sep := "|---|---|---"
	for _, s := range cols {
		b.WriteString(" | " + s + " | ratio")
		sep += "|---|---"
	}
	b.WriteString(" |\n" + sep + "|\n")
	for _, p := range pts {
		if p.Series != base {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.4f | %.6f", p.Label, p.BPWLinear, p.KL)
		for _, s := range cols {
			if q, ok := at[s][p.Label]; ok {
				fmt.Fprintf(&b, " | %.6f | %.2f", q.KL, q.KL/p.KL)
			} else {
				b.WriteString(" | | ")
			}
		}
		b.WriteString(" |\n")
	}
	return b.String(), nil
}

// palette colours the series in the order they first appear.
var palette = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// plotPNG draws the series named in drawn (every series when empty), each one's points joined
// in order of bits per weight (over every weight with all, else over the linear layers), on a
// log scale of KL; the first series' points are labelled.
func plotPNG(pts []point, title string, drawn []string, all bool) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "bits per weight over the linear layers"
	if all {
		p.X.Label.Text = "bits per weight over every weight (the file's size)"
	}
	p.Y.Label.Text = "mean KL(bf16 ‖ quantized), held-out text"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Tick.Marker = halfTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(8)
	var order []string
	by := map[string][]point{}
	for _, pt := range pts {
		if _, ok := by[pt.Series]; !ok {
			order = append(order, pt.Series)
		}
		by[pt.Series] = append(by[pt.Series], pt)
	}
	if len(drawn) > 0 {
		for _, s := range drawn {
			if by[s] == nil {
				return nil, usageError{fmt.Errorf("--plot %q: no such series (%s)", s, strings.Join(order, "; "))}
			}
		}
		order = drawn
	}
	for i, s := range order {
		sp := by[s]
		xy := make(plotter.XYs, len(sp))
		var labels []string
		for j, pt := range sp {
			xy[j] = plotter.XY{X: pt.BPWLinear, Y: pt.KL}
			if all {
				xy[j].X = pt.BPW
			}
			labels = append(labels, pt.Label)
		}
		idx := make([]int, len(sp))
		for j := range idx {
			idx[j] = j
		}
		// Lines join the points by increasing bits per weight (insertion sort: few points).
		for a := 1; a < len(idx); a++ {
			for b := a; b > 0 && xy[idx[b]].X < xy[idx[b-1]].X; b-- {
				idx[b], idx[b-1] = idx[b-1], idx[b]
			}
		}
		sorted := make(plotter.XYs, len(idx))
		for j, k := range idx {
			sorted[j] = xy[k]
		}
		c := palette[i%len(palette)]
		line, scatter, err := plotter.NewLinePoints(sorted)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", s, err)
		}
		line.Color = c
		line.Width = vg.Points(1.5)
		scatter.Color = c
		scatter.Shape = draw.CircleGlyph{}
		scatter.Radius = vg.Points(3)
		p.Add(line, scatter)
		p.Legend.Add(s, line, scatter)
		if i > 0 {
			continue
		}
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels})
		if err != nil {
			return nil, err
		}
		for k := range lab.TextStyle {
			lab.TextStyle[k].Color = c
			lab.TextStyle[k].Font.Size = vg.Points(8)
		}
		lab.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(3)}
		p.Add(lab)
	}
	img := vgimg.NewWith(vgimg.UseWH(10*vg.Inch, 6*vg.Inch), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(img))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// halfTicks marks every half bit, labelling the whole ones.
type halfTicks struct{}

func (halfTicks) Ticks(min, max float64) []plot.Tick {
	var t []plot.Tick
	for x := math.Ceil(2*min) / 2; x <= max; x += 0.5 {
		label := ""
		if x == math.Trunc(x) {
			label = strconv.FormatFloat(x, 'f', 0, 64)
		}
		t = append(t, plot.Tick{Value: x, Label: label})
	}
	return t
}
