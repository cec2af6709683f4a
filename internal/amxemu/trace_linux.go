//go:build linux && amd64

package amxemu

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitid si_code values of SIGCHLD (include/uapi/asm-generic/siginfo.h).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// tracer follows the threads of one traced process.
type tracer struct {
	pid     int // thread group id = process group id of the child
	threads map[int]*thread
	counts  map[string]int
	failure error // first fault or tracer error; the child is then killed
	killed  bool
}

// thread is the emulator's view of one traced thread.
type thread struct {
	tiles tileState
	// initialStop is set for a new thread until its first stop, the SIGSTOP with which an
	// automatically attached clone starts (suppressed).
	initialStop bool
}

// run starts cmd under ptrace and traces it until its thread group leader has exited, then
// reaps it through cmd.Wait.
func run(cmd *exec.Cmd, counts map[string]int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	attr.Ptrace = true
	if !attr.Setsid {
		attr.Setpgid, attr.Pgid = true, 0 // process group id = child pid
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	t := &tracer{pid: cmd.Process.Pid, threads: map[int]*thread{}, counts: counts}
	t.start()
	t.loop()
	werr := cmd.Wait()
	if t.failure != nil {
		return t.failure
	}
	return werr
}

// start consumes the SIGTRAP stop after execve of the PTRACE_TRACEME child, sets the tracing
// options and lets the child run.
func (t *tracer) start() {
	var ws syscall.WaitStatus
	if err := wait4(t.pid, &ws); err != nil {
		t.fail(fmt.Errorf("amxemu: waiting for the child to start: %w", err))
		return
	}
	if !ws.Stopped() {
		t.fail(fmt.Errorf("amxemu: child did not stop after exec (status 0x%x)", uint32(ws)))
		return
	}
	t.threads[t.pid] = &thread{}
	opts := unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_EXITKILL
	if err := unix.PtraceSetOptions(t.pid, opts); err != nil {
		t.fail(fmt.Errorf("amxemu: PTRACE_SETOPTIONS: %w", err))
	}
	t.cont(t.pid, 0)
}

// loop handles wait events of the child's threads until the thread group leader exits. The
// leader's exit is only peeked at (WNOWAIT) so that cmd.Wait can reap it.
func (t *tracer) loop() {
	for {
		var si unix.Siginfo
		err := unix.Waitid(unix.P_PGID, t.pid, &si, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.fail(fmt.Errorf("amxemu: waitid: %w", err))
			return
		}
		raw := (*[128]byte)(unsafe.Pointer(&si))
		tid := int(*(*int32)(unsafe.Pointer(&raw[16]))) // si_pid
		if tid == 0 {
			continue // spurious: nothing waitable yet
		}
		if tid == t.pid && (si.Code == cldExited || si.Code == cldKilled || si.Code == cldDumped) {
			return
		}
		var ws syscall.WaitStatus
		if err := wait4(tid, &ws); err != nil {
			t.fail(fmt.Errorf("amxemu: wait4(%d): %w", tid, err))
			return
		}
		t.handle(tid, ws)
	}
}

// wait4 consumes the pending wait event of tid, retrying on EINTR.
func wait4(tid int, ws *syscall.WaitStatus) error {
	for {
		_, err := syscall.Wait4(tid, ws, syscall.WALL, nil)
		if err != syscall.EINTR {
			return err
		}
	}
}

// handle acts on one wait event of thread tid.
func (t *tracer) handle(tid int, ws syscall.WaitStatus) {
	if ws.Exited() || ws.Signaled() {
		delete(t.threads, tid)
		return
	}
	if !ws.Stopped() {
		return
	}
	th := t.threads[tid]
	if th == nil { // a new thread whose SIGSTOP came before its parent's clone event
		th = &thread{initialStop: true}
		t.threads[tid] = th
	}
	sig := ws.StopSignal()
	if t.killed {
		t.cont(tid, 0) // SIGKILL is pending; let the thread die
		return
	}
	if sig == syscall.SIGTRAP && ws.TrapCause() > 0 {
		switch ws.TrapCause() {
		case unix.PTRACE_EVENT_CLONE:
			if msg, err := unix.PtraceGetEventMsg(tid); err == nil && t.threads[int(msg)] == nil {
				t.threads[int(msg)] = &thread{initialStop: true} // starts unconfigured
			}
		case unix.PTRACE_EVENT_EXEC:
			// A new program image: only this thread is left, with the INIT tile state.
			clear(t.threads)
			th = &thread{}
			t.threads[tid] = th
		}
		th.initialStop = false
		t.cont(tid, 0)
		return
	}
	if th.initialStop {
		th.initialStop = false
		if sig == syscall.SIGSTOP {
			t.cont(tid, 0)
			return
		}
	}
	if sig == syscall.SIGILL {
		t.sigill(tid, th)
		return
	}
	if isStopSignal(sig) {
		if _, err := getSiginfo(tid); errors.Is(err, syscall.EINVAL) {
			t.cont(tid, 0) // group-stop: resume (see Run)
			return
		}
	}
	t.cont(tid, int(sig))
}

// isStopSignal reports whether sig stops the process by default.
func isStopSignal(sig syscall.Signal) bool {
	return sig == syscall.SIGSTOP || sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU
}

// sigill emulates the AMX instruction that made thread tid stop with SIGILL, or forwards the
// signal when it is not a #UD on a known AMX instruction.
func (t *tracer) sigill(tid int, th *thread) {
	si, err := getSiginfo(tid)
	if err != nil {
		t.ptraceFailed(tid, err)
		return
	}
	if si.Code <= 0 { // SI_USER, SI_TKILL, SI_QUEUE...: sent, not raised by the CPU
		t.cont(tid, int(syscall.SIGILL))
		return
	}
	var regs unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &regs); err != nil {
		t.ptraceFailed(tid, err)
		return
	}
	mem := procMem(tid)
	var code [maxInstLen]byte
	n := mem.readCode(code[:], regs.Rip)
	in, ok := decode(code[:n])
	if !ok {
		t.cont(tid, int(syscall.SIGILL))
		return
	}
	cpu := cpuFromRegs(&regs)
	if err := th.tiles.execute(&in, &cpu, mem); err != nil {
		t.fail(&fault{tid: tid, rip: regs.Rip, op: in.op.String(), reason: err})
		return
	}
	t.counts[in.op.String()]++
	regs.Rip += uint64(in.length)
	if err := unix.PtraceSetRegs(tid, &regs); err != nil {
		t.ptraceFailed(tid, err)
		return
	}
	t.cont(tid, 0)
}

// cpuFromRegs copies the registers address computation needs.
func cpuFromRegs(r *unix.PtraceRegs) cpuState {
	return cpuState{
		gpr: [16]uint64{r.Rax, r.Rcx, r.Rdx, r.Rbx, r.Rsp, r.Rbp, r.Rsi, r.Rdi,
			r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15},
		rip:    r.Rip,
		fsBase: r.Fs_base,
		gsBase: r.Gs_base,
	}
}

// cont resumes thread tid, delivering sig (0: none). A thread that vanished (ESRCH: killed
// meanwhile) is ignored; its exit is reported by wait.
func (t *tracer) cont(tid, sig int) {
	if err := unix.PtraceCont(tid, sig); err != nil && err != syscall.ESRCH {
		t.fail(fmt.Errorf("amxemu: PTRACE_CONT(%d): %w", tid, err))
	}
}

// ptraceFailed handles a failed ptrace request on tid: ESRCH (thread gone) is ignored,
// anything else is a tracer failure.
func (t *tracer) ptraceFailed(tid int, err error) {
	if err != syscall.ESRCH {
		t.fail(fmt.Errorf("amxemu: ptrace on thread %d: %w", tid, err))
	}
}

// fail records the first error and kills the child; the loop then drains its exit.
func (t *tracer) fail(err error) {
	if t.failure == nil {
		t.failure = err
	}
	if !t.killed {
		t.killed = true
		_ = syscall.Kill(t.pid, syscall.SIGKILL)
	}
}

// getSiginfo returns the siginfo of the signal-delivery-stop of tid (PTRACE_GETSIGINFO);
// EINVAL means the stop is a group-stop.
func getSiginfo(tid int) (unix.Siginfo, error) {
	var si unix.Siginfo
	_, _, errno := syscall.Syscall6(syscall.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(tid), 0,
		uintptr(unsafe.Pointer(&si)), 0, 0)
	if errno != 0 {
		return si, errno
	}
	return si, nil
}

// procMem accesses the memory of a traced thread with process_vm_readv/writev, which honour
// page protections like the hardware access would.
type procMem int

// ReadAt implements memory.
func (m procMem) ReadAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := unix.ProcessVMReadv(int(m), []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
	return ioResult(n, len(p), err)
}

// WriteAt implements memory.
func (m procMem) WriteAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := unix.ProcessVMWritev(int(m), []unix.Iovec{{Base: &p[0], Len: uint64(len(p))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}, 0)
	return ioResult(n, len(p), err)
}

// ioResult turns a short transfer into an error.
func ioResult(n, want int, err error) error {
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("transferred %d of %d bytes", n, want)
	}
	return nil
}

// readCode reads up to len(p) instruction bytes at rip and returns how many it got: the bytes
// up to the end of rip's page always (it is executable), the rest when mapped.
func (m procMem) readCode(p []byte, rip uint64) int {
	const page = 4096
	first := min(len(p), int(page-rip%page))
	if m.ReadAt(p[:first], rip) != nil {
		return 0
	}
	if first < len(p) && m.ReadAt(p[first:], rip+uint64(first)) == nil {
		return len(p)
	}
	return first
}
