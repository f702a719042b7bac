package docker

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// RemoveLeftovers removes the containers, volumes and networks of runs on
// this machine whose harness process is gone: a harness killed with
// SIGKILL cannot remove its own. A live run's, or another machine's (the
// same engine through DOCKER_HOST), are left alone. It returns one line per
// dead run it cleaned up.
func RemoveLeftovers(pool *dockertest.Pool) ([]string, error) {
	host, _ := os.Hostname()
	mine := map[string][]string{"label": {LabelHost + "=" + host}}
	dead := map[string]bool{}
	isDead := func(labels map[string]string) bool {
		run := labels[LabelRun]
		if d, ok := dead[run]; ok {
			return d
		}
		pid, err := strconv.Atoi(labels[LabelPID])
		d := err == nil && pid > 0 && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
		dead[run] = d
		return d
	}
	count := map[string]*[3]int{}
	tally := func(run string, i int) {
		if count[run] == nil {
			count[run] = &[3]int{}
		}
		count[run][i]++
	}
	var errs []error
	containers, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: mine})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	for _, c := range containers {
		if isDead(c.Labels) {
			if err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true}); err != nil {
				errs = append(errs, err)
				continue
			}
			tally(c.Labels[LabelRun], 0)
		}
	}
	volumes, err := pool.Client.ListVolumes(dc.ListVolumesOptions{Filters: mine})
	if err != nil {
		return nil, fmt.Errorf("docker: list volumes: %w", err)
	}
	for _, v := range volumes {
		if isDead(v.Labels) {
			if err := pool.Client.RemoveVolumeWithOptions(dc.RemoveVolumeOptions{Name: v.Name}); err != nil {
				errs = append(errs, err)
				continue
			}
			tally(v.Labels[LabelRun], 1)
		}
	}
	networks, err := pool.Client.FilteredListNetworks(dc.NetworkFilterOpts{"label": {LabelHost + "=" + host: true}})
	if err != nil {
		return nil, fmt.Errorf("docker: list networks: %w", err)
	}
	for _, n := range networks {
		if isDead(n.Labels) {
			if err := pool.Client.RemoveNetwork(n.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			tally(n.Labels[LabelRun], 2)
		}
	}
	var out []string
	for run, c := range count {
		out = append(out, fmt.Sprintf("run %s: %d container(s), %d volume(s), %d network(s)", run, c[0], c[1], c[2]))
	}
	sort.Strings(out)
	return out, errors.Join(errs...)
}
