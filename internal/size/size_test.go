package size

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "123": 123, "7B": 7, "10K": 10_000, "10KB": 10_000, "5MB": 5_000_000, "500M": 500_000_000,
		"2G": 2_000_000_000, "2g": 2_000_000_000, "1T": 1e12, "2GiB": 2 << 30, "512MiB": 512 << 20, "3kib": 3072,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5GB", "99999999999GB", "G", "5 M B", "9223372036854775807K"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded", in)
		}
	}
}
