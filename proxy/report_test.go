package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

// TestReportsAreBounded: each kind (allowed, refused) is reported one by
// one up to its cap, then in summaries: the first at once, then at most
// one per interval, the rest at Close; the set of reported decisions stops
// growing at the caps.
func TestReportsAreBounded(t *testing.T) {
	var mu sync.Mutex
	var got []Access
	s := &Server{maxReported: 3, summaryEvery: 100 * time.Millisecond,
		OnAccess: func(a Access) { mu.Lock(); got = append(got, a); mu.Unlock() }}
	s.init()
	refused := func(i int) Access {
		return Access{Host: fmt.Sprintf("h%d.test", i), Port: 443, Reason: events.ReasonNotAllowed}
	}
	for i := 0; i < 10; i++ {
		s.report(refused(i))
		s.report(refused(0)) // a repeat of a reported one counts nowhere
	}
	for i := 0; i < 3; i++ {
		s.report(Access{Host: fmt.Sprintf("ok%d.test", i), Port: 443, Allowed: true})
	}
	snapshot := func() []Access { mu.Lock(); defer mu.Unlock(); return append([]Access{}, got...) }
	want := []Access{refused(0), refused(1), refused(2), {Host: "h3.test", Port: 443, Reason: events.ReasonNotAllowed, Suppressed: 1},
		{Host: "ok0.test", Port: 443, Allowed: true}, {Host: "ok1.test", Port: 443, Allowed: true}, {Host: "ok2.test", Port: 443, Allowed: true}}
	if g := snapshot(); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("reported\n%v\nwant\n%v", g, want)
	}
	want = append(want, Access{Host: "h9.test", Port: 443, Reason: events.ReasonNotAllowed, Suppressed: 6})
	for deadline := time.Now().Add(2 * time.Second); len(snapshot()) < len(want) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if g := snapshot(); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("after the interval\n%v\nwant\n%v", g, want)
	}
	s.report(refused(10)) // within the interval: waits for Close
	if g := snapshot(); len(g) != len(want) {
		t.Fatalf("a summary came before its interval: %v", g[len(want):])
	}
	s.Close()
	want = append(want, Access{Host: "h10.test", Port: 443, Reason: events.ReasonNotAllowed, Suppressed: 1})
	s.report(refused(11))
	if g := snapshot(); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("at Close\n%v\nwant\n%v", g, want)
	}
	if len(s.seen) != 6 {
		t.Errorf("%d decisions remembered, want the 3 + 3 reported", len(s.seen))
	}
}

// TestFloodOfRefusalsIsSummarised: a client that asks for thousands of
// distinct refused destinations gets a bounded number of reports whose
// counts add up to every refusal.
func TestFloodOfRefusalsIsSummarised(t *testing.T) {
	const maxRep, n = 50, 2000
	s := &Server{Policy: policy(t, ModeCustom, []string{"example.com"}), Resolver: &HostResolver{HostsFile: "/nonexistent"}, maxReported: maxRep}
	addr, reported := serve(t, s)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT h%d.example.org:%d HTTP/1.1\r\nHost: x\r\n\r\n", i, 1+i%65535)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT %d: %v %v", i, resp, err)
		}
		c.Close()
	}
	s.Close()
	got := reported()
	total := 0
	for _, a := range got {
		if a.Allowed {
			t.Errorf("allowed %+v", a)
		}
		total += max(1, a.Suppressed)
	}
	if len(got) > maxRep+3 || total != n {
		t.Errorf("%d reports standing for %d refusals; want at most %d reports for all %d", len(got), total, maxRep+3, n)
	}
}
