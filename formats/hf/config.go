package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// Config is a parsed config.json. Raw keeps every key (numbers as json.Number, so integers
// stay exact); the getters read typed values. Which keys an architecture needs is decided by
// runtime/arch, not here.
type Config struct {
	Raw           map[string]any
	Architectures []string // non-empty in a config returned by ParseConfig

	path   string // the file, for error messages
	prefix string // "rope_scaling." inside a Sub config
}

// ParseConfig parses the text of a config.json. path names the file in errors. It fails when
// the text is not a JSON object or has no non-empty "architectures" list of strings.
func ParseConfig(path string, data []byte) (*Config, error) {
	raw, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := &Config{Raw: raw, path: path}
	v, ok := raw["architectures"]
	switch list, isList := v.([]any); {
	case !ok || v == nil:
		return nil, c.Err("architectures", "missing: cannot tell the model's architecture")
	case !isList:
		return nil, c.Err("architectures", "is %s, want a list of class names", kind(v))
	case len(list) == 0:
		return nil, c.Err("architectures", "empty list: cannot tell the model's architecture")
	default:
		for i, a := range list {
			s, isStr := a.(string)
			if !isStr || s == "" {
				return nil, c.Err("architectures", "entry %d is %s, want a class name", i, kind(a))
			}
			c.Architectures = append(c.Architectures, s)
		}
	}
	return c, nil
}

// decodeObject decodes JSON text that must be one object, numbers kept as json.Number.
// Syntax errors are located by line and column.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, tail := dec.Token(); tail != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset-1) // Offset is just past the offending byte
			return nil, fmt.Errorf("not valid JSON: %v (line %d, column %d)", se, line, col)
		}
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is %s, want a JSON object", kind(v))
	}
	return m, nil
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col + 1
}

// kind names a decoded JSON value's kind for error messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Path returns the file the config was read from.
func (c *Config) Path() string { return c.path }

// Err builds an error about a key, "<file>: <key>: <message>", the key qualified by the path
// of a Sub config ("rope_scaling.factor").
func (c *Config) Err(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s%s: %s", c.path, c.prefix, key, fmt.Sprintf(format, args...))
}

// Has reports whether the key is present and not null.
func (c *Config) Has(key string) bool { return c.Raw[key] != nil }

// Int returns an integer value. A float with an integral value (2.0) is accepted; ok is false
// when the key is absent, null, not a number or not integral.
func (c *Config) Int(key string) (int, bool) {
	return toInt(c.Raw[key])
}

func toInt(v any) (int, bool) {
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false
	}
	if i, err := n.Int64(); err == nil && i >= math.MinInt && i <= math.MaxInt {
		return int(i), true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// Ints returns a list of integers; a single integer is a list of one (as eos_token_id may be
// either).
func (c *Config) Ints(key string) ([]int, bool) {
	v := c.Raw[key]
	if i, ok := toInt(v); ok {
		return []int{i}, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int, len(list))
	for j, e := range list {
		if out[j], ok = toInt(e); !ok {
			return nil, false
		}
	}
	return out, true
}

// Float returns a numeric value.
func (c *Config) Float(key string) (float64, bool) {
	n, ok := c.Raw[key].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// Bool returns a boolean value.
func (c *Config) Bool(key string) (bool, bool) {
	b, ok := c.Raw[key].(bool)
	return b, ok
}

// String returns a string value.
func (c *Config) String(key string) (string, bool) {
	s, ok := c.Raw[key].(string)
	return s, ok
}

// Strings returns a list of strings.
func (c *Config) Strings(key string) ([]string, bool) {
	list, ok := c.Raw[key].([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], ok = e.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// Sub returns a nested object, such as rope_scaling or text_config, as a Config whose errors
// name its keys with the parent's ("rope_scaling.factor"). ok is false when the key is
// absent, null or not an object. The Sub config's Architectures is nil.
func (c *Config) Sub(key string) (*Config, bool) {
	m, ok := c.Raw[key].(map[string]any)
	if !ok {
		return nil, false
	}
	return &Config{Raw: m, path: c.path, prefix: c.prefix + key + "."}, true
}

// Keys returns the config's keys in sorted order.
func (c *Config) Keys() []string {
	keys := make([]string, 0, len(c.Raw))
	for k := range c.Raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
