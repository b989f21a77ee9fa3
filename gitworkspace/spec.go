// Package gitworkspace gives an agent a repository and takes its change
// back, outside the sandbox (docs/git.md): it clones the repository at a
// ref into the workspace before the agent starts; once the agent has
// exited it records the change (the agent's commits, and what it left
// uncommitted as one more commit) in a repository of agentrun's own; and it
// publishes that change, as a push of exactly the run's branch or as a
// patch. The token never enters the workspace or the agent's environment:
// host-side git gets it in its environment for one command at a time, and
// the agent's own fetches of the repository get it from the filter proxy
// (FetchScope), which refuses every push.
//
// Every byte of the checkout, .git included, is the agent's once it ran:
// the host-side git that reads it runs with no configuration but
// agentrun's, never runs what the checkout names, and takes the agent's
// objects only through a checked transfer (see record.go).
package gitworkspace

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Push modes (`--push`): what agentrun does with the change.
const (
	// PushNone only reports the change.
	PushNone = "none"
	// PushBranch pushes exactly refs/heads/BRANCH: a new branch or a
	// fast-forward of it, never a force push, a delete or another ref.
	PushBranch = "branch"
	// PushPatch writes a patch that `git am` applies to the base commit.
	PushPatch = "patch"
)

// When to publish (`--push-when`).
const (
	// WhenSucceeded publishes only a run whose end status is finished.
	WhenSucceeded = "succeeded"
	// WhenAlways publishes whatever the end status.
	WhenAlways = "always"
)

// Spec is the repository of one run and what to do with its change.
type Spec struct {
	// Repository is the https:// URL (http:// with PlainHTTP).
	Repository string
	// Ref is a branch, a tag or a full commit id; "" is the remote's
	// default branch.
	Ref string
	// Depth is the history fetched: 0 the whole, N the last N commits.
	Depth int
	// Submodules also clones the submodules (their URLs must be https,
	// and on the same host to get the token).
	Submodules bool
	// PlainHTTP allows an http:// repository: the token then travels
	// unencrypted.
	PlainHTTP bool
	// Resolve maps host names to addresses for agentrun's own git, as
	// --add-host does for the proxy (git's http.curloptResolve).
	Resolve map[string]string
	// CAFile verifies the repository's TLS certificate instead of the
	// system's roots (a forge behind a company CA; --upstream-ca).
	CAFile string
	// Token is the git credential's value ("" for a public repository);
	// Auth how it is presented.
	Token string
	Auth  Auth
	// Push is PushNone, PushBranch or PushPatch; When WhenSucceeded or
	// WhenAlways.
	Push string
	When string
	// Branch is the run's branch (PushBranch).
	Branch string
	// Limits bound what the repository and the change may cost.
	Limits Limits
}

// Auth is how the token is presented to the forge.
type Auth struct {
	// Bearer sends Authorization: Bearer TOKEN; otherwise HTTP Basic with
	// User (GitHub takes x-access-token, GitLab oauth2).
	Bearer bool
	User   string
}

// DefaultBasicUser is the HTTP Basic user of a token by default (GitHub's
// for installation and fine-grained tokens; GitLab takes oauth2).
const DefaultBasicUser = "x-access-token"

// ParseAuth reads `--git-auth`: basic (as DefaultBasicUser), basic:USER,
// or bearer.
func ParseAuth(s string) (Auth, error) {
	switch {
	case s == "" || s == "basic":
		return Auth{User: DefaultBasicUser}, nil
	case s == "bearer":
		return Auth{Bearer: true}, nil
	case strings.HasPrefix(s, "basic:") && len(s) > len("basic:") && !strings.ContainsAny(s[6:], ":\r\n"):
		return Auth{User: s[len("basic:"):]}, nil
	}
	return Auth{}, fmt.Errorf("--git-auth %q: use basic (user %s), basic:USER (oauth2 for GitLab) or bearer", s, DefaultBasicUser)
}

// header is the Authorization value of token under a.
func (a Auth) header(token string) string {
	if a.Bearer {
		return "Bearer " + token
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(a.User+":"+token))
}

// Limits bound the repository and the change (Spec.Limits); zero fields
// take the defaults.
type Limits struct {
	// RepoBytes bounds the clone's objects on disk.
	RepoBytes int64
	// ChangeFiles and ChangeBytes bound the files agentrun reads from the
	// working tree to record the change, FileBytes one of them.
	ChangeFiles int
	ChangeBytes int64
	FileBytes   int64
	// AgentObjectBytes bounds the agent's objects agentrun copies to
	// check and take in its commits.
	AgentObjectBytes int64
	// PatchBytes bounds a patch.
	PatchBytes int64
}

// Defaults of Limits. A coding agent's change is far below each; each
// stops an agent (or a repository) that would make the host-side work run
// without end.
const (
	DefaultRepoBytes        = 2 << 30
	DefaultChangeFiles      = 200_000
	DefaultChangeBytes      = 2 << 30
	DefaultFileBytes        = 512 << 20
	DefaultAgentObjectBytes = 2 << 30
	DefaultPatchBytes       = 256 << 20
)

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.RepoBytes, DefaultRepoBytes)
	def(&l.ChangeBytes, DefaultChangeBytes)
	def(&l.FileBytes, DefaultFileBytes)
	def(&l.AgentObjectBytes, DefaultAgentObjectBytes)
	def(&l.PatchBytes, DefaultPatchBytes)
	if l.ChangeFiles <= 0 {
		l.ChangeFiles = DefaultChangeFiles
	}
	return l
}

// maxURL bounds a repository URL.
const maxURL = 2048

// remote is a parsed repository URL.
type remote struct {
	url  *url.URL
	host string // lower case
	port int
	// path is the repository's path without a trailing ".git" or "/":
	// what the proxy's fetch scope compares request paths with.
	path string
}

// parseRemote checks a repository URL: https (or http with plainHTTP),
// a host, a path, no user information (the token is a flag's, never the
// URL's), no query or fragment.
func parseRemote(raw string, plainHTTP bool) (*remote, error) {
	if len(raw) > maxURL {
		return nil, fmt.Errorf("--repo: the URL is longer than %d bytes", maxURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--repo %q is not a URL: %v", raw, err)
	}
	switch {
	case u.Scheme == "http" && !plainHTTP:
		return nil, fmt.Errorf("--repo %s speaks plain HTTP, which would carry the token unencrypted: use https://, or declare it with --git-plain-http", raw)
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("--repo %q: only https:// repositories are supported (ssh, git:// and file:// are not: docs/git.md)", raw)
	case u.User != nil:
		return nil, errors.New("--repo: the URL holds a user or a password; give the token with --git-credential NAME, never in the URL")
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("--repo %q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("--repo %q: a repository URL has no query or fragment", raw)
	case !safePath().MatchString(u.Path):
		return nil, fmt.Errorf("--repo %q: the path must name a repository (letters, digits, . _ - ~ and /), such as /owner/name.git", raw)
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		if _, err := fmt.Sscanf(p, "%d", &port); err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("--repo %q: bad port", raw)
		}
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	return &remote{url: u, host: strings.ToLower(u.Hostname()), port: port, path: path}, nil
}

// safePath is a repository path: segments of URL-safe characters, no
// empty, "." or ".." segment (the fetch scope compares paths as text).
var safePath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+/?$`) })

// String is the URL as given.
func (r *remote) String() string { return r.url.String() }

// headerKey is the configuration key that scopes a header to this
// repository's URLs (git matches http.<url>.* by prefix).
func (r *remote) headerKey() string { return "http." + r.url.String() + ".extraHeader" }

// hostHeaderKey scopes a header to the repository's host (a submodule on
// the same forge).
func (r *remote) hostHeaderKey() string {
	return "http." + r.url.Scheme + "://" + r.url.Host + "/.extraHeader"
}

// validBranch is what agentrun accepts as a branch name: git's rules
// (check-ref-format --branch) and no more than 200 bytes.
var branchRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._/+-]+$`) })

func validBranch(b string) error {
	switch {
	case b == "" || len(b) > 200:
		return fmt.Errorf("--branch %q: give a branch name of 1 to 200 characters", b)
	case !branchRe().MatchString(b), strings.HasPrefix(b, "-"), strings.HasPrefix(b, "/"), strings.HasSuffix(b, "/"),
		strings.HasSuffix(b, "."), strings.HasSuffix(b, ".lock"), strings.Contains(b, ".."), strings.Contains(b, "//"),
		strings.Contains(b, "/."), strings.HasPrefix(b, "."), b == "HEAD":
		return fmt.Errorf("--branch %q is not a branch name git accepts (letters, digits and . _ / + -, no .. or //, not ending in / . or .lock)", b)
	}
	return nil
}

// validRef is what agentrun passes to the remote as --ref: a branch or tag
// name, refs/..., or a full commit id.
func validRef(r string) error {
	if r == "" {
		return nil
	}
	if hexID().MatchString(r) {
		return nil
	}
	name := strings.TrimPrefix(r, "refs/")
	if err := validBranch(name); err != nil {
		return fmt.Errorf("--ref %q is not a branch, a tag or a full commit id", r)
	}
	return nil
}

var hexID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`) })
