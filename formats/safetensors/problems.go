package safetensors

import (
	"fmt"
	"strconv"
	"strings"
)

// Problem is one defect found while checking a checkpoint: the file it is in, the tensor or
// key it concerns (empty for the file as a whole) and what is wrong.
type Problem struct {
	File    string
	Subject string
	Message string
}

// String formats the problem as "<file>: <subject>: <message>".
func (p Problem) String() string {
	if p.Subject == "" {
		return p.File + ": " + p.Message
	}
	return p.File + ": " + quoteName(p.Subject) + ": " + p.Message
}

// maxListed bounds how many problems an Error spells out; the rest are counted.
const maxListed = 100

// Error lists every problem that one check found. Its message is one line, the problems
// joined with "; ".
type Error struct {
	Problems []Problem
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i == maxListed {
			fmt.Fprintf(&b, "; ... and %d more problems", len(e.Problems)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// problemList collects problems in the order they are found.
type problemList struct {
	list []Problem
}

// add records one problem; the message is formatted with fmt.Sprintf.
func (l *problemList) add(file, subject, format string, args ...any) {
	l.list = append(l.list, Problem{File: file, Subject: subject, Message: fmt.Sprintf(format, args...)})
}

// err returns nil when nothing was found, else an *Error holding every problem.
func (l *problemList) err() error {
	if len(l.list) == 0 {
		return nil
	}
	return &Error{Problems: l.list}
}

// quoteName keeps error messages on one line and unambiguous: a name with control
// characters, "; " or ": " is quoted.
func quoteName(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return strconv.Quote(s)
		}
	}
	if strings.Contains(s, "; ") || strings.Contains(s, ": ") {
		return strconv.Quote(s)
	}
	return s
}
