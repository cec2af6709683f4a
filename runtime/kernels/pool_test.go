package kernels

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestChunk(t *testing.T) {
	for _, c := range []struct{ n, grain, workers int }{{100, 1, 3}, {100, 16, 3}, {5, 16, 4}, {1000, 32, 7}, {64, 16, 4}} {
		next := 0
		for w := 0; w < c.workers; w++ {
			lo, hi := Chunk(c.n, c.grain, c.workers, w)
			if lo != next || hi < lo {
				t.Fatalf("%+v: worker %d got [%d,%d), want start %d", c, w, lo, hi, next)
			}
			if (lo%c.grain != 0 && lo != c.n) || (hi%c.grain != 0 && hi != c.n) {
				t.Fatalf("%+v: worker %d got [%d,%d), not aligned to %d", c, w, lo, hi, c.grain)
			}
			next = hi
		}
		if next != c.n {
			t.Fatalf("%+v: chunks end at %d", c, next)
		}
	}
}

// TestPoolRun checks that every index is visited exactly once, by the right worker, over many
// jobs, both with spinning workers and with workers that park between jobs.
func TestPoolRun(t *testing.T) {
	for _, spin := range []time.Duration{DefaultSpin, 0} {
		p := NewPool(4)
		p.SetSpin(spin)
		for job := 0; job < 300; job++ {
			n := 1 + job%97
			grain := 1 + job%5
			hits := make([]atomic.Int32, n)
			var calls atomic.Int32
			p.Run(n, grain, func(w, lo, hi int) {
				calls.Add(1)
				k := min(p.Workers(), (n+grain-1)/grain)
				if elo, ehi := Chunk(n, grain, k, w); elo != lo || ehi != hi {
					t.Errorf("worker %d got [%d,%d), want [%d,%d)", w, lo, hi, elo, ehi)
				}
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if hits[i].Load() != 1 {
					t.Fatalf("spin %v job %d: index %d visited %d times", spin, job, i, hits[i].Load())
				}
			}
			if want := min(4, (n+grain-1)/grain); int(calls.Load()) != want {
				t.Fatalf("job %d: %d calls, want %d", job, calls.Load(), want)
			}
			if job%50 == 0 {
				time.Sleep(200 * time.Microsecond) // let workers park
			}
		}
		p.Close()
		p.Close() // idempotent
		ran := false
		p.Run(10, 1, func(w, lo, hi int) { ran = w == 0 && lo == 0 && hi == 10 })
		if !ran {
			t.Fatal("Run after Close did not run on the caller")
		}
	}
}

func TestPoolPanic(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	defer func() {
		v := recover()
		if v == nil || !strings.Contains(v.(string), "boom") {
			t.Fatalf("recovered %v, want the worker's panic", v)
		}
		// The pool still works after a panic.
		var sum atomic.Int64
		p.Run(30, 1, func(w, lo, hi int) { sum.Add(int64(hi - lo)) })
		if sum.Load() != 30 {
			t.Fatalf("after panic: covered %d of 30", sum.Load())
		}
	}()
	p.Run(30, 1, func(w, lo, hi int) {
		if w == 2 {
			panic("boom")
		}
	})
}

// TestPoolMatVec splits a product across the pool and compares with one call.
func TestPoolMatVec(t *testing.T) {
	cases := makeCases(t, Q4_K, 9)
	c := cases[0]
	p := NewPool(3)
	defer p.Close()
	var a Acts
	c.m.Prepare(&a, c.X, c.nTok)
	Y := make([]float32, c.nTok*c.m.Rows)
	p.Run(c.m.Rows, 1, func(w, lo, hi int) { c.m.MulActs(Y, &a, lo, hi) })
	want := make([]float32, len(Y))
	c.m.MulActs(want, &a, 0, c.m.Rows)
	for i := range Y {
		if Y[i] != want[i] {
			t.Fatalf("Y[%d] = %v, want %v", i, Y[i], want[i])
		}
	}
}

// TestPoolRunDynamic checks that every index is visited exactly once, in chunks that are
// multiples of the asked size, that calls of one worker never overlap, and that a stalled
// worker's share is done by the others.
func TestPoolRunDynamic(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for job := 0; job < 200; job++ {
		n := 1 + job%131
		chunk := 1 + job%9
		hits := make([]atomic.Int32, n)
		var busy [3]atomic.Int32
		p.RunDynamic(n, chunk, func(w, lo, hi int) {
			if busy[w].Add(1) != 1 {
				t.Errorf("worker %d runs two chunks at once", w)
			}
			if lo%chunk != 0 || ((hi-lo)%chunk != 0 && hi != n) {
				t.Errorf("chunk [%d,%d) of %d with size %d", lo, hi, n, chunk)
			}
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
			busy[w].Add(-1)
		})
		for i := range hits {
			if hits[i].Load() != 1 {
				t.Fatalf("job %d: index %d visited %d times", job, i, hits[i].Load())
			}
		}
	}
	// Worker 1 stalls on its first chunk: the others must take the rest.
	var byWorker [3]atomic.Int32
	p.RunDynamic(60, 1, func(w, lo, hi int) {
		if byWorker[w].Add(1) == 1 && w == 1 {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if n := byWorker[1].Load(); n >= 30 {
		t.Errorf("stalled worker ran %d of 60 chunks", n)
	}
	// Panics reach the caller.
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "boom") {
			t.Errorf("panic %v, want boom", v)
		}
	}()
	p.RunDynamic(40, 1, func(w, lo, hi int) {
		if lo <= 17 && 17 < hi {
			panic("boom")
		}
	})
}
