// Package hf takes the inventory of a HuggingFace model folder: config.json (parsed),
// generation_config.json (optional), the tokenizer files (located, not parsed) and the
// safetensors checkpoint (headers checked, tensors mapped, no weight bytes read). Whether the
// architecture is supported is decided by runtime/arch, not here.
package hf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gquant/gquant/formats/safetensors"
)

// File names inside a model folder.
const (
	ConfigName           = "config.json"
	GenerationConfigName = "generation_config.json"
	TokenizerName        = "tokenizer.json"
	TokenizerConfigName  = "tokenizer_config.json"
)

// Model is the inventory of a HuggingFace model folder.
type Model struct {
	Dir                 string
	Config              *Config
	GenerationConfig    map[string]any // nil when the folder has no generation_config.json
	TokenizerPath       string         // tokenizer.json
	TokenizerConfigPath string         // tokenizer_config.json, "" when absent
	Checkpoint          *safetensors.Checkpoint
}

// Open takes the inventory of the model folder dir. It fails, listing every problem in one
// line, when config.json is missing, not JSON or names no architecture, when tokenizer.json
// is missing, when there is no safetensors checkpoint, or when the checkpoint has problems.
func Open(dir string) (*Model, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, pathErr(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory, want a HuggingFace model folder", dir)
	}
	m := &Model{Dir: dir}
	var problems []string
	note := func(err error) {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}

	m.Config, err = readConfig(filepath.Join(dir, ConfigName))
	note(err)
	m.GenerationConfig, err = readOptionalJSON(filepath.Join(dir, GenerationConfigName))
	note(err)

	m.TokenizerPath = filepath.Join(dir, TokenizerName)
	if !isFile(m.TokenizerPath) {
		note(fmt.Errorf("%s: missing: the model folder has no tokenizer", m.TokenizerPath))
	}
	if p := filepath.Join(dir, TokenizerConfigName); isFile(p) {
		m.TokenizerConfigPath = p
	}

	if err := hasCheckpoint(dir); err != nil {
		note(err)
	} else {
		m.Checkpoint, err = safetensors.Open(dir)
		note(err)
	}

	if len(problems) > 0 {
		m.Close()
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return m, nil
}

// Close releases the checkpoint's mappings.
func (m *Model) Close() error {
	if m.Checkpoint == nil {
		return nil
	}
	return m.Checkpoint.Close()
}

// readConfig reads and parses config.json.
func readConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing: a HuggingFace model folder needs one", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, pathErr(err))
	}
	return ParseConfig(path, data)
}

// readOptionalJSON reads a JSON object file; absent is not an error (nil map).
func readOptionalJSON(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, pathErr(err))
	}
	m, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Files lists the files of the model folder dir that gquant reads (those present): config.json,
// generation_config.json, the tokenizer files, the safetensors index and every *.safetensors
// file. A command refuses to write over any of them.
func Files(dir string) []string {
	var files []string
	for _, name := range []string{ConfigName, GenerationConfigName, TokenizerName, TokenizerConfigName, safetensors.IndexName} {
		if p := filepath.Join(dir, name); isFile(p) {
			files = append(files, p)
		}
	}
	st, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	return append(files, st...)
}

// hasCheckpoint explains the absence of safetensors weights, naming PyTorch files if found.
func hasCheckpoint(dir string) error {
	st, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(st) > 0 || isFile(filepath.Join(dir, safetensors.IndexName)) {
		return nil
	}
	for _, other := range []string{"pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "consolidated.00.pth"} {
		if isFile(filepath.Join(dir, other)) {
			return fmt.Errorf("%s: no *.safetensors files (found %s: convert the PyTorch weights to safetensors first)", dir, other)
		}
	}
	return fmt.Errorf("%s: no *.safetensors files", dir)
}

// isFile reports whether path is an existing regular file (or a link to one).
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// pathErr drops the *PathError wrapper, whose text repeats the path.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
