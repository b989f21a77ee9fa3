package charts

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestReview18SubmodulesBypassRepositories: allowedGitRepositories bounds
// spec.git.repository, but a submodule's URL is the repository's content
// (an agent of an earlier run may have pushed a .gitmodules to its
// branch), cloned by the runner from the Pod's network, with the token on
// the repository's host. A policy that allows only some repositories must
// refuse spec.git.submodules; one that allows any https repository may
// allow it.
func TestReview18SubmodulesBypassRepositories(t *testing.T) {
	isolateHelm(t)
	ctx := context.Background()
	c := startCluster(t)
	k, _ := policyClient(t, c.cfg)
	if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policed", Labels: map[string]string{"agentrun.dev/policy": "strict"}}}); err != nil {
		t.Fatal(err)
	}
	runner := "agentrun-runner:" + appVersion(t)
	values := func(repos string) []string {
		return []string{"--set", "policy.preset=strict", "--set", `policy.namespaceSelector.matchLabels.agentrun\.dev/policy=strict`,
			"--set-json", `policy.spec={"allowedRuntimes":["claude-code"],"allowedImages":["` + runner + `"],"maxTurns":50,"maxTokens":2000000,` +
				`"allowedSecrets":["git"],"allowedGitRepositories":[` + repos + `]}`,
			"--set-json", `defaults.network={"mode":"Custom","allowHosts":["api.anthropic.com:443"]}`}
	}
	c.helm(append([]string{"install", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--create-namespace"},
		values(`"https://git.example.com/team/app"`)...)...)
	withSubmodules := func(s *v1alpha1.AgentRunSpec) {
		gitRun("https://git.example.com/team/app", nil)(s)
		s.Git.Submodules = true
	}
	waitFor(t, "the policy is loaded", 90*time.Second, func() string {
		return refusedWith(tryCreate(ctx, k, agentRun("policed", gitRun("https://git.example.com/other/app", nil))), "is not allowed")
	})
	if err := tryCreate(ctx, k, agentRun("policed", gitRun("https://git.example.com/team/app", nil))); err != nil {
		t.Fatalf("the allowed repository without submodules is refused: %v", err)
	}
	if msg := refusedWith(tryCreate(ctx, k, agentRun("policed", withSubmodules)), "spec.git.submodules is not allowed by"); msg != "" {
		t.Errorf("submodules under a policy of one repository: %s; want a refusal", msg)
	}

	// A policy that allows any https repository allows its submodules.
	c.helm(append([]string{"upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system"}, values(`"https://*"`)...)...)
	waitFor(t, "submodules under a policy of any https repository", 30*time.Second, func() string {
		if err := tryCreate(ctx, k, agentRun("policed", withSubmodules)); err != nil {
			return err.Error()
		}
		return ""
	})
}
