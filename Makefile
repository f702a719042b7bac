# The two commands of the README: `make run` and `make test`.
.PHONY: run test setup

# Sets up the machine, then runs every built-in scenario against every lock
# it has an expectation for, on local processes.
run: setup
	go run ./cmd/run -scenario all

# Sets up the machine, then runs every test (real Redis, no mocks) and the
# whole scenario matrix as a regression suite: exit 1 if any story did not
# reproduce as expected.
test: setup
	go vet ./...
	go test -count=1 ./...
	go run ./cmd/run -scenario all -out results

setup:
	./scripts/setup.sh
