package amxemu

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// hexBytes parses "c4 e2 78 49 00".
func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

var (
	attReg64 = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
	attReg32 = [16]string{"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi",
		"r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"}
)

// formatATT renders a decoded instruction the way GNU objdump does (AT&T operand order:
// sources first, destination last), so that the decoder can be compared with objdump.
func formatATT(in instruction) string {
	tmm := func(n uint8) string { return fmt.Sprintf("%%tmm%d", n) }
	switch in.op {
	case opLdtilecfg, opSttilecfg:
		return in.op.String() + " " + formatMemATT(in.mem)
	case opTilerelease:
		return "tilerelease"
	case opTilezero:
		return "tilezero " + tmm(in.reg)
	case opTileloadd, opTileloaddt1:
		return in.op.String() + " " + formatMemATT(in.mem) + "," + tmm(in.reg)
	case opTilestored:
		return "tilestored " + tmm(in.reg) + "," + formatMemATT(in.mem)
	default:
		return in.op.String() + " " + tmm(in.vvvv) + "," + tmm(in.rm) + "," + tmm(in.reg)
	}
}

// formatMemATT renders a memory operand as objdump does: [%seg:]disp(base,index,scale), with
// %riz standing for a SIB byte without index unless the SIB byte is needed for the base
// (rsp/r12) or carries nothing (no base, scale 1).
func formatMemATT(m memOperand) string {
	names, riz, rip := attReg64, "riz", "rip"
	if m.addr32 {
		names, riz, rip = attReg32, "eiz", "eip"
	}
	var b strings.Builder
	switch m.seg {
	case segFS:
		b.WriteString("%fs:")
	case segGS:
		b.WriteString("%gs:")
	}
	hasBase := m.base != regNone
	if m.dispSize > 0 {
		switch {
		case !hasBase && m.index < 0 && m.addr32: // an absolute address
			fmt.Fprintf(&b, "0x%x", uint32(m.disp))
		case !hasBase && m.index < 0:
			fmt.Fprintf(&b, "0x%x", uint64(m.disp))
		case m.disp < 0:
			fmt.Fprintf(&b, "-0x%x", -m.disp)
		default:
			fmt.Fprintf(&b, "0x%x", m.disp)
		}
	}
	base := ""
	if m.base == regRIP {
		base = "%" + rip
	} else if hasBase {
		base = "%" + names[m.base]
	}
	switch {
	case m.index >= 0:
		fmt.Fprintf(&b, "(%s,%%%s,%d)", base, names[m.index], 1<<m.scale)
	case m.hasSIB && (hasBase && (m.base&7 != 4 || m.scale != 0) || !hasBase && m.scale != 0):
		fmt.Fprintf(&b, "(%s,%%%s,%d)", base, riz, 1<<m.scale)
	case base != "":
		fmt.Fprintf(&b, "(%s)", base)
	}
	return b.String()
}

// decodeVectors are valid AMX encodings with the AT&T text objdump prints for them.
var decodeVectors = []struct{ code, att string }{
	{"c4 e2 78 49 00", "ldtilecfg (%rax)"},
	{"c4 e2 78 49 44 24 10", "ldtilecfg 0x10(%rsp)"},
	{"c4 e2 79 49 45 f8", "sttilecfg -0x8(%rbp)"},
	{"c4 e2 78 49 05 78 56 34 12", "ldtilecfg 0x12345678(%rip)"},
	{"c4 c2 79 49 05 00 01 00 00", "sttilecfg 0x100(%rip)"}, // VEX.B does not turn rm=101 into r13
	{"c4 c2 78 49 45 00", "ldtilecfg 0x0(%r13)"},
	{"c4 c2 78 49 04 24", "ldtilecfg (%r12)"},
	{"c4 82 79 49 84 f7 00 01 00 00", "sttilecfg 0x100(%r15,%r14,8)"},
	{"c4 e2 78 49 04 25 00 10 00 00", "ldtilecfg 0x1000"},
	{"c4 e2 78 49 04 e5 00 10 00 00", "ldtilecfg 0x1000(,%riz,8)"},
	{"64 c4 e2 78 49 00", "ldtilecfg %fs:(%rax)"},
	{"65 c4 e2 79 49 40 08", "sttilecfg %gs:0x8(%rax)"},
	{"67 c4 e2 78 49 00", "ldtilecfg (%eax)"},
	{"c4 e2 78 49 c0", "tilerelease"},
	{"c4 e2 7b 49 f8", "tilezero %tmm7"},
	{"c4 e2 7b 49 c0", "tilezero %tmm0"},
	{"c4 e2 7b 4b 04 16", "tileloadd (%rsi,%rdx,1),%tmm0"},
	{"c4 e2 7b 4b 64 16 40", "tileloadd 0x40(%rsi,%rdx,1),%tmm4"},
	{"c4 82 7b 4b 7c a0 80", "tileloadd -0x80(%r8,%r12,4),%tmm7"},
	{"c4 e2 79 4b 14 58", "tileloaddt1 (%rax,%rbx,2),%tmm2"},
	{"c4 e2 7a 4b 8c cc 45 23 01 00", "tilestored %tmm1,0x12345(%rsp,%rcx,8)"},
	{"c4 e2 7b 4b 0c 20", "tileloadd (%rax,%riz,1),%tmm1"},
	{"c4 c2 7b 4b 1c 24", "tileloadd (%r12),%tmm3"},
	{"c4 a2 7b 4b 1c 24", "tileloadd (%rsp,%r12,1),%tmm3"},
	{"c4 c2 7a 4b 44 2d 08", "tilestored %tmm0,0x8(%r13,%rbp,1)"},
	{"c4 a2 7b 4b 0c 2d 00 10 00 00", "tileloadd 0x1000(,%r13,1),%tmm1"},
	{"c4 82 7b 4b 44 25 00", "tileloadd 0x0(%r13,%r12,1),%tmm0"},
	{"c4 e2 6b 5e c1", "tdpbssd %tmm2,%tmm1,%tmm0"},
	{"c4 e2 52 5e dc", "tdpbsud %tmm5,%tmm4,%tmm3"},
	{"c4 e2 41 5e ee", "tdpbusd %tmm7,%tmm6,%tmm5"},
	{"c4 e2 40 5e f0", "tdpbuud %tmm7,%tmm0,%tmm6"},
	{"c4 e2 62 5c ca", "tdpbf16ps %tmm3,%tmm2,%tmm1"},
	{"c4 e2 63 5c ca", "tdpfp16ps %tmm3,%tmm2,%tmm1"},
}

func TestDecodeVectors(t *testing.T) {
	for _, v := range decodeVectors {
		code := hexBytes(t, v.code)
		in, ok := decode(append(code, 0x90, 0x90)) // trailing bytes must not be consumed
		if !ok {
			t.Errorf("%s: not decoded as AMX", v.code)
			continue
		}
		if in.invalid != "" {
			t.Errorf("%s: marked invalid: %s", v.code, in.invalid)
		}
		if in.length != len(code) {
			t.Errorf("%s: length %d, want %d", v.code, in.length, len(code))
		}
		if got := formatATT(in); got != v.att {
			t.Errorf("%s: decoded as %q, want %q", v.code, got, v.att)
		}
	}
}

// TestDecodeVectorsObjdump checks the expected texts of decodeVectors against GNU objdump, so
// that the vectors are not only the decoder's opinion.
func TestDecodeVectorsObjdump(t *testing.T) {
	var code []byte
	var offs []uint64
	for _, v := range decodeVectors {
		offs = append(offs, uint64(len(code)))
		code = append(code, hexBytes(t, v.code)...)
	}
	lines := objdumpRaw(t, code)
	if len(lines) != len(decodeVectors) {
		t.Fatalf("objdump lists %d instructions, want %d: %v", len(lines), len(decodeVectors), lines)
	}
	for i, l := range lines {
		if l.addr != offs[i] || l.text != decodeVectors[i].att {
			t.Errorf("objdump: 0x%x %q, want 0x%x %q", l.addr, l.text, offs[i], decodeVectors[i].att)
		}
	}
}

// randomAMX returns a random valid encoding of an AMX instruction (tile numbers below 8).
func randomAMX(r *rand.Rand) []byte {
	type form struct {
		opc, pp byte
		kind    int // 0: m512, 1: sibmem, 2: tilezero, 3: tilerelease, 4: TDP
	}
	forms := []form{{0x49, 0, 0}, {0x49, 1, 0}, {0x4b, 3, 1}, {0x4b, 1, 1}, {0x4b, 2, 1},
		{0x49, 3, 2}, {0x49, 0, 3}, {0x5e, 0, 4}, {0x5e, 1, 4}, {0x5e, 2, 4}, {0x5e, 3, 4}, {0x5c, 2, 4}}
	f := forms[r.IntN(len(forms))]
	var b []byte
	if f.kind <= 1 {
		if r.IntN(8) == 0 {
			b = append(b, []byte{0x64, 0x65}[r.IntN(2)])
		}
		if r.IntN(8) == 0 {
			b = append(b, 0x67)
		}
	}
	reg := byte(r.IntN(8))
	x, bb := byte(r.IntN(2)), byte(r.IntN(2)) // inverted VEX.X, VEX.B
	vvvv := byte(0)
	switch f.kind {
	case 2, 3:
		x, bb = 1, 1
	case 4: // three distinct tiles (objdump, like hardware, rejects repeated ones)
		p := r.Perm(8)
		x, bb, reg, vvvv = 1, 1, byte(p[0]), byte(p[1])
		b = append(b, 0xc4, 0xe2, (^vvvv&0xf)<<3|f.pp, f.opc, 0xc0|reg<<3|byte(p[2]))
		return b
	}
	if f.kind == 3 {
		reg = 0
	}
	if f.kind == 0 {
		reg = 0
	}
	b = append(b, 0xc4, 0x80|x<<6|bb<<5|0x02, (^vvvv&0xf)<<3|f.pp, f.opc)
	switch f.kind {
	case 2:
		return append(b, 0xc0|reg<<3)
	case 3:
		return append(b, 0xc0)
	}
	mod := byte(r.IntN(3))
	rm := byte(r.IntN(8))
	if f.kind == 1 {
		rm = 4
	}
	b = append(b, mod<<6|reg<<3|rm)
	dispSize := [3]int{0, 1, 4}[mod]
	if rm == 4 {
		sib := byte(r.IntN(256))
		b = append(b, sib)
		if mod == 0 && sib&7 == 5 {
			dispSize = 4
		}
	} else if mod == 0 && rm == 5 {
		dispSize = 4
	}
	for range dispSize {
		b = append(b, byte(r.IntN(256)))
	}
	return b
}

// TestDecodeRandomObjdump decodes random AMX encodings and compares length and operands with
// GNU objdump.
func TestDecodeRandomObjdump(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var code []byte
	var want []string
	var offs []uint64
	for range 1000 {
		enc := randomAMX(r)
		in, ok := decode(enc)
		if !ok || in.invalid != "" || in.length != len(enc) {
			t.Fatalf("% x: ok=%v invalid=%q length %d", enc, ok, in.invalid, in.length)
		}
		offs = append(offs, uint64(len(code)))
		code = append(code, enc...)
		want = append(want, formatATT(in))
	}
	lines := objdumpRaw(t, code)
	if len(lines) != len(want) {
		t.Fatalf("objdump lists %d instructions, want %d", len(lines), len(want))
	}
	bad := 0
	for i, l := range lines {
		if l.addr != offs[i] || l.text != want[i] {
			t.Errorf("at 0x%x: decoder says %q, objdump 0x%x %q", offs[i], want[i], l.addr, l.text)
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
}

func TestDecodeNotAMX(t *testing.T) {
	for _, c := range []string{
		"0f 0b",             // ud2
		"c5 f8 58 c1",       // vaddps (two-byte VEX cannot reach map 0F38)
		"c4 e2 79 50 c1",    // vpdpbusd xmm (VEX 0F38 50)
		"c4 e3 79 49 00 00", // map 0F3A
		"62 f2 7d 48 50 c1", // EVEX vpdpbusd
		"c4 e2 7a 49 00",    // F3 49 with memory: not AMX
		"c4 e2 7a 49 c0",    // F3 49 register form
		"c4 e2 79 49 c0",    // 66 49 register form
		"c4 e2 78 4b 04 16", // NP 4B
		"c4 e2 79 5c c1",    // 66 5C
		"c4 e2 7b 4b 04",    // truncated tileloadd
		"c4 e2 7b 4b 44 16", // truncated disp8
		"c4 e2 78 49 05 00", // truncated RIP disp32
		"",
	} {
		if in, ok := decode(hexBytes(t, c)); ok {
			t.Errorf("%q decoded as AMX %s", c, formatATT(in))
		}
	}
}

func TestDecodeInvalidEncodings(t *testing.T) {
	for _, v := range []struct{ code, op, reason string }{
		{"c4 e2 f8 49 00", "ldtilecfg", "VEX.W=1"},
		{"c4 e2 7c 49 00", "ldtilecfg", "VEX.L=1"},
		{"c4 e2 70 49 00", "ldtilecfg", "VEX.vvvv"},
		{"66 c4 e2 78 49 00", "ldtilecfg", "legacy prefix"},
		{"48 c4 e2 6b 5e c1", "tdpbssd", "legacy prefix"},
		{"c4 e2 7b 4b 00", "tileloadd", "SIB"},
		{"c4 e2 7a 4b 45 08", "tilestored", "SIB"},
		{"c4 e2 7b 4b c0", "tileloadd", "register operand"},
		{"c4 e2 6b 5e 01", "tdpbssd", "memory operand"},
		{"c4 e2 6b 5c 01", "tdpfp16ps", "memory operand"},
		{"c4 e2 78 49 c1", "tilerelease", "ModRM"},
		{"c4 e2 78 49 08", "ldtilecfg", "ModRM.reg"},
		{"c4 e2 7b 49 c1", "tilezero", "ModRM.rm"},
		{"c4 e2 73 49 c0", "tilezero", "VEX.vvvv"},
	} {
		in, ok := decode(hexBytes(t, v.code))
		if !ok {
			t.Errorf("%s: not recognized", v.code)
			continue
		}
		if in.op.String() != v.op || !strings.Contains(in.invalid, v.reason) {
			t.Errorf("%s: %s invalid=%q, want %s with %q", v.code, in.op, in.invalid, v.op, v.reason)
		}
		err := (&tileState{}).execute(&in, &cpuState{}, nil)
		if err == nil || !strings.Contains(err.Error(), "#UD") {
			t.Errorf("%s: execute returned %v, want #UD", v.code, err)
		}
	}
}

func TestAddressing(t *testing.T) {
	var cpu cpuState
	for i := range cpu.gpr {
		cpu.gpr[i] = 0x100000*uint64(i+1) + uint64(i)
	}
	cpu.rip, cpu.fsBase, cpu.gsBase = 0x400000, 0x7f0000000000, 0x7e0000000000
	g := cpu.gpr
	for _, v := range []struct {
		code string
		want func(row int) uint64 // address of row (sibmem) or of the operand (row 0)
	}{
		{"c4 e2 78 49 44 24 10", func(int) uint64 { return g[4] + 0x10 }},
		{"c4 e2 79 49 45 f8", func(int) uint64 { return g[5] - 8 }},
		{"c4 e2 78 49 05 78 56 34 12", func(int) uint64 { return 0x400000 + 9 + 0x12345678 }},
		{"c4 e2 78 49 05 f0 ff ff ff", func(int) uint64 { return 0x400000 + 9 - 16 }},
		{"c4 82 79 49 84 f7 00 01 00 00", func(int) uint64 { return g[15] + g[14]<<3 + 0x100 }},
		{"64 c4 e2 78 49 00", func(int) uint64 { return cpu.fsBase + g[0] }},
		{"65 c4 e2 79 49 40 08", func(int) uint64 { return cpu.gsBase + g[0] + 8 }},
		{"67 c4 e2 78 49 44 24 f0", func(int) uint64 { return uint64(uint32(g[4] - 16)) }},
		{"c4 e2 78 49 04 25 00 10 00 00", func(int) uint64 { return 0x1000 }},
		{"c4 c2 78 49 45 f0", func(int) uint64 { return g[13] - 16 }},
		{"c4 c2 78 49 04 24", func(int) uint64 { return g[12] }},
		// sibmem: base + disp + row * (index << scale)
		{"c4 82 7b 4b 7c a0 80", func(r int) uint64 { return g[8] - 0x80 + uint64(r)*(g[12]<<2) }},
		{"c4 e2 7b 4b 0c 20", func(int) uint64 { return g[0] }}, // no index: stride 0
		{"c4 a2 7b 4b 0c 2d 00 10 00 00", func(r int) uint64 { return 0x1000 + uint64(r)*g[13] }},
		{"c4 e2 7a 4b 8c cc 45 23 01 00", func(r int) uint64 { return g[4] + 0x12345 + uint64(r)*(g[1]<<3) }},
		{"c4 c2 7a 4b 44 2d 08", func(r int) uint64 { return g[13] + 8 + uint64(r)*g[5] }},
		{"c4 e2 79 4b 14 58", func(r int) uint64 { return g[0] + uint64(r)*(g[3]<<1) }},
	} {
		in, ok := decode(hexBytes(t, v.code))
		if !ok || in.invalid != "" {
			t.Fatalf("%s: not a valid AMX instruction", v.code)
		}
		switch in.op {
		case opLdtilecfg, opSttilecfg:
			if got := in.mem.effectiveAddress(&cpu, in.length); got != v.want(0) {
				t.Errorf("%s (%s): address 0x%x, want 0x%x", v.code, formatATT(in), got, v.want(0))
			}
		default:
			for _, r := range []int{0, 1, 5, 15} {
				if got := in.mem.rowAddress(&cpu, in.length, r); got != v.want(r) {
					t.Errorf("%s (%s): row %d address 0x%x, want 0x%x", v.code, formatATT(in), r, got, v.want(r))
				}
			}
		}
	}
}
