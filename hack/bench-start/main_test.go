package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.95, 10}, {0.1, 1}, {1, 10}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile(nil) = %v, want 0", got)
	}
}

func TestStepSkipsWhatWasNotMeasured(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r result
	r.at[mApply] = t0
	r.at[mJob] = t0.Add(100 * time.Millisecond)
	r.at[mRunner] = t0.Add(time.Second) // no Pod sandbox or sidecar moments
	if d, ok := r.step(mRunner); !ok || d != 900*time.Millisecond {
		t.Errorf("step(mRunner) = %v %v, want 900ms from the Job", d, ok)
	}
	if _, ok := r.step(mSandbox); ok {
		t.Error("step of a moment not measured")
	}
}

// The lines as containerd 1.6's CRI plugin logs them.
const ctrdSample = `time="2026-12-02T03:50:00.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:bench-start-1-abcde,Uid:u1,Namespace:default,Attempt:0,}"
time="2026-12-02T03:50:00.300000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other-xyz,Uid:u2,Namespace:default,Attempt:0,} returns sandbox id \"ffff\""
time="2026-12-02T03:50:00.400000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:bench-start-1-abcde,Uid:u1,Namespace:default,Attempt:0,} returns sandbox id \"aaaa\""
time="2026-12-02T03:50:00.500000000Z" level=info msg="CreateContainer within sandbox \"aaaa\" for container &ContainerMetadata{Name:events,Attempt:0,}"
time="2026-12-02T03:50:00.600000000Z" level=info msg="CreateContainer within sandbox \"aaaa\" for &ContainerMetadata{Name:events,Attempt:0,} returns container id \"bbbb\""
time="2026-12-02T03:50:00.650000000Z" level=info msg="StartContainer for \"bbbb\""
time="2026-12-02T03:50:00.700000000Z" level=info msg="StartContainer for \"bbbb\" returns successfully"
time="2026-12-02T03:50:00.800000000Z" level=info msg="CreateContainer within sandbox \"aaaa\" for &ContainerMetadata{Name:agent,Attempt:0,} returns container id \"cccc\""
time="2026-12-02T03:50:00.900000000Z" level=info msg="StartContainer for \"cccc\" returns successfully"
`

func TestContainerdTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "containerd.log")
	if err := os.WriteFile(path, []byte(ctrdSample), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bench{ctrdLog: path}
	var r result
	if err := b.containerdTimes(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bench-start-1-abcde"}}, &r); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 2, 3, 50, 0, 400000000, time.UTC); !r.at[mSandbox].Equal(want) {
		t.Errorf("sandbox %v, want %v", r.at[mSandbox], want)
	}
	if want := time.Date(2026, 12, 2, 3, 50, 0, 700000000, time.UTC); !r.at[mSidecar].Equal(want) {
		t.Errorf("sidecar %v, want %v", r.at[mSidecar], want)
	}
	if err := b.containerdTimes(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "absent"}}, &result{}); err == nil {
		t.Error("a Pod absent from the log gave no error")
	}
}

func TestRequestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	write := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"time":"2026-12-02T03:50:00.1Z","method":"POST","path":"/v1/messages"}` + "\n")
	l, err := openRequestLog(path)
	if err != nil {
		t.Fatal(err)
	}
	m := l.mark()
	if m != 1 {
		t.Fatalf("mark %d, want 1", m)
	}
	// A line being written is read once it is whole; paths outside the API are not requests.
	write(`{"time":"2026-12-02T03:50:01Z","path":"/healthz"}` + "\n" + `{"time":"2026-12-02T03:50:02.123456789Z","path":"/v1/mes`)
	if _, err := l.first(m, 50*time.Millisecond); err == nil {
		t.Fatal("first found a request in a half-written line")
	}
	write(`sages"}` + "\n")
	got, err := l.first(m, time.Second)
	if want := time.Date(2026, 12, 2, 3, 50, 2, 123456789, time.UTC); err != nil || !got.Equal(want) {
		t.Errorf("first = %v %v, want %v", got, err, want)
	}
}
