package controllers

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/podcontract"
)

func resources(requests, limits map[string]string) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	for name, q := range requests {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	for name, q := range limits {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	return r
}

// TestAgentResources: the manager's default requests and limits (the
// chart's runner.resources) go on every agent container, so that a queue
// such as Kueue counts the run; a run's own values win per resource, and a
// default that would make the Pod invalid next to them is left out.
func TestAgentResources(t *testing.T) {
	defaults := resources(map[string]string{"cpu": "500m", "memory": "1Gi"}, map[string]string{"memory": "4Gi"})
	tests := []struct {
		name string
		own  *corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{
		{"none of its own", nil, defaults},
		{"its own cpu request", ptr.To(resources(map[string]string{"cpu": "2"}, nil)),
			resources(map[string]string{"cpu": "2", "memory": "1Gi"}, map[string]string{"memory": "4Gi"})},
		{"a memory limit below the default request", ptr.To(resources(nil, map[string]string{"memory": "512Mi"})),
			resources(map[string]string{"cpu": "500m"}, map[string]string{"memory": "512Mi"})},
		{"a memory limit above the default request", ptr.To(resources(nil, map[string]string{"memory": "8Gi"})),
			resources(map[string]string{"cpu": "500m", "memory": "1Gi"}, map[string]string{"memory": "8Gi"})},
		{"a memory request above the default limit", ptr.To(resources(map[string]string{"memory": "6Gi"}, nil)),
			resources(map[string]string{"cpu": "500m", "memory": "6Gi"}, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := newRun("r", func(s *v1alpha1.AgentRunSpec) {
				if tt.own != nil {
					s.PodOverrides = &v1alpha1.PodOverrides{Resources: tt.own}
				}
			})
			got := BuildJob(run, JobConfig{RunnerImage: "runner:1", AgentResources: defaults}).Spec.Template.Spec.Containers[0].Resources
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("agent resources\n got %v\nwant %v", got, tt.want)
			}
		})
	}
	if got := BuildJob(newRun("r", nil), JobConfig{RunnerImage: "runner:1"}).Spec.Template.Spec.Containers[0].Resources; !reflect.DeepEqual(got, corev1.ResourceRequirements{}) {
		t.Errorf("without defaults the agent container gets %v", got)
	}
}

// TestSidecarServesProgress: the events sidecar serves the live progress
// on the port the manager reads from the Pod spec, with the runner's meter
// file when the run has credentials (whose model calls the proxy meters).
func TestSidecarServesProgress(t *testing.T) {
	plain := BuildJob(newRun("r", nil), JobConfig{RunnerImage: "runner:1", ProgressPort: 9100}).Spec.Template.Spec
	ev := plain.InitContainers[0]
	if !slices.Equal(ev.Args, []string{"tail", "--linger", "60s", "--progress-addr", ":9100", podcontract.EventsFile}) {
		t.Errorf("sidecar args %q", ev.Args)
	}
	if len(ev.Ports) != 1 || ev.Ports[0].Name != "progress" || ev.Ports[0].ContainerPort != 9100 {
		t.Errorf("sidecar ports %+v", ev.Ports)
	}
	withCreds := BuildJob(newRun("r", func(s *v1alpha1.AgentRunSpec) {
		s.Credentials = []v1alpha1.Credential{{Name: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com:443"},
			ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
	}), JobConfig{RunnerImage: "runner:1"}).Spec.Template.Spec
	args := withCreds.InitContainers[0].Args
	if i := slices.Index(args, "--meter-file"); i < 0 || args[i+1] != podcontract.MeterFile || args[len(args)-1] != podcontract.EventsFile {
		t.Errorf("sidecar args with credentials %q", args)
	}
	if i := slices.Index(withCreds.Containers[0].Args, "--meter-file"); i < 0 || withCreds.Containers[0].Args[i+1] != podcontract.MeterFile {
		t.Errorf("the runner does not keep the meter file: %q", withCreds.Containers[0].Args)
	}
	// The document's address comes from the Pod: its IP and the port.
	pod := &corev1.Pod{Spec: withCreds}
	if u := progressURL(pod); u != "" {
		t.Errorf("a Pod without an IP has progress at %q", u)
	}
	pod.Status.PodIP = "10.1.2.3"
	if u := progressURL(pod); u != "http://10.1.2.3:8788/progress" {
		t.Errorf("progress URL %q", u)
	}
	pod.Spec.InitContainers[0].Ports = nil
	if u := progressURL(pod); u != "" {
		t.Errorf("a Pod whose sidecar declares no port (an older manager's) has progress at %q", u)
	}
}
