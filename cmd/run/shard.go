package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// getenv is where -shard auto reads its index: the process's environment.
var getenv = os.Getenv

// parseShard reads "i/n" with 1 ≤ i ≤ n, or "auto" or "auto/n", whose
// index comes from the engine that started this copy: a Kubernetes
// Indexed Job's JOB_COMPLETION_INDEX (from 0), or a CI's parallel job's
// CI_NODE_INDEX (from 1, GitLab's), whose CI_NODE_TOTAL is n when the
// flag does not say it. The matrix is then spread by the engine users
// already run, with no coordinator of ours.
func parseShard(s string, getenv func(string) string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	if a == "auto" {
		var i int
		var err error
		switch {
		case getenv("JOB_COMPLETION_INDEX") != "":
			i, err = strconv.Atoi(getenv("JOB_COMPLETION_INDEX"))
			i++
		case getenv("CI_NODE_INDEX") != "":
			i, err = strconv.Atoi(getenv("CI_NODE_INDEX"))
			if !ok {
				b, ok = getenv("CI_NODE_TOTAL"), getenv("CI_NODE_TOTAL") != ""
			}
		default:
			return 0, 0, errors.New("no shard index in the environment: set JOB_COMPLETION_INDEX (a Kubernetes Indexed Job does) or CI_NODE_INDEX and CI_NODE_TOTAL (a CI's parallel job), or give i/n")
		}
		if err != nil {
			return 0, 0, fmt.Errorf("the shard index in the environment is not a number: %v", err)
		}
		if !ok {
			return 0, 0, errors.New("auto needs the shard count: auto/n (or CI_NODE_TOTAL beside CI_NODE_INDEX)")
		}
		a = strconv.Itoa(i)
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, errors.New("want i/n with 1 ≤ i ≤ n, e.g. 2/3, or auto[/n] with the index from the environment")
	}
	return i, n, nil
}
