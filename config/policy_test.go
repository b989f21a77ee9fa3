package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"sigs.k8s.io/yaml"
)

// admissionPolicy is config/policy's ValidatingAdmissionPolicy (the chart's
// files/admission-policy.yaml is a copy of it).
func admissionPolicy(t *testing.T) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("policy", "admission_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// minimumKubernetes is the chart's kubeVersion floor (">=1.31.0-0"), which
// api/v1alpha1's TestMinimumKubernetesIsStated ties to the CRD's needs.
func minimumKubernetes(t *testing.T) *version.Version {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "charts", "agentrun", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^kubeVersion: *"?>=(\d+)\.(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Chart.yaml has no kubeVersion >=X.Y")
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return version.MajorMinor(uint(major), uint(minor))
}

// TestAdmissionPolicyCompilesOnMinimumKubernetes compiles every variable,
// validation and message expression of the policy twice in the CEL
// environment of the chart's minimum Kubernetes (an API server compiles
// new expressions at its compatibility version, one minor below its own):
// untyped, exactly as that API server validates a new
// ValidatingAdmissionPolicy (a failure there refuses the policy), and
// typed against the AgentRun and AgentRunPolicy schemas, as its type
// checker does, so a misspelt field or a wrong type fails here instead of
// surfacing as a runtime error (and, with failurePolicy Fail, a refused
// run).
func TestAdmissionPolicyCompilesOnMinimumKubernetes(t *testing.T) {
	policy := admissionPolicy(t)
	minimum := minimumKubernetes(t)
	compat := version.MajorMinor(minimum.Major(), minimum.Minor()-1)
	if len(policy.Spec.Validations) == 0 || len(policy.Spec.Variables) == 0 {
		t.Fatal("the policy has no validations or variables")
	}
	if policy.Spec.ParamKind == nil || policy.Spec.ParamKind.Kind != "AgentRunPolicy" {
		t.Fatalf("paramKind %v, want AgentRunPolicy", policy.Spec.ParamKind)
	}

	t.Run("untyped", func(t *testing.T) {
		for _, e := range compileUntyped(t, policy, compat) {
			t.Errorf("Kubernetes %s refuses the policy: %s", minimum, e)
		}
	})
	t.Run("typed", func(t *testing.T) {
		object := crdDeclType(t, "agentrun.dev_agentruns.yaml", "AgentRun")
		params := crdDeclType(t, "agentrun.dev_agentrunpolicies.yaml", "AgentRunPolicy")
		for _, e := range compileTyped(t, policy, compat, object, params) {
			t.Errorf("type check on Kubernetes %s: %s", minimum, e)
		}
	})
}

// compileUntyped compiles as the API server validates a new policy:
// object and params are dynamic, variables are compiled in order and
// visible to what follows.
func compileUntyped(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, compat *version.Version) []string {
	t.Helper()
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(compat))
	if err != nil {
		t.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: true, HasAuthorizer: true}
	var errs []string
	for _, v := range p.Spec.Variables {
		res := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, fmt.Sprintf("variables.%s: %v", v.Name, res.Error))
		}
	}
	for i, v := range p.Spec.Validations {
		if res := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, opts, environment.NewExpressions); res.Error != nil {
			errs = append(errs, fmt.Sprintf("validations[%d].expression: %v", i, res.Error))
		}
		if v.MessageExpression == "" {
			errs = append(errs, fmt.Sprintf("validations[%d] has no messageExpression: say what to change", i))
			continue
		}
		if res := compiler.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}, opts, environment.NewExpressions); res.Error != nil {
			errs = append(errs, fmt.Sprintf("validations[%d].messageExpression: %v", i, res.Error))
		}
	}
	return errs
}

// compileTyped declares object, oldObject and params with the CRDs' types
// (namespaceObject and request as the API server builds them) and checks
// that each validation is a bool and each message a string.
func compileTyped(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, compat *version.Version, object, params *apiservercel.DeclType) []string {
	t.Helper()
	ns, req := plugincel.BuildNamespaceType(), plugincel.BuildRequestType()
	base, err := environment.MustBaseEnvSet(compat).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable(plugincel.ObjectVarName, object.CelType()),
			cel.Variable(plugincel.OldObjectVarName, object.CelType()),
			cel.Variable(plugincel.ParamsVarName, params.CelType()),
			cel.Variable(plugincel.NamespaceVarName, ns.CelType()),
			cel.Variable(plugincel.RequestVarName, req.CelType()),
			cel.Variable("authorizer", library.AuthorizerType),
		},
		DeclTypes: []*apiservercel.DeclType{object, params, ns, req},
	})
	if err != nil {
		t.Fatal(err)
	}
	comp, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName, base)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	compile := func(what, expr string, want *cel.Type) *cel.Type {
		env, err := comp.Env(environment.NewExpressions)
		if err != nil {
			t.Fatal(err)
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", what, iss.Err()))
			return cel.DynType
		}
		if want != nil && !ast.OutputType().IsExactType(want) {
			errs = append(errs, fmt.Sprintf("%s is a %s, want %s", what, ast.OutputType(), want))
		}
		return ast.OutputType()
	}
	for _, v := range p.Spec.Variables {
		comp.AddField(v.Name, compile("variables."+v.Name, v.Expression, nil))
	}
	for i, v := range p.Spec.Validations {
		compile(fmt.Sprintf("validations[%d].expression", i), v.Expression, cel.BoolType)
		compile(fmt.Sprintf("validations[%d].messageExpression", i), v.MessageExpression, cel.StringType)
	}
	return errs
}

// crdDeclType is the CEL type of a generated CRD's objects, with the
// ObjectMeta fields the policy reads (a CRD's schema leaves metadata
// untyped; the API server's type checker gets them from its OpenAPI).
func crdDeclType(t *testing.T, file, kind string) *apiservercel.DeclType {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, v1); err != nil {
		t.Fatal(err)
	}
	var props apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1.Spec.Versions[0].Schema.OpenAPIV3Schema, &props, nil); err != nil {
		t.Fatal(err)
	}
	str := apiextensions.JSONSchemaProps{Type: "string"}
	strMap := apiextensions.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensions.JSONSchemaPropsOrBool{Schema: &str}}
	props.Properties["metadata"] = apiextensions.JSONSchemaProps{Type: "object", Properties: map[string]apiextensions.JSONSchemaProps{
		"name": str, "namespace": str, "generateName": str, "labels": strMap, "annotations": strMap,
	}}
	s, err := structuralschema.NewStructural(&props)
	if err != nil {
		t.Fatal(err)
	}
	return model.SchemaDeclType(s, true).MaybeAssignTypeName(kind)
}
