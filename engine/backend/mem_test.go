package backend

import "testing"

func TestBufOverlaps(t *testing.T) {
	m, other := &Mem{Len: 100}, &Mem{Len: 100}
	a := Buf{M: m, N: 100}
	for _, c := range []struct {
		name string
		x, y Buf
		want bool
	}{
		{"the same view", a.Slice(10, 20), a.Slice(10, 20), true},
		{"one inside the other", a.Slice(10, 20), a.Slice(15, 2), true},
		{"sharing the last element", a.Slice(10, 20), a.Slice(29, 5), true},
		{"end to end", a.Slice(10, 20), a.Slice(30, 5), false},
		{"before", a.Slice(10, 20), a.Slice(0, 10), false},
		{"another allocation", a.Slice(10, 20), Buf{M: other, Off: 10, N: 20}, false},
		{"empty", a.Slice(10, 0), a.Slice(5, 20), false},
		{"absent", Buf{}, Buf{}, false},
	} {
		if got := c.x.Overlaps(c.y); got != c.want {
			t.Errorf("%s: Overlaps = %v, want %v", c.name, got, c.want)
		}
		if got := c.y.Overlaps(c.x); got != c.want {
			t.Errorf("%s, swapped: Overlaps = %v, want %v", c.name, got, c.want)
		}
	}
}
