package recent

import (
	"fmt"
	"testing"
)

func TestSetForgetsOldest(t *testing.T) {
	s := New(3)
	for _, k := range []string{"a", "b", "c"} {
		s.Add(k)
	}
	if !s.Has("a") || !s.Has("c") || s.Has("z") {
		t.Fatal("set lost a key while not full")
	}
	s.Add("d")
	if s.Has("a") || !s.Has("b") || !s.Has("d") || s.Len() != 3 {
		t.Errorf("after overflow: a=%v b=%v d=%v len=%d", s.Has("a"), s.Has("b"), s.Has("d"), s.Len())
	}
	s.Add("b") // b twice in the ring: forgetting its first copy keeps it
	s.Add("e")
	if !s.Has("b") || s.Has("c") {
		t.Errorf("duplicate handling: b=%v c=%v", s.Has("b"), s.Has("c"))
	}
}

func TestSetStaysBounded(t *testing.T) {
	s := New(100)
	for i := 0; i < 100000; i++ {
		s.Add(fmt.Sprint(i))
	}
	if s.Len() != 100 || len(s.keys) != 100 {
		t.Errorf("len = %d, want 100", s.Len())
	}
}
