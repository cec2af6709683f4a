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

// TestAgainst: --against compares the other series with one, label by label (KL and ratio,
// empty where a series lacks the label), and names an unknown series as a usage error.
func TestAgainst(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "p.csv")
	rows := "series,label,bpw_linear,bpw,kl_mean,kl_mean_err\n" +
		"llama,Q3_K_M,3.85,3.9,0.016,0.0004\nllama,Q4_K_M,4.8,4.9,0.0054,0.0002\n" +
		"gquant,Q4_K_M,4.8,4.88,0.0027,0.0001\nother,Q3_K_M,3.8,3.9,0.012,0.0003\n"
	if err := os.WriteFile(csv, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"--from", csv, "--table", "--against", "llama"}, &out); err != nil {
		t.Fatal(err)
	}
	want := "| label | bpw linear | llama | gquant | ratio | other | ratio |\n|---|---|---|---|---|---|---|\n" +
		"| Q3_K_M | 3.8500 | 0.016000 | |  | 0.012000 | 0.75 |\n" +
		"| Q4_K_M | 4.8000 | 0.005400 | 0.002700 | 0.50 | |  |\n"
	if out.String() != want {
		t.Errorf("comparison:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := run([]string{"--from", csv, "--table", "--against", "llama", "--plot", "gquant"}, &out); err != nil || strings.Contains(out.String(), "other") {
		t.Errorf("--plot gquant: %v\n%s", err, out.String())
	}
	for _, bad := range [][]string{{"--from", csv, "--table", "--against", "nope"}, {"--from", csv, "--against", "llama"}} {
		if err := run(bad, &out); err == nil {
			t.Errorf("%q accepted", bad)
		} else if _, ok := err.(usageError); !ok {
			t.Errorf("%q: %v is not a usage error", bad, err)
		}
	}
}
