package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
)

// maxLogBytes bounds one read of the events container's log: the last line
// is the end event, which carries the whole result. Status keeps 32 KiB of
// it, so a few MiB is plenty; a longer line fails to parse and the result
// stays the summary's cut one, marked as cut.
const maxLogBytes = 4 << 20

// LogReader reads the tail of a container's log. The real one goes through
// the API server (pods/log); tests use a fake, since envtest has no kubelet.
type LogReader interface {
	// TailLog returns at most limitBytes bytes of the last lines lines of
	// the container's log.
	TailLog(ctx context.Context, namespace, pod, container string, lines, limitBytes int64) ([]byte, error)
}

// ClientLogReader reads logs with client-go (`get` on `pods/log`).
type ClientLogReader struct {
	Client kubernetes.Interface
}

// TailLog implements LogReader.
func (r ClientLogReader) TailLog(ctx context.Context, namespace, pod, container string, lines, limitBytes int64) ([]byte, error) {
	req := r.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, LimitBytes: &limitBytes,
	})
	rc, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// The server honours limitBytes; the reader bounds it again so a
	// misbehaving server cannot make the controller hold more.
	return io.ReadAll(io.LimitReader(rc, limitBytes))
}

// readLogEnd reads the end event, the last line of the events container's
// log.
func readLogEnd(ctx context.Context, r LogReader, pod *corev1.Pod) (*events.End, error) {
	if r == nil {
		return nil, errors.New("no log reader configured")
	}
	b, err := r.TailLog(ctx, pod.Namespace, pod.Name, podcontract.EventsContainer, 1, maxLogBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the %s container's log: %w", podcontract.EventsContainer, err)
	}
	return parseLogEnd(b)
}

// parseLogEnd finds the end event in the tail of the event log.
func parseLogEnd(b []byte) (*events.End, error) {
	b = bytes.TrimRight(b, "\r\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) == 0 {
		return nil, errors.New("the event log is empty")
	}
	e, err := events.Decode(b)
	if err != nil {
		if len(b) >= maxLogBytes {
			return nil, fmt.Errorf("the end event is longer than the %d bytes read", maxLogBytes)
		}
		return nil, fmt.Errorf("the last line of the event log: %w", err)
	}
	end, ok := e.(*events.End)
	if !ok {
		return nil, errors.New("the event log does not end with an end event")
	}
	return end, nil
}
