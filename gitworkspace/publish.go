package gitworkspace

import (
	"context"
	"fmt"
	"strings"
)

// Push pushes the recorded change to exactly refs/heads/BRANCH of the
// repository: a new branch, or a fast-forward of the branch as it is
// there. Never a force push, a delete, a tag or another ref; the server's
// refusal (a branch that moved on, a protection rule) is the error.
func (c *Checkout) Push(ctx context.Context, ch *Change, branch string) error {
	if err := validBranch(branch); err != nil {
		return err
	}
	if ch.Empty() {
		return nil
	}
	out, err := c.authGit(false).run(ctx, "--git-dir", c.repo, "push", "--porcelain", "--no-verify", "--no-follow-tags",
		c.remote.String(), ch.Head+":refs/heads/"+branch)
	if err != nil {
		if strings.Contains(err.Error(), "non-fast-forward") || strings.Contains(err.Error(), "fetch first") || strings.Contains(err.Error(), "rejected") {
			return fmt.Errorf("the branch %s exists on %s and the change is not a fast-forward of it: not pushed (agentrun never force-pushes; pick another --branch)", branch, c.remote)
		}
		return c.explain(err)
	}
	// --porcelain: "<flag>\t<from>:<to>\t<summary>"; "!" is a refusal.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "!\t") {
			return fmt.Errorf("%s refused the push of %s: %s", c.remote, branch, cut(c.git.scrub(line), 300))
		}
	}
	return nil
}

// Patch is the change as an mbox of patches (`git format-patch
// --binary`), which `git am` applies to the base commit: the agent's
// commits and agentrun's. A history with merges, which format-patch
// cannot carry, becomes one patch of the whole change. Nil when nothing
// changed.
func (c *Checkout) Patch(ctx context.Context, ch *Change) ([]byte, error) {
	if ch.Empty() {
		return nil, nil
	}
	head := ch.Head
	merges, err := c.git.run(ctx, "--git-dir", c.repo, "rev-list", "--merges", "--count", ch.Base+".."+ch.Head)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(merges)) != "0" {
		tree, err := c.revParse(ctx, ch.Head+"^{tree}")
		if err != nil {
			return nil, err
		}
		g := c.git.with("GIT_AUTHOR_NAME="+Committer.Name, "GIT_AUTHOR_EMAIL="+Committer.Email,
			"GIT_COMMITTER_NAME="+Committer.Name, "GIT_COMMITTER_EMAIL="+Committer.Email)
		out, err := g.runInput(ctx, []byte("agentrun: the run's change, its merges squashed\n"), "--git-dir", c.repo, "commit-tree", tree, "-p", ch.Base)
		if err != nil {
			return nil, err
		}
		head = strings.TrimSpace(string(out))
		ch.Notes = append(ch.Notes, "the patch is one commit: the agent's history holds merges, which a patch cannot carry")
	}
	g := *c.git
	g.maxOutput = c.spec.Limits.PatchBytes
	out, err := g.run(ctx, "--git-dir", c.repo, "format-patch", "--stdout", "--binary", "--no-signature", "--no-stat",
		"--full-index", "--no-renames", "--no-textconv", "--no-ext-diff", ch.Base+".."+head)
	if err != nil {
		return nil, fmt.Errorf("the patch: %v", err)
	}
	return out, nil
}
