package ui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
)

// The page's files are in the binary: the page works with no network,
// no CDN.
//
//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

var pages = template.Must(template.ParseFS(templateFiles, "templates/*.html"))

// page is what a template is given.
type page struct {
	Title     string
	Page      string // runs, run, spend: the script's part for it
	Namespace string // the ui's namespace, "" for all
	RunNS     string
	RunName   string
	CSRF      string
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFiles, "assets")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /{$}", s.page("runs", "AgentRuns"))
	mux.HandleFunc("GET /spend", s.page("spend", "Spend"))
	mux.HandleFunc("GET /runs/{ns}/{name}", s.runPage)
	mux.HandleFunc("GET /api/runs", s.runsStream)
	mux.HandleFunc("GET /api/runs/{ns}/{name}", s.runStream)
	mux.HandleFunc("GET /api/spend", s.spendStream)
	mux.HandleFunc("POST /api/runs/{ns}/{name}/stop", s.stop)
	return mux
}

func (s *Server) page(name, title string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.render(w, page{Title: title, Page: name})
	}
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := runKey(w, r)
	if !ok {
		return
	}
	s.render(w, page{Title: name, Page: "run", RunNS: ns, RunName: name})
}

func (s *Server) render(w http.ResponseWriter, p page) {
	p.Namespace, p.CSRF = s.opts.Namespace, s.csrf
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, p.Page+".html", p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// runKey reads and checks the namespace and name in the path.
func runKey(w http.ResponseWriter, r *http.Request) (ns, name string, ok bool) {
	ns, name = r.PathValue("ns"), r.PathValue("name")
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		http.Error(w, "not an AgentRun's namespace and name", http.StatusNotFound)
		return "", "", false
	}
	return ns, name, true
}

// listState is what the runs list says besides its rows.
type listState struct {
	Synced     bool     `json:"synced"`
	Problem    string   `json:"problem"`
	AllNS      bool     `json:"allNamespaces"`
	Namespaces []string `json:"namespaces"`
	Runtimes   []string `json:"runtimes"`
	Phases     []string `json:"phases"`
	Total      int      `json:"total"`
}

// snapshot is every row the filter keeps, and the list's state.
type snapshot struct {
	State listState `json:"state"`
	Rows  []row     `json:"rows"`
}

// changes are the rows that changed: upserted or removed (by
// namespace/name).
type changes struct {
	State  listState `json:"state"`
	Upsert []row     `json:"upsert"`
	Remove []string  `json:"remove"`
}

func (s *Server) listState(all []*keyed[runInfo]) listState {
	synced, _ := s.runs.state()
	st := listState{Synced: synced, Problem: s.runs.problem(), AllNS: s.opts.Namespace == "", Total: len(all),
		Phases: []string{string(v1alpha1.PhasePending), string(v1alpha1.PhaseQueued), string(v1alpha1.PhaseRunning),
			string(v1alpha1.PhaseSucceeded), string(v1alpha1.PhaseFailed)}}
	nss, rts := map[string]bool{}, map[string]bool{}
	for _, k := range all {
		nss[k.obj.Run.Namespace] = true
		rts[string(k.obj.Run.Spec.Runtime)] = true
	}
	if s.opts.Namespace != "" {
		nss[s.opts.Namespace] = true
	}
	st.Namespaces, st.Runtimes = sortedKeys(nss), sortedKeys(rts)
	for i := range st.Runtimes {
		st.Runtimes[i] = inert(st.Runtimes[i])
	}
	return st
}

// runsStream is the runs list's event stream: a snapshot of the rows the
// filter keeps, then the rows that change, from the watch.
func (s *Server) runsStream(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query().Get)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, ok := newStream(w)
	if !ok {
		return
	}
	sub, cancel := s.runs.subscribe()
	defer cancel()
	sendAll := func() error {
		all := s.runs.list()
		snap := snapshot{State: s.listState(all), Rows: []row{}}
		for _, k := range all {
			if f.match(&k.obj.Run) {
				snap.Rows = append(snap.Rows, newRow(k.obj))
			}
		}
		sortRows(snap.Rows)
		return out.send("snapshot", snap)
	}
	if sendAll() != nil {
		return
	}
	s.follow(r.Context(), out, sub, func(keys map[string]types.UID, all bool) error {
		if all {
			return sendAll()
		}
		ch := changes{State: s.listState(s.runs.list()), Upsert: []row{}, Remove: []string{}}
		for key := range keys {
			ns, name, _ := strings.Cut(key, "/")
			if k := s.runs.get(ns, name); k != nil && f.match(&k.obj.Run) {
				ch.Upsert = append(ch.Upsert, newRow(k.obj))
			} else {
				ch.Remove = append(ch.Remove, key)
			}
		}
		return out.send("changes", ch)
	})
}

// follow sends what a subscription reports until the request ends, a
// change at most every throttle, and keeps the connection alive.
func (s *Server) follow(ctx context.Context, out *stream, sub *subscription, send func(map[string]types.UID, bool) error) {
	ping := time.NewTicker(20 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if out.ping() != nil {
				return
			}
		case <-sub.ready:
			if !sleepCtx(ctx, throttle) {
				return
			}
			keys, all := sub.take()
			if send(keys, all) != nil {
				return
			}
		}
	}
}

// runStream is a run page's event stream: the run's view whenever its
// status changes, and its event log as timeline items, followed to its
// end while it runs.
func (s *Server) runStream(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := runKey(w, r)
	if !ok {
		return
	}
	out, ok := newStream(w)
	if !ok {
		return
	}
	ctx := r.Context()
	sub, cancel := s.runs.subscribe()
	defer cancel()
	bsub, bcancel := s.budgets.subscribe()
	defer bcancel()
	key := ns + "/" + name
	sendRun := func() error {
		k := s.runs.get(ns, name)
		if k == nil {
			synced, _ := s.runs.state()
			return out.send("missing", map[string]any{"synced": synced, "problem": s.runs.problem(),
				"message": fmt.Sprintf("There is no AgentRun %s in namespace %s (any more).", name, ns)})
		}
		var budgets []*v1alpha1.AgentBudget
		for _, b := range s.budgets.list() {
			budgets = append(budgets, b.obj)
		}
		var runs []*runInfo
		for _, k := range s.runs.list() {
			if k.Namespace == ns {
				runs = append(runs, k.obj)
			}
		}
		return out.send("run", runPage(k.obj, budgets, runs, s.mayPatch(ctx, ns), s.opts.TraceURL, s.opts.Now()))
	}
	if sendRun() != nil {
		return
	}
	items := make(chan []item, 4)
	go s.readLog(ctx, ns, name, items)
	ping := time.NewTicker(20 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if out.ping() != nil {
				return
			}
		case batch := <-items:
			if out.send("items", batch) != nil {
				return
			}
		case <-sub.ready:
			if keys, all := sub.take(); all || keys[key] != "" {
				if sendRun() != nil {
					return
				}
			}
		case <-bsub.ready:
			bsub.take()
			if sendRun() != nil {
				return
			}
		}
	}
}

// logEnd is the last item of a log's reading: how it ended.
type logEnd struct {
	SawEnd bool   `json:"sawEnd"`
	Error  string `json:"error"`
}

// readLog follows the run's event log and sends its timeline items in
// batches: what has come while the page took the last batch.
func (s *Server) readLog(ctx context.Context, ns, name string, out chan<- []item) {
	sink := &pageSink{ctx: ctx, tl: newTimeline(), lines: make(chan item, 512)}
	done := make(chan error, 1)
	go func() {
		done <- s.opts.Logs.Follow(ctx, ns, name, sink)
		close(sink.lines)
	}()
	for {
		it, ok := <-sink.lines
		if !ok {
			break
		}
		batch := []item{it}
	more:
		for len(batch) < 500 {
			select {
			case it, ok := <-sink.lines:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		select {
		case out <- batch:
		case <-ctx.Done():
			return
		}
	}
	err := <-done
	end := logEnd{SawEnd: sink.sawEnd}
	if err != nil && ctx.Err() == nil {
		end.Error = inert(err.Error())
		if apierrors.IsForbidden(err) {
			end.Error = "Your credentials may not read the Pod's log (pods/log): " + end.Error
		}
	}
	b, _ := json.Marshal(end)
	select {
	case out <- []item{{Kind: "logEnd", Body: string(b)}}:
	case <-ctx.Done():
	}
}

// pageSink is where the plugin's follower puts the log's lines: decoded
// with the events package, as the terminal formats decode them, and made
// timeline items.
type pageSink struct {
	ctx    context.Context
	tl     *timeline
	lines  chan item
	lineNo int
	sawEnd bool
}

func (p *pageSink) Line(b []byte) (bool, error) {
	p.lineNo++
	b = bytes.TrimRight(b, "\r\n")
	if len(bytes.TrimSpace(b)) == 0 {
		return false, nil
	}
	ev, err := events.Decode(b)
	if err != nil {
		return false, p.put(p.tl.note(fmt.Sprintf("line %d of the event log: %v", p.lineNo, err)))
	}
	if ev == nil {
		return false, nil // a type this build does not know (a newer runner's)
	}
	_, end := ev.(*events.End)
	p.sawEnd = p.sawEnd || end
	if it, ok := p.tl.item(ev); ok {
		if err := p.put(it); err != nil {
			return end, err
		}
	}
	return end, nil
}

func (p *pageSink) Note(msg string) { _ = p.put(p.tl.note(msg)) }

func (p *pageSink) put(it item) error {
	select {
	case p.lines <- it:
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// spendStream is the spend page's event stream: the namespace's spend
// view, again whenever a run or budget changes (at most every second).
func (s *Server) spendStream(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("ns")
	if ns == "" {
		ns = s.opts.Namespace
	}
	out, ok := newStream(w)
	if !ok {
		return
	}
	sub, cancel := s.runs.subscribe()
	defer cancel()
	bsub, bcancel := s.budgets.subscribe()
	defer bcancel()
	send := func() error {
		all := s.runs.list()
		runs := make([]*runInfo, 0, len(all))
		nss := map[string]bool{}
		for _, k := range all {
			runs = append(runs, k.obj)
			nss[k.Namespace] = true
		}
		var budgets []*v1alpha1.AgentBudget
		for _, b := range s.budgets.list() {
			budgets = append(budgets, b.obj)
			nss[b.Namespace] = true
		}
		if s.opts.Namespace != "" {
			nss[s.opts.Namespace] = true
		}
		names := sortedKeys(nss)
		which := ns
		if which == "" && len(names) > 0 {
			which = names[0]
		}
		v := spendPage(which, names, runs, budgets, s.opts.Now(), s.opts.Location)
		v.Problem = strings.TrimSpace(s.runs.problem() + " " + s.budgets.problem())
		return out.send("spend", v)
	}
	if send() != nil {
		return
	}
	ctx := r.Context()
	ping := time.NewTicker(20 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if out.ping() != nil {
				return
			}
		case <-sub.ready:
		case <-bsub.ready:
		}
		if !sleepCtx(ctx, time.Second) {
			return
		}
		sub.take()
		bsub.take()
		if send() != nil {
			return
		}
	}
}

// stop stops a run: the page's button.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := runKey(w, r)
	if !ok {
		return
	}
	var req struct {
		UID string `json:"uid"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.UID == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the request names no run uid"})
		return
	}
	err := stopRun(r.Context(), s.opts.Client, ns, name, types.UID(req.UID))
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]string{"message": "Stop requested: the run ends as interrupted."})
	case apierrors.IsForbidden(err):
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "Your credentials may not patch this AgentRun: " + inert(err.Error())})
	case apierrors.IsNotFound(err):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "The AgentRun is gone."})
	default:
		var status apierrors.APIStatus
		code := http.StatusBadGateway
		if errors.As(err, &status) && status.Status().Code >= 400 {
			code = int(status.Status().Code)
		}
		writeJSON(w, code, map[string]string{"error": inert(err.Error())})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// stream writes server-sent events.
type stream struct {
	w http.ResponseWriter
	f http.Flusher
}

func newStream(w http.ResponseWriter) (*stream, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return nil, false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &stream{w: w, f: f}, true
}

// send writes one event of JSON data: one line, since JSON strings
// escape their newlines.
func (s *stream) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *stream) ping() error {
	if _, err := s.w.Write([]byte(": ping\n\n")); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
