// Package ui is `kubectl agentrun ui`: a web view of AgentRuns served on
// the loopback address with the user's own kubeconfig. What the user may
// read is what RBAC gives them: the server watches AgentRuns and
// AgentBudgets with their credentials, reads a run's event log from its
// Pod as `kubectl agentrun logs -f` does, and makes one change only,
// stopping a run. Nothing runs in the cluster for it.
//
// The pages are Go templates around one script (assets/app.js, built by
// hack/ui-build.sh from web/ with its pinned npm packages and committed,
// so that go build needs no npm) that places the server's view models as
// text: nothing the agent wrote is ever markup. docs/ui.md is the user's
// guide.
package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// EventLog reads a run's event log, the events container's log of its
// Pod, as `kubectl agentrun logs -f` does: it waits for the Pod, reads
// the log from its start, reads on when the stream breaks off, and
// returns after the end event, or once the container has ended. The
// plugin gives its own follower; the ui does not read Pods' logs itself.
type EventLog interface {
	Follow(ctx context.Context, namespace, name string, sink LogSink) error
}

// LogSink takes what an EventLog reads.
type LogSink interface {
	// Line takes one line of the log and reports whether it was the end
	// event; an error stops the reading.
	Line(b []byte) (end bool, err error)
	// Note says where the reader waits, or why it reads again.
	Note(msg string)
}

// Options are what `kubectl agentrun ui` was given.
type Options struct {
	// Config is the user's kubeconfig, Client a client made from it.
	Config *rest.Config
	Client client.Client
	// Namespace is the namespace to show; "" shows every namespace (-A).
	Namespace string
	Logs      EventLog
	// Address and Port are where to listen: a loopback address; port 0
	// takes a free one.
	Address string
	Port    int
	// TraceURL is the link of a run's trace, {traceID} in it replaced by
	// status.traceID.
	TraceURL string
	// Open starts the user's browser on the page.
	Open bool
	// Stdout gets the URL, Stderr the notes.
	Stdout, Stderr io.Writer
	Now            func() time.Time
	// Location is the time zone of the spend page's bars (the user's).
	Location *time.Location
}

// Server is the ui's HTTP server.
type Server struct {
	opts    Options
	runs    *store[runInfo]
	budgets *store[v1alpha1.AgentBudget]
	csrf    string
	mux     *http.ServeMux

	mu      sync.Mutex
	canEdit map[string]access // namespace to whether the user may patch AgentRuns
}

type access struct {
	ok  bool
	at  time.Time
	err error
}

// Run serves the ui until ctx ends: it listens, prints the URL with this
// start's token, opens the browser when asked, and watches AgentRuns and
// AgentBudgets with the user's credentials.
func Run(ctx context.Context, opts Options) error {
	ip, err := ListenAddress(opts.Address, opts.Port)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listening on %s port %d: %w (choose another with --port)", ip, opts.Port, err)
	}
	defer ln.Close()
	s, err := NewServer(opts)
	if err != nil {
		return err
	}
	s.start(ctx)
	addr := ln.Addr().(*net.TCPAddr)
	token := newSecret()
	srv := &http.Server{Handler: newGuard(addr, token, s.csrf, s.mux), ReadHeaderTimeout: 10 * time.Second}
	url := fmt.Sprintf("http://%s/?token=%s", net.JoinHostPort(addr.IP.String(), strconv.Itoa(addr.Port)), token)
	where := "namespace " + opts.Namespace
	if opts.Namespace == "" {
		where = "all namespaces"
	}
	fmt.Fprintf(opts.Stdout, "kubectl agentrun ui: AgentRuns of %s at\n  %s\nThe address carries this start's token: keep it to yourself. Ctrl-C stops the server.\n", where, url)
	if opts.Open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(opts.Stderr, "kubectl agentrun ui: could not open a browser (%v): open the address above yourself\n", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if srv.Shutdown(shut) != nil {
		_ = srv.Close() // the pages' event streams do not end by themselves
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ListenAddress checks --address and --port: a loopback address only
// (the page acts with the user's credentials, and is for them alone).
func ListenAddress(address string, port int) (net.IP, error) {
	ip := net.ParseIP(address)
	if address == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--address %q: use a loopback address (127.0.0.1, ::1): the page acts with your kubeconfig's credentials, and is for you alone", address)
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("--port %d: use 0 (any free port) to 65535", port)
	}
	return ip, nil
}

// NewServer makes the server's handler and its watches, not started.
func NewServer(opts Options) (*Server, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	dc, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, csrf: newSecret(), canEdit: map[string]access{},
		runs:    newStore(dc, agentRunsResource, opts.Namespace, "AgentRuns", convertRun),
		budgets: newStore(dc, agentBudgetsResource, opts.Namespace, "AgentBudgets", convertTyped[v1alpha1.AgentBudget])}
	s.mux = s.routes()
	return s, nil
}

func (s *Server) start(ctx context.Context) {
	s.runs.run(ctx)
	s.budgets.run(ctx)
}

// mayPatch reports whether the user may patch AgentRuns in ns, from a
// SelfSubjectAccessReview kept a minute; nil when the API server did
// not say.
func (s *Server) mayPatch(ctx context.Context, ns string) *bool {
	s.mu.Lock()
	a, ok := s.canEdit[ns]
	s.mu.Unlock()
	if ok && time.Since(a.at) < time.Minute {
		if a.err != nil {
			return nil
		}
		return &a.ok
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch",
			Group: v1alpha1.GroupVersion.Group, Resource: "agentruns"}}}
	err := s.opts.Client.Create(ctx, review)
	a = access{ok: err == nil && review.Status.Allowed, at: time.Now(), err: err}
	s.mu.Lock()
	s.canEdit[ns] = a
	s.mu.Unlock()
	if err != nil {
		return nil
	}
	return &a.ok
}
