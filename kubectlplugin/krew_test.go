package kubectlplugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (v1alpha2) that the
// tests check, with krew's field names; strict decoding refuses fields
// krew does not have.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

func readKrew(t *testing.T, path string) krewPlugin {
	t.Helper()
	var p krewPlugin
	if err := yaml.UnmarshalStrict(readFile(t, path), &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// checkKrew checks a manifest of version: kubectl finds `kubectl agentrun`
// as the binary kubectl-agentrun, which every platform's tarball holds at
// its top with the LICENSE (krew requires it); linux and darwin on amd64 and arm64; each URI is the release
// tarball of its version and platform. It returns the sha256 by tarball.
func checkKrew(t *testing.T, p krewPlugin, version string) map[string]string {
	t.Helper()
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("%s %s", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "agentrun" || p.Spec.Version != version || p.Spec.Homepage != "https://github.com/agentrun-dev/agentrun" {
		t.Errorf("name %q version %q homepage %q", p.Metadata.Name, p.Spec.Version, p.Spec.Homepage)
	}
	// krew-index asks for a short description of at most 50 characters.
	if d := p.Spec.ShortDescription; d == "" || len(d) > 50 || p.Spec.Description == "" {
		t.Errorf("shortDescription %q (%d characters)", d, len(d))
	}
	sums := map[string]string{}
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, os+"/"+arch)
		tarball := fmt.Sprintf("kubectl-agentrun_%s_%s_%s.tar.gz", version, os, arch)
		if want := "https://github.com/agentrun-dev/agentrun/releases/download/" + version + "/" + tarball; pl.URI != want {
			t.Errorf("%s/%s: uri %s, want %s", os, arch, pl.URI, want)
		}
		if pl.Bin != "kubectl-agentrun" || len(pl.Files) != 2 || pl.Files[0].From != "kubectl-agentrun" || pl.Files[0].To != "." ||
			pl.Files[1].From != "LICENSE" || pl.Files[1].To != "." {
			t.Errorf("%s/%s: bin %q files %+v", os, arch, pl.Bin, pl.Files)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pl.Sha256) {
			t.Errorf("%s/%s: sha256 %q", os, arch, pl.Sha256)
		}
		sums[tarball] = pl.Sha256
	}
	sort.Strings(platforms)
	if got := strings.Join(platforms, " "); got != "darwin/amd64 darwin/arm64 linux/amd64 linux/arm64" {
		t.Errorf("platforms %s", got)
	}
	return sums
}

// TestKrewManifest: the template in hack/krew has the placeholders the
// release fills in: version v0.0.0, zero sums.
func TestKrewManifest(t *testing.T) {
	for tarball, sum := range checkKrew(t, readKrew(t, "../hack/krew/agentrun.yaml"), "v0.0.0") {
		if sum != strings.Repeat("0", 64) {
			t.Errorf("%s: sha256 %s in the template, want the placeholder", tarball, sum)
		}
	}
}

// TestKrewRelease: hack/plugin-release.sh fills the template for a
// version from the tarballs in a directory (built here as stand-ins: the
// script's build step cross-compiles four binaries).
func TestKrewRelease(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{}
	for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		name := "kubectl-agentrun_v1.4.0_" + p + ".tar.gz"
		data := []byte("tarball of " + p)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		want[name] = hex.EncodeToString(sum[:])
	}
	out, err := exec.Command("../hack/plugin-release.sh", "manifest", "v1.4.0", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := checkKrew(t, readKrew(t, filepath.Join(dir, "agentrun.yaml")), "v1.4.0")
	for name, sum := range want {
		if got[name] != sum {
			t.Errorf("%s: sha256 %s, want %s", name, got[name], sum)
		}
	}
	if text := string(readFile(t, filepath.Join(dir, "agentrun.yaml"))); strings.Contains(text, "v0.0.0") || strings.Contains(text, "placeholder") {
		t.Errorf("placeholders left:\n%s", text)
	}

	// A missing tarball or a version krew refuses fails the release.
	os.Remove(filepath.Join(dir, "kubectl-agentrun_v1.4.0_darwin_arm64.tar.gz"))
	for _, args := range [][]string{{"manifest", "v1.4.0", dir}, {"manifest", "1.4", dir}} {
		if out, err := exec.Command("../hack/plugin-release.sh", args...).CombinedOutput(); err == nil {
			t.Errorf("%v succeeded: %s", args, out)
		}
	}
}

// TestKrewTarball: a platform's tarball holds the static binary and the
// repository's LICENSE at its top, and nothing else.
func TestKrewTarball(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("../hack/plugin-release.sh", "tarball", "v1.4.0", "linux/amd64", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, "kubectl-agentrun_v1.4.0_linux_amd64.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
	if len(files) != 2 || !bytes.Equal(files["LICENSE"], readFile(t, "../LICENSE")) || !bytes.HasPrefix(files["kubectl-agentrun"], []byte("\x7fELF")) {
		names := []string{}
		for n := range files {
			names = append(names, n)
		}
		t.Errorf("tarball holds %v: want kubectl-agentrun (an ELF binary) and the LICENSE", names)
	}
	if !bytes.Contains(readFile(t, "../LICENSE"), []byte("Apache License\n                           Version 2.0")) {
		t.Error("LICENSE is not the Apache License 2.0")
	}
}
