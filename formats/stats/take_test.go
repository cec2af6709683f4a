package stats

import (
	"strings"
	"testing"
)

// TestTakeHessian: in-memory Hessians are shared until HandOverHessians; then a weight that is
// its input's only reader gets its Hessian (and asking again is an error that names it, never
// a silent "no Hessian"), while an input shared by several weights stays shared.
func TestTakeHessian(t *testing.T) {
	mk := func() *Stats {
		q, k, down := NewLinearStats("q", 2), NewLinearStats("k", 2), NewLinearStats("down", 3)
		k.SharesInputOf = "q"
		q.Hessian, down.Hessian = []float64{1, 0, 0, 1}, make([]float64, 9)
		s := &Stats{Kind: "gquant", Linear: []*LinearStats{q, k, down}}
		s.Reindex()
		return s
	}
	s := mk()
	for _, w := range []string{"q", "k", "down"} {
		h, _, owned, err := s.TakeHessian(w)
		if err != nil || owned || h == nil {
			t.Fatalf("%s without HandOverHessians: owned %v, %v", w, owned, err)
		}
	}
	s.HandOverHessians()
	down := s.LinearFor("down").Hessian
	h, n, owned, err := s.TakeHessian("down")
	if err != nil || !owned || n != 3 || &h[0] != &down[0] {
		t.Fatalf("down: owned %v, n %d, %v", owned, n, err)
	}
	if !s.HasHessian("down") {
		t.Error("down: HasHessian false after it was handed over")
	}
	for _, take := range []func() error{
		func() error { _, _, err := s.Hessian("down"); return err },
		func() error { _, _, _, err := s.TakeHessian("down"); return err },
	} {
		if err := take(); err == nil || !strings.Contains(err.Error(), "down: the Hessian of its input was handed over") {
			t.Errorf("down asked for again: %v", err)
		}
	}
	for _, w := range []string{"q", "k"} { // q's input is k's too
		h, _, owned, err := s.TakeHessian(w)
		if err != nil || owned || h == nil {
			t.Errorf("%s (a shared input): owned %v, %v", w, owned, err)
		}
	}
}
