package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AgentBudgetSpec caps what the AgentRuns of a namespace (or those of them
// a selector picks) may spend in a window of time. The manager enforces it
// outside the agents: while the budget is spent, new runs it covers stay
// Queued (reason BudgetExhausted) without a Job, and when their usage,
// live while they run, pushes it past a cap, the running runs it covers
// are stopped as by spec.stop (their usage and result so far are kept)
// and end with reason BudgetExceeded. docs/kubernetes/budgets.md says what
// counts and when.
//
// +kubebuilder:validation:XValidation:rule="has(self.maxTokens) || has(self.maxCostUSD)",message="set maxTokens, maxCostUSD or both: a budget without a cap bounds nothing"
type AgentBudgetSpec struct {
	// Window is the time whose spend the caps bound.
	// +required
	Window BudgetWindow `json:"window"`
	// MaxTokens caps every token (input, output, cache read and cache
	// write) of the runs in the window. A run counts with the larger of
	// its reported total and the filter proxy's meter
	// (status.progress.meteredTokens).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTokens *int64 `json:"maxTokens,omitempty"`
	// MaxCostUSD caps their cost in US dollars, a decimal such as "25" or
	// "7.50": the runtimes' own cost, and for models whose runtime reports
	// none (codex, dsh) the manager's estimate from the admin's price
	// table. Tokens of a model without either are not in the cost: the
	// status says so (spent.unpricedTokens), and only maxTokens bounds
	// them.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]{1,12}(\.[0-9]{1,9})?$`
	MaxCostUSD string `json:"maxCostUSD,omitempty"`
	// Selector picks the AgentRuns the budget covers by their labels (a
	// label selector, as a Deployment's); left out, it covers every
	// AgentRun of the namespace. A run that has ended is picked by the
	// labels it had at its end (status.labelsAtEnd). A selector the
	// manager cannot read (stored before these rules) covers every run of
	// the namespace and holds them (condition Exhausted, reason
	// InvalidSelector) until it is fixed.
	// +optional
	Selector *BudgetSelector `json:"selector,omitempty"`
}

// BudgetSelector is a label selector (metav1.LabelSelector's fields and
// meaning) whose rules the API server checks, so that a typo cannot make a
// budget cover nothing: the operators, the values each operator needs, the
// keys and values a label can have.
type BudgetSelector struct {
	// MatchLabels: a run has each of these labels with this value.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="selector.matchLabels: a key is a label key (an optional DNS prefix and /, then at most 63 of A-Z a-z 0-9 - _ . beginning and ending with a letter or digit)"
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions: a run meets each of these requirements.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MatchExpressions []BudgetSelectorRequirement `json:"matchExpressions,omitempty"`
}

// BudgetSelectorRequirement is one requirement on a label: In and NotIn
// need values, Exists and DoesNotExist take none.
//
// +kubebuilder:validation:XValidation:rule="(self.operator == 'In' || self.operator == 'NotIn') == (has(self.values) && size(self.values) > 0)",message="selector.matchExpressions: In and NotIn need values, Exists and DoesNotExist take none"
type BudgetSelectorRequirement struct {
	// Key is the label's key.
	// +required
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values of In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Values []LabelValue `json:"values,omitempty"`
}

// LabelValue is a label's value: at most 63 of A-Z a-z 0-9 - _ .,
// beginning and ending with a letter or digit, or empty.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelSelector is the selector in metav1's form; nil for nil.
func (s *BudgetSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	for k, v := range s.MatchLabels {
		if out.MatchLabels == nil {
			out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		}
		out.MatchLabels[k] = string(v)
	}
	for _, e := range s.MatchExpressions {
		r := metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator}
		for _, v := range e.Values {
			r.Values = append(r.Values, string(v))
		}
		out.MatchExpressions = append(out.MatchExpressions, r)
	}
	return out
}

// BudgetWindow is a rolling window (the last 24h, say) or a calendar one
// (the current day, week or month in a time zone): exactly one of rolling
// and calendar.
//
// +kubebuilder:validation:XValidation:rule="has(self.rolling) != has(self.calendar)",message="window: set exactly one of rolling (a duration such as 24h) and calendar (Day, Week or Month)"
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || has(self.calendar)",message="window.timeZone belongs to a calendar window"
type BudgetWindow struct {
	// Rolling is the window's length, ending now: a duration such as 24h
	// or 30m, from 1m to 744h (31 days).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('744h')",message="window.rolling must be a duration from 1m to 744h, such as 24h"
	Rolling string `json:"rolling,omitempty"`
	// Calendar is the current Day, Week (from Monday 00:00) or Month in
	// timeZone; the spend starts again from nothing at its end.
	// +optional
	// +kubebuilder:validation:Enum=Day;Week;Month
	Calendar CalendarPeriod `json:"calendar,omitempty"`
	// TimeZone of a calendar window: an IANA name such as Europe/Berlin
	// (default UTC). A name the manager does not know keeps the budget
	// spent (condition Exhausted, reason InvalidWindow) until it is fixed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// CalendarPeriod is the length of a calendar window.
type CalendarPeriod string

// Calendar periods.
const (
	CalendarDay   CalendarPeriod = "Day"
	CalendarWeek  CalendarPeriod = "Week"
	CalendarMonth CalendarPeriod = "Month"
)

// AgentBudgetStatus is what the budget's window has spent, and by which
// runs.
type AgentBudgetStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// WindowStart is where the current calendar window begins (a rolling
	// window's start moves on with the clock: it is always the window's
	// length ago).
	// +optional
	WindowStart *metav1.Time `json:"windowStart,omitempty"`
	// WindowEnd is where the current calendar window ends.
	// +optional
	WindowEnd *metav1.Time `json:"windowEnd,omitempty"`
	// Spent is the total of every run counted in the window.
	// +optional
	Spent BudgetSpend `json:"spent,omitempty"`
	// RunCount is the number of runs counted in the window, deleted ones
	// included.
	// +optional
	RunCount int32 `json:"runCount,omitempty"`
	// Runs are the runs counted in the window that still exist, largest
	// spenders first, at most 100 (RunCount counts them all).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Runs []BudgetRun `json:"runs,omitempty"`
	// Deleted keeps the totals of deleted runs, grouped by the hour (for
	// a shorter rolling window, by 1/24 of it) of their end or deletion,
	// so that deleting an AgentRun does not give its spend back while its
	// window lasts. At most 50 groups: beyond, the two oldest are merged
	// (they then count until the later of their ends leaves the window).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Deleted []DeletedSpend `json:"deleted,omitempty"`
}

// BudgetSpend is an amount spent.
type BudgetSpend struct {
	// Tokens are every token, with the meter where it counted more.
	Tokens int64 `json:"tokens"`
	// CostUSD is the cost in US dollars, a decimal string.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
	// CostEstimated is true when part of costUSD is the manager's
	// estimate from the price table (runtimes that report no cost).
	// +optional
	CostEstimated bool `json:"costEstimated,omitempty"`
	// UnpricedTokens are tokens of models with neither a runtime cost nor
	// a price in the table: costUSD leaves them out, so for them the
	// budget is a token cap only.
	// +optional
	UnpricedTokens int64 `json:"unpricedTokens,omitempty"`
	// UnpricedModels name those models (at most 10).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=256
	UnpricedModels []string `json:"unpricedModels,omitempty"`
}

// BudgetRun is one run's total as the budget counts it.
type BudgetRun struct {
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +required
	UID types.UID `json:"uid"`
	// Tokens are the run's tokens: the larger of its usage.totalTokens and
	// its progress.meteredTokens.
	Tokens int64 `json:"tokens"`
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
	// +optional
	CostEstimated bool `json:"costEstimated,omitempty"`
	// Phase is the run's phase when it was counted.
	// +optional
	Phase Phase `json:"phase,omitempty"`
}

// DeletedSpend is the total of deleted runs that ended, or were deleted,
// in one stretch of time.
type DeletedSpend struct {
	// Until is the latest end or deletion among them: they count while it
	// is in the window.
	// +required
	Until metav1.Time `json:"until"`
	// Runs is how many runs.
	Runs int32 `json:"runs"`
	// Spent is their total.
	Spent BudgetSpend `json:"spent"`
}

// AgentBudget caps the spend of a namespace's AgentRuns per window.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ab
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.spent.tokens`
// +kubebuilder:printcolumn:name="Max Tokens",type=integer,JSONPath=`.spec.maxTokens`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.spent.costUSD`
// +kubebuilder:printcolumn:name="Max Cost",type=string,JSONPath=`.spec.maxCostUSD`
// +kubebuilder:printcolumn:name="Exhausted",type=string,JSONPath=`.status.conditions[?(@.type=="Exhausted")].status`
// +kubebuilder:printcolumn:name="Runs",type=integer,JSONPath=`.status.runCount`
// +kubebuilder:printcolumn:name="Window Start",type=date,JSONPath=`.status.windowStart`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentBudgetSpec `json:"spec"`
	// +optional
	Status AgentBudgetStatus `json:"status,omitempty"`
}

// AgentBudgetList is a list of AgentBudgets.
//
// +kubebuilder:object:root=true
type AgentBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentBudget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentBudget{}, &AgentBudgetList{})
}
