package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/pflag"

	"github.com/gquant/gquant/formats/hf"
	"github.com/gquant/gquant/internal/atomicfile"
	"github.com/gquant/gquant/internal/problems"
)

// stdoutName is the output name that means standard output (--json -).
const stdoutName = "-"

// addJSONFlag registers --json FILE, the same in every verb: FILE, or - for standard output.
func addJSONFlag(f *pflag.FlagSet, p *string, what string) {
	f.StringVar(p, "json", "", "write "+what+" as JSON to FILE (-: standard output)")
}

// writeJSON writes v as indented JSON to path: "-" is stdout, anything else a file written
// through a temporary file.
func writeJSON(stdout io.Writer, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == stdoutName {
		_, err := stdout.Write(b)
		return err
	}
	return atomicfile.WriteFile(path, b)
}

// checkOutputs is run by every verb before it starts work: each output (empty and "-" are
// skipped) must be new, or force given, and none may be one of the inputs (a model folder
// stands for the files gquant reads in it, a split GGUF for all its parts) or another output.
func checkOutputs(force bool, inputs []string, outputs ...string) error {
	var files []string
	for _, in := range inputs {
		files = append(files, inputFiles(in)...)
	}
	return atomicfile.CheckOutputs(force, files, outputs...)
}

// splitPart matches the first part of a split GGUF ("-00001-of-00003.gguf").
var splitPart = regexp.MustCompile(`-00001-of-(\d{5})\.gguf$`)

// inputFiles expands one input path to the files it reads.
func inputFiles(path string) []string {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return hf.Files(path)
	}
	if m := splitPart.FindStringSubmatch(path); m != nil {
		prefix := path[:len(path)-len(m[0])]
		parts, _ := filepath.Glob(prefix + "-*-of-" + m[1] + ".gguf")
		return append(parts, path)
	}
	return []string{path}
}

// optionErr names the verb in front of an option error from a library (problems.Usage: it
// exits 2, as a flag error does); other errors pass as they are.
func optionErr(verb string, err error) error {
	var ue *problems.UsageError
	if errors.As(err, &ue) {
		return usageErr("%s: %v", verb, err)
	}
	return err
}

// threadsFlag registers --threads, the same in every verb.
func addThreadsFlag(f *pflag.FlagSet, p *int) {
	f.IntVar(p, "threads", 0, "worker threads (0: one per CPU)")
}

// checkThreads refuses a negative --threads.
func checkThreads(verb string, n int) error {
	if n < 0 {
		return usageErr("%s: --threads: %d is negative (0: one per CPU)", verb, n)
	}
	return nil
}
