package v1alpha1

// AgentRun condition types. Every condition is present once the controller
// has written status, and each carries observedGeneration. The set serves
// three kinds of readers: people and `kubectl wait` (Succeeded, Ended,
// Running); tools that read a Ready condition, such as Flux's health checks
// and Argo CD's custom health scripts (Ready); and kstatus (Flux `wait`
// and `dependsOn`, kpt, cli-utils), which for a custom resource reads only
// observedGeneration and the abnormal-true Reconciling and Stalled
// conditions. docs/api.md tabulates these types and the reasons below
// from this file.
const (
	// ConditionSucceeded is the terminal condition, positive polarity:
	// Unknown until the run ends (reason Pending, Queued or Running), then
	// True when end.status is finished (reason Finished) and False
	// otherwise, with the reason of the end. `kubectl wait
	// --for=condition=Succeeded` waits for success only.
	ConditionSucceeded = "Succeeded"
	// ConditionEnded is True once the run has ended, whatever the outcome,
	// with the same reason and message as Succeeded; False (reason Pending,
	// Queued or Running) before. `kubectl wait --for=condition=Ended`
	// returns for a failed run as for a successful one.
	ConditionEnded = "Ended"
	// ConditionRunning is True while the agent container runs (reason
	// Running); False with reason Pending, Queued or Ended otherwise.
	ConditionRunning = "Running"
	// ConditionReady is True only once the run has succeeded (positive
	// polarity; reason Finished), False otherwise (reason Pending, Queued
	// or Running while in progress, the Succeeded reason once it failed).
	// Flux's and Argo CD's health checks read it; kstatus does not.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the run is in progress
	// (abnormal-true, the kstatus convention; reason Pending, Queued,
	// Running, or JobRefused while the API server refuses the run's Job, or
	// PodRejected while the Job cannot create its Pod), False
	// (reason Ended) once it has ended. kstatus reads a True Reconciling as
	// InProgress, so Flux `wait` and `dependsOn` wait for the run.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the run ended without succeeding
	// (abnormal-true, the kstatus convention), with the Succeeded reason
	// and message, while the API server refuses to create the run's Job
	// (reason JobRefused), and while the Job cannot create the run's Pod
	// (reason PodRejected); False otherwise (reason Pending, Queued, Running or
	// Finished). kstatus reads a True Stalled as Failed.
	ConditionStalled = "Stalled"
)

// Reasons of a run in progress: the phase's name, on Succeeded, Ended,
// Ready, Reconciling, Running and Stalled.
const (
	// ReasonPending: the Job is being created, or its Pod has not started
	// the agent yet.
	ReasonPending = string(PhasePending)
	// ReasonQueued: the Job is suspended until a queue (Kueue) admits it,
	// or no Job is made yet because a covering AgentBudget is spent (the
	// Queued Event then says BudgetExhausted and names the budget).
	ReasonQueued = string(PhaseQueued)
	// ReasonRunning: the agent container runs.
	ReasonRunning = string(PhaseRunning)
	// ReasonPodRejected: the Job cannot create the run's Pod (Pod Security
	// admission, a quota, an admission webhook); the message is the API
	// server's refusal. On Stalled and Reconciling while it lasts; once it
	// has lasted the start-up grace, the end reason of the run.
	ReasonPodRejected = "PodRejected"
	// ReasonJobRefused: the API server refuses to create the run's Job
	// for a reason that may pass (a ResourceQuota, an admission webhook or
	// policy that denies it or is down, the manager's own permissions, an
	// overloaded API server); the message is the server's answer. The
	// manager retries with a growing backoff (up to a minute); on Stalled
	// and Reconciling while it lasts, with a Warning Event per new message;
	// once it has lasted the start-up grace, the end reason of the run.
	ReasonJobRefused = "JobRefused"
	// ReasonBudgetExhausted: the run waits, Queued without a Job, while an
	// AgentBudget covering it is spent (the reason of its Queued Event; the
	// message names the budget).
	ReasonBudgetExhausted = "BudgetExhausted"
	// ReasonEnded is the reason of Running and Reconciling once the run
	// has ended.
	ReasonEnded = "Ended"
)

// Reasons of an end, on Succeeded, Ended, Ready and Stalled: the end
// status in CamelCase when the agent reported its end, or what the
// controller saw instead.
const (
	// ReasonFinished: end status finished; the run succeeded.
	ReasonFinished = "Finished"
	// ReasonFailed: end status failed, as the runner reported it.
	ReasonFailed = "Failed"
	// ReasonInterrupted: end status interrupted (the runner was stopped by
	// a signal nobody in the cluster asked for).
	ReasonInterrupted = "Interrupted"
	// ReasonTimeout: end status timeout, spec.timeout reached.
	ReasonTimeout = "Timeout"
	// ReasonLimit: end status limit, spec.limits reached.
	ReasonLimit = "Limit"
	// ReasonRejected: end status rejected, the runner refused its flags.
	ReasonRejected = "Rejected"
	// ReasonCancelled: the run was stopped by spec.stop (end status
	// interrupted; failed if the agent never reported its end), or ended
	// by it before its agent started.
	ReasonCancelled = "Cancelled"
	// ReasonBudgetExceeded: an AgentBudget covering the run was spent while
	// it ran, and the agent was stopped as for spec.stop (the message names
	// the budget).
	ReasonBudgetExceeded = "BudgetExceeded"
	// ReasonPreempted: a queue (Kueue) suspended or evicted the run's Job
	// after the agent had started, and the Job's Pod was deleted for it.
	ReasonPreempted = "Preempted"
	// ReasonDeadlineExceeded: the Job's activeDeadlineSeconds, the backstop
	// beyond spec.timeout, stopped a runner that did not stop itself.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonOOMKilled: the agent container exceeded its memory limit.
	ReasonOOMKilled = "OOMKilled"
	// ReasonImagePullFailed: the runner image could not be pulled.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerConfigError: a container could not be created (a
	// missing Secret or ConfigMap).
	ReasonContainerConfigError = "ContainerConfigError"
	// ReasonUnschedulable: the scheduler found no node for the Pod.
	ReasonUnschedulable = "Unschedulable"
	// ReasonEvicted: the kubelet evicted the Pod before the agent ended.
	ReasonEvicted = "Evicted"
	// ReasonSandboxUnavailable: the node could not run the bubblewrap
	// sandbox (its seccomp or AppArmor profile missing or too strict, user
	// namespaces disabled); the agent never ran unsandboxed.
	ReasonSandboxUnavailable = "SandboxUnavailable"
	// ReasonNoSummary: the agent container exited without an end summary.
	ReasonNoSummary = "NoSummary"
	// ReasonPodVanished: the Pod was gone before its result was read.
	ReasonPodVanished = "PodVanished"
	// ReasonPodDeleted: the Pod was deleted (kubectl delete, a drain, an
	// API eviction) before its agent ended.
	ReasonPodDeleted = "PodDeleted"
	// ReasonJobDeleted: the Job was deleted before the run ended.
	ReasonJobDeleted = "JobDeleted"
	// ReasonJobFailed: the Job or its Pod failed before the agent ended.
	ReasonJobFailed = "JobFailed"
	// ReasonJobRejected: the API server refused the run's Job for good,
	// so retrying cannot help: the spec cannot make a valid Job (422
	// Invalid, 400 BadRequest, 413 too large) or its namespace is being
	// deleted. The detail is the server's answer.
	ReasonJobRejected = "JobRejected"
)

// AgentBudget condition types.
const (
	// ConditionExhausted is True while the budget is spent (reason
	// TokensSpent or CostSpent, or InvalidWindow or InvalidSelector),
	// False (reason
	// WithinBudget) otherwise. While it is True, new runs the budget
	// covers stay Queued and the running ones are stopped.
	ConditionExhausted = "Exhausted"
)

// AgentBudget condition reasons.
const (
	// ReasonWithinBudget: the window's spend is below every cap.
	ReasonWithinBudget = "WithinBudget"
	// ReasonTokensSpent: the window's tokens reached spec.maxTokens.
	ReasonTokensSpent = "TokensSpent"
	// ReasonCostSpent: the window's cost reached spec.maxCostUSD.
	ReasonCostSpent = "CostSpent"
	// ReasonInvalidWindow: the window cannot be computed (a time zone the
	// manager does not know): the budget counts as spent until it is
	// fixed.
	ReasonInvalidWindow = "InvalidWindow"
	// ReasonInvalidSelector: spec.selector does not parse (a budget stored
	// before the CRD checked selectors): the budget covers every run of
	// its namespace and counts as spent until it is fixed, rather than
	// covering nothing.
	ReasonInvalidSelector = "InvalidSelector"
)
