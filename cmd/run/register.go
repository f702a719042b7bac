package main

import (
	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/docker"
	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/locks/services"
)

// register puts in the registries what this command offers beyond the
// packages' own built-ins (the installed libraries' locks, the lock
// services' locks, the docker backend) and quiets go-redis's own log, which would bury the summary
// under failed dials during a partition. It runs first in main (a worker
// started for a library's lock must find it) and in the tests' TestMain.
func register() {
	cluster.QuietRedisLog()
	library.Register()
	services.Register()
	docker.Register()
}
