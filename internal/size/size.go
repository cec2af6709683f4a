// Package size reads byte counts written the way llama.cpp's tools and people write them.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are tried longest first. K, M, G and T are decimal, as llama-gguf-split's
// --split-max-size reads M and G (500M = 500,000,000 bytes); KiB, MiB, GiB and TiB are binary.
var units = []struct {
	suffix string
	mult   int64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1},
}

// Parse reads a non-negative byte count: digits with an optional unit (case-insensitive):
// K/KB, M/MB, G/GB, T/TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024), or B.
func Parse(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, un := range units {
		if strings.HasSuffix(u, un.suffix) {
			u, mult = strings.TrimSuffix(u, un.suffix), un.mult
			break
		}
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (like 500M, 2G or 512MiB)", s)
	}
	return n * mult, nil
}
