package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrontier: points read from verify reports go to a CSV that reads back the same, the
// PNG is the same bytes from either, and malformed arguments are usage errors.
func TestFrontier(t *testing.T) {
	dir := t.TempDir()
	var args []string
	for i, r := range []string{
		`{"artifact": {"bpw": 4.9, "bpw_linear": 4.8}, "kl": {"mean": 0.0054, "mean_err": 0.0002}}`,
		`{"artifact": {"bpw": 3.9, "bpw_linear": 3.85}, "kl": {"mean": 0.017, "mean_err": 0.0004}}`,
		`{"artifact": {"bpw": 4.9, "bpw_linear": 4.8}, "kl": {"mean": 0.0027, "mean_err": 0.0001}}`,
	} {
		p := filepath.Join(dir, string(rune('a'+i))+".json")
		if err := os.WriteFile(p, []byte(r), 0o644); err != nil {
			t.Fatal(err)
		}
		series := "llama.cpp:Q4_K_M"
		switch i {
		case 1:
			series = "llama.cpp:Q3_K_M"
		case 2:
			series = "gquant:4.8"
		}
		args = append(args, series+"="+p)
	}
	csv1, png1, png2 := filepath.Join(dir, "p.csv"), filepath.Join(dir, "1.png"), filepath.Join(dir, "2.png")
	var out bytes.Buffer
	if err := run(append([]string{"--csv", csv1, "--png", png1, "--table"}, args...), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| llama.cpp | Q3_K_M | 3.8500 | 3.9000 | 0.017000 ± 0.000400 |") {
		t.Errorf("table:\n%s", out.String())
	}
	if err := run([]string{"--from", csv1, "--png", png2}, &out); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(png1)
	b, _ := os.ReadFile(png2)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("the CSV's points drew another PNG than the reports'")
	}
	if err := run([]string{"--from", csv1, "--png", png2, "--x", "all"}, &out); err != nil {
		t.Fatal(err)
	}
	if c, _ := os.ReadFile(png2); bytes.Equal(a, c) {
		t.Error("--x all drew the same PNG")
	}
	for _, bad := range [][]string{{"nolabel=" + filepath.Join(dir, "a.json")}, {"s:l"}, {}, {"--from", csv1, "s:l=x"},
		{"--from", csv1, "--png", png2, "--x", "bogus"}, {"--from", csv1, "--png", png2, "--plot", "nope"}} {
		if err := run(bad, &out); err == nil {
			t.Errorf("%q accepted", bad)
		} else if _, ok := err.(usageError); !ok {
			t.Errorf("%q: %v is not a usage error", bad, err)
		}
	}
}
