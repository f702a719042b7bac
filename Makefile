# The two commands of the README: `make run` and `make test`.
.PHONY: run test setup

# Sets up the machine, then runs every built-in scenario on local processes.
run: setup
	go run ./cmd/run -scenario all

# Sets up the machine, then runs every test (real Redis, no mocks).
test: setup
	go vet ./...
	go test -count=1 ./...

setup:
	./scripts/setup.sh
