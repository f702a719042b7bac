# The two commands of the README: `make run` and `make test`.
.PHONY: run test setup lint vet staticcheck unit matrix docker-matrix

# Sets up the machine, then runs every built-in scenario against every lock
# it has an expectation for, on local processes.
run: setup
	go run ./cmd/run -scenario all

# Sets up the machine, then runs every test (real Redis, no mocks) and the
# whole scenario matrix as a regression suite: exit 1 if any story did not
# reproduce as expected.
#
# Three steps. First setup alone: it compiles the node image's tool (most
# of the module's dependencies) while apt downloads, then the matrix's
# command and the libc-allocator redis-server while mmdebstrap makes the
# image's base. Beside it, go vet only compiled the same dependencies a
# second time.
# Then the unit tests, the matrix and lint side by side: the tests and the
# matrix mostly wait on their stories' clocks, leaving a core's worth for
# vet and staticcheck, one after the other, and the machine-wide room
# (scenario/room.go) gives each story a core and a timing-sensitive one the
# machine. Each job's output is printed whole when it ends. Last, where a
# Docker engine answers, a subset of the stories runs on containers
# (docker-matrix). Not beside the rest: with the tests and staticcheck
# compiling on the cores the seats do not count, a RedLock node's restart
# in a container took 356 ms of a 500 ms lease and the RedLock stories lost
# their promise-broken.
test:
	$(MAKE) --no-print-directory setup
	$(MAKE) --no-print-directory -j3 --output-sync=target unit matrix lint
	$(MAKE) --no-print-directory docker-matrix

unit:
	go test -count=1 ./...
	cd examples/joblock && go test -count=1 ./...

matrix:
	go run ./cmd/run -scenario all -out results

# The docker backend on the stories that need a node's fault most (a frozen
# holder, a failover, a RedLock node's clock and its crash), for the
# reference locks and one installed library: six pairs, the fewest that
# cover every kind of node fault, because from nothing make test has a
# 10-minute budget. The Sentinel failover on containers is among the unit
# tests; the whole matrix on containers is in the README.
docker-matrix:
	@if docker info >/dev/null 2>&1; then \
		go run ./cmd/run -backend docker -scenario paused-holder,failover -lock set-nx-px,redsync -out results/docker && \
		go run ./cmd/run -backend docker -scenario redlock-clock-jump,redlock-crash-restart -lock redlock -out results/docker-redlock; \
	else echo "docker-matrix: skipped: no Docker engine answers (docker info)"; fi

setup:
	./scripts/setup.sh

# gofmt, go vet, a pinned staticcheck, and go.mod/go.sum as go mod tidy
# leaves them, for the module and for the example module under examples/
# (a module of its own, as a user's would be): each fails the build with
# what it found. One after the other: in make test they share the core the
# stories leave.
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
