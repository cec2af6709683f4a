package stats

import (
	"fmt"
	"os"
)

// ExactTriangle is an exact triangle (TriangleLen(c) values, row by row) that
// Writer.WriteHessianSum adds to a Hessian's last partial: one held in memory (Triangle) or
// in a TriangleFile (TriangleFile.Triangle). A nil ExactTriangle is zero.
type ExactTriangle interface {
	// readFixed copies the values from element off into dst, through buf if it needs one
	// (grown as needed, returned).
	readFixed(off int, dst []Fixed, buf []byte) ([]byte, error)
}

// Triangle is an exact triangle held in memory (nil: zero).
type Triangle []Fixed

func (t Triangle) readFixed(off int, dst []Fixed, buf []byte) ([]byte, error) {
	if t == nil {
		clear(dst)
		return buf, nil
	}
	copy(dst, t[off:off+len(dst)])
	return buf, nil
}

// TriangleFile keeps exact triangles in a file instead of memory: each weight's
// TriangleLen(c) values, 16 bytes each as a statistics file stores them, one triangle after
// another, all zero at first (the file is sized, not written). A calibration whose Hessians
// fold more than once, and whose exact triangles do not fit in memory beside their float64
// partials, keeps them here: each fold streams a triangle through the file once (FoldZero),
// and the statistics file's last fold reads it back (Triangle). The file is the caller's (a
// scratch file, removed after use).
type TriangleFile struct {
	f    *os.File
	at   map[string]int64 // byte offset of each weight's triangle
	cols map[string]int
	// per goroutine of FoldZero, reused from call to call (garbage of a few MB per Hessian
	// and fold would pile up beside gigabytes of live partials before the GC ran)
	blks [][]Fixed
	bufs [][]byte
}

// NewTriangleFile lays out the exact triangles of weights (cols[k] columns for weights[k]) in
// f, an empty file, sizing it.
func NewTriangleFile(f *os.File, weights []string, cols []int) (*TriangleFile, error) {
	t := &TriangleFile{f: f, at: map[string]int64{}, cols: map[string]int{}}
	var size int64
	for k, w := range weights {
		t.at[w], t.cols[w] = size, cols[k]
		size += fixedBytes * int64(TriangleLen(cols[k]))
	}
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	return t, nil
}

// Triangle returns weight's exact triangle, for Writer.WriteHessianSum.
func (t *TriangleFile) Triangle(weight string) ExactTriangle { return fileTriangle{t, weight} }

// fileTriangle is one triangle of a TriangleFile.
type fileTriangle struct {
	t      *TriangleFile
	weight string
}

func (ft fileTriangle) readFixed(off int, dst []Fixed, buf []byte) ([]byte, error) {
	return ft.t.read(ft.weight, off, dst, buf)
}

// read reads len(v) values of weight's triangle from element off into v, through buf (grown
// as needed, returned).
func (t *TriangleFile) read(weight string, off int, v []Fixed, buf []byte) ([]byte, error) {
	if cap(buf) < fixedBytes*len(v) {
		buf = make([]byte, fixedBytes*len(v))
	}
	b := buf[:fixedBytes*len(v)]
	if _, err := t.f.ReadAt(b, t.at[weight]+int64(fixedBytes*off)); err != nil {
		return buf, fmt.Errorf("%s: %s: %v", t.f.Name(), weight, err)
	}
	getFixed(v, b)
	return buf, nil
}

// FoldZero is FoldUpperZero into weight's triangle in the file: the upper triangle of h
// (c × c, row-major) rounded to the grid, added and zeroed, rows split between up to
// threads goroutines, each reading, adding to and writing back blocks of up to fixedBlock
// values. A sum that does not fit returns its element (row, column) with ok false, the
// triangle partly added (callers stop); err is a failed read or write.
func (t *TriangleFile) FoldZero(weight string, h []float64, threads int) (i, j int, ok bool, err error) {
	c, known := t.cols[weight]
	if !known || len(h) < c*c {
		return 0, 0, false, fmt.Errorf("%s: %s: no triangle of %d columns", t.f.Name(), weight, len(h))
	}
	bounds := triangleSplit(c, threads)
	type result struct {
		i, j int
		ok   bool
		err  error
	}
	res := make([]result, len(bounds)-1)
	for len(t.blks) < len(res) {
		t.blks, t.bufs = append(t.blks, make([]Fixed, fixedBlock)), append(t.bufs, nil)
	}
	done := make(chan struct{}, len(res))
	for p := range res {
		go func() {
			r := &res[p]
			r.i, r.j, r.ok, r.err = t.foldRows(weight, h, c, bounds[p], bounds[p+1], t.blks[p], &t.bufs[p])
			done <- struct{}{}
		}()
	}
	for range res {
		<-done
	}
	for _, r := range res {
		if r.err != nil || !r.ok {
			return r.i, r.j, r.ok, r.err
		}
	}
	return 0, 0, true, nil
}

// foldRows is FoldZero over rows [i0, i1), through blk (fixedBlock values) and *buf.
func (t *TriangleFile) foldRows(weight string, h []float64, c, i0, i1 int, blk []Fixed, buf *[]byte) (int, int, bool, error) {
	var err error
	r, j := i0, i0 // the element the next value is
	for off, end := triRow(i0, c), triRow(i1, c); off < end; {
		v := blk[:min(len(blk), end-off)]
		if *buf, err = t.read(weight, off, v, *buf); err != nil {
			return 0, 0, false, err
		}
		for k := 0; k < len(v); {
			seg := min(len(v)-k, c-j)
			if e, ok := FoldFloats(v[k:k+seg], h[r*c+j:r*c+j+seg]); !ok {
				return r, j + e, false, nil
			}
			clear(h[r*c+j : r*c+j+seg]) // the upper triangle, as FoldUpperZero
			k, j = k+seg, j+seg
			if j == c {
				r++
				j = r
			}
		}
		b := (*buf)[:fixedBytes*len(v)]
		putFixed(b, v)
		if _, err := t.f.WriteAt(b, t.at[weight]+int64(fixedBytes*off)); err != nil {
			return 0, 0, false, fmt.Errorf("%s: %s: %v", t.f.Name(), weight, err)
		}
		off += len(v)
	}
	return 0, 0, true, nil
}
