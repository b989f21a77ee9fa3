package controllers

import (
	"context"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

// Live reads the live progress of running runs from their Pods' events
// sidecars (package progress) and tells the reconciler when a run's
// document changed; the reconciler, still the only writer of status, copies
// it in (docs/kubernetes/live-usage.md says why this way).
//
// One long poll per running Pod: a change reaches the manager as soon as
// the sidecar has it, and an idle run costs one request per poll wait.
// Requests go to the Pod's IP directly, never through the API server, and
// at most MaxConnections are in flight at once.
type Live struct {
	// HTTP reads the documents (progress.NewHTTPClient).
	HTTP *http.Client
	// Wait is each long poll's wait (progress.DefaultWait).
	Wait time.Duration
	// MaxConnections bounds the polls in flight.
	MaxConnections int

	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	events chan crevent.GenericEvent

	mu    sync.Mutex
	runs  map[types.UID]*liveRun
	names map[types.NamespacedName]types.UID
	// gone keeps the last document of runs forgotten a moment ago, for
	// the readers that come after the delete (the budgets' and the
	// metrics' accounts of a deleted run).
	gone map[types.UID]goneRun
}

// liveRun is one watched run.
type liveRun struct {
	key    types.NamespacedName
	url    string
	stop   context.CancelFunc
	doc    *progress.Doc
	failed int // polls failed in a row
	// written is what the reconciler last wrote to status from here.
	written liveWritten
}

type liveWritten struct {
	cursor progress.Cursor
	usage  string // usageKey of what was written
	at     time.Time
}

type goneRun struct {
	doc *progress.Doc
	at  time.Time
}

// goneFor is how long a forgotten run's last document stays readable.
const goneFor = time.Minute

// Default bounds of the live reader.
const (
	// DefaultLiveConnections allows a long poll for each of 4,096
	// running runs at once; more runs wait for a connection in turn.
	DefaultLiveConnections = 4096
	// liveRetryMax caps the wait between failed polls of one Pod (a
	// sidecar not yet listening, a Pod address that does not answer).
	liveRetryMax = 10 * time.Second
)

// NewLive returns a reader; Start it with the manager (mgr.Add).
func NewLive(maxConnections int, wait time.Duration) *Live {
	if maxConnections <= 0 {
		maxConnections = DefaultLiveConnections
	}
	if wait <= 0 {
		wait = progress.DefaultWait
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Live{
		HTTP: progress.NewHTTPClient(maxConnections), Wait: wait, MaxConnections: maxConnections,
		ctx: ctx, cancel: cancel, slots: make(chan struct{}, maxConnections),
		events: make(chan crevent.GenericEvent, 1024),
		runs:   map[types.UID]*liveRun{}, names: map[types.NamespacedName]types.UID{}, gone: map[types.UID]goneRun{},
	}
}

// Events are the reconcile triggers: one per changed document.
func (l *Live) Events() <-chan crevent.GenericEvent { return l.events }

// Start blocks until ctx ends, then stops every poll (manager.Runnable).
func (l *Live) Start(ctx context.Context) error {
	<-ctx.Done()
	l.cancel()
	return nil
}

// NeedLeaderElection: only the leader reconciles, so only it polls.
func (l *Live) NeedLeaderElection() bool { return true }

// progressURL is where a Pod serves its document: the Pod's IP and the
// port its events container names podcontract.ProgressPortName; "" when the Pod has
// no address yet or declares no such port (a Pod of an older manager).
func progressURL(pod *corev1.Pod) string {
	if pod == nil || pod.Status.PodIP == "" {
		return ""
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name != podcontract.EventsContainer {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == podcontract.ProgressPortName && p.ContainerPort > 0 {
				return progress.URL(pod.Status.PodIP, int(p.ContainerPort))
			}
		}
	}
	return ""
}

// Watch makes sure run's Pod at url is polled (a new url, a new Pod,
// restarts the poll).
func (l *Live) Watch(run *v1alpha1.AgentRun, url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	if r := l.runs[run.UID]; r != nil {
		if r.url == url {
			return
		}
		r.stop()
		r.url, r.doc, r.failed = url, nil, 0
		l.startLocked(run.UID, r)
		return
	}
	if old, ok := l.names[key]; ok && old != run.UID {
		l.forgetLocked(old)
	}
	r := &liveRun{key: key, url: url}
	l.runs[run.UID] = r
	l.names[key] = run.UID
	l.startLocked(run.UID, r)
}

func (l *Live) startLocked(uid types.UID, r *liveRun) {
	ctx, stop := context.WithCancel(l.ctx)
	r.stop = stop
	go l.poll(ctx, uid, r.key, r.url)
}

// latest is the run's latest document and what was last written from it;
// nil when there is none.
func (l *Live) latest(uid types.UID) (*progress.Doc, liveWritten) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.runs[uid]; r != nil {
		return r.doc, r.written
	}
	if g, ok := l.gone[uid]; ok {
		return g.doc, liveWritten{}
	}
	return nil, liveWritten{}
}

// noteWritten records that status now holds doc (the reconciler calls it after
// a successful write).
func (l *Live) noteWritten(uid types.UID, w liveWritten) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.runs[uid]; r != nil {
		r.written = w
	}
}

// Forget stops polling run uid and returns its last document.
func (l *Live) Forget(uid types.UID) *progress.Doc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.forgetLocked(uid)
}

// ForgetName is Forget for a run known only by its name (it was deleted);
// it returns the run's uid too.
func (l *Live) ForgetName(key types.NamespacedName) (types.UID, *progress.Doc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	uid, ok := l.names[key]
	if !ok {
		return "", nil
	}
	return uid, l.forgetLocked(uid)
}

func (l *Live) forgetLocked(uid types.UID) *progress.Doc {
	now := time.Now()
	for id, g := range l.gone {
		if now.Sub(g.at) > goneFor {
			delete(l.gone, id)
		}
	}
	r := l.runs[uid]
	if r == nil {
		return nil
	}
	r.stop()
	delete(l.runs, uid)
	if l.names[r.key] == uid {
		delete(l.names, r.key)
	}
	if r.doc != nil {
		l.gone[uid] = goneRun{doc: r.doc, at: now}
	}
	return r.doc
}

// Watching is how many runs are polled.
func (l *Live) Watching() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}

// poll long-polls one Pod until ctx ends or the run's end is in the
// document.
func (l *Live) poll(ctx context.Context, uid types.UID, key types.NamespacedName, url string) {
	lg := log.FromContext(ctx).WithValues("agentrun", key.String())
	var cursor *progress.Cursor
	for ctx.Err() == nil {
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wait := l.Wait
		if cursor == nil {
			wait = 0
		}
		doc, err := progress.Fetch(ctx, l.HTTP, url, cursor, wait)
		<-l.slots
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failed := l.failed(uid)
			if failed == 1 || failed%30 == 0 {
				lg.V(1).Info("reading live progress failed", "url", url, "failures", failed, "error", err.Error())
			}
			sleep(ctx, min(time.Duration(failed)*time.Second, liveRetryMax))
			continue
		}
		if cursor == nil || doc.Cursor() != *cursor {
			if !l.store(uid, url, doc) {
				return
			}
			select {
			case l.events <- crevent.GenericEvent{Object: &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
			case <-ctx.Done():
				return
			}
		}
		if doc.Ended {
			return // the harvest takes it from here
		}
		c := doc.Cursor()
		cursor = &c
	}
}

// store keeps a new document of a still watched run; false when the run
// is no longer watched at this url.
func (l *Live) store(uid types.UID, url string, doc *progress.Doc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.runs[uid]
	if r == nil || r.url != url {
		return false
	}
	r.doc, r.failed = doc, 0
	return true
}

func (l *Live) failed(uid types.UID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.runs[uid]; r != nil {
		r.failed++
		return r.failed
	}
	return 1
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runKey is the reconcile key of an object.
func runKey(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}
