package hf

import (
	"slices"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	text := `{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "big": 9007199254740993,
  "theta": 1e6, "two": 2.0, "half": 0.5, "eos_token_id": [151645, 151643], "bos_token_id": 151643,
  "rope_scaling": {"rope_type": "llama3", "factor": 32.0}, "flag": true, "name": "x", "nul": null}`
	c, err := ParseConfig("config.json", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := c.Int("hidden_size"); !ok || i != 1024 {
		t.Errorf("hidden_size %d", i)
	}
	if i, ok := c.Int("big"); !ok || i != 9007199254740993 { // exact beyond float64
		t.Errorf("big %d", i)
	}
	if i, ok := c.Int("theta"); !ok || i != 1000000 {
		t.Errorf("theta %d", i)
	}
	if _, ok := c.Int("half"); ok {
		t.Error("Int(0.5) succeeded")
	}
	if f, ok := c.Float("half"); !ok || f != 0.5 {
		t.Error("Float")
	}
	if l, ok := c.Ints("eos_token_id"); !ok || !slices.Equal(l, []int{151645, 151643}) {
		t.Errorf("Ints %v", l)
	}
	if l, ok := c.Ints("bos_token_id"); !ok || !slices.Equal(l, []int{151643}) {
		t.Errorf("Ints %v", l)
	}
	if b, ok := c.Bool("flag"); !ok || !b {
		t.Error("Bool")
	}
	if _, ok := c.String("hidden_size"); ok {
		t.Error("String of a number")
	}
	if _, ok := c.Int("missing"); ok || c.Has("nul") {
		t.Error("missing/null keys")
	}
	rs, ok := c.Sub("rope_scaling")
	if !ok {
		t.Fatal("Sub")
	}
	if f, _ := rs.Float("factor"); f != 32 {
		t.Errorf("factor %g", f)
	}
	if got := rs.Err("factor", "too big").Error(); got != "config.json: rope_scaling.factor: too big" {
		t.Errorf("Sub Err %q", got)
	}
	if s, _ := c.Strings("architectures"); !slices.Equal(s, []string{"Qwen3ForCausalLM"}) {
		t.Error("Strings")
	}
	if k := c.Keys(); !slices.IsSorted(k) || len(k) != 12 {
		t.Errorf("Keys %v", k)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := map[string]string{
		"{\n  \"a\": 1,\n}":                 "config.json: not valid JSON: invalid character '}' looking for beginning of object key string (line 3, column 1)",
		`[1]`:                               "config.json: is a list, want a JSON object",
		`{"model_type": "llama"}`:           "config.json: architectures: missing",
		`{"architectures": null}`:           "config.json: architectures: missing",
		`{"architectures": []}`:             "config.json: architectures: empty list",
		`{"architectures": [1]}`:            "config.json: architectures: entry 0 is a number, want a class name",
		`{"architectures": ["A"]} {}`:       "config.json: not valid JSON: data after the JSON value",
		``:                                  "config.json: not valid JSON: EOF",
		`{"architectures": {"a": "Llama"}}`: "config.json: architectures: is an object, want a list",
	}
	for text, want := range cases {
		_, err := ParseConfig("config.json", []byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
}

// FuzzConfig: ParseConfig never panics, errors are one line, and an accepted config has
// architectures and getters that work on every key.
//
//	go test -run='^$' -fuzz=FuzzConfig -fuzztime=30s ./formats/hf/
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "rope_scaling": {"factor": 8.0}}`))
	f.Add([]byte(`{"architectures": []}`))
	f.Add([]byte(`{"a": 1,}`))
	f.Add([]byte(`{"architectures": ["X"], "eos_token_id": [1, 2.5, "x"], "n": 1e400, "m": -0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("config.json", data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error not on one line: %q", err)
			}
			return
		}
		if len(c.Architectures) == 0 {
			t.Fatal("accepted without architectures")
		}
		for _, k := range c.Keys() {
			c.Int(k)
			c.Ints(k)
			c.Float(k)
			c.Bool(k)
			c.String(k)
			c.Strings(k)
			if s, ok := c.Sub(k); ok {
				s.Keys()
			}
		}
	})
}
