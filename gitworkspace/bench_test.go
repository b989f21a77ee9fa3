package gitworkspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/internal/gitserver"
)

// The benchmarks of hack/bench-git.sh: agentrun's clone and publish around
// an agent that commits one small change, against plain `git clone
// --depth 1` and `git push` of the same repository from the same server in
// the same run (BenchmarkCloneAndPublish, a ratio); and what recording
// and publishing a change costs on a repository with many files
// (BenchmarkPublishManyFiles, the git processes' peak memory). Sizes come
// from AGENTRUN_BENCH_GIT_MB (default 50) and AGENTRUN_BENCH_GIT_FILES
// (default 100000).

const benchToken = "ghp_bench-token-0000"

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchServer serves one repository of files×size random bytes.
func benchServer(b *testing.B, files, size int) (*gitserver.Server, string) {
	b.Helper()
	srv, err := gitserver.Start(gitserver.Options{Token: benchToken})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	content := map[string]string{}
	buf := make([]byte, size/2)
	for i := range files {
		rand.Read(buf)
		// Hex: text that does not compress away, as source would not.
		content[fmt.Sprintf("src/%03d/file%06d.txt", i%1000, i)] = hex.EncodeToString(buf)
	}
	if _, err := srv.Create("bench", content); err != nil {
		b.Fatal(err)
	}
	ca := filepath.Join(b.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CAPEM(), 0o644); err != nil {
		b.Fatal(err)
	}
	return srv, ca
}

func BenchmarkCloneAndPublish(b *testing.B) {
	mb := benchEnvInt("AGENTRUN_BENCH_GIT_MB", 50)
	srv, ca := benchServer(b, 500, mb<<20/500)
	ctx := context.Background()
	var plain, ours time.Duration
	for i := range b.N {
		// Plain git, as a user would clone, commit and push by hand.
		dir := b.TempDir()
		start := time.Now()
		git := func(args ...string) {
			cmd := exec.Command("git", append([]string{"-c", "http.extraHeader=Authorization: Bearer " + benchToken,
				"-c", "user.name=b", "-c", "user.email=b@example.com"}, args...)...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_SSL_CAINFO="+ca)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("clone", "-q", "--depth", "1", srv.Repo("bench"), ".")
		if err := os.WriteFile(filepath.Join(dir, "change.txt"), []byte("plain\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-qm", "change")
		git("push", "-q", "origin", "HEAD:refs/heads/plain-"+strconv.Itoa(i))
		plain += time.Since(start)

		// agentrun: clone, the agent's commit, record, push.
		ws := b.TempDir()
		start = time.Now()
		c, err := Clone(ctx, Spec{Repository: srv.Repo("bench"), Depth: 1, CAFile: ca, Token: benchToken, Auth: Auth{Bearer: true},
			Push: PushBranch, When: WhenAlways}, ws)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "change.txt"), []byte("agent\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		ch, err := c.Record(ctx, "bench-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Push(ctx, ch, "agentrun/bench-"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		c.Close()
	}
	b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "plain-ms")
	b.ReportMetric(float64(ours.Milliseconds())/float64(b.N), "agentrun-ms")
	b.ReportMetric(float64(ours)/float64(plain), "ratio")
	b.ReportMetric(float64(mb), "repo-MB")
}

func BenchmarkPublishManyFiles(b *testing.B) {
	files := benchEnvInt("AGENTRUN_BENCH_GIT_FILES", 100_000)
	srv, ca := benchServer(b, files, 64)
	ctx := context.Background()
	var record, patch time.Duration
	for i := range b.N {
		ws := b.TempDir()
		c, err := Clone(ctx, Spec{Repository: srv.Repo("bench"), Depth: 1, CAFile: ca, Token: benchToken, Auth: Auth{Bearer: true},
			Push: PushPatch, When: WhenAlways}, ws)
		if err != nil {
			b.Fatal(err)
		}
		for j := range 10 {
			if err := os.WriteFile(filepath.Join(ws, "src", fmt.Sprintf("%03d", j), fmt.Sprintf("file%06d.txt", j)), []byte("changed\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		ch, err := c.Record(ctx, "bench-"+strconv.Itoa(i))
		if err != nil {
			b.Fatal(err)
		}
		record += time.Since(start)
		start = time.Now()
		if _, err := c.Patch(ctx, ch); err != nil {
			b.Fatal(err)
		}
		patch += time.Since(start)
		c.Close()
	}
	var ru, self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(record.Milliseconds())/float64(b.N), "record-ms")
	b.ReportMetric(float64(patch.Milliseconds())/float64(b.N), "patch-ms")
	b.ReportMetric(float64(ru.Maxrss)/1024, "git-peak-MiB")
	b.ReportMetric(float64(self.Maxrss)/1024, "agentrun-peak-MiB")
}
