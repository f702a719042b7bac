package docker

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

//go:embed agent.sh
var agentScript string

// agent is the harness's end of a container's agent (agent.sh): commands
// go to its stdin and replies come from its stdout, over one attached
// stream that lives as long as the container.
type agent struct {
	mu      sync.Mutex
	in      io.WriteCloser
	replies chan string
	// lost is set once a reply went missing: a late one would answer the
	// next command.
	lost error
}

// attach connects to a created container's stdin and stdout; it must
// happen before the container starts, so no reply is missed.
func attach(pool *dockertest.Pool, id string) (*agent, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	success := make(chan struct{})
	_, err := pool.Client.AttachToContainerNonBlocking(dc.AttachToContainerOptions{Container: id,
		InputStream: inR, OutputStream: outW, ErrorStream: io.Discard,
		Stdin: true, Stdout: true, Stderr: true, Stream: true, Success: success})
	if err != nil {
		return nil, err
	}
	select {
	case <-success:
		success <- struct{}{}
	case <-time.After(10 * time.Second):
		return nil, errors.New("no attach within 10s")
	}
	a := &agent{in: inW, replies: make(chan string)}
	go func() {
		defer close(a.replies)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			a.replies <- sc.Text()
		}
	}()
	return a, nil
}

// do sends one command and waits for its reply: the output after "ok", or
// an error with the output after "fail".
func (a *agent) do(cmd string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lost != nil {
		return "", a.lost
	}
	if _, err := io.WriteString(a.in, cmd+"\n"); err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	select {
	case r, ok := <-a.replies:
		if !ok {
			return "", errors.New("agent: the container is gone")
		}
		if out, ok := strings.CutPrefix(r, "ok"); ok {
			return strings.TrimSpace(out), nil
		}
		return "", fmt.Errorf("agent: %q: %s", cmd, strings.TrimSpace(strings.TrimPrefix(r, "fail")))
	case <-time.After(15 * time.Second):
		a.lost = fmt.Errorf("agent: no reply to %q within 15s", cmd)
		return "", a.lost
	}
}
