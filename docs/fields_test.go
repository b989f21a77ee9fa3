package docs_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestAgentRunFieldsAreDocumented walks the spec schema of the generated
// AgentRun CRD and fails for every field that no page under docs/ nor
// README.md names by its path (`spec.limits.maxTurns`, or without the
// `spec.` prefix; `[]` after a list is optional). It descends into the
// fields of agentrun's own types; a field of a Kubernetes type (env's
// EnvVar, podOverrides.affinity) must be documented itself, while its
// subfields are Kubernetes' to document. The generated API reference does
// not count: it lists every field whether anyone explained it or not.
func TestAgentRunFieldsAreDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "crd", "bases", "agentrun.dev_agentruns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	var spec *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == v1alpha1.GroupVersion.Version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			if s, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]; ok {
				spec = &s
			}
		}
	}
	if spec == nil {
		t.Fatalf("no spec schema of version %s in the AgentRun CRD", v1alpha1.GroupVersion.Version)
	}
	var paths []string
	walkSchema(t, *spec, reflect.TypeOf(v1alpha1.AgentRunSpec{}), "spec", &paths)
	if len(paths) < 20 {
		t.Fatalf("only %d spec fields found in the CRD: %v", len(paths), paths)
	}

	documented := map[string]bool{}
	for _, p := range readPages(t, false) {
		for _, span := range codeSpan.FindAllStringSubmatch(p.prose, -1) {
			for _, tok := range fieldToken.FindAllString(span[1], -1) {
				tok = strings.ReplaceAll(tok, "[]", "")
				documented[tok] = true
				documented["spec."+tok] = true
			}
		}
	}
	for _, p := range paths {
		if !documented[strings.ReplaceAll(p, "[]", "")] {
			t.Errorf("AgentRun field %s is documented nowhere: no page under docs/ nor README.md names `%s` (docs/kubernetes/agentrun.md lists every field)", p, p)
		}
	}
}

// codeSpan is an inline code span of Markdown prose; fieldToken a field
// path in one.
var (
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	fieldToken = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*(?:(?:\[\])?\.[A-Za-z][A-Za-z0-9]*)*(?:\[\])?`)
)

// walkSchema appends the path of every property of s (the schema of the Go
// type t) and descends into those whose Go type is one of the API
// package's own structs.
func walkSchema(t *testing.T, s apiextensionsv1.JSONSchemaProps, typ reflect.Type, path string, out *[]string) {
	t.Helper()
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := s.Properties[name]
		p := path + "." + name
		*out = append(*out, p)
		f, ok := jsonField(typ, name)
		if !ok {
			t.Errorf("the CRD has %s, but %s has no field with JSON name %q: run make manifests", p, typ, name)
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && child.Items != nil && child.Items.Schema != nil {
			ft = ft.Elem()
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			p += "[]"
			child = *child.Items.Schema
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
			walkSchema(t, child, ft, p, out)
		}
	}
}

// jsonField finds the field of struct type typ that encodes as name,
// looking into inlined embedded structs.
func jsonField(typ reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f, true
		}
		if f.Anonymous && (tag == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if sf, ok := jsonField(ft, name); ok {
					return sf, true
				}
			}
		}
	}
	return reflect.StructField{}, false
}
