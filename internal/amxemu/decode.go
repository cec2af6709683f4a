package amxemu

import "encoding/binary"

// opcode names one emulated AMX instruction.
type opcode uint8

const (
	opNone opcode = iota
	opLdtilecfg
	opSttilecfg
	opTilerelease
	opTilezero
	opTileloadd
	opTileloaddt1
	opTilestored
	opTdpbssd
	opTdpbsud
	opTdpbusd
	opTdpbuud
	opTdpbf16ps
	opTdpfp16ps // recognized so that its SIGILL is reported, not emulated
)

// mnemonics are the lower-case Intel mnemonics, used as Stats keys and in errors.
var mnemonics = [...]string{
	opNone:        "(none)",
	opLdtilecfg:   "ldtilecfg",
	opSttilecfg:   "sttilecfg",
	opTilerelease: "tilerelease",
	opTilezero:    "tilezero",
	opTileloadd:   "tileloadd",
	opTileloaddt1: "tileloaddt1",
	opTilestored:  "tilestored",
	opTdpbssd:     "tdpbssd",
	opTdpbsud:     "tdpbsud",
	opTdpbusd:     "tdpbusd",
	opTdpbuud:     "tdpbuud",
	opTdpbf16ps:   "tdpbf16ps",
	opTdpfp16ps:   "tdpfp16ps",
}

func (o opcode) String() string { return mnemonics[o] }

// Register numbers of memory operands use the x86 encoding order (0 rax, 1 rcx, 2 rdx, 3 rbx,
// 4 rsp, 5 rbp, 6 rsi, 7 rdi, 8..15 r8..r15) plus two pseudo registers.
const (
	regNone = -1 // no base / no index register
	regRIP  = 16 // RIP-relative addressing (base only)
)

// Segment overrides that matter in 64-bit mode (CS/DS/ES/SS overrides are ignored there).
const (
	segDefault = iota
	segFS
	segGS
)

// memOperand is a decoded ModRM/SIB memory operand.
type memOperand struct {
	base   int8  // 0..15, regNone or regRIP
	index  int8  // 0..15 or regNone (SIB.index=100b without VEX.X)
	scale  uint8 // shift count 0..3 (SIB.scale)
	disp   int64 // sign-extended disp8/disp32
	seg    uint8 // segDefault, segFS or segGS
	addr32 bool  // 0x67 prefix: 32-bit address computation
	hasSIB bool
	// dispSize is the size of the displacement field in bytes (0, 1 or 4).
	dispSize uint8
}

// instruction is a decoded AMX instruction.
type instruction struct {
	op     opcode
	length int   // bytes, including prefixes
	reg    uint8 // ModRM.reg extended by VEX.R: tile of TILEZERO/TILELOAD*/TILESTORED, dest of TDP*
	rm     uint8 // ModRM.rm extended by VEX.B: A tile of TDP*
	vvvv   uint8 // VEX.vvvv (un-inverted): B tile of TDP*, must be 0 for the others
	mem    memOperand
	// invalid is non-empty when the bytes name an AMX instruction in an encoding on which
	// hardware raises #UD (VEX.W=1, VEX.L=1, legacy prefix before VEX, missing SIB, ...).
	invalid string
}

// maxInstLen is the architectural limit on x86 instruction length.
const maxInstLen = 15

// decode decodes the AMX instruction at the start of code (the bytes at RIP; fewer than 15
// when the page after it is unmapped). ok is false when code does not start with an AMX
// instruction this package knows; such a SIGILL is forwarded to the child unchanged.
func decode(code []byte) (in instruction, ok bool) {
	if len(code) > maxInstLen {
		code = code[:maxInstLen]
	}
	var seg uint8
	addr32 := false
	badPrefix := ""
	i := 0
prefixes:
	for ; i < len(code); i++ {
		switch b := code[i]; {
		case b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e:
			seg = segDefault // null segment overrides in 64-bit mode
		case b == 0x64:
			seg = segFS
		case b == 0x65:
			seg = segGS
		case b == 0x67:
			addr32 = true
		case b == 0x66 || b == 0xf2 || b == 0xf3 || b == 0xf0 || b&0xf0 == 0x40:
			// A VEX instruction preceded by an operand-size, REP, LOCK or REX prefix is #UD.
			badPrefix = "legacy prefix before VEX"
		default:
			break prefixes
		}
	}
	// Only the three-byte VEX form (C4) can select opcode map 0F38.
	if i+5 > len(code) || code[i] != 0xc4 {
		return instruction{}, false
	}
	p1, p2 := code[i+1], code[i+2]
	if p1&0x1f != 0x02 { // m-mmmm: map 0F38
		return instruction{}, false
	}
	vexR := (^p1 >> 7) & 1
	vexX := (^p1 >> 6) & 1
	vexB := (^p1 >> 5) & 1
	vexW := p2 >> 7
	in.vvvv = (^p2 >> 3) & 0xf
	vexL := (p2 >> 2) & 1
	pp := p2 & 3 // 0: NP, 1: 66, 2: F3, 3: F2
	opc := code[i+3]
	modrm := code[i+4]
	mod, regBits, rmBits := modrm>>6, (modrm>>3)&7, modrm&7
	in.reg = regBits | vexR<<3
	in.rm = rmBits | vexB<<3
	isReg := mod == 3

	// needVvvv0, needMem, needReg and needSIB are the encoding rules of the instruction found.
	needVvvv0, needMem, needReg := true, false, false
	switch opc {
	case 0x49:
		switch {
		case pp == 0 && isReg:
			in.op, needReg = opTilerelease, true
			if modrm != 0xc0 {
				in.invalid = "ModRM must be C0"
			}
		case pp == 0:
			in.op, needMem = opLdtilecfg, true
		case pp == 1 && !isReg:
			in.op, needMem = opSttilecfg, true
		case pp == 3 && isReg:
			in.op, needReg = opTilezero, true
			if rmBits != 0 {
				in.invalid = "ModRM.rm must be 000"
			}
		default:
			return instruction{}, false
		}
		if (in.op == opLdtilecfg || in.op == opSttilecfg) && regBits != 0 {
			in.invalid = "ModRM.reg must be 000"
		}
	case 0x4b:
		switch pp {
		case 3:
			in.op = opTileloadd
		case 1:
			in.op = opTileloaddt1
		case 2:
			in.op = opTilestored
		default:
			return instruction{}, false
		}
		needMem = true
		if !isReg && rmBits != 4 {
			in.invalid = "SIB addressing required (ModRM.rm != 100b)"
		}
	case 0x5e:
		in.op = [4]opcode{opTdpbuud, opTdpbusd, opTdpbsud, opTdpbssd}[pp]
		needVvvv0, needReg = false, true
	case 0x5c:
		switch pp {
		case 2:
			in.op = opTdpbf16ps
		case 3:
			in.op = opTdpfp16ps
		default:
			return instruction{}, false
		}
		needVvvv0, needReg = false, true
	default:
		return instruction{}, false
	}

	n := i + 5 // bytes consumed so far (prefixes, C4, two payload bytes, opcode, ModRM)
	if needMem && !isReg {
		var l int
		in.mem, l, ok = decodeMem(code[i+5:], mod, rmBits, vexX, vexB)
		if !ok {
			return instruction{}, false // truncated
		}
		n += l
		in.mem.seg, in.mem.addr32 = seg, addr32
	}
	in.length = n

	switch {
	case badPrefix != "":
		in.invalid = badPrefix
	case vexW != 0:
		in.invalid = "VEX.W=1"
	case vexL != 0:
		in.invalid = "VEX.L=1"
	case needVvvv0 && in.vvvv != 0:
		in.invalid = "VEX.vvvv must be 1111b"
	case needMem && isReg:
		in.invalid = "register operand where memory is required"
	case needReg && !isReg:
		in.invalid = "memory operand where tile registers are required"
	}
	return in, true
}

// decodeMem decodes the SIB byte and displacement following ModRM. It returns the operand and
// the number of bytes used; ok is false when b is too short.
func decodeMem(b []byte, mod, rmBits, vexX, vexB uint8) (m memOperand, n int, ok bool) {
	m.index = regNone
	if rmBits == 4 { // SIB follows
		if len(b) < 1 {
			return m, 0, false
		}
		sib := b[0]
		n = 1
		m.hasSIB = true
		m.scale = sib >> 6
		if idx := (sib>>3)&7 | vexX<<3; idx != 4 { // 100b without VEX.X means "no index"
			m.index = int8(idx)
		}
		baseBits := sib & 7
		if baseBits == 5 && mod == 0 {
			m.base = regNone // no base, disp32 (also for r13 via VEX.B)
			if len(b) < n+4 {
				return m, 0, false
			}
			m.disp = int64(int32(binary.LittleEndian.Uint32(b[n:])))
			m.dispSize = 4
			return m, n + 4, true
		}
		m.base = int8(baseBits | vexB<<3)
	} else if rmBits == 5 && mod == 0 {
		// RIP-relative disp32 (rm=101b with mod=00, whatever VEX.B says).
		if len(b) < 4 {
			return m, 0, false
		}
		m.base = regRIP
		m.disp = int64(int32(binary.LittleEndian.Uint32(b)))
		m.dispSize = 4
		return m, 4, true
	} else {
		m.base = int8(rmBits | vexB<<3)
	}
	switch mod {
	case 1:
		if len(b) < n+1 {
			return m, 0, false
		}
		m.disp = int64(int8(b[n]))
		m.dispSize = 1
		n++
	case 2:
		if len(b) < n+4 {
			return m, 0, false
		}
		m.disp = int64(int32(binary.LittleEndian.Uint32(b[n:])))
		m.dispSize = 4
		n += 4
	}
	return m, n, true
}

// cpuState holds the registers that address computation needs.
type cpuState struct {
	gpr            [16]uint64 // rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15
	rip            uint64     // address of the instruction
	fsBase, gsBase uint64
}

// segBase returns the base added for the operand's segment override.
func (m memOperand) segBase(c *cpuState) uint64 {
	switch m.seg {
	case segFS:
		return c.fsBase
	case segGS:
		return c.gsBase
	}
	return 0
}

// baseDisp returns base + displacement (RIP-relative: end of instruction + displacement).
func (m memOperand) baseDisp(c *cpuState, length int) uint64 {
	a := uint64(m.disp)
	switch {
	case m.base == regRIP:
		a += c.rip + uint64(length)
	case m.base >= 0:
		a += c.gpr[m.base]
	}
	return a
}

// stride returns index << scale, zero when the SIB byte has no index register (SDM:
// "if no index register in the SIB encoding, the value zero is used").
func (m memOperand) stride(c *cpuState) uint64 {
	if m.index < 0 {
		return 0
	}
	return c.gpr[m.index] << m.scale
}

// finish applies address-size truncation and the segment base to an effective address.
func (m memOperand) finish(c *cpuState, ea uint64) uint64 {
	if m.addr32 {
		ea = uint64(uint32(ea))
	}
	return ea + m.segBase(c)
}

// effectiveAddress is the ordinary address of a memory operand (LDTILECFG, STTILECFG):
// base + index<<scale + displacement.
func (m memOperand) effectiveAddress(c *cpuState, length int) uint64 {
	return m.finish(c, m.baseDisp(c, length)+m.stride(c))
}

// rowAddress is the address of row r of a sibmem operand (TILELOADD, TILESTORED):
// base + displacement + r*stride, the index register giving the stride.
func (m memOperand) rowAddress(c *cpuState, length, r int) uint64 {
	return m.finish(c, m.baseDisp(c, length)+uint64(r)*m.stride(c))
}
