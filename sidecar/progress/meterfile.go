package progress

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
)

// The meter file carries the filter proxy's count from the runner (`agentrun
// run --meter-file`) to the sidecar while the run goes on: the event stream
// has the meter only in its end event. The runner replaces the file whole
// (a write to a temporary file, then a rename), so a reader never sees half
// of it. It lives in the Pod's shared volume, which the sandboxed agent can
// read but not write, and exists only for runs with credentials, which
// always run in the sandbox.

// WriteMeterFile replaces the file at path with m.
func WriteMeterFile(path string, m Meter) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := firstErr(werr, cerr, os.Chmod(tmp, 0o644)); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// ReadMeterFile reads the file at path; false when it does not exist (yet)
// or does not hold a meter.
func ReadMeterFile(path string) (Meter, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Meter{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return Meter{}, false
	}
	var m Meter
	if json.Unmarshal(b, &m) != nil {
		return Meter{}, false
	}
	return m, true
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
