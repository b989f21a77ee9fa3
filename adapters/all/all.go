// Package all links every runtime adapter: the one list of runtimes
// agentrun knows (as Kueue's jobs.go lists its integrations). Adding a
// runtime is a folder under adapters/, a line in adapters/clis.txt, and a
// line here; TestEveryPlaceKnowsEveryRuntime then lists every other place
// that must learn its name.
package all

import (
	// Each adapter registers itself with package adapters in its init:
	// these imports are the registration.
	_ "github.com/agentrun-dev/agentrun/adapters/claudecode"
	_ "github.com/agentrun-dev/agentrun/adapters/codex"
	_ "github.com/agentrun-dev/agentrun/adapters/dsh"
	_ "github.com/agentrun-dev/agentrun/adapters/pi"
)
