package amxemu

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Palette 1 limits (CPUID leaf 1DH on every AMX implementation so far).
const (
	numTiles    = 8  // max_names
	maxRows     = 16 // max_rows
	bytesPerRow = 64 // bytes_per_row
	tmulMaxK    = 16 // tmul_maxk (rows of B, dwords of A's row)
	tmulMaxN    = 16 // tmul_maxn (dwords of a row of B and C)
)

// tileState is the AMX architectural state of one thread: TILECFG and TILEDATA.
type tileState struct {
	configured bool // TILES_CONFIGURED
	palette    uint8
	startRow   uint8
	rows       [numTiles]uint8
	colsb      [numTiles]uint16
	data       [numTiles][maxRows][bytesPerRow]byte
}

// reset puts the state into the INIT state (palette 0, all tile data zero).
func (s *tileState) reset() { *s = tileState{} }

// loadConfig implements LDTILECFG on the 64-byte memory image cfg. A configuration hardware
// rejects returns the #GP reason (all problems, joined with "; ") and leaves s unchanged.
// Palette 0 returns to the INIT state; palette 1 configures the tiles and zeroes all tile data.
// A non-zero start_row is accepted and honoured by the next TILELOADD/TILESTORED, as the SDM
// describes for restarting an interrupted load or store.
func (s *tileState) loadConfig(cfg *[64]byte) error {
	palette := cfg[0]
	if palette == 0 {
		s.reset()
		return nil
	}
	if palette != 1 {
		return fmt.Errorf("#GP: palette_id %d is not supported (only 0 and 1)", palette)
	}
	var bad []string
	for _, r := range [][2]int{{2, 16}, {32, 48}, {56, 64}} {
		for b := r[0]; b < r[1]; b++ {
			if cfg[b] != 0 {
				bad = append(bad, fmt.Sprintf("reserved byte %d is 0x%02x, must be zero", b, cfg[b]))
			}
		}
	}
	var next tileState
	next.configured, next.palette, next.startRow = true, 1, cfg[1]
	for t := range numTiles {
		colsb := binary.LittleEndian.Uint16(cfg[16+2*t:])
		rows := cfg[48+t]
		if colsb > bytesPerRow {
			bad = append(bad, fmt.Sprintf("tmm%d: colsb %d > %d", t, colsb, bytesPerRow))
		}
		if rows > maxRows {
			bad = append(bad, fmt.Sprintf("tmm%d: rows %d > %d", t, rows, maxRows))
		}
		if (rows == 0) != (colsb == 0) {
			bad = append(bad, fmt.Sprintf("tmm%d: rows %d and colsb %d must be both zero or both non-zero", t, rows, colsb))
		}
		next.rows[t], next.colsb[t] = rows, colsb
	}
	if len(bad) > 0 {
		return fmt.Errorf("#GP: invalid tile configuration: %s", strings.Join(bad, "; "))
	}
	*s = next // tile data is zero in next
	return nil
}

// storeConfig implements STTILECFG: the current TILECFG as a 64-byte image, all zero when the
// tiles are not configured.
func (s *tileState) storeConfig() [64]byte {
	var cfg [64]byte
	if !s.configured {
		return cfg
	}
	cfg[0], cfg[1] = s.palette, s.startRow
	for t := range numTiles {
		binary.LittleEndian.PutUint16(cfg[16+2*t:], s.colsb[t])
		cfg[48+t] = s.rows[t]
	}
	return cfg
}

// checkTile returns the #UD reason when tile t cannot be used: tiles not configured, tile
// number beyond max_names, tile not configured by the palette (rows == 0), or colsb not a
// multiple of 4.
func (s *tileState) checkTile(t uint8) error {
	if !s.configured {
		return fmt.Errorf("#UD: tiles not configured (no LDTILECFG with palette 1 on this thread)")
	}
	if t >= numTiles {
		return fmt.Errorf("#UD: tmm%d does not exist (max_names %d)", t, numTiles)
	}
	if s.rows[t] == 0 {
		return fmt.Errorf("#UD: tmm%d is not configured (rows 0, colsb 0)", t)
	}
	if s.colsb[t]%4 != 0 {
		return fmt.Errorf("#UD: tmm%d colsb %d is not a multiple of 4", t, s.colsb[t])
	}
	return nil
}

// zeroUpperRows zeroes rows from..maxRows-1 of tile t.
func (s *tileState) zeroUpperRows(t uint8, from int) {
	for r := from; r < maxRows; r++ {
		s.data[t][r] = [bytesPerRow]byte{}
	}
}

// zeroRowTail zeroes the bytes of row r of tile t from byte from on.
func (s *tileState) zeroRowTail(t uint8, r, from int) {
	clear(s.data[t][r][from:])
}
