package ui

import (
	"encoding/json"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// runInfo is a run as the pages read it: the typed AgentRun, and the
// status fields that newer AgentRun APIs add and this build's types may
// not have yet (status.git of git workspaces, status.traceID of
// telemetry). Reading those from the object itself lets the pages show
// them whenever the cluster's runs have them, and nothing otherwise.
type runInfo struct {
	Run     v1alpha1.AgentRun
	Git     *gitStatus
	TraceID string
	// PromptCut is how many bytes of spec.prompt.text the store dropped.
	PromptCut int
}

// gitStatus is what the pages show of status.git: the run's branch and
// the size of its change.
type gitStatus struct {
	Repository   string `json:"repository,omitempty"`
	Branch       string `json:"branch,omitempty"`
	Pushed       bool   `json:"pushed,omitempty"`
	BaseCommit   string `json:"baseCommit,omitempty"`
	HeadCommit   string `json:"headCommit,omitempty"`
	Commits      *int64 `json:"commits,omitempty"`
	FilesChanged *int64 `json:"filesChanged,omitempty"`
	Insertions   *int64 `json:"insertions,omitempty"`
	Deletions    *int64 `json:"deletions,omitempty"`
}

// promptKept is how much of an inline prompt the store keeps: the run
// page shows the start of it, and 1,000 runs of a 128 KiB prompt would
// otherwise be 128 MB.
const promptKept = 4 << 10

// convertRun makes the runInfo of an AgentRun object.
func convertRun(u *unstructured.Unstructured) (*runInfo, error) {
	u = u.DeepCopy()
	u.SetManagedFields(nil)
	info := &runInfo{}
	if p, ok, _ := unstructured.NestedString(u.Object, "spec", "prompt", "text"); ok && len(p) > promptKept {
		cut := promptKept
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		info.PromptCut = len(p) - cut
		_ = unstructured.SetNestedField(u.Object, p[:cut], "spec", "prompt", "text")
	}
	run, err := convertTyped[v1alpha1.AgentRun](u)
	if err != nil {
		return nil, err
	}
	info.Run = *run
	if g, ok, _ := unstructured.NestedMap(u.Object, "status", "git"); ok {
		if b, err := json.Marshal(g); err == nil {
			var gs gitStatus
			if json.Unmarshal(b, &gs) == nil {
				info.Git = &gs
			}
		}
	}
	if id, ok, _ := unstructured.NestedString(u.Object, "status", "traceID"); ok {
		info.TraceID = id
	}
	return info, nil
}
