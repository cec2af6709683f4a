package verify

import (
	"bytes"
	"encoding/base64"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func writeHTML(t *testing.T, r *Report) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	if err := r.WriteHTML(path); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the output folder, want 1 (a temporary file left?)", len(entries))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dataURIs finds the embedded images (html/template writes "+" as "&#43;" in attributes).
var dataURIs = regexp.MustCompile(`src="data:image/png;base64,([^"]+)"`)

// The page holds the summary, the thresholds with their verdicts, a row per block, the greedy
// results and both plots as PNG data URIs, and loads nothing from elsewhere.
func TestHTMLContent(t *testing.T) {
	r := synthReport(36)
	r.Notes = []string{"a note"}
	s := writeHTML(t, r)
	for _, want := range []string{
		"<!DOCTYPE html>", "out/model-q4_k_m.gguf", "models/ref", "4.8500 bpw", "linear layers 4.5000 bpw",
		"FAILED", "--min-snr", "30 dB", "27.50 dB", "--max-kl", "0.05 nats", "--min-top1",
		"27.50 dB", "41.20 dB", "0.021300 ± 0.000400 nats", "93.000 ± 0.500 %", "1/3 exact",
		"token 2", "token 5", "a note", "gquant verify out/model.gguf --ref models/ref", "sha256 ab12",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if got := strings.Count(s, `<td class="fail">FAIL</td>`); got != 1 {
		t.Errorf("%d failed thresholds shown, want 1", got)
	}
	if got := strings.Count(s, `<td class="pass">pass</td>`); got != 2 {
		t.Errorf("%d passed thresholds shown, want 2", got)
	}
	if got := strings.Count(s, `<span class="bar"`); got != 36 {
		t.Errorf("%d block rows, want 36", got)
	}
	if !strings.Contains(s, `<tr class="worst"><td class="num">34</td><td class="num">-3.46</td>`) {
		t.Error("the lowest block (34) is not marked")
	}
	imgs := dataURIs.FindAllStringSubmatch(s, -1)
	if len(imgs) != 2 {
		t.Fatalf("%d embedded PNGs, want 2", len(imgs))
	}
	for _, m := range imgs {
		b, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		decodePNG(t, b)
	}
	for _, bad := range []string{"http:", "https:", "<link", "<script", "@import", "url("} {
		if strings.Contains(s, bad) {
			t.Errorf("the page is not self-contained: %q", bad)
		}
	}
}

// Everything that comes from the report is escaped.
func TestHTMLEscapes(t *testing.T) {
	r := synthReport(3)
	r.Artifact.Path = `out/<script>alert("a")</script>.gguf`
	r.Reference.Path = `ref&<b>bold</b>`
	r.Command = `gquant verify '<script>x</script>'`
	r.Notes = []string{`<img src=x onerror=alert(1)>`}
	r.Inputs = map[string]string{`<script>in</script>`: `"><script>`}
	r.Logits = newLogitsSNR(27.5, 41.2, "")
	s := writeHTML(t, r)
	if strings.Contains(s, "<script") || strings.Contains(s, "<b>") || strings.Contains(s, "<img src=x") {
		t.Errorf("unescaped markup from the report:\n%s", s)
	}
	for _, want := range []string{"out/&lt;script&gt;alert(&#34;a&#34;)&lt;/script&gt;.gguf", "ref&amp;&lt;b&gt;bold&lt;/b&gt;",
		"&lt;img src=x onerror=alert(1)&gt;", "&lt;script&gt;in&lt;/script&gt;"} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// The same report gives the same bytes; without thresholds the verdict says so.
func TestHTMLDeterministic(t *testing.T) {
	a, b := writeHTML(t, synthReport(36)), writeHTML(t, synthReport(36))
	if a != b {
		t.Error("two pages of the same report differ")
	}
	if p := os.Getenv("GQUANT_HTML_OUT"); p != "" { // look at it
		os.WriteFile(p, []byte(a), 0o644)
	}
	r := synthReport(2)
	r.Thresholds, r.Passed, r.Greedy, r.Layers = nil, true, nil, nil
	s := writeHTML(t, r)
	if !strings.Contains(s, "no thresholds set") || strings.Contains(s, "<h2>Thresholds</h2>") || strings.Contains(s, "<h2>SNR after each block</h2>") {
		t.Error("a report without thresholds or blocks")
	}
	if !bytes.Contains([]byte(s), []byte("</html>\n")) {
		t.Error("the page does not end with </html>")
	}
}
