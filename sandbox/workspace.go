package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A directory named by a path is not the directory the path names a moment
// later: an agent of a concurrent run whose workspace holds this one can
// swap it with a symbolic link (renameat2 RENAME_EXCHANGE) between the
// checks and the mount, and the sandbox would hand out another directory
// (/usr/local/sbin) writable. So the workspace is opened once, walked from
// / without following any link, and everything after goes through that
// descriptor: the checks run on what it is (its name as the kernel gives
// it, its owner), the repositories are searched below it, and it is
// mounted by descriptor (open_tree for a root caller, bwrap --bind-fd
// otherwise, which fails when the path no longer leads to it).

// Workspace is the agent's working directory, held open.
type Workspace struct {
	// Path is the directory's name when it was opened, as the kernel
	// gives it: absolute, without links.
	Path string
	// UID and GID own it.
	UID, GID int
	id       fileID
	f        *os.File // O_PATH|O_DIRECTORY
}

// fileID is a file's identity.
type fileID struct{ dev, ino uint64 }

func (id fileID) String() string { return fmt.Sprintf("%d:%d", id.dev, id.ino) }

// LinkError is a path that goes through a symbolic link.
type LinkError struct {
	Path   string // what was opened
	Link   string // the first link on the way
	Target string // where it points
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("%s goes through the symbolic link %s (to %s)", e.Path, e.Link, e.Target)
}

// OpenWorkspace opens the directory at the absolute path p, walking from /
// one component at a time without following links (a *LinkError names
// the first one).
func OpenWorkspace(p string) (*Workspace, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%s: not an absolute path", p)
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	defer unix.Close(root)
	fd, err := openBeneath(root, strings.TrimPrefix(p, "/"), unix.O_PATH|unix.O_DIRECTORY)
	var le *LinkError
	if errors.As(err, &le) {
		le.Path, le.Link = p, "/"+le.Link
		return nil, le
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return newWorkspace(fd)
}

// CurrentWorkspace opens the current directory, wherever it really is.
func CurrentWorkspace() (*Workspace, error) {
	fd, err := unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: ".", Err: err}
	}
	return newWorkspace(fd)
}

// newWorkspace wraps an open directory descriptor (O_PATH is enough),
// which it takes over.
func newWorkspace(fd int) (*Workspace, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return nil, unix.ENOTDIR
	}
	name, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err == nil && !strings.HasPrefix(name, "/") {
		err = fmt.Errorf("the directory has no name (%s): it was removed, or lies outside this process's root", name)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Workspace{Path: name, UID: int(st.Uid), GID: int(st.Gid), id: fileID{st.Dev, st.Ino},
		f: os.NewFile(uintptr(fd), name)}, nil
}

// Close releases the descriptor.
func (w *Workspace) Close() error {
	if w == nil || w.f == nil {
		return nil
	}
	return w.f.Close()
}

// fd is the workspace's descriptor.
func (w *Workspace) fd() int { return int(w.f.Fd()) }

// ProcPath is a name of the workspace that leads to it whatever happens to
// its path (the descriptor's entry in /proc/self/fd), while it is open.
func (w *Workspace) ProcPath() string { return "/proc/self/fd/" + strconv.Itoa(w.fd()) }

// openBeneath opens rel (relative; "" or "." is dir itself) below the
// directory dir with flags, following no symbolic link: a link on the way,
// or at the end when that fails to open (O_PATH without O_DIRECTORY opens
// the link itself), is a *LinkError with Link relative to dir. ".." is
// refused (EXDEV): the walk never leaves dir.
func openBeneath(dir int, rel string, flags int) (int, error) {
	var parts []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return -1, unix.EXDEV
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return unix.Openat(dir, ".", flags|unix.O_CLOEXEC, 0)
	}
	cur := dir
	for i, c := range parts {
		f := unix.O_PATH | unix.O_DIRECTORY
		if i == len(parts)-1 {
			f = flags
		}
		next, err := unix.Openat(cur, c, f|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			buf := make([]byte, unix.PathMax)
			if n, lerr := unix.Readlinkat(cur, c, buf); lerr == nil {
				err = &LinkError{Link: strings.Join(parts[:i+1], "/"), Target: string(buf[:n])}
			}
		}
		if cur != dir {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// statFD is the identity and type of an open descriptor.
func statFD(fd int) (fileID, uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, 0, err
	}
	return fileID{st.Dev, st.Ino}, st.Mode & unix.S_IFMT, nil
}
