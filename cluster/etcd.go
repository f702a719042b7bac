package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EtcdKind is a member of a three-member etcd cluster (Debian's
// etcd-server 3.4). Its WAL is fsynced before an entry commits, so a power
// loss loses nothing answered and is a plain kill. Heartbeats every 50 ms
// and a 500 ms election timeout: a lost leader is replaced well within a
// second on loopback, and a member starved for a tenth of a second does
// not call an election.
//
// Its library pairs (python-etcd3's and tooz's Python workers) take a
// core, not the machine: measured beside two busy loops, none ran late
// (docs/ci-and-benchmarks.md). So Alone is unset.
var EtcdKind = &Kind{
	Name:        "etcd",
	Binary:      "etcd",
	Install:     "install it (apt-get install etcd-server) or name its path in Options.Binaries",
	Persistence: []Persistence{AOFAlways},
	Ensemble:    true,
	PeerPorts:   1,
	// Measured: 0.4 to 0.9 s from the process's start to a healthy member
	// with a leader, idle.
	Recovery: time.Second,
	// The leader's lessor looks for expired leases every 500 ms
	// (lessor.runLoop) and then commits their revoke on a quorum, so a
	// lease ends up to half a second and a commit past its TTL (which
	// etcd counts from the grant's apply, after the client sent it).
	ExpiryLag: 500 * time.Millisecond,
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		if len(at.PeerPorts) != 1 || len(at.Members) == 0 {
			return nil, fmt.Errorf("cluster: an etcd member needs its peer port and its ensemble")
		}
		peer := func(p Place) string { return fmt.Sprintf("http://%s:%d", p.Bind, p.PeerPorts[0]) }
		client := fmt.Sprintf("http://%s:%d", at.Bind, at.Port)
		var initial, token []string
		for _, m := range at.Members {
			initial = append(initial, fmt.Sprintf("m%d=%s", m.ID, peer(m)))
			token = append(token, strconv.Itoa(m.Port))
		}
		return append([]string{
			"--name", fmt.Sprintf("m%d", at.ID),
			"--data-dir", filepath.Join(at.Dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer(at), "--initial-advertise-peer-urls", peer(at),
			"--initial-cluster", strings.Join(initial, ","),
			// A restart finds its member in the data dir and ignores
			// these; the token keeps two runs' ensembles apart.
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "locktorture-" + strings.Join(token, "-"),
			"--heartbeat-interval", "50", "--election-timeout", "500",
			"--logger", "zap", "--log-outputs", filepath.Join(at.Dir, "etcd.log"),
		}, spec.Args...), nil
	},
	Ready:        etcdReady,
	Role:         etcdRole,
	Reset:        etcdReset,
	Log:          "etcd.log",
	StartTimeout: 15 * time.Second,
}

var etcdHTTP = &http.Client{Timeout: 300 * time.Millisecond}

// etcdAdmin is the harness's client for a reset's writes, which a busy
// machine may take longer than a health check to answer.
var etcdAdmin = &http.Client{Timeout: 2 * time.Second}

// etcdReady asks the member's /health, which is true only with a leader
// elected. etcd tells no pid: 0 has the backend check the listening
// socket is our own process's.
func etcdReady(ctx context.Context, addr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := etcdHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, err
	}
	if h.Health != "true" {
		return 0, fmt.Errorf("etcd member not healthy (no leader yet?)")
	}
	return 0, nil
}

// etcdRole compares the member's own id with the leader's in its status.
func etcdRole(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v3/maintenance/status", bytes.NewReader([]byte("{}")))
	if err != nil {
		return "", err
	}
	resp, err := etcdHTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", err
	}
	switch {
	case st.Leader == "" || st.Leader == "0":
		return "", fmt.Errorf("etcd member knows no leader")
	case st.Leader == st.Header.MemberID:
		return "leader", nil
	}
	return "follower", nil
}

// etcdReset revokes every lease (which deletes the keys attached to it)
// and deletes every key, through the member on addr's JSON gateway, and
// checks that a linearizable count then finds no key. The revision goes
// on counting: a token read from it (etcd-fenced's) is larger than a
// fresh server's, and ordered as it would be.
func etcdReset(ctx context.Context, addr string) error {
	var leases struct {
		Leases []struct {
			ID string `json:"ID"`
		} `json:"leases"`
	}
	if err := etcdPost(ctx, addr, "/v3/lease/leases", `{}`, &leases); err != nil {
		return err
	}
	for _, l := range leases.Leases {
		// A member behind its leader may list a lease another member's
		// reset has revoked already.
		err := etcdPost(ctx, addr, "/v3/lease/revoke", fmt.Sprintf(`{"ID":%q}`, l.ID), nil)
		if err != nil && !strings.Contains(err.Error(), "lease not found") {
			return err
		}
	}
	if err := etcdPost(ctx, addr, "/v3/kv/deleterange", "{"+etcdEveryKey+"}", nil); err != nil {
		return err
	}
	var count struct {
		Count string `json:"count"`
	}
	if err := etcdPost(ctx, addr, "/v3/kv/range", "{"+etcdEveryKey+`,"count_only":true}`, &count); err != nil {
		return err
	}
	if count.Count != "" && count.Count != "0" {
		return fmt.Errorf("%s keys left", count.Count)
	}
	return nil
}

// etcdEveryKey is the gateway's range of every key: key and range end
// "\x00", base64.
const etcdEveryKey = `"key":"AA==","range_end":"AA=="`

// etcdPost posts body to the member's gateway path and decodes its
// answer into out (nil: none wanted); a status other than 200 is an
// error with the gateway's message.
func etcdPost(ctx context.Context, addr, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := etcdAdmin.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
