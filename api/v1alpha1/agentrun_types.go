package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Runtime is the agent CLI a run starts. The enum is the registered
// adapters (adapters/all), every one of which the runner image carries
// (adapters/clis.txt); a test holds the three in agreement. A runtime the
// image did not carry would be refused here by a CEL rule (self != 'NAME'),
// so that its run fails at admission rather than after its Pod pulled
// the image.
// +kubebuilder:validation:Enum=claude-code;codex;pi;dsh
type Runtime string

// The runtimes agentrun knows.
const (
	RuntimeClaudeCode Runtime = "claude-code"
	RuntimeCodex      Runtime = "codex"
	RuntimePi         Runtime = "pi"
	RuntimeDsh        Runtime = "dsh"
)

// SandboxMode is how the agent is isolated inside its container.
// +kubebuilder:validation:Enum=Bubblewrap;None
type SandboxMode string

// Sandbox modes.
const (
	// SandboxBubblewrap: the agent runs in new user, network, PID, IPC,
	// UTS and mount namespaces, with the filter proxy its only way out.
	SandboxBubblewrap SandboxMode = "Bubblewrap"
	// SandboxNone: the agent runs in the container as the runner does.
	SandboxNone SandboxMode = "None"
)

// NetworkMode is what the agent may reach through the runner's filter proxy.
// +kubebuilder:validation:Enum=None;Full;Custom
type NetworkMode string

// Network modes.
const (
	// NetworkNone: no connection leaves the sandbox.
	NetworkNone NetworkMode = "None"
	// NetworkFull: any public address; private, loopback and metadata
	// addresses stay refused.
	NetworkFull NetworkMode = "Full"
	// NetworkCustom: only the hosts in allowHosts.
	NetworkCustom NetworkMode = "Custom"
)

// StopMode is how spec.stop ends a run.
// +kubebuilder:validation:Enum=Graceful
type StopMode string

// Stop modes.
const (
	// StopGraceful interrupts a running agent as SIGINT does on a terminal:
	// its Pod is deleted, the runner passes SIGTERM on to the CLI as
	// SIGINT, waits its grace period, and writes the end summary, so the
	// partial usage and result are kept (end status interrupted, condition
	// reason Cancelled). A run that has not started ends without starting.
	StopGraceful StopMode = "Graceful"
)

// AgentRunSpec is one run: what `agentrun run` is asked to do, and how its
// Pod looks.
//
// The spec is immutable from creation: an AgentRun is one run, and a
// changed spec would be a different run that the recorded status does not
// describe. The one change accepted is setting stop. The rule compares
// every field but stop, and the presence of each optional one (adding or
// removing a field is a change too); TestImmutabilityRuleCoversEverySpecField
// keeps the list complete. Field by field rather than with optional
// selection (`self.?f == oldSelf.?f`): the API server's cost estimate of
// optional values is unbounded, so that form is refused.
//
// The rule runs on every update, the controller's status writes included,
// where the spec has not changed: `self == oldSelf` first answers those
// with one walk of the spec. The field-by-field check reads the spec once
// per field access, and the API server's CEL adapter copies the spec's
// whole property schema on each (model.Structural.Properties): it was a
// quarter of a status write's cost in kube-apiserver's profile
// (docs/benchmarks.md, hack/scale-bench.sh -apiserver-profile).
// +kubebuilder:validation:XValidation:rule="self == oldSelf || self.runtime == oldSelf.runtime && self.prompt == oldSelf.prompt && has(self.model) == has(oldSelf.model) && (!has(self.model) || self.model == oldSelf.model) && has(self.images) == has(oldSelf.images) && (!has(self.images) || self.images == oldSelf.images) && has(self.env) == has(oldSelf.env) && (!has(self.env) || self.env == oldSelf.env) && has(self.envFrom) == has(oldSelf.envFrom) && (!has(self.envFrom) || self.envFrom == oldSelf.envFrom) && has(self.timeout) == has(oldSelf.timeout) && (!has(self.timeout) || self.timeout == oldSelf.timeout) && has(self.limits) == has(oldSelf.limits) && (!has(self.limits) || self.limits == oldSelf.limits) && has(self.subagents) == has(oldSelf.subagents) && (!has(self.subagents) || self.subagents == oldSelf.subagents) && has(self.sandbox) == has(oldSelf.sandbox) && (!has(self.sandbox) || self.sandbox == oldSelf.sandbox) && has(self.network) == has(oldSelf.network) && (!has(self.network) || self.network == oldSelf.network) && has(self.denyRead) == has(oldSelf.denyRead) && (!has(self.denyRead) || self.denyRead == oldSelf.denyRead) && has(self.session) == has(oldSelf.session) && (!has(self.session) || self.session == oldSelf.session) && has(self.workspace) == has(oldSelf.workspace) && (!has(self.workspace) || self.workspace == oldSelf.workspace) && has(self.podOverrides) == has(oldSelf.podOverrides) && (!has(self.podOverrides) || self.podOverrides == oldSelf.podOverrides) && has(self.retention) == has(oldSelf.retention) && (!has(self.retention) || self.retention == oldSelf.retention) && has(self.credentials) == has(oldSelf.credentials) && (!has(self.credentials) || self.credentials == oldSelf.credentials) && has(self.upstreamCA) == has(oldSelf.upstreamCA) && (!has(self.upstreamCA) || self.upstreamCA == oldSelf.upstreamCA) && has(self.git) == has(oldSelf.git) && (!has(self.git) || self.git == oldSelf.git)",message="spec is immutable: only spec.stop may be set after creation; create a new AgentRun (metadata.generateName gives each a fresh name) to run again"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.stop) || (has(self.stop) && self.stop == oldSelf.stop)",message="spec.stop cannot be unset or changed: a stopped run stays stopped; create a new AgentRun to run again"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || size(self.credentials) == 0 || !has(self.sandbox) || self.sandbox != 'None'",message="spec.credentials needs the Bubblewrap sandbox: its filter proxy puts the real value in"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || size(self.credentials) == 0 || !has(self.network) || !has(self.network.mode) || self.network.mode != 'None'",message="spec.credentials needs network access to its hosts: network.mode None reaches none"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || !has(self.env) || self.credentials.all(c, !self.env.exists(e, e.name == c.name))",message="a credential's name is also in spec.env: the agent gets the credential's stand-in, so set the variable only once"
// +kubebuilder:validation:XValidation:rule="!has(self.upstreamCA) || (has(self.credentials) && size(self.credentials) > 0) || has(self.git)",message="spec.upstreamCA verifies the credentials' hosts and spec.git's: add one of them, or drop it"
// +kubebuilder:validation:XValidation:rule="!has(self.git) || !has(self.git.credential) || !has(self.sandbox) || self.sandbox != 'None'",message="spec.git.credential needs the Bubblewrap sandbox: without it the agent could read the runner's environment, the token included"
// +kubebuilder:validation:XValidation:rule="!has(self.git) || !has(self.workspace) || !has(self.workspace.claimName)",message="spec.git clones into an empty emptyDir: drop spec.workspace.claimName (reusing a volume that holds the repository is not supported yet)"
type AgentRunSpec struct {
	// Runtime is the agent CLI: claude-code, codex, pi or dsh.
	// +required
	Runtime Runtime `json:"runtime"`

	// Model is passed to the runtime (--model); empty means the runtime's
	// own default.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// Prompt is the task, inline or from a ConfigMap or Secret key.
	// +required
	Prompt PromptSource `json:"prompt"`

	// Images are attached to the prompt, in order (--image).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Images []ImageSource `json:"images,omitempty"`

	// Credentials are API keys the agent never holds: inside the sandbox
	// each variable is a stand-in, and the runner's filter proxy puts the
	// real value (from the Secret, which reaches the runner only) into the
	// requests to the credential's hosts, and meters those model calls.
	// Model API keys belong here.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	Credentials []Credential `json:"credentials,omitempty"`

	// UpstreamCA verifies the TLS certificates of the credentials' hosts
	// instead of the system's roots: the CA of an in-cluster model gateway.
	// +optional
	UpstreamCA *corev1.ConfigMapKeySelector `json:"upstreamCA,omitempty"`

	// Env is set in the agent's environment: it reaches the agent as
	// environment variables, never as command-line values, and only the
	// names of literal values appear in the event stream. A Secret here
	// is readable by the agent; put model API keys in credentials.
	// OTEL_*, TRACEPARENT and TRACESTATE are refused: they configure
	// agentrun's own telemetry (docs/telemetry.md), which the agent never
	// sees.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('OTEL_') && e.name != 'TRACEPARENT' && e.name != 'TRACESTATE')",message="spec.env cannot set OTEL_*, TRACEPARENT or TRACESTATE: they configure agentrun's own telemetry (the chart's telemetry.otlp values, the agentrun.dev/traceparent annotation), which the agent never sees"
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`

	// EnvFrom sets every key of a Secret or ConfigMap as a variable.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// Timeout ends the run with status timeout (--timeout), a duration
	// such as 30m or 2h (whole seconds are used). The Job's
	// activeDeadlineSeconds is set above it, as a backstop. A string, not
	// a metav1.Duration, so that it reads back exactly as written (the
	// immutability rule compares the spec as stored). Every length of time
	// in the spec is such a duration (retention's too), as Tekton's and
	// Argo Workflows' timeouts are: a run's budget is written 30m or 2h,
	// not 1800.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="timeout must be between 1s and 168h (a duration such as 30m or 2h)"
	Timeout string `json:"timeout,omitempty"`

	// Limits end the run with status limit.
	// +optional
	Limits *Limits `json:"limits,omitempty"`

	// Subagents lets the agent start subagents; false passes
	// --no-subagents.
	// +optional
	// +kubebuilder:default=true
	Subagents *bool `json:"subagents,omitempty"`

	// Sandbox is Bubblewrap (the default: the agent runs in a new user,
	// network, PID and mount namespace) or None.
	// +optional
	// +kubebuilder:default=Bubblewrap
	Sandbox SandboxMode `json:"sandbox,omitempty"`

	// Network is what the agent may reach. A pointer, so that a typed
	// client that leaves it out sends nothing and gets the CRD's default
	// (mode Full, or the one the chart's defaults.network sets); the
	// manager reads an absent one as mode Full.
	// +optional
	// +kubebuilder:default={mode: "Full"}
	Network *Network `json:"network,omitempty"`

	// DenyRead lists absolute paths the agent cannot read, after the
	// runner's defaults (--deny-read); none inside the workspace.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.all(p, p.startsWith('/'))",message="denyRead paths must be absolute"
	// +kubebuilder:validation:XValidation:rule="self.all(p, p != '/workspace' && !p.startsWith('/workspace/') && p != '/')",message="denyRead paths must be outside the workspace (/workspace), where the agent could move a protected file out of the next run's reach: keep secrets out of the workspace"
	// +listType=atomic
	DenyRead []string `json:"denyRead,omitempty"`

	// Session saves the runtime's session on a volume, to continue it in a
	// later AgentRun.
	// +optional
	Session *Session `json:"session,omitempty"`

	// Workspace is the agent's working directory: an emptyDir by default,
	// or the user's PersistentVolumeClaim.
	// +optional
	Workspace *Workspace `json:"workspace,omitempty"`

	// PodOverrides change the Job's Pod.
	// +optional
	PodOverrides *PodOverrides `json:"podOverrides,omitempty"`

	// Git clones a repository into the workspace before the agent starts
	// and publishes the agent's change after it (docs/git.md): to the run's
	// own branch, or as a patch in a ConfigMap the AgentRun owns. The token
	// reaches the runner only, never the agent.
	// +optional
	Git *GitWorkspace `json:"git,omitempty"`

	// Retention is how long what the run leaves in the cluster is kept
	// once its end is in status. The AgentRun itself stays, as the record
	// of the run (status, usage, cost, result): agentrun never deletes an
	// AgentRun, because GitOps tools (Argo CD with self-heal, Flux)
	// re-create a missing object, which would start the run, and pay for
	// it, again.
	// +optional
	Retention *Retention `json:"retention,omitempty"`

	// Stop stops the run: the one change the spec accepts after creation,
	// and it cannot be undone or changed. Graceful (the one mode today)
	// stops a running agent as an interrupted one, keeping its partial
	// usage and result; a run that has not started (no Job yet, a Job
	// queued by Kueue, a Pod whose agent has not started) ends without
	// starting. Either way the run ends with reason Cancelled (endStatus
	// interrupted, or failed if the agent never reported its end, say its
	// node was lost), and the AgentRun stays as its record. Setting it on
	// a run that has already ended changes nothing. For example: kubectl
	// patch agentrun NAME --type merge -p '{"spec":{"stop":"Graceful"}}'.
	// +optional
	Stop StopMode `json:"stop,omitempty"`
}

// Credential is one API key the agent never holds. (The same host across
// two credentials, once with http:// and once without, is refused by the
// runner: a rule over every pair of credentials would cost the API server
// more than its CEL budget allows.)
// +kubebuilder:validation:XValidation:rule="self.hosts.all(h, !h.startsWith('http://') || !self.hosts.exists(g, g == h.substring(7) || g == 'https://' + h.substring(7)))",message="a credential's host is listed both as http://HOST:PORT and without http://; a destination speaks plain HTTP or TLS, so write it one way"
type Credential struct {
	// Name is the variable the agent's CLI reads the key from, for
	// example ANTHROPIC_API_KEY or OPENAI_API_KEY.
	// +required
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// ValueFrom is the Secret key that holds the real value.
	// +required
	ValueFrom CredentialSource `json:"valueFrom"`
	// Hosts are the HOST:PORT destinations that receive the real value,
	// for example api.anthropic.com:443, over TLS only, their certificate
	// verified (against upstreamCA when set). Write http://HOST:PORT for
	// a destination that speaks only plain HTTP (an in-cluster mock or
	// gateway on a network you trust): only there does the value travel
	// unencrypted, and the agent's plain-HTTP requests to any other host
	// here are refused (loopback and private addresses are no exception).
	// https://HOST:PORT is the same as HOST:PORT. They are allowed
	// destinations (also with network.mode custom); a private address
	// still needs an allowHosts entry IP:PORT.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=268
	// +kubebuilder:validation:items:Pattern=`^(https?://)?([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$`
	// +listType=set
	Hosts []string `json:"hosts"`
}

// CredentialSource is where a credential's value comes from.
type CredentialSource struct {
	// +required
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef"`
}

// PromptSource is the prompt: exactly one of text, configMapKeyRef and
// secretKeyRef.
// +kubebuilder:validation:XValidation:rule="(has(self.text) ? 1 : 0) + (has(self.configMapKeyRef) ? 1 : 0) + (has(self.secretKeyRef) ? 1 : 0) == 1",message="prompt: set exactly one of text, configMapKeyRef and secretKeyRef"
type PromptSource struct {
	// Text is the prompt itself, at most 196608 bytes (192 KiB): it
	// reaches the runner as a file made from an annotation of the Pod, and
	// a Pod's annotations hold 256 KiB in all. A longer prompt goes in a
	// ConfigMap or Secret (up to their 1 MiB).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=196608
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 196608",message="prompt.text is longer than 196608 bytes (192 KiB, what a Pod annotation can carry): put a longer prompt in a ConfigMap and use prompt.configMapKeyRef"
	Text *string `json:"text,omitempty"`
	// ConfigMapKeyRef reads the prompt from a ConfigMap key (up to the
	// ConfigMap's 1 MiB), projected into the agent container as a file.
	// +optional
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// SecretKeyRef reads the prompt from a Secret key.
	// +optional
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// ImageSource is one image file: exactly one of configMapKeyRef (binaryData
// works), secretKeyRef and path (a file in the workspace).
// +kubebuilder:validation:XValidation:rule="(has(self.path) ? 1 : 0) + (has(self.configMapKeyRef) ? 1 : 0) + (has(self.secretKeyRef) ? 1 : 0) == 1",message="images: set exactly one of path, configMapKeyRef and secretKeyRef"
type ImageSource struct {
	// Path is relative to the workspace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="images[].path must be relative to the workspace, without .."
	Path *string `json:"path,omitempty"`
	// +optional
	ConfigMapKeyRef *KeyRef `json:"configMapKeyRef,omitempty"`
	// +optional
	SecretKeyRef *KeyRef `json:"secretKeyRef,omitempty"`
}

// KeyRef names one key of a ConfigMap or Secret in the AgentRun's
// namespace.
type KeyRef struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key is also the image's file name, so keep its extension (.png,
	// .jpg, .gif, .webp).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// Limits end the run with status limit.
type Limits struct {
	// MaxTurns bounds the main agent's model calls (--max-turns).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTurns *int32 `json:"maxTurns,omitempty"`
	// MaxTokens bounds every token of the run: input, output, cache read
	// and cache write (--max-tokens).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTokens *int64 `json:"maxTokens,omitempty"`
}

// Network is what the agent may reach through the runner's filter proxy.
// +kubebuilder:validation:XValidation:rule="!has(self.allowHosts) || size(self.allowHosts) == 0 || (has(self.mode) && self.mode == 'Custom')",message="network.allowHosts is only allowed with network.mode Custom"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Custom' || (has(self.allowHosts) && size(self.allowHosts) > 0)",message="network.mode Custom needs at least one network.allowHosts entry"
type Network struct {
	// Mode: None (no connection leaves the sandbox), Full (public
	// addresses), Custom (only allowHosts).
	// +optional
	// +kubebuilder:default=Full
	Mode NetworkMode `json:"mode,omitempty"`
	// AllowHosts are HOST or HOST:PORT (without a port: 80 and 443);
	// `*.example.com` matches subdomains. An IPv4 address needs its port
	// (10.0.0.5:8080): it lifts the private-address refusal for exactly
	// that address and port, an in-cluster model gateway. Only with mode
	// Custom.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=260
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`
	// +kubebuilder:validation:XValidation:rule="self.all(h, !h.matches('^[0-9.]+$'))",message="network.allowHosts: an IP address needs a port (10.0.0.5:8080), so that the private-address refusal is lifted for that one service only"
	// +listType=set
	AllowHosts []string `json:"allowHosts,omitempty"`
	// AddHosts map names to addresses for the proxy's resolver
	// (--add-host), for example an in-cluster model gateway.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=name
	AddHosts []HostAddress `json:"addHosts,omitempty"`
}

// HostAddress is one --add-host NAME=IP.
type HostAddress struct {
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`
	Name string `json:"name"`
	// +required
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="addHosts[].ip must be an IPv4 or IPv6 address"
	IP string `json:"ip"`
}

// GitWorkspace is spec.git: the repository of the run and what becomes of
// its change.
// +kubebuilder:validation:XValidation:rule="self.repository.startsWith('https://') || (self.repository.startsWith('http://') && has(self.plainHTTP) && self.plainHTTP)",message="spec.git.repository must be an https:// URL (http:// only with plainHTTP: true, the token then travels unencrypted)"
type GitWorkspace struct {
	// Repository is the URL to clone: https://, without a user or password
	// (the token is credential's). http:// only with plainHTTP.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+/?$`
	Repository string `json:"repository"`
	// Ref is a branch, a tag or a full commit id; empty is the remote's
	// default branch.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._+][A-Za-z0-9._/+-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('//') && !self.endsWith('/') && !self.endsWith('.lock')",message="spec.git.ref is not a git ref name: no '..', '//', trailing '/' or '.lock'"
	Ref string `json:"ref,omitempty"`
	// Depth is the number of commits of history fetched; 0 is the whole
	// history.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Depth *int32 `json:"depth,omitempty"`
	// Submodules also clones the submodules.
	// +optional
	Submodules bool `json:"submodules,omitempty"`
	// PlainHTTP allows an http:// repository.
	// +optional
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// Credential is the token, from a Secret key; none for a public
	// repository.
	// +optional
	Credential *GitCredential `json:"credential,omitempty"`
	// Push is what becomes of the change; a patch by default.
	// +optional
	Push *GitPush `json:"push,omitempty"`
}

// GitAuth is how a git token is presented to the forge.
// +kubebuilder:validation:Enum=Basic;Bearer
type GitAuth string

// Git token presentations.
const (
	// GitAuthBasic is HTTP Basic with the credential's username.
	GitAuthBasic GitAuth = "Basic"
	// GitAuthBearer is Authorization: Bearer TOKEN.
	GitAuthBearer GitAuth = "Bearer"
)

// GitCredential is the git token and how it is presented.
type GitCredential struct {
	// SecretKeyRef holds the token.
	// +required
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef"`
	// Auth is Basic (the default) or Bearer.
	// +optional
	// +kubebuilder:default=Basic
	Auth GitAuth `json:"auth,omitempty"`
	// Username of Basic: x-access-token (GitHub) by default; oauth2 for
	// GitLab.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._@+-]+$`
	Username string `json:"username,omitempty"`
}

// PushMode is what agentrun does with a run's change.
// +kubebuilder:validation:Enum=None;Branch;Patch
type PushMode string

// Push modes.
const (
	// PushNone reports the change in status only.
	PushNone PushMode = "None"
	// PushBranch pushes it to the run's branch: a new branch or a
	// fast-forward, never a force push.
	PushBranch PushMode = "Branch"
	// PushPatch keeps it as a patch in a ConfigMap the AgentRun owns.
	PushPatch PushMode = "Patch"
)

// PushWhen is when a change is published.
// +kubebuilder:validation:Enum=Succeeded;Always
type PushWhen string

// When to publish.
const (
	// PushWhenSucceeded publishes only a run that succeeded.
	PushWhenSucceeded PushWhen = "Succeeded"
	// PushWhenAlways publishes whatever the end.
	PushWhenAlways PushWhen = "Always"
)

// GitPush is spec.git.push.
// +kubebuilder:validation:XValidation:rule="!has(self.branch) || (has(self.mode) && self.mode == 'Branch')",message="spec.git.push.branch is for push.mode Branch"
type GitPush struct {
	// Mode is None, Branch or Patch (the default).
	// +optional
	// +kubebuilder:default=Patch
	Mode PushMode `json:"mode,omitempty"`
	// Branch is the run's branch (mode Branch); default
	// agentrun/<name>-<the first 8 characters of the uid>.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._/+-]*$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('//') && !self.contains('/.') && !self.endsWith('/') && !self.endsWith('.') && !self.endsWith('.lock') && self != 'HEAD'",message="spec.git.push.branch is not a branch name git takes: no '..', '//', '/.', trailing '/', '.' or '.lock', not HEAD"
	Branch string `json:"branch,omitempty"`
	// When is Succeeded (the default) or Always.
	// +optional
	// +kubebuilder:default=Succeeded
	When PushWhen `json:"when,omitempty"`
}

// Retention is how long a run's Job is kept after its end.
type Retention struct {
	// JobTTLAfterEnd deletes the run's Job, and with it its Pod and the
	// event log (`kubectl logs -c events`), this long after the run's end
	// is in status: a duration such as 10m or 24h. Unset keeps them.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('8760h')",message="retention.jobTTLAfterEnd must be a duration between 0s and 8760h (a year), such as 10m or 24h"
	JobTTLAfterEnd string `json:"jobTTLAfterEnd,omitempty"`
}

// Session saves and resumes the runtime's session.
// +kubebuilder:validation:XValidation:rule="!has(self.resume) || has(self.claimName)",message="session.resume needs session.claimName: the volume the session was saved on"
type Session struct {
	// ClaimName is a PersistentVolumeClaim where sessions are saved
	// (--session-dir); the saved id is in status.sessionID.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`
	// Resume continues the session with this id (--resume): the
	// status.sessionID of an earlier run on the same claim.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[-._A-Za-z0-9]+$`
	Resume string `json:"resume,omitempty"`
}

// Workspace is the agent's working directory, mounted at /workspace.
type Workspace struct {
	// ClaimName uses this PersistentVolumeClaim instead of an emptyDir.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`
	// SubPath mounts a directory of the claim.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="workspace.subPath must be relative, without .."
	SubPath string `json:"subPath,omitempty"`
	// SizeLimit bounds the emptyDir.
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// PodOverrides change the Job's Pod.
type PodOverrides struct {
	// Image replaces the manager's default runner image (agentrun, its
	// CLIs and bubblewrap).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Resources of the agent container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// ServiceAccountName runs the Pod as this account (for image pull
	// secrets or admission policies). The Pod sets
	// automountServiceAccountToken: false, so Kubernetes mounts no token
	// of the account; a mutating webhook keyed on the account (EKS IRSA,
	// Azure workload identity) may still project a cloud token into the
	// Pod, which the runner's container can read and the sandbox hides
	// from the agent (/var/run/secrets). The AgentRunPolicy's
	// allowedServiceAccounts decides which accounts runs may name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// Labels go on the Job and its Pod, for example
	// kueue.x-k8s.io/queue-name (the Job is then created suspended, for
	// Kueue to admit).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations go on the Job and its Pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// SeccompProfile of the agent container. bubblewrap needs namespace
	// and mount calls that RuntimeDefault blocks: with the sandbox the
	// default is the manager's (the chart's Localhost profile
	// agentrun/bwrap.json when it installs it, else RuntimeDefault, under
	// which the sandbox cannot start and the run fails as
	// SandboxUnavailable); RuntimeDefault without it.
	// +optional
	SeccompProfile *corev1.SeccompProfile `json:"seccompProfile,omitempty"`
	// AppArmorProfile of the agent container; the default is the
	// manager's (the chart's Localhost profile agentrun-bwrap on nodes
	// with AppArmor, where the runtime's default forbids bubblewrap's
	// mounts; none set otherwise).
	// +optional
	AppArmorProfile *corev1.AppArmorProfile `json:"appArmorProfile,omitempty"`
}

// Phase is where a run is.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Succeeded;Failed
type Phase string

// Phases. A run starts Pending; it may go between Pending and Queued (a
// queue such as Kueue suspends and admits its Job, a budget holds it back
// and lets it go), then to Running, and ends Succeeded or Failed. It never
// goes back from Running, and an end is final.
const (
	// PhasePending: the Job is being created or its Pod is not running yet.
	PhasePending Phase = "Pending"
	// PhaseQueued: the Job is suspended (for example by Kueue), or no Job
	// is made yet because an AgentBudget covering the run is spent
	// (condition reason BudgetExhausted, the message names the budget).
	PhaseQueued Phase = "Queued"
	// PhaseRunning: the agent container runs.
	PhaseRunning Phase = "Running"
	// PhaseSucceeded: the run ended with end status finished.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: any other end, or a Pod that ended without a summary.
	PhaseFailed Phase = "Failed"
)

// AgentRunStatus is the end event of the run made Kubernetes-shaped, plus
// where the run is.
type AgentRunStatus struct {
	// ObservedGeneration is the generation this status describes. The
	// API server shows a new AgentRun with 0 here (the status default)
	// until the controller has written its first status, so kstatus
	// (Flux, kpt) reads a run nobody has looked at yet as InProgress, not
	// as Current.
	// +optional
	// +kubebuilder:default=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// EndStatus is end.status: finished, failed, interrupted, timeout,
	// limit or rejected. Empty until the run ends; failed when the Pod
	// ended without an end summary.
	// +optional
	// +kubebuilder:validation:Enum=finished;failed;interrupted;timeout;limit;rejected
	EndStatus string `json:"endStatus,omitempty"`
	// ExitCode is end.exit_code, the runtime CLI's exit code; without an
	// end summary, the agent container's exit code.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Detail says why a run did not finish (end.detail, or what the
	// controller saw), cut to 4 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=4097
	Detail string `json:"detail,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// DurationMs is end.duration_ms.
	// +optional
	DurationMs *int64 `json:"durationMs,omitempty"`
	// Usage is end.usage. While the run is Running it is the usage so far
	// (the same fields with the same meaning, from the events sidecar's
	// live progress; docs/kubernetes/live-usage.md), and the end's figures
	// replace it when the run ends.
	// +optional
	Usage *Usage `json:"usage,omitempty"`
	// Result is the main agent's last text (end.result), cut to 32 KiB;
	// the event log (`kubectl logs -c events`) has all of it.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Result *string `json:"result,omitempty"`
	// ResultTruncated is true when Result is only the start of the result.
	// +optional
	ResultTruncated bool `json:"resultTruncated,omitempty"`
	// SessionID is end.session_id: pass it to spec.session.resume. An id
	// longer than 256 bytes is left out (a cut id resumes nothing).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SessionID string `json:"sessionID,omitempty"`
	// +optional
	JobName string `json:"jobName,omitempty"`
	// +optional
	PodName string `json:"podName,omitempty"`
	// LabelsAtEnd are the run's labels when it ended: the AgentBudgets
	// that counted it go on counting it by these, so relabelling an ended
	// run does not take its spend out of a budget. Absent for a run that
	// ended without labels (its labels then count).
	// +optional
	LabelsAtEnd map[string]string `json:"labelsAtEnd,omitempty"`
	// Counters are the run's tallies: so far while it is Running, the
	// end's once it ended.
	// +optional
	Counters *Counters `json:"counters,omitempty"`
	// Progress is what the agent has done so far, from the events
	// sidecar's live progress while the run is Running; it keeps its last
	// values after the end.
	// +optional
	Progress *Progress `json:"progress,omitempty"`
	// Isolation is how the agent really ran, as its runner reported at
	// the end: the sandbox, and whether the network policy was enforced.
	// +optional
	Isolation *Isolation `json:"isolation,omitempty"`
	// Git is end.git: the repository, the change the agent made and where
	// it was published (runs with spec.git).
	// +optional
	Git *GitStatus `json:"git,omitempty"`
	// TraceID is the run's OpenTelemetry trace id (32 hex digits) when
	// the manager exports runs (the chart's telemetry.otlp): the trace of
	// the agentrun.dev/traceparent annotation, else a new one. Look the
	// trace up by it in the tracing back end (docs/telemetry.md).
	// +optional
	TraceID string `json:"traceID,omitempty"`
}

// GitStatus is the run's repository and change.
type GitStatus struct {
	Repository string `json:"repository"`
	// Ref is what the run started from (refs/heads/main, refs/tags/v1, a
	// commit id).
	Ref string `json:"ref"`
	// BaseCommit and HeadCommit: the change is BaseCommit..HeadCommit
	// (equal when nothing changed).
	BaseCommit string `json:"baseCommit"`
	HeadCommit string `json:"headCommit"`
	// Branch is the run's branch (push mode Branch); Pushed whether the
	// change is on it.
	// +optional
	Branch string `json:"branch,omitempty"`
	Pushed bool   `json:"pushed"`
	// Commits, FilesChanged, Insertions and Deletions are the diff stat.
	Commits      int32 `json:"commits"`
	FilesChanged int32 `json:"filesChanged"`
	Insertions   int32 `json:"insertions"`
	Deletions    int32 `json:"deletions"`
	// DiffStat is "+INSERTIONS -DELETIONS" (the printer column's).
	// +optional
	DiffStat string `json:"diffStat,omitempty"`
	// Paths are the first changed paths.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Paths []string `json:"paths,omitempty"`
	// PatchConfigMap names the ConfigMap that holds the patch (push mode
	// Patch): key change.patch.gz, a gzip of the mbox `git am` applies.
	// +optional
	PatchConfigMap string `json:"patchConfigMap,omitempty"`
	// PatchTruncated is true when the patch was too large for a ConfigMap
	// and is not kept: run with push mode Branch to get the change.
	// +optional
	PatchTruncated bool `json:"patchTruncated,omitempty"`
	// Detail says what was not recorded or not published, and why.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Detail string `json:"detail,omitempty"`
}

// Progress is a running agent's progress.
type Progress struct {
	// ModelCalls counts the model calls that ended (usage events: one per
	// call for claude-code and pi, per turn for codex, per step for dsh).
	ModelCalls int64 `json:"modelCalls"`
	// ToolCalls counts the tool calls started, running ones included.
	ToolCalls int64 `json:"toolCalls"`
	// Activity is the current or last activity as the text format shows
	// it (docs/events.md, "The text format"), for example
	// "[main] tool Bash: go test ./...": a running tool call, else the
	// latest line; cut to 256 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Activity string `json:"activity,omitempty"`
	// LastEventTime is the time of the latest event of the stream.
	// +optional
	LastEventTime *metav1.Time `json:"lastEventTime,omitempty"`
	// MeteredTokens is every token the runner's filter proxy counted in
	// the model API's own responses (runs with spec.credentials only):
	// what the agent's CLI cannot under-report. Budgets count the larger
	// of this and usage.totalTokens.
	// +optional
	MeteredTokens *int64 `json:"meteredTokens,omitempty"`
	// UnmeteredCalls counts the model calls the filter proxy could not
	// count (an answer without usage, too large, or in an encoding it
	// cannot read): meteredTokens is then a floor. Absent when none.
	// +optional
	UnmeteredCalls *int64 `json:"unmeteredCalls,omitempty"`
}

// TokenCounts are one usage total. A field the runtime did not report is
// absent.
type TokenCounts struct {
	// +optional
	InputTokens *int64 `json:"inputTokens,omitempty"`
	// +optional
	OutputTokens *int64 `json:"outputTokens,omitempty"`
	// +optional
	CacheReadTokens *int64 `json:"cacheReadTokens,omitempty"`
	// +optional
	CacheWriteTokens *int64 `json:"cacheWriteTokens,omitempty"`
	// CostUSD is the runtime's own cost in US dollars, as a decimal
	// string (floating point in JSON loses digits across languages).
	// Where the runtime reported no cost (codex and dsh always, claude-code
	// until its end), it is the manager's estimate from the price table
	// the admin gives (the chart's prices), and costEstimated is true;
	// without a price for the model it is absent.
	// +optional
	CostUSD string `json:"costUSD,omitempty"`
	// CostEstimated is true when costUSD is, in whole or in part, the
	// manager's estimate rather than the runtime's own figure.
	// +optional
	CostEstimated bool `json:"costEstimated,omitempty"`
}

// Bounds of status.usage.byModel (an agent names its models, and a status
// must stay far below the API server's object size limit): the CRD's
// maxProperties and its rule on the names, and what the manager keeps.
const (
	// MaxByModel is the most models status keeps: those with the most
	// tokens. The events sidecar's live document carries as many.
	MaxByModel = 64
	// MaxModelNameBytes bounds a model name in status.
	MaxModelNameBytes = 256
)

// Usage is the run's usage total with the per-model split.
type Usage struct {
	TokenCounts `json:",inline"`
	// TotalTokens is input + output + cache read + cache write.
	// +optional
	TotalTokens *int64 `json:"totalTokens,omitempty"`
	// ByModel splits the totals by model ("unknown" when the runtime did
	// not say): at most 64 models (MaxByModel), those with the most
	// tokens, each named in at most 256 bytes.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(m, size(m) <= 256)",message="usage.byModel: a model name has at most 256 characters"
	ByModel map[string]TokenCounts `json:"byModel,omitempty"`
	// ByModelTruncated is true when ByModel holds only the largest models
	// (more than 64, a model name too long for status, or an end summary
	// that had no room while the event log could not be read); the totals
	// are always whole.
	// +optional
	ByModelTruncated bool `json:"byModelTruncated,omitempty"`
}

// Isolation is how an agent ran.
type Isolation struct {
	// Sandbox is Bubblewrap or None.
	Sandbox SandboxMode `json:"sandbox"`
	// NetworkMode is None, Full or Custom.
	NetworkMode NetworkMode `json:"networkMode"`
	// NetworkEnforced is true when the sandbox enforced the network
	// policy (false without a sandbox).
	NetworkEnforced bool `json:"networkEnforced"`
}

// Counters are a run's tallies.
type Counters struct {
	Tools             int32 `json:"tools"`
	ToolErrors        int32 `json:"toolErrors"`
	Denials           int32 `json:"denials"`
	Subagents         int32 `json:"subagents"`
	DeniedConnections int32 `json:"deniedConnections"`
}

// AnnotationTraceParent on an AgentRun is a W3C traceparent
// (00-<trace id>-<span id>-<flags>): with the manager's telemetry on, the
// run's trace continues that trace (a CI pipeline's, an Argo Workflow's),
// and status.traceID is its trace id. A value that is not a traceparent is
// ignored (the run gets a trace of its own) and reported as an Event.
const AnnotationTraceParent = "agentrun.dev/traceparent"

// AnnotationTraceState goes with AnnotationTraceParent (W3C tracestate).
const AnnotationTraceState = "agentrun.dev/tracestate"

// AgentRun is one run of a coding agent, reconciled into a batch/v1 Job.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// Not in the "all" category: `kubectl delete all --all` must not wipe the
// records of runs.
//
// +kubebuilder:resource:shortName=ar
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.spec.runtime`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Tokens",type=integer,JSONPath=`.status.usage.totalTokens`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.usage.costUSD`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`
// +kubebuilder:printcolumn:name="Change",type=string,JSONPath=`.status.git.diffStat`
// +kubebuilder:printcolumn:name="Branch",type=string,JSONPath=`.status.git.branch`,priority=1
// +kubebuilder:printcolumn:name="End",type=string,JSONPath=`.status.endStatus`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ended")].reason`,priority=1
// +kubebuilder:printcolumn:name="Activity",type=string,JSONPath=`.status.progress.activity`,priority=1
// +kubebuilder:printcolumn:name="Trace",type=string,JSONPath=`.status.traceID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentRunSpec `json:"spec"`
	// Status is where the run is and, once it ended, its end event made
	// Kubernetes-shaped. Its default gives a new AgentRun
	// status.observedGeneration 0 (see AgentRunStatus.ObservedGeneration).
	// +optional
	// +kubebuilder:default={}
	Status AgentRunStatus `json:"status,omitempty"`
}

// AgentRunList is a list of AgentRuns.
//
// +kubebuilder:object:root=true
type AgentRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentRun `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentRun{}, &AgentRunList{})
}

// Records that expire: a namespace opts in with these annotations on the
// Namespace object (set by whoever may edit it, usually the cluster
// admin), and the manager then deletes the namespace's ended AgentRuns it
// no longer needs to keep (docs/kubernetes/records.md). Without them every
// AgentRun stays, as GitOps needs: agentrun never deletes a run that Argo
// CD or Flux tracks, nor one that an AgentBudget's current window still
// counts.
const (
	// AnnotationRecordsTTLAfterEnd is a duration (720h, say, from 1m to
	// 87600h): an ended run is deleted this long after its end.
	AnnotationRecordsTTLAfterEnd = "agentrun.dev/records-ttl-after-end"
	// AnnotationRecordsHistoryLimit is a count (0 to 100000): only the
	// newest ended runs, by their end, are kept.
	AnnotationRecordsHistoryLimit = "agentrun.dev/records-history-limit"
)
