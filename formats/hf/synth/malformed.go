package synth

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gquant/gquant/formats/safetensors"
)

// microSpec is the small model each malformed case starts from.
var microSpec = Spec{Arch: Llama, Hidden: 32, Intermediate: 64, Layers: 1, Heads: 2, KVHeads: 1,
	RopeTheta: 10000, RMSNormEps: 1e-5, MaxPositions: 128}

// malformedCase builds one broken model folder from a valid one and returns the text the
// error of opening it must contain.
type malformedCase func(dir string) (string, error)

// malformedCases is the catalogue; each name is also the case's folder name.
var malformedCases = map[string]malformedCase{
	"truncated-file": func(dir string) (string, error) {
		p := filepath.Join(dir, "model.safetensors")
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		// model.norm.weight (32 bf16 = 64 bytes) is the last tensor of the data section
		const cut = 10
		data := fi.Size() - headerEnd(p)
		want := fmt.Sprintf("model.safetensors: model.norm.weight: data_offsets [%d, %d] run past the end of the data section (%d bytes)", data-64, data, data-cut)
		return want, os.Truncate(p, fi.Size()-cut)
	},
	"header-length-past-end": func(dir string) (string, error) {
		p := filepath.Join(dir, "model.safetensors")
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		n := uint64(len(b)) // one byte more than can follow the 8-byte length
		binary.LittleEndian.PutUint64(b, n)
		want := fmt.Sprintf("model.safetensors: header length %d runs past the end of the file (%d bytes)", n, len(b))
		return want, os.WriteFile(p, b, 0o644)
	},
	"bad-json-header": func(dir string) (string, error) {
		p := filepath.Join(dir, "model.safetensors")
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		b[8] = '[' // the header's opening brace
		return "model.safetensors: header: not valid JSON", os.WriteFile(p, b, 0o644)
	},
	"overlapping-offsets": rawCase(`{"model.embed_tokens.weight":{"dtype":"BF16","shape":[4,4],"data_offsets":[0,32]},`+
		`"model.norm.weight":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}}`, 32,
		"model.safetensors: model.norm.weight: data_offsets [24, 32] overlap those of model.embed_tokens.weight [0, 32]"),
	"shape-bytes-mismatch": rawCase(`{"model.norm.weight":{"dtype":"BF16","shape":[8],"data_offsets":[0,8]}}`, 8,
		"model.safetensors: model.norm.weight: shape [8] of BF16 needs 16 bytes but data_offsets [0, 8] hold 8"),
	"unknown-dtype": rawCase(`{"model.norm.weight":{"dtype":"I64","shape":[4],"data_offsets":[0,32]}}`, 32,
		"model.safetensors: model.norm.weight: unsupported dtype I64"),
	"fp8-dtype": rawCase(`{"model.norm.weight":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}`, 4,
		"model.safetensors: model.norm.weight: unsupported dtype F8_E4M3"),
	"missing-shard": func(dir string) (string, error) {
		last, err := shardOf(dir, "model.norm.weight")
		if err != nil {
			return "", err
		}
		return safetensors.IndexName + ": " + last + ": shard file not found", os.Remove(filepath.Join(dir, last))
	},
	"tensor-twice-in-index": func(dir string) (string, error) {
		last, err := shardOf(dir, "model.norm.weight")
		if err != nil {
			return "", err
		}
		dup := fmt.Sprintf("\"weight_map\": {\n    \"model.norm.weight\": %q,", last)
		return safetensors.IndexName + ": model.norm.weight: listed twice in weight_map", editFile(filepath.Join(dir, safetensors.IndexName), `"weight_map": {`, dup)
	},
	"tensor-missing-from-index": func(dir string) (string, error) {
		last, err := shardOf(dir, "model.norm.weight")
		if err != nil {
			return "", err
		}
		entry := fmt.Sprintf("    \"model.norm.weight\": %q\n", last)
		// model.norm.weight sorts last in weight_map: drop its line and the comma before it
		if err := editFile(filepath.Join(dir, safetensors.IndexName), ",\n"+entry, "\n"); err != nil {
			return "", err
		}
		return last + ": model.norm.weight: tensor is in the shard but missing from the index", nil
	},
	"no-config": func(dir string) (string, error) {
		return "config.json: missing", os.Remove(filepath.Join(dir, "config.json"))
	},
	"config-not-json": func(dir string) (string, error) {
		return "config.json: not valid JSON", os.WriteFile(filepath.Join(dir, "config.json"), []byte("{\"architectures\": [\"LlamaForCausalLM\"],\n}"), 0o644)
	},
	"config-without-architectures": func(dir string) (string, error) {
		return "config.json: architectures: missing", editFile(filepath.Join(dir, "config.json"), `"architectures"`, `"_architectures"`)
	},
	"config-empty-architectures": func(dir string) (string, error) {
		return "config.json: architectures: empty list", os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": []}`), 0o644)
	},
	"no-tokenizer": func(dir string) (string, error) {
		return "tokenizer.json: missing", os.Remove(filepath.Join(dir, "tokenizer.json"))
	},
	"no-safetensors": func(dir string) (string, error) {
		return filepath.Base(dir) + ": no *.safetensors files", os.Remove(filepath.Join(dir, "model.safetensors"))
	},
}

// shardedCases start from a sharded model.
var shardedCases = map[string]bool{"missing-shard": true, "tensor-twice-in-index": true, "tensor-missing-from-index": true}

// WriteMalformed writes the catalogue of malformed model folders, one sub-folder of dir per
// case, each a valid micro model with one defect. It returns, per case name (the folder
// name), a text that the error of opening the folder (formats/hf.Open) must contain; the
// texts name the file, and the tensor or key where there is one.
func WriteMalformed(dir string) (map[string]string, error) {
	want := make(map[string]string, len(malformedCases))
	for name, build := range malformedCases {
		caseDir := filepath.Join(dir, name)
		opts := Options{Seed: 1, Force: true}
		if shardedCases[name] {
			opts.ShardSize = 16 << 10 // a few shards
		}
		if err := Generate(caseDir, microSpec, opts); err != nil {
			return nil, err
		}
		w, err := build(caseDir)
		if err != nil {
			return nil, fmt.Errorf("synth: malformed case %s: %w", name, err)
		}
		want[name] = w
	}
	return want, nil
}

// rawCase replaces model.safetensors by a hand-written file: header text plus data bytes.
func rawCase(header string, dataLen int, want string) malformedCase {
	return func(dir string) (string, error) {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
		b = append(b, header...)
		b = append(b, make([]byte, dataLen)...)
		return want, os.WriteFile(filepath.Join(dir, "model.safetensors"), b, 0o644)
	}
}

// headerEnd returns where the data section of a safetensors file starts (0 on error).
func headerEnd(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var n [8]byte
	if _, err := f.ReadAt(n[:], 0); err != nil {
		return 0
	}
	return 8 + int64(binary.LittleEndian.Uint64(n[:]))
}

// shardOf returns the shard that a sharded folder's index assigns a tensor to.
func shardOf(dir, tensor string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, safetensors.IndexName))
	if err != nil {
		return "", err
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return "", err
	}
	shard, ok := index.WeightMap[tensor]
	if !ok {
		return "", fmt.Errorf("%s: %s not in the index", dir, tensor)
	}
	return shard, nil
}

// editFile replaces the first occurrence of old in a file, which must contain it.
func editFile(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	if !strings.Contains(s, old) {
		return fmt.Errorf("%s: %q not found", path, old)
	}
	return os.WriteFile(path, []byte(strings.Replace(s, old, new, 1)), 0o644)
}
