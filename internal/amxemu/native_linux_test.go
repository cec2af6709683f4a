//go:build linux && amd64

package amxemu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/gquant/gquant/internal/amxemu/amxtest"
)

// TestNativeMatchesEmulator runs where the harness cannot (a CPU with AMX): every tile product
// the emulator implements is executed by the hardware and by the emulator on the same random
// tiles, and the results must be the same bits. It checks the emulator against silicon, which
// the tests on CPUs without AMX can only check against the SDM's pseudo-code.
func TestNativeMatchesEmulator(t *testing.T) {
	if !NativeAMX() {
		t.Skip("no AMX on this CPU (the emulator's tests check it against the SDM instead)")
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); errno != 0 {
		t.Skipf("Linux does not grant the tile data state: %v", errno)
	}
	r := rand.New(rand.NewPCG(7, 8))
	type gemm func(cfg *[64]byte, a, b, c *byte, strideA, strideB, strideC int)
	ops := []struct {
		name    string
		native  gemm
		a, b, c int    // tiles of the native function
		code    string // the same product on the emulator's tiles
		ea, eb  int    // emulator tiles of A and B
		ec      int    // emulator tile of C
		bf16    bool
	}{
		{"tdpbssd", amxtest.GemmSSD, 1, 2, 0, "c4 e2 53 5e dc", 4, 5, 3, false},
		{"tdpbsud", amxtest.GemmSUD, 4, 5, 3, "c4 e2 52 5e dc", 4, 5, 3, false},
		{"tdpbusd", amxtest.GemmUSD, 6, 7, 5, "c4 e2 51 5e dc", 4, 5, 3, false},
		{"tdpbuud", amxtest.GemmUUD, 0, 7, 6, "c4 e2 50 5e dc", 4, 5, 3, false},
		{"tdpbf16ps", amxtest.GemmBF16, 2, 3, 1, "c4 e2 62 5c ca", 2, 3, 1, true},
	}
	bf16 := func() uint16 {
		switch r.IntN(20) {
		case 0:
			return uint16(r.IntN(0x80)) | uint16(r.IntN(2))<<15 // zero or denormal
		case 1:
			return uint16(r.IntN(2))<<15 | uint16(1+r.IntN(3))<<7 | uint16(r.IntN(128)) // tiny normal
		}
		return uint16(r.IntN(2))<<15 | uint16(100+r.IntN(55))<<7 | uint16(r.IntN(128))
	}
	for _, op := range ops {
		for trial := range 200 {
			M, K, N := 1+r.IntN(16), 1+r.IntN(16), 1+r.IntN(16)
			// Dense buffers: A is M×4K bytes, B K×4N, C M×4N (int32 or float32 elements).
			A, B, C := make([]byte, 64*16), make([]byte, 64*16), make([]byte, 64*16)
			for i := range A {
				A[i], B[i] = byte(r.IntN(256)), byte(r.IntN(256))
			}
			if op.bf16 {
				for i := 0; i < len(A); i += 2 {
					binary.LittleEndian.PutUint16(A[i:], bf16())
					binary.LittleEndian.PutUint16(B[i:], bf16())
				}
			}
			for i := 0; i < len(C); i += 4 {
				v := r.Uint32()
				if op.bf16 {
					v = math.Float32bits(float32(r.NormFloat64()))
					if r.IntN(10) == 0 {
						v = uint32(r.IntN(1 << 23)) // a denormal accumulator
					}
				} else if trial%7 == 0 {
					v = math.MaxInt32 - uint32(r.IntN(4)) // sums must wrap
				}
				binary.LittleEndian.PutUint32(C[i:], v)
			}
			m := newMachine(t)
			if err := m.loadCfg(config([3]int{op.ec, M, 4 * N}, [3]int{op.ea, M, 4 * K}, [3]int{op.eb, K, 4 * N})); err != nil {
				t.Fatal(err)
			}
			for i := range 16 {
				copy(m.s.data[op.ea][i][:], A[64*i:64*i+4*K])
				copy(m.s.data[op.eb][i][:], B[64*i:64*i+4*N])
				copy(m.s.data[op.ec][i][:], C[64*i:64*i+4*N])
			}
			m.mustRun(op.code)

			cfg := config([3]int{op.c, M, 4 * N}, [3]int{op.a, M, 4 * K}, [3]int{op.b, K, 4 * N})
			op.native(&cfg, &A[0], &B[0], &C[0], 64, 64, 64)
			for i := range M {
				for j := range N {
					hw := binary.LittleEndian.Uint32(C[64*i+4*j:])
					em := binary.LittleEndian.Uint32(m.s.data[op.ec][i][4*j:])
					if hw != em {
						t.Fatalf("%s %dx%dx%d trial %d: C[%d][%d] hardware %#08x, emulator %#08x", op.name, M, K, N, trial, i, j, hw, em)
					}
				}
			}
		}
	}
}
