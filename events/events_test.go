package events

import (
	"math/rand"
	"testing"
	"time"
)

// TestStamperIsFormatTime: the Stamper's time is FormatTime's for every
// event, whatever order the times come in: within a millisecond, across
// one, back in time, before 1970, in another zone, the zero time.
func TestStamperIsFormatTime(t *testing.T) {
	base := time.Date(2026, 12, 31, 23, 59, 59, 998_999_999, time.UTC)
	times := []time.Time{
		{}, base, base.Add(1), base.Add(2), base.Add(-1), base.Add(time.Millisecond), base.Add(time.Millisecond),
		base.Add(2 * time.Millisecond), base, base.In(time.FixedZone("x", -7*3600)), base.Add(time.Hour).In(time.FixedZone("y", 3600)),
		time.Unix(0, 0), time.Unix(0, -1), time.Unix(0, -1_000_001), time.Unix(0, -999_999), time.Unix(-1, 0), {},
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 10000; i++ {
		times = append(times, base.Add(time.Duration(rng.Int63n(int64(5*time.Millisecond)))-2*time.Millisecond))
	}
	var s Stamper
	for _, tm := range times {
		var e Text
		s.Stamp(&e, TypeText, tm)
		if want := FormatTime(tm); e.Time != want || e.Schema != Schema || e.Type != TypeText {
			t.Fatalf("%v: stamped %+v, want time %s", tm, e.Base, want)
		}
	}
}
