package charts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// rendered is the chart rendered with some values, as objects.
type rendered []map[string]any

func render(t *testing.T, args ...string) rendered {
	t.Helper()
	return rendered(docs(t, helm(t, append([]string{"template", "ar", "charts/agentrun", "--namespace", "agentrun-system",
		"--kube-version", "1.34.0"}, args...)...)))
}

// all are the objects of a kind, as "namespace/name" (or "name").
func (r rendered) all(kind string) []string {
	var out []string
	for _, o := range r {
		if o["kind"] != kind {
			continue
		}
		md := o["metadata"].(map[string]any)
		name := md["name"].(string)
		if ns, ok := md["namespace"].(string); ok {
			name = ns + "/" + name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// get is the object of a kind and exact "namespace/name" (or "name").
func (r rendered) get(t *testing.T, kind, name string) map[string]any {
	t.Helper()
	for _, o := range r {
		md := o["metadata"].(map[string]any)
		full := md["name"].(string)
		if ns, ok := md["namespace"].(string); ok {
			full = ns + "/" + full
		}
		if o["kind"] == kind && full == name {
			return o
		}
	}
	t.Fatalf("no %s %s; %s: %v", kind, name, kind, r.all(kind))
	return nil
}

// field reads a path of map keys and list indexes (as strings of digits
// are not used: pass ints) from an object.
func field(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

// managerArgs are the manager container's arguments.
func (r rendered) managerArgs(t *testing.T) []string {
	t.Helper()
	var args []string
	for _, a := range field(r.get(t, "Deployment", "agentrun-system/ar-manager"), "spec", "template", "spec", "containers", 0, "args").([]any) {
		args = append(args, a.(string))
	}
	return args
}

func asYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fromYAML reads a literal the way rendered objects are read.
func fromYAML(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// generatedRules are the manager's rules as controller-gen wrote them.
func generatedRules(t *testing.T) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return field(fromYAML(t, string(b)), "rules")
}

// TestChartValues renders the chart with the defaults and with each option
// this chart offers for least privilege and the admin policy, and checks
// what each one adds, removes or changes.
func TestChartValues(t *testing.T) {
	version := appVersion(t)
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, r rendered)
	}{
		{"defaults", nil, func(t *testing.T, r rendered) {
			if got := r.all("ClusterRole"); !slices.Equal(got, []string{"ar-manager", "ar-manager-budget-admin", "ar-manager-editor", "ar-manager-metrics-auth", "ar-manager-metrics-reader", "ar-manager-viewer"}) {
				t.Errorf("ClusterRoles %v", got)
			}
			if got := r.all("Role"); !slices.Equal(got, []string{"agentrun-system/ar-manager-leader-election"}) {
				t.Errorf("Roles %v: only leader election's, in the release namespace", got)
			}
			for _, kind := range []string{"NetworkPolicy", "ServiceMonitor"} {
				if got := r.all(kind); len(got) > 0 {
					t.Errorf("%s %v rendered by default", kind, got)
				}
			}
			// Secure by default: the admin policy is on, for every
			// namespace, refusing, with the standard preset (which is
			// config/policy's AgentRunPolicy); the sandbox profiles'
			// guard is on too.
			for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
				if got := r.all(kind); !slices.Equal(got, []string{"ar-policy", "ar-sandbox-profiles"}) {
					t.Errorf("%s %v, want the admin policy and the profile guard", kind, got)
				}
			}
			binding := r.get(t, "ValidatingAdmissionPolicyBinding", "ar-policy")
			want := fromYAML(t, `{policyName: ar-policy, validationActions: [Deny], paramRef: {name: ar-policy, parameterNotFoundAction: Deny}, matchResources: {namespaceSelector: {}}}`)
			if !reflect.DeepEqual(binding["spec"], want) {
				t.Errorf("binding %s", asYAML(t, binding["spec"]))
			}
			arp := r.get(t, "AgentRunPolicy", "ar-policy")
			if field(arp, "metadata", "labels", "agentrun.dev/policy-preset") != "standard" {
				t.Errorf("preset label %v", field(arp, "metadata", "labels"))
			}
			b, err := os.ReadFile(filepath.Join(root(t), "config", "policy", "agentrunpolicy.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := arp["spec"], field(fromYAML(t, string(b)), "spec"); !reflect.DeepEqual(got, want) {
				t.Errorf("the default preset:\n%s\nwant config/policy's AgentRunPolicy:\n%s", asYAML(t, got), asYAML(t, want))
			}
			spec := arp["spec"].(map[string]any)
			switch {
			case spec["allowSandboxNone"] != false:
				t.Errorf("the default policy lets runs turn the sandbox off")
			case !reflect.DeepEqual(spec["allowedImages"], []any{"agentrun-runner:" + version}):
				t.Errorf("the default policy allows the images %v, want the chart's runner only", spec["allowedImages"])
			case spec["allowNetworkFull"] != true:
				t.Errorf("the default policy forbids network mode full, which the samples and demo use")
			}
			for _, loose := range []string{"allowedSeccompProfiles", "allowedAppArmorProfiles", "allowedRuntimeClasses", "allowedPriorityClasses",
				"allowedTolerations", "allowedNodeSelectorKeys", "allowAffinity", "allowEnvFrom", "allowedAddresses", "allowedAnnotations"} {
				if _, ok := spec[loose]; ok {
					t.Errorf("the default policy sets %s: loosening is an explicit value", loose)
				}
			}
			args := r.managerArgs(t)
			for _, want := range []string{"--metrics-bind-address=:8443", "--metrics-secure=true", "--runner-image=agentrun-runner:" + version,
				"--live-progress=true", "--live-port=8788", "--live-usage-interval=5s", "--live-progress-interval=30s", "--live-max-connections=4096",
				"--budget-status-interval=5s", "--agent-requests=cpu=250m,memory=512Mi"} {
				if !slices.Contains(args, want) {
					t.Errorf("manager args %v lack %s", args, want)
				}
			}
			for _, a := range args {
				if strings.HasPrefix(a, "--watch-namespaces") || strings.HasPrefix(a, "--metrics-cert-path") || strings.HasPrefix(a, "--prices") ||
					strings.HasPrefix(a, "--agent-limits") {
					t.Errorf("manager arg %s by default", a)
				}
			}
			dep := r.get(t, "Deployment", "agentrun-system/ar-manager")
			if img := field(dep, "spec", "template", "spec", "containers", 0, "image"); img != "agentrun-manager:"+version {
				t.Errorf("manager image %v, want the appVersion tag %s", img, version)
			}
			if reader := asYAML(t, r.get(t, "ClusterRole", "ar-manager-metrics-reader")["rules"]); !strings.Contains(reader, "/metrics") {
				t.Errorf("metrics-reader rules %s", reader)
			}
			auth := asYAML(t, r.get(t, "ClusterRole", "ar-manager-metrics-auth")["rules"])
			for _, want := range []string{"tokenreviews", "subjectaccessreviews", "create"} {
				if !strings.Contains(auth, want) {
					t.Errorf("metrics-auth rules lack %s:\n%s", want, auth)
				}
			}
			admin := r.get(t, "ClusterRole", "ar-manager-budget-admin")
			if field(admin, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-admin") != "true" ||
				!strings.Contains(asYAML(t, admin["rules"]), "agentbudgets") {
				t.Errorf("budget admin role %s", asYAML(t, admin))
			}
			if editor := asYAML(t, r.get(t, "ClusterRole", "ar-manager-editor")["rules"]); !strings.Contains(editor, "agentbudgets") {
				t.Errorf("the editors cannot read budgets:\n%s", editor)
			}
			if n := field(r.get(t, "CustomResourceDefinition", "agentruns.agentrun.dev"), "spec", "versions", 0, "schema", "openAPIV3Schema",
				"properties", "spec", "properties", "network", "default"); !reflect.DeepEqual(n, map[string]any{"mode": "Full"}) {
				t.Errorf("spec.network default %v, want the generated {mode: Full}", n)
			}
		}},
		{"prices, agent resources and live settings", []string{"--set-json", `prices={"gpt-5.5":{"input":1.25,"output":10},"deepseek-*":{"input":0.27}}`,
			"--set-json", `runner.resources={"requests":{"cpu":"1","memory":"2Gi"},"limits":{"memory":"8Gi"}}`,
			"--set", "live.usageInterval=2s", "--set", "live.port=9000", "--set", "aggregateBudgetAdmin=false"}, func(t *testing.T, r rendered) {
			args := r.managerArgs(t)
			for _, want := range []string{`--prices={"deepseek-*":{"input":0.27},"gpt-5.5":{"input":1.25,"output":10}}`,
				"--agent-requests=cpu=1,memory=2Gi", "--agent-limits=memory=8Gi", "--live-usage-interval=2s", "--live-port=9000"} {
				if !slices.Contains(args, want) {
					t.Errorf("manager args %v lack %s", args, want)
				}
			}
			if l := field(r.get(t, "ClusterRole", "ar-manager-budget-admin"), "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-admin"); l != nil {
				t.Errorf("aggregateBudgetAdmin=false still aggregates the budget admin role: %v", l)
			}
		}},
		{"live progress off", []string{"--set", "live.enabled=false", "--set", "networkPolicy.agents.enabled=true", "--set", "networkPolicy.agents.namespaces={ci}"}, func(t *testing.T, r rendered) {
			if args := r.managerArgs(t); !slices.Contains(args, "--live-progress=false") {
				t.Errorf("manager args %v", args)
			}
			if in := field(r.get(t, "NetworkPolicy", "ci/ar-agents"), "spec", "ingress"); in != nil {
				t.Errorf("without live progress the agents still take ingress: %v", in)
			}
		}},
		{"image tags", []string{"--set", "image.tag=1.2.3", "--set", "runner.repository=registry.example.com/agentrun-runner", "--set", "runner.tag=1.2.4"}, func(t *testing.T, r rendered) {
			if img := field(r.get(t, "Deployment", "agentrun-system/ar-manager"), "spec", "template", "spec", "containers", 0, "image"); img != "agentrun-manager:1.2.3" {
				t.Errorf("manager image %v", img)
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--runner-image=registry.example.com/agentrun-runner:1.2.4") {
				t.Errorf("manager args %v", args)
			}
		}},
		{"watchNamespaces", []string{"--set", "watchNamespaces={team-a,team-b}"}, func(t *testing.T, r rendered) {
			if got := r.all("Role"); !slices.Equal(got, []string{"agentrun-system/ar-manager-leader-election", "team-a/ar-manager", "team-b/ar-manager"}) {
				t.Errorf("Roles %v", got)
			}
			if got := r.all("RoleBinding"); !slices.Equal(got, []string{"agentrun-system/ar-manager-leader-election", "team-a/ar-manager", "team-b/ar-manager"}) {
				t.Errorf("RoleBindings %v", got)
			}
			if got := r.all("ClusterRoleBinding"); !slices.Equal(got, []string{"ar-manager-metrics-auth"}) {
				t.Errorf("ClusterRoleBindings %v: only the metrics filter's (TokenReviews and SubjectAccessReviews are cluster-scoped)", got)
			}
			for _, ns := range []string{"team-a", "team-b"} {
				if got := r.get(t, "Role", ns+"/ar-manager")["rules"]; !reflect.DeepEqual(got, generatedRules(t)) {
					t.Errorf("Role in %s: rules %v, want config/rbac/role.yaml's", ns, got)
				}
				b := r.get(t, "RoleBinding", ns+"/ar-manager")
				if s := field(b, "subjects", 0); !reflect.DeepEqual(s, map[string]any{"kind": "ServiceAccount", "name": "ar-manager", "namespace": "agentrun-system"}) {
					t.Errorf("RoleBinding in %s: subject %v", ns, s)
				}
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--watch-namespaces=team-a,team-b") {
				t.Errorf("manager args %v", args)
			}
		}},
		{"metrics plain HTTP", []string{"--set", "metrics.secure=false", "--set", "metrics.port=8080", "--set", "metrics.serviceMonitor.enabled=true"}, func(t *testing.T, r rendered) {
			if got := r.all("ClusterRole"); slices.Contains(got, "ar-manager-metrics-auth") || slices.Contains(got, "ar-manager-metrics-reader") {
				t.Errorf("ClusterRoles %v: no metrics roles without the filter", got)
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--metrics-secure=false") || !slices.Contains(args, "--metrics-bind-address=:8080") {
				t.Errorf("manager args %v", args)
			}
			ep := field(r.get(t, "ServiceMonitor", "agentrun-system/ar-manager-metrics"), "spec", "endpoints", 0).(map[string]any)
			if ep["scheme"] != "http" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
				t.Errorf("ServiceMonitor endpoint %v", ep)
			}
		}},
		{"metrics certificate and ServiceMonitor", []string{"--set", "metrics.certSecret=agentrun-metrics-tls", "--set", "metrics.serviceMonitor.enabled=true",
			"--set", "metrics.serviceMonitor.labels.release=prometheus", "--set", "metrics.serviceMonitor.interval=30s"}, func(t *testing.T, r rendered) {
			if args := r.managerArgs(t); !slices.Contains(args, "--metrics-cert-path=/metrics-certs") {
				t.Errorf("manager args %v", args)
			}
			pod := field(r.get(t, "Deployment", "agentrun-system/ar-manager"), "spec", "template", "spec")
			if s := field(pod, "volumes", 0, "secret", "secretName"); s != "agentrun-metrics-tls" {
				t.Errorf("volume secret %v", s)
			}
			if m := field(pod, "containers", 0, "volumeMounts", 0, "mountPath"); m != "/metrics-certs" {
				t.Errorf("mount %v", m)
			}
			sm := r.get(t, "ServiceMonitor", "agentrun-system/ar-manager-metrics")
			if l := field(sm, "metadata", "labels", "release"); l != "prometheus" {
				t.Errorf("ServiceMonitor labels %v", field(sm, "metadata", "labels"))
			}
			ep := field(sm, "spec", "endpoints", 0).(map[string]any)
			want := map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s", "scheme": "https",
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token", "tlsConfig": map[string]any{"insecureSkipVerify": true}}
			if !reflect.DeepEqual(ep, want) {
				t.Errorf("ServiceMonitor endpoint %v, want %v", ep, want)
			}
			svcLabels := field(r.get(t, "Service", "agentrun-system/ar-manager-metrics"), "metadata", "labels").(map[string]any)
			for k, v := range field(sm, "spec", "selector", "matchLabels").(map[string]any) {
				if svcLabels[k] != v {
					t.Errorf("the ServiceMonitor selects %s=%v, the Service has %v", k, v, svcLabels[k])
				}
			}
		}},
		{"policy off, explicitly", []string{"--set", "policy.enabled=false"}, func(t *testing.T, r rendered) {
			for _, kind := range []string{"AgentRunPolicy", "ValidatingAdmissionPolicyBinding"} {
				if got := r.all(kind); slices.Contains(got, "ar-policy") {
					t.Errorf("%s %v with policy.enabled=false", kind, got)
				}
			}
		}},
		{"policy as config/policy", nil, func(t *testing.T, r rendered) {
			vap := r.get(t, "ValidatingAdmissionPolicy", "ar-policy")
			b, err := os.ReadFile(filepath.Join(root(t), "config", "policy", "admission_policy.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if want := field(fromYAML(t, string(b)), "spec"); !reflect.DeepEqual(vap["spec"], want) {
				t.Errorf("the chart's policy differs from config/policy's:\n%s", asYAML(t, vap["spec"]))
			}
		}},
		{"policy pinned by digest", []string{"--set", "runner.digest=sha256:" + strings.Repeat("ab", 32)}, func(t *testing.T, r rendered) {
			pinned := "agentrun-runner:" + version + "@sha256:" + strings.Repeat("ab", 32)
			if got := field(r.get(t, "AgentRunPolicy", "ar-policy"), "spec", "allowedImages"); !reflect.DeepEqual(got, []any{pinned}) {
				t.Errorf("allowedImages %v, want the pinned runner %s", got, pinned)
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--runner-image="+pinned) {
				t.Errorf("manager args %v: the runner is not pinned", args)
			}
		}},
		{"policy strict with changes", []string{"--set", "policy.preset=strict", "--set", "runner.tag=9.9.9",
			"--set-json", `policy.spec={"allowNetworkFull":true,"allowedServiceAccounts":[],"maxTurns":50,"allowedAddresses":["10.0.0.7:8080"]}`}, func(t *testing.T, r rendered) {
			spec := r.get(t, "AgentRunPolicy", "ar-policy")["spec"].(map[string]any)
			for k, want := range map[string]any{"allowedImages": []any{"agentrun-runner:9.9.9"}, "allowSandboxNone": false, "allowNetworkFull": true,
				"maxTimeout": "2h", "allowedServiceAccounts": []any{}, "maxTurns": float64(50), "allowedAddresses": []any{"10.0.0.7:8080"}} {
				if got := spec[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s %v (%T), want %v", k, got, got, want)
				}
			}
			if spec["deniedEnv"] == nil || spec["deniedLabels"] == nil {
				t.Errorf("strict lost the standard preset's denials:\n%s", asYAML(t, spec))
			}
		}},
		{"policy strict", []string{"--set", "policy.preset=strict"}, func(t *testing.T, r rendered) {
			spec := r.get(t, "AgentRunPolicy", "ar-policy")["spec"].(map[string]any)
			if spec["allowNetworkFull"] != false || spec["maxTimeout"] != "2h" {
				t.Errorf("strict: network full %v, max timeout %v", spec["allowNetworkFull"], spec["maxTimeout"])
			}
		}},
		{"policy custom", []string{"--set", "policy.preset=custom",
			"--set-json", `policy.spec={"allowedRuntimes":["claude-code"],"maxTokens":1000000,"allowedRuntimeClasses":["gvisor"]}`,
			"--set", "policy.namespaceSelector.matchLabels.agentrun\\.dev/policy=enforced", "--set", "policy.validationActions={Warn,Audit}"}, func(t *testing.T, r rendered) {
			want := fromYAML(t, `{allowedRuntimes: [claude-code], maxTokens: 1000000, allowedRuntimeClasses: [gvisor]}`)
			if got := r.get(t, "AgentRunPolicy", "ar-policy")["spec"]; !reflect.DeepEqual(got, want) {
				t.Errorf("spec:\n%s", asYAML(t, got))
			}
			spec := r.get(t, "ValidatingAdmissionPolicyBinding", "ar-policy")["spec"]
			if sel := field(spec, "matchResources", "namespaceSelector"); !reflect.DeepEqual(sel, fromYAML(t, `{matchLabels: {agentrun.dev/policy: enforced}}`)) {
				t.Errorf("namespaceSelector %v", sel)
			}
			if a := field(spec, "validationActions"); !reflect.DeepEqual(a, []any{"Warn", "Audit"}) {
				t.Errorf("validationActions %v", a)
			}
		}},
		{"defaults.network", []string{"--set-json", `defaults.network={"mode":"Custom","allowHosts":["api.anthropic.com:443"]}`}, func(t *testing.T, r rendered) {
			network := field(r.get(t, "CustomResourceDefinition", "agentruns.agentrun.dev"), "spec", "versions", 0, "schema", "openAPIV3Schema",
				"properties", "spec", "properties", "network").(map[string]any)
			if !reflect.DeepEqual(network["default"], fromYAML(t, `{mode: Custom, allowHosts: [api.anthropic.com:443]}`)) {
				t.Errorf("spec.network default %v", network["default"])
			}
			if d := field(network, "properties", "mode", "default"); d != "Custom" {
				t.Errorf("spec.network.mode default %v", d)
			}
		}},
		{"manager NetworkPolicy", []string{"--set", "networkPolicy.manager.enabled=true",
			"--set-json", `networkPolicy.manager.apiServer=[{"cidr":"10.0.0.10/32","port":6443}]`,
			"--set-json", `networkPolicy.manager.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`}, func(t *testing.T, r rendered) {
			np := r.get(t, "NetworkPolicy", "agentrun-system/ar-manager")
			want := fromYAML(t, `
podSelector: {matchLabels: {app.kubernetes.io/name: agentrun, app.kubernetes.io/instance: ar, app.kubernetes.io/component: manager}}
policyTypes: [Ingress, Egress]
ingress:
  - ports: [{port: metrics, protocol: TCP}]
    from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  - ports: [{port: 8081, protocol: TCP}]
egress:
  - to: [{namespaceSelector: {}, podSelector: {matchLabels: {app.kubernetes.io/managed-by: agentrun, app.kubernetes.io/component: agent}}}]
    ports: [{port: 8788, protocol: TCP}]
  - to: [{ipBlock: {cidr: 10.0.0.10/32}}]
    ports: [{port: 6443, protocol: TCP}]
  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, podSelector: {matchLabels: {k8s-app: kube-dns}}}]
    ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]
`)
			if !reflect.DeepEqual(np["spec"], want) {
				t.Errorf("manager NetworkPolicy:\n%s", asYAML(t, np["spec"]))
			}
		}},
		{"agents NetworkPolicy", []string{"--set", "watchNamespaces={team-a,team-b}", "--set", "networkPolicy.agents.enabled=true",
			"--set-json", `networkPolicy.agents.allowedEgress=[{"cidr":"203.0.113.0/24","ports":[443]},{"cidr":"10.8.0.5/32","ports":[8080,8443]}]`}, func(t *testing.T, r rendered) {
			if got := r.all("NetworkPolicy"); !slices.Equal(got, []string{"team-a/ar-agents", "team-b/ar-agents"}) {
				t.Errorf("NetworkPolicies %v", got)
			}
			want := fromYAML(t, `
podSelector: {matchLabels: {app.kubernetes.io/managed-by: agentrun, app.kubernetes.io/component: agent}}
policyTypes: [Ingress, Egress]
ingress:
  - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: agentrun-system}},
      podSelector: {matchLabels: {app.kubernetes.io/name: agentrun, app.kubernetes.io/instance: ar, app.kubernetes.io/component: manager}}}]
    ports: [{port: 8788, protocol: TCP}]
egress:
  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, podSelector: {matchLabels: {k8s-app: kube-dns}}}]
    ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]
  - to: [{ipBlock: {cidr: 203.0.113.0/24}}]
    ports: [{port: 443, protocol: TCP}]
  - to: [{ipBlock: {cidr: 10.8.0.5/32}}]
    ports: [{port: 8080, protocol: TCP}, {port: 8443, protocol: TCP}]
`)
			if got := r.get(t, "NetworkPolicy", "team-b/ar-agents")["spec"]; !reflect.DeepEqual(got, want) {
				t.Errorf("agents NetworkPolicy:\n%s", asYAML(t, got))
			}
		}},
		{"agents NetworkPolicy in listed namespaces", []string{"--set", "networkPolicy.agents.enabled=true", "--set", "networkPolicy.agents.namespaces={ci}"}, func(t *testing.T, r rendered) {
			if got := r.all("NetworkPolicy"); !slices.Equal(got, []string{"ci/ar-agents"}) {
				t.Errorf("NetworkPolicies %v", got)
			}
			if got := field(r.get(t, "NetworkPolicy", "ci/ar-agents"), "spec", "egress"); len(got.([]any)) != 1 {
				t.Errorf("egress %v: DNS only when nothing else is listed", got)
			}
		}},
		{"telemetry off by default", nil, func(t *testing.T, r rendered) {
			for _, a := range r.managerArgs(t) {
				if strings.HasPrefix(a, "--otlp-") {
					t.Errorf("manager arg %s without telemetry.otlp.endpoint", a)
				}
			}
		}},
		{"telemetry: the manager's flags, the headers from a Secret, the agents' egress to the collector", []string{
			"--set", "telemetry.otlp.endpoint=http://otel.obs:4317", "--set", "telemetry.otlp.protocol=grpc",
			"--set", "telemetry.otlp.headersSecret.name=otlp", "--set", "telemetry.otlp.headersSecret.key=headers",
			"--set", "telemetry.otlp.resourceAttributes=team=ml", "--set", "telemetry.otlp.semconvOptIn=gen_ai_latest_experimental",
			"--set", "networkPolicy.agents.enabled=true", "--set", "networkPolicy.agents.namespaces={ci}",
			"--set-json", `telemetry.otlp.networkPolicy={"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"obs"}}}],"ports":[4317]}`},
			func(t *testing.T, r rendered) {
				args := r.managerArgs(t)
				for _, want := range []string{"--otlp-endpoint=http://otel.obs:4317", "--otlp-protocol=grpc", "--otlp-service-name=agentrun",
					"--otlp-resource-attributes=team=ml", "--otlp-semconv-opt-in=gen_ai_latest_experimental", "--otlp-capture-content=false"} {
					if !slices.Contains(args, want) {
						t.Errorf("manager args %v lack %s", args, want)
					}
				}
				env := asYAML(t, field(r.get(t, "Deployment", "agentrun-system/ar-manager"), "spec", "template", "spec", "containers", 0, "env"))
				if !strings.Contains(env, "AGENTRUN_OTLP_HEADERS") || !strings.Contains(env, "name: otlp") || !strings.Contains(env, "key: headers") {
					t.Errorf("manager env:\n%s", env)
				}
				egress := field(r.get(t, "NetworkPolicy", "ci/ar-agents"), "spec", "egress").([]any)
				want := fromYAML(t, `{to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: obs}}}], ports: [{port: 4317, protocol: TCP}]}`)
				if !slices.ContainsFunc(egress, func(e any) bool { return reflect.DeepEqual(e, want) }) {
					t.Errorf("agents egress %s lacks the collector", asYAML(t, egress))
				}
			}},
		{"sandbox profiles: the DaemonSet by default", nil, func(t *testing.T, r rendered) {
			ds := r.get(t, "DaemonSet", "agentrun-system/ar-node-profiles")
			pod := field(ds, "spec", "template", "spec")
			if p := field(pod, "volumes", 0, "hostPath", "path"); p != "/var/lib/kubelet/seccomp" {
				t.Errorf("hostPath %v", p)
			}
			sc := field(pod, "containers", 0, "securityContext").(map[string]any)
			if sc["privileged"] != nil || !reflect.DeepEqual(sc["capabilities"], map[string]any{"drop": []any{"ALL"}}) {
				t.Errorf("the seccomp-only installer needs no privilege: %v", sc)
			}
			if field(pod, "automountServiceAccountToken") != false {
				t.Error("the installer must not hold an API token")
			}
			args := r.managerArgs(t)
			if !slices.Contains(args, "--sandbox-seccomp-profile=localhost/agentrun/bwrap.json") {
				t.Errorf("manager args %v", args)
			}
			for _, a := range args {
				if strings.HasPrefix(a, "--sandbox-apparmor-profile") {
					t.Errorf("AppArmor set by default: %s (the kubelet refuses it on nodes without AppArmor)", a)
				}
			}
		}},
		{"sandbox profiles: AppArmor, another kubelet root", []string{"--set", "sandboxProfiles.appArmor.enabled=true", "--set", "sandboxProfiles.kubeletRootDir=/data/kubelet/"}, func(t *testing.T, r rendered) {
			pod := field(r.get(t, "DaemonSet", "agentrun-system/ar-node-profiles"), "spec", "template", "spec")
			if p := field(pod, "volumes", 0, "hostPath", "path"); p != "/data/kubelet/seccomp" {
				t.Errorf("hostPath %v", p)
			}
			if field(pod, "containers", 0, "securityContext", "privileged") != true || !slices.Contains(asStrings(field(pod, "containers", 0, "args")), "--apparmor-host-root=/host/root") {
				t.Errorf("AppArmor loading needs the node's root, privileged: %v", field(pod, "containers", 0))
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--sandbox-apparmor-profile=localhost/agentrun-bwrap") {
				t.Errorf("manager args %v", args)
			}
		}},
		{"sandbox profiles: Security Profiles Operator", []string{"--set", "sandboxProfiles.installer=security-profiles-operator"}, func(t *testing.T, r rendered) {
			if got := r.all("DaemonSet"); len(got) > 0 {
				t.Errorf("DaemonSets %v with the operator", got)
			}
			sp := r.get(t, "SeccompProfile", "agentrun-system/agentrun-bwrap")
			b, err := os.ReadFile(filepath.Join(root(t), "charts", "agentrun", "files", "profiles", "agentrun-bwrap.json"))
			if err != nil {
				t.Fatal(err)
			}
			want := fromYAML(t, string(b)).(map[string]any)
			delete(want, "defaultErrnoRet") // the operator's CRD has none; its ERRNO is EPERM, the same
			if !reflect.DeepEqual(sp["spec"], any(want)) {
				t.Errorf("SeccompProfile spec differs from files/profiles/agentrun-bwrap.json:\n%s", asYAML(t, sp["spec"]))
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--sandbox-seccomp-profile=localhost/operator/agentrun-system/agentrun-bwrap.json") {
				t.Errorf("manager args %v", args)
			}
		}},
		{"sandbox profiles in a namespace of their own", []string{"--set", "sandboxProfiles.namespace=agentrun-node-profiles"}, func(t *testing.T, r rendered) {
			ns := r.get(t, "Namespace", "agentrun-node-profiles")
			if field(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "privileged" {
				t.Errorf("namespace labels %v", field(ns, "metadata", "labels"))
			}
			r.get(t, "DaemonSet", "agentrun-node-profiles/ar-node-profiles")
			if got := r.all("DaemonSet"); !slices.Equal(got, []string{"agentrun-node-profiles/ar-node-profiles"}) {
				t.Errorf("DaemonSets %v", got)
			}
		}},
		{"sandbox profiles in an existing namespace", []string{"--set", "sandboxProfiles.namespace=profiles", "--set", "sandboxProfiles.createNamespace=false",
			"--set", "sandboxProfiles.installer=security-profiles-operator"}, func(t *testing.T, r rendered) {
			if got := r.all("Namespace"); len(got) > 0 {
				t.Errorf("namespaces %v with createNamespace=false", got)
			}
			r.get(t, "SeccompProfile", "profiles/agentrun-bwrap")
			if args := r.managerArgs(t); !slices.Contains(args, "--sandbox-seccomp-profile=localhost/operator/profiles/agentrun-bwrap.json") {
				t.Errorf("manager args %v: the operator's path names the profile's namespace", args)
			}
		}},
		{"sandbox profiles: no guard", []string{"--set", "sandboxProfiles.guard=false"}, func(t *testing.T, r rendered) {
			if got := r.all("ValidatingAdmissionPolicy"); slices.Contains(got, "ar-sandbox-profiles") {
				t.Errorf("policies %v with the guard off", got)
			}
		}},
		{"sandbox profiles: nothing to guard with RuntimeDefault", []string{"--set", "sandboxProfiles.seccompProfile=runtime-default"}, func(t *testing.T, r rendered) {
			if got := r.all("ValidatingAdmissionPolicy"); slices.Contains(got, "ar-sandbox-profiles") {
				t.Errorf("policies %v without a Localhost profile", got)
			}
		}},
		{"sandbox profiles: installed by the admin, profile named", []string{"--set", "sandboxProfiles.installer=none", "--set", "sandboxProfiles.seccompProfile=localhost/profiles/bwrap.json"}, func(t *testing.T, r rendered) {
			if got := append(r.all("DaemonSet"), r.all("SeccompProfile")...); len(got) > 0 {
				t.Errorf("installers %v with none", got)
			}
			if args := r.managerArgs(t); !slices.Contains(args, "--sandbox-seccomp-profile=localhost/profiles/bwrap.json") {
				t.Errorf("manager args %v", args)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, render(t, tc.args...)) })
	}
}

func asStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestChartRefusesValues: values that cannot work are refused when the
// chart renders, with a message that says what to set (the schema's, or
// the templates' own where a schema cannot say it).
func TestChartRefusesValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown value", []string{"--set", "policy.enable=true"}, "additional properties 'enable' not allowed"},
		{"unknown preset", []string{"--set", "policy.preset=lax"}, "value must be one of 'standard', 'strict', 'custom'"},
		{"digest that is no digest", []string{"--set", "runner.digest=latest"}, "/runner/digest"},
		{"digest beside an image that has one", []string{"--set", "runner.image=r@sha256:" + strings.Repeat("a", 64)}, "/runner/image"},
		{"private address without a port", []string{"--set-json", `policy.spec={"allowedAddresses":["10.0.0.7"]}`}, "/policy/spec/allowedAddresses/0"},
		{"seccomp profile in another syntax in the policy", []string{"--set-json", `policy.spec={"allowedSeccompProfiles":["Localhost"]}`}, "/policy/spec/allowedSeccompProfiles/0"},
		{"unknown policy field", []string{"--set", "policy.spec.maxTime=1h"}, "additional properties 'maxTime' not allowed"},
		{"bad duration", []string{"--set", "policy.spec.maxTimeout=2 hours"}, "/policy/spec/maxTimeout"},
		{"Deny with Warn", []string{"--set", "policy.validationActions={Deny,Warn}"}, "/policy/validationActions"},
		{"custom network without hosts", []string{"--set", "defaults.network.mode=Custom"}, "missing property 'allowHosts'"},
		{"an IP address without a port", []string{"--set-json", `defaults.network={"mode":"Custom","allowHosts":["10.0.0.5"]}`}, "/defaults/network/allowHosts/0"},
		{"hosts without custom", []string{"--set", "defaults.network.allowHosts={a.example:443}"}, "/defaults/network"},
		{"manager NetworkPolicy without the API server", []string{"--set", "networkPolicy.manager.enabled=true"}, "/networkPolicy/manager/apiServer"},
		{"agents NetworkPolicy without namespaces", []string{"--set", "networkPolicy.agents.enabled=true"}, "set networkPolicy.agents.namespaces or watchNamespaces"},
		{"egress without ports", []string{"--set", "networkPolicy.agents.namespaces={ci}", "--set-json", `networkPolicy.agents.allowedEgress=[{"cidr":"10.0.0.0/8"}]`}, "missing property 'ports'"},
		{"telemetry endpoint without a scheme", []string{"--set", "telemetry.otlp.endpoint=otel:4318"}, "/telemetry/otlp/endpoint"},
		{"telemetry protocol", []string{"--set", "telemetry.otlp.endpoint=http://otel:4318", "--set", "telemetry.otlp.protocol=http/json"}, "/telemetry/otlp/protocol"},
		{"agents NetworkPolicy without the collector", []string{"--set", "telemetry.otlp.endpoint=http://otel:4318", "--set", "networkPolicy.agents.enabled=true",
			"--set", "networkPolicy.agents.namespaces={ci}"}, "needs telemetry.otlp.networkPolicy.to"},
		{"headers Secret without a key", []string{"--set", "telemetry.otlp.endpoint=http://otel:4318", "--set", "telemetry.otlp.headersSecret.name=s"}, "needs both name and key"},
		{"certificate without HTTPS", []string{"--set", "metrics.secure=false", "--set", "metrics.certSecret=tls"}, "/metrics/certSecret"},
		{"negative price", []string{"--set-json", `prices={"m":{"input":-1}}`}, "/prices/m/input"},
		{"unknown price kind", []string{"--set-json", `prices={"m":{"inputs":1}}`}, "additional properties 'inputs' not allowed"},
		{"bad resource quantity", []string{"--set", "runner.resources.requests.cpu=lots"}, "/runner/resources/requests/cpu"},
		{"bad live interval", []string{"--set", "live.usageInterval=soon"}, "/live/usageInterval"},
		{"AppArmor through the Security Profiles Operator", []string{"--set", "sandboxProfiles.installer=security-profiles-operator", "--set", "sandboxProfiles.appArmor.enabled=true"}, "cannot express bubblewrap's user namespaces"},
		{"unknown profile installer", []string{"--set", "sandboxProfiles.installer=ansible"}, "/sandboxProfiles/installer"},
		{"seccomp profile in another syntax", []string{"--set", "sandboxProfiles.seccompProfile=Localhost"}, "/sandboxProfiles/seccompProfile"},
		{"relative kubelet root", []string{"--set", "sandboxProfiles.kubeletRootDir=var/lib/kubelet"}, "/sandboxProfiles/kubeletRootDir"},
		{"ServiceMonitor without Service", []string{"--set", "metrics.service=false", "--set", "metrics.serviceMonitor.enabled=true"}, "metrics.serviceMonitor.enabled needs metrics.service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(helmBin(t), append([]string{"template", "ar", "charts/agentrun", "--kube-version", "1.34.0"}, tc.args...)...)
			cmd.Dir = root(t)
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("helm template %v: %v, want an error with %q:\n%.1000s", tc.args, err, tc.want, out)
			}
		})
	}
}

// TestPolicyValuesMatchTheCRD: policy.spec in values.schema.json offers
// exactly the AgentRunPolicy's fields, so that a field added to the API is
// settable through the chart (and a removed one is refused).
func TestPolicyValuesMatchTheCRD(t *testing.T) {
	var schema struct {
		Properties struct {
			Policy struct {
				Properties struct {
					Spec struct {
						Properties map[string]any `json:"properties"`
					} `json:"spec"`
				} `json:"properties"`
			} `json:"policy"`
		} `json:"properties"`
	}
	b, err := os.ReadFile(filepath.Join(root(t), "charts", "agentrun", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(root(t), "config", "crd", "bases", "agentrun.dev_agentrunpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fields := field(fromYAML(t, string(crd)), "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties").(map[string]any)
	var inCRD, inValues []string
	for k := range fields {
		inCRD = append(inCRD, k)
	}
	for k := range schema.Properties.Policy.Properties.Spec.Properties {
		inValues = append(inValues, k)
	}
	slices.Sort(inCRD)
	slices.Sort(inValues)
	if !slices.Equal(inCRD, inValues) {
		t.Errorf("values.schema.json policy.spec has %v\nthe AgentRunPolicy CRD has %v", inValues, inCRD)
	}
}
