package all_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/adapters"
	_ "github.com/agentrun-dev/agentrun/adapters/all"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// root is the repository's top, from this package's folder.
var root = filepath.Join("..", "..")

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dig walks a decoded YAML or JSON document along keys.
func dig(t *testing.T, doc any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := doc.(map[string]any)
		if !ok {
			t.Fatalf("no %q in %v", k, keys)
		}
		doc = m[k]
	}
	return doc
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		if s, ok := s.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func decode(t *testing.T, rel string) any {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal(read(t, rel), &doc); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return doc
}

// crdSpec is the first version's spec schema of a CRD file.
func crdSpec(t *testing.T, rel string) any {
	t.Helper()
	versions, _ := dig(t, decode(t, rel), "spec", "versions").([]any)
	if len(versions) == 0 {
		t.Fatalf("%s has no versions", rel)
	}
	return dig(t, versions[0], "schema", "openAPIV3Schema", "properties", "spec")
}

// TestEveryPlaceKnowsEveryRuntime: the registered adapters (this package's
// list) are the runtimes every other place names. A runtime added here and
// forgotten elsewhere, or a place that lists one that is gone, fails with
// the place to edit.
func TestEveryPlaceKnowsEveryRuntime(t *testing.T) {
	registered := adapters.Names()
	var pinned []string
	for _, c := range adapters.CLIs {
		pinned = append(pinned, c.Runtime)
	}
	onKubernetes := adapters.ImageRuntimes()
	slices.Sort(pinned)
	slices.Sort(onKubernetes)
	same := func(place string, got []string, want []string) {
		t.Helper()
		got = slices.Sorted(slices.Values(got))
		if !slices.Equal(got, want) {
			what := "the registered runtimes (adapters/all) are"
			if slices.Equal(want, onKubernetes) && !slices.Equal(want, registered) {
				what = "the runtimes the runner image carries (adapters/clis.txt, image yes) are"
			}
			t.Errorf("%s lists %q; %s %q", place, got, what, want)
		}
	}

	same("adapters/clis.txt (the pinned CLIs)", pinned, registered)

	// The CRDs, generated from the +kubebuilder:validation:Enum markers of
	// api/v1alpha1 (make manifests).
	spec := crdSpec(t, "config/crd/bases/agentrun.dev_agentruns.yaml")
	same("api/v1alpha1 Runtime's Enum marker (config/crd/bases/agentrun.dev_agentruns.yaml spec.runtime)", strs(dig(t, spec, "properties", "runtime", "enum")), registered)
	policy := crdSpec(t, "config/crd/bases/agentrun.dev_agentrunpolicies.yaml")
	same("api/v1alpha1 AgentRunPolicy allowedRuntimes' items Enum marker", strs(dig(t, policy, "properties", "allowedRuntimes", "items", "enum")), registered)

	// A runtime the runner image does not carry is refused at admission,
	// and one it carries is not.
	var rules []string
	validations, _ := dig(t, spec, "properties", "runtime", "x-kubernetes-validations").([]any) // none when the image carries every runtime
	for _, r := range validations {
		rules = append(rules, dig(t, r, "rule").(string))
	}
	for _, name := range registered {
		refused := slices.Contains(rules, "self != '"+name+"'")
		if inImage := slices.Contains(onKubernetes, name); refused == inImage {
			t.Errorf("runtime %s: in the runner image %v (adapters/clis.txt), refused by the CRD's CEL rule %v (api/v1alpha1 Runtime): make them agree", name, inImage, refused)
		}
	}

	// The event stream's schema.
	var schema any
	if err := json.Unmarshal(read(t, "docs/events.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	same("docs/events.schema.json ($defs.start.properties.runtime)", strs(dig(t, schema, "$defs", "start", "properties", "runtime", "enum")), registered)

	// The chart.
	var values any
	if err := json.Unmarshal(read(t, "charts/agentrun/values.schema.json"), &values); err != nil {
		t.Fatal(err)
	}
	same("charts/agentrun/values.schema.json (policy.spec.allowedRuntimes)",
		strs(dig(t, values, "properties", "policy", "properties", "spec", "properties", "allowedRuntimes", "items", "enum")), registered)

	// The strict policy presets allow what runs on Kubernetes.
	m := regexp.MustCompile(`"allowedRuntimes" \(list ([^)]*)\)`).FindSubmatch(read(t, "charts/agentrun/templates/_helpers.tpl"))
	if m == nil {
		t.Fatal("charts/agentrun/templates/_helpers.tpl: no strict preset's allowedRuntimes")
	}
	same("charts/agentrun/templates/_helpers.tpl (the strict preset's allowedRuntimes)", strings.Fields(strings.ReplaceAll(string(m[1]), `"`, "")), onKubernetes)
	same("config/policy/agentrunpolicy.yaml (allowedRuntimes)", strs(dig(t, decode(t, "config/policy/agentrunpolicy.yaml"), "spec", "allowedRuntimes")), onKubernetes)

	// One sample per runtime on Kubernetes, each in the kustomization.
	kust := strs(dig(t, decode(t, "config/samples/kustomization.yaml"), "resources"))
	for _, name := range onKubernetes {
		file := "agentrun_v1alpha1_" + name + ".yaml"
		if _, err := os.Stat(filepath.Join(root, "config", "samples", file)); err != nil {
			t.Errorf("config/samples/%s is missing: every runtime on Kubernetes has a sample", file)
		} else if !slices.Contains(kust, file) {
			t.Errorf("config/samples/kustomization.yaml does not list %s", file)
		}
	}

	// Help texts name every runtime they accept.
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	(&podcontract.RunFlags{}).Register(fs)
	for _, name := range registered {
		if !strings.Contains(fs.Lookup("runtime").Usage, name) {
			t.Errorf("podcontract/flags.go: agentrun run --runtime's help does not name %s", name)
		}
	}
	plugin := string(read(t, "kubectlplugin/run.go"))
	for _, name := range onKubernetes {
		for _, place := range regexp.MustCompile(`"the agent CLI: [^"]*"|"--runtime is required: [^"]*"`).FindAllString(plugin, -1) {
			if !strings.Contains(place, name) {
				t.Errorf("kubectlplugin/run.go: %s does not name %s", place, name)
			}
		}
	}
}

// TestPinnedCLIsParse: clis.txt's format and what a bad line gets.
func TestPinnedCLIsParse(t *testing.T) {
	for _, c := range adapters.CLIs {
		if c.Package == "" || c.Version == "" || c.Binary == "" {
			t.Errorf("incomplete line %+v", c)
		}
	}
	for _, bad := range []string{"a b c", "a b c d maybe", "a b c d yes\na e f g no"} {
		if _, err := adapters.ParseCLIs(bad); err == nil {
			t.Errorf("ParseCLIs(%q) accepted it", bad)
		}
	}
	// dsh installs from its lock, which must pin the same version.
	if c, ok := adapters.PinnedCLI("dsh"); ok {
		var lock struct {
			Dependencies map[string]string `json:"dependencies"`
		}
		if err := json.Unmarshal(read(t, "hack/clis/dsh/package.json"), &lock); err != nil {
			t.Fatal(err)
		}
		if got := lock.Dependencies[c.Package]; got != c.Version {
			t.Errorf("hack/clis/dsh/package.json pins %s %s, adapters/clis.txt %s", c.Package, got, c.Version)
		}
	}
}
