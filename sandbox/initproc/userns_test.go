package initproc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestIDMapsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		uids, gids []IDMap
		arg        string
		uid, gid   string
	}{
		{[]IDMap{{0, 0, 1}, {1000, 1 << 30, 1}}, []IDMap{{0, 0, 1}, {1000, 1 << 30, 1}},
			"0 0 1,1000 1073741824 1/0 0 1,1000 1073741824 1", "0 0 1\n1000 1073741824 1\n", "0 0 1\n1000 1073741824 1\n"},
		{[]IDMap{{1001, 7, 1}}, []IDMap{{1002, 7, 1}}, "1001 7 1/1002 7 1", "1001 7 1\n", "1002 7 1\n"},
	} {
		arg := FormatIDMaps(tc.uids, tc.gids)
		if arg != tc.arg {
			t.Errorf("FormatIDMaps = %q, want %q", arg, tc.arg)
		}
		uid, gid, err := parseIDMaps(arg)
		if err != nil || uid != tc.uid || gid != tc.gid {
			t.Errorf("parseIDMaps(%q) = %q, %q, %v", arg, uid, gid, err)
		}
	}
	for _, bad := range []string{"", "0 0 1", "0 0/0 0 1", "0 0 1/0 -1 1", "0 0 1\n1 1 1/0 0 1", "a b c/0 0 1", "0 0 1/"} {
		if uid, gid, err := parseIDMaps(bad); err == nil {
			t.Errorf("parseIDMaps(%q) = %q, %q: want an error", bad, uid, gid)
		}
	}
}

// TestNewUserNS: the namespace the helper hands out has the maps asked for,
// as a process that joins it sees them, and the child that made it is
// reaped (none is left behind).
func TestNewUserNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	const host = 1<<30 + 4242
	for _, tc := range []struct {
		name       string
		uids, gids []IDMap
	}{
		{"agent", []IDMap{{0, 0, 1}, {1000, host, 1}}, []IDMap{{0, 0, 1}, {1000, host, 1}}},
		{"workspace owner", []IDMap{{1001, host, 1}}, []IDMap{{1002, host, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uidMap, gidMap, err := parseIDMaps(FormatIDMaps(tc.uids, tc.gids))
			if err != nil {
				t.Fatal(err)
			}
			fd, err := newUserNS(uidMap, gidMap)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(fd)
			if _, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); err != syscall.ECHILD {
				t.Errorf("a child is left unreaped: wait4 = %v", err)
			}
			// nsenter joins the namespace by the open descriptor, which is
			// all that keeps it.
			out, err := exec.Command("nsenter", "--preserve-credentials", fmt.Sprintf("--user=/proc/%d/fd/%d", os.Getpid(), fd), "--",
				"cat", "/proc/self/uid_map", "/proc/self/gid_map").CombinedOutput()
			if err != nil {
				t.Fatalf("nsenter: %v %s", err, out)
			}
			if got, want := strings.Join(strings.Fields(string(out)), " "), strings.Join(strings.Fields(uidMap+gidMap), " "); got != want {
				t.Errorf("maps inside = %q, want %q", got, want)
			}
		})
	}
}
