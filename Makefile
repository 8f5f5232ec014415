GO ?= go

.PHONY: redis test lint vet fmt-check

# Make sure redis-server is available (installs it with apt-get if possible).
redis:
	bash scripts/ensure-redis.sh

test: redis lint
	$(GO) test -race -count=1 -timeout 9m ./...

lint: vet fmt-check

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
