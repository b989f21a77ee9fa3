// Package sibling finds the programs that ship beside agentrun (make build
// puts them all in bin/): the sandbox's init and the event-stream
// validator, which are separate binaries so that agentrun itself starts
// fast and the init links nothing of the sandbox's set-up.
package sibling

import (
	"os"
	"path/filepath"
)

// Of returns the path of the program name in the directory of the binary
// at self, and whether it is there as an executable regular file (a
// directory, a device or a file without an execute bit is not a program
// to run).
func Of(self, name string) (path string, ok bool) {
	path = filepath.Join(filepath.Dir(self), name)
	st, err := os.Stat(path)
	return path, err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
