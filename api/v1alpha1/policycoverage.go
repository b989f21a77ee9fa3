package v1alpha1

// Creating an AgentRun is creating a Pod: whoever may create one chooses,
// through its spec, much of what the Pod runs and may reach. PolicyCoverage
// is the one list of what the admin policy (AgentRunPolicy, enforced by the
// ValidatingAdmissionPolicy of config/policy/admission_policy.yaml) does
// about each field of AgentRunSpec: the policy fields that bound it, or,
// for a field no policy field bounds, why none needs to. A field is listed
// by its path in the CRD's schema (list items have no index); a field not
// listed is covered by the entries of all its children.
//
// TestPolicyCoversEverySpecField walks the CRD's schema and fails for a
// field of the spec that is neither listed nor covered by its children, for
// a listed path the schema lacks, for a policy field that does not exist or
// that the admission policy never reads, and for a policy field no entry
// names. So a new AgentRun field (git, telemetry) cannot be added without
// deciding here what the policy does about it; a renamed one (spec.cancel became
// spec.stop) is renamed here too. docs/security.md
// shows the same as a table per preset.
var PolicyCoverage = map[string]Coverage{
	"spec.runtime": {Policy: []string{"allowedRuntimes"}, Why: "which agent CLI runs"},
	"spec.model":   {Why: "passed to the CLI; what the calls cost is bounded by limits, budgets and the credentials' hosts"},

	"spec.prompt.text":            {Why: "the task; the agent is treated as hostile whatever it is told"},
	"spec.prompt.configMapKeyRef": {Policy: []string{"allowedConfigMaps"}, Why: "reads a ConfigMap into the Pod"},
	"spec.prompt.secretKeyRef":    {Policy: []string{"allowedSecrets"}, Why: "reads a Secret into the Pod"},

	"spec.images.path":            {Why: "a file of the workspace"},
	"spec.images.configMapKeyRef": {Policy: []string{"allowedConfigMaps"}, Why: "mounts a ConfigMap key"},
	"spec.images.secretKeyRef":    {Policy: []string{"allowedSecrets"}, Why: "mounts a Secret key"},

	"spec.credentials.name":      {Policy: []string{"deniedEnv"}, Why: "a variable of the agent container, which the runner reads too"},
	"spec.credentials.valueFrom": {Policy: []string{"allowedSecrets"}, Why: "reads a Secret into the runner's environment"},
	"spec.credentials.hosts": {Policy: []string{"allowedAddresses"},
		Why: "the hosts that get the real value, which the author chose to send; a private address needs an allowHosts IP:PORT entry"},
	"spec.upstreamCA": {Policy: []string{"allowedConfigMaps"}, Why: "mounts a ConfigMap key"},

	"spec.env.name":                       {Policy: []string{"deniedEnv"}, Why: "a variable of the agent container, which the runner reads too (PATH, SSL_CERT_FILE, AGENTRUN_*)"},
	"spec.env.value":                      {Why: "a literal the author wrote, readable by the agent"},
	"spec.env.valueFrom.secretKeyRef":     {Policy: []string{"allowedSecrets"}, Why: "reads a Secret into the Pod"},
	"spec.env.valueFrom.configMapKeyRef":  {Policy: []string{"allowedConfigMaps"}, Why: "reads a ConfigMap into the Pod"},
	"spec.env.valueFrom.fieldRef":         {Why: "the Pod's own fields"},
	"spec.env.valueFrom.resourceFieldRef": {Why: "the container's own resources"},
	"spec.env.valueFrom.fileKeyRef":       {Why: "a file of the Pod's own volumes, each of which the policy covers"},
	"spec.envFrom": {Policy: []string{"allowEnvFrom", "allowedSecrets", "allowedConfigMaps"},
		Why: "sets variables whose names no admission check can see"},

	"spec.timeout":          {Policy: []string{"maxTimeout"}, Why: "how long the Pod may run"},
	"spec.limits.maxTurns":  {Policy: []string{"maxTurns"}, Why: "a bound on the run's model calls"},
	"spec.limits.maxTokens": {Policy: []string{"maxTokens"}, Why: "a bound on the run's tokens"},
	"spec.subagents":        {Why: "only narrows what the agent may do"},
	"spec.sandbox":          {Policy: []string{"allowSandboxNone"}, Why: "None runs the agent without bubblewrap and without the filter proxy"},

	"spec.network.mode": {Policy: []string{"allowNetworkFull"}, Why: "Full reaches every public address through the proxy"},
	"spec.network.allowHosts": {Policy: []string{"allowedAddresses"},
		Why: "a host name reaches public addresses only (a part of full); an IP:PORT entry lifts the private-address refusal"},
	"spec.network.addHosts": {Why: "names for the proxy's resolver; the addresses still pass its private-address refusal"},
	"spec.denyRead":         {Why: "only hides more from the agent"},

	"spec.session.claimName":   {Policy: []string{"allowedVolumeClaims"}, Why: "mounts a PersistentVolumeClaim"},
	"spec.session.resume":      {Why: "a session id on the allowed claim"},
	"spec.workspace.claimName": {Policy: []string{"allowedVolumeClaims"}, Why: "mounts a PersistentVolumeClaim, which the agent writes"},
	"spec.workspace.subPath":   {Why: "a directory of the allowed claim"},
	"spec.workspace.sizeLimit": {Why: "only bounds the emptyDir"},

	"spec.podOverrides.image":            {Policy: []string{"allowedImages"}, Why: "what the Pod runs, under the sandbox's seccomp profile"},
	"spec.podOverrides.imagePullPolicy":  {Why: "how the allowed image is pulled"},
	"spec.podOverrides.imagePullSecrets": {Policy: []string{"allowedSecrets"}, Why: "reads Secrets for the kubelet"},
	"spec.podOverrides.resources":        {Why: "bounded by the namespace's ResourceQuota and LimitRange, as any Pod's"},
	"spec.podOverrides.nodeSelector":     {Policy: []string{"allowedNodeSelectorKeys"}, Why: "which nodes run the Pod"},
	"spec.podOverrides.tolerations":      {Policy: []string{"allowedTolerations"}, Why: "which tainted nodes may run the Pod (the control plane's too)"},
	"spec.podOverrides.affinity":         {Policy: []string{"allowAffinity"}, Why: "which nodes run the Pod, beside or away from which Pods"},
	"spec.podOverrides.serviceAccountName": {Policy: []string{"allowedServiceAccounts"},
		Why: "no token is mounted, but webhooks keyed on the account may inject cloud tokens"},
	"spec.podOverrides.priorityClassName": {Policy: []string{"allowedPriorityClasses"}, Why: "a high priority preempts other workloads"},
	"spec.podOverrides.runtimeClassName":  {Policy: []string{"allowedRuntimeClasses"}, Why: "which container runtime runs the Pod"},
	"spec.podOverrides.labels": {Policy: []string{"allowedLabels", "deniedLabels"},
		Why: "labels select Pods for Services and NetworkPolicies, and make webhooks inject identities"},
	"spec.podOverrides.annotations": {Policy: []string{"allowedAnnotations", "deniedAnnotations"},
		Why: "annotations make webhooks inject secrets, sidecars and identities"},
	"spec.podOverrides.seccompProfile":  {Policy: []string{"allowedSeccompProfiles"}, Why: "what the agent container's system calls may be"},
	"spec.podOverrides.appArmorProfile": {Policy: []string{"allowedAppArmorProfiles"}, Why: "what the agent container may do under AppArmor"},

	"spec.git.repository": {Policy: []string{"allowedGitRepositories"},
		Why: "what the runner clones, from the Pod's network, and what the agent may fetch from with the token"},
	"spec.git.plainHTTP":               {Policy: []string{"allowGitPlainHTTP"}, Why: "the token would travel unencrypted"},
	"spec.git.credential.secretKeyRef": {Policy: []string{"allowedSecrets"}, Why: "reads a Secret into the runner's environment"},
	"spec.git.credential.auth":         {Why: "how the allowed token is presented"},
	"spec.git.credential.username":     {Why: "the user name of Basic, beside the allowed token"},
	"spec.git.ref":                     {Why: "where in the allowed repository the run starts"},
	"spec.git.depth":                   {Why: "how much of the allowed repository's history is fetched"},
	"spec.git.submodules": {Policy: []string{"allowedGitRepositories"},
		Why: "the submodules' https URLs are the repository's content, unchecked by the patterns, cloned from the Pod's network (with the token on the repository's host): only a policy allowing any https repository allows them"},
	"spec.git.push.mode": {Policy: []string{"allowedGitBranchPrefixes"},
		Why: "Branch writes to the forge (a new branch or a fast-forward, never a force push); a patch stays in the cluster"},
	"spec.git.push.branch": {Policy: []string{"allowedGitBranchPrefixes"}, Why: "the branch the change is pushed to"},
	"spec.git.push.when":   {Why: "whether a run that did not succeed publishes too"},

	"spec.retention": {Why: "when the run's Job and Pod are deleted"},
	"spec.stop":      {Why: "stops the run"},
}

// Coverage is what the admin policy does about one AgentRun field.
// +kubebuilder:object:generate=false
type Coverage struct {
	// Policy are the AgentRunPolicy fields that bound it (json names);
	// none for a field that needs no bound.
	Policy []string
	// Why says what the field decides, or why it needs no bound.
	Why string
}
