package amxemu

import (
	"encoding/binary"
	"fmt"
)

// memory is the address space of the traced process (a fake one in unit tests).
type memory interface {
	// ReadAt fills p from address addr; an error means some byte could not be read.
	ReadAt(p []byte, addr uint64) error
	// WriteAt stores p at address addr; an error means some byte could not be written.
	WriteAt(p []byte, addr uint64) error
}

// execute emulates in on the tile state s of one thread. cpu gives the register values (RIP
// is the address of in), mem the thread's memory. The returned error is the reason real
// hardware would fault (#UD, #GP, or a page fault on the memory operand); s may then be
// partly updated, which does not matter because the caller kills the process.
func (s *tileState) execute(in *instruction, cpu *cpuState, mem memory) error {
	if in.invalid != "" {
		return fmt.Errorf("#UD: invalid encoding: %s", in.invalid)
	}
	switch in.op {
	case opLdtilecfg:
		var cfg [64]byte
		addr := in.mem.effectiveAddress(cpu, in.length)
		if err := mem.ReadAt(cfg[:], addr); err != nil {
			return fmt.Errorf("memory fault reading the tile configuration at 0x%x: %v", addr, err)
		}
		return s.loadConfig(&cfg)
	case opSttilecfg:
		cfg := s.storeConfig()
		addr := in.mem.effectiveAddress(cpu, in.length)
		if err := mem.WriteAt(cfg[:], addr); err != nil {
			return fmt.Errorf("memory fault writing the tile configuration at 0x%x: %v", addr, err)
		}
		return nil
	case opTilerelease:
		s.reset()
		return nil
	case opTilezero:
		if err := s.checkTile(in.reg); err != nil {
			return err
		}
		s.data[in.reg] = [maxRows][bytesPerRow]byte{}
		s.startRow = 0
		return nil
	case opTileloadd, opTileloaddt1:
		return s.tileLoad(in, cpu, mem)
	case opTilestored:
		return s.tileStore(in, cpu, mem)
	case opTdpbssd, opTdpbsud, opTdpbusd, opTdpbuud, opTdpbf16ps:
		if err := s.checkMatmul(in.reg, in.rm, in.vvvv); err != nil {
			return err
		}
		if in.op == opTdpbf16ps {
			s.dotBF16(in.reg, in.rm, in.vvvv)
		} else {
			aSigned := in.op == opTdpbssd || in.op == opTdpbsud
			bSigned := in.op == opTdpbssd || in.op == opTdpbusd
			s.dotInt8(in.reg, in.rm, in.vvvv, aSigned, bSigned)
		}
		return nil
	}
	return fmt.Errorf("instruction is not emulated by amxemu")
}

// tileLoad implements TILELOADD/TILELOADDT1 (the T1 cache hint has no architectural effect):
// rows start_row..rows-1 are read, colsb bytes each, the rest of each row and the rows beyond
// the configured ones are zeroed, and start_row is reset to 0.
func (s *tileState) tileLoad(in *instruction, cpu *cpuState, mem memory) error {
	t := in.reg
	if err := s.checkTile(t); err != nil {
		return err
	}
	rows, colsb := int(s.rows[t]), int(s.colsb[t])
	if int(s.startRow) >= rows {
		return fmt.Errorf("#UD: start_row %d >= tmm%d rows %d", s.startRow, t, rows)
	}
	s.zeroUpperRows(t, int(s.startRow))
	for r := int(s.startRow); r < rows; r++ {
		addr := in.mem.rowAddress(cpu, in.length, r)
		if err := mem.ReadAt(s.data[t][r][:colsb], addr); err != nil {
			return fmt.Errorf("memory fault reading row %d of tmm%d at 0x%x: %v", r, t, addr, err)
		}
		s.zeroRowTail(t, r, colsb)
	}
	s.startRow = 0
	return nil
}

// tileStore implements TILESTORED: rows start_row..rows-1 of the tile, colsb bytes each, are
// written; start_row is reset to 0.
func (s *tileState) tileStore(in *instruction, cpu *cpuState, mem memory) error {
	t := in.reg
	if err := s.checkTile(t); err != nil {
		return err
	}
	rows, colsb := int(s.rows[t]), int(s.colsb[t])
	if int(s.startRow) >= rows {
		return fmt.Errorf("#UD: start_row %d >= tmm%d rows %d", s.startRow, t, rows)
	}
	for r := int(s.startRow); r < rows; r++ {
		addr := in.mem.rowAddress(cpu, in.length, r)
		if err := mem.WriteAt(s.data[t][r][:colsb], addr); err != nil {
			return fmt.Errorf("memory fault writing row %d of tmm%d at 0x%x: %v", r, t, addr, err)
		}
	}
	s.startRow = 0
	return nil
}

// checkMatmul returns the #UD reason of TDP* dest(C), a(A), b(B) per the SDM's exception
// class: distinct valid tiles with colsb multiples of 4, A is M x K dwords, B is K x N dwords,
// C is M x N dwords, K and N at most 16.
func (s *tileState) checkMatmul(c, a, b uint8) error {
	if c == a || c == b || a == b {
		return fmt.Errorf("#UD: tiles must be distinct (dest tmm%d, A tmm%d, B tmm%d)", c, a, b)
	}
	for _, t := range []uint8{c, a, b} {
		if err := s.checkTile(t); err != nil {
			return err
		}
	}
	switch {
	case s.colsb[c] != s.colsb[b]:
		return fmt.Errorf("#UD: shape mismatch: dest tmm%d colsb %d != B tmm%d colsb %d", c, s.colsb[c], b, s.colsb[b])
	case s.rows[c] != s.rows[a]:
		return fmt.Errorf("#UD: shape mismatch: dest tmm%d rows %d != A tmm%d rows %d", c, s.rows[c], a, s.rows[a])
	case int(s.colsb[a])/4 != int(s.rows[b]):
		return fmt.Errorf("#UD: shape mismatch: A tmm%d colsb/4 %d != B tmm%d rows %d", a, s.colsb[a]/4, b, s.rows[b])
	case int(s.colsb[c])/4 > tmulMaxN || int(s.colsb[a])/4 > tmulMaxK || int(s.rows[b]) > tmulMaxK:
		return fmt.Errorf("#UD: matrix exceeds tmul_maxk/tmul_maxn")
	}
	return nil
}

// finishMatmul zeroes what TDP* leaves zero in dest c: the bytes of rows 0..rows-1 beyond
// colsb and the rows beyond rows; it also resets start_row.
func (s *tileState) finishMatmul(c uint8) {
	rows, colsb := int(s.rows[c]), int(s.colsb[c])
	for r := range rows {
		s.zeroRowTail(c, r, colsb)
	}
	s.zeroUpperRows(c, rows)
	s.startRow = 0
}

// dotInt8 implements TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD: for each dword of C,
// C[m][n] += sum over k of the dot product of the four bytes of A[m] dword k and of B[k] dword
// n, A's bytes signed when aSigned, B's when bSigned; the int32 sums wrap around.
func (s *tileState) dotInt8(c, a, b uint8, aSigned, bSigned bool) {
	M, N, K := int(s.rows[c]), int(s.colsb[c])/4, int(s.rows[b])
	for m := range M {
		dst := s.data[c][m][:]
		for n := range N {
			acc := int32(binary.LittleEndian.Uint32(dst[4*n:]))
			for k := range K {
				x := s.data[a][m][4*k : 4*k+4]
				y := s.data[b][k][4*n : 4*n+4]
				var sum int32
				for i := range 4 {
					xv, yv := int32(x[i]), int32(y[i])
					if aSigned {
						xv = int32(int8(x[i]))
					}
					if bSigned {
						yv = int32(int8(y[i]))
					}
					sum += xv * yv
				}
				acc += sum
			}
			binary.LittleEndian.PutUint32(dst[4*n:], uint32(acc))
		}
	}
	s.finishMatmul(c)
}

// dotBF16 implements TDPBF16PS following the SDM pseudo-code: for each row m of C two fp32
// partial sums per output dword (even and odd bf16 lanes) start at +0 and accumulate
// A[m].bf16[2k+j] * B[k].bf16[2n+j] over k = 0, 1, ... with a fused multiply-add each; then
// C[m][n] := C[m][n] + (even + odd). Every operation rounds to nearest even, treats denormal
// inputs as zero (DAZ) and flushes denormal results to zero (FTZ); MXCSR is neither used nor
// changed. See fma32 for the exact rounding and NaN rules.
func (s *tileState) dotBF16(c, a, b uint8) {
	M, N, K := int(s.rows[c]), int(s.colsb[c])/4, int(s.rows[b])
	for m := range M {
		var tmp [2 * tmulMaxN]uint32 // +0.0
		for k := range K {
			arow := s.data[a][m][4*k:]
			for n := range N {
				brow := s.data[b][k][4*n:]
				for j := range 2 {
					x := uint32(binary.LittleEndian.Uint16(arow[2*j:])) << 16
					y := uint32(binary.LittleEndian.Uint16(brow[2*j:])) << 16
					tmp[2*n+j] = fma32(x, y, tmp[2*n+j])
				}
			}
		}
		dst := s.data[c][m][:]
		for n := range N {
			pair := add32(tmp[2*n], tmp[2*n+1])
			acc := binary.LittleEndian.Uint32(dst[4*n:])
			binary.LittleEndian.PutUint32(dst[4*n:], add32(acc, pair))
		}
	}
	s.finishMatmul(c)
}
