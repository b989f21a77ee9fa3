//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"time"

	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPromptFromConfigMap: a 1 MB prompt in a ConfigMap (near its 1 MiB
// bound, eight times what a command-line argument may hold) reaches the
// real claude-code in the Pod whole: the Job passes it as a file.
func TestPromptFromConfigMap(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	_, port := startMock(t, mockmodel.Options{RequestLog: &log})
	const name = "e2e-prompt-configmap"
	prompt := "Please run the demo. scenario:parallel " + strings.Repeat("lorem ipsum dolor sit amet ", (1_000_000-100)/27) + "THE-END-MARKER"
	file := filepath.Join(t.TempDir(), "prompt")
	if err := os.WriteFile(file, []byte(prompt), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := kube("delete", "configmap", name, "--ignore-not-found"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube("create", "configmap", name, "--from-file=prompt="+file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kube("delete", "configmap", name, "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	r := claudeRun(name, "parallel", port)
	r.promptConfigMap = name
	r.apply(t)
	run := waitEnded(t, name, 4*time.Minute)
	if st := run.Status; st.Phase != "Succeeded" || st.Result == nil || *st.Result != parallelResult {
		t.Errorf("phase %s endStatus %s detail %q result %v", st.Phase, st.EndStatus, st.Detail, st.Result)
	}
	if l := log.String(); !strings.Contains(l, "THE-END-MARKER") || !strings.Contains(l, "scenario:parallel lorem ipsum") {
		t.Error("the model did not get the whole prompt")
	}
}
