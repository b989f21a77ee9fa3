package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentrun-dev/agentrun/internal/phases"
	"github.com/agentrun-dev/agentrun/sandbox/initproc"
)

// A root caller's agent must not be the host's root. Inside bubblewrap's
// user namespace root keeps its real uid 0 (without capabilities), which
// still owns every root file: /etc/shadow reads as its owner's, and /proc/sys
// files owned by root are writable (kernel.core_pattern runs a program of
// its choice as real root on the next crash). So when agentrun runs as
// root the agent runs as AgentUID inside a user namespace of its own that
// maps AgentUID to a random, otherwise unused uid outside (the "host uid"),
// which owns nothing on the host:
//
//   - bubblewrap joins that namespace (--userns), where uid 0 is still the
//     real root, so it can set up the mounts as before (it reads the CLI and
//     the deny placeholders wherever they are), and keeps CAP_SETUID and
//     CAP_SETGID for the init, which drops to AgentUID before it starts the
//     agent (InitOptions.UID);
//   - the workspace is bound from an idmapped mount that shows its owner's
//     files as the host uid's, so the agent can write them and what it
//     creates lands on disk as the workspace owner's, as before;
//   - the run's state directory (its HOME) is given to the host uid;
//   - directories on the way to what the agent needs that other users
//     cannot search (a workspace under /root) are covered by an empty
//     tmpfs: the agent could not have read anything below them anyway;
//   - /etc/passwd and /etc/group name the agent, so tools that look their
//     user up (Node's os.userInfo, git) keep working.

// AgentUID is the agent's uid (and gid) inside the sandbox of a root caller.
const AgentUID = 1000

// The host uid of a root caller's agent is random in [hostIDBase,
// hostIDBase+hostIDSpan): far above the ranges distributions hand to users
// (1000–60000) and to rootless containers (/etc/subuid usually starts at
// 100000 with 65536 ids per user), so that it owns no file and shares no
// process with anything on the host, and two runs do not share one. A pick
// is also checked against what the host uses (pickHostID): the ids of
// /etc/passwd and /etc/group, the ranges of /etc/subuid and /etc/subgid,
// and the ids of every running process (a concurrent run's agent
// included). Files are not searched for an owner: that would mean reading
// every file system, and nothing hands out ids this high.
const (
	hostIDBase = 1 << 30
	hostIDSpan = 1 << 28
)

// hostIDPicks bounds the draws: with ids this sparse a used one is drawn
// about never, and an id space where 64 draws all hit is no place to run.
const hostIDPicks = 64

// dropped is what a root caller's sandbox holds on the host side.
type dropped struct {
	hostUID int
	userns  *os.File // 0→0 for bubblewrap's set-up, AgentUID→hostUID for the agent
	hostDir string   // runner-private; the idmapped workspace is attached here
	ws      string   // hostDir/ws, where the idmapped workspace is attached
	wsDir   *os.File // ws once attached (O_PATH): the source of the workspace's mounts
	mounted bool     // the workspace is attached at ws
	passwd  []byte
	group   []byte
	masks   []string
}

// needsDrop reports whether the agent would otherwise run as the host's root.
func needsDrop() bool { return os.Geteuid() == 0 }

// newDropped prepares a root caller's sandbox for cfg. helper starts the
// init, which makes the user namespaces (initproc.UsernsFlag).
func newDropped(cfg Config, helper []string) (d *dropped, err error) {
	d = &dropped{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	// The processes' ids are read while the namespaces are made for an
	// id that the files leave free (reading /proc takes longer than
	// making them; PrefetchHostIDs starts it earlier); an id a process
	// turns out to use, which almost never happens, is drawn again with
	// them (agentHostID).
	phases.Mark("drop-host-uid")
	procs := takeRunningIDs()
	filesOnly := hostFiles
	filesOnly.proc = ""
	var wsNS *os.File
	d.hostUID, err = agentHostID(randomHostID, hostIDsInUse(filesOnly), func() map[int]bool {
		phases.Mark("drop-running-ids")
		return <-procs
	},
		func(id int) (err error) {
			phases.Mark("drop-userns")
			d.userns, wsNS, err = newNamespaces(helper, cfg.Dir, id)
			return err
		},
		func() {
			d.userns.Close()
			wsNS.Close()
			d.userns, wsNS = nil, nil
		})
	if err != nil {
		return d, err
	}
	defer wsNS.Close()
	if d.hostDir, err = os.MkdirTemp("", "agentrun-host-"); err != nil {
		return d, err
	}
	d.ws = filepath.Join(d.hostDir, "ws")
	if err := os.Mkdir(d.ws, 0o700); err != nil {
		return d, err
	}
	phases.Mark("drop-idmap")
	if err := idmappedBind(cfg.Dir, d.ws, wsNS); err != nil {
		return d, fmt.Errorf("cannot give the workspace %s to the agent's user (an idmapped mount, which agentrun needs when it runs as root): %w; "+
			"use a workspace on a filesystem that supports idmapped mounts (ext4, xfs, btrfs, tmpfs) or run agentrun as a non-root user", cfg.Workspace, err)
	}
	d.mounted = true
	fd, err := unix.Open(d.ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return d, fmt.Errorf("cannot open the agent's copy of the workspace: %w", err)
	}
	d.wsDir = os.NewFile(uintptr(fd), d.ws)
	phases.Mark("drop-rest")
	for _, p := range cfg.Writable {
		if err := chownTree(p, d.hostUID); err != nil {
			return d, fmt.Errorf("cannot give %s to the agent's user: %w", p, err)
		}
	}
	if d.passwd, err = withAgentEntry("/etc/passwd", fmt.Sprintf("agent:x:%d:%d:agentrun agent:%s:/bin/sh", AgentUID, AgentUID, cfg.Home), 2); err != nil {
		return d, err
	}
	if d.group, err = withAgentEntry("/etc/group", fmt.Sprintf("agent:x:%d:", AgentUID), 2); err != nil {
		return d, err
	}
	needed := append(append([]string{cfg.Workspace}, cfg.Writable...), cfg.ReadOnly...)
	d.masks = unsearchableAncestors(needed, d.hostUID, statPath)
	return d, nil
}

// newNamespaces makes the agent's user namespace (0 to 0 for bubblewrap's
// set-up, AgentUID to hostUID) and the one that maps the workspace's owner
// to hostUID for its idmapped mount (userNamespaces: how, in
// sandbox/initproc/userns.go).
func newNamespaces(helper []string, ws *Workspace, hostUID int) (agent, wsNS *os.File, err error) {
	ids := []initproc.IDMap{{Inside: 0, Outside: 0, Count: 1}, {Inside: AgentUID, Outside: hostUID, Count: 1}}
	fds, err := userNamespaces(helper, initproc.FormatIDMaps(ids, ids),
		initproc.FormatIDMaps([]initproc.IDMap{{Inside: ws.UID, Outside: hostUID, Count: 1}},
			[]initproc.IDMap{{Inside: ws.GID, Outside: hostUID, Count: 1}}))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot create the agent's user namespaces: %w", err)
	}
	return fds[0], fds[1], nil
}

// userNamespaces makes the namespaces of these maps (initproc.FormatIDMaps
// each), in this process where it can (initproc.UserNamespaces), or else
// by the init as the namespace helper, and returns their handles. Only an
// unsupported in-process path falls back: any other failure would be the
// helper's too (the same kernel, the same seccomp filter), or a sign that
// something else reaps this process's children, which must not pass.
func userNamespaces(helper []string, maps ...string) ([]*os.File, error) {
	fds, err := initproc.UserNamespaces(maps...)
	if errors.Is(err, initproc.ErrNoInProcessUserns) {
		// No vfork path here, or no pidfds: the helper forks them.
		return userNamespacesByHelper(helper, maps...)
	}
	if err != nil {
		return nil, err
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "userns")
	}
	return files, nil
}

// userNamespacesByHelper runs the init as the namespace helper for these
// maps and returns the handles it sends.
func userNamespacesByHelper(helper []string, maps ...string) ([]*os.File, error) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "userns"), os.NewFile(uintptr(pair[1]), "userns-helper")
	defer ours.Close()
	cmd := exec.Command(helper[0], append(append(helper[1:len(helper):len(helper)], initproc.UsernsFlag), maps...)...)
	// It needs no environment, and the runner's (the agent container's,
	// in a Pod) may hold loader variables (loaderenv.go).
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{theirs} // initproc.UsernsFD
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return nil, err
	}
	// The helper's end closes when it exits: a helper that failed gives
	// EOF, and its stderr says why.
	oob := make([]byte, syscall.CmsgSpace(len(maps)*4))
	_, oobn, _, _, rerr := syscall.Recvmsg(int(ours.Fd()), make([]byte, 16), oob, syscall.MSG_CMSG_CLOEXEC)
	var fds []int
	if rerr == nil {
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			fds, _ = syscall.ParseUnixRights(&msgs[0])
		}
	}
	if len(fds) != len(maps) {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		werr := cmd.Wait()
		why := []string{fmt.Sprintf("it sent %d of %d namespaces", len(fds), len(maps))}
		for _, err := range []error{rerr, werr} {
			if err != nil {
				why = append(why, err.Error())
			}
		}
		if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
			why = append(why, string(msg))
		}
		return nil, fmt.Errorf("the namespace helper %s failed: %s", helper[0], strings.Join(why, "; "))
	}
	// Its work is done once the handles are here: it is reaped while the
	// sandbox starts (its exit is half a millisecond).
	go func() { _ = cmd.Wait() }()
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "userns")
	}
	return files, nil
}

// release detaches what the host side no longer needs once bubblewrap has
// set the sandbox up: the sandbox holds its own copy of the workspace mount.
// ws is the user's workspace until the unmount succeeded: the directories
// are removed one by one (rmdir), never recursively, and not at all when
// the unmount failed, so that nothing of the workspace can be removed.
func (d *dropped) release() {
	if d == nil {
		return
	}
	if d.userns != nil {
		d.userns.Close()
		d.userns = nil
	}
	if d.wsDir != nil {
		d.wsDir.Close()
		d.wsDir = nil
	}
	if d.mounted {
		if err := unmount(d.ws, unix.MNT_DETACH); err != nil {
			d.ws, d.hostDir = "", "" // an empty private directory left behind
			return
		}
		d.mounted = false
	}
	for _, dir := range []string{d.ws, d.hostDir} {
		if dir != "" {
			_ = os.Remove(dir)
		}
	}
	d.ws, d.hostDir = "", ""
}

// unmount is unix.Unmount (a test makes it fail).
var unmount = unix.Unmount

func (d *dropped) close() { d.release() }

func randomHostID() int {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hostIDBase + int(binary.LittleEndian.Uint32(b[:])%hostIDSpan)
}

// pickHostID draws ids until one is not in use.
func pickHostID(draw func() int, inUse func(int) bool) (int, error) {
	for range hostIDPicks {
		if id := draw(); !inUse(id) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("found no unused uid for the agent in %d draws between %d and %d", hostIDPicks, hostIDBase, hostIDBase+hostIDSpan)
}

// agentHostID chooses the agent's host id: it draws one that the files
// leave free (pickHostID with filesInUse), has build make the namespaces
// for it, and only then looks at the ids of the running processes
// (running, called once: they are read meanwhile). In the rare case a
// process uses the id, undo drops what build made and an id is drawn
// again, from those that neither the files nor the processes use, so a
// second build is the last. The id returned is the one build last made
// the namespaces for.
func agentHostID(draw func() int, filesInUse func(int) bool, running func() map[int]bool, build func(id int) error, undo func()) (int, error) {
	inUse := filesInUse
	var procs map[int]bool
	for {
		id, err := pickHostID(draw, inUse)
		if err != nil {
			return 0, err
		}
		if err := build(id); err != nil {
			return 0, err
		}
		if procs == nil {
			if procs = running(); procs == nil {
				procs = map[int]bool{}
			}
		}
		if !procs[id] {
			return id, nil
		}
		undo()
		inUse = func(id int) bool { return filesInUse(id) || procs[id] }
	}
}

// The ids of the host's processes are read in the background, from the
// start of a run if it calls PrefetchHostIDs: reading /proc costs a
// millisecond or two, which the run's own start (flags, workspace,
// repository search) then covers.
var prefetchedIDs struct {
	sync.Mutex
	ids chan map[int]bool
}

// PrefetchHostIDs starts reading the ids of the host's running processes,
// which a root caller's drop checks its agent's id against (newDropped),
// while the run goes on; it does nothing for a caller that makes no drop.
// The next sandbox prepared uses what it read.
func PrefetchHostIDs() {
	if !needsDrop() {
		return
	}
	prefetchedIDs.Lock()
	defer prefetchedIDs.Unlock()
	if prefetchedIDs.ids == nil {
		prefetchedIDs.ids = readRunningIDs()
	}
}

// takeRunningIDs is what PrefetchHostIDs started reading, once; or a read
// started now.
func takeRunningIDs() chan map[int]bool {
	prefetchedIDs.Lock()
	ids := prefetchedIDs.ids
	prefetchedIDs.ids = nil
	prefetchedIDs.Unlock()
	if ids == nil {
		ids = readRunningIDs()
	}
	return ids
}

// readRunningIDs reads the running processes' ids in the background.
func readRunningIDs() chan map[int]bool {
	ch := make(chan map[int]bool, 1)
	go func() {
		ids := map[int]bool{}
		procIDs(hostFiles.proc, ids)
		ch <- ids
	}()
	return ch
}

// hostSources are where the host's ids are read.
type hostSources struct {
	passwd, group, subuid, subgid, proc string
}

var hostFiles = hostSources{"/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid", "/proc"}

// hostIDsInUse reads the ids the host uses (see hostIDBase) and reports
// whether an id is one of them, as a uid or a gid (the agent's host id is
// both).
func hostIDsInUse(src hostSources) func(int) bool {
	ids := map[int]bool{}
	var ranges [][2]int // [start, end)
	for _, f := range []struct {
		path  string
		field int
	}{{src.passwd, 2}, {src.passwd, 3}, {src.group, 2}} {
		forFields(f.path, func(fields []string) {
			if len(fields) > f.field {
				if id, err := strconv.Atoi(fields[f.field]); err == nil {
					ids[id] = true
				}
			}
		})
	}
	for _, path := range []string{src.subuid, src.subgid} {
		forFields(path, func(fields []string) {
			if len(fields) == 3 {
				start, err1 := strconv.Atoi(fields[1])
				n, err2 := strconv.Atoi(fields[2])
				if err1 == nil && err2 == nil {
					ranges = append(ranges, [2]int{start, start + n})
				}
			}
		})
	}
	procIDs(src.proc, ids)
	return func(id int) bool {
		if ids[id] {
			return true
		}
		for _, r := range ranges {
			if id >= r[0] && id < r[1] {
				return true
			}
		}
		return false
	}
}

// procIDs adds the uids and gids (real, effective, saved, file system) of
// every process under the proc directory to ids. It reads /proc by name,
// each process's status once into one buffer (a glob would list every
// process's directory too, which costs more than the reads: this runs on
// every start of a root caller's sandbox), with the bare system calls: an
// os.File per process (its poller check, its finalizer) cost as much as the
// read itself.
func procIDs(proc string, ids map[int]bool) {
	d, err := os.Open(proc)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	buf := make([]byte, 4096)
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		fd, err := unix.Open(proc+"/"+name+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone meanwhile
		}
		// One read: the kernel makes the whole file at once, and Uid and
		// Gid come well within the first 4 KiB (after Name, Umask, State,
		// Tgid, Ngid, Pid, PPid, TracerPid; a name is at most 64 bytes,
		// escaped).
		n, _ := unix.Read(fd, buf)
		unix.Close(fd)
		statusIDs(buf[:max(n, 0)], ids)
	}
}

// statusIDs adds the ids of a status file's Uid and Gid lines to ids. Every
// such line counts: the kernel escapes a newline in a process's name, so
// only its own lines begin so, and an id too many only narrows the draw.
func statusIDs(status []byte, ids map[int]bool) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			if rest, ok = bytes.CutPrefix(line, []byte("Gid:")); !ok {
				continue
			}
		}
		for _, v := range bytes.Fields(rest) {
			if id, err := strconv.Atoi(string(v)); err == nil {
				ids[id] = true
			}
		}
	}
}

// forFields calls f with the colon-separated fields of each line of path
// (a missing file has none).
func forFields(path string, f func([]string)) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			f(strings.Split(line, ":"))
		}
	}
}

// idmappedBind attaches at target a copy of the mount tree at the open
// directory src (by its descriptor, not its path) whose files show with
// the ids the user namespace ns maps them to (src's owner to the agent's
// host uid).
func idmappedBind(src *Workspace, target string, ns *os.File) error {
	fd, err := unix.OpenTree(src.fd(), "", unix.AT_EMPTY_PATH|unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP): %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// chownTree gives a runner-made tree to uid (as its gid too), without
// following links.
func chownTree(root string, uid int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// withAgentEntry is the file at path (an /etc/passwd or /etc/group) with the
// entry for AgentUID (field idField) replaced by entry.
func withAgentEntry(path, entry string, idField int) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	id := strconv.Itoa(AgentUID)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) > idField && f[idField] == id || len(f) > 0 && f[0] == "agent" {
			continue
		}
		out.WriteString(sc.Text())
		out.WriteByte('\n')
	}
	out.WriteString(entry)
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// statFunc returns the owner, group and mode of a path.
type statFunc func(p string) (uid, gid int, mode fs.FileMode, err error)

func statPath(p string) (int, int, fs.FileMode, error) {
	st, err := os.Stat(p)
	if err != nil {
		return 0, 0, 0, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	return int(sys.Uid), int(sys.Gid), st.Mode(), nil
}

// unsearchableAncestors returns, for the paths the agent needs, the
// outermost directory above each that uid (in no group of the host) cannot
// search, without repeats or directories inside another. Paths under /tmp
// need none: the sandbox has its own /tmp, where bubblewrap creates the
// directories above a bind.
func unsearchableAncestors(paths []string, uid int, stat statFunc) []string {
	var out []string
	for _, p := range paths {
		if within(p, "/tmp") {
			continue
		}
		for a := filepath.Dir(p); ; a = filepath.Dir(a) {
			if a == "/" {
				break
			}
			owner, _, mode, err := stat(a)
			if err == nil && !searchable(owner, mode, uid) {
				out = outermost(out, a)
			}
		}
	}
	return out
}

// searchable reports whether uid, a member of no group that owns anything,
// may search a directory.
func searchable(owner int, mode fs.FileMode, uid int) bool {
	if owner == uid {
		return mode&0o100 != 0
	}
	return mode&0o001 != 0
}

// outermost adds dir to a list that keeps only the outermost directories.
func outermost(list []string, dir string) []string {
	var out []string
	for _, d := range list {
		if within(dir, d) {
			return list // already covered
		}
		if !within(d, dir) {
			out = append(out, d)
		}
	}
	return append(out, dir)
}

// reachable reports whether the agent could reach p: no directory above it
// is closed to the host uid. A nil drop (no root caller) reaches all.
func (d *dropped) reachable(p string) bool {
	return d == nil || len(unsearchableAncestors([]string{p}, d.hostUID, statPath)) == 0
}
