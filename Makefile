# The two commands of the README: `make run` and `make test`.
.PHONY: run test setup tools build lint vet staticcheck unit matrix docker-matrix

# Every go command builds with -trimpath. Without it a package's compile
# names the directory it sits in, and Go's build cache keys it by that
# directory: a fresh clone (CI's, a second checkout) compiles the whole
# module again however warm the cache. With it, a clone is served every
# package whose sources were compiled before, wherever that was. Nothing
# here reads its own source paths at run time (the workers' scripts are
# embedded).
ifeq ($(filter -trimpath,$(GOFLAGS)),)
export GOFLAGS += -trimpath
endif

# Sets up the machine, then runs every built-in scenario against every lock
# it has an expectation for, on local processes.
run: setup
	go run ./cmd/run -scenario all

# Sets up the machine, then runs every test (real Redis, no mocks) and the
# whole scenario matrix as a regression suite: exit 1 if any story did not
# reproduce as expected.
#
# Nothing compiles beside a story whose verdict rests on timing: a cold
# compile takes cores the machine-wide room (engine/room.go) does not
# count, and can stretch a node's restart to most of a lease. So the steps
# run in this order:
# - setup: apt, the node image's tool, the matrix's command and the
#   libc-allocator redis-server; beside it the lint tool compiles (tools),
#   whose dependencies are not the module's, while setup waits on apt and
#   the mirror;
# - build: every test binary of both modules, linked into .testbin, so the
#   tests later only run them;
# - lint: gofmt, vet and staticcheck, whose analysis is itself a compile's
#   worth of CPU;
# - the unit tests and the matrix side by side: they only run stories and
#   checkers now, and the room gives each story its seats and a timing-
#   sensitive one the machine; once the matrix is done, the unit tests
#   take its share of the cores. Each job's output is printed whole when
#   it ends;
# - where a Docker engine answers, a subset of the stories on containers
#   (docker-matrix), alone: a container's restart is the slowest fault.
# Every run measures how late the harness itself ran and says starved,
# rather than judge, where it ran later than a fifth of a TTL.
#
# Each step says how long it took (scripts/step.sh).
test:
	@./scripts/step.sh "setup and tools" $(MAKE) --no-print-directory -j2 --output-sync=target setup tools
	@./scripts/step.sh build $(MAKE) --no-print-directory build
	@./scripts/step.sh lint $(MAKE) --no-print-directory lint
	@rm -f .matrix-done
	@./scripts/step.sh "unit and matrix" $(MAKE) --no-print-directory -j2 --output-sync=target unit matrix MATRIX_DONE=.matrix-done
	@rm -f .matrix-done
	@./scripts/step.sh docker-matrix $(MAKE) --no-print-directory docker-matrix

# Compiles and links every test binary of both modules into .testbin
# (go test would link them again on every run) and the matrix's command
# into Go's build cache, so the steps after it compile and link nothing;
# a tree linked before, in any clone, links nothing: the binaries are kept
# in the harness's cache under a stamp of their sources (scripts/build.sh).
build:
	./scripts/build.sh

# Every test, from the binaries build linked (scripts/unit.sh prints go
# test's lines and a closing count). go test -count=1 ./... runs the same
# tests, linking as it goes.
unit:
	MATRIX_DONE=$(MATRIX_DONE) ./scripts/unit.sh

# Set by make test only: the file the matrix leaves when it ends, pass or
# fail, so that the unit lane beside it takes its cores (scripts/unit.sh).
MATRIX_DONE =

# Every story for every Redis lock written in Go (this repository's own,
# redsync, redislock) and for redis-py, then the lock services (ZooKeeper,
# etcd, PostgreSQL) in the story that tells them apart most, a paused
# holder, one lock for each way it ends: a session that lapses (zk), a
# fenced one (etcd-fenced), a lease (pg-lease), a session that holds
# (pg-advisory, mysql-get-lock); and MySQL's lock table beside its row lock
# in killed-holder, the article's drawback (a dead holder's row stays: a
# deadlock) against a lock that ends with its connection. The services'
# whole matrix costs as much again as the Redis one and is make run's, not
# this budget's: the other service locks (memcached-add's 4 s lease makes
# its run 28 s), a leader killed under a holder, and the ensembles' own
# tests (locks/services).
# Then one story for each installed library beyond those, the one that
# tells it apart: Curator in ensemble-restart, where it alone lets two in
# (curator#1121); kazoo's listener in isolated-holder, where the care its
# docs ask for keeps the store safe; the Python and PHP libraries on Redis
# in paused-holder, where each one's lease decides; and php-lock's RedLock
# in redlock-paused-replies, its finding. portalocker, which lets two in
# with no fault now and then, has no story; its finding is a scenario file
# (docs/scenarios/subscribe-race.json).
# Their other stories, with worker processes in every client, are make
# run's: they would double this matrix's time.
# Every pair after the Redis matrix runs in one matrix (-pairs), so that
# its pairs share the seats and each kind's servers are kept for its next
# pair, where one small matrix after another started its own and waited
# out its own tail.
BEYOND_REDIS = all/redis-py, \
	paused-holder/zk, paused-holder/etcd-fenced, paused-holder/pg-lease, \
	paused-holder/pg-advisory, paused-holder/mysql-get-lock, \
	killed-holder/mysql-row, killed-holder/mysql-for-update, \
	ensemble-restart/curator, isolated-holder/kazoo-listener, \
	paused-holder/tooz-redis, paused-holder/laravel, \
	paused-holder/php-lock-redis, paused-holder/php-lock-redlock, \
	paused-holder/symfony-redis, paused-holder/symfony-predis, \
	paused-holder/symfony-redlock3, paused-holder/symfony-redlock5, \
	redlock-paused-replies/php-lock-redlock
matrix:
	@trap 'set +x; [ -z "$(MATRIX_DONE)" ] || touch "$(MATRIX_DONE)"' EXIT; set -x; \
	go run ./cmd/run -scenario all -service redis -language Go -out results && \
	go run ./cmd/run -pairs '$(BEYOND_REDIS)' -out results/services-and-libraries

# The docker backend on the stories that need a node's fault most (a frozen
# holder, a failover, a RedLock node's clock and its crash), for the
# reference locks and one installed library: six pairs, the fewest that
# cover every kind of node fault, because from nothing make test has a
# 10-minute budget. The Sentinel failover on containers is among the unit
# tests; the whole matrix on containers is in docs/backends-and-workers.md.
docker-matrix:
	@if docker info >/dev/null 2>&1; then \
		go run ./cmd/run -backend docker -scenario paused-holder,failover -lock set-nx-px,redsync -out results/docker && \
		go run ./cmd/run -backend docker -scenario redlock-clock-jump,redlock-crash-restart -lock redlock -out results/docker-redlock; \
	else echo "docker-matrix: skipped: no Docker engine answers (docker info)"; fi

setup:
	./scripts/setup.sh

# Compiles staticcheck into Go's build cache (go run caches what it
# builds), so lint later only runs it.
tools:
	go run $(STATICCHECK) -version >/dev/null

# gofmt, go vet, a pinned staticcheck, and go.mod/go.sum as go mod tidy
# leaves them, for the module and for the example module under examples/
# (a module of its own, as a user's would be): each fails the build with
# what it found.
lint:
	$(MAKE) --no-print-directory vet
	$(MAKE) --no-print-directory staticcheck

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	go vet ./...
	cd examples/joblock && go vet ./...

STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck:
	go run $(STATICCHECK) ./...
	go mod tidy -diff
	cd examples/joblock && go run $(STATICCHECK) ./... && go mod tidy -diff
