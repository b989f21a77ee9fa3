package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentrun-dev/agentrun/podcontract"
)

// TestClientLogReader checks the request the real log reader makes
// (envtest has no kubelet to serve pods/log): the events container, the
// last line only, a byte bound, and a client-side bound as well.
func TestClientLogReader(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path + "?" + r.URL.RawQuery
		w.Write([]byte(strings.Repeat("x", 100))) // more than asked for
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ClientLogReader{Client: cs}.TailLog(context.Background(), "ns", "pod-1", podcontract.EventsContainer, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 10 {
		t.Errorf("read %d bytes, want the bound of 10", len(b))
	}
	for _, want := range []string{"/api/v1/namespaces/ns/pods/pod-1/log?", "container=events", "tailLines=1", "limitBytes=10"} {
		if !strings.Contains(got, want) {
			t.Errorf("request %q lacks %q", got, want)
		}
	}
}
