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

func TestFirst(t *testing.T) {
	s := []string{"a", "b", "c", "d"}
	if got := First(s, 4); len(got) != 4 || &got[0] != &s[0] {
		t.Errorf("First(s, 4) = %q, want s itself", got)
	}
	got := First(s, 2)
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "and 2 more" {
		t.Errorf("First(s, 2) = %q", got)
	}
	if s[2] != "c" {
		t.Errorf("First changed its input: %q", s)
	}
}
