package main

import (
	"context"
	"io"
	"os"
	"os/signal"

	"github.com/seed543a70bd/redlock/chaos"
)

// cmdChaos implements `redlock-lab chaos`: the chaos suite of package
// chaos (see chaos.Command for its flags and docs/chaos.md). Bad flags
// exit with exitUsage, as for every other command; chaos.Command returns
// the same code. An interrupt (Ctrl-C) ends the run after the scenario in
// progress is cut short: its nodes are killed, and the summary, JSON and
// report cover the scenarios run so far (exit 1).
func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	return chaos.Command(ctx, args, stdout, stderr)
}
