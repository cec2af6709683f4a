// Package amxtest holds small amd64 assembly functions that execute Intel AMX instructions,
// written as BYTE sequences, for the tests of package amxemu. Each function is self-contained
// unless its comment says it works on the tile state left by another one. Nothing outside
// tests may use it: on a CPU without AMX every AMX instruction raises SIGILL unless the process
// runs under amxemu.Run.
package amxtest
