package progress

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/agentrun-dev/agentrun/podcontract"
)

// Long polling bounds. A reader asks for at most MaxWait; the manager asks
// for DefaultWait, so an idle run costs it one request per DefaultWait.
const (
	DefaultWait = 20 * time.Second
	MaxWait     = 60 * time.Second
)

// maxServing bounds the requests the sidecar serves at once. Its readers
// are the manager's replicas, one long poll each; the bound keeps anything
// else that reaches the Pod's port from holding the sidecar's memory (its
// container is limited to 64 MiB). Over it, a request is answered 503.
const maxServing = 32

// Handler serves t's document: GET (or HEAD) podcontract.ProgressPath, with `after=VERSION`
// and `boot=ID` to wait until the document differs from that one, up to
// `wait` (a Go duration, at most MaxWait; DefaultWait when absent).
func Handler(t *Tracker) http.Handler {
	slots := make(chan struct{}, maxServing)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != podcontract.ProgressPath {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read only: GET "+podcontract.ProgressPath, http.StatusMethodNotAllowed)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		q := r.URL.Query()
		doc, changed := t.Snapshot()
		if a := q.Get("after"); a != "" {
			after, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				http.Error(w, "after: not a version", http.StatusBadRequest)
				return
			}
			wait := DefaultWait
			if s := q.Get("wait"); s != "" {
				if wait, err = time.ParseDuration(s); err != nil || wait < 0 {
					http.Error(w, "wait: not a duration", http.StatusBadRequest)
					return
				}
			}
			wait = min(wait, MaxWait)
			if doc.Version == after && q.Get("boot") == doc.Boot && wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-changed:
					doc, _ = t.Snapshot()
				case <-timer.C:
				case <-r.Context().Done():
					timer.Stop()
					return
				}
				timer.Stop()
			}
		}
		b, err := json.Marshal(doc)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b)
	})
}

// Serve serves t's document on addr until ctx ends.
func Serve(ctx context.Context, addr string, t *Tracker) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, t)
}

// ServeListener serves t's document on ln until ctx ends.
func ServeListener(ctx context.Context, ln net.Listener, t *Tracker) error {
	srv := &http.Server{
		Handler:           Handler(t),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      MaxWait + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    8 << 10,
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			_ = srv.Close()
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
