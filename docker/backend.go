// Package docker is the docker backend: every node of a run, and every
// sentinel, is a container with an address of its own on a network the run
// creates, built from a local image (no registry). Faults act on real
// containers and real packets: docker pause (the cgroup freezer) or
// SIGSTOP, kill -9 of redis-server and a restart on the same volume,
// iptables drops inside the containers, libfaketime inside the container.
// A container is a node's host and stays up: its server process is what
// dies and comes back, so peers get a reset, as from a local process, not
// the silence of a vanished machine. Clients
// still reach nodes through the cluster's toxiproxy links, which give each
// client its own road to cut or slow.
//
// Call Register to make "-backend docker" available; importing the
// package registers nothing.
//
// It runs Redis and Sentinel nodes; a node of another cluster.Kind is
// refused with an error that says so.
package docker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locktorture/locktorture/cluster"
)

// Name is the backend's name in cluster.Options.Backend and -backend.
const Name = "docker"

var registerOnce sync.Once

// Register makes the backend available to cluster.New by Name. A program
// that offers -backend docker calls it before reading its flags (their
// usage lists cluster.Backends); a test that uses the backend calls it
// first. Importing the package registers nothing, so a program opts in
// where the reader can see it. It may be called more than once.
func Register() { registerOnce.Do(func() { cluster.RegisterBackend(Name, New) }) }

// Labels on everything a run makes: containers, volumes, the network. The
// host and pid let a later run on the same machine tell a dead run's
// leftovers from a live run's (RemoveLeftovers).
const (
	LabelRun  = "locktorture.run"
	LabelHost = "locktorture.host"
	LabelPID  = "locktorture.pid"
)

// Ports every node listens on, each at its own address.
const (
	redisPort    = 6379
	sentinelPort = 26379
)

// Pool connects to the Docker engine ($DOCKER_HOST, else the local socket)
// and checks that it answers.
func Pool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, fmt.Errorf("docker: no Docker engine answers (%v): start one, or set DOCKER_HOST", err)
	}
	return pool, nil
}

// EnvPublish names the host where a run's nodes are reached through ports
// the engine publishes, for engines whose container networks do not route
// to the harness (Docker Desktop: 127.0.0.1). Unset, a DOCKER_HOST of
// tcp:// to another machine publishes on that machine; a local engine
// publishes nothing, and the harness reaches each node at its address on
// the run's network.
const EnvPublish = "LOCKTORTURE_DOCKER_PUBLISH"

// publishHost is where the nodes' ports are published, or "" when the
// harness reaches the run's network itself.
func publishHost(pool *dockertest.Pool) string {
	if h := os.Getenv(EnvPublish); h != "" {
		return h
	}
	u, err := url.Parse(pool.Client.Endpoint())
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	if h := u.Hostname(); !loopback(h) {
		return h
	}
	return ""
}

// loopback reports whether host names this machine's loopback.
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

var (
	sweepOnce sync.Once
	imageMu   sync.Mutex
	imageName string
)

// New connects to the engine, removes a dead run's leftovers (once per
// process), makes sure the node image exists (building it if not), and
// creates the run's network.
func New(o cluster.Options) (cluster.Backend, error) {
	pool, err := Pool()
	if err != nil {
		return nil, err
	}
	logf := o.Logf
	if logf == nil {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	sweepOnce.Do(func() {
		gone, err := RemoveLeftovers(pool)
		for _, g := range gone {
			logf("docker: removed a dead run's leftovers: %s", g)
		}
		if err != nil {
			logf("docker: looking for a dead run's leftovers: %v", err)
		}
	})
	image, err := nodeImage(pool, ImageOptions{FaketimeServer: o.FaketimeServer, Logf: logf})
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	var id [4]byte
	_, _ = rand.Read(id[:])
	b := &backend{pool: pool, image: image, pauseBySignal: o.PauseBySignal, publish: publishHost(pool),
		run:    fmt.Sprintf("%d-%x", os.Getpid(), id),
		labels: map[string]string{LabelHost: host, LabelPID: strconv.Itoa(os.Getpid())}}
	b.labels[LabelRun] = b.run
	if err := b.createNetwork(); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// nodeImage is Image, remembered for the process once it succeeds.
func nodeImage(pool *dockertest.Pool, o ImageOptions) (string, error) {
	imageMu.Lock()
	defer imageMu.Unlock()
	if imageName != "" {
		return imageName, nil
	}
	name, err := Image(context.Background(), pool, o)
	if err == nil {
		imageName = name
	}
	return name, err
}

// backend is one cluster's containers, volumes and network.
type backend struct {
	pool          *dockertest.Pool
	image         string
	run           string
	labels        map[string]string
	pauseBySignal bool
	// publish is where the engine publishes the nodes' ports (publishHost).
	publish string

	mu      sync.Mutex
	network string
	subnet  *net.IPNet
	hosts   int
	servers []*container
	volumes []string
}

// createNetwork makes the run's network. It is internal (no way out of the
// machine) unless ports are published, which an internal network cannot
// do; its subnet is stated explicitly so that each container
// keeps its address across a restart, as a host would: the engine picks a
// free subnet for a first network, which is then made again with that
// subnet written down.
func (b *backend) createNetwork() error {
	name := "locktorture-" + b.run
	for attempt := 0; ; attempt++ {
		internal := b.publish == ""
		probe, err := b.pool.Client.CreateNetwork(dc.CreateNetworkOptions{Name: name, Driver: "bridge", Internal: internal, Labels: b.labels})
		if err != nil {
			return fmt.Errorf("docker: create network: %w", err)
		}
		var subnet string
		if info, err := b.pool.Client.NetworkInfo(probe.ID); err == nil && len(info.IPAM.Config) > 0 {
			subnet = info.IPAM.Config[0].Subnet
		}
		if err := b.pool.Client.RemoveNetwork(probe.ID); err != nil {
			return fmt.Errorf("docker: create network: %w", err)
		}
		_, ipnet, err := net.ParseCIDR(subnet)
		if err != nil {
			return fmt.Errorf("docker: the engine gave network %s the subnet %q: %v", name, subnet, err)
		}
		nw, err := b.pool.Client.CreateNetwork(dc.CreateNetworkOptions{Name: name, Driver: "bridge", Internal: internal, Labels: b.labels,
			IPAM: &dc.IPAMOptions{Driver: "default", Config: []dc.IPAMConfig{{Subnet: subnet}}}})
		if err != nil && attempt < 5 && strings.Contains(err.Error(), "overlaps") {
			continue // another run took the subnet in between
		}
		if err != nil {
			return fmt.Errorf("docker: create network: %w", err)
		}
		b.mu.Lock()
		b.network, b.subnet = nw.ID, ipnet
		b.mu.Unlock()
		return nil
	}
}

// nextIP hands out the subnet's addresses from .2 (.1 is the gateway, the
// harness's side).
func (b *backend) nextIP() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hosts++
	ip := make(net.IP, len(b.subnet.IP.To4()))
	copy(ip, b.subnet.IP.To4())
	n := b.hosts + 1
	ip[3] += byte(n)
	if n > 250 || !b.subnet.Contains(ip) {
		return "", errors.New("docker: the run's subnet is full")
	}
	return ip.String(), nil
}

// Start creates the server's volume and container and starts it. The node
// image holds Redis only, so another kind is refused before anything is
// made.
func (b *backend) Start(ctx context.Context, spec cluster.ServerSpec) (cluster.Server, error) {
	kind := spec.ServerKind()
	if kind != cluster.RedisKind && kind != cluster.SentinelKind {
		return nil, fmt.Errorf("docker: node %s is a %s node, and the docker backend runs only %s and %s nodes (its image holds Redis): run it on the %s backend",
			spec.Name, kind.Name, cluster.RedisKind.Name, cluster.SentinelKind.Name, cluster.Local)
	}
	ip, err := b.nextIP()
	if err != nil {
		return nil, err
	}
	name := "locktorture-" + b.run + "-" + spec.Name
	volume, err := b.createVolume(ctx, spec, name)
	if err != nil {
		return nil, err
	}
	port, script := serverCommand(spec, ip)
	exposed := dc.Port(fmt.Sprintf("%d/tcp", port))
	id, err := b.createContainer(ctx, spec, name, volume, ip, script, exposed)
	if err != nil {
		return nil, err
	}
	c := &container{b: b, spec: spec, id: id, addr: net.JoinHostPort(ip, strconv.Itoa(port))}
	c.reach = c.addr
	b.mu.Lock()
	b.servers = append(b.servers, c)
	b.mu.Unlock()
	if c.agent, err = attach(b.pool, c.id); err != nil {
		return nil, fmt.Errorf("docker: attach to %s: %w", spec.Name, err)
	}
	if err := b.pool.Client.StartContainerWithContext(c.id, nil, ctx); err != nil {
		return nil, fmt.Errorf("docker: start %s: %w", spec.Name, err)
	}
	if b.publish != "" {
		reach, err := b.published(ctx, c, exposed)
		if err != nil {
			return nil, err
		}
		c.reach = reach
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// createVolume makes the volume of the server's data, named name, and
// keeps it for Close.
func (b *backend) createVolume(ctx context.Context, spec cluster.ServerSpec, name string) (string, error) {
	vol, err := b.pool.Client.CreateVolume(dc.CreateVolumeOptions{Name: name, Labels: b.labels, Context: ctx})
	if err != nil {
		return "", fmt.Errorf("docker: volume for %s: %w", spec.Name, err)
	}
	b.mu.Lock()
	b.volumes = append(b.volumes, vol.Name)
	b.mu.Unlock()
	return vol.Name, nil
}

// serverCommand is the port the server listens on at ip and the script
// that runs it: redis-server, or redis-sentinel for a sentinel.
func serverCommand(spec cluster.ServerSpec, ip string) (int, string) {
	port, script := redisPort, nodeScript(spec, ip)
	if spec.ServerKind() == cluster.SentinelKind {
		port = sentinelPort
		// The config file is written on the first start only: sentinel
		// rewrites it with what it learns, and a restart keeps that.
		script = fmt.Sprintf(`[ -e /data/sentinel.conf ] || cat > /data/sentinel.conf <<'EOF'
%sEOF
exec redis-sentinel /data/sentinel.conf`, spec.Sentinel.File(ip, port, "/data"))
	}
	return port, script
}

// portBindings publishes the exposed port on the engine's host, when the
// harness reaches the nodes there (none otherwise).
func (b *backend) portBindings(exposed dc.Port) map[dc.Port][]dc.PortBinding {
	if b.publish == "" {
		return nil
	}
	// On a loopback host (Docker Desktop) the port stays there; on
	// another machine it must be open to the harness's.
	hostIP := ""
	if loopback(b.publish) {
		hostIP = "127.0.0.1"
	}
	return map[dc.Port][]dc.PortBinding{exposed: {{HostIP: hostIP}}}
}

// createContainer makes the server's container, named name, at ip on the
// run's network with volume as its /data, and returns its id.
func (b *backend) createContainer(ctx context.Context, spec cluster.ServerSpec, name, volume, ip, script string, exposed dc.Port) (string, error) {
	created, err := b.pool.Client.CreateContainer(dc.CreateContainerOptions{
		Name: name,
		Config: &dc.Config{Image: b.image, Hostname: spec.Name, Labels: b.labels,
			Env: []string{"SERVER=" + script},
			// The agent is the host's own life; the server runs under it.
			Cmd:          []string{"sh", "-c", agentScript},
			ExposedPorts: map[dc.Port]struct{}{exposed: {}},
			OpenStdin:    true, AttachStdin: true, AttachStdout: true},
		HostConfig: &dc.HostConfig{
			// iptables inside the node's own namespace.
			CapAdd:       []string{"NET_ADMIN"},
			Binds:        []string{volume + ":/data"},
			NetworkMode:  b.network,
			PortBindings: b.portBindings(exposed),
		},
		NetworkingConfig: &dc.NetworkingConfig{EndpointsConfig: map[string]*dc.EndpointConfig{
			b.network: {IPAMConfig: &dc.EndpointIPAMConfig{IPv4Address: ip}}}},
		Context: ctx,
	})
	if err != nil {
		return "", fmt.Errorf("docker: create %s: %w", spec.Name, err)
	}
	return created.ID, nil
}

// published is where the harness reaches c's exposed port on the engine's
// host. The engine picks the published port when the container starts,
// and keeps it while the container lives (a server's restart is inside
// it).
func (b *backend) published(ctx context.Context, c *container, exposed dc.Port) (string, error) {
	info, err := b.pool.Client.InspectContainerWithContext(c.id, ctx)
	if err != nil {
		return "", fmt.Errorf("docker: inspect %s: %w", c.spec.Name, err)
	}
	pb := info.NetworkSettings.Ports[exposed]
	if len(pb) == 0 {
		return "", fmt.Errorf("docker: %s: the engine published no port for %s", c.spec.Name, exposed)
	}
	return net.JoinHostPort(b.publish, pb[0].HostPort), nil
}

// nodeScript is a data node's command: redis-server on the container's
// address with its files in the volume, under libfaketime when the spec
// asks for a faked clock (whose offset file, like the data, survives a
// restart).
func nodeScript(spec cluster.ServerSpec, ip string) string {
	args := spec.RedisArgs(ip, redisPort, "/data")
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	if !spec.Clock {
		return "exec redis-server " + strings.Join(quoted, " ")
	}
	env := strings.Join(cluster.FaketimeEnv("$(echo /usr/lib/*/faketime/libfaketime.so.1)"), " ")
	return `[ -e /data/faketime ] || echo +0.000s > /data/faketime; exec env ` + env +
		` FAKETIME_TIMESTAMP_FILE=/data/faketime redis-server-libc ` + strings.Join(quoted, " ")
}

// Drop cuts or heals the packets from one container to another with
// iptables in the receiver. The rules live in the container's namespace,
// which outlives a server's kill and restart, as a partition outlives a
// process.
func (b *backend) Drop(from, to cluster.Server, on bool) error {
	cf, okf := from.(*container)
	ct, okt := to.(*container)
	if !okf || !okt {
		return errors.New("docker: Drop needs two of this backend's servers")
	}
	return ct.refuse(cf, on)
}

// Close removes every container, volume and the network, on a context of
// its own: it runs after a cancelled run too.
func (b *backend) Close() error {
	b.mu.Lock()
	servers, volumes, network := b.servers, b.volumes, b.network
	b.servers, b.volumes, b.network = nil, nil, ""
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, c := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.id, Force: true, RemoveVolumes: true, Context: ctx})
			var gone *dc.NoSuchContainer
			if err != nil && !errors.As(err, &gone) {
				errs[i] = fmt.Errorf("docker: remove %s: %w", c.spec.Name, err)
			}
		}()
	}
	wg.Wait()
	for _, v := range volumes {
		if err := b.pool.Client.RemoveVolumeWithOptions(dc.RemoveVolumeOptions{Name: v, Context: ctx}); err != nil && !errors.Is(err, dc.ErrNoSuchVolume) {
			errs = append(errs, fmt.Errorf("docker: remove volume %s: %w", v, err))
		}
	}
	if network != "" {
		if err := b.pool.Client.RemoveNetwork(network); err != nil {
			errs = append(errs, fmt.Errorf("docker: remove network: %w", err))
		}
	}
	return errors.Join(errs...)
}

// container is one node as a container.
type container struct {
	b    *backend
	spec cluster.ServerSpec
	id   string
	// addr is the server's address on the run's network, where other
	// servers reach it; reach is where the harness does: addr, or a port
	// published on the engine's host.
	addr, reach string
	agent       *agent

	mu     sync.Mutex
	paused bool
	// cut are the peers c drops packets from.
	cut map[*container]bool
}

func (c *container) Addr() string     { return c.reach }
func (c *container) PeerAddr() string { return c.addr }

func (c *container) ip() string { h, _, _ := net.SplitHostPort(c.addr); return h }

func (c *container) Info() cluster.NodeInfo {
	kind := c.spec.ServerKind()
	return cluster.NodeInfo{Name: c.spec.Name, Backend: Name, Kind: kind.Name, Addr: c.reach, Container: c.id[:12], Dir: "/data",
		Persistence: c.spec.Persistence, Server: c.b.image, Sentinel: kind == cluster.SentinelKind}
}

// Start starts the server in its container (again: same address, same
// volume) and waits until it answers with its data loaded.
func (c *container) Start(ctx context.Context) error {
	if _, err := c.agent.do("start"); err != nil {
		return fmt.Errorf("docker: start the server in %s: %w", c.spec.Name, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := c.spec.ServerKind().Ready(ctx, c.reach)
		if err == nil {
			return nil
		}
		if _, gone := c.agent.do("alive"); gone != nil {
			return fmt.Errorf("docker: %s exited during start%s", c.spec.Name, c.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("docker: %s did not answer within 15s: %v%s", c.spec.Name, err, c.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *container) logTail() string {
	log := "/data/" + c.spec.ServerKind().Log
	if out, _ := c.agent.do("sh tail -n 1 " + log); out != "" {
		return ": " + out
	}
	return ""
}

// Kill is kill -9 of the server (a frozen container is thawed first, so
// the signal lands at once); the container, its address and its volume
// stay.
func (c *container) Kill() error { return c.end("KILL", "kill") }

// PowerLoss is not offered: losing the last second of an everysec AOF
// needs the file's size history, which the local backend samples on its
// own disk; a container's volume may be on another machine.
func (c *container) PowerLoss() error {
	return fmt.Errorf("docker: power loss on %s: only the local backend can cut an AOF back to its last fsync; use kill -9 (Kill)", c.spec.Name)
}

// Stop is SIGTERM to the server, then SIGKILL after 5 s (the agent's).
func (c *container) Stop() error { return c.end("TERM", "stop") }

// end thaws the container, sends the server sig and waits until the agent
// has reaped it.
func (c *container) end(sig, what string) error {
	if err := c.thaw(); err != nil {
		return err
	}
	if _, err := c.agent.do("kill " + sig); err != nil {
		return fmt.Errorf("docker: %s %s: %w", what, c.spec.Name, err)
	}
	return nil
}

// Pause is docker pause, the cgroup freezer, or SIGSTOP to redis-server
// when the cluster asked for a signal (cluster.Options.PauseBySignal).
func (c *container) Pause() error { return c.freeze(true) }

// Resume is docker unpause, or SIGCONT.
func (c *container) Resume() error { return c.freeze(false) }

func (c *container) freeze(on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	switch {
	case c.b.pauseBySignal:
		_, err = c.agent.do("signal " + map[bool]string{true: "STOP", false: "CONT"}[on])
	case on:
		err = c.b.pool.Client.PauseContainer(c.id)
	default:
		err = c.b.pool.Client.UnpauseContainer(c.id)
	}
	if err != nil {
		return fmt.Errorf("docker: %s %s: %w", map[bool]string{true: "pause", false: "resume"}[on], c.spec.Name, err)
	}
	c.paused = on
	return nil
}

func (c *container) Paused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

func (c *container) thaw() error {
	if c.Paused() {
		return c.Resume()
	}
	return nil
}

// SetClockOffset rewrites libfaketime's offset file inside the container,
// by rename so redis-server never reads half of it.
func (c *container) SetClockOffset(d time.Duration) error {
	_, err := c.agent.do(fmt.Sprintf("sh echo %s > /data/faketime.tmp && mv /data/faketime.tmp /data/faketime", cluster.FaketimeOffset(d)))
	return err
}

// refuse adds (or removes) the iptables rule in c that drops every packet
// from peer. A cut already in place is not doubled, and a heal of what is
// not cut does nothing.
func (c *container) refuse(peer *container, on bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[peer] == on {
		return nil
	}
	op := map[bool]string{true: "-A", false: "-D"}[on]
	if _, err := c.agent.do(fmt.Sprintf("sh iptables -w %s locktorture -s %s -j DROP", op, peer.ip())); err != nil {
		return err
	}
	if c.cut == nil {
		c.cut = map[*container]bool{}
	}
	c.cut[peer] = on
	return nil
}
