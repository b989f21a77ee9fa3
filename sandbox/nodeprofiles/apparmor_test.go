package nodeprofiles

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppArmorProfileParses parses the profile with Debian's
// apparmor_parser (3.0.8, unpacked into .cache by hack/apparmor-parser.sh;
// this machine's kernel has no AppArmor, so it is parsed, not loaded). The
// profile is written for AppArmor 4.0 (abi 4.0), whose `userns,` rule is
// what lets bubblewrap create user namespaces on Ubuntu 24.04 and later;
// 3.0 knows neither, so the check parses the variant for older nodes
// (AppArmor3, the same rules but userns) and checks the userns rule is
// there.
func TestAppArmorProfileParses(t *testing.T) {
	p := AppArmor()
	for _, want := range []string{"abi <abi/4.0>,", "profile " + AppArmorName + " ", "\n  userns,\n", "\n  mount,\n", "\n  pivot_root,\n"} {
		if !bytes.Contains(p, []byte(want)) {
			t.Errorf("the profile lacks %q", want)
		}
	}
	out, err := exec.Command(filepath.Join("..", "..", "hack", "apparmor-parser.sh")).Output()
	if err != nil {
		t.Fatalf("hack/apparmor-parser.sh: %v", err)
	}
	base := strings.TrimSpace(string(out))
	for name, text := range map[string][]byte{
		"the profile for AppArmor 3": AppArmor3(),
		"a broken profile":           []byte("abi <abi/3.0>,\nprofile broken {\n  mount nonsense-rule,\n"),
	} {
		f := filepath.Join(t.TempDir(), "profile")
		if err := os.WriteFile(f, text, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(base, "sbin", "apparmor_parser"), "--config-file", "/dev/null",
			"--base", filepath.Join(base, "etc", "apparmor.d"), "--skip-kernel-load", "--skip-cache", f)
		out, err := cmd.CombinedOutput()
		if broken := strings.HasPrefix(name, "a broken"); (err != nil) != broken {
			t.Errorf("%s: apparmor_parser %v\n%s", name, err, out)
		}
	}
}
