// Package problems joins the problems one check finds into one error message.
package problems

import (
	"fmt"
	"strings"
)

// Join joins ps with "; ", keeping at most limit of them and counting the rest:
// "a; b; and 3 more problems".
func Join(ps []string, limit int) string {
	if len(ps) > limit {
		return strings.Join(ps[:limit], "; ") + fmt.Sprintf("; and %d more problems", len(ps)-limit)
	}
	return strings.Join(ps, "; ")
}
