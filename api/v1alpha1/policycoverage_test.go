package v1alpha1_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// crdSpec is the spec schema of a generated CRD of config/crd/bases.
func crdSpec(t *testing.T, file string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
}

// children are the properties of an object, or of the objects of a list.
func children(s apiextensionsv1.JSONSchemaProps) map[string]apiextensionsv1.JSONSchemaProps {
	if len(s.Properties) > 0 {
		return s.Properties
	}
	if s.Items != nil && s.Items.Schema != nil {
		return s.Items.Schema.Properties
	}
	return nil
}

// TestPolicyCoversEverySpecField: every field of the AgentRun spec, as the
// CRD's schema has it, is classified in v1alpha1.PolicyCoverage (itself,
// or through all its children), every classified path exists, every policy
// field named exists in the AgentRunPolicy CRD and is read by the admission
// policy, and every AgentRunPolicy field is named by some entry.
func TestPolicyCoversEverySpecField(t *testing.T) {
	seen := map[string]bool{}
	var walk func(path string, s apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
		seen[path] = true
		if _, ok := v1alpha1.PolicyCoverage[path]; ok {
			return
		}
		kids := children(s)
		if len(kids) == 0 {
			t.Errorf("%s is neither covered by the admin policy nor listed as harmless: add it to v1alpha1.PolicyCoverage "+
				"(api/v1alpha1/policycoverage.go), with the AgentRunPolicy field that bounds it or the reason none needs to", path)
			return
		}
		for k, v := range kids {
			walk(path+"."+k, v)
		}
	}
	walk("spec", crdSpec(t, "agentrun.dev_agentruns.yaml"))

	policyFields := crdSpec(t, "agentrun.dev_agentrunpolicies.yaml").Properties
	vap, err := os.ReadFile(filepath.Join("..", "..", "config", "policy", "admission_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	var paths []string
	for p := range v1alpha1.PolicyCoverage {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		c := v1alpha1.PolicyCoverage[p]
		if !seen[p] {
			t.Errorf("v1alpha1.PolicyCoverage lists %s, which the AgentRun CRD does not have (renamed or removed?)", p)
		}
		if c.Why == "" {
			t.Errorf("%s: say why (Coverage.Why)", p)
		}
		for _, f := range c.Policy {
			named[f] = true
			if _, ok := policyFields[f]; !ok {
				t.Errorf("%s: the AgentRunPolicy has no field %s", p, f)
			}
			if !strings.Contains(string(vap), "params.spec."+f) {
				t.Errorf("%s: config/policy/admission_policy.yaml never reads params.spec.%s", p, f)
			}
		}
	}
	for f := range policyFields {
		if !named[f] {
			t.Errorf("the AgentRunPolicy field %s bounds no AgentRun field in v1alpha1.PolicyCoverage", f)
		}
	}
}
