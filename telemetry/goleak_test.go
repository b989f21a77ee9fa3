package telemetry

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running after them. It gives the exporters FlushTimeout and a
// margin to end: a Recorder's Close returns at its deadline when the
// collector hangs (TestCollectorDownOrHanging), by design, and the SDK's
// export goroutines then end by their own export timeout, which is that
// same FlushTimeout. A goroutine that does not end by then is a leak.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := settled(FlushTimeout + time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// settled asks goleak until no unexpected goroutine is left or d has passed.
func settled(d time.Duration) error {
	end := time.Now().Add(d)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(end) {
			return err
		}
	}
}
