// Package safefile opens the files the runner reads and writes in places an
// agent can write (its workspace, its state directory) without trusting
// what the agent left there. A link planted by an agent would otherwise make
// the runner copy a host file into the agent's reach (a session transcript
// replaced by a link to ~/.ssh/id_rsa or to the runner's own
// /proc/self/environ), or overwrite a host file with agent-written content (a
// link where the event log or a temporary file will be written).
//
// Every path is made absolute (a relative one against the current
// directory, which may be the workspace) and walked from / one component at
// a time with O_NOFOLLOW, so the kernel never follows a link the walk did
// not look at. Each directory on the way is compared by device and inode
// with the untrusted directories, so an alias of the workspace (a
// symbolic link to it, a bind mount, /proc/self/root/...) is recognised as
// the workspace. Outside the untrusted directories a symbolic link is the
// caller's own (/var/run -> /run) and is followed by the walk itself; at or
// below one, a symbolic link anywhere on the path is refused. Files are read
// only when they are regular (never a FIFO or a device, which could block or
// never end), and a read is bounded by the caller's size limit.
package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Guard knows the directories an agent can write.
type Guard struct {
	// Untrusted are directories the agent can write; how they are named
	// does not matter (they are recognised by device and inode).
	Untrusted []string
	// OthersUntrusted makes every directory that anyone but root could
	// change (owned by another user, or writable by its group or by all,
	// as /tmp is) untrusted as well: the walk follows no link at or below
	// it. For a root caller's walks through what other users own (their
	// homes), whose links they chose: only links in directories that root
	// alone can change (/var/run -> /run) are followed.
	OthersUntrusted bool
}

// ErrLink is returned for a path that goes through a symbolic link inside
// an untrusted directory.
var ErrLink = errors.New("a symbolic link inside a directory the agent can write (links there are not followed)")

// ErrNotRegular is returned for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrHardLink is returned for a file to be written at or below an
// untrusted directory that has another name too: whoever can write there
// may have linked a file of the caller's to that name (where the kernel's
// fs.protected_hardlinks is off, any file of the caller's).
var ErrHardLink = errors.New("a file with more than one name (a hard link) inside a directory the agent or another user can write")

// ErrTooLarge is returned for a file larger than the reader's limit.
var ErrTooLarge = errors.New("larger than the limit for this file")

// maxLinks bounds the symbolic links one walk follows, as the kernel's
// own 40 (MAXSYMLINKS) does.
const maxLinks = 40

// Open opens the regular file at path for reading.
func (g Guard) Open(path string) (*os.File, error) {
	return g.open(path, unix.O_RDONLY, 0, false)
}

// ReadFile reads the regular file at path, at most max bytes (ErrTooLarge
// beyond).
func (g Guard) ReadFile(path string, max int64) ([]byte, error) {
	f, err := g.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(LimitReader(f, max))
	if err != nil {
		return nil, pathErr("read", path, err)
	}
	return b, nil
}

// Copy copies the regular file src to dst (as WriteFile does), at most max
// bytes: a larger src (a sparse file of a terabyte) fails with ErrTooLarge
// and leaves dst as it was.
func (g Guard) Copy(dst, src string, max int64, perm os.FileMode) error {
	in, err := g.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err == nil && st.Size() > max {
		return pathErr("read", src, ErrTooLarge)
	}
	return g.WriteFile(dst, LimitReader(in, max), perm)
}

// ReadDir lists the directory at path (the names and types of its
// entries, unsorted), reached by the same walk.
func (g Guard) ReadDir(path string) ([]os.DirEntry, error) {
	w, err := g.walker(path)
	if err != nil {
		return nil, err
	}
	defer w.close()
	fd, _, err := w.openFinal(unix.O_RDONLY|unix.O_DIRECTORY, 0, false)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return f.ReadDir(-1)
}

// Create opens the file at path for writing, creating it or truncating
// it; its directory must exist (a mistyped --raw /nonexistent/dir/raw.jsonl
// makes no directories, at the root or anywhere). At or below an untrusted
// directory it must be a regular file; elsewhere the path is the caller's
// own choice and may be a FIFO or a device (--events /dev/stderr).
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

// Append opens the file at path for appending, creating it; otherwise as
// Create (a profile a benchmark collects over many runs).
func (g Guard) Append(path string, perm os.FileMode) (*os.File, error) {
	return g.open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, perm, true)
}

// MkdirAll makes the directory path and its missing parents (perm), by the
// same walk: it never creates a directory through a link an agent planted.
func (g Guard) MkdirAll(path string, perm os.FileMode) error {
	w, err := g.walker(path)
	if err != nil {
		return err
	}
	defer w.close()
	w.pending = append(w.pending, ".") // walk every component as a directory
	_, _, err = w.parent(true, uint32(perm.Perm()))
	return err
}

// Parent walks to the directory that holds the final name of path, making
// nothing, and returns that directory (opened O_PATH, the caller's to
// close) and the name: the place where the caller may then create the
// name itself, relative to the directory (openat, mkdirat), whatever
// happens to the path meanwhile. A link on the way at or below an
// untrusted directory is ErrLink, a missing directory ENOENT.
func (g Guard) Parent(path string) (*os.File, string, error) {
	w, err := g.walker(path)
	if err != nil {
		return nil, "", err
	}
	defer w.close()
	dirFD, name, err := w.parent(false, 0)
	if err == nil {
		err = w.checkName(name)
	}
	if err != nil {
		return nil, "", err
	}
	fd, err := unix.FcntlInt(uintptr(dirFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, "", pathErr("open", path, err)
	}
	return os.NewFile(uintptr(fd), strings.TrimSuffix(path, "/"+name)), name, nil
}

// checkName refuses a final name that is no file.
func (w *walk) checkName(name string) error {
	if name == "." || name == ".." {
		return fmt.Errorf("%s: not a file path", w.path)
	}
	return nil
}

// WriteFile writes r to path atomically: into a new temporary file beside
// it (never an existing one), renamed over path when complete. A link at
// path itself is replaced, not followed.
func (g Guard) WriteFile(path string, r io.Reader, perm os.FileMode) error {
	w, err := g.walker(path)
	if err != nil {
		return err
	}
	defer w.close()
	dirFD, name, err := w.parent(true, 0o700)
	if err == nil {
		err = w.checkName(name)
	}
	if err != nil {
		return err
	}
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

// open opens path with flags after the walk. writing allows a file that is
// not regular outside the untrusted directories.
func (g Guard) open(path string, flags int, perm os.FileMode, writing bool) (*os.File, error) {
	w, err := g.walker(path)
	if err != nil {
		return nil, err
	}
	defer w.close()
	fd, inside, err := w.openFinal(flags, perm, writing)
	if err != nil {
		return nil, err
	}
	return usable(fd, inside, writing, path)
}

// openFinal walks to the final name and opens it (non-blocking), following
// a final link only outside the untrusted directories, as the walk follows
// the others. It reports whether the file lies at or below an untrusted
// directory. It makes no directory on the way.
func (w *walk) openFinal(flags int, perm os.FileMode, writing bool) (int, bool, error) {
	for {
		dirFD, name, err := w.parent(false, 0o700)
		if err == nil {
			err = w.checkName(name)
		}
		if err != nil {
			return -1, false, err
		}
		inside := w.top().inside
		fd, err := unix.Openat(dirFD, name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
		if errors.Is(err, unix.ENOTDIR) && isLink(dirFD, name) {
			err = unix.ELOOP // O_DIRECTORY met a link
		}
		if errors.Is(err, unix.ELOOP) && !inside {
			// The caller's own link: followed by the walk.
			w.pending = w.pending[1:]
			kernel, err := w.link(dirFD, name)
			if err != nil {
				return -1, false, err
			}
			if !kernel {
				continue
			}
			// A /proc link to a pipe or a socket, opened as the kernel
			// resolves it: there is no path to walk.
			fd, err = unix.Openat(dirFD, name, flags|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
			if err != nil {
				return -1, false, pathErr("open", w.path, err)
			}
			return fd, inside, nil
		}
		if errors.Is(err, unix.ENXIO) && writing && !inside {
			// A FIFO of the caller's with no reader yet: wait for one, as a
			// plain open would.
			fd, err = unix.Openat(dirFD, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		}
		if errors.Is(err, unix.ELOOP) {
			return -1, false, pathErr("open", w.path, ErrLink)
		}
		if err != nil {
			return -1, false, pathErr("open", w.path, err)
		}
		return fd, inside, nil
	}
}

// usable wraps fd if it may be used: a regular file, or (writing outside
// the untrusted directories) anything; in blocking mode.
func usable(fd int, inside, writing bool, path string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathErr("stat", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG && (inside || !writing) {
		unix.Close(fd)
		return nil, pathErr("open", path, ErrNotRegular)
	}
	if writing && inside && st.Nlink > 1 {
		unix.Close(fd)
		return nil, pathErr("open", path, ErrHardLink)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// fileID is a file's identity.
type fileID struct{ dev, ino uint64 }

// level is one directory of the walk, and whether it is or lies below an
// untrusted directory.
type level struct {
	fd     int
	inside bool
}

// walk resolves a path component by component.
type walk struct {
	path    string
	roots   map[fileID]bool
	others  bool     // Guard.OthersUntrusted
	stack   []level  // from / to the current directory
	pending []string // the components still to walk, the final name last
	links   int
}

// walker starts the walk of path at /.
func (g Guard) walker(path string) (*walk, error) {
	if path == "" {
		return nil, pathErr("open", path, unix.ENOENT)
	}
	abs := path
	if !strings.HasPrefix(abs, "/") {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		abs = wd + "/" + path
	}
	w := &walk{path: path, roots: map[fileID]bool{}, others: g.OthersUntrusted}
	for _, d := range g.Untrusted {
		var st unix.Stat_t
		if d != "" && unix.Stat(d, &st) == nil {
			w.roots[fileID{uint64(st.Dev), uint64(st.Ino)}] = true
		}
	}
	w.pending = components(abs)
	if err := w.restart(); err != nil {
		return nil, err
	}
	return w, nil
}

func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// restart sets the walk back to / (an absolute link target).
func (w *walk) restart() error {
	w.close()
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open", "/", err)
	}
	inside, err := w.isRoot(fd)
	if err != nil {
		unix.Close(fd)
		return err
	}
	w.stack = []level{{fd: fd, inside: inside}}
	return nil
}

func (w *walk) close() {
	for _, l := range w.stack {
		unix.Close(l.fd)
	}
	w.stack = nil
}

func (w *walk) top() level { return w.stack[len(w.stack)-1] }

func (w *walk) isRoot(fd int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return w.untrusted(&st), nil
}

// untrusted reports whether the directory st is one the walk follows no
// link at or below: an untrusted directory, or with OthersUntrusted one
// that anyone but root could change.
func (w *walk) untrusted(st *unix.Stat_t) bool {
	if w.roots[fileID{uint64(st.Dev), uint64(st.Ino)}] {
		return true
	}
	return w.others && (st.Uid != 0 || st.Mode&0o022 != 0)
}

// parent walks every pending component but the last, making missing
// directories (perm) when mkdirs, and returns the directory that holds the
// last one and its name. The descriptor belongs to the walk.
func (w *walk) parent(mkdirs bool, perm uint32) (int, string, error) {
	for len(w.pending) > 1 {
		c := w.pending[0]
		w.pending = w.pending[1:]
		switch c {
		case ".":
			continue
		case "..":
			if len(w.stack) > 1 {
				unix.Close(w.top().fd)
				w.stack = w.stack[:len(w.stack)-1]
			}
			continue
		}
		top := w.top()
		fd, err := unix.Openat(top.fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(top.fd, c, perm); err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = unix.Openat(top.fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			return -1, "", pathErr("open", w.path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, "", pathErr("stat", w.path, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			inside := top.inside || w.untrusted(&st)
			w.stack = append(w.stack, level{fd: fd, inside: inside})
		case unix.S_IFLNK:
			unix.Close(fd)
			if top.inside {
				return -1, "", pathErr("open", w.path, ErrLink)
			}
			kernel, err := w.link(top.fd, c)
			if err == nil && kernel {
				err = unix.ENOTDIR // a pipe or a socket is no directory
			}
			if err != nil {
				return -1, "", pathErr("open", w.path, err)
			}
		default:
			unix.Close(fd)
			return -1, "", pathErr("open", w.path, unix.ENOTDIR)
		}
	}
	if len(w.pending) == 0 {
		return -1, "", fmt.Errorf("%s: not a file path", w.path)
	}
	return w.top().fd, w.pending[0], nil
}

// link splices the target of the link name (in dirFD, outside the
// untrusted directories; no longer pending) into the walk: the components
// of a relative target continue from dirFD, an absolute one restarts at /.
// It reports true for a link in /proc whose target is no path (a pipe, a
// socket), which only the kernel can open; the walk is then unchanged.
func (w *walk) link(dirFD int, name string) (bool, error) {
	if w.links++; w.links > maxLinks {
		return false, pathErr("open", w.path, unix.ELOOP)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirFD, name, buf)
	if err != nil {
		return false, pathErr("readlink", w.path, err)
	}
	target := string(buf[:n])
	if !strings.HasPrefix(target, "/") && strings.Contains(target, ":[") && onProc(dirFD) {
		return true, nil
	}
	w.pending = append(components(target), w.pending...)
	if strings.HasPrefix(target, "/") {
		return false, w.restart()
	}
	return false, nil
}

// isLink reports whether name in the directory dirFD is a symbolic link.
func isLink(dirFD int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func onProc(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// LimitReader reads r up to max bytes and fails with ErrTooLarge past
// them (io.LimitReader would end quietly, and a cut file look complete).
func LimitReader(r io.Reader, max int64) io.Reader { return &limited{r: r, left: max} }

type limited struct {
	r    io.Reader
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - 1, ErrTooLarge
	}
	return n, err
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
