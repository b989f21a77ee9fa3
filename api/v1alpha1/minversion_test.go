package v1alpha1_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// minKubernetes is the oldest Kubernetes minor the CRD and the Pod work on,
// as Chart.yaml (kubeVersion) and docs/kubernetes/install.md state it. The Pod needs 1.29
// (native sidecars); the CRD needs 1.31: its isIP() rule uses CEL's IP
// library, introduced into the API server's CEL environment at
// compatibility version 1.30, and an API server compiles the rules of a
// CRD being created or updated in the environment of its compatibility
// version, which is one minor below its own
// (environment.DefaultCompatibilityVersion) so that it can be rolled back.
// A 1.30 API server refuses the CRD: "undeclared reference to 'isIP'".
const minKubernetes = "1.31"

// TestCRDRulesCompileOnMinimumKubernetes compiles every
// x-kubernetes-validations rule of the generated CRD as an API server of
// minKubernetes compiles a new CRD's rules (its new-expressions CEL
// environment, strict cost), checks each rule's estimated cost against the
// API server's limit, and checks that one minor lower refuses the CRD, so
// minKubernetes is the true minimum, neither too old nor needlessly new.
func TestCRDRulesCompileOnMinimumKubernetes(t *testing.T) {
	crd := generatedCRD(t, "agentrun.dev_agentruns.yaml")
	minimum := version.MustParse(minKubernetes + ".0")
	compat := func(server *version.Version) *version.Version {
		return version.MajorMinor(server.Major(), server.Minor()-1)
	}

	rules, errs := compileCRDRules(crd, compat(minimum))
	if len(rules) == 0 {
		t.Fatal("no x-kubernetes-validations rule found in the CRD")
	}
	for _, e := range errs {
		t.Errorf("Kubernetes %s refuses the CRD: %s", minKubernetes, e)
	}
	t.Logf("%d rules compile on Kubernetes %s", len(rules), minKubernetes)

	older := version.MajorMinor(minimum.Major(), minimum.Minor()-1)
	_, errs = compileCRDRules(crd, compat(older))
	if len(errs) == 0 {
		t.Errorf("every rule compiles on Kubernetes %s too: lower minKubernetes, Chart.yaml and docs/kubernetes/install.md", older)
	}
	for _, e := range errs {
		t.Logf("Kubernetes %s: %s", older, e)
	}
}

// TestPolicyCRDRulesCompileOnMinimumKubernetes: the AgentRunPolicy CRD's
// rules compile on the same minimum (config/policy_test.go compiles the
// ValidatingAdmissionPolicy that reads it).
func TestPolicyCRDRulesCompileOnMinimumKubernetes(t *testing.T) {
	minimum := version.MustParse(minKubernetes + ".0")
	rules, errs := compileCRDRules(generatedCRD(t, "agentrun.dev_agentrunpolicies.yaml"), version.MajorMinor(minimum.Major(), minimum.Minor()-1))
	if len(rules) == 0 {
		t.Fatal("no x-kubernetes-validations rule found in the AgentRunPolicy CRD")
	}
	for _, e := range errs {
		t.Errorf("Kubernetes %s refuses the AgentRunPolicy CRD: %s", minKubernetes, e)
	}
}

// TestBudgetCRDRulesCompileOnMinimumKubernetes: so do the AgentBudget
// CRD's.
func TestBudgetCRDRulesCompileOnMinimumKubernetes(t *testing.T) {
	minimum := version.MustParse(minKubernetes + ".0")
	rules, errs := compileCRDRules(generatedCRD(t, "agentrun.dev_agentbudgets.yaml"), version.MajorMinor(minimum.Major(), minimum.Minor()-1))
	if len(rules) == 0 {
		t.Fatal("no x-kubernetes-validations rule found in the AgentBudget CRD")
	}
	for _, e := range errs {
		t.Errorf("Kubernetes %s refuses the AgentBudget CRD: %s", minKubernetes, e)
	}
}

// TestMinimumKubernetesIsStated: Chart.yaml's kubeVersion and
// docs/kubernetes/install.md name the same minimum as the test above proves.
func TestMinimumKubernetesIsStated(t *testing.T) {
	root := filepath.Join("..", "..")
	chart, err := os.ReadFile(filepath.Join(root, "charts", "agentrun", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil {
		t.Fatal(err)
	}
	if want := ">=" + minKubernetes + ".0-0"; c.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q", c.KubeVersion, want)
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Kubernetes " + minKubernetes + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("docs/kubernetes/install.md does not say %q", want)
	}
}

func generatedCRD(t *testing.T, file string) *apiextensions.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, v1); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, crd, nil); err != nil {
		t.Fatal(err)
	}
	return crd
}

// compileCRDRules compiles every rule of every version's schema in the CEL
// environment of compatibility version compat, as the API server validates
// a CRD (apiextensions validation: the CEL type of each node from its
// schema, cel.Compile with the per-call limit, the estimated cost times the
// node's cardinality against StaticEstimatedCostLimit). It returns the
// rules and what was wrong with them.
func compileCRDRules(crd *apiextensions.CustomResourceDefinition, compat *version.Version) (rules []string, errs []string) {
	envSet := environment.MustBaseEnvSet(compat)
	// The internal form holds a schema shared by all versions in
	// spec.validation, else one per version.
	schemas := map[string]*apiextensions.CustomResourceValidation{"*": crd.Spec.Validation}
	for _, v := range crd.Spec.Versions {
		schemas[v.Name] = v.Schema
	}
	for name, v := range schemas {
		if v == nil || v.OpenAPIV3Schema == nil {
			continue
		}
		s := v.OpenAPIV3Schema
		walkSchema(s, validation.RootCELContext(s), name, func(node *apiextensions.JSONSchemaProps, ctx *validation.CELSchemaContext, path string) {
			for _, r := range node.XValidations {
				rules = append(rules, path+": "+r.Rule)
			}
			ti, err := ctx.TypeInfo()
			if err != nil || ti == nil {
				errs = append(errs, fmt.Sprintf("%s: no CEL type: %v", path, err))
				return
			}
			results, err := cel.Compile(ti.Schema, ti.DeclType, celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", path, err))
				return
			}
			for i, res := range results {
				rule := node.XValidations[i].Rule
				if res.Error != nil {
					errs = append(errs, fmt.Sprintf("%s: rule %q: %s", path, rule, res.Error.Detail))
					continue
				}
				cardinality := res.MaxCardinality
				if ctx.MaxCardinality != nil {
					cardinality = *ctx.MaxCardinality
				}
				cost := res.MaxCost
				if cost > 0 && cardinality > math.MaxUint64/cost {
					cost = math.MaxUint64
				} else {
					cost *= cardinality
				}
				if cost > validation.StaticEstimatedCostLimit {
					errs = append(errs, fmt.Sprintf("%s: rule %q: estimated cost %d exceeds the API server's limit %d",
						path, rule, cost, validation.StaticEstimatedCostLimit))
				}
			}
		})
	}
	return rules, errs
}

// walkSchema calls visit for every schema node that has rules, in a fixed
// order.
func walkSchema(s *apiextensions.JSONSchemaProps, ctx *validation.CELSchemaContext, path string,
	visit func(*apiextensions.JSONSchemaProps, *validation.CELSchemaContext, string)) {
	if len(s.XValidations) > 0 {
		visit(s, ctx, path)
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		walkSchema(&p, ctx.ChildPropertyContext(&p, name), path+"."+name, visit)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(s.Items.Schema, ctx.ChildItemsContext(s.Items.Schema), path+"[*]", visit)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(s.AdditionalProperties.Schema, ctx.ChildAdditionalPropertiesContext(s.AdditionalProperties.Schema), path+"{*}", visit)
	}
}
