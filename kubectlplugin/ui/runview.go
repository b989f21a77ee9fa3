package ui

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/kubectlplugin/usagesum"
)

// runView is the run page: the row, and everything the status says in
// words.
type runView struct {
	Row row `json:"row"`
	// Summary is one sentence on where the run is.
	Summary    string      `json:"summary"`
	Conditions []condition `json:"conditions"`
	// Facts are label and value pairs: limits, isolation, counters.
	Facts []fact      `json:"facts"`
	Usage []usageLine `json:"usage"`
	// UsageNotes say what the usage table counts.
	UsageNotes []string     `json:"usageNotes"`
	Budgets    []budgetLine `json:"budgets"`
	Result     string       `json:"result"`
	// ResultNote says the result is cut, or where it is.
	ResultNote string    `json:"resultNote"`
	Detail     string    `json:"detail"`
	Prompt     string    `json:"prompt"`
	PromptNote string    `json:"promptNote"`
	Commands   []command `json:"commands"`
	TraceID    string    `json:"traceID"`
	TraceURL   string    `json:"traceURL"`
	// CanStop is whether the stop button works; StopNote says why not,
	// or what it does.
	CanStop  bool   `json:"canStop"`
	StopNote string `json:"stopNote"`
	Git      []fact `json:"git"`
}

// condition is one status condition in words.
type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Since   string `json:"since"`
	// Words is the condition as a sentence ("Ended: yes, Cancelled").
	Words string `json:"words"`
}

type fact struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// usageLine is one model's usage (or the total).
type usageLine struct {
	Model      string `json:"model"`
	Input      string `json:"input"`
	Output     string `json:"output"`
	CacheRead  string `json:"cacheRead"`
	CacheWrite string `json:"cacheWrite"`
	Total      string `json:"total"`
	Cost       string `json:"cost"`
}

// command is a kubectl command line about the run.
type command struct {
	What string `json:"what"`
	Line string `json:"line"`
}

// runPage makes the run page's view of a run at now. budgets are the
// AgentBudgets of the run's namespace; canPatch is whether the user may
// patch AgentRuns there (nil: not known yet); traceURL is --trace-url.
func runPage(info *runInfo, budgets []*v1alpha1.AgentBudget, runs []*runInfo, canPatch *bool, traceURL string, now time.Time) runView {
	run := &info.Run
	st := run.Status
	v := runView{Row: newRow(info), Summary: summary(run, now)}
	for _, c := range st.Conditions {
		v.Conditions = append(v.Conditions, condition{Type: c.Type, Status: string(c.Status), Reason: inert(c.Reason),
			Message: inert(c.Message), Since: ago(c.LastTransitionTime.Time, now), Words: conditionWords(c.Type, string(c.Status), c.Reason)})
	}
	v.Facts = facts(run)
	v.Usage, v.UsageNotes = usageLines(run)
	for _, b := range budgets {
		if b.Covers(run) {
			v.Budgets = append(v.Budgets, newBudgetLine(b, runs, now))
		}
	}
	if st.Result != nil {
		v.Result = inert(*st.Result)
		if st.ResultTruncated {
			v.ResultNote = "The status keeps the first 32 KiB of the result; the event log's end event below has all of it while the Pod is kept."
		}
	} else if ended(run) {
		v.ResultNote = "The run ended without a result."
	} else {
		v.ResultNote = "The result comes with the run's end."
	}
	v.Detail = inert(st.Detail)
	switch p := run.Spec.Prompt; {
	case p.Text != nil:
		v.Prompt = inert(*p.Text)
		if info.PromptCut > 0 {
			v.PromptNote = fmt.Sprintf("The first %d bytes; %d more: kubectl -n %s get agentrun %s -o jsonpath='{.spec.prompt.text}'",
				len(*p.Text), info.PromptCut, shellWord(run.Namespace), shellWord(run.Name))
		}
	case p.ConfigMapKeyRef != nil:
		v.PromptNote = inert(fmt.Sprintf("From the ConfigMap %s, key %s.", p.ConfigMapKeyRef.Name, p.ConfigMapKeyRef.Key))
	case p.SecretKeyRef != nil:
		v.PromptNote = inert(fmt.Sprintf("From the Secret %s, key %s (not shown).", p.SecretKeyRef.Name, p.SecretKeyRef.Key))
	}
	v.Commands = commands(run)
	if id := info.TraceID; traceIDPattern.MatchString(id) {
		v.TraceID = id
		v.TraceURL = traceLink(traceURL, id)
	}
	v.CanStop, v.StopNote = canStop(run, canPatch)
	if g := info.Git; g != nil {
		v.Git = gitFacts(g)
	}
	return v
}

// summary is one sentence on where the run is.
func summary(run *v1alpha1.AgentRun, now time.Time) string {
	st := run.Status
	switch {
	case st.Phase == "":
		return "Not seen by the controller yet: is the agentrun operator installed in this cluster?"
	case ended(run):
		s := "Ended " + orDefault(st.EndStatus, "without an end status")
		if st.EndStatus == "finished" {
			s = "Finished"
		}
		if r := reasonWord(run); r != "" {
			s += " (" + inert(r) + ")"
		}
		if st.CompletionTime != nil {
			s += ", " + ago(st.CompletionTime.Time, now) + " ago"
		}
		return s + "."
	case st.Phase == v1alpha1.PhaseQueued:
		if c := meta.FindStatusCondition(run.Status.Conditions, v1alpha1.ConditionRunning); c != nil && c.Message != "" {
			return "Queued: " + inert(c.Message)
		}
		return "Queued: its Job waits to be admitted."
	case st.Phase == v1alpha1.PhasePending:
		return "Pending: its Job is made or its Pod is not running yet."
	}
	s := "Running"
	if st.StartTime != nil {
		s += " for " + ago(st.StartTime.Time, now)
	}
	if p := st.Progress; p != nil {
		s += fmt.Sprintf(", %s, %s", plural(p.ModelCalls, "model call", "model calls"), plural(p.ToolCalls, "tool call", "tool calls"))
		if p.Activity != "" {
			s += "; now " + oneLine(p.Activity, 200)
		}
	}
	if stopRequested(run) {
		s += ". A stop was requested."
	}
	return s + "."
}

// conditionWords says what a condition means for a person.
func conditionWords(typ, status, reason string) string {
	yes := map[string]string{"True": "yes", "False": "no", "Unknown": "not yet known"}[status]
	if yes == "" {
		yes = status
	}
	meaning := map[string]string{
		v1alpha1.ConditionSucceeded:   "Did the run finish?",
		v1alpha1.ConditionEnded:       "Has the run ended?",
		v1alpha1.ConditionRunning:     "Is the agent running?",
		v1alpha1.ConditionReady:       "Ready (kstatus): succeeded?",
		v1alpha1.ConditionReconciling: "Reconciling (kstatus): in progress?",
		v1alpha1.ConditionStalled:     "Stalled (kstatus): ended without success?",
	}[typ]
	if meaning == "" {
		meaning = typ + "?"
	}
	return inert(meaning + " " + yes + ", " + reason)
}

// facts are the run's limits, isolation and tallies.
func facts(run *v1alpha1.AgentRun) []fact {
	spec, st := run.Spec, run.Status
	var out []fact
	add := func(label, value string) { out = append(out, fact{label, inert(value)}) }
	add("Runtime", string(spec.Runtime))
	add("Model", modelOf(run))
	add("Timeout", orDefault(spec.Timeout, "1h"))
	if l := spec.Limits; l != nil {
		if l.MaxTurns != nil {
			add("Max turns", strconv.Itoa(int(*l.MaxTurns)))
		}
		if l.MaxTokens != nil {
			add("Max tokens", text.FormatTokens(*l.MaxTokens))
		}
	}
	if iso := st.Isolation; iso != nil {
		enforced := "enforced"
		if !iso.NetworkEnforced {
			enforced = "not enforced"
		}
		add("Isolation", fmt.Sprintf("sandbox %s, network %s (%s), as the runner reported", iso.Sandbox, iso.NetworkMode, enforced))
	} else {
		add("Isolation", fmt.Sprintf("sandbox %s, network %s (requested; the runner reports at the end)",
			spec.SandboxOrDefault(), spec.NetworkOrDefault().Mode))
	}
	if hosts := spec.NetworkOrDefault().AllowHosts; len(hosts) > 0 {
		add("Allowed hosts", strings.Join(hosts, ", "))
	}
	if c := st.Counters; c != nil {
		add("Tool calls", fmt.Sprintf("%d (%d failed, %d denied)", c.Tools, c.ToolErrors, c.Denials))
		add("Subagents", strconv.Itoa(int(c.Subagents)))
		add("Denied connections", strconv.Itoa(int(c.DeniedConnections)))
	} else if p := st.Progress; p != nil {
		add("Calls so far", fmt.Sprintf("%d model, %d tool", p.ModelCalls, p.ToolCalls))
	}
	if p := st.Progress; p != nil && p.MeteredTokens != nil {
		v := text.FormatTokens(*p.MeteredTokens) + " counted by the filter proxy"
		if p.UnmeteredCalls != nil {
			v += fmt.Sprintf(" (%d calls it could not count)", *p.UnmeteredCalls)
		}
		add("Metered", v)
	}
	if st.ExitCode != nil {
		add("Exit code", strconv.Itoa(int(*st.ExitCode)))
	}
	if st.SessionID != "" {
		add("Session", st.SessionID)
	}
	if len(run.Labels) > 0 {
		var ls []string
		for k, v := range run.Labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		add("Labels", strings.Join(ls, ", "))
	}
	return out
}

// usageLines is the run's usage by model, with the total last.
func usageLines(run *v1alpha1.AgentRun) ([]usageLine, []string) {
	u := run.Status.Usage
	if u == nil {
		return nil, nil
	}
	rep := usagesum.Sum([]v1alpha1.AgentRun{*run}, usagesum.ByModel)
	line := func(r usagesum.Row) usageLine {
		cost := "-"
		if r.Cost != nil {
			cost = formatCost(r.Cost)
		}
		return usageLine{Model: inert(r.Key), Input: fmtInt(r.Input), Output: fmtInt(r.Output), CacheRead: fmtInt(r.CacheRead),
			CacheWrite: fmtInt(r.CacheWrite), Total: fmtInt(r.Total()), Cost: cost}
	}
	var out []usageLine
	for _, r := range rep.Rows {
		out = append(out, line(r))
	}
	total := rep.Total
	total.Key = "Total"
	out = append(out, line(total))
	var notes []string
	if !ended(run) {
		notes = append(notes, "The usage so far: the end's figures replace it when the run ends.")
	}
	if u.CostEstimated {
		notes = append(notes, "The cost is, in whole or in part, the manager's estimate from its price table.")
	}
	if u.ByModelTruncated {
		notes = append(notes, usagesum.OtherModels+": the status keeps only the largest models.")
	}
	return out, notes
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

// commands are the kubectl command lines for the run, its Job and Pod.
func commands(run *v1alpha1.AgentRun) []command {
	ns, name := shellWord(run.Namespace), shellWord(run.Name)
	out := []command{
		{"The run", "kubectl -n " + ns + " get agentrun " + name + " -o yaml"},
		{"Its event log, followed", "kubectl agentrun -n " + ns + " logs -f " + name},
	}
	if j := run.Status.JobName; j != "" {
		out = append(out, command{"Its Job", "kubectl -n " + ns + " describe job " + shellWord(j)})
	}
	if p := run.Status.PodName; p != "" {
		out = append(out,
			command{"Its Pod", "kubectl -n " + ns + " describe pod " + shellWord(p)},
			command{"The raw event stream", "kubectl -n " + ns + " logs " + shellWord(p) + " -c events"},
			command{"The agent's container", "kubectl -n " + ns + " logs " + shellWord(p) + " -c agent"})
	}
	if !ended(run) && !stopRequested(run) {
		out = append(out, command{"Stop it", stopCommand(run.Namespace, run.Name)})
	}
	return out
}

// safeWord is what a shell takes as one word unquoted; Kubernetes names
// always are.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9._/:=@%+-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if safeWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(inert(s), "'", `'\''`) + "'"
}

// traceIDPattern is a W3C trace id: 32 lower-case hex digits, not all 0.
var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// traceLink fills the --trace-url template: {traceID} is replaced by the
// id (hex digits only, so nothing else can reach the URL). A template
// that does not make an http(s) URL gives no link.
func traceLink(template, id string) string {
	if template == "" || id == strings.Repeat("0", 32) {
		return ""
	}
	s := strings.ReplaceAll(template, "{traceID}", url.PathEscape(id))
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// canStop says whether the stop button works, and why not.
func canStop(run *v1alpha1.AgentRun, canPatch *bool) (bool, string) {
	switch {
	case ended(run):
		return false, "The run has ended."
	case stopRequested(run):
		return false, "A stop was requested; the run ends as interrupted, with its usage and result so far."
	case canPatch != nil && !*canPatch:
		return false, "Your credentials may not patch AgentRuns in namespace " + run.Namespace + "."
	}
	return true, "Stopping sends the agent SIGINT: it ends as interrupted, and its usage and result so far are kept. It cannot be undone."
}

func gitFacts(g *gitStatus) []fact {
	var out []fact
	add := func(label, value string) {
		if value != "" {
			out = append(out, fact{label, inert(value)})
		}
	}
	add("Repository", g.Repository)
	branch := g.Branch
	if branch != "" && g.Pushed {
		branch += " (pushed)"
	}
	add("Branch", branch)
	add("Base commit", g.BaseCommit)
	add("Head commit", g.HeadCommit)
	if g.Commits != nil {
		add("Commits", strconv.FormatInt(*g.Commits, 10))
	}
	d, _ := diffStat(g)
	add("Change", d)
	return out
}

// ago is how long ago t was, as kubectl's AGE says it.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration.HumanDuration(now.Sub(t))
}
