// Package testenv starts the real kube-apiserver and etcd of
// controller-runtime's envtest for the project's tests and benchmarks, with
// the project's CRDs installed: one place for where the binaries come from
// (KUBEBUILDER_ASSETS, from hack/envtest-assets.sh), where the CRDs are
// (config/crd/bases, found from the module root, whatever the caller's
// working directory) and how a kubeconfig for a user is written.
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// module is the main module's path, as its go.mod declares it.
const module = "github.com/agentrun-dev/agentrun"

// ErrNoAssets is the error of Start when KUBEBUILDER_ASSETS is unset: the
// callers are part of the suite, not optional, so they fail with it.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: this needs a real kube-apiserver and etcd. " +
	"Build or locate them with `export KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)` (make envtest; " +
	"10-14 min the first time), or run `make test`, which does it")

// Options says what to start.
type Options struct {
	// NoCRDs starts the API server without the project's CRDs (for a test
	// that installs them itself, as the chart's does).
	NoCRDs bool
	// EtcdArgs are more flags of etcd (name without dashes: value), for
	// a test of a limit, such as max-request-bytes.
	EtcdArgs map[string]string
}

// Env is a running API server.
type Env struct {
	// Environment is envtest's, for AddUser and the control plane.
	*envtest.Environment
	// Config is an administrator's: system:masters.
	Config *rest.Config
	// Started is how long the start took.
	Started time.Duration
}

// Start starts an API server, with the project's CRDs unless o.NoCRDs.
func Start(o Options) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, ErrNoAssets
	}
	env := &envtest.Environment{}
	if !o.NoCRDs {
		root, err := ModuleRoot()
		if err != nil {
			return nil, err
		}
		env.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	if len(o.EtcdArgs) > 0 {
		env.ControlPlane.Etcd = &envtest.Etcd{}
		for k, v := range o.EtcdArgs {
			env.ControlPlane.Etcd.Configure().Set(k, v)
		}
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		// A half-started control plane (etcd up, the API server not) is
		// stopped here, not left to the caller.
		_ = env.Stop()
		return nil, fmt.Errorf("starting envtest with KUBEBUILDER_ASSETS=%s: %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	return &Env{Environment: env, Config: cfg, Started: time.Since(start)}, nil
}

// StartT starts an API server for one test and stops it when the test ends;
// it fails the test when it cannot start.
func StartT(t testing.TB, o Options) *Env {
	t.Helper()
	e, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return e
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error {
	if err := e.Environment.Stop(); err != nil {
		return fmt.Errorf("stopping envtest: %w", err)
	}
	return nil
}

// Kubeconfig writes a kubeconfig file for a new user u into dir (0600) and
// returns its path, for the commands that take one (kubectl, helm, the
// plugin). Group system:masters makes an administrator.
func (e *Env) Kubeconfig(u envtest.User, dir string) (string, error) {
	user, err := e.AddUser(u, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// Admin is a user of group system:masters.
func Admin(name string) envtest.User {
	return envtest.User{Name: name, Groups: []string{"system:masters"}}
}

// Shared is an API server started on first use and shared by a test
// package's tests; the package's TestMain calls Stop after m.Run.
type Shared struct {
	Options Options
	once    sync.Once
	env     *Env
	err     error
}

// Get starts the API server on the first call and returns it; it fails the
// test when it could not start (and every later test the same way).
func (s *Shared) Get(t testing.TB) *Env {
	t.Helper()
	s.once.Do(func() { s.env, s.err = Start(s.Options) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.env
}

// Stop stops the API server if Get started one.
func (s *Shared) Stop() error {
	if s.env == nil {
		return nil
	}
	return s.env.Stop()
}

// ModuleRoot is the directory of the main module's go.mod: the first
// directory, from the working directory up, whose go.mod declares the
// module (the separate modules under hack/ declare others).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declares(b, module) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s in the working directory or above it", module)
		}
		dir = parent
	}
}

// declares reports whether go.mod content b declares module m.
func declares(b []byte, m string) bool {
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) == 2 && string(f[0]) == "module" && string(bytes.Trim(f[1], `"`)) == m {
			return true
		}
	}
	return false
}

// Kubectl runs the kubectl of KUBEBUILDER_ASSETS: Run returns its stdout
// and stderr. (envtest's type for it is in an internal package.)
type Kubectl interface {
	Run(args ...string) (stdout, stderr io.Reader, err error)
}

// Kubectl is a kubectl for a new user u (the control plane's own KubeCtl
// is deprecated for this).
func (e *Env) Kubectl(u envtest.User) (Kubectl, error) {
	user, err := e.AddUser(u, nil)
	if err != nil {
		return nil, err
	}
	return user.Kubectl()
}
