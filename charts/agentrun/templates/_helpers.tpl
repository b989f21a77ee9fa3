{{- define "agentrun.name" -}}agentrun{{- end -}}

{{- define "agentrun.fullname" -}}
{{- printf "%s-manager" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentrun.labels" -}}
app.kubernetes.io/name: {{ include "agentrun.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "agentrun.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentrun.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- /*
The images: by version tag, the chart's appVersion unless a tag is given,
under imageRegistry when it is set; a digest pins one (IMAGE@DIGEST).
*/ -}}
{{- define "agentrun.repository" -}}
{{- if .registry -}}{{ printf "%s/%s" (trimSuffix "/" .registry) .repository }}{{- else -}}{{ .repository }}{{- end -}}
{{- end -}}

{{- define "agentrun.managerImage" -}}
{{- $repo := include "agentrun.repository" (dict "registry" .Values.imageRegistry "repository" .Values.image.repository) -}}
{{- $image := printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest -}}
{{- $image = printf "%s@%s" $image .Values.image.digest -}}
{{- end -}}
{{- $image -}}
{{- end -}}

{{- define "agentrun.runnerImage" -}}
{{- $repo := include "agentrun.repository" (dict "registry" .Values.imageRegistry "repository" .Values.runner.repository) -}}
{{- $image := .Values.runner.image | default (printf "%s:%s" $repo (.Values.runner.tag | default .Chart.AppVersion)) -}}
{{- if .Values.runner.digest -}}
{{- $image = printf "%s@%s" $image .Values.runner.digest -}}
{{- end -}}
{{- $image -}}
{{- end -}}

{{- /* The ValidatingAdmissionPolicy, its binding and the AgentRunPolicy share this name. */ -}}
{{- define "agentrun.policyName" -}}
{{- printf "%s-policy" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /*
The keys on which mutating webhooks inject credentials, identities or
sidecars into a Pod, and the legacy profile annotations: the presets deny
them as labels and as annotations (docs/security.md). The same list is in
config/policy/agentrunpolicy.yaml (charts/charts_test.go compares them).
*/ -}}
{{- define "agentrun.injectingKeys" -}}
{{- toJson (list "eks.amazonaws.com/*" "iam.amazonaws.com/*" "azure.workload.identity/*" "aadpodidbinding" "iam.gke.io/*" "vault.hashicorp.com/*" "sidecar.istio.io/*" "istio.io/*" "linkerd.io/*" "container.apparmor.security.beta.kubernetes.io/*" "container.seccomp.security.alpha.kubernetes.io/*" "seccomp.security.alpha.kubernetes.io/pod") -}}
{{- end -}}

{{- /*
The AgentRunPolicy's spec: the preset's fields, then each field of
policy.spec in its place (set, not merge, so that false, 0 and [] replace
the preset's value too). standard is the chart's default; strict adds no
network mode full and a 2h timeout; custom starts empty.
*/ -}}
{{- define "agentrun.policySpec" -}}
{{- $spec := dict -}}
{{- if has .Values.policy.preset (list "standard" "strict") -}}
{{- $keys := include "agentrun.injectingKeys" . | fromJsonArray -}}
{{- $spec = dict "allowedRuntimes" (list "claude-code" "codex" "pi" "dsh") "allowedImages" (list (include "agentrun.runnerImage" .)) "allowSandboxNone" false "allowNetworkFull" true "allowedServiceAccounts" (list "default") "allowedLabels" (list "kueue.x-k8s.io/queue-name" "kueue.x-k8s.io/priority-class") "deniedLabels" $keys "deniedAnnotations" $keys "allowedSecrets" (list "*") "allowedConfigMaps" (list "*") "allowedVolumeClaims" (list "*") "deniedEnv" (list "PATH" "LD_*" "GCONV_PATH" "GODEBUG" "GOTRACEBACK" "SSL_CERT_FILE" "SSL_CERT_DIR" "TMPDIR" "HOME" "AGENTRUN_SANDBOX_*" "AGENTRUN_PROMPT" "AGENTRUN_GIT_TOKEN") "allowedGitRepositories" (list "https://*") "allowedGitBranchPrefixes" (list "agentrun/") -}}
{{- end -}}
{{- if eq .Values.policy.preset "strict" -}}
{{- $_ := set $spec "allowNetworkFull" false -}}
{{- $_ := set $spec "maxTimeout" "2h" -}}
{{- $_ := set $spec "allowedGitRepositories" (list) -}}
{{- end -}}
{{- range $k, $v := .Values.policy.spec -}}
{{- $_ := set $spec $k $v -}}
{{- end -}}
{{- toYaml $spec -}}
{{- end -}}

{{- /* The namespaces of the agents' NetworkPolicy. */ -}}
{{- define "agentrun.agentNamespaces" -}}
{{- $ns := .Values.networkPolicy.agents.namespaces | default .Values.watchNamespaces -}}
{{- if not $ns -}}
{{- fail "networkPolicy.agents.enabled needs the agents' namespaces: set networkPolicy.agents.namespaces or watchNamespaces" -}}
{{- end -}}
{{- toJson $ns -}}
{{- end -}}

{{/*
A resource list as the manager's --agent-requests and --agent-limits take
it: cpu=250m,memory=512Mi (sorted by name, as range gives them).
*/}}
{{- define "agentrun.resourceList" -}}
{{- $items := list -}}
{{- range $name, $q := . -}}
{{- $items = append $items (printf "%s=%v" $name $q) -}}
{{- end -}}
{{- join "," $items -}}
{{- end }}
{{- /* The namespace of the node profiles' installer (sandboxProfiles.namespace). */ -}}
{{- define "agentrun.profilesNamespace" -}}
{{- .Values.sandboxProfiles.namespace | default .Release.Namespace -}}
{{- end -}}

{{- /* The agent containers' seccomp profile with the sandbox (--sandbox-seccomp-profile). */ -}}
{{- define "agentrun.sandboxSeccomp" -}}
{{- $p := .Values.sandboxProfiles -}}
{{- if $p.seccompProfile -}}
{{- $p.seccompProfile -}}
{{- else if eq $p.installer "security-profiles-operator" -}}
{{- printf "localhost/operator/%s/agentrun-bwrap.json" (include "agentrun.profilesNamespace" .) -}}
{{- else -}}
localhost/agentrun/bwrap.json
{{- end -}}
{{- end -}}
