package problems

import "testing"

func TestJoin(t *testing.T) {
	for _, c := range []struct {
		ps   []string
		max  int
		want string
	}{
		{nil, 10, ""},
		{[]string{"a"}, 10, "a"},
		{[]string{"a", "b"}, 2, "a; b"},
		{[]string{"a", "b", "c", "d"}, 2, "a; b; and 2 more problems"},
	} {
		if got := Join(c.ps, c.max); got != c.want {
			t.Errorf("Join(%q, %d) = %q, want %q", c.ps, c.max, got, c.want)
		}
	}
}
