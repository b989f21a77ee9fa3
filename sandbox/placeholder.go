package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun-dev/agentrun/internal/safefile"
)

// A deny path that does not exist gets a placeholder on the host (an empty
// directory or file) that the sandbox mounts over, so that what appears
// there during the run stays hidden (see PrepareDeny). The homes it is made
// in belong to other users as often as not: a root caller's deny list
// covers the workspace owner's home, whose owner chose every link in it.
// So a placeholder is made
//
//   - by a walk that follows no link in a directory that anyone but root
//     could change (safefile.Guard's OthersUntrusted): a home owner who
//     links ~/.config to /etc gets no /etc/gh made by root;
//   - relative to the directory that walk opened (mkdirat, openat with
//     O_EXCL|O_NOFOLLOW), so that a link swapped in after the walk is not
//     followed either;
//   - only in a directory the caller owns, or, for a root caller, given to
//     the directory's owner at once (by descriptor): no root-owned ~/.ssh
//     is left in which its user could not make their own;
//   - and removed when the run ends, by the same directory descriptor,
//     only while it is still the placeholder made (same device and inode;
//     a file still empty; a directory still empty, as rmdir requires).
//
// Concurrent runs share placeholders: one run may mount over an empty
// ~/.ssh another made, and the kernel detaches a mount in every namespace
// when its mount point is removed, which would drop that run's protection.
// So each run holds a shared lock (flock) on every existing deny path that
// could be a placeholder (an empty file or a directory) for as long as it
// runs, and its own placeholders too; a run removes a placeholder only
// when it gets the exclusive lock. A placeholder carries the extended
// attribute placeholderMark, so that the last run holding it removes it
// whichever run made it (where the file system keeps no user attributes,
// a placeholder another run still held when its maker ended stays, empty
// and its owner's). The mark only ever lets a run remove an empty file or
// directory it reached as it would make one: a home owner who marks their
// own loses nothing they could not remove themselves.

// placeholders are what one run holds of its deny paths on the host.
type placeholders struct {
	made  []*madePlaceholder
	locks []*os.File // shared locks on deny paths the run did not make
}

// madePlaceholder is a placeholder this run made, or found and may remove
// (adopt).
type madePlaceholder struct {
	dir  *os.File // the directory that holds it (O_PATH)
	name string
	f    *os.File // the placeholder itself, open and shared-locked
	id   fileID
	file bool
}

// placeholderMark is the extended attribute that marks a placeholder.
const placeholderMark = "user.agentrun.placeholder"

// placeholderGuard is the walk to a placeholder's directory.
var placeholderGuard = safefile.Guard{OthersUntrusted: true}

// errPlaceholderCame is make's answer when something other than a link
// took the name meanwhile (another run's placeholder, most likely): the
// caller looks at the path again.
var errPlaceholderCame = errors.New("the deny path appeared while its placeholder was made")

// make creates the placeholder for the missing deny path p (a file when
// isFile), as described above. It returns the placeholder's path as the
// kernel names it (for the mount), or "" when none was made: the path goes
// through a link, its directory is missing or another user's (for a
// caller that is not root), or it is a dangling link. When something else
// took the name meanwhile (a link to what exists included) it returns
// errPlaceholderCame.
func (ps *placeholders) make(p string, isFile bool) (string, error) {
	dir, name, err := placeholderGuard.Parent(p)
	if err != nil {
		if errors.Is(err, safefile.ErrLink) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
			errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return "", nil
		}
		return "", err
	}
	keep := false
	defer func() {
		if !keep {
			dir.Close()
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return "", err
	}
	owner, group := int(st.Uid), int(st.Gid)
	euid := os.Geteuid()
	if owner != euid && euid != 0 {
		return "", nil // another user's directory: theirs to fill
	}
	f, err := createPlaceholder(int(dir.Fd()), name, isFile)
	switch {
	case errors.Is(err, fs.ErrExist):
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK &&
			unix.Fstatat(int(dir.Fd()), name, &st, 0) != nil {
			return "", nil // a dangling link: not followed, and nothing to hide
		}
		// Something that is there: another run's placeholder, or a link
		// to what exists, which the next look covers where it leads.
		return "", errPlaceholderCame
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS):
		return "", nil // neither can the run create it
	case err != nil:
		return "", fmt.Errorf("%s: %w", p, err)
	}
	m := &madePlaceholder{dir: dir, name: name, f: f, file: isFile}
	if m.id, _, err = statFD(int(f.Fd())); err != nil {
		m.remove()
		return "", err
	}
	// Locked before anyone else could open it (it is private until the
	// chmod below); an exclusive lock another user took in between would
	// only make this run go on without one (sharedLock).
	_ = sharedLock(int(f.Fd()))
	if mode := placeholderMode(&st, isFile); mode != privateMode(isFile) {
		// By descriptor, not through the umask.
		if err := unix.Fchmod(int(f.Fd()), mode); err != nil {
			m.remove()
			return "", err
		}
	}
	_ = unix.Fsetxattr(int(f.Fd()), placeholderMark, []byte("1"), 0) // best effort: see above
	if owner != euid {
		// A root caller in another user's directory: the placeholder is
		// the directory owner's, as if they had made it.
		if err := unix.Fchown(int(f.Fd()), owner, group); err != nil {
			m.remove()
			return "", fmt.Errorf("cannot give the placeholder %s to its directory's owner: %w", p, err)
		}
	}
	dirName, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())))
	if err != nil {
		m.remove()
		return "", err
	}
	keep = true
	ps.made = append(ps.made, m)
	return dirName + "/" + name, nil
}

// privateMode is the mode of a placeholder only its owner may open.
func privateMode(isFile bool) uint32 {
	if isFile {
		return 0o600
	}
	return 0o700
}

// placeholderMode is the mode of a placeholder made in the directory dir:
// private, except a directory of root's in a directory of root's that
// other users may search (/run/secrets in /run), where any user's run may
// find it. Every user may open that one (0755): a run holds a deny path by
// a shared lock on it, which needs an open file, and a run that cannot
// hold root's placeholder loses it under its mount point when root's run
// ends (the mount is detached in every namespace, or bubblewrap fails to
// make the mount point on the read-only root). An empty directory of
// root's gives nobody anything, and a lock another user holds on it makes
// a run wait lockWait at most. A file stays private (0600): one left in
// place while another run held it would give its mode to a secret written
// there later (an existing file keeps its mode when opened with O_CREAT).
func placeholderMode(dir *unix.Stat_t, isFile bool) uint32 {
	if isFile || dir.Uid != 0 || dir.Mode&0o011 == 0 {
		return privateMode(isFile)
	}
	return 0o755
}

// createPlaceholder makes name in the directory dirFD: an empty file or
// directory, private, never through a link, and opens it.
func createPlaceholder(dirFD int, name string, isFile bool) (*os.File, error) {
	if isFile {
		fd, err := unix.Openat(dirFD, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	if err := unix.Mkdirat(dirFD, name, 0o700); err != nil {
		return nil, err
	}
	return openMadeDir(dirFD, name)
}

// openMadeDir opens the directory name just made in dirFD, or fails with
// fs.ErrExist when what is there now is not it.
func openMadeDir(dirFD int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// Swapped for something else already: not ours to open or remove.
		return nil, fs.ErrExist
	}
	f := os.NewFile(uintptr(fd), name)
	// The name is reopened, so it may be another directory by now: one
	// whoever may rename in dirFD exchanged for it (renameat2
	// RENAME_EXCHANGE), which the chmod, mark and chown below must never
	// touch. Ours is this caller's, private, with no subdirectory and
	// nothing in it.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 || st.Nlink != 2 {
		f.Close()
		return nil, fs.ErrExist
	}
	if names, _ := f.Readdirnames(1); len(names) != 0 {
		f.Close()
		return nil, fs.ErrExist
	}
	return f, nil
}

// lockWait bounds how long a run waits for a lock on a deny path. A run
// holds its lock shared, and the exclusive one of a run that ends lasts a
// few system calls; a user who may open a placeholder (root's in /run are
// open to all) could hold an exclusive lock for ever, and a run must not
// wait on them: it goes on without the lock.
const lockWait = time.Second

// sharedLock takes a shared lock on fd, waiting at most lockWait.
func sharedLock(fd int) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hold takes a shared lock on the existing deny path real (the path the
// sandbox mounts over) when it could be another run's placeholder: an
// empty regular file or a directory. It is opened without following a
// link (O_PATH, then reopened through /proc so that nothing but a file or
// a directory is ever opened for reading) and checked to still be at real
// once locked: false means it went meanwhile (its run removed it) and the
// caller should look again.
func (ps *placeholders) hold(real string) (bool, error) {
	pfd, err := unix.Open(real, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, nil // nothing a placeholder could be (a link, unreadable)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return true, nil
	}
	typ := st.Mode & unix.S_IFMT
	if !(typ == unix.S_IFDIR || typ == unix.S_IFREG && st.Size == 0) {
		return true, nil
	}
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK
	if typ == unix.S_IFDIR {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), flags, 0)
	if err != nil {
		return true, nil // not ours to open, so not ours to lock (see placeholderMode)
	}
	f := os.NewFile(uintptr(fd), real)
	if err := sharedLock(fd); err != nil {
		f.Close()
		return true, nil // held exclusively for longer than a run ends in: go on without
	}
	var now unix.Stat_t
	if err := unix.Lstat(real, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		f.Close()
		return false, nil
	}
	if m := adopt(f, real, fileID{st.Dev, st.Ino}, typ == unix.S_IFREG); m != nil {
		ps.made = append(ps.made, m)
		return true, nil
	}
	ps.locks = append(ps.locks, f)
	return true, nil
}

// adopt makes the locked deny path f (at real, of identity id) one this
// run may remove at its end, when it is a marked placeholder as one is
// made: of the mode make gives it (placeholderMode: private, or readable
// by all in a directory of root's that all may search) and owned by its
// directory's owner, so that only that owner (or root) could have marked
// it (user attributes need write permission), in a directory walked to
// without following links other users chose. It returns nil otherwise.
func adopt(f *os.File, real string, id fileID, isFile bool) *madePlaceholder {
	if _, err := unix.Fgetxattr(int(f.Fd()), placeholderMark, make([]byte, 8)); err != nil {
		return nil
	}
	dir, name, err := placeholderGuard.Parent(real)
	if err != nil {
		return nil
	}
	var st, dst unix.Stat_t
	if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || (fileID{st.Dev, st.Ino}) != id ||
		unix.Fstat(int(dir.Fd()), &dst) != nil || st.Mode&0o7777 != placeholderMode(&dst, isFile) || st.Uid != dst.Uid {
		dir.Close()
		return nil
	}
	return &madePlaceholder{dir: dir, name: name, f: f, id: id, file: isFile}
}

// close releases the run's locks and removes its own placeholders that no
// other run holds. A placeholder that is no longer what was made (filled,
// replaced) is left as it is.
func (ps *placeholders) close() {
	if ps == nil {
		return
	}
	for _, f := range ps.locks {
		f.Close()
	}
	ps.locks = nil
	for i := len(ps.made) - 1; i >= 0; i-- { // the innermost first
		ps.made[i].removeUnlessShared()
	}
	ps.made = nil
}

// removeUnlessShared removes the placeholder when this run alone holds it;
// else it stays for the last run that does.
func (m *madePlaceholder) removeUnlessShared() {
	if err := unix.Flock(int(m.f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		m.release()
		return
	}
	m.remove()
}

// remove unlinks the placeholder by its directory's descriptor while it is
// still what was made: the same file, a file still empty (a directory must
// be empty for rmdir anyway).
func (m *madePlaceholder) remove() {
	defer m.release()
	var st unix.Stat_t
	if err := unix.Fstatat(int(m.dir.Fd()), m.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || (fileID{st.Dev, st.Ino}) != m.id {
		return
	}
	if m.file {
		if st.Size == 0 {
			_ = unix.Unlinkat(int(m.dir.Fd()), m.name, 0)
		}
		return
	}
	_ = unix.Unlinkat(int(m.dir.Fd()), m.name, unix.AT_REMOVEDIR)
}

func (m *madePlaceholder) release() {
	if m.f != nil {
		m.f.Close()
		m.f = nil
	}
	if m.dir != nil {
		m.dir.Close()
		m.dir = nil
	}
}
