package podcontract

// The agent Pod's containers: the runner, and the native sidecar that
// follows its event file (an init container with restartPolicy Always, so
// it starts first and never keeps the Pod alive).
const (
	AgentContainer  = "agent"
	EventsContainer = "events"
	// PatchContainer (runs with spec.git push mode Patch) is a second
	// sidecar: after the end event it writes the run's patch to its log
	// (package sidecar/patchlog), which the manager keeps in a ConfigMap.
	PatchContainer = "patch"
)

// Paths inside the Pod. SharedDir is an emptyDir both containers mount (the
// sidecar read-only); the others are the agent container's.
const (
	SharedDir = "/agentrun"
	// EventsFile is the runner's --events copy of the stream, which the
	// sidecar follows to its log.
	EventsFile = SharedDir + "/events.jsonl"
	// RawFile is the runner's --raw: every byte the CLI wrote.
	RawFile = SharedDir + "/raw.jsonl"
	// MeterFile is the runner's --meter-file, which the sidecar serves
	// with the live progress.
	MeterFile = SharedDir + "/meter.json"
	// PatchFile is the runner's --patch in a Pod (spec.git push mode
	// Patch), which the patch container hands to the manager.
	PatchFile = SharedDir + "/change.patch"
	// WorkspaceDir is the agent's working directory (--cwd).
	WorkspaceDir = "/workspace"
	// SessionsDir holds saved sessions (--session-dir), on a volume of the
	// user's.
	SessionsDir = "/sessions"
	// ImagesDir holds images projected from ConfigMaps and Secrets, one
	// directory per position in spec.images.
	ImagesDir = "/agentrun-images"
	// PromptDir holds PromptFile, the prompt (--prompt-file) projected
	// from spec.prompt: the text, a ConfigMap key or a Secret key.
	PromptDir  = "/agentrun-prompt"
	PromptFile = PromptDir + "/prompt"
	// UpstreamCADir holds UpstreamCAFile, the bundle of spec.upstreamCA.
	UpstreamCADir  = "/agentrun-upstream-ca"
	UpstreamCAFile = UpstreamCADir + "/ca.pem"
	// TerminationMessageFile is where the runner writes the end summary
	// (--summary): the kubelet's default terminationMessagePath.
	TerminationMessageFile = "/dev/termination-log"
)

// The live progress the sidecar serves (package sidecar/progress) and the
// manager reads.
const (
	// ProgressPortName names the sidecar's port in the Pod spec; the
	// manager reads the number from there.
	ProgressPortName = "progress"
	// DefaultProgressPort is that port unless the manager is told another.
	DefaultProgressPort = 8788
	// ProgressPath is where the document is served (GET only).
	ProgressPath = "/progress"
)

// GitTokenEnv is the agent container's variable that holds
// spec.git.credential's token (the runner's --git-credential): the
// runner's environment only, never the agent's.
const GitTokenEnv = "AGENTRUN_GIT_TOKEN"
