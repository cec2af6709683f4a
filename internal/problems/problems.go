// Package problems joins the problems one check finds into one error message.
package problems

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Join joins ps with "; ", keeping at most limit of them and counting the rest:
// "a; b; and 3 more problems".
func Join(ps []string, limit int) string {
	if len(ps) > limit {
		return strings.Join(ps[:limit], "; ") + fmt.Sprintf("; and %d more problems", len(ps)-limit)
	}
	return strings.Join(ps, "; ")
}

// First keeps the first n of s and counts the rest as one more entry ("and 3 more"), for
// lists joined by the caller.
func First(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string(nil), s[:n]...), fmt.Sprintf("and %d more", len(s)-n))
}

// UsageError marks an error in how a tool was asked to run (an option's value), not in its
// input: commands exit 2 for it, as for a bad flag.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError (nil stays nil).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{err}
}

// Printable returns s for a one-line error or a terminal: as is when it is valid UTF-8 made of
// printable characters, quoted with Go escapes otherwise (a hostile name may hold newlines or
// terminal escapes).
func Printable(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
