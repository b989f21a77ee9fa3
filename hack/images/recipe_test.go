package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Docker-free images of hack/cluster-images.sh must install what the
// Dockerfiles install: same Debian packages, same pinned CLIs, same Node
// major, same environment, user, working directory and entrypoint.

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerInstructions joins continuation lines and returns the instructions
// of the last stage (the image itself).
func lastStage(dockerfile string) []string {
	joined := strings.ReplaceAll(dockerfile, "\\\n", " ")
	var out []string
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			out = nil
		}
		out = append(out, strings.Join(strings.Fields(line), " "))
	}
	return out
}

// shellArray reads name=(a b c) from the script.
func shellArray(t *testing.T, script, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=\(([^)]*)\)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("hack/cluster-images.sh has no %s=(...)", name)
	}
	return strings.Fields(m[1])
}

func shellVar(t *testing.T, script, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=(\S+)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("hack/cluster-images.sh has no %s=", name)
	}
	return m[1]
}

func TestRunnerRecipeMatchesDockerfile(t *testing.T) {
	script := readFile(t, "hack/cluster-images.sh")
	stage := lastStage(readFile(t, "runner-image/Dockerfile"))

	var apt, clis, copies, env []string
	var user, workdir, entrypoint, from string
	for _, ins := range stage {
		switch {
		case strings.HasPrefix(ins, "FROM "):
			from = strings.Fields(ins)[1]
		case strings.HasPrefix(ins, "RUN "):
			for _, cmd := range strings.Split(ins[4:], "&&") {
				f := strings.Fields(cmd)
				switch {
				case len(f) > 2 && f[0] == "apt-get" && f[1] == "install":
					for _, a := range f[2:] {
						if !strings.HasPrefix(a, "-") {
							apt = append(apt, a)
						}
					}
				case len(f) > 1 && strings.HasSuffix(f[1], "/hack/install-clis.sh"):
					clis = append(clis, strings.Join(f[1:], " "))
				}
			}
		case strings.HasPrefix(ins, "COPY "):
			copies = append(copies, ins)
		case strings.HasPrefix(ins, "ENV "):
			env = append(env, strings.Fields(ins[4:])...)
		case strings.HasPrefix(ins, "USER "):
			user = ins[5:]
		case strings.HasPrefix(ins, "WORKDIR "):
			workdir = ins[8:]
		case strings.HasPrefix(ins, "ENTRYPOINT "):
			entrypoint = ins[11:]
		}
	}
	same := func(what string, docker, ours []string) {
		t.Helper()
		d, o := slices.Sorted(slices.Values(docker)), slices.Sorted(slices.Values(ours))
		if len(d) == 0 || !slices.Equal(d, o) {
			t.Errorf("%s: Dockerfile %q, hack/cluster-images.sh %q", what, d, o)
		}
	}
	same("apt packages", apt, shellArray(t, script, "runner_apt_packages"))
	// Both install adapters/clis.txt's lines marked for the image with
	// hack/install-clis.sh (so a CLI with a committed lock, dsh, is
	// installed from it), picked by the same expression: no version is
	// written anywhere else.
	const pick = `awk '/^[^#]/ {if ($5 == "yes") print $1}'`
	if len(clis) != 1 || !strings.Contains(clis[0], "$("+pick+" /tmp/agentrun-clis/adapters/clis.txt)") {
		t.Errorf("Dockerfile: %q does not install adapters/clis.txt's image CLIs with hack/install-clis.sh (%s)", clis, pick)
	}
	for _, c := range []string{"COPY adapters/clis.txt /tmp/agentrun-clis/adapters/clis.txt", "COPY hack/install-clis.sh /tmp/agentrun-clis/hack/install-clis.sh", "COPY hack/clis /tmp/agentrun-clis/hack/clis"} {
		if !slices.Contains(copies, c) {
			t.Errorf("Dockerfile lacks %q (hack/install-clis.sh reads it)", c)
		}
	}
	if !strings.Contains(script, "runner_clis=($("+pick+` "$root/adapters/clis.txt"))`) ||
		!strings.Contains(script, `"$root/hack/install-clis.sh" "${runner_clis[@]}"`) {
		t.Errorf("hack/cluster-images.sh: runner_clis is not adapters/clis.txt's image CLIs (%s) installed by hack/install-clis.sh", pick)
	}
	// The same binaries of this repository: agentrun and the sandbox's init.
	if !slices.Contains(copies, "COPY --from=build /out/agentrun /out/agentrun-sandbox-init /usr/local/bin/") {
		t.Errorf("Dockerfile: agentrun and agentrun-sandbox-init are not copied to /usr/local/bin")
	}
	for _, pkg := range []string{"./cmd/agentrun ", "./cmd/agentrun-sandbox-init"} {
		if !strings.Contains(script, pkg) {
			t.Errorf("hack/cluster-images.sh does not build %s", pkg)
		}
	}
	same("environment", env, shellArray(t, script, "runner_env"))
	if got := shellVar(t, script, "runner_user"); got != user {
		t.Errorf("user: Dockerfile %q, script %q", user, got)
	}
	if got := shellVar(t, script, "runner_workdir"); got != workdir {
		t.Errorf("workdir: Dockerfile %q, script %q", workdir, got)
	}
	if entrypoint != `["agentrun"]` || !strings.Contains(script, "-entrypoint agentrun") {
		t.Errorf("entrypoint: Dockerfile %s; the script must pass -entrypoint agentrun", entrypoint)
	}
	node := shellVar(t, script, "runner_node_version")
	if !strings.HasPrefix(from, "node:"+node+"-bookworm") {
		t.Errorf("base: Dockerfile FROM %s, script Node %s on bookworm", from, node)
	}
	// No version of a CLI is pinned outside adapters/clis.txt.
	for _, f := range []string{"runner-image/Dockerfile", "hack/cluster-images.sh", "hack/install-clis.sh"} {
		if m := regexp.MustCompile(`@(anthropic-ai|openai|mariozechner|deepseek-ai)/[a-z-]+@[0-9]`).FindString(readFile(t, f)); m != "" {
			t.Errorf("%s pins %s itself: versions live in adapters/clis.txt", f, m)
		}
	}
}

func TestManagerRecipeMatchesDockerfile(t *testing.T) {
	script := readFile(t, "hack/cluster-images.sh")
	stage := lastStage(readFile(t, "Dockerfile"))
	want := []string{
		"FROM scratch",
		"COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/",
		"COPY --from=build /out/manager /manager",
		"COPY --from=build /out/agentrun-node-profiles /agentrun-node-profiles",
		"USER " + shellVar(t, script, "manager_user"),
		`ENTRYPOINT ["/manager"]`,
	}
	if !slices.Equal(stage, want) {
		t.Errorf("Dockerfile's last stage changed:\n%q\nwant (what hack/cluster-images.sh builds)\n%q", stage, want)
	}
	for _, s := range []string{"ca-certificates.crt", "./cmd/manager", "./cmd/agentrun-node-profiles", "-entrypoint /manager", `-user "$manager_user"`} {
		if !strings.Contains(script, s) {
			t.Errorf("hack/cluster-images.sh lacks %q", s)
		}
	}
}
