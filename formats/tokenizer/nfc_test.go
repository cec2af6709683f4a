package tokenizer

import (
	"encoding/json"
	"os"
	"testing"
)

// TestNFC compares with Python's unicodedata.normalize("NFC", ...) (values
// computed with Python 3 outside this repository and written here).
func TestNFC(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain ASCII", "plain ASCII"},
		{"e\u0301", "\u00e9"},
		{"A\u030a", "\u00c5"},
		{"\u212b", "\u00c5"},              // ANGSTROM SIGN (singleton)
		{"a\u0323\u0302", "\u1ead"},       // ạ + circumflex -> ậ
		{"a\u0302\u0323", "\u1ead"},       // reordered first
		{"\u1100\u1161\u11a8", "\uac01"},  // Hangul L V T -> 각
		{"\uac00\u11a8", "\uac01"},        // LV + T
		{"\u0958", "\u0915\u093c"},        // composition exclusion
		{"\u0344", "\u0308\u0301"},        // non-starter decomposition
		{"\u0301e", "\u0301e"},            // leading non-starter
		{"e\u0327\u0301", "\u0229\u0301"}, // ȩ then acute (blocked? no: ȩ́ has no precomposed)
		{"日本語のテキスト が", "日本語のテキスト が"},     // already NFC (が is precomposed)
		{"\u304b\u3099", "\u304c"},       // か + dakuten -> が
		{"\u1e0a\u0323", "\u1e0c\u0307"}, // Ḋ + dot below -> Ḍ + dot above
	}
	for _, c := range cases {
		if got := nfc(c.in); got != c.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}

// TestNFCPython compares with 400 random strings normalized by Python's
// unicodedata (testdata/nfc_python.json; see testdata/README.md).
func TestNFCPython(t *testing.T) {
	data, err := os.ReadFile("testdata/nfc_python.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases [][2]string `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 100 {
		t.Fatalf("only %d cases", len(f.Cases))
	}
	bad := 0
	for _, c := range f.Cases {
		if got := nfc(c[0]); got != c[1] {
			bad++
			if bad <= 5 {
				t.Errorf("nfc(%+q) = %+q, want %+q", c[0], got, c[1])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d differ", bad, len(f.Cases))
	}
}
