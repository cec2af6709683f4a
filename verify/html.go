package verify

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/gquant/gquant/internal/atomicfile"
)

// WriteHTML writes the report as one self-contained HTML page through a temporary file: the
// verdict, the thresholds Apply recorded with pass or fail, the summary (artifact, reference,
// protocol, every metric), the plots WritePlot draws (PNG data URIs), the per-block SNR table,
// the greedy results, the notes and the inputs. The page loads nothing from elsewhere; every
// string from the report is escaped. The same report gives the same bytes.
func (r *Report) WriteHTML(path string) error {
	b, err := r.html()
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return atomicfile.WriteFile(path, b)
}

// htmlRow is one line of a two- or three-column table.
type htmlRow struct {
	Name, Value, Note string
	Class             string // "pass", "fail" or ""
}

type htmlThreshold struct {
	Key, Flag, Limit, Value, Verdict, Class string
}

type htmlLayer struct {
	Index      int
	SNR, Delta string
	Class      string  // "worst" for the lowest block
	BarPx      float64 // the bar's width, htmlBarPx for the highest finite SNR
}

type htmlPrompt struct {
	Index           int
	FirstDivergence string
	RefLength       int
	Class           string
}

type htmlPage struct {
	Title      string
	Verdict    string
	VerdictCSS string
	Thresholds []htmlThreshold
	Summary    []htmlRow
	Metrics    []htmlRow
	SNRPlot    template.URL
	KLPlot     template.URL
	Layers     []htmlLayer
	Prompts    []htmlPrompt
	Notes      []string
	Command    string
	Version    string
	Schema     string
	Inputs     []htmlRow
}

// thresholdFlags names the command-line flag of each key Apply records.
var thresholdFlags = map[string]struct{ flag, unit string }{
	"min_snr_db": {"--min-snr", " dB"},
	"max_kl":     {"--max-kl", " nats"},
	"min_top1":   {"--min-top1", ""},
}

func (r *Report) html() ([]byte, error) {
	snr, err := r.snrPNG()
	if err != nil {
		return nil, err
	}
	kl, err := r.klPNG()
	if err != nil {
		return nil, err
	}
	pg := htmlPage{
		Title:   "gquant verify: " + r.Artifact.Path,
		SNRPlot: dataURI(snr),
		KLPlot:  dataURI(kl),
		Notes:   r.Notes,
		Command: r.Command,
		Version: r.GquantVersion,
		Schema:  r.Schema,
	}
	switch {
	case len(r.Thresholds) == 0:
		pg.Verdict, pg.VerdictCSS = "no thresholds set (--min-snr, --max-kl, --min-top1)", "none"
	case r.Passed:
		pg.Verdict, pg.VerdictCSS = "PASSED: every threshold holds", "pass"
	default:
		pg.Verdict, pg.VerdictCSS = "FAILED: a threshold does not hold", "fail"
	}
	for _, k := range slices.Sorted(maps.Keys(r.Thresholds)) {
		t := r.Thresholds[k]
		f, ok := thresholdFlags[k]
		if !ok {
			f.flag = k
		}
		limit, v := fmt.Sprintf("%g%s", t.Limit, f.unit), fmtValue(float64(t.Value))+f.unit
		if k == "min_top1" { // a fraction in the report; people read the rate in percent
			limit = fmt.Sprintf("%g (%g %%)", t.Limit, 100*t.Limit)
			v = fmt.Sprintf("%s (%.3f %%)", fmtValue(float64(t.Value)), 100*float64(t.Value))
		}
		row := htmlThreshold{Key: k, Flag: f.flag, Limit: limit, Value: v, Verdict: "pass", Class: "pass"}
		if !t.Passed {
			row.Verdict, row.Class = "FAIL", "fail"
		}
		pg.Thresholds = append(pg.Thresholds, row)
	}

	add := func(rows *[]htmlRow, name, value, note string) {
		*rows = append(*rows, htmlRow{Name: name, Value: value, Note: note})
	}
	a := r.Artifact
	add(&pg.Summary, "artifact", a.Path, "")
	add(&pg.Summary, "bits per weight", fmt.Sprintf("%.4f bpw", a.BPW), fmt.Sprintf("linear layers %.4f bpw", a.BPWLinear))
	if e := a.ActivationEncodings; e != nil {
		add(&pg.Summary, "activation encodings", fmt.Sprintf("%d of %d simulated", e.Simulated, e.InFile), "static encodings of the gqf file")
	}
	ref := r.Reference
	if ref.Path != "" {
		note := ""
		if ref.BPW != 0 {
			note = fmt.Sprintf("%.4f bpw (linear layers %.4f bpw)", ref.BPW, ref.BPWLinear)
		}
		add(&pg.Summary, "reference", ref.Path, note)
	}
	if ref.Logits != "" {
		add(&pg.Summary, "stored reference", ref.Logits, "log-probabilities file")
	}
	pr := r.Protocol
	add(&pg.Summary, "protocol", fmt.Sprintf("%d windows of %d tokens", pr.Chunks, pr.Ctx),
		fmt.Sprintf("positions %d–%d scored, BOS %d, KL %s", pr.First, pr.Ctx-2, pr.BOS, pr.KL))
	add(&pg.Summary, "tokens scored", fmt.Sprint(r.TokensScored), "")

	if r.Logits.Available() {
		add(&pg.Metrics, "logits SNR", r.Logits.SNR.String()+" dB", "energy: 10·log10(Σref² / Σ(ref−test)²)")
		add(&pg.Metrics, "logits PSNR", r.Logits.PSNR.String()+" dB", "peak: 20·log10(max|ref| / RMS error)")
	} else {
		add(&pg.Metrics, "logits SNR", "n/a", r.Logits.Note)
	}
	k := r.KL
	add(&pg.Metrics, "KL(ref‖test) mean", fmt.Sprintf("%.6f ± %.6f nats", k.Mean, k.MeanErr), "")
	add(&pg.Metrics, "KL median, p90", fmt.Sprintf("%.6f, %.6f", k.Median, k.P90), "")
	add(&pg.Metrics, "KL p99, p99.9, max", fmt.Sprintf("%.6f, %.6f, %.6f", k.P99, k.P999, k.Max), "")
	add(&pg.Metrics, "same top-1", fmt.Sprintf("%.3f ± %.3f %%", 100*r.Top1, 100*r.Top1Err), "")
	add(&pg.Metrics, "Δp", fmt.Sprintf("mean %.3f ± %.3f %%, RMS %.3f %%", 100*r.DeltaP.Mean, 100*r.DeltaP.MeanErr, 100*r.DeltaP.RMS), "p_test(next) − p_ref(next)")
	add(&pg.Metrics, "perplexity", fmt.Sprintf("ref %.4f, test %.4f", r.PPL.Ref, r.PPL.Test), fmt.Sprintf("ratio %.5f", r.PPL.Ratio))
	if g := r.Greedy; g != nil {
		add(&pg.Metrics, "greedy", fmt.Sprintf("%d/%d exact", g.Exact, g.Prompts), fmt.Sprintf("continuations of %d tokens reproduced token for token", g.Gen))
		for i, d := range g.FirstDivergence {
			p := htmlPrompt{Index: i, FirstDivergence: "exact", Class: "pass"}
			if d != nil {
				p.FirstDivergence, p.Class = fmt.Sprintf("token %d", *d), "fail"
			}
			if i < len(g.RefLength) {
				p.RefLength = g.RefLength[i]
			}
			pg.Prompts = append(pg.Prompts, p)
		}
	}

	pg.Layers = htmlLayers(r.Layers)
	paths := make([]string, 0, len(r.Inputs))
	for p := range r.Inputs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		add(&pg.Inputs, p, r.Inputs[p], "")
	}
	var buf bytes.Buffer
	if err := htmlTemplate.Execute(&buf, pg); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// htmlLayers makes the per-block rows: the SNR, its change from the block before, and a bar
// scaled to the highest finite SNR; the lowest block is marked.
const htmlBarPx = 240

func htmlLayers(ls []LayerSNR) []htmlLayer {
	top, worst := 0.0, -1
	for i, l := range ls {
		v := float64(l.SNR)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		top = math.Max(top, v)
		if worst < 0 || v < float64(ls[worst].SNR) {
			worst = i
		}
	}
	out := make([]htmlLayer, len(ls))
	for i, l := range ls {
		v := float64(l.SNR)
		row := htmlLayer{Index: l.Index, SNR: l.SNR.String()}
		if i > 0 {
			d := v - float64(ls[i-1].SNR)
			if !math.IsNaN(d) && !math.IsInf(d, 0) {
				row.Delta = fmt.Sprintf("%+.2f", d)
			}
		}
		switch {
		case math.IsInf(v, 1):
			row.BarPx = htmlBarPx
		case top > 0 && v > 0:
			row.BarPx = math.Round(10*htmlBarPx*v/top) / 10
		}
		if i == worst {
			row.Class = "worst"
		}
		out[i] = row
	}
	return out
}

func dataURI(png []byte) template.URL {
	// Base64 has no character a URL attribute must escape, so the URI is safe as it is.
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))
}

var htmlTemplate = template.Must(template.New("report").Parse(strings.TrimSpace(`
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; word-break: break-all; }
h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 0.2em 0.8em; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #666; }
.verdict { display: inline-block; padding: 0.4em 1em; border-radius: 4px; font-weight: bold; }
.verdict.pass { background: #e3f4e3; color: #1b6e1b; }
.verdict.fail { background: #fbe3e3; color: #a41c1c; }
.verdict.none { background: #eee; color: #444; }
td.pass { color: #1b6e1b; font-weight: bold; }
td.fail { color: #a41c1c; font-weight: bold; }
tr.worst td { background: #fff4e0; }
.bar { background: #4c78a8; height: 0.8em; display: inline-block; }
img { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
code, pre { font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; word-break: break-all; white-space: pre-wrap; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="verdict {{.VerdictCSS}}">{{.Verdict}}</p>
{{- if .Thresholds}}
<h2>Thresholds</h2>
<table>
<tr><th>threshold</th><th>flag</th><th>limit</th><th>measured</th><th>result</th></tr>
{{- range .Thresholds}}
<tr><td>{{.Key}}</td><td><code>{{.Flag}}</code></td><td class="num">{{.Limit}}</td><td class="num">{{.Value}}</td><td class="{{.Class}}">{{.Verdict}}</td></tr>
{{- end}}
</table>
{{- end}}
<h2>Summary</h2>
<table>
{{- range .Summary}}
<tr><th>{{.Name}}</th><td>{{.Value}}</td><td class="note">{{.Note}}</td></tr>
{{- end}}
</table>
<h2>Metrics</h2>
<table>
{{- range .Metrics}}
<tr><th>{{.Name}}</th><td class="num">{{.Value}}</td><td class="note">{{.Note}}</td></tr>
{{- end}}
</table>
<h2>Plots</h2>
<img src="{{.SNRPlot}}" alt="SNR per block and of the logits, dB, with the --min-snr threshold">
<img src="{{.KLPlot}}" alt="histogram of KL(ref || test) per scored position, with the mean and the --max-kl threshold">
{{- if .Layers}}
<h2>SNR after each block</h2>
<table>
<tr><th>block</th><th>SNR, dB</th><th>change</th><th></th></tr>
{{- range .Layers}}
<tr class="{{.Class}}"><td class="num">{{.Index}}</td><td class="num">{{.SNR}}</td><td class="num">{{.Delta}}</td><td><span class="bar" style="width: {{printf "%.1f" .BarPx}}px"></span></td></tr>
{{- end}}
</table>
<p class="note">The highlighted row is the lowest SNR; change is from the block before, in dB.</p>
{{- end}}
{{- if .Prompts}}
<h2>Greedy continuations</h2>
<table>
<tr><th>prompt</th><th>first divergence</th><th>reference length</th></tr>
{{- range .Prompts}}
<tr><td class="num">{{.Index}}</td><td class="{{.Class}}">{{.FirstDivergence}}</td><td class="num">{{.RefLength}}</td></tr>
{{- end}}
</table>
{{- end}}
{{- if .Notes}}
<h2>Notes</h2>
<ul>
{{- range .Notes}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
<h2>Run</h2>
<table>
{{- if .Command}}
<tr><th>command</th><td><code>{{.Command}}</code></td></tr>
{{- end}}
{{- if .Version}}
<tr><th>gquant</th><td>{{.Version}}</td></tr>
{{- end}}
<tr><th>schema</th><td>{{.Schema}}</td></tr>
{{- range .Inputs}}
<tr><th>input</th><td><code>{{.Name}}</code><br><span class="note">sha256 {{.Value}}</span></td></tr>
{{- end}}
</table>
</body>
</html>
`) + "\n"))
