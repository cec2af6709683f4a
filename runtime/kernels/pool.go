package kernels

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gquant/gquant/internal/mapped"
)

// Pool is a persistent set of workers for fork-join loops over row ranges. Run splits a range
// into contiguous chunks, hands all but the first to the pool's goroutines and runs the first
// on the calling goroutine. Idle workers spin for a short, bounded time waiting for the next
// job (a fork-join then costs well under a microsecond), then park on a channel; the caller
// waits for the workers the same way. Nothing ever spins without a bound. A chunk whose worker
// has not started it by the time the caller is done with its own (a descheduled or still
// waking worker) is run by the caller instead.
//
// Run must be called by one goroutine at a time.
type Pool struct {
	n       int
	spin    atomic.Int64 // time.Duration
	workers []*poolWorker

	// gen is the job generation in the upper bits and the job's worker count in the low 8:
	// workers start a job when it changes.
	gen     atomic.Uint64
	job     poolJob      // written by Run before gen changes; read by the job's workers only
	pending atomic.Int32 // workers (besides the caller) still running the current job

	callerState atomic.Int32 // stateRunning, stateParked or stateWoken
	done        chan struct{}

	panicMu  sync.Mutex
	panicVal any

	closed atomic.Bool
	wg     sync.WaitGroup

	// RunDynamic's job: chunks claimed from next by every worker of a Run.
	dyn struct {
		n, chunk, workers int
		next              atomic.Int64
		f                 func(w, lo, hi int)
	}
	dynRun func(w, lo, hi int) // p.runDynamic, made once
}

type poolJob struct {
	n, grain int
	f        func(w, lo, hi int)
}

type poolWorker struct {
	state atomic.Int32
	claim atomic.Uint64 // generation whose chunk was last claimed (by the worker or the caller)
	wake  chan struct{}
	_     [48]byte // keep each worker's state on its own cache line
}

// tryClaim claims worker pw's chunk of job generation gen (upper bits of Pool.gen) once.
func (pw *poolWorker) tryClaim(gen uint64) bool {
	old := pw.claim.Load()
	return old < gen && pw.claim.CompareAndSwap(old, gen)
}

const (
	stateRunning int32 = iota
	stateParked
	stateWoken
)

// DefaultSpin is how long idle workers, and a caller waiting for them, spin before parking.
const DefaultSpin = 50 * time.Microsecond

// MaxWorkers is the largest pool NewPool makes.
const MaxWorkers = 255

// NewPool starts a pool of n workers, the caller of Run included (so n−1 goroutines start);
// n is clamped to [1, MaxWorkers]. Close stops them.
func NewPool(n int) *Pool {
	n = max(1, min(n, MaxWorkers))
	p := &Pool{n: n, done: make(chan struct{}, 1)}
	p.spin.Store(int64(DefaultSpin))
	p.dynRun = p.runDynamic
	p.workers = make([]*poolWorker, n)
	for w := 1; w < n; w++ {
		pw := &poolWorker{wake: make(chan struct{}, 1)}
		p.workers[w] = pw
		p.wg.Add(1)
		go p.loop(w, pw)
	}
	return p
}

// Workers returns the number of workers, the caller of Run included.
func (p *Pool) Workers() int { return p.n }

// SetSpin sets how long idle workers spin before parking (0: park at once).
func (p *Pool) SetSpin(d time.Duration) { p.spin.Store(int64(d)) }

// Chunk returns worker w's part [lo,hi) of [0,n) when it is split among workers: contiguous,
// as even as whole units of grain allow, boundaries at multiples of grain except at n.
func Chunk(n, grain, workers, w int) (lo, hi int) {
	units := (n + grain - 1) / grain
	per, extra := units/workers, units%workers
	ulo := w*per + min(w, extra)
	uhi := ulo + per
	if w < extra {
		uhi++
	}
	return min(n, ulo*grain), min(n, uhi*grain)
}

// Run calls f(w, lo, hi) once for each chunk [lo,hi) = Chunk(n, grain, k, w), w < k, where k is
// the number of workers that get at least one unit of grain. Chunk 0 runs on the caller, the
// others on the pool's workers (or on the caller when their worker is late): calls with
// different w may run concurrently, calls with the same w never do, so w can index per-worker
// scratch. Run returns when every call has returned. A panic in f is re-raised on the caller
// once all calls have finished. After Close, Run runs everything on the caller.
func (p *Pool) Run(n, grain int, f func(w, lo, hi int)) {
	grain = max(grain, 1)
	if n <= 0 {
		return
	}
	k := min(p.n, (n+grain-1)/grain)
	if k <= 1 || p.closed.Load() {
		f(0, 0, n)
		return
	}
	p.job = poolJob{n: n, grain: grain, f: f}
	p.pending.Store(int32(k - 1))
	p.callerState.Store(stateRunning)
	p.gen.Store((p.gen.Load()>>8+1)<<8 | uint64(k))
	for w := 1; w < k; w++ {
		if pw := p.workers[w]; pw.state.CompareAndSwap(stateParked, stateWoken) {
			pw.wake <- struct{}{}
		}
	}
	lo, hi := Chunk(n, grain, k, 0)
	p.call(f, 0, lo, hi)
	gen := p.gen.Load() >> 8
	for w := 1; w < k; w++ { // run the chunks no worker has started yet
		if p.workers[w].tryClaim(gen) {
			lo, hi := Chunk(n, grain, k, w)
			p.call(f, w, lo, hi)
			p.pending.Add(-1)
		}
	}
	p.wait()
	p.job = poolJob{}
	if v := p.panicVal; v != nil {
		p.panicVal = nil
		if err, ok := v.(error); ok { // kept for errors.As (a fault in a mapped file: see mapped.Fault)
			panic(fmt.Errorf("kernels: pool worker panicked: %w", err))
		}
		panic(fmt.Sprintf("kernels: pool worker panicked: %v", v))
	}
}

// RunDynamic calls f(w, lo, hi) for chunks [lo,hi) covering [0,n) once, handing them out one
// at a time to whichever worker asks first (guided self-scheduling): a chunk is a multiple of
// chunk elements (the last one may be shorter), about 1/(2·workers) of what is left, so that
// the first chunks are large and the last ones small. A worker that is slow, descheduled by
// another process or late to wake does less of the work instead of holding up the job, and
// the workers finish close together. w is the worker (the caller is 0): calls with the same w
// never run concurrently, so w can index per-worker scratch, but one worker may get several
// chunks. Run's other rules apply.
func (p *Pool) RunDynamic(n, chunk int, f func(w, lo, hi int)) {
	chunk = max(chunk, 1)
	if n <= 0 {
		return
	}
	chunks := (n + chunk - 1) / chunk
	if chunks == 1 || p.n == 1 || p.closed.Load() {
		f(0, 0, n)
		return
	}
	d := &p.dyn
	d.n, d.chunk, d.f = n, chunk, f
	d.workers = min(p.n, chunks)
	d.next.Store(0)
	p.Run(d.workers, 1, p.dynRun)
	d.f = nil
}

// runDynamic is the job of RunDynamic on worker w: claim chunks until none are left.
func (p *Pool) runDynamic(w, _, _ int) {
	d := &p.dyn
	for {
		lo := int(d.next.Load())
		if lo >= d.n {
			return
		}
		size := (d.n - lo) / (2 * d.workers)
		size = max(1, (size+d.chunk/2)/d.chunk) * d.chunk
		hi := min(d.n, lo+size)
		if d.next.CompareAndSwap(int64(lo), int64(hi)) {
			d.f(w, lo, hi)
		}
	}
}

// call runs f, keeping the first panic of the job for Run to re-raise.
func (p *Pool) call(f func(w, lo, hi int), w, lo, hi int) {
	defer func() {
		if v := recover(); v != nil {
			p.panicMu.Lock()
			if p.panicVal == nil {
				p.panicVal = v
			}
			p.panicMu.Unlock()
		}
	}()
	f(w, lo, hi)
}

// wait returns once every helper of the current job has finished.
func (p *Pool) wait() {
	start, spin := time.Now(), time.Duration(p.spin.Load())
	for i := 0; p.pending.Load() != 0; i++ {
		if i&63 == 63 && time.Since(start) > spin {
			p.callerState.Store(stateParked)
			if p.pending.Load() == 0 && p.callerState.CompareAndSwap(stateParked, stateRunning) {
				return
			}
			<-p.done // the last worker has set stateWoken and sends
			return
		}
	}
}

// loop is worker w's goroutine.
func (p *Pool) loop(w int, pw *poolWorker) {
	defer p.wg.Done()
	mapped.Guard() // weights may be mapped: a fault is a panic that Run re-raises on its caller
	var seen uint64
	for {
		seen = p.next(pw, seen)
		if p.closed.Load() {
			return
		}
		if k := int(seen & 0xff); w < k && pw.tryClaim(seen>>8) {
			job := p.job
			lo, hi := Chunk(job.n, job.grain, k, w)
			p.call(job.f, w, lo, hi)
			if p.pending.Add(-1) == 0 && p.callerState.CompareAndSwap(stateParked, stateWoken) {
				p.done <- struct{}{}
			}
		}
	}
}

// next waits until the generation differs from seen and returns it: a bounded spin, then park.
func (p *Pool) next(pw *poolWorker, seen uint64) uint64 {
	start, spin := time.Now(), time.Duration(p.spin.Load())
	for i := 0; ; i++ {
		if g := p.gen.Load(); g != seen {
			return g
		}
		if i&63 == 63 && time.Since(start) > spin {
			break
		}
	}
	for {
		pw.state.Store(stateParked)
		if g := p.gen.Load(); g != seen {
			if !pw.state.CompareAndSwap(stateParked, stateRunning) {
				<-pw.wake // a waker saw us parked and is sending: take its token
				pw.state.Store(stateRunning)
			}
			return g
		}
		<-pw.wake
		pw.state.Store(stateRunning)
		if g := p.gen.Load(); g != seen {
			return g
		}
	}
}

// Close stops the workers and waits for them to exit. Run after Close runs on the caller alone.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	p.gen.Store((p.gen.Load()>>8 + 1) << 8)
	for _, pw := range p.workers[1:] {
		if pw.state.CompareAndSwap(stateParked, stateWoken) {
			pw.wake <- struct{}{}
		}
	}
	p.wg.Wait()
}
