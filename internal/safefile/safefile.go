// Package safefile opens the files the runner reads and writes in places an
// agent can write (its workspace, its state directory) without trusting
// what the agent left there: below such a directory no path component may
// be a symbolic link, and only regular files are opened. A link planted by
// an agent would otherwise make the runner copy a host file into the
// agent's reach (a session transcript replaced by a link to ~/.ssh/id_rsa
// or to the runner's own /proc/self/environ), or overwrite a host file
// with agent-written content (a link where the event log or a temporary
// file will be written). Paths outside those directories are the caller's
// own choice and are opened as given.
package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Guard knows the directories an agent can write.
type Guard struct {
	// Untrusted are absolute, clean directories.
	Untrusted []string
}

// ErrLink is returned for a path that goes through a symbolic link inside
// an untrusted directory.
var ErrLink = errors.New("a symbolic link inside a directory the agent can write (links there are not followed)")

// ErrNotRegular is returned for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens the file at path for reading (a regular file, where the
// agent can write).
func (g Guard) Open(path string) (*os.File, error) {
	return g.open(path, unix.O_RDONLY, 0, false)
}

// ReadFile reads the regular file at path.
func (g Guard) ReadFile(path string) ([]byte, error) {
	f, err := g.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Create opens the file at path for writing (a regular file, where the
// agent can write), creating it (and its missing directories, private) or
// truncating it.
func (g Guard) Create(path string, perm os.FileMode) (*os.File, error) {
	f, err := g.open(path, unix.O_WRONLY|unix.O_CREAT, perm, true)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// WriteFile writes r to path atomically: into a new temporary file beside
// it (never an existing one), renamed over path when complete.
func (g Guard) WriteFile(path string, r io.Reader, perm os.FileMode) error {
	dirFD, name, err := g.parent(path, true)
	if err != nil {
		return err
	}
	defer unix.Close(dirFD)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(dirFD, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return pathErr("create", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirFD, tmp, dirFD, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dirFD, tmp, 0)
		return pathErr("write", path, err)
	}
	return nil
}

// open opens path with flags, refusing links below an untrusted directory
// and anything but a regular file.
func (g Guard) open(path string, flags int, perm os.FileMode, mkdirs bool) (*os.File, error) {
	if g.untrustedRoot(path) == "" {
		// The caller's own choice, which may be a device or a FIFO.
		if mkdirs {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, err
			}
		}
		return os.OpenFile(path, flags, perm)
	}
	dirFD, name, err := g.parent(path, mkdirs)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirFD)
	fd, err := unix.Openat(dirFD, name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	if errors.Is(err, unix.ELOOP) {
		return nil, pathErr("open", path, ErrLink)
	}
	if err != nil {
		return nil, pathErr("open", path, err)
	}
	return regular(fd, path)
}

// regular wraps fd if it is a regular file, in blocking mode.
func regular(fd int, path string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathErr("stat", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, pathErr("open", path, ErrNotRegular)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// parent opens the directory that holds path, walking from the untrusted
// directory above it (or from path's own directory when there is none)
// without following links, and returns it with the final name.
func (g Guard) parent(path string, mkdirs bool) (int, string, error) {
	path = filepath.Clean(path)
	root := g.untrustedRoot(path)
	dir, name := filepath.Split(path)
	if name == "" || name == "." || name == ".." {
		return -1, "", fmt.Errorf("%s: not a file path", path)
	}
	start, rel := filepath.Clean(dir), ""
	if root != "" {
		start, rel = root, strings.TrimPrefix(strings.TrimPrefix(filepath.Clean(dir), root), "/")
	}
	if mkdirs && root == "" {
		if err := os.MkdirAll(start, 0o700); err != nil {
			return -1, "", err
		}
	}
	fd, err := unix.Open(start, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", pathErr("open", start, err)
	}
	if rel == "" {
		return fd, name, nil
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(fd, c, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if errors.Is(err, unix.ENOTDIR) && isLink(fd, c) {
			err = ErrLink
		}
		unix.Close(fd)
		if err != nil {
			return -1, "", pathErr("open", path, err)
		}
		fd = next
	}
	return fd, name, nil
}

// isLink reports whether name in the directory dirFD is a symbolic link.
func isLink(dirFD int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// untrustedRoot is the outermost untrusted directory path lies strictly
// below, or "": the walk starts there, so that no directory the agent can
// replace is ever followed.
func (g Guard) untrustedRoot(path string) string {
	path = filepath.Clean(path)
	best := ""
	for _, d := range g.Untrusted {
		d = filepath.Clean(d)
		if strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") && (best == "" || len(d) < len(best)) {
			best = d
		}
	}
	return best
}

func pathErr(op, path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return err
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = errno
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}
