package amxemu

import "testing"

// ObjdumpText runs GNU objdump with args for the external tests and returns the normalized
// text of each instruction it lists (skipping the test when objdump is missing).
func ObjdumpText(t testing.TB, args ...string) []string {
	t.Helper()
	var texts []string
	for _, l := range objdump(t, args...) {
		texts = append(texts, l.text)
	}
	return texts
}

// ObjdumpRawText disassembles raw x86-64 machine code with GNU objdump for the external tests
// (see ObjdumpText).
func ObjdumpRawText(t testing.TB, code []byte) []string {
	t.Helper()
	var texts []string
	for _, l := range objdumpRaw(t, code) {
		texts = append(texts, l.text)
	}
	return texts
}
