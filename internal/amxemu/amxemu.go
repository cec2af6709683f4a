// Package amxemu is a test harness that runs a program using Intel AMX (tile) instructions on a
// CPU without AMX. The program runs natively under ptrace; each AMX instruction raises #UD
// (SIGILL), and the tracer emulates it from the Intel SDM's definition, keeping the tile
// registers of every thread, then moves RIP past it and lets the thread continue.
//
// Emulated: LDTILECFG, STTILECFG, TILERELEASE, TILEZERO, TILELOADD, TILELOADDT1, TILESTORED,
// TDPBSSD, TDPBSUD, TDPBUSD, TDPBUUD and TDPBF16PS (palette 1: 8 tiles of up to 16 rows of
// 64 bytes). The checks hardware makes are made too: an instruction that would raise #UD or
// #GP (tiles not configured, invalid configuration, shape mismatch, tiles not distinct, bad
// encoding) or fault on its memory operand stops the run with an error.
//
// The harness needs a CPU on which every AMX instruction faults. On a CPU with AMX, a process
// that has not asked Linux for the tile data state still executes LDTILECFG, STTILECFG and
// TILERELEASE natively (only the tile data instructions fault), so the tracer could not follow
// the configuration: Run refuses there with ErrNativeAMX, and code is tested natively instead.
//
// Not emulated: CPUID (the child sees the host's feature bits) and the Linux permission
// request arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which fails on a host without
// AMX; code under test must let a test force its AMX path. Other AMX extensions (FP16,
// COMPLEX, ...) are reported as errors when executed.
//
// Deviations a kernel author may notice: LDTILECFG accepts any colsb up to 64 and a non-zero
// start_row (as the SDM's pseudo-code does; TILELOADD/TILESTORED then start at that row, and
// the SDM's #UD for colsb not a multiple of 4 is raised when the tile is used); a SIB byte
// without index register gives stride 0 (SDM: "the value zero is used"); TDPBF16PS follows
// the SDM's sequential pseudo-code exactly (RNE, DAZ, FTZ; see fma32), which real hardware
// may not match bit for bit.
//
// The package is for tests: every AMX instruction costs a ptrace round trip (tens of
// microseconds). Typical use re-executes the test binary as the traced child:
//
//	func TestKernelAMX(t *testing.T) {
//		if os.Getenv("AMX_CHILD") == "1" {
//			// child: run the AMX kernel, compare with the reference, t.Fatal on mismatch
//			return
//		}
//		cmd := exec.Command(os.Args[0], "-test.run=^TestKernelAMX$", "-test.count=1")
//		cmd.Env = append(os.Environ(), "AMX_CHILD=1")
//		out := new(bytes.Buffer)
//		cmd.Stdout, cmd.Stderr = out, out
//		st, err := amxemu.Run(cmd)
//		if err != nil {
//			t.Fatalf("%v\n%s", err, out)
//		}
//		t.Logf("emulated %d tdpbssd", st.Counts["tdpbssd"])
//	}
package amxemu

import (
	"errors"
	"fmt"
	"os/exec"

	"golang.org/x/sys/cpu"
)

// ErrNativeAMX is Run's error on a CPU that has AMX (CPUID AMX-TILE): there the tile
// configuration instructions do not fault, so they cannot be emulated; run the code natively.
var ErrNativeAMX = errors.New("amxemu: this CPU has AMX (LDTILECFG runs natively, only tile data instructions fault): test natively instead")

// NativeAMX reports whether the CPU has AMX, so that Run refuses (ErrNativeAMX).
func NativeAMX() bool { return cpu.X86.HasAMXTile }

// Stats counts the emulated instructions of a run.
type Stats struct {
	// Counts maps a lower-case mnemonic ("tdpbssd", "tileloadd", ...) to the number of times
	// it was emulated, summed over all threads.
	Counts map[string]int
}

// Run starts cmd (not yet started) under ptrace, emulates the AMX instructions of every thread
// of it, forwards all other signals unchanged, and waits for it to exit. It returns cmd's exit
// status as cmd.Wait would (an *exec.ExitError for a non-zero exit) plus counts of emulated
// instructions by mnemonic.
//
// An AMX instruction that real hardware would fault on (#UD / #GP: tiles not configured,
// invalid config, shape mismatch between tiles, reserved bits; or an unreadable/unwritable
// memory operand) kills the child and returns an error that names the mnemonic, the RIP and
// the reason. A SIGILL on a non-AMX instruction is forwarded (the child dies as it would).
//
// Run may be called from any goroutine, also concurrently; it locks itself to an OS thread
// for the duration of the run, since ptrace requests must come from the tracing thread. It
// sets cmd.SysProcAttr.Ptrace and, unless Setsid is set, puts the child into a new process
// group (Setpgid), which the tracer uses to wait for the child's threads only. A group-stop
// of the child (SIGSTOP, SIGTSTP, ...) is resumed at once. Processes the child starts are not
// traced. Run is available on linux/amd64 only, on CPUs without AMX (ErrNativeAMX).
func Run(cmd *exec.Cmd) (Stats, error) {
	st := Stats{Counts: map[string]int{}}
	if cmd.Process != nil {
		return st, fmt.Errorf("amxemu: command already started")
	}
	if NativeAMX() {
		return st, ErrNativeAMX
	}
	err := run(cmd, st.Counts)
	return st, err
}

// fault is an emulated instruction that real hardware would not complete.
type fault struct {
	tid    int
	rip    uint64
	op     string
	reason error
}

func (f *fault) Error() string {
	return fmt.Sprintf("amxemu: thread %d: %s at rip 0x%x: %v", f.tid, f.op, f.rip, f.reason)
}
