//go:build linux && amd64

package amxemu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gquant/gquant/internal/amxemu/amxtest"
)

// childEnv selects the scenario TestChild runs; the parent tests set it when they re-execute
// the test binary under amxemu.Run.
const childEnv = "AMXEMU_TEST_CHILD"

// Scenario sizes; the parent derives the expected instruction counts from them.
const (
	gemmTrials    = 6 // random shapes per Gemm function
	threadCount   = 4 // goroutines (OS threads) using tiles at once
	threadRounds  = 3
	childExitCode = 3
)

// TestChild runs inside the child process only (skipped otherwise). Every AMX instruction it
// executes is emulated by the parent (on CPUs without AMX; see amxemu.ErrNativeAMX).
func TestChild(t *testing.T) {
	scenario := os.Getenv(childEnv)
	if scenario == "" {
		t.Skip("runs only as the child of the amxemu tests")
	}
	switch scenario {
	case "gemm":
		childGemm(t)
		childSignals(t)
	case "threads":
		childThreads(t)
	case "unconfigured":
		printCodeRange("DotSSD")
		amxtest.DotSSD()
	case "shape":
		printCodeRange("GemmSSD")
		// A is 4x16 bytes (K = 4 dwords) but B has 3 rows.
		cfg := tileConfig([3]int{0, 4, 8}, [3]int{1, 4, 16}, [3]int{2, 3, 8})
		buf := make([]byte, 1024)
		amxtest.GemmSSD(&cfg, &buf[0], &buf[0], &buf[0], 64, 64, 64)
	case "badconfig":
		cfg := tileConfig([3]int{0, 4, 8})
		cfg[0] = 2 // palette 2 does not exist
		printCodeRange("LoadConfig")
		amxtest.LoadConfig(&cfg)
	case "ud2":
		amxtest.UD2()
	case "exit":
		os.Exit(childExitCode)
	default:
		t.Fatalf("unknown scenario %q", scenario)
	}
}

// printCodeRange tells the parent where the code of an amxtest function lies in this process,
// so that it can check the RIP of a reported fault.
func printCodeRange(fn string) {
	lo, hi := amxtest.CodeRange(fn)
	fmt.Printf("CODE %s %#x %#x\n", fn, lo, hi)
}

// tileConfig builds a palette-1 configuration from (tile, rows, colsb) triples.
func tileConfig(tiles ...[3]int) [64]byte {
	var c [64]byte
	c[0] = 1
	for _, t := range tiles {
		binary.LittleEndian.PutUint16(c[16+2*t[0]:], uint16(t[2]))
		c[48+t[0]] = byte(t[1])
	}
	return c
}

// matrix is a rows x cols byte matrix stored with a row stride of stride bytes; the bytes
// between cols and stride are padding that must survive stores.
type matrix struct {
	rows, cols, stride int
	buf                []byte
}

const padByte = 0xa5

func newMatrix(r *rand.Rand, rows, cols, strideAlign int) *matrix {
	stride := cols + 1 + r.IntN(40)
	stride += (strideAlign - stride%strideAlign) % strideAlign
	m := &matrix{rows, cols, stride, make([]byte, rows*stride)}
	for i := range m.buf {
		m.buf[i] = padByte
	}
	for i := range rows {
		for j := range cols {
			m.buf[i*stride+j] = byte(r.IntN(256))
		}
	}
	return m
}

func (m *matrix) at(i, j int) byte    { return m.buf[i*m.stride+j] }
func (m *matrix) u32(i, n int) uint32 { return binary.LittleEndian.Uint32(m.buf[i*m.stride+4*n:]) }
func (m *matrix) u16(i, e int) uint16 { return binary.LittleEndian.Uint16(m.buf[i*m.stride+2*e:]) }
func (m *matrix) setU32(i, n int, v uint32) {
	binary.LittleEndian.PutUint32(m.buf[i*m.stride+4*n:], v)
}

// checkPadding fails when a store wrote outside the matrix.
func (m *matrix) checkPadding(t *testing.T, name string) {
	t.Helper()
	for i := range m.rows {
		for j := m.cols; j < m.stride; j++ {
			if m.at(i, j) != padByte {
				t.Fatalf("%s: padding byte %d of row %d was overwritten", name, j, i)
			}
		}
	}
}

type gemmFunc func(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)

// childGemm runs every Gemm function on random odd shapes and compares with a plain Go
// reference (int64 for the integer forms, float64 for bf16).
func childGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	ints := []struct {
		name             string
		f                gemmFunc
		tiles            [3]int // C, A, B tile numbers used by the function
		aSigned, bSigned bool
		alignB, alignC   int
	}{
		{"GemmSSD", amxtest.GemmSSD, [3]int{0, 1, 2}, true, true, 1, 1},
		{"GemmSUD", amxtest.GemmSUD, [3]int{3, 4, 5}, true, false, 4, 2},
		{"GemmUSD", amxtest.GemmUSD, [3]int{5, 6, 7}, false, true, 1, 1},
		{"GemmUUD", amxtest.GemmUUD, [3]int{6, 0, 7}, false, false, 1, 1},
	}
	for _, g := range ints {
		for trial := range gemmTrials {
			M, K, N := 1+r.IntN(16), 1+r.IntN(16), 1+r.IntN(16)
			if trial == 0 {
				M, K, N = 16, 16, 16 // full tiles
			}
			a := newMatrix(r, M, 4*K, 1)
			b := newMatrix(r, K, 4*N, g.alignB)
			c := newMatrix(r, M, 4*N, g.alignC)
			if trial == 1 {
				for i := range M {
					c.setU32(i, 0, math.MaxInt32) // the sum must wrap around
				}
			}
			want := make([]uint32, M*N)
			for i := range M {
				for n := range N {
					acc := int64(int32(c.u32(i, n)))
					for k := range 4 * K {
						x, y := int64(a.at(i, k)), int64(b.at(k/4, 4*n+k%4))
						if g.aSigned {
							x = int64(int8(x))
						}
						if g.bSigned {
							y = int64(int8(y))
						}
						acc += x * y
					}
					want[i*N+n] = uint32(acc)
				}
			}
			cfg := tileConfig([3]int{g.tiles[0], M, 4 * N}, [3]int{g.tiles[1], M, 4 * K}, [3]int{g.tiles[2], K, 4 * N})
			g.f(&cfg, &a.buf[0], &b.buf[0], &c.buf[0], a.stride, b.stride, c.stride)
			for i := range M {
				for n := range N {
					if got := c.u32(i, n); got != want[i*N+n] {
						t.Fatalf("%s %dx%dx%d: C[%d][%d] = %d, want %d", g.name, M, K, N, i, n, int32(got), int32(want[i*N+n]))
					}
				}
			}
			c.checkPadding(t, g.name)
		}
	}
	for trial := range gemmTrials {
		childGemmBF16(t, r, trial)
	}
	childTileMisc(t, r)
}

// childGemmBF16 checks GemmBF16 against a float64 reference: bit-exact when every value is a
// small integer (all sums exact in fp32), otherwise within the fp32 rounding of the sums.
func childGemmBF16(t *testing.T, r *rand.Rand, trial int) {
	M, K, N := 1+r.IntN(16), 1+r.IntN(16), 1+r.IntN(16)
	exact := trial%2 == 0
	val := func() uint16 {
		var f float32
		if exact {
			f = float32(r.IntN(17) - 8)
		} else {
			f = float32(r.NormFloat64())
		}
		return uint16(math.Float32bits(f) >> 16) // truncation to bf16 is fine for inputs
	}
	a := newMatrix(r, M, 4*K, 1)
	b := newMatrix(r, K, 4*N, 1)
	c := newMatrix(r, M, 4*N, 1)
	for i := range M {
		for k := range 2 * K {
			binary.LittleEndian.PutUint16(a.buf[i*a.stride+2*k:], val())
		}
		for n := range N {
			c.setU32(i, n, math.Float32bits(float32(r.IntN(100)-50)))
		}
	}
	for k := range K {
		for n := range 2 * N {
			binary.LittleEndian.PutUint16(b.buf[k*b.stride+2*n:], val())
		}
	}
	bf := func(x uint16) float64 { return float64(math.Float32frombits(uint32(x) << 16)) }
	want := make([]float64, M*N)
	bound := make([]float64, M*N)
	for i := range M {
		for n := range N {
			sum := float64(math.Float32frombits(c.u32(i, n)))
			mag := math.Abs(sum)
			for k := range K {
				for j := range 2 {
					p := bf(a.u16(i, 2*k+j)) * bf(b.u16(k, 2*n+j))
					sum += p
					mag += math.Abs(p)
				}
			}
			want[i*N+n], bound[i*N+n] = sum, mag*float64(2*K+2)*0x1p-24
		}
	}
	cfg := tileConfig([3]int{1, M, 4 * N}, [3]int{2, M, 4 * K}, [3]int{3, K, 4 * N})
	amxtest.GemmBF16(&cfg, &a.buf[0], &b.buf[0], &c.buf[0], a.stride, b.stride, c.stride)
	for i := range M {
		for n := range N {
			got := float64(math.Float32frombits(c.u32(i, n)))
			if d := math.Abs(got - want[i*N+n]); exact && d != 0 || d > bound[i*N+n] {
				t.Fatalf("GemmBF16 %dx%dx%d (exact=%v): C[%d][%d] = %g, want %g (bound %g)", M, K, N, exact, i, n, got, want[i*N+n], bound[i*N+n])
			}
		}
	}
	c.checkPadding(t, "GemmBF16")
}

// childTileMisc covers TILEZERO, a SIB without index (stride 0), STTILECFG and a RIP-relative
// LDTILECFG.
func childTileMisc(t *testing.T, r *rand.Rand) {
	const rows, colsb = 5, 24
	cfg := tileConfig([3]int{3, rows, colsb}, [3]int{4, rows, colsb})
	src := newMatrix(r, rows, colsb, 1)
	dst := newMatrix(r, rows, colsb, 1)
	amxtest.LoadBroadcast(&cfg, &src.buf[0], &dst.buf[0], dst.stride)
	for i := range rows {
		for j := range colsb {
			if dst.at(i, j) != src.at(0, j) {
				t.Fatalf("LoadBroadcast: row %d byte %d = %d, want row 0's %d", i, j, dst.at(i, j), src.at(0, j))
			}
		}
	}
	dst.checkPadding(t, "LoadBroadcast")

	amxtest.ZeroTile(&cfg, &src.buf[0], &dst.buf[0], dst.stride)
	for i := range rows {
		for j := range colsb {
			if dst.at(i, j) != 0 {
				t.Fatalf("ZeroTile: row %d byte %d = %d", i, j, dst.at(i, j))
			}
		}
	}
	dst.checkPadding(t, "ZeroTile")

	var got [64]byte
	amxtest.LoadConfigInline()
	amxtest.StoreConfig(&got)
	if got != amxtest.InlineConfig {
		t.Fatalf("sttilecfg after the RIP-relative ldtilecfg: % x, want % x", got, amxtest.InlineConfig)
	}
	amxtest.Release()
	got[0] = 0xff
	amxtest.StoreConfig(&got)
	if got != ([64]byte{}) {
		t.Fatalf("sttilecfg after tilerelease: % x, want zeros", got)
	}
}

// childSignals checks that ordinary signals still reach the child: a SIGUSR1 it sends itself,
// the SIGSEGV of a nil dereference, which Go turns into a recoverable panic, and the SIGCHLD
// of a subprocess.
func childSignals(t *testing.T) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGUSR1 did not arrive")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("nil dereference did not panic")
			}
		}()
		var p *int
		_ = *p
	}()
	// A subprocess of the child is not traced and must not disturb the tracer.
	if path, err := exec.LookPath("true"); err == nil {
		if err := exec.Command(path).Run(); err != nil {
			t.Fatalf("subprocess: %v", err)
		}
	}
}

// barrier is a reusable rendezvous of n goroutines.
type barrier struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	count int
	gen   int
}

func newBarrier(n int) *barrier {
	b := &barrier{n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *barrier) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.gen
	if b.count++; b.count == b.n {
		b.count, b.gen = 0, b.gen+1
		b.cond.Broadcast()
		return
	}
	for gen == b.gen {
		b.cond.Wait()
	}
}

// childThreads runs threadCount goroutines, each locked to its own OS thread, that configure
// different shapes and then load, multiply and store in lock step: every phase of every
// thread runs after all threads have changed their tile state, so a tracer that kept one tile
// state for all threads would compute wrong results or fault on the shapes.
func childThreads(t *testing.T) {
	bar := newBarrier(threadCount)
	errs := make(chan string, threadCount*threadRounds)
	var wg sync.WaitGroup
	for g := range threadCount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r := rand.New(rand.NewPCG(uint64(g), 99))
			for round := range threadRounds {
				M, K, N := 3+g+round, 2+2*g, 16-3*g
				a := newMatrix(r, M, 4*K, 1)
				b := newMatrix(r, K, 4*N, 1)
				c := newMatrix(r, M, 4*N, 1)
				want := make([]int32, M*N)
				for i := range M {
					for n := range N {
						acc := int32(c.u32(i, n))
						for k := range 4 * K {
							acc += int32(int8(a.at(i, k))) * int32(int8(b.at(k/4, 4*n+k%4)))
						}
						want[i*N+n] = acc
					}
				}
				cfg := tileConfig([3]int{0, M, 4 * N}, [3]int{1, M, 4 * K}, [3]int{2, K, 4 * N})
				amxtest.LoadConfig(&cfg)
				bar.wait()
				amxtest.LoadABC(&a.buf[0], &b.buf[0], &c.buf[0], a.stride, b.stride, c.stride)
				bar.wait()
				amxtest.DotSSD()
				bar.wait()
				amxtest.StoreC(&c.buf[0], c.stride)
				bar.wait()
				amxtest.Release()
			check:
				for i := range M {
					for n := range N {
						if got := int32(c.u32(i, n)); got != want[i*N+n] {
							errs <- fmt.Sprintf("thread %d round %d (%dx%dx%d): C[%d][%d] = %d, want %d",
								g, round, M, K, N, i, n, got, want[i*N+n])
							break check // keep going: the other threads wait at the barrier
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
